// Reliability under injected faults, between two processes: 1% loss, 1% reordering,
// 0.5% duplication and 0.1% corruption on BOTH contexts' transmit paths (fixed seeds).
// 10,000 mixed work requests (WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, READ,
// FETCH_AND_ADD, CMP_AND_SWP; 1 B .. 64 KiB; 1-3 SGEs) with at most 256 outstanding must
// all complete successfully, once each, in wr_id order, with every byte right: READs and
// atomics are checked against a model of the child's memory at post time, SENDs are
// checked by the child, and the final remote memory is compared with the model.
//
// Loss recovery: IBEX_TEST_RETRANSMIT=<parent>[:<child>] picks each side's
// IBEX_RETRANSMIT (default: gbn, or whatever IBEX_RETRANSMIT says, on both), so ctest
// runs this suite for gbn/gbn, selective/selective and both mixed pairs
// (interoperability: a selective side facing a go-back-N one).
#include <cstdlib>
#include <map>
#include <sstream>
#include <random>

#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kSlot = 64 * kKiB;
constexpr size_t kSlots = 256;        // = the outstanding-WR bound
constexpr size_t kW = 4 * kKiB * kKiB; // child region for WRITE targets and READ sources
constexpr size_t kAOff = kW;           // child atomics: 512 words
constexpr size_t kAWords = 512;
constexpr size_t kROff = kAOff + kAWords * 8; // child receive slots
constexpr size_t kRSlots = 256;
constexpr size_t kChildBuf = kROff + kRSlots * kSlot;
constexpr uint64_t kWSeed = 777;
constexpr uint64_t kSendSeed0 = 5000000;
constexpr int kTotal = 10000;
constexpr int kDeadlineMs = 50000;

enum class Kind { kWrite, kWriteImm, kSend, kSendImm, kRead, kFetchAdd, kCmpSwap };

struct Planned {
    Kind kind;
    uint32_t len = 0;
    uint64_t roff = 0;   // child offset (WRITE/READ: in W; atomics: in A)
    uint64_t add = 0, cmp = 0, swap = 0;
    uint32_t recv_index = 0; // SEND/WRITE_IMM: which child receive it consumes
    int nsge = 1;
};

ibex_wc_opcode_t wc_opcode(Kind k) {
    switch (k) {
    case Kind::kWrite:
    case Kind::kWriteImm: return IBEX_WC_RDMA_WRITE;
    case Kind::kSend:
    case Kind::kSendImm: return IBEX_WC_SEND;
    case Kind::kRead: return IBEX_WC_RDMA_READ;
    case Kind::kFetchAdd: return IBEX_WC_FETCH_ADD;
    default: return IBEX_WC_COMP_SWAP;
    }
}

