// ibv_wc_status / opcode mapping and work request conversion.
#include <arpa/inet.h>
#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

TEST(VerbsWorkMap, EveryVerbsStatusMapsToTheSameNamedStatus) {
    for (int s = IBV_WC_SUCCESS; s <= IBV_WC_GENERAL_ERR; ++s) {
        const ibex_wc_status_t m = map_wc_status(s);
        EXPECT_EQ(int(m), s);
        // The names agree too: "IBV_WC_..." from ibex, the verbs text from rdma-core.
        EXPECT_STRNE(ibex_wc_status_str(m), "") << s;
    }
    EXPECT_STREQ(ibex_wc_status_str(map_wc_status(IBV_WC_RETRY_EXC_ERR)), "IBV_WC_RETRY_EXC_ERR");
    EXPECT_STREQ(ibex_wc_status_str(map_wc_status(IBV_WC_REM_ACCESS_ERR)), "IBV_WC_REM_ACCESS_ERR");
    // Statuses added to verbs after GENERAL_ERR (tag matching) and garbage.
    EXPECT_EQ(map_wc_status(IBV_WC_TM_ERR), IBEX_WC_GENERAL_ERR);
    EXPECT_EQ(map_wc_status(IBV_WC_TM_RNDV_INCOMPLETE), IBEX_WC_GENERAL_ERR);
    EXPECT_EQ(map_wc_status(-1), IBEX_WC_GENERAL_ERR);
    EXPECT_EQ(map_wc_status(1000), IBEX_WC_GENERAL_ERR);
}

TEST(VerbsWorkMap, Opcodes) {
    ibex_wc_opcode_t op;
    const std::pair<int, ibex_wc_opcode_t> known[] = {
        {IBV_WC_SEND, IBEX_WC_SEND},           {IBV_WC_RDMA_WRITE, IBEX_WC_RDMA_WRITE},
        {IBV_WC_RDMA_READ, IBEX_WC_RDMA_READ}, {IBV_WC_COMP_SWAP, IBEX_WC_COMP_SWAP},
        {IBV_WC_FETCH_ADD, IBEX_WC_FETCH_ADD}, {IBV_WC_RECV, IBEX_WC_RECV},
        {IBV_WC_RECV_RDMA_WITH_IMM, IBEX_WC_RECV_RDMA_WITH_IMM}};
    for (auto [v, e] : known) {
        ASSERT_TRUE(map_wc_opcode(v, &op)) << v;
        EXPECT_EQ(op, e);
    }
    EXPECT_FALSE(map_wc_opcode(IBV_WC_BIND_MW, &op));
    EXPECT_FALSE(map_wc_opcode(IBV_WC_LOCAL_INV, &op));
    EXPECT_FALSE(map_wc_opcode(IBV_WC_TSO, &op));
}

