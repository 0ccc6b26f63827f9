#include "allreduce/sumsrv_client.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "allreduce/cpu/reduce.h"
#include "allreduce/sumsrv_wire.h"
#include "runtime/base/status.h"
#include "runtime/bootstrap/socket.h"

namespace ibex::coll {
namespace {

using sumsrv::kSlotHeaderBytes;
using sumsrv::slot_stride;

// wr_id: connection index << 16 | kind << 8 | slot
constexpr uint64_t kPushWr = 1, kResultWr = 2;
uint64_t wr_id(size_t conn, uint64_t kind, size_t slot) { return uint64_t(conn) << 16 | kind << 8 | slot; }

} // namespace

ibex_status_t parse_sumsrv_list(const char *text, std::vector<std::string> *out) {
    out->clear();
    if (!text) return IBEX_OK;
    std::string all(text);
    size_t at = 0;
    while (at <= all.size()) {
        const size_t comma = std::min(all.find(',', at), all.size());
        std::string item = all.substr(at, comma - at);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (!item.empty()) {
            std::string host;
            uint16_t port = 0;
            if (bootstrap::parse_host_port(item.c_str(), &host, &port, false) != IBEX_OK)
                return fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_SUMSRV: \"%s\" is not host:port (servers are listed as host:port,host:port)",
                            item.c_str());
            out->push_back(item);
        }
        at = comma + 1;
    }
    return IBEX_OK;
}

ibex_status_t SumsrvClient::conn_fail(const Conn &c, const char *fmt, ...) const {
    char buf[384];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return fail(IBEX_ERR_REMOTE, "sumsrv server %s: %s", c.name.c_str(), buf);
}

