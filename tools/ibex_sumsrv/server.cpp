#include "tools/ibex_sumsrv/server.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "allreduce/cpu/reduce.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "runtime/bootstrap/socket.h"

namespace ibex::sumsrv {
namespace {

using coll::sumsrv::Hello;
using coll::sumsrv::Kind;
using coll::sumsrv::kSlotHeaderBytes;
using coll::sumsrv::Reply;
using coll::sumsrv::SlotHeader;
using coll::sumsrv::slot_stride;

constexpr uint64_t kResultWr = 1, kPushRecv = 2;
uint64_t wr_id(size_t rank, uint64_t kind, size_t slot) { return uint64_t(rank) << 16 | kind << 8 | slot; }

// Pieces of at least this many elements go to separate threads: below it a hand-off
// costs more than the sum.
constexpr size_t kMinPieceBytes = 64 << 10;

void send_frame(int fd, const Reply &r) {
    uint8_t frame[coll::sumsrv::kFrameBytes];
    coll::sumsrv::encode_reply(r, frame);
    // A worker that stopped reading loses the frame; its connection closes next anyway.
    bootstrap::send_all(fd, frame, sizeof frame, bootstrap::deadline_after_ms(1000));
}

bool valid_type(uint8_t t) { return t < IBEX_DATATYPE_COUNT; }
bool valid_op(uint8_t o) { return o < IBEX_REDOP_COUNT; }

} // namespace

Server::~Server() {
    for (auto &[key, job] : jobs_) close_job(*job);
    for (Pending &p : pending_) ::close(p.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
}

ibex_status_t Server::open(const ServerOptions &o) {
    opt_ = o;
    std::string host;
    uint16_t port = 0;
    IBEX_TRY(bootstrap::parse_host_port(o.listen.c_str(), &host, &port, true));
    sockaddr_in addr{};
    IBEX_TRY(bootstrap::resolve_ipv4(host, port, &addr));
    IBEX_TRY(bootstrap::listen_tcp(addr, &listen_fd_, &port_));
    // accepted in the serving loop, as many as are waiting, never blocking it
    const int flags = ::fcntl(listen_fd_, F_GETFL);
    if (flags < 0 || ::fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK) < 0)
        return fail_errno(IBEX_ERR_SYSTEM, errno, "ibex_sumsrv: fcntl on the listening socket");
    pool_ = std::make_unique<ReducePool>(std::max(o.threads, 1));
    return IBEX_OK;
}

void Server::accept_new() {
    for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        Pending p;
        p.fd = fd;
        p.since = bootstrap::Clock::now();
        pending_.push_back(p);
    }
}

void Server::refuse(int fd, const std::string &why) {
    IBEX_LOG(warn, "ibex_sumsrv: refused a worker: %s", why.c_str());
    Reply r;
    r.kind = Kind::refused;
    r.text = why;
    send_frame(fd, r);
    ::close(fd);
}

void Server::read_hello(Pending &p, bool *finished) {
    *finished = false;
    const ssize_t got = bootstrap::recv_available(p.fd, p.frame + p.got, sizeof p.frame - p.got);
    if (got < 0) {
        ::close(p.fd);
        *finished = true;
        return;
    }
    p.got += static_cast<size_t>(got);
    if (p.got < sizeof p.frame) {
        // A silent connection would hold its descriptor (and a place here) for ever.
        if (bootstrap::Clock::now() - p.since > std::chrono::milliseconds(opt_.hello_timeout_ms)) {
            *finished = true;
            refuse(p.fd, "no hello within " + std::to_string(opt_.hello_timeout_ms) + " ms");
        }
        return;
    }
    *finished = true;
    Hello h;
    std::string why;
    if (!coll::sumsrv::decode_hello(p.frame, &h, &why)) return refuse(p.fd, "bad hello: " + why);
    admit(p.fd, h);
}

ibex_status_t Server::open_job(Job &j) {
    IBEX_TRY(coll::sumsrv::open_context(j.device, &j.ctx));
    IBEX_TRY(ibex_alloc_pd(j.ctx, &j.pd));
    IBEX_TRY(ibex_create_cq(j.ctx, static_cast<int>(4 * j.slots * j.nranks + 16), &j.cq));
    const size_t bytes = j.slots * slot_stride(j.chunk);
    IBEX_TRY(ibex_mem_alloc(j.pd, bytes, &j.result_mem));
    IBEX_TRY(ibex_reg_mr(j.pd, j.result_mem, bytes, IBEX_ACCESS_LOCAL_WRITE, &j.result_mr));
    j.workers.resize(j.nranks);
    j.writes_out.assign(j.slots, 0);
    return IBEX_OK;
}

