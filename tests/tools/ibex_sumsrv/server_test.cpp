// The summation server alone, in this process: the wire format round trip, the thread
// pool's pieces, and what the server refuses (with the reason in the reply) from a raw TCP
// client: a frame that is not a hello, a geometry that disagrees with the job's, and a rank
// that joined already.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/sumsrv_wire.h"
#include "runtime/bootstrap/socket.h"
#include "tools/ibex_sumsrv/reduce_pool.h"
#include "tools/ibex_sumsrv/server.h"

namespace {

using namespace ibex::coll::sumsrv;
namespace boot = ibex::bootstrap;

TEST(SumsrvWire, HelloAndReplyRoundTrip) {
    Hello h;
    h.job = "0123456789abcdef-4";
    h.nranks = 4;
    h.rank = 3;
    h.chunk_bytes = 1 << 20;
    h.slots = 4;
    h.result_addr = 0x7f0012345000ull;
    h.result_rkey = 0xabcdef01u;
    h.ep.udp_port = 4791;
    h.ep.qpn = 0x1234;
    h.ep.mtu = IBEX_MTU_4096;
    h.device = "udp:lo";
    uint8_t frame[kFrameBytes];
    encode_hello(h, frame);
    Hello back;
    std::string why;
    ASSERT_TRUE(decode_hello(frame, &back, &why)) << why;
    EXPECT_EQ(back.job, h.job);
    EXPECT_EQ(back.rank, 3u);
    EXPECT_EQ(back.result_addr, h.result_addr);
    EXPECT_EQ(back.result_rkey, h.result_rkey);
    EXPECT_EQ(back.ep.qpn, 0x1234u);
    EXPECT_EQ(back.device, "udp:lo");
    // A rank outside the world, and a slot geometry out of range, are refused with why.
    h.rank = 4;
    encode_hello(h, frame);
    EXPECT_FALSE(decode_hello(frame, &back, &why));
    EXPECT_NE(why.find("rank 4 of 4"), std::string::npos) << why;
    h.rank = 0;
    h.slots = kMaxSlots + 1;
    encode_hello(h, frame);
    EXPECT_FALSE(decode_hello(frame, &back, &why));
    EXPECT_NE(why.find("slot geometry"), std::string::npos) << why;
    frame[0] ^= 0xff;
    EXPECT_FALSE(decode_hello(frame, &back, &why));
    EXPECT_NE(why.find("magic"), std::string::npos) << why;

    Reply r;
    r.kind = Kind::refused;
    r.text = "no room";
    encode_reply(r, frame);
    Reply rb;
    ASSERT_TRUE(decode_reply(frame, &rb, &why)) << why;
    EXPECT_EQ(rb.kind, Kind::refused);
    EXPECT_EQ(rb.text, "no room");

    uint8_t slot[kSlotHeaderBytes] = {};
    SlotHeader s{kPushMagic, 77, 4096, IBEX_BF16, IBEX_MAX, 0};
    put_slot_header(slot, s);
    const SlotHeader sb = get_slot_header(slot);
    EXPECT_EQ(sb.magic, kPushMagic);
    EXPECT_EQ(sb.seq, 77u);
    EXPECT_EQ(sb.bytes, 4096u);
    EXPECT_EQ(sb.type, IBEX_BF16);
    EXPECT_EQ(sb.op, IBEX_MAX);
}

// A udp device whose RoCEv2 port is taken (by the communicator's own context, or another
// job's) opens on the next free port, which the QP's address carries.
TEST(SumsrvWire, ASecondContextOnATakenAddressMovesToAnotherPort) {
    const std::string device = "udp:127.0.0.77";
    ibex_context_t *first = nullptr, *second = nullptr;
    ASSERT_EQ(open_context(device, &first), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(ibex_open_device(device.c_str(), nullptr, &second), IBEX_ERR_ADDRESS_IN_USE);
    ASSERT_EQ(open_context(device, &second), IBEX_OK) << ibex_last_error();
    uint16_t ports[2] = {};
    ibex_context_t *ctxs[2] = {first, second};
    for (int i = 0; i < 2; ++i) {
        ibex_pd_t *pd = nullptr;
        ibex_cq_t *cq = nullptr;
        ibex_qp_t *qp = nullptr;
        ASSERT_EQ(ibex_alloc_pd(ctxs[i], &pd), IBEX_OK);
        ASSERT_EQ(ibex_create_cq(ctxs[i], 16, &cq), IBEX_OK);
        ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
        qa.send_cq = qa.recv_cq = cq;
        ASSERT_EQ(ibex_create_qp(pd, &qa, &qp), IBEX_OK);
        ibex_ep_addr_t ep{};
        ASSERT_EQ(ibex_qp_local_addr(qp, &ep), IBEX_OK);
        ports[i] = ep.udp_port;
        ibex_destroy_qp(qp);
        ibex_destroy_cq(cq);
        ibex_dealloc_pd(pd);
    }
    EXPECT_EQ(ports[0], 4791);
    EXPECT_GT(ports[1], 4791);
    ibex_close_device(second);
    ibex_close_device(first);
}

// The pieces cover the range once, in order, whatever the thread count; small ranges stay
// on the caller's thread.
TEST(SumsrvPool, PiecesCoverTheRangeOnce) {
    for (int threads : {1, 2, 3, 8}) {
        ibex::sumsrv::ReducePool pool(threads);
        EXPECT_EQ(pool.threads(), threads);
        for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(100003)}) {
            std::vector<std::atomic<int>> hits(count);
            std::atomic<int> calls{0};
            pool.run(count, 100, [&](size_t b, size_t e) {
                ++calls;
                for (size_t i = b; i < e; ++i) ++hits[i];
            });
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, " << count;
            EXPECT_LE(calls.load(), threads);
            if (count < 200) {
                EXPECT_EQ(calls.load(), 1);
            }
        }
    }
}