TEST(VerbsWorkMap, CompletionConversion) {
    ibv_wc in{};
    in.wr_id = 77;
    in.status = IBV_WC_SUCCESS;
    in.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    in.byte_len = 4096;
    in.qp_num = 0x12;
    in.src_qp = 0x34;
    in.wc_flags = IBV_WC_WITH_IMM | IBV_WC_GRH;
    in.imm_data = htonl(0xdeadbeef);
    ibex_wc_t out;
    convert_wc(in, &out);
    EXPECT_EQ(out.wr_id, 77u);
    EXPECT_EQ(out.status, IBEX_WC_SUCCESS);
    EXPECT_EQ(out.opcode, IBEX_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(out.byte_len, 4096u);
    EXPECT_EQ(out.imm_data, 0xdeadbeefu); // host order
    EXPECT_EQ(out.wc_flags, unsigned(IBEX_WC_WITH_IMM)); // GRH is not an ibex flag
    EXPECT_EQ(out.src_qp, 0x34u);

    in.status = IBV_WC_WR_FLUSH_ERR;
    in.opcode = static_cast<ibv_wc_opcode>(0x7f); // undefined on error completions
    in.vendor_err = 0x249;
    convert_wc(in, &out);
    EXPECT_EQ(out.status, IBEX_WC_WR_FLUSH_ERR);
    EXPECT_EQ(out.opcode, IBEX_WC_SEND);
    EXPECT_EQ(out.vendor_err, 0x249u);
    EXPECT_EQ(out.imm_data, 0u);
}

TEST(VerbsWorkMap, ErrnoToStatus) {
    EXPECT_EQ(status_from_errno(0), IBEX_OK);
    EXPECT_EQ(status_from_errno(ENOMEM), IBEX_ERR_NO_MEMORY);
    EXPECT_EQ(status_from_errno(EINVAL), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(status_from_errno(EOPNOTSUPP), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(status_from_errno(ENODEV), IBEX_ERR_NO_DEVICE);
    EXPECT_EQ(status_from_errno(EBUSY), IBEX_ERR_INVALID_STATE);
    EXPECT_EQ(status_from_errno(EIO), IBEX_ERR_SYSTEM);
}

TEST(VerbsWorkMap, SendChainEveryOpcode) {
    ibex_sge_t sge[2] = {{0x1000, 64, 0x11}, {0x2000, 8, 0x22}};
    ibex_send_wr_t wr[7] = {};
    for (int i = 0; i < 7; ++i) {
        wr[i].wr_id = 100 + i;
        wr[i].opcode = static_cast<ibex_wr_opcode_t>(i);
        wr[i].sg_list = sge;
        wr[i].num_sge = 2;
        wr[i].send_flags = IBEX_SEND_SIGNALED | (i == 4 ? IBEX_SEND_FENCE : 0);
        wr[i].imm_data = 0x01020304;
        if (i >= IBEX_WR_ATOMIC_CMP_AND_SWP) {
            wr[i].wr.atomic.remote_addr = 0x9000;
            wr[i].wr.atomic.compare_add = 5;
            wr[i].wr.atomic.swap = 6;
            wr[i].wr.atomic.rkey = 0x77;
        } else {
            wr[i].wr.rdma.remote_addr = 0x8000 + i;
            wr[i].wr.rdma.rkey = 0x66;
        }
        if (i) wr[i - 1].next = &wr[i];
    }
    ibv_send_wr out[8];
    ASSERT_EQ(convert_send_chain(wr, out, 8), 7);
    const ibv_wr_opcode expect[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
                                    IBV_WR_RDMA_READ,  IBV_WR_ATOMIC_CMP_AND_SWP,  IBV_WR_ATOMIC_FETCH_AND_ADD};
    for (int i = 0; i < 7; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(out[i].wr_id, uint64_t(100 + i));
        EXPECT_EQ(out[i].opcode, expect[i]);
        EXPECT_EQ(out[i].next, i < 6 ? &out[i + 1] : nullptr);
        EXPECT_EQ(out[i].num_sge, 2);
        EXPECT_EQ(out[i].sg_list[1].addr, 0x2000u);
        EXPECT_EQ(out[i].sg_list[1].lkey, 0x22u);
        EXPECT_EQ(out[i].send_flags, unsigned(IBV_SEND_SIGNALED | (i == 4 ? IBV_SEND_FENCE : 0)));
        const bool imm = i == 1 || i == 3;
        EXPECT_EQ(out[i].imm_data, imm ? htonl(0x01020304) : 0u);
        if (i >= 5) {
            EXPECT_EQ(out[i].wr.atomic.remote_addr, 0x9000u);
            EXPECT_EQ(out[i].wr.atomic.compare_add, 5u);
            EXPECT_EQ(out[i].wr.atomic.swap, 6u);
            EXPECT_EQ(out[i].wr.atomic.rkey, 0x77u);
        } else {
            EXPECT_EQ(out[i].wr.rdma.remote_addr, uint64_t(0x8000 + i));
            EXPECT_EQ(out[i].wr.rdma.rkey, 0x66u);
        }
    }
    // A batch stops at its size and leaves the rest of the chain alone.
    ASSERT_EQ(convert_send_chain(wr, out, 3), 3);
    EXPECT_EQ(out[2].next, nullptr);
    EXPECT_EQ(wr[2].next, &wr[3]);
}

TEST(VerbsWorkMap, RecvChain) {
    ibex_sge_t sge = {0x1000, 64, 0x11};
    ibex_recv_wr_t wr[3] = {};
    for (int i = 0; i < 3; ++i) {
        wr[i].wr_id = i;
        wr[i].sg_list = &sge;
        wr[i].num_sge = 1;
        if (i) wr[i - 1].next = &wr[i];
    }
    ibv_recv_wr out[3];
    ASSERT_EQ(convert_recv_chain(wr, out, 3), 3);
    EXPECT_EQ(out[0].next, &out[1]);
    EXPECT_EQ(out[2].next, nullptr);
    EXPECT_EQ(out[2].sg_list->length, 64u);
}

// A device that takes WRs until it is "full" after `room` of them (ENOMEM), recording
// the batch sizes it was handed.
struct FakeSendQueue {
    int room;
    std::vector<int> batches;
    std::vector<uint64_t> posted;
    int operator()(ibv_send_wr *w, ibv_send_wr **bad) {
        int n = 0;
        for (ibv_send_wr *x = w; x; x = x->next, ++n) {
            if (room == 0) {
                batches.push_back(n);
                *bad = x;
                return ENOMEM;
            }
            --room;
            posted.push_back(x->wr_id);
        }
        batches.push_back(n);
        return 0;
    }
};

struct SendChain {
    ibex_sge_t sge{0x1000, 8, 1};
    std::vector<ibex_send_wr_t> wr;
    explicit SendChain(int n) : wr(static_cast<size_t>(n)) {
        for (int i = 0; i < n; ++i) {
            wr[i].wr_id = static_cast<uint64_t>(i);
            wr[i].opcode = IBEX_WR_SEND;
            wr[i].sg_list = &sge;
            wr[i].num_sge = 1;
            wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
        }
    }
};

TEST(VerbsWorkMap, PostsLongChainsInBatches) {
    SendChain c(70);
    FakeSendQueue q{1000, {}, {}};
    ibex_send_wr_t *bad = &c.wr[5];
    ASSERT_EQ(post_send_chain(c.wr.data(), &bad, 7, std::ref(q)), IBEX_OK);
    EXPECT_EQ(bad, nullptr);
    EXPECT_EQ(q.batches, (std::vector<int>{kPostBatch, kPostBatch, 70 - 2 * kPostBatch}));
    ASSERT_EQ(q.posted.size(), 70u);
    for (size_t i = 0; i < 70; ++i) EXPECT_EQ(q.posted[i], i);
}

TEST(VerbsWorkMap, QueueFullPointsAtTheFirstWrNotPosted) {
    SendChain c(50);
    FakeSendQueue q{40, {}, {}}; // full in the middle of the second batch
    ibex_send_wr_t *bad = nullptr;
    EXPECT_EQ(post_send_chain(c.wr.data(), &bad, 7, std::ref(q)), IBEX_ERR_QUEUE_FULL);
    EXPECT_EQ(bad, &c.wr[40]);
    EXPECT_EQ(q.posted.size(), 40u);
    EXPECT_NE(std::string(ibex_last_error()).find("QP 0x7"), std::string::npos) << ibex_last_error();
}

TEST(VerbsWorkMap, InvalidWrStopsTheChainAfterPostingWhatPrecedesIt) {
    SendChain c(40);
    c.wr[35].opcode = static_cast<ibex_wr_opcode_t>(42);
    FakeSendQueue q{1000, {}, {}};
    ibex_send_wr_t *bad = nullptr;
    EXPECT_EQ(post_send_chain(c.wr.data(), &bad, 7, std::ref(q)), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bad, &c.wr[35]);
    EXPECT_EQ(q.posted.size(), 35u);
    EXPECT_NE(std::string(ibex_last_error()).find("opcode 42"), std::string::npos) << ibex_last_error();

    ibex_sge_t sge{0x1000, 8, 1};
    ibex_recv_wr_t r[3] = {};
    for (int i = 0; i < 3; ++i) {
        r[i].sg_list = &sge;
        r[i].num_sge = 1;
        if (i < 2) r[i].next = &r[i + 1];
    }
    r[0].num_sge = -1;
    int calls = 0;
    ibex_recv_wr_t *rbad = nullptr;
    EXPECT_EQ(post_recv_chain(r, &rbad, 7, [&](ibv_recv_wr *, ibv_recv_wr **) { return ++calls, 0; }),
              IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbad, &r[0]);
    EXPECT_EQ(calls, 0); // nothing before it to post
}

} // namespace
} // namespace ibex::verbs