ibex_status_t Server::add_worker(Job &j, int fd, const Hello &h, Reply *r) {
    Worker &w = j.workers[h.rank];
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    qa.send_cq = qa.recv_cq = j.cq;
    qa.max_send_wr = j.slots + 4;
    qa.max_recv_wr = j.slots + 4;
    IBEX_TRY(ibex_create_qp(j.pd, &qa, &w.qp));
    const size_t bytes = j.slots * slot_stride(j.chunk);
    IBEX_TRY(ibex_mem_alloc(j.pd, bytes, &w.push_mem));
    IBEX_TRY(ibex_reg_mr(j.pd, w.push_mem, bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, &w.push_mr));
    IBEX_TRY(ibex_qp_connect(w.qp, &h.ep));
    for (size_t slot = 0; slot < j.slots; ++slot) { // before the welcome lets the worker push
        ibex_recv_wr_t wr{};
        wr.wr_id = wr_id(h.rank, kPushRecv, slot);
        IBEX_TRY(ibex_post_recv(w.qp, &wr, nullptr));
    }
    w.result_addr = h.result_addr;
    w.result_rkey = h.result_rkey;
    w.fd = fd;
    r->kind = Kind::welcome;
    r->push_addr = reinterpret_cast<uintptr_t>(w.push_mem);
    r->push_rkey = ibex_mr_rkey(w.push_mr);
    IBEX_TRY(ibex_qp_local_addr(w.qp, &r->ep));
    return IBEX_OK;
}

void Server::admit(int fd, const Hello &h) {
    auto it = jobs_.find(h.job);
    if (it == jobs_.end()) {
        auto j = std::make_unique<Job>();
        j->key = h.job;
        j->nranks = h.nranks;
        j->chunk = h.chunk_bytes;
        j->slots = h.slots;
        j->device = opt_.device.empty() ? h.device : opt_.device;
        if (ibex_status_t st = open_job(*j); st != IBEX_OK) {
            const std::string why = std::string("cannot serve on ") + j->device + ": " + ibex_last_error();
            close_job(*j);
            return refuse(fd, why);
        }
        ++stats_.jobs;
        IBEX_LOG(info, "ibex_sumsrv: job %s: %u workers on %s, %u slots of %u bytes", h.job.c_str(), h.nranks,
                 j->device.c_str(), h.slots, h.chunk_bytes);
        it = jobs_.emplace(h.job, std::move(j)).first;
    }
    Job &j = *it->second;
    if (h.nranks != j.nranks || h.chunk_bytes != j.chunk || h.slots != j.slots)
        return refuse(fd, "job " + h.job + " has " + std::to_string(j.nranks) + " workers and " +
                              std::to_string(j.slots) + " slots of " + std::to_string(j.chunk) + " bytes; this worker says " +
                              std::to_string(h.nranks) + ", " + std::to_string(h.slots) + " of " +
                              std::to_string(h.chunk_bytes));
    if (j.workers[h.rank].fd >= 0 || j.workers[h.rank].qp)
        return refuse(fd, "rank " + std::to_string(h.rank) + " of job " + h.job + " has joined already");
    Reply r;
    if (ibex_status_t st = add_worker(j, fd, h, &r); st != IBEX_OK) {
        (void)st;
        return refuse(fd, std::string("cannot take rank ") + std::to_string(h.rank) + ": " + ibex_last_error());
    }
    send_frame(fd, r);
    ++j.joined;
}

void Server::fail_job(Job &j, const std::string &why) {
    IBEX_LOG(warn, "ibex_sumsrv: job %s failed: %s", j.key.c_str(), why.c_str());
    last_failure_ = why;
    ++stats_.failed_jobs;
    Reply r;
    r.kind = Kind::failed;
    r.text = why;
    for (Worker &w : j.workers)
        if (w.fd >= 0) send_frame(w.fd, r);
    close_job(j);
}

void Server::close_job(Job &j) {
    for (Worker &w : j.workers) {
        if (w.qp) ibex_destroy_qp(w.qp);
        if (w.push_mr) ibex_dereg_mr(w.push_mr);
        if (w.push_mem) ibex_mem_free(j.pd, w.push_mem);
        if (w.fd >= 0) ::close(w.fd);
        w = Worker{};
    }
    if (j.result_mr) ibex_dereg_mr(j.result_mr);
    if (j.result_mem) ibex_mem_free(j.pd, j.result_mem);
    if (j.cq) ibex_destroy_cq(j.cq);
    if (j.pd) ibex_dealloc_pd(j.pd);
    if (j.ctx) ibex_close_device(j.ctx);
    j.result_mr = nullptr;
    j.result_mem = nullptr;
    j.cq = nullptr;
    j.pd = nullptr;
    j.ctx = nullptr;
}