const char *kind_name(Kind k) {
    static const char *n[] = {"WRITE", "WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "READ", "FETCH_AND_ADD", "CMP_AND_SWP"};
    return n[static_cast<int>(k)];
}

uint32_t pick_len(std::mt19937_64 &rng) {
    const unsigned r = rng() % 100;
    if (r < 40) return 1 + rng() % 256;
    if (r < 70) return 257 + rng() % (4096 - 256);
    if (r < 90) return 4097 + rng() % (16384 - 4096);
    return 16385 + rng() % (65536 - 16384);
}

std::string env_or(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return v && *v ? v : fallback;
}

// Splits IBEX_TEST_RETRANSMIT before any context opens (ctest passes one variable only).
const bool kModesSet = [] {
    const std::string pair = env_or("IBEX_TEST_RETRANSMIT", "");
    if (pair.empty()) return false;
    const size_t colon = pair.find(':');
    setenv("IBEX_RETRANSMIT", pair.substr(0, colon).c_str(), 1);
    setenv("IBEX_TEST_PEER_RETRANSMIT", colon == std::string::npos ? pair.c_str() : pair.substr(colon + 1).c_str(), 1);
    return true;
}();

TEST(RcFaults, TenThousandMixedWorkRequestsSurviveLossReorderDuplicationCorruption) {
    if (!test_device_injects_faults()) GTEST_SKIP() << test_device() << " injects no faults (nothing is lost between processes of one host)";
    ibex_fault_config_t faults = IBEX_FAULT_CONFIG_INIT;
    faults.loss = 0.01;
    faults.reorder = 0.01;
    faults.duplicate = 0.005;
    faults.corrupt = 0.001;

    RemotePeer peer;
    PeerConfig cfg;
    cfg.buf_bytes = kChildBuf;
    cfg.max_recv_wr = 512;
    cfg.faults = true;
    cfg.fault_cfg = faults;
    cfg.fault_cfg.seed = 0xC41D;
    cfg.timeout = 12;
    cfg.max_seconds = 90;
    const std::string local_mode = env_or("IBEX_RETRANSMIT", "gbn");
    cfg.retransmit = env_or("IBEX_TEST_PEER_RETRANSMIT", local_mode.c_str());
    ASSERT_TRUE(local_mode == "gbn" || local_mode == "selective") << local_mode;
    ASSERT_TRUE(peer.start(cfg)) << peer.error();

    Endpoint local;
    local.max_send_wr = 512;
    local.open(kSlots * kSlot);
    ASSERT_TRUE(local.ok());
    // ~17 ms retransmission timeout so a lost tail packet costs little; retries 7.
    local.choose_timers(12, 7, 7);
    IBEX_ASSERT_OK(local.connect(peer.addr()));
    ASSERT_TRUE(peer.connect(local.addr())) << peer.error();
    faults.seed = 0x9A2E;
    IBEX_ASSERT_OK(ibex_set_faults(local.ctx, &faults));

    // The plan, and the model of the child's memory it implies.
    std::mt19937_64 rng(20240607);
    std::vector<Planned> plan(kTotal);
    uint32_t nrecv = 0;
    for (Planned &p : plan) {
        const unsigned r = rng() % 100;
        p.kind = r < 25   ? Kind::kWrite
                 : r < 32 ? Kind::kWriteImm
                 : r < 47 ? Kind::kSend
                 : r < 55 ? Kind::kSendImm
                 : r < 80 ? Kind::kRead
                 : r < 90 ? Kind::kFetchAdd
                          : Kind::kCmpSwap;
        if (p.kind == Kind::kFetchAdd || p.kind == Kind::kCmpSwap) {
            p.len = 8;
            p.roff = kAOff + (rng() % kAWords) * 8;
            p.add = rng();
            p.swap = rng();
        } else {
            p.len = pick_len(rng);
            p.roff = rng() % (kW - p.len + 1);
            p.nsge = (p.kind == Kind::kRead) ? 1 : 1 + static_cast<int>(rng() % 3);
        }
        if (p.kind == Kind::kSend || p.kind == Kind::kSendImm || p.kind == Kind::kWriteImm) p.recv_index = nrecv++;
    }
    std::vector<uint8_t> model(kW);
    fill_pattern(model.data(), kW, kWSeed);
    std::vector<uint64_t> atomics(kAWords, 0);
    ASSERT_EQ(peer.fill_pattern(0, kW, kWSeed), 0);
    ASSERT_EQ(peer.fill_const(kAOff, kAWords * 8, 0), 0);
    ASSERT_TRUE(peer.recv_loop_start(nrecv, kROff, kSlot, kRSlots, kSendSeed0, kDeadlineMs)) << peer.error();

    std::map<uint64_t, std::vector<uint8_t>> expect_read;
    std::map<uint64_t, uint64_t> expect_atomic;
    std::vector<uint8_t> times_completed(kTotal, 0);
    int posted = 0, completed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(kDeadlineMs);

    // A READ returns the target memory as it is when the responder sends (or, after a
    // loss, re-sends) the response, so a WRITE posted after a READ must not overlap it
    // while the READ is outstanding (IBA: a retried READ may return newer data). WRITE
    // targets are moved off outstanding READ ranges.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> reads_out; // wr_id -> [begin, end)
    auto overlaps_read = [&](uint64_t b, uint64_t e) {
        for (auto &[id, r] : reads_out)
            if (b < r.second && r.first < e) return true;
        return false;
    };
    auto post = [&](int i) -> bool {
        Planned &p = plan[i];
        if (p.kind == Kind::kWrite || p.kind == Kind::kWriteImm) {
            for (int tries = 0; tries < 1000 && overlaps_read(p.roff, p.roff + p.len); ++tries)
                p.roff = rng() % (kW - p.len + 1);
            EXPECT_FALSE(overlaps_read(p.roff, p.roff + p.len)) << "no free spot for WRITE " << i;
        } else if (p.kind == Kind::kRead) {
            reads_out[i] = {p.roff, p.roff + p.len};
        }
        uint8_t *slot = local.buf.data() + (i % kSlots) * kSlot;
        const uint64_t slot_va = local.va((i % kSlots) * kSlot);
        ibex_sge_t sg[3];
        // Split [0, len) into nsge pieces.
        uint32_t cut1 = p.nsge > 1 ? static_cast<uint32_t>(rng() % (p.len + 1)) : p.len;
        uint32_t cut2 = p.nsge > 2 ? cut1 + static_cast<uint32_t>(rng() % (p.len - cut1 + 1)) : p.len;
        const uint32_t cuts[4] = {0, cut1, p.nsge > 2 ? cut2 : p.len, p.len};
        for (int k = 0; k < p.nsge; ++k)
            sg[k] = {slot_va + cuts[k], (k + 1 == p.nsge ? p.len : cuts[k + 1]) - cuts[k], ibex_mr_lkey(local.mr)};
        ibex_send_wr_t wr{};
        wr.wr_id = static_cast<uint64_t>(i);
        wr.sg_list = sg;
        wr.num_sge = p.nsge;
        wr.send_flags = IBEX_SEND_SIGNALED;
        switch (p.kind) {
        case Kind::kWrite:
        case Kind::kWriteImm:
            wr.opcode = p.kind == Kind::kWrite ? IBEX_WR_RDMA_WRITE : IBEX_WR_RDMA_WRITE_WITH_IMM;
            wr.imm_data = 0x80000000u | p.recv_index;
            fill_pattern(slot, p.len, 1000000 + i);
            std::memcpy(model.data() + p.roff, slot, p.len);
            wr.wr.rdma.remote_addr = peer.va(p.roff);
            wr.wr.rdma.rkey = peer.rkey();
            break;
        case Kind::kSend:
        case Kind::kSendImm:
            wr.opcode = p.kind == Kind::kSend ? IBEX_WR_SEND : IBEX_WR_SEND_WITH_IMM;
            wr.imm_data = p.recv_index;
            fill_pattern(slot, p.len, kSendSeed0 + p.recv_index);
            break;
        case Kind::kRead:
            wr.opcode = IBEX_WR_RDMA_READ;
            std::memset(slot, 0xEE, p.len);
            expect_read[i].assign(model.begin() + p.roff, model.begin() + p.roff + p.len);
            wr.wr.rdma.remote_addr = peer.va(p.roff);
            wr.wr.rdma.rkey = peer.rkey();
            break;
        case Kind::kFetchAdd:
        case Kind::kCmpSwap: {
            uint64_t &word = atomics[(p.roff - kAOff) / 8];
            expect_atomic[i] = word;
            wr.opcode = p.kind == Kind::kFetchAdd ? IBEX_WR_ATOMIC_FETCH_AND_ADD : IBEX_WR_ATOMIC_CMP_AND_SWP;
            if (p.kind == Kind::kFetchAdd) {
                wr.wr.atomic.compare_add = p.add;
                word += p.add;
            } else {
                // Half of the compares match.
                p.cmp = (p.add & 1) ? word : word ^ 0x10;
                wr.wr.atomic.compare_add = p.cmp;
                wr.wr.atomic.swap = p.swap;
                if (p.cmp == word) word = p.swap;
            }
            wr.wr.atomic.remote_addr = peer.va(p.roff);
            wr.wr.atomic.rkey = peer.rkey();
            std::memset(slot, 0xEE, 8);
            break;
        }
        }
        const ibex_status_t st = ibex_post_send(local.qp, &wr, nullptr);
        EXPECT_EQ(st, IBEX_OK) << "post " << i << ": " << ibex_last_error();
        return st == IBEX_OK;
    };

    ibex_wc_t wc[64];
    int first_bad = -1;
    std::string bad_why;
    while (completed < kTotal && std::chrono::steady_clock::now() < deadline && first_bad < 0) {
        while (posted < kTotal && posted - completed < static_cast<int>(kSlots))
            if (!post(posted++)) break;
        int got = 0;
        ASSERT_EQ(ibex_poll_cq(local.cq, 64, wc, &got), IBEX_OK);
        for (int k = 0; k < got; ++k) {
            const ibex_wc_t &c = wc[k];
            if (c.wr_id < static_cast<uint64_t>(kTotal)) ++times_completed[c.wr_id];
            if (first_bad >= 0) continue;
            std::ostringstream why;
            if (c.wr_id != static_cast<uint64_t>(completed))
                why << "completion for wr " << c.wr_id << " while " << completed << " was next";
            else if (c.status != IBEX_WC_SUCCESS)
                why << "wr " << c.wr_id << " (" << kind_name(plan[c.wr_id].kind) << ", " << plan[c.wr_id].len
                    << " B) completed with " << ibex_wc_status_str(c.status);
            else if (c.opcode != wc_opcode(plan[c.wr_id].kind))
                why << "wr " << c.wr_id << " has opcode " << c.opcode;
            if (why.str().empty()) {
                const Planned &p = plan[c.wr_id];
                const uint8_t *slot = local.buf.data() + (c.wr_id % kSlots) * kSlot;
                if (p.kind == Kind::kRead) {
                    auto &e = expect_read[c.wr_id];
                    if (std::memcmp(slot, e.data(), p.len) != 0) {
                        size_t at = 0;
                        while (slot[at] == e[at]) ++at;
                        why << "READ " << c.wr_id << " of " << p.len << " B at child offset " << p.roff
                            << " returned wrong data from byte " << at << "; matches the model as of now: "
                            << (std::memcmp(slot, model.data() + p.roff, p.len) == 0) << "; posted " << posted;
                    }
                    expect_read.erase(c.wr_id);
                    reads_out.erase(c.wr_id);
                } else if (p.kind == Kind::kFetchAdd || p.kind == Kind::kCmpSwap) {
                    uint64_t v;
                    std::memcpy(&v, slot, 8);
                    if (v != expect_atomic[c.wr_id])
                        why << "atomic " << c.wr_id << " returned " << v << ", expected " << expect_atomic[c.wr_id];
                    expect_atomic.erase(c.wr_id);
                }
            }
            if (!why.str().empty()) {
                first_bad = static_cast<int>(c.wr_id);
                bad_why = why.str();
            }
            ++completed;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_LT(first_bad, 0) << bad_why;
    ASSERT_EQ(completed, kTotal) << "only " << completed << " of " << kTotal << " completed in " << secs
                                 << " s (posted " << posted << ")";
    // Nothing completes twice, including late duplicates.
    auto extra = local.wait(1, 200);
    for (auto &c : extra)
        if (c.wr_id < static_cast<uint64_t>(kTotal)) ++times_completed[c.wr_id];
    EXPECT_TRUE(extra.empty()) << "extra completion for wr " << extra[0].wr_id;
    for (int i = 0; i < kTotal; ++i) ASSERT_EQ(times_completed[i], 1) << "wr " << i;

    // The child saw every SEND / WRITE_WITH_IMM once, in order, with the right bytes.
    auto recs = peer.recv_loop_finish(kDeadlineMs);
    ASSERT_EQ(recs.size(), nrecv) << peer.error();
    {
        uint32_t k = 0;
        for (const Planned &p : plan) {
            if (p.kind != Kind::kSend && p.kind != Kind::kSendImm && p.kind != Kind::kWriteImm) continue;
            const RecvRecord &r = recs[k];
            SCOPED_TRACE(testing::Message() << "receive " << k << " (" << kind_name(p.kind) << ", " << p.len
                                            << " B): status " << r.status << " len " << r.byte_len << " opcode "
                                            << r.opcode << " imm " << r.imm << " mismatches " << r.mismatches);
            ASSERT_EQ(r.status, static_cast<uint32_t>(IBEX_WC_SUCCESS)) << ibex_wc_status_str(ibex_wc_status_t(r.status));
            ASSERT_EQ(r.mismatches, 0u) << (r.mismatches == 0xffffffffu ? "out of order" : "bytes differ");
            ASSERT_EQ(r.byte_len, p.len);
            if (p.kind == Kind::kWriteImm) {
                ASSERT_EQ(r.opcode, static_cast<uint32_t>(IBEX_WC_RECV_RDMA_WITH_IMM));
                ASSERT_EQ(r.imm, 0x80000000u | k);
            } else {
                ASSERT_EQ(r.opcode, static_cast<uint32_t>(IBEX_WC_RECV));
                ASSERT_EQ(static_cast<bool>(r.flags & IBEX_WC_WITH_IMM), p.kind == Kind::kSendImm);
                if (p.kind == Kind::kSendImm) {
                    ASSERT_EQ(r.imm, k);
                }
            }
            ++k;
        }
    }

    // The child's memory is exactly what the model says.
    std::vector<uint8_t> got;
    ASSERT_TRUE(peer.get_bytes(0, kW, got)) << peer.error();
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < kW; ++i)
        if (got[i] != model[i] && !bad++) first = i;
    EXPECT_EQ(bad, 0u) << "WRITE region differs from the model; first at " << first;
    ASSERT_TRUE(peer.get_bytes(kAOff, kAWords * 8, got)) << peer.error();
    EXPECT_EQ(0, std::memcmp(got.data(), atomics.data(), kAWords * 8)) << "atomic words differ from the model";

    // The faults really happened and the recovery machinery really ran.
    ibex_counters_t mine = local.counters(), theirs{};
    ASSERT_TRUE(peer.counters(theirs)) << peer.error();
    std::printf("faults test: %d WRs in %.2f s\n", kTotal, secs);
    std::printf("  parent: faults %llu retx %llu seq_naks_rcvd %llu timeouts %llu icrc_err %llu dup_req %llu oos %llu rnr_rcvd %llu\n",
                (unsigned long long)mine.faults_injected, (unsigned long long)mine.retransmitted_packets,
                (unsigned long long)mine.packet_seq_err, (unsigned long long)mine.local_ack_timeout_err,
                (unsigned long long)mine.rx_icrc_errors, (unsigned long long)mine.duplicate_request,
                (unsigned long long)mine.out_of_sequence, (unsigned long long)mine.rnr_nak_received);
    std::printf("  child:  faults %llu icrc_err %llu dup_req %llu oos %llu rnr_sent %llu tx %llu rx %llu\n",
                (unsigned long long)theirs.faults_injected, (unsigned long long)theirs.rx_icrc_errors,
                (unsigned long long)theirs.duplicate_request, (unsigned long long)theirs.out_of_sequence,
                (unsigned long long)theirs.rnr_nak_sent, (unsigned long long)theirs.tx_packets,
                (unsigned long long)theirs.rx_packets);
    EXPECT_GT(mine.faults_injected, 0u);
    EXPECT_GT(theirs.faults_injected, 0u);
    EXPECT_GT(mine.retransmitted_packets, 0u) << "losses must have caused retransmissions";
    EXPECT_GT(mine.rx_icrc_errors + theirs.rx_icrc_errors, 0u) << "corrupted packets must fail the ICRC check";
    EXPECT_GT(theirs.duplicate_request, 0u) << "duplicated requests must be seen as duplicates";
    EXPECT_GT(theirs.out_of_sequence, 0u) << "lost/reordered requests must leave gaps";
    EXPECT_EQ(theirs.remote_access_errors, 0u);
    EXPECT_LT(secs, 50.0);

    // The mode each side was asked for is the one that ran.
    ibex_qp_retransmit_t rt{};
    rt.size = sizeof rt;
    IBEX_ASSERT_OK(ibex_query_qp_retransmit(local.qp, &rt));
    EXPECT_EQ(rt.mode, local_mode == "selective" ? uint32_t(IBEX_RETRANSMIT_SELECTIVE) : uint32_t(IBEX_RETRANSMIT_GBN));
    EXPECT_EQ(rt.packets_resent, mine.retransmitted_packets) << "one QP: its counters are the context's";
    std::printf("  recovery: parent %s, child %s; child held %llu out of order, sent %llu sequence NAKs; parent tail timeouts %llu\n",
                local_mode.c_str(), cfg.retransmit.c_str(), (unsigned long long)theirs.ooo_packets_held,
                (unsigned long long)theirs.seq_naks_sent, (unsigned long long)mine.tail_timeouts);
    if (cfg.retransmit == "selective") {
        EXPECT_GT(theirs.ooo_packets_held, 0u) << "a selective responder holds what arrives past a hole";
    } else {
        EXPECT_EQ(theirs.ooo_packets_held, 0u) << "a go-back-N responder holds nothing";
    }
    EXPECT_GT(theirs.seq_naks_sent, 0u);
    if (local_mode != "selective") {
        EXPECT_EQ(mine.tail_timeouts, 0u) << "RTO_low is selective mode's";
    }

    const int code = peer.finish();
    EXPECT_EQ(code, 0) << "child " << ChildProcess::describe(code);
}

// ---------------------------------------------------------------------------------------
// Focused in-process cases: two contexts in this process, faults on both.

class RcFaultsInProcess : public ::testing::Test {
protected:
    void SetUp() override {
        if (!test_device_injects_faults()) GTEST_SKIP() << test_device() << " injects no faults (nothing is lost between processes of one host)";
        a.open(24 << 20);
        b.open(24 << 20);
        ASSERT_TRUE(a.ok() && b.ok());
        a.choose_timers(12, 7, 7);
        b.choose_timers(12, 7, 7);
        connect_pair(a, b);
    }
    void faults(Endpoint &e, double loss, double reorder, double dup, double corrupt, uint64_t seed) {
        ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
        f.loss = loss;
        f.reorder = reorder;
        f.duplicate = dup;
        f.corrupt = corrupt;
        f.seed = seed;
        IBEX_ASSERT_OK(ibex_set_faults(e.ctx, &f));
    }
    Endpoint a, b;
};

// Many atomics in flight while the responder's acknowledgements are lost: a retried
// atomic must be answered from the responder's replay state, never executed twice and
// never dropped for good.
TEST_F(RcFaultsInProcess, ManyOutstandingAtomicsWithLostAcknowledgements) {
    faults(b, 0.10, 0.0, 0.0, 0.0, 7); // 10% of b's responses lost
    constexpr int kN = 400;
    std::memset(b.buf.data(), 0, 64);
    int posted = 0, done = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::vector<uint64_t> seen;
    while (done < kN && std::chrono::steady_clock::now() < end) {
        while (posted < kN && posted - done < 128) {
            ASSERT_EQ(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, posted, 4096 + (posted % 256) * 8, b.va(0), ibex_mr_rkey(b.mr), 1),
                      IBEX_OK)
                << ibex_last_error();
            ++posted;
        }
        for (auto &c : a.wait(1, 50)) {
            ASSERT_EQ(c.status, IBEX_WC_SUCCESS) << "wr " << c.wr_id << ": " << ibex_wc_status_str(c.status);
            ASSERT_EQ(c.wr_id, static_cast<uint64_t>(done));
            uint64_t v;
            std::memcpy(&v, a.buf.data() + 4096 + (c.wr_id % 256) * 8, 8);
            ASSERT_EQ(v, static_cast<uint64_t>(done)) << "FETCH_AND_ADD executed twice or out of order";
            ++done;
        }
    }
    ASSERT_EQ(done, kN);
    uint64_t fin;
    std::memcpy(&fin, b.buf.data(), 8);
    EXPECT_EQ(fin, static_cast<uint64_t>(kN));
    EXPECT_GT(b.counters().duplicate_request, 0u);
}

// Multi-megabyte messages (a READ spans many response windows) with faults both ways.
TEST_F(RcFaultsInProcess, LargeMessagesUnderFaults) {
    faults(a, 0.01, 0.01, 0.005, 0.001, 11);
    faults(b, 0.01, 0.01, 0.005, 0.001, 12);
    constexpr size_t kLen = 4 << 20;
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        // WRITE a -> b
        fill_pattern(a.buf.data(), kLen, 300 + round);
        ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, kLen, b.va(kLen), ibex_mr_rkey(b.mr)), IBEX_OK);
        auto wc = a.wait(1, 20000);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(check_pattern(b.buf.data() + kLen, kLen, 300 + round), 0u);
        // READ b -> a
        fill_pattern(b.buf.data() + 3 * kLen, kLen, 400 + round);
        ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_READ, 2, kLen, kLen, b.va(3 * kLen), ibex_mr_rkey(b.mr)), IBEX_OK);
        wc = a.wait(1, 20000);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(check_pattern(a.buf.data() + kLen, kLen, 400 + round), 0u);
        // SEND b -> a
        ASSERT_EQ(a.post_recv(3, 2 * kLen, kLen + 1), IBEX_OK);
        fill_pattern(b.buf.data() + 5 * kLen, kLen, 500 + round);
        ASSERT_EQ(b.post_rdma(IBEX_WR_SEND, 4, 5 * kLen, kLen, 0, 0), IBEX_OK);
        wc = b.wait(1, 20000);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        wc = a.wait(1, 20000);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS);
        ASSERT_EQ(wc[0].byte_len, kLen);
        EXPECT_EQ(check_pattern(a.buf.data() + 2 * kLen, kLen, 500 + round), 0u);
    }
    EXPECT_GT(a.counters().retransmitted_packets + b.counters().retransmitted_packets, 0u);
}

} // namespace