ibex_status_t SumsrvClient::open(const SumsrvSettings &s, const std::string &job, int rank, int nranks) {
    close();
    if (s.servers.empty()) return IBEX_OK;
    settings_ = s;
    nranks_ = nranks;
    const uint32_t slots = std::clamp<uint32_t>(s.slots, 1, sumsrv::kMaxSlots);
    settings_.slots = slots;
    const size_t stride = slot_stride(s.chunk_bytes);
    IBEX_TRY(sumsrv::open_context(s.device, &ctx_));
    IBEX_TRY(ibex_alloc_pd(ctx_, &pd_));
    IBEX_TRY(ibex_create_cq(ctx_, static_cast<int>(4 * slots * s.servers.size() + 16), &cq_));
    conns_.resize(s.servers.size());
    const auto deadline = bootstrap::deadline_after_ms(s.timeout_ms);
    for (size_t i = 0; i < conns_.size(); ++i) {
        Conn &c = conns_[i];
        c.name = s.servers[i];
        std::string host;
        uint16_t port = 0;
        IBEX_TRY(bootstrap::parse_host_port(c.name.c_str(), &host, &port, false));
        sockaddr_in addr{};
        bootstrap::SocketFailure why;
        if (bootstrap::resolve_ipv4(host, port, &addr, &why) != IBEX_OK)
            return conn_fail(c, "cannot resolve %s", host.c_str());
        if (bootstrap::connect_tcp(addr, deadline, &c.fd, {}, &why) != IBEX_OK)
            return conn_fail(c, "cannot connect (%s%s) within %d ms: is ibex_sumsrv running there?",
                             why.timed_out ? "timed out" : why.call, why.error ? (std::string(": ") + std::strerror(why.error)).c_str() : "",
                             s.timeout_ms);
        sockaddr_in mine{}, theirs{};
        socklen_t len = sizeof mine, len2 = sizeof theirs;
        if (::getsockname(c.fd, reinterpret_cast<sockaddr *>(&mine), &len) == 0 &&
            ::getpeername(c.fd, reinterpret_cast<sockaddr *>(&theirs), &len2) == 0 &&
            (theirs.sin_addr.s_addr == mine.sin_addr.s_addr || (ntohl(theirs.sin_addr.s_addr) >> 24) == 127))
            ++here_;
        ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
        qa.send_cq = qa.recv_cq = cq_;
        qa.max_send_wr = slots + 4;
        qa.max_recv_wr = slots + 4;
        IBEX_TRY(ibex_create_qp(pd_, &qa, &c.qp));
        IBEX_TRY(ibex_mem_alloc(pd_, slots * stride, &c.push_mem));
        IBEX_TRY(ibex_mem_alloc(pd_, slots * stride, &c.result_mem));
        IBEX_TRY(ibex_reg_mr(pd_, c.push_mem, slots * stride, IBEX_ACCESS_LOCAL_WRITE, &c.push_mr));
        IBEX_TRY(ibex_reg_mr(pd_, c.result_mem, slots * stride, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE,
                             &c.result_mr));
        sumsrv::Hello h;
        h.job = job;
        h.nranks = static_cast<uint32_t>(nranks);
        h.rank = static_cast<uint32_t>(rank);
        h.chunk_bytes = s.chunk_bytes;
        h.slots = slots;
        h.result_addr = reinterpret_cast<uintptr_t>(c.result_mem);
        h.result_rkey = ibex_mr_rkey(c.result_mr);
        IBEX_TRY(ibex_qp_local_addr(c.qp, &h.ep));
        h.device = s.device;
        uint8_t frame[sumsrv::kFrameBytes];
        sumsrv::encode_hello(h, frame);
        if (!bootstrap::send_all(c.fd, frame, sizeof frame, deadline, &why))
            return conn_fail(c, "sending the hello failed (%s)", why.closed ? "connection closed" : why.call);
        if (!bootstrap::recv_all(c.fd, frame, sizeof frame, deadline, &why))
            return conn_fail(c, "no welcome within %d ms (%s)", s.timeout_ms,
                             why.timed_out ? "timed out" : why.closed ? "connection closed" : why.call);
        sumsrv::Reply r;
        std::string bad;
        if (!sumsrv::decode_reply(frame, &r, &bad)) return conn_fail(c, "bad welcome: %s", bad.c_str());
        if (r.kind != sumsrv::Kind::welcome) return conn_fail(c, "refused this rank: %s", r.text.c_str());
        c.remote_push = r.push_addr;
        c.remote_rkey = r.push_rkey;
        if (ibex_status_t st = ibex_qp_connect_attr(c.qp, &r.ep, &s.qp.attr, s.qp.mask); st != IBEX_OK)
            return conn_fail(c, "connecting the QP: %s", ibex_last_error());
        // before the first push, so before any sum can come back
        for (size_t slot = 0; slot < slots; ++slot) IBEX_TRY(post_result_recv(c, slot));
    }
    return IBEX_OK;
}

void SumsrvClient::close() {
    for (Conn &c : conns_) {
        if (c.qp) ibex_destroy_qp(c.qp);
        if (c.push_mr) ibex_dereg_mr(c.push_mr);
        if (c.result_mr) ibex_dereg_mr(c.result_mr);
        if (c.push_mem) ibex_mem_free(pd_, c.push_mem);
        if (c.result_mem) ibex_mem_free(pd_, c.result_mem);
        if (c.fd >= 0) ::close(c.fd);
    }
    conns_.clear();
    here_ = 0;
    some_here_ = false;
    if (cq_) ibex_destroy_cq(cq_);
    if (pd_) ibex_dealloc_pd(pd_);
    if (ctx_) ibex_close_device(ctx_);
    cq_ = nullptr;
    pd_ = nullptr;
    ctx_ = nullptr;
    active_ = false;
}

ibex_status_t SumsrvClient::post_result_recv(Conn &c, size_t slot) {
    // WRITE_WITH_IMM consumes a receive but puts no bytes in it.
    ibex_recv_wr_t wr{};
    wr.wr_id = wr_id(static_cast<size_t>(&c - conns_.data()), kResultWr, slot);
    return ibex_post_recv(c.qp, &wr, nullptr);
}

