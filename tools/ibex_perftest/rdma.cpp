#include "ibex_perftest/rdma.h"

#include <cstdlib>
#include <cstring>

namespace ibex::perftest {

std::string ibex_error(const char *what, ibex_status_t st) {
    std::string s = std::string(what) + ": " + ibex_strerror(st);
    const char *detail = ibex_last_error();
    if (detail && *detail) s += std::string(": ") + detail;
    return s;
}

ibex_mtu_t mtu_enum(int bytes) {
    switch (bytes) {
    case 256: return IBEX_MTU_256;
    case 512: return IBEX_MTU_512;
    case 1024: return IBEX_MTU_1024;
    case 2048: return IBEX_MTU_2048;
    case 4096: return IBEX_MTU_4096;
    default: return static_cast<ibex_mtu_t>(0);
    }
}

Resources::~Resources() { close(); }

bool Resources::open(const std::string &device, size_t len, uint32_t max_send_wr, std::string *err) {
    ibex_status_t st = ibex_open_device(device.c_str(), nullptr, &ctx);
    if (st != IBEX_OK) {
        *err = ibex_error(("cannot open device \"" + device + "\"").c_str(), st);
        return false;
    }
    if ((st = ibex_alloc_pd(ctx, &pd)) != IBEX_OK) {
        *err = ibex_error("ibex_alloc_pd", st);
        return false;
    }
    const int cqe = static_cast<int>(max_send_wr) + 64;
    if ((st = ibex_create_cq(ctx, cqe, &cq)) != IBEX_OK) {
        *err = ibex_error("ibex_create_cq", st);
        return false;
    }
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.max_send_wr = max_send_wr;
    qa.max_recv_wr = 16;
    qa.max_send_sge = 1;
    qa.max_recv_sge = 1;
    if ((st = ibex_create_qp(pd, &qa, &qp)) != IBEX_OK) {
        *err = ibex_error("ibex_create_qp", st);
        return false;
    }
    buf_len = (len + 4095) & ~size_t(4095);
    buf = static_cast<uint8_t *>(std::aligned_alloc(4096, buf_len));
    if (!buf) {
        *err = "cannot allocate a buffer of " + std::to_string(buf_len) + " bytes";
        return false;
    }
    std::memset(buf, 0, buf_len);
    st = ibex_reg_mr(pd, buf, buf_len, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ,
                     &mr);
    if (st != IBEX_OK) {
        *err = ibex_error("ibex_reg_mr", st);
        return false;
    }
    if ((st = ibex_qp_local_addr(qp, &local)) != IBEX_OK) {
        *err = ibex_error("ibex_qp_local_addr", st);
        return false;
    }
    return true;
}

void Resources::close() {
    if (mr) ibex_dereg_mr(mr);
    if (qp) ibex_destroy_qp(qp);
    if (cq) ibex_destroy_cq(cq);
    if (pd) ibex_dealloc_pd(pd);
    if (ctx) ibex_close_device(ctx);
    std::free(buf);
    mr = nullptr;
    qp = nullptr;
    cq = nullptr;
    pd = nullptr;
    ctx = nullptr;
    buf = nullptr;
}

KeyRecord Resources::local_key(size_t remote_offset) const {
    KeyRecord k;
    k.lid = 0; // RoCE has no LID
    k.out_reads = 16;
    k.qpn = local.qpn & 0xffffff;
    k.psn = local.psn & 0xffffff;
    k.rkey = ibex_mr_rkey(mr);
    k.vaddr = reinterpret_cast<uintptr_t>(buf) + remote_offset;
    k.srqn = 0;
    std::memcpy(k.gid, local.gid, sizeof k.gid);
    return k;
}

bool Resources::connect(const KeyRecord &remote, int mtu_bytes, std::string *err) {
    ibex_ep_addr_t r{};
    std::memcpy(r.gid, remote.gid, sizeof r.gid);
    r.udp_port = kRoceUdpPort;
    r.mtu = mtu_bytes ? static_cast<uint8_t>(mtu_enum(mtu_bytes)) : local.mtu;
    r.qpn = remote.qpn;
    r.psn = remote.psn;
    ibex_status_t st = ibex_qp_connect(qp, &r);
    if (st != IBEX_OK) {
        *err = ibex_error("cannot connect the QP to the peer", st);
        return false;
    }
    ibex_qp_attr_t qa = IBEX_QP_ATTR_INIT;
    if ((st = ibex_query_qp(qp, &qa)) != IBEX_OK) {
        *err = ibex_error("ibex_query_qp", st);
        return false;
    }
    path_mtu_ = ibex_mtu_to_bytes(qa.path_mtu);
    return true;
}

} // namespace ibex::perftest
