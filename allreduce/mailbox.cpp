#include "allreduce/mailbox.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "allreduce/comm.h"
#include "allreduce/cross_memory.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

// Past this a message is read out of the sender's buffer: a system call and the sender's
// wait for the receiver's count, about 4 us on this VM, against 1.5 us for an 8 KiB copy in
// and out (ibex_allreduce_perf --coll sendrecv -np 2: 1.8-1.9 us at 8 KiB against 5.1-6.1
// read; 4 ranks 7-11 against 23-39). At 16 KiB the two were even (5.5-6.1 us either way).
// (The fast boxes stop at 4 KiB: every rank reads every peer's box there, line by line out
// of the writer's cache, which is what slows when the cores are far apart.)
constexpr size_t kDefaultMax = 8192;
constexpr size_t kLargestMax = 64 << 10;
constexpr uint64_t kNoOpinion = std::numeric_limits<uint64_t>::max();

size_t round_line(size_t b) { return (b + 63) & ~size_t(63); }

} // namespace

Mailbox::~Mailbox() { close(); }

void Mailbox::close() {
    peer_box_.clear();
    region_.close();
    box_ = nullptr;
    max_bytes_ = 0;
    pending_ = 0;
}

ibex_status_t Mailbox::open(ibex_comm *c) {
    rank_ = c->rank;
    nranks_ = c->nranks;
    const size_t n = static_cast<size_t>(nranks_);
    local_.assign(n, -1);
    // This host's ranks over shm, this one among them, numbered alike on each of them (the
    // ranks that use shm with each other are all of a host's ranks that want it).
    int nlocal = 0;
    for (int p = 0; p < nranks_; ++p)
        if (p == rank_ || (c->topo.shm && c->topo.local[static_cast<size_t>(p)])) local_[static_cast<size_t>(p)] = nlocal++;
    const uint64_t limit = static_cast<uint64_t>(config::get_int("IBEX_MAILBOX_MAX", kDefaultMax, 0, kLargestMax));
    uint64_t want = nlocal >= 2 ? limit : kNoOpinion; // a rank alone on its host has no say
    std::string why;
    if (nlocal > kMaxLocalRanks) {
        want = 0;
        why = "more than " + std::to_string(kMaxLocalRanks) + " ranks on this host";
    }
    const int link = c->exec.common_link([&](int p) { return local_[static_cast<size_t>(p)] >= 0; });
    if (want && want != kNoOpinion && link < 0) {
        want = 0;
        why = "not every rank of this host has a QP on the shm link";
    }
    size_t bytes = 0;
    if (want && want != kNoOpinion) {
        const size_t slot = round_line(kData + want);
        acks_at_ = static_cast<size_t>(nlocal) * kSlots * slot;
        bytes = acks_at_ + static_cast<size_t>(nlocal) * 64;
        box_ = region_.open_zeroed(c->exec.pd(link), bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, "mailbox");
        if (!box_) {
            why = ibex_last_error();
            want = 0;
        }
    }
    struct Announce {
        uint64_t addr;
        uint64_t max;
        uint64_t bytes;
        uint64_t probe_addr, probe_value;
        uint32_t rkey;
        int32_t pid;
        uint32_t mapped; // second round: every mailbox peer's region is mapped here
        uint32_t reads;  // ... and every mailbox peer's memory can be read from here
    };
    probe_ = 0x6d61696c626f7800ull ^ static_cast<uint64_t>(getpid());
    Announce mine{reinterpret_cast<uintptr_t>(box_), want, bytes, reinterpret_cast<uintptr_t>(&probe_), probe_,
                  region_.rkey(), static_cast<int32_t>(getpid()), 0, 0};
    std::vector<Announce> all(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    uint64_t agreed = kNoOpinion;
    for (const Announce &a : all) agreed = std::min(agreed, a.max);
    if (agreed == kNoOpinion) agreed = 0; // nobody shares a host
    // Each mailbox peer's region, mapped here (the fd comes over the shm device's socket,
    // so it may still be on its way: ibex_rkey_ptr waits for it).
    peer_box_.assign(n, nullptr);
    bool mapped = agreed > 0 && box_ != nullptr;
    for (int p = 0; p < nranks_ && mapped; ++p) {
        if (p == rank_ || local_[static_cast<size_t>(p)] < 0) continue;
        const Announce &a = all[static_cast<size_t>(p)];
        void *at = nullptr;
        if (!a.bytes || ibex_rkey_ptr(c->exec.qp_to(p), a.addr, a.rkey, a.bytes, IBEX_ACCESS_REMOTE_WRITE, &at) !=
                            IBEX_OK) {
            why = "rank " + std::to_string(p) + "'s mailbox is not mapped here: " +
                  (a.bytes ? std::string(ibex_last_error()) : std::string("it has none"));
            mapped = false;
            break;
        }
        peer_box_[static_cast<size_t>(p)] = static_cast<uint8_t *>(at);
    }
    // Messages past the limit are read out of the sender's buffer where every rank may read
    // its mailbox peers' memory (ptrace scope, user and PID namespace allow it).
    const bool read_allowed = config::get_bool("IBEX_MAILBOX_READ", true) &&
                              std::strcmp(config::get_string("IBEX_SHM_COPY", ""), "ring") != 0;
    bool reads = read_allowed;
    for (int p = 0; p < nranks_ && mapped && reads; ++p) {
        if (p == rank_ || local_[static_cast<size_t>(p)] < 0) continue;
        const Announce &a = all[static_cast<size_t>(p)];
        if (!peer_word_is(a.pid, a.probe_addr, a.probe_value)) {
            IBEX_LOG(info, "communicator rank %d: cannot read rank %d's memory (process_vm_readv: %s): sends past %llu "
                           "bytes between ranks of a host take the scheduled path",
                     rank_, p, std::strerror(errno), static_cast<unsigned long long>(agreed));
            reads = false;
        }
    }
    if (agreed > 0) {
        // A rank without local peers has nothing to map or read and no say.
        mine.mapped = mapped || box_ == nullptr ? 1 : 0;
        mine.reads = (mapped && reads) || box_ == nullptr ? 1 : 0;
        IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
        reads_ = true;
        for (const Announce &a : all) {
            if (!a.mapped) agreed = 0;
            if (!a.reads) reads_ = false;
        }
    }
    on_some_host_ = agreed > 0;
    if (!agreed || !box_) {
        const bool had = box_ != nullptr;
        close();
        if (had)
            IBEX_LOG(info, "communicator rank %d: small sends and receives take the scheduled path (mailboxes off: %s)",
                     rank_, why.empty() ? "another rank cannot use them" : why.c_str());
        return IBEX_OK;
    }
    max_bytes_ = agreed;
    slot_bytes_ = round_line(kData + agreed);
    // Each region was sized for its owner's own limit; the slots are laid out for the agreed
    // one, the smallest, which fits every region.
    acks_at_ = static_cast<size_t>(nlocal) * kSlots * slot_bytes_;
    sent_.assign(n, 0);
    received_.assign(n, 0);
    taken_.assign(n, 0);
    seen_taken_.assign(n, 0);
    pid_.assign(n, 0);
    for (size_t p = 0; p < n; ++p) pid_[p] = all[p].pid;
    if (local_[static_cast<size_t>(rank_)] == 0)
        IBEX_LOG(info,
                 "communicator: sends and receives of up to %zu bytes between ranks of a host go through mailboxes, "
                 "longer ones %s",
                 max_bytes_, reads_ ? "are read out of the sender's buffer" : "are scheduled");
    return IBEX_OK;
}

bool Mailbox::carries_all(const Op &op) const {
    if (!max_bytes_ || op.kind != OpKind::p2p || op.on_gpu) return false;
    for (const P2pPiece &p : op.pieces)
        if (p.peer != rank_ && scheduled(p)) return false;
    return true;
}

bool Mailbox::carries_some(const Op &op) const {
    if (!max_bytes_ || (op.kind != OpKind::p2p && op.kind != OpKind::alltoallv)) return false;
    for (const P2pPiece &p : op.pieces)
        if (peer(p.peer)) return true;
    return false;
}

ibex_status_t Mailbox::start(const Op &op, bool whole) {
    items_.clear();
    pending_ = 0;
    size_t next_self_recv = 0;
    for (const P2pPiece &p : op.pieces) {
        if (peer(p.peer)) {
            const auto q = static_cast<size_t>(p.peer);
            const uint64_t seq = p.send ? ++sent_[q] : ++received_[q];
            const Carry carry = p.bytes <= max_bytes_ ? Carry::whole : reads_ ? Carry::read : Carry::notice;
            items_.push_back({p.send, carry, false, false, p.peer, static_cast<uint8_t *>(p.buf), p.bytes, seq});
            continue;
        }
        if (!whole || p.peer != rank_ || !p.send) continue;
        // A send to itself fills the batch's next receive from itself (paired length for
        // length when the batch was checked).
        while (next_self_recv < op.pieces.size() &&
               (op.pieces[next_self_recv].send || op.pieces[next_self_recv].peer != rank_))
            ++next_self_recv;
        if (next_self_recv == op.pieces.size()) break;
        std::memcpy(op.pieces[next_self_recv++].buf, p.buf, p.bytes);
    }
    pending_ = items_.size();
    bool done = false, moved = false;
    return pending_ ? poll(&done, &moved) : IBEX_OK;
}

bool Mailbox::try_send(Item &it) {
    const auto q = static_cast<size_t>(it.peer);
    const int me = local_[static_cast<size_t>(rank_)];
    // The receiver's count sits in a line it writes: read it only when the ring looks full
    // (or a read send waits for it), not on every send.
    const auto *taken = reinterpret_cast<const uint64_t *>(box_ + taken_offset(local_[q]));
    uint64_t &seen = seen_taken_[q];
    if (it.posted) return (seen = __atomic_load_n(taken, __ATOMIC_ACQUIRE)) >= it.seq; // read by now?
    if (it.seq - seen > kSlots && it.seq - (seen = __atomic_load_n(taken, __ATOMIC_ACQUIRE)) > kSlots)
        return false; // the ring is full
    uint8_t *slot = peer_box_[q] + slot_offset(me, it.seq);
    uint64_t length = it.bytes;
    switch (it.carry) {
    case Carry::whole:
        std::memcpy(slot + kData, it.buf, it.bytes);
        ++whole_;
        break;
    case Carry::read: {
        length |= kRead;
        const uint64_t addr = reinterpret_cast<uintptr_t>(it.buf);
        std::memcpy(slot + kData, &addr, sizeof addr);
        ++read_;
        break;
    }
    case Carry::notice:
        length |= kNotice;
        ++notices_;
        break;
    }
    std::memcpy(slot + kLength, &length, sizeof length);
    __atomic_store_n(reinterpret_cast<uint64_t *>(slot + kSeq), it.seq, __ATOMIC_RELEASE);
    if (it.carry != Carry::read) return true;
    it.posted = true; // done once the receiver has copied it
    return false;
}

ibex_status_t Mailbox::try_receive(Item &it, bool *took) {
    *took = false;
    const auto q = static_cast<size_t>(it.peer);
    const uint8_t *slot = box_ + slot_offset(local_[q], it.seq);
    if (__atomic_load_n(reinterpret_cast<const uint64_t *>(slot + kSeq), __ATOMIC_ACQUIRE) != it.seq) return IBEX_OK;
    uint64_t length;
    std::memcpy(&length, slot + kLength, sizeof length);
    const uint64_t sent = length & ~(kNotice | kRead);
    if (sent != it.bytes || carry_of(length) != it.carry)
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "rank %d sent %llu bytes where this rank expects %zu: the ranks called different collectives, "
                    "counts or types, or a send and its receive differ in length",
                    it.peer, static_cast<unsigned long long>(sent), it.bytes);
    if (it.carry == Carry::whole) std::memcpy(it.buf, slot + kData, it.bytes);
    if (it.carry == Carry::read) {
        uint64_t addr;
        std::memcpy(&addr, slot + kData, sizeof addr);
        IBEX_TRY(cross_copy(pid_[q], it.buf, addr, it.bytes, false, it.peer, "send buffer"));
    }
    // The slot is free again once the sender sees this count (release: the copy is done).
    __atomic_store_n(reinterpret_cast<uint64_t *>(peer_box_[q] + taken_offset(local_[static_cast<size_t>(rank_)])),
                     it.seq, __ATOMIC_RELEASE);
    taken_[q] = it.seq;
    *took = true;
    return IBEX_OK;
}