ibex_status_t SumsrvClient::start(const void *sendbuf, void *recvbuf, ibex_datatype_t type, ibex_redop_t op,
                                  std::span<const Part> parts) {
    if (parts.size() != conns_.size())
        return fail(IBEX_ERR_INTERNAL, "sumsrv: %zu parts for %zu servers", parts.size(), conns_.size());
    send_ = static_cast<const uint8_t *>(sendbuf);
    recv_ = static_cast<uint8_t *>(recvbuf);
    type_ = type;
    op_ = op;
    const size_t chunk = settings_.chunk_bytes;
    for (size_t i = 0; i < conns_.size(); ++i) {
        Conn &c = conns_[i];
        c.off = parts[i].off;
        c.bytes = parts[i].bytes;
        c.chunks = (c.bytes + chunk - 1) / chunk;
        c.pushed = c.summed = 0;
        c.first_seq = c.next_seq;
        IBEX_TRY(check_control(c)); // a server that died while the communicator was idle
    }
    active_ = true;
    return IBEX_OK;
}

bool SumsrvClient::done() const {
    return std::all_of(conns_.begin(), conns_.end(), [](const Conn &c) { return c.summed == c.chunks; });
}

ibex_status_t SumsrvClient::push(size_t ci, Conn &c) {
    const size_t chunk = settings_.chunk_bytes;
    const size_t slot = c.next_seq % settings_.slots; // the server's slot for this sequence
    const size_t at = c.pushed * chunk;
    const auto bytes = static_cast<uint32_t>(std::min(chunk, c.bytes - at));
    auto *dst = static_cast<uint8_t *>(c.push_mem) + slot * slot_stride(settings_.chunk_bytes);
    sumsrv::SlotHeader h;
    h.magic = sumsrv::kPushMagic;
    h.seq = c.next_seq;
    h.bytes = bytes;
    h.type = static_cast<uint8_t>(type_);
    h.op = static_cast<uint8_t>(op_);
    sumsrv::put_slot_header(dst, h);
    std::memcpy(dst + kSlotHeaderBytes, send_ + c.off + at, bytes);
    if (ibex_status_t st = sumsrv::post_slot_write(c.qp, wr_id(ci, kPushWr, slot), dst,
                                                   static_cast<uint32_t>(kSlotHeaderBytes + bytes), ibex_mr_lkey(c.push_mr),
                                                   c.remote_push + slot * slot_stride(settings_.chunk_bytes), c.remote_rkey,
                                                   c.next_seq);
        st != IBEX_OK)
        return conn_fail(c, "posting a push: %s", ibex_last_error());
    c.busy[slot] = 1;
    ++c.pushed;
    ++c.next_seq;
    return IBEX_OK;
}

ibex_status_t SumsrvClient::take_result(Conn &c, uint32_t imm) {
    if (!active_ || c.summed >= c.pushed)
        return conn_fail(c, "a sum arrived for chunk %u, which this rank did not push", imm);
    const uint32_t want = c.first_seq + static_cast<uint32_t>(c.summed);
    if (imm != want) return conn_fail(c, "the sum of chunk %u arrived where chunk %u's was due", imm, want);
    const size_t slot = want % settings_.slots;
    const auto *src = static_cast<const uint8_t *>(c.result_mem) + slot * slot_stride(settings_.chunk_bytes);
    const sumsrv::SlotHeader h = sumsrv::get_slot_header(src);
    const size_t at = c.summed * settings_.chunk_bytes;
    const size_t bytes = std::min<size_t>(settings_.chunk_bytes, c.bytes - at);
    if (h.magic != sumsrv::kResultMagic || h.seq != want)
        return conn_fail(c, "malformed result header for chunk %u", want);
    if (h.status != 0) {
        const auto *text = reinterpret_cast<const char *>(src + kSlotHeaderBytes);
        return conn_fail(c, "%.*s", static_cast<int>(strnlen(text, std::min<size_t>(h.bytes, 300))), text);
    }
    if (h.bytes != bytes) return conn_fail(c, "chunk %u's sum has %u bytes, not %zu", want, h.bytes, bytes);
    uint8_t *dst = recv_ + c.off + at;
    std::memcpy(dst, src + kSlotHeaderBytes, bytes);
    // The server sums; each rank divides its copy the same way, so all hold the same bits.
    if (op_ == IBEX_AVG) finalize_avg(dst, bytes / ibex_datatype_size(type_), type_, nranks_);
    ++c.summed;
    return post_result_recv(c, slot);
}