// Chunk next_sum, once every worker pushed it and its result slot is free: checks the
// headers agree, sums in rank order and writes the sum to every worker.
bool Server::sum_next(Job &j, std::string *why) {
    const uint32_t seq = j.next_sum;
    const size_t slot = seq % j.slots;
    for (const Worker &w : j.workers)
        if (!w.qp || w.arrived <= seq) return true; // not all here yet
    if (j.writes_out[slot] != 0) return true;         // the slot's last sum is still going out
    const size_t stride = slot_stride(j.chunk);
    std::vector<const uint8_t *> src(j.nranks);
    SlotHeader first{};
    for (uint32_t r = 0; r < j.nranks; ++r) {
        src[r] = static_cast<const uint8_t *>(j.workers[r].push_mem) + slot * stride;
        const SlotHeader h = coll::sumsrv::get_slot_header(src[r]);
        if (h.magic != coll::sumsrv::kPushMagic || h.seq != seq || h.bytes > j.chunk || !valid_type(h.type) ||
            !valid_op(h.op)) {
            *why = "rank " + std::to_string(r) + " pushed a malformed chunk " + std::to_string(seq);
            return false;
        }
        if (r == 0) first = h;
        if (h.bytes != first.bytes || h.type != first.type || h.op != first.op) {
            *why = "chunk " + std::to_string(seq) + ": rank " + std::to_string(r) + " pushed " + std::to_string(h.bytes) +
                   " bytes of type " + std::to_string(h.type) + " op " + std::to_string(h.op) + ", rank 0 " +
                   std::to_string(first.bytes) + " of type " + std::to_string(first.type) + " op " + std::to_string(first.op);
            return false;
        }
    }
    const auto type = static_cast<ibex_datatype_t>(first.type);
    const auto op = static_cast<ibex_redop_t>(first.op);
    const size_t elem = ibex_datatype_size(type);
    if (first.bytes % elem != 0) {
        *why = "chunk " + std::to_string(seq) + " holds " + std::to_string(first.bytes) + " bytes, not whole elements";
        return false;
    }
    uint8_t *out = static_cast<uint8_t *>(j.result_mem) + slot * stride;
    uint8_t *sum = out + kSlotHeaderBytes;
    const size_t count = first.bytes / elem;
    pool_->run(count, kMinPieceBytes / elem, [&](size_t begin, size_t end) {
        const size_t at = begin * elem, len = end - begin;
        std::memcpy(sum + at, src[0] + kSlotHeaderBytes + at, len * elem);
        for (uint32_t r = 1; r < j.nranks; ++r)
            coll::reduce_into(sum + at, sum + at, src[r] + kSlotHeaderBytes + at, len, type, op);
    });
    SlotHeader h = first;
    h.magic = coll::sumsrv::kResultMagic;
    coll::sumsrv::put_slot_header(out, h);
    for (uint32_t r = 0; r < j.nranks; ++r) {
        Worker &w = j.workers[r];
        if (coll::sumsrv::post_slot_write(w.qp, wr_id(r, kResultWr, slot), out,
                                          static_cast<uint32_t>(kSlotHeaderBytes + first.bytes), ibex_mr_lkey(j.result_mr),
                                          w.result_addr + slot * stride, w.result_rkey, seq) != IBEX_OK) {
            *why = std::string("writing the sum to rank ") + std::to_string(r) + ": " + ibex_last_error();
            return false;
        }
        ++j.writes_out[slot];
    }
    ++j.next_sum;
    ++stats_.chunks;
    stats_.bytes += first.bytes;
    return true;
}

