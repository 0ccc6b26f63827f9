// Google Benchmark suite for the per-packet work of the soft RoCEv2 provider:
//  - ICRC (ISA-L carry-less-multiply CRC-32 plus the masked IP/UDP/BTH prefix), bytes/s;
//  - BTH + RETH encode followed by parse_packet of the whole frame;
//  - the RC engine end to end: two in-process contexts on udp:lo without progress threads,
//    4 KiB RDMA WRITEs (one packet each at MTU 4096) driven by ibex_progress, items/s =
//    packets through requester, UDP loopback, responder and back as ACKs.
#include <benchmark/benchmark.h>
#include <ibex/ibex.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/support/qp_endpoint.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/packet.h"
#include "transport/soft/codec/roce.h"

namespace {

using namespace ibex::roce;

IcrcIpv4Fields fields() {
    IcrcIpv4Fields f;
    f.src_ip = 0x7f000001;
    f.dst_ip = 0x7f000002;
    f.src_port = 49152;
    f.dst_port = kUdpPort;
    return f;
}

void BM_Icrc(benchmark::State &state) {
    const size_t payload = static_cast<size_t>(state.range(0));
    std::vector<uint8_t> pkt(kBthLen + kRethLen + payload, 0x5a);
    const iovec whole{pkt.data(), pkt.size()};
    const IcrcIpv4Fields f = fields();
    for (auto _ : state) {
        uint32_t c = icrc_ipv4(f, std::span<const iovec>(&whole, 1), pkt.size());
        benchmark::DoNotOptimize(c);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(pkt.size()));
}
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096);

// RDMA WRITE ONLY with a RETH and `payload` bytes: encode the headers, then parse the frame.
void BM_EncodeParseWrite(benchmark::State &state) {
    const size_t payload = static_cast<size_t>(state.range(0));
    std::vector<uint8_t> frame(kBthLen + kRethLen + payload + 3 + kIcrcLen, 0);
    uint32_t psn = 0;
    for (auto _ : state) {
        Bth b;
        b.opcode = kWriteOnly;
        b.dest_qp = 0x1234;
        b.psn = psn = psn_add(psn, 1);
        b.ack_req = true;
        b.pad_count = pad_for(payload);
        encode_bth(frame.data(), b);
        encode_reth(frame.data() + kBthLen, Reth{0x7f0000001000ull, 0x101, static_cast<uint32_t>(payload)});
        const size_t len = kBthLen + kRethLen + payload + b.pad_count + kIcrcLen;
        PacketView pv;
        const ParseError e = parse_packet(frame.data(), len, &pv);
        if (e != ParseError::kOk) state.SkipWithError("parse_packet failed");
        benchmark::DoNotOptimize(pv);
    }
    state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(BM_EncodeParseWrite)->Arg(0)->Arg(64)->Arg(4096);

// One endpoint that the benchmark drives itself: no progress thread.
bool open_unprogressed(ibex::test::QpEndpoint &e, size_t len) {
    ibex_context_attr_t a = IBEX_CONTEXT_ATTR_INIT;
    a.progress_thread = 0;
    e.max_send_wr = 1024;
    e.max_recv_wr = 0; // the provider's default: WRITEs need no receives
    e.mr_access = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE;
    return e.open(len, "udp:lo", &a, 4096) == IBEX_OK;
}

// Keeps `depth` 4 KiB writes in flight from a to b, every 32nd signaled; each iteration
// is one packet that went out, was received, checked, placed and acknowledged.
void BM_RcEngineWrite4K(benchmark::State &state) {
    constexpr uint32_t kSize = 4096, kDepth = 256, kSignal = 32;
    ibex::test::QpEndpoint a, b;
    if (!open_unprogressed(a, kSize) || !open_unprogressed(b, kSize) || ibex::test::connect_endpoints(a, b) != IBEX_OK) {
        state.SkipWithError(ibex_last_error());
        return;
    }
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(a.buf.data()), kSize, ibex_mr_lkey(a.mr)};
    ibex_send_wr_t wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data());
    wr.wr.rdma.rkey = ibex_mr_rkey(b.mr);
    uint64_t posted = 0, completed = 0;
    ibex_wc_t wc[16];
    for (auto _ : state) {
        while (posted - completed >= kDepth) {
            ibex_progress(b.ctx);
            int n = 0;
            ibex_poll_cq(a.cq, 16, wc, &n);
            for (int i = 0; i < n; ++i) {
                if (wc[i].status != IBEX_WC_SUCCESS) {
                    state.SkipWithError(ibex_wc_status_str(wc[i].status));
                    return;
                }
                completed = wc[i].wr_id + 1;
            }
        }
        wr.wr_id = posted;
        wr.send_flags = ((posted + 1) % kSignal == 0) ? IBEX_SEND_SIGNALED : 0;
        if (ibex_post_send(a.qp, &wr, nullptr) != IBEX_OK) {
            state.SkipWithError(ibex_last_error());
            return;
        }
        ++posted;
    }
    // Drain (outside the timed loop): the last signaled write and everything before it.
    wr.wr_id = posted++;
    wr.send_flags = IBEX_SEND_SIGNALED;
    ibex_post_send(a.qp, &wr, nullptr);
    for (int spins = 0; completed < posted && spins < 10000000; ++spins) {
        ibex_progress(b.ctx);
        int n = 0;
        ibex_poll_cq(a.cq, 16, wc, &n);
        for (int i = 0; i < n; ++i) completed = wc[i].wr_id + 1;
    }
    state.SetItemsProcessed(int64_t(state.iterations()));
    state.SetBytesProcessed(int64_t(state.iterations()) * kSize);
}
BENCHMARK(BM_RcEngineWrite4K)->UseRealTime()->MinTime(1.0);

