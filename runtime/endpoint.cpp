// Endpoint addresses: the connection data peers exchange (out of band) to connect QPs.
#include <arpa/inet.h>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/base/status.h"
#include "runtime/base/byte_order.h"

using ibex::fail;
using ibex::get16;
using ibex::get24;
using ibex::get32;
using ibex::put16;
using ibex::put24;
using ibex::put32;

namespace {
constexpr uint8_t kWireVersion = 1;
const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
} // namespace

extern "C" {

// Layout: version(1) mtu(1) flags(1) reserved(1) gid(16) udp_port(2) reserved(2)... packed
// as: [0]=version [1]=mtu [2]=flags [3]=0 [4..20)=gid [20..22)=port [22..25)=qpn [25..28)=psn
ibex_status_t ibex_ep_addr_pack(const ibex_ep_addr_t *a, uint8_t *buf, size_t len) {
    if (!a || !buf) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_pack: NULL argument");
    if (len < IBEX_EP_ADDR_WIRE_LEN) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_pack: buffer of %zu < %d bytes", len, IBEX_EP_ADDR_WIRE_LEN);
    buf[0] = kWireVersion;
    buf[1] = a->mtu;
    buf[2] = a->flags;
    buf[3] = 0;
    std::memcpy(buf + 4, a->gid, 16);
    put16(buf + 20, a->udp_port);
    put24(buf + 22, a->qpn & 0xffffff);
    put24(buf + 25, a->psn & 0xffffff);
    return IBEX_OK;
}

ibex_status_t ibex_ep_addr_unpack(const uint8_t *buf, size_t len, ibex_ep_addr_t *a) {
    if (!a || !buf) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_unpack: NULL argument");
    if (len < IBEX_EP_ADDR_WIRE_LEN) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_unpack: %zu bytes, need %d", len, IBEX_EP_ADDR_WIRE_LEN);
    if (buf[0] != kWireVersion) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_unpack: unknown version %u", buf[0]);
    if (buf[1] < IBEX_MTU_256 || buf[1] > IBEX_MTU_4096) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_unpack: bad MTU code %u", buf[1]);
    std::memset(a, 0, sizeof *a);
    a->mtu = buf[1];
    a->flags = buf[2];
    std::memcpy(a->gid, buf + 4, 16);
    a->udp_port = get16(buf + 20);
    a->qpn = get24(buf + 22);
    a->psn = get24(buf + 25);
    return IBEX_OK;
}

ibex_status_t ibex_ep_addr_to_string(const ibex_ep_addr_t *a, char *buf, size_t len) {
    if (!a || !buf) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_to_string: NULL argument");
    char host[INET6_ADDRSTRLEN];
    if (std::memcmp(a->gid, kV4Prefix, 12) == 0)
        inet_ntop(AF_INET, a->gid + 12, host, sizeof host);
    else
        inet_ntop(AF_INET6, a->gid, host, sizeof host);
    int n = std::snprintf(buf, len, "ibex1:%s:%u:%06x:%06x:%d", host, a->udp_port, a->qpn & 0xffffff, a->psn & 0xffffff,
                          ibex_mtu_to_bytes(static_cast<ibex_mtu_t>(a->mtu)));
    if (n < 0 || static_cast<size_t>(n) >= len) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_to_string: buffer of %zu bytes too small", len);
    return IBEX_OK;
}

ibex_status_t ibex_ep_addr_from_string(const char *s, ibex_ep_addr_t *a) {
    if (!s || !a) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_ep_addr_from_string: NULL argument");
    if (std::strncmp(s, "ibex1:", 6) != 0) return fail(IBEX_ERR_INVALID_ARGUMENT, "\"%.40s\" is not an ibex1: endpoint address", s);
    // The host part may itself contain ':' (IPv6): parse the four numeric fields from the end.
    const char *end = s + std::strlen(s);
    const char *fields[4];
    const char *p = end;
    for (int i = 3; i >= 0; --i) {
        while (p > s + 6 && p[-1] != ':') --p;
        if (p <= s + 6) return fail(IBEX_ERR_INVALID_ARGUMENT, "endpoint address \"%.60s\" is truncated", s);
        fields[i] = p;
        --p;
    }
    std::string host(s + 6, p);
    unsigned port, qpn, psn;
    int mtu;
    char tail;
    if (std::sscanf(fields[0], "%u:%x:%x:%d%c", &port, &qpn, &psn, &mtu, &tail) != 4 || port > 65535 || qpn > 0xffffff ||
        psn > 0xffffff)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "endpoint address \"%.60s\" has malformed numbers", s);
    std::memset(a, 0, sizeof *a);
    in_addr v4;
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
        std::memcpy(a->gid, kV4Prefix, 12);
        std::memcpy(a->gid + 12, &v4, 4);
    } else if (inet_pton(AF_INET6, host.c_str(), a->gid) != 1) {
        return fail(IBEX_ERR_INVALID_ARGUMENT, "endpoint address host \"%s\" is not an IP address", host.c_str());
    }
    a->udp_port = static_cast<uint16_t>(port);
    a->qpn = qpn;
    a->psn = psn;
    a->mtu = 0;
    for (uint8_t e = IBEX_MTU_256; e <= IBEX_MTU_4096; ++e)
        if (ibex_mtu_to_bytes(static_cast<ibex_mtu_t>(e)) == mtu) a->mtu = e;
    if (!a->mtu) return fail(IBEX_ERR_INVALID_ARGUMENT, "endpoint address MTU %d is not 256..4096", mtu);
    return IBEX_OK;
}

} // extern "C"