bool Server::serve(Job &j, bool *moved) {
    ibex_wc_t wc[32];
    std::string why;
    for (;;) {
        int n = 0;
        if (ibex_poll_cq(j.cq, 32, wc, &n) != IBEX_OK) {
            fail_job(j, std::string("polling the CQ: ") + ibex_last_error());
            return false;
        }
        for (int i = 0; i < n; ++i) {
            const size_t rank = wc[i].wr_id >> 16;
            const uint64_t kind = (wc[i].wr_id >> 8) & 0xff;
            const size_t slot = wc[i].wr_id & 0xff;
            if (wc[i].status != IBEX_WC_SUCCESS) {
                fail_job(j, "rank " + std::to_string(rank) + ": " + (kind == kResultWr ? "writing a sum" : "a push") +
                                " failed: " + ibex_wc_status_str(wc[i].status));
                return false;
            }
            Worker &w = j.workers[rank];
            if (kind == kResultWr) {
                --j.writes_out[slot];
                continue;
            }
            if (wc[i].imm_data != w.arrived) {
                fail_job(j, "rank " + std::to_string(rank) + " pushed chunk " + std::to_string(wc[i].imm_data) +
                                " where " + std::to_string(w.arrived) + " was due");
                return false;
            }
            ++w.arrived;
            ibex_recv_wr_t wr{};
            wr.wr_id = wr_id(rank, kPushRecv, wc[i].imm_data % j.slots);
            if (ibex_post_recv(w.qp, &wr, nullptr) != IBEX_OK) {
                fail_job(j, std::string("posting a receive: ") + ibex_last_error());
                return false;
            }
        }
        *moved = *moved || n > 0;
        if (n < 32) break;
    }
    for (;;) {
        const uint32_t before = j.next_sum;
        if (!sum_next(j, &why)) {
            fail_job(j, why);
            return false;
        }
        if (j.next_sum == before) break;
        *moved = true;
    }
    // A worker's control connection: closed means it destroyed its communicator, exited
    // or was killed; anything it sends is out of protocol. Between collectives a worker may
    // leave (the others follow as they destroy theirs); during one, or when a push comes
    // after someone left, the job cannot finish and fails.
    for (size_t r = 0; r < j.workers.size(); ++r) {
        Worker &w = j.workers[r];
        if (w.fd < 0) continue;
        uint8_t byte;
        const ssize_t got = bootstrap::recv_available(w.fd, &byte, 1);
        if (got == 0) continue;
        ::close(w.fd);
        w.fd = -1;
        w.left = true;
        ++j.left;
        if (got > 0) {
            fail_job(j, "rank " + std::to_string(r) + " sent bytes out of protocol");
            return false;
        }
        if (j.left == j.nranks) {
            close_job(j);
            return false;
        }
        const bool in_flight = std::any_of(j.workers.begin(), j.workers.end(),
                                           [&](const Worker &o) { return o.arrived > j.next_sum; });
        if (in_flight) {
            fail_job(j, "rank " + std::to_string(r) +
                            " closed its connection during a collective (it exited or was killed)");
            return false;
        }
    }
    if (j.left > 0) {
        for (size_t r = 0; r < j.workers.size(); ++r)
            if (j.workers[r].arrived > j.next_sum) {
                fail_job(j, "rank " + std::to_string(r) + " pushed a chunk after another rank left the job");
                return false;
            }
    }
    return true;
}

bool Server::arm_all() {
    for (auto &[key, j] : jobs_)
        if (ibex_cq_wait(j->cq, 0) == IBEX_OK) return false;
    return true;
}

ibex_status_t Server::run(const std::atomic<bool> &stop) {
    auto last_move = bootstrap::Clock::now();
    while (!stop.load(std::memory_order_relaxed)) {
        accept_new();
        for (size_t i = 0; i < pending_.size();) {
            bool finished = false;
            read_hello(pending_[i], &finished);
            if (finished) {
                pending_[i] = pending_.back();
                pending_.pop_back();
            } else {
                ++i;
            }
        }
        bool moved = false;
        for (auto it = jobs_.begin(); it != jobs_.end();) {
            if (serve(*it->second, &moved)) {
                ++it;
            } else {
                it = jobs_.erase(it);
                moved = true;
            }
        }
        const auto now = bootstrap::Clock::now();
        if (moved) last_move = now;
        // Busy-poll for a while after the last movement (the next chunk is a message
        // away), then sleep on the sockets and the CQs.
        if (now - last_move < std::chrono::microseconds(200)) continue;
        if (!arm_all()) continue;
        std::vector<pollfd> fds;
        fds.push_back({listen_fd_, POLLIN, 0});
        for (const Pending &p : pending_) fds.push_back({p.fd, POLLIN, 0});
        for (auto &[key, j] : jobs_) {
            int fd = -1;
            if (ibex_cq_fd(j->cq, &fd) == IBEX_OK) fds.push_back({fd, POLLIN, 0});
            for (const Worker &w : j->workers)
                if (w.fd >= 0) fds.push_back({w.fd, POLLIN, 0});
        }
        if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR)
            return fail_errno(IBEX_ERR_SYSTEM, errno, "ibex_sumsrv: poll");
    }
    return IBEX_OK;
}

} // namespace ibex::sumsrv