ibex_status_t SumsrvClient::check_control(Conn &c) {
    const ssize_t got = bootstrap::recv_available(c.fd, c.frame + c.frame_got, sizeof c.frame - c.frame_got);
    if (got < 0) return conn_fail(c, "the server closed its connection (it exited or was killed)");
    c.frame_got += static_cast<size_t>(got);
    if (c.frame_got < sizeof c.frame) return IBEX_OK;
    sumsrv::Reply r;
    std::string bad;
    if (!sumsrv::decode_reply(c.frame, &r, &bad)) return conn_fail(c, "bad control frame: %s", bad.c_str());
    return conn_fail(c, "%s", r.text.c_str());
}

ibex_status_t SumsrvClient::progress(bool *moved) {
    *moved = false;
    if (!active_) return IBEX_OK;
    ibex_wc_t wc[16];
    for (;;) {
        int n = 0;
        IBEX_TRY(ibex_poll_cq(cq_, 16, wc, &n));
        for (int i = 0; i < n; ++i) {
            const size_t ci = wc[i].wr_id >> 16;
            const uint64_t kind = (wc[i].wr_id >> 8) & 0xff;
            const size_t slot = wc[i].wr_id & 0xff;
            if (ci >= conns_.size()) return fail(IBEX_ERR_INTERNAL, "sumsrv: completion for connection %zu", ci);
            Conn &c = conns_[ci];
            if (wc[i].status != IBEX_WC_SUCCESS)
                return conn_fail(c, "%s failed: %s", kind == kPushWr ? "a push" : "a result",
                                 ibex_wc_status_str(wc[i].status));
            if (kind == kPushWr)
                c.busy[slot] = 0;
            else
                IBEX_TRY(take_result(c, wc[i].imm_data));
        }
        *moved = *moved || n > 0;
        if (n < 16) break;
    }
    for (size_t ci = 0; ci < conns_.size(); ++ci) {
        Conn &c = conns_[ci];
        while (c.pushed < c.chunks && c.pushed - c.summed < settings_.slots && !c.busy[c.next_seq % settings_.slots]) {
            IBEX_TRY(push(ci, c));
            *moved = true;
        }
    }
    // Every 16th pass: a closed or failing server's socket stays readable, so a driver
    // napping in poll() keeps waking, and reaches that pass within microseconds.
    if ((++polls_ & 15) == 0)
        for (Conn &c : conns_) IBEX_TRY(check_control(c));
    return IBEX_OK;
}

bool SumsrvClient::arm() { return !cq_ || ibex_cq_wait(cq_, 0) != IBEX_OK; }

void SumsrvClient::fds(std::vector<int> *out) const {
    if (!cq_) return;
    int fd = -1;
    if (ibex_cq_fd(cq_, &fd) == IBEX_OK) out->push_back(fd);
    for (const Conn &c : conns_) out->push_back(c.fd);
}

std::string SumsrvClient::stall_detail() const {
    const Conn *worst = nullptr;
    for (const Conn &c : conns_)
        if (c.summed < c.chunks && (!worst || c.summed < worst->summed)) worst = &c;
    if (!worst) return "";
    char buf[256];
    std::snprintf(buf, sizeof buf, "sumsrv server %s: pushed %zu of %zu chunks, %zu summed", worst->name.c_str(),
                  worst->pushed, worst->chunks, worst->summed);
    return buf;
}

} // namespace ibex::coll