// The shm provider's post path alone: 8-byte WRITEs into an ibex_mem_alloc buffer of a
// second context in this process (`map`: the post copies, through the QP's in-place lane
// after the first). Arg 1: signaled, with a CQ poll every 16 posts, as ibex_write_lat's
// ping-pong issues them (the lock is taken after each copy, for the completion); arg 0:
// unsignaled, the lane alone. No peer answers, so this is the part of the 8-byte latency
// that is ibex's own work.
void BM_ShmPostWrite8(benchmark::State &state) {
    const bool signaled = state.range(0) != 0;
    ibex_context_t *ctx[2] = {};
    ibex_pd_t *pd[2] = {};
    ibex_cq_t *cq[2] = {};
    ibex_qp_t *qp[2] = {};
    ibex_mr_t *mr[2] = {};
    void *buf[2] = {};
    auto cleanup = [&] {
        for (int i = 0; i < 2; ++i) {
            if (mr[i]) ibex_dereg_mr(mr[i]);
            if (qp[i]) ibex_destroy_qp(qp[i]);
            if (cq[i]) ibex_destroy_cq(cq[i]);
            if (buf[i]) ibex_mem_free(pd[i], buf[i]);
            if (pd[i]) ibex_dealloc_pd(pd[i]);
            if (ctx[i]) ibex_close_device(ctx[i]);
        }
    };
    auto setup = [&]() -> ibex_status_t {
        for (int i = 0; i < 2; ++i) {
            IBEX_TRY(ibex_open_device("shm", nullptr, &ctx[i]));
            IBEX_TRY(ibex_alloc_pd(ctx[i], &pd[i]));
            IBEX_TRY(ibex_create_cq(ctx[i], 1024, &cq[i]));
            ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
            a.send_cq = a.recv_cq = cq[i];
            a.max_send_wr = 256;
            IBEX_TRY(ibex_create_qp(pd[i], &a, &qp[i]));
            IBEX_TRY(ibex_mem_alloc(pd[i], 4096, &buf[i]));
            IBEX_TRY(ibex_reg_mr(pd[i], buf[i], 4096, ibex::test::kAllAccess, &mr[i]));
        }
        ibex_ep_addr_t addr[2];
        for (int i = 0; i < 2; ++i) IBEX_TRY(ibex_qp_local_addr(qp[i], &addr[i]));
        IBEX_TRY(ibex_qp_connect(qp[0], &addr[1]));
        return ibex_qp_connect(qp[1], &addr[0]);
    };
    if (setup() != IBEX_OK) {
        state.SkipWithError(ibex_last_error());
        cleanup();
        return;
    }
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(buf[0]), 8, ibex_mr_lkey(mr[0])};
    ibex_send_wr_t wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_RDMA_WRITE;
    wr.send_flags = signaled ? IBEX_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf[1]);
    wr.wr.rdma.rkey = ibex_mr_rkey(mr[1]);
    uint64_t posted = 0, completed = 0;
    ibex_wc_t wc[16];
    for (auto _ : state) {
        wr.wr_id = posted++;
        if (ibex_post_send(qp[0], &wr, nullptr) != IBEX_OK) {
            state.SkipWithError(ibex_last_error());
            break;
        }
        if (!signaled) continue;
        if ((posted & 15) == 0 || posted - completed > 128) {
            int n = 0;
            ibex_poll_cq(cq[0], 16, wc, &n);
            completed += static_cast<uint64_t>(n);
        }
        ibex_progress(ctx[0]);
    }
    ibex_counters_t k{};
    k.size = sizeof k;
    state.counters["posted"] = static_cast<double>(posted);
    cleanup();
    state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(BM_ShmPostWrite8)->Arg(1)->Arg(0)->MinTime(1.0);

} // namespace

BENCHMARK_MAIN();