ibex_status_t Mailbox::poll(bool *done, bool *moved) {
    *done = false;
    *moved = false;
    // In the batch's order: a pair's messages were numbered in it, and each ring is taken
    // in order (a send that waits for room has every later send to that rank behind it; a
    // receive waits for the one before it from the same rank, which comes first here).
    for (Item &it : items_) {
        if (it.done) continue;
        bool took = false;
        if (it.send) {
            took = try_send(it);
        } else if (it.seq == taken_[static_cast<size_t>(it.peer)] + 1) {
            IBEX_TRY(try_receive(it, &took));
        }
        if (!took) continue;
        it.done = true;
        *moved = true;
        --pending_;
    }
    *done = pending_ == 0;
    return IBEX_OK;
}

int Mailbox::waiting_on() const {
    for (const Item &it : items_)
        if (!it.done) return it.peer;
    return -1;
}

std::string Mailbox::stall_detail() const {
    std::string out = "[mailbox:";
    int shown = 0;
    for (const Item &it : items_) {
        if (it.done) continue;
        if (++shown > 4) {
            out += " ...";
            break;
        }
        out += it.send ? " send " + std::to_string(it.seq) + " to rank " + std::to_string(it.peer) +
                             (it.posted ? " (not read yet)" : " (its ring is full)")
                       : " receive " + std::to_string(it.seq) + " from rank " + std::to_string(it.peer) + " (not sent)";
    }
    return out + "]";
}

} // namespace ibex::coll