class ServerOnThread : public ::testing::Test {
protected:
    void SetUp() override {
        ibex::sumsrv::ServerOptions o;
        o.listen = "127.0.0.1:0";
        o.threads = 1;
        o.hello_timeout_ms = 300;
        ASSERT_EQ(server_.open(o), IBEX_OK) << ibex_last_error();
        thread_ = std::thread([this] { server_.run(stop_); });
    }
    void TearDown() override {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    int connect() {
        sockaddr_in addr{};
        EXPECT_EQ(boot::resolve_ipv4("127.0.0.1", server_.port(), &addr), IBEX_OK);
        int fd = -1;
        EXPECT_EQ(boot::connect_tcp(addr, boot::deadline_after_ms(5000), &fd), IBEX_OK);
        return fd;
    }
    // Sends a frame, returns the reply.
    Reply ask(int fd, const uint8_t *frame) {
        EXPECT_TRUE(boot::send_all(fd, frame, kFrameBytes, boot::deadline_after_ms(5000)));
        uint8_t in[kFrameBytes];
        Reply r;
        r.kind = Kind::hello; // "no reply"
        if (!boot::recv_all(fd, in, sizeof in, boot::deadline_after_ms(5000))) return r;
        std::string why;
        EXPECT_TRUE(decode_reply(in, &r, &why)) << why;
        return r;
    }
    Hello hello(uint32_t rank, uint32_t slots) {
        Hello h;
        h.job = "server-test-job";
        h.nranks = 2;
        h.rank = rank;
        h.chunk_bytes = 4096;
        h.slots = slots;
        h.device = "udp:lo";
        h.ep.gid[10] = h.ep.gid[11] = 0xff;
        h.ep.gid[12] = 127;
        h.ep.gid[15] = 1;
        h.ep.udp_port = 4791;
        h.ep.mtu = IBEX_MTU_1024;
        h.ep.qpn = 0x100 + rank;
        return h;
    }

    ibex::sumsrv::Server server_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

TEST_F(ServerOnThread, RefusesWhatDoesNotFitTheJob) {
    uint8_t frame[kFrameBytes];
    // Not a hello at all.
    std::memset(frame, 0x5a, sizeof frame);
    int junk = connect();
    Reply r = ask(junk, frame);
    EXPECT_EQ(r.kind, Kind::refused);
    EXPECT_NE(r.text.find("bad hello"), std::string::npos) << r.text;
    ::close(junk);

    // Rank 0 joins; rank 1 with another slot count and a second rank 0 are refused.
    int first = connect();
    encode_hello(hello(0, 4), frame);
    r = ask(first, frame);
    ASSERT_EQ(r.kind, Kind::welcome) << r.text;
    EXPECT_NE(r.push_rkey, 0u);

    int other = connect();
    encode_hello(hello(1, 2), frame);
    r = ask(other, frame);
    EXPECT_EQ(r.kind, Kind::refused);
    EXPECT_NE(r.text.find("4 slots of 4096 bytes"), std::string::npos) << r.text;
    ::close(other);

    int twice = connect();
    encode_hello(hello(0, 4), frame);
    r = ask(twice, frame);
    EXPECT_EQ(r.kind, Kind::refused);
    EXPECT_NE(r.text.find("joined already"), std::string::npos) << r.text;
    ::close(twice);
    ::close(first);
}

// A connection that never says hello is refused and closed once the hello's time is up.
TEST_F(ServerOnThread, ClosesAConnectionThatNeverSaysHello) {
    const int silent = connect();
    uint8_t in[kFrameBytes];
    ASSERT_TRUE(boot::recv_all(silent, in, sizeof in, boot::deadline_after_ms(5000))) << "no refusal within 5 s";
    Reply r;
    std::string why;
    ASSERT_TRUE(decode_reply(in, &r, &why)) << why;
    EXPECT_EQ(r.kind, Kind::refused);
    EXPECT_NE(r.text.find("no hello within 300 ms"), std::string::npos) << r.text;
    uint8_t byte;
    EXPECT_FALSE(boot::recv_all(silent, &byte, 1, boot::deadline_after_ms(2000))) << "still open";
    ::close(silent);
}

} // namespace
