// Drives libnccl-net-ibex.so the way NCCL's proxy thread does, from two processes (a
// receiver and a sender, over udp:lo): dlopen, init, listen -> handle -> connect/accept
// polled until they return a comm, regMr, many isend/irecv in flight (NULL requests are
// retried, as NCCL does), test until done, iflush, deregMr and the closes. Every size
// from 1 B to 64 MiB is sent and checked byte for byte, grouped receives with tags in
// shuffled order included. Misuse (stale handles, closed comms, garbage) must return an
// error code, never crash.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "plugins/nccl-net/nccl_net_abi.h"

namespace {

using Clock = std::chrono::steady_clock;

// What the plugin logged in this process (each child has its own), and the traffic class
// a v10 connect or a v11 init passes in NCCL's per-comm config (-1: undefined).
std::vector<std::string> g_log;
int g_config_traffic_class = -1;

void logger(ncclDebugLogLevel level, unsigned long, const char *file, int line, const char *fmt, ...) {
    char text[600];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (g_log.size() < 1000)
        g_log.emplace_back(text);
    if (level != NCCL_LOG_WARN && std::getenv("IBEX_TEST_NCCL_INFO") == nullptr)
        return;
    std::fprintf(stderr, "[plugin %s:%d] %s\n", file, line, text);
}

bool logged(const std::string &what) {
    for (const std::string &line : g_log)
        if (line.find(what) != std::string::npos)
            return true;
    return false;
}

// One version's table behind size_t-based calls, so a test body runs on any of them.
// Entries at the same place with the same signature are called through the oldest table
// that has them (v8: accept, regMr...; v10: isend, irecv).
class Net {
public:
    explicit Net(int version) : version_(version) {
        so_ = dlopen(IBEX_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
        if (so_ == nullptr)
            return;
        const std::string sym = "ncclNetPlugin_v" + std::to_string(version);
        table_ = dlsym(so_, sym.c_str());
    }
    bool loaded() const { return table_ != nullptr; }
    const ncclNet_v8_t *v8() const { return static_cast<const ncclNet_v8_t *>(table_); }
    const ncclNet_v9_t *v9() const { return static_cast<const ncclNet_v9_t *>(table_); }
    const ncclNet_v10_t *v10() const { return static_cast<const ncclNet_v10_t *>(table_); }
    const ncclNet_v11_t *v11() const { return static_cast<const ncclNet_v11_t *>(table_); }
    const ncclNet_v12_t *v12() const { return static_cast<const ncclNet_v12_t *>(table_); }
    void *context() const { return ctx_; }

    ncclResult_t init() {
        if (version_ >= 11) {
            ncclNetCommConfig_v11_t config{g_config_traffic_class};
            return v11()->init(&ctx_, 0x1b3c0ffeeull, &config, logger, nullptr);
        }
        return version_ == 10 ? v10()->init(logger, nullptr) : v9()->init(logger); // v8, v9: same slot
    }
    ncclResult_t finalize() { return v11()->finalize(ctx_); }
    ncclResult_t listen(void *handle, void **lc) {
        return version_ >= 11 ? v11()->listen(ctx_, 0, handle, lc) : v8()->listen(0, handle, lc);
    }
    ncclResult_t connect(void *handle, void **sc) {
        if (version_ >= 11)
            return v11()->connect(ctx_, 0, handle, sc, nullptr);
        ncclNetCommConfig_v10_t config{g_config_traffic_class};
        return version_ == 10 ? v10()->connect(0, &config, handle, sc, nullptr)
                              : v8()->connect(0, handle, sc, nullptr);
    }
    ncclResult_t accept(void *lc, void **rc) { return v8()->accept(lc, rc, nullptr); }
    ncclResult_t reg(void *comm, void *data, size_t size, void **mh) {
        return v8()->regMr(comm, data, size, NCCL_PTR_HOST, mh);
    }
    ncclResult_t dereg(void *comm, void *mh) { return v8()->deregMr(comm, mh); }
    ncclResult_t isend(void *sc, void *data, size_t size, int tag, void *mh, void **req) {
        if (version_ == 8)
            return v8()->isend(sc, data, static_cast<int>(size), tag, mh, req);
        if (version_ == 9)
            return v9()->isend(sc, data, size, tag, mh, req);
        return v10()->isend(sc, data, size, tag, mh, nullptr, req);
    }
    ncclResult_t irecv(void *rc, int n, void **data, const size_t *sizes, int *tags, void **mh, void **req) {
        if (version_ == 8) {
            int s[8];
            for (int i = 0; i < n; ++i)
                s[i] = static_cast<int>(sizes[i]);
            return v8()->irecv(rc, n, data, s, tags, mh, req);
        }
        std::vector<size_t> s(sizes, sizes + n);
        if (version_ == 9)
            return v9()->irecv(rc, n, data, s.data(), tags, mh, req);
        return v10()->irecv(rc, n, data, s.data(), tags, mh, nullptr, req);
    }
    ncclResult_t test(void *req, int *done, int *sizes) { return v8()->test(req, done, sizes); }
    ncclResult_t iflush(void *rc, int n, void **data, int *sizes, void **mh, void **req) {
        return v8()->iflush(rc, n, data, sizes, mh, req);
    }
    ncclResult_t close_send(void *c) { return v8()->closeSend(c); }
    ncclResult_t close_recv(void *c) { return v8()->closeRecv(c); }
    ncclResult_t close_listen(void *c) { return v8()->closeListen(c); }

private:
    int version_;
    void *so_ = nullptr;
    void *table_ = nullptr;
    void *ctx_ = nullptr;
};

#define CHILD_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__, #cond);                 \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fprintf(stderr, "\n");                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

// Forks `body` into a child with udp:lo as the plugin's device; returns its pid.
pid_t spawn(const std::function<int()> &body) {
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("IBEX_NCCL_DEVICES", "udp:lo", 1);
        std::fflush(stderr);
        _exit(body());
    }
    return pid;
}

// Exit codes of the children, or -1 for one killed at the deadline.
std::vector<int> wait_all(const std::vector<pid_t> &pids, int seconds) {
    std::vector<int> codes(pids.size(), -2);
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    size_t left = pids.size();
    while (left > 0 && Clock::now() < deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
            int status = 0;
            if (codes[i] == -2 && waitpid(pids[i], &status, WNOHANG) == pids[i]) {
                codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                --left;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] == -2) {
            kill(pids[i], SIGKILL);
            (void)waitpid(pids[i], nullptr, 0);
            codes[i] = -1;
        }
    }
    return codes;
}

// The sizes the transfer test sends, in order: 1 B, then every power of two to 64 MiB
// with its odd neighbours below 1 MiB.
std::vector<size_t> transfer_sizes(size_t largest) {
    std::vector<size_t> sizes;
    for (size_t s = 1; s <= largest; s *= 2) {
        if (s > 2 && s <= (1u << 20))
            sizes.push_back(s - 1);
        sizes.push_back(s);
        if (s > 1 && s <= (1u << 20))
            sizes.push_back(s + 1);
    }
    return sizes;
}

uint8_t pattern(size_t message, size_t byte) {
    return static_cast<uint8_t>(message * 131 + byte * 7 + (byte >> 9));
}

// Every 5th message is a group of four receives (tags 100..103) of a quarter each.
int group_of(size_t message) { return message % 5 == 4 ? 4 : 1; }
size_t part_size(size_t total, int parts, int k) {
    const size_t base = total / static_cast<size_t>(parts);
    return k == parts - 1 ? total - base * static_cast<size_t>(parts - 1) : base;
}

bool spin_until(const std::function<bool()> &f, int seconds) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline)
        if (f())
            return true;
    return false;
}

// Sets up a connected pair: the receiver listens and writes the handle to `pipe_out`,
// the sender reads it and connects. Each side polls as NCCL's proxy does.
int receiver_setup(Net &net, int pipe_out, void **listen_comm, void **recv_comm) {
    CHILD_CHECK(net.init() == ncclSuccess, "init");
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    CHILD_CHECK(net.listen(handle, listen_comm) == ncclSuccess, "listen");
    CHILD_CHECK(write(pipe_out, handle, sizeof(handle)) == sizeof(handle), "handle to sender");
    *recv_comm = nullptr;
    CHILD_CHECK(spin_until([&] { return net.accept(*listen_comm, recv_comm) == ncclSuccess && *recv_comm; }, 30),
                "accept");
    return 0;
}

int sender_setup(Net &net, int pipe_in, void **send_comm) {
    CHILD_CHECK(net.init() == ncclSuccess, "init");
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    CHILD_CHECK(read(pipe_in, handle, sizeof(handle)) == sizeof(handle), "handle from receiver");
    *send_comm = nullptr;
    CHILD_CHECK(spin_until([&] { return net.connect(handle, send_comm) == ncclSuccess && *send_comm; }, 30),
                "connect");
    return 0;
}

constexpr int kWindow = 24; // requests in flight per side (NCCL allows 32 per comm)

// done_pipe: the sender says its sends completed (they need the receiver's transport to
// acknowledge them) before the receiver closes, as NCCL's ranks finish their last
// operation before tearing connections down.
int run_receiver(int version, int pipe_out, int done_pipe, const std::vector<size_t> &sizes) {
    Net net(version);
    CHILD_CHECK(net.loaded(), "dlopen/dlsym: %s", dlerror());
    void *lc = nullptr, *rc = nullptr;
    if (receiver_setup(net, pipe_out, &lc, &rc) != 0)
        return 1;
    size_t total = 0;
    std::vector<size_t> offset;
    for (size_t s : sizes) {
        offset.push_back(total);
        total += s;
    }
    std::vector<uint8_t> arena(total);
    void *mh = nullptr;
    CHILD_CHECK(net.reg(rc, arena.data(), arena.size(), &mh) == ncclSuccess, "regMr");
    struct Posted {
        size_t message;
        void *req;
    };
    std::deque<Posted> posted;
    size_t next = 0, finished = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    while (finished < sizes.size()) {
        CHILD_CHECK(Clock::now() < deadline, "receiver stalled at message %zu of %zu", finished, sizes.size());
        if (next < sizes.size() && posted.size() < kWindow) {
            const int n = group_of(next);
            void *data[4];
            size_t part[4];
            int tags[4];
            void *mhs[4];
            size_t at = offset[next];
            for (int k = 0; k < n; ++k) {
                part[k] = part_size(sizes[next], n, k);
                data[k] = arena.data() + at;
                at += part[k];
                tags[k] = n == 1 ? 7 : 100 + k;
                mhs[k] = mh;
            }
            void *req = nullptr;
            CHILD_CHECK(net.irecv(rc, n, data, part, tags, mhs, &req) == ncclSuccess, "irecv %zu", next);
            if (req != nullptr) // NULL: the plugin wants us to retry later
                posted.push_back({next++, req});
        }
        for (auto it = posted.begin(); it != posted.end();) {
            int done = 0, got[4] = {-1, -1, -1, -1};
            CHILD_CHECK(net.test(it->req, &done, got) == ncclSuccess, "test recv %zu", it->message);
            if (!done) {
                ++it;
                continue;
            }
            const size_t m = it->message;
            const int n = group_of(m);
            for (int k = 0; k < n; ++k)
                CHILD_CHECK(static_cast<size_t>(got[k]) == part_size(sizes[m], n, k),
                            "message %zu part %d: size %d, sent %zu", m, k, got[k], part_size(sizes[m], n, k));
            for (size_t b = 0; b < sizes[m]; ++b)
                CHILD_CHECK(arena[offset[m] + b] == pattern(m, b), "message %zu (%zu B): byte %zu wrong", m,
                            sizes[m], b);
            void *flush = nullptr;
            void *fdata[1] = {arena.data() + offset[m]};
            int fsize[1] = {static_cast<int>(std::min<size_t>(sizes[m], 1 << 30))};
            void *fmh[1] = {mh};
            CHILD_CHECK(net.iflush(rc, 1, fdata, fsize, fmh, &flush) == ncclSuccess, "iflush");
            if (flush != nullptr) {
                int fdone = 0;
                CHILD_CHECK(spin_until([&] { return net.test(flush, &fdone, nullptr) == ncclSuccess && fdone; }, 10),
                            "flush");
            }
            ++finished;
            it = posted.erase(it);
        }
    }
    char sender_done = 0;
    CHILD_CHECK(read(done_pipe, &sender_done, 1) == 1, "the sender's completion");
    CHILD_CHECK(net.dereg(rc, mh) == ncclSuccess, "deregMr");
    CHILD_CHECK(net.close_recv(rc) == ncclSuccess, "closeRecv");
    CHILD_CHECK(net.close_listen(lc) == ncclSuccess, "closeListen");
    if (version >= 11)
        CHILD_CHECK(net.finalize() == ncclSuccess, "finalize");
    return 0;
}

int run_sender(int version, int pipe_in, int done_pipe, const std::vector<size_t> &sizes) {
    Net net(version);
    CHILD_CHECK(net.loaded(), "dlopen/dlsym: %s", dlerror());
    void *sc = nullptr;
    if (sender_setup(net, pipe_in, &sc) != 0)
        return 1;
    size_t largest = 0;
    for (size_t s : sizes)
        largest = std::max(largest, s);
    // Sources are written per message into a ring of window slots of the largest size.
    std::vector<uint8_t> arena(largest * 4);
    void *mh = nullptr;
    CHILD_CHECK(net.reg(sc, arena.data(), arena.size(), &mh) == ncclSuccess, "regMr");
    struct Pending {
        void *req;
        size_t size;
        size_t message;
    };
    std::deque<Pending> pending;
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    for (size_t m = 0; m < sizes.size(); ++m) {
        const int n = group_of(m);
        // Slot m % 4 is reused every 4 messages: wait for the sends that read it.
        while (!pending.empty() && pending.front().message + 4 <= m) {
            CHILD_CHECK(Clock::now() < deadline, "sender stalled at message %zu", m);
            int done = 0, sent = -1;
            CHILD_CHECK(net.test(pending.front().req, &done, &sent) == ncclSuccess, "test send");
            if (done) {
                CHILD_CHECK(static_cast<size_t>(sent) == pending.front().size, "send size %d", sent);
                pending.pop_front();
            }
        }
        uint8_t *src = arena.data() + (m % 4) * largest;
        for (size_t b = 0; b < sizes[m]; ++b)
            src[b] = pattern(m, b);
        // Parts of a group go out in reverse order: the tags must sort them.
        for (int k = n - 1; k >= 0; --k) {
            size_t at = 0;
            for (int j = 0; j < k; ++j)
                at += part_size(sizes[m], n, j);
            const size_t len = part_size(sizes[m], n, k);
            void *req = nullptr;
            CHILD_CHECK(spin_until([&] {
                            return net.isend(sc, src + at, len, n == 1 ? 7 : 100 + k, mh, &req) == ncclSuccess &&
                                   req != nullptr;
                        }, 60),
                        "isend of message %zu part %d never accepted", m, k);
            pending.push_back({req, len, m});
        }
    }
    while (!pending.empty()) {
        CHILD_CHECK(Clock::now() < deadline, "sender: sends never completed");
        int done = 0, sent = -1;
        CHILD_CHECK(net.test(pending.front().req, &done, &sent) == ncclSuccess, "test send");
        if (done)
            pending.pop_front();
    }
    CHILD_CHECK(write(done_pipe, "d", 1) == 1, "tell the receiver");
    CHILD_CHECK(net.dereg(sc, mh) == ncclSuccess, "deregMr");
    CHILD_CHECK(net.close_send(sc) == ncclSuccess, "closeSend");
    if (version >= 11)
        CHILD_CHECK(net.finalize() == ncclSuccess, "finalize");
    return 0;
}

// rx_logs / tx_logs: a line each side's plugin must have logged (empty: none asked).
void transfer(int version, size_t largest, const std::string &rx_logs = "", const std::string &tx_logs = "") {
    const std::vector<size_t> sizes = transfer_sizes(largest);
    int fds[2], done[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(pipe(done), 0);
    auto checked = [](int rc, const std::string &want) {
        if (rc == 0 && !want.empty() && !logged(want)) {
            std::fprintf(stderr, "the plugin never logged \"%s\"; it logged:\n", want.c_str());
            for (const std::string &line : g_log)
                std::fprintf(stderr, "  %s\n", line.c_str());
            return 1;
        }
        return rc;
    };
    const pid_t rx = spawn([&] { return checked(run_receiver(version, fds[1], done[0], sizes), rx_logs); });
    const pid_t tx = spawn([&] { return checked(run_sender(version, fds[0], done[1], sizes), tx_logs); });
    for (int fd : {fds[0], fds[1], done[0], done[1]})
        close(fd);
    const std::vector<int> codes = wait_all({rx, tx}, 150);
    EXPECT_EQ(codes[0], 0) << "receiver (-1: killed at the deadline)";
    EXPECT_EQ(codes[1], 0) << "sender (-1: killed at the deadline)";
}

} // namespace

TEST(NcclNetPlugin, ExportsV8ToV12AndNoOtherSymbol) {
    void *so = dlopen(IBEX_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(so, nullptr) << dlerror();
    for (int v : {8, 9, 10, 11, 12}) {
        const std::string sym = "ncclNetPlugin_v" + std::to_string(v);
        const auto *t = static_cast<const ncclNet_v8_t *>(dlsym(so, sym.c_str()));
        ASSERT_NE(t, nullptr) << sym;
        EXPECT_STREQ(t->name, "IBEX");
        EXPECT_NE(t->isend, nullptr);
        EXPECT_NE(t->closeListen, nullptr);
    }
    for (int v : {11, 12}) {
        const auto *t = static_cast<const ncclNet_v11_t *>(dlsym(so, ("ncclNetPlugin_v" + std::to_string(v)).c_str()));
        EXPECT_NE(t->finalize, nullptr) << v;
        EXPECT_NE(t->setNetAttr, nullptr) << v;
    }
    // No layout newer than v12 is stated (nccl_net_abi.h), so none may be offered.
    EXPECT_EQ(dlsym(so, "ncclNetPlugin_v13"), nullptr);
    EXPECT_EQ(dlsym(so, "_ZN9ibex_nccl4initEPFv17ncclDebugLogLevelmPKciS2_zE"), nullptr);
}

// A properties struct at the start of a larger buffer of sentinel bytes: the call must
// fill the struct and write nothing past it (NCCL's struct is exactly that size).
template <typename Props>
struct Guarded {
    union {
        Props props;
        unsigned char bytes[sizeof(Props) + 64];
    };
    Guarded() { std::memset(bytes, 0xab, sizeof(bytes)); }
    bool tail_untouched() const {
        for (size_t i = sizeof(Props); i < sizeof(bytes); ++i)
            if (bytes[i] != 0xab)
                return false;
        return true;
    }
};

TEST(NcclNetPlugin, PropertiesDescribeTheDeviceInEachLayout) {
    const pid_t pid = spawn([] {
        Net v8(8), v9(9);
        CHILD_CHECK(v8.loaded() && v9.loaded(), "load");
        CHILD_CHECK(v9.init() == ncclSuccess, "init");
        int n = 0;
        CHILD_CHECK(v9.v9()->devices(&n) == ncclSuccess && n == 1, "devices: %d", n);
        ncclNetProperties_v9_t p9{};
        CHILD_CHECK(v9.v9()->getProperties(0, &p9) == ncclSuccess, "getProperties v9");
        CHILD_CHECK(std::strcmp(p9.name, "udp:lo") == 0, "name %s", p9.name);
        CHILD_CHECK((p9.ptrSupport & NCCL_PTR_HOST) != 0, "ptrSupport %d", p9.ptrSupport);
        CHILD_CHECK(p9.speed > 0 && p9.maxRecvs == 8 && p9.maxComms > 0, "speed %d", p9.speed);
        CHILD_CHECK(p9.vProps.ndevs == 1 && p9.vProps.devs[0] == 0, "vProps");
        CHILD_CHECK(p9.maxP2pBytes >= (64u << 20), "maxP2pBytes");
        ncclNetProperties_v8_t p8{};
        CHILD_CHECK(v8.v8()->getProperties(0, &p8) == ncclSuccess, "getProperties v8");
        CHILD_CHECK(p8.guid == p9.guid && p8.speed == p9.speed && p8.maxRecvs == p9.maxRecvs &&
                        p8.netDeviceType == NCCL_NET_DEVICE_HOST,
                    "v8 layout disagrees with v9");
        CHILD_CHECK(v9.v9()->getProperties(5, &p9) == ncclInvalidArgument, "a device that does not exist");
        Net v11(11), v12(12);
        CHILD_CHECK(v11.loaded() && v12.loaded(), "load v11, v12");
        Guarded<ncclNetProperties_v11_t> g11;
        CHILD_CHECK(v11.v11()->getProperties(0, &g11.props) == ncclSuccess, "getProperties v11");
        CHILD_CHECK(g11.tail_untouched(), "v11 properties wrote past the struct");
        CHILD_CHECK(std::strcmp(g11.props.name, "udp:lo") == 0 && g11.props.guid == p9.guid &&
                        g11.props.maxRecvs == p9.maxRecvs && g11.props.maxP2pBytes == p9.maxP2pBytes &&
                        g11.props.maxCollBytes == p9.maxCollBytes && g11.props.vProps.ndevs == 1 &&
                        g11.props.vProps.devs[0] == 0 && g11.props.maxMultiRequestSize == 1,
                    "v11 layout disagrees with v9");
        Guarded<ncclNetProperties_v12_t> g12;
        CHILD_CHECK(v12.v12()->getProperties(0, &g12.props) == ncclSuccess, "getProperties v12");
        CHILD_CHECK(g12.tail_untouched(), "v12 properties wrote past the struct");
        CHILD_CHECK(g12.props.guid == p9.guid && g12.props.speed == p9.speed && g12.props.vProps.ndevs == 1 &&
                        g12.props.vProps.devs[0] == 0 && g12.props.maxP2pBytes == p9.maxP2pBytes &&
                        g12.props.maxMultiRequestSize == 1 && g12.props.railId == NCCL_NET_ID_UNDEF &&
                        g12.props.planeId == NCCL_NET_ID_UNDEF,
                    "v12 layout disagrees with v9");
        CHILD_CHECK(v12.v12()->getProperties(5, &g12.props) == ncclInvalidArgument, "v12: no device 5");
        ncclNetVDeviceProps_v12_t vp12{};
        int vdev12 = 0;
        CHILD_CHECK(v12.v12()->makeVDevice(&vdev12, &vp12) != ncclSuccess, "v12 makeVDevice is refused");
        ncclNetVDeviceProps_v9_t vp{};
        int vdev = 0;
        CHILD_CHECK(v9.v9()->makeVDevice(&vdev, &vp) != ncclSuccess, "makeVDevice is refused");
        return 0;
    });
    EXPECT_EQ(wait_all({pid}, 30)[0], 0);
}

TEST(NcclNetPlugin, EverySizeTo64MiBWithManyInFlightV10) { transfer(10, size_t{64} << 20); }

TEST(NcclNetPlugin, EverySizeTo64MiBWithPerCommunicatorContextsV11) { transfer(11, size_t{64} << 20); }

TEST(NcclNetPlugin, V12TableTo1MiB) { transfer(12, size_t{1} << 20); }

// v11+: one init per communicator, each its own context; a context is good until its
// finalize, and a finalized, foreign or garbage one is refused with an error code.
TEST(NcclNetPlugin, ContextsLiveFromInitToFinalize) {
    const pid_t pid = spawn([] {
        Net net(11);
        CHILD_CHECK(net.loaded(), "load");
        const ncclNet_v11_t *t = net.v11();
        void *a = nullptr, *b = nullptr;
        ncclNetCommConfig_v11_t config{3};
        CHILD_CHECK(t->init(&a, 1, &config, logger, nullptr) == ncclSuccess && a != nullptr, "first init");
        CHILD_CHECK(t->init(&b, 2, nullptr, logger, nullptr) == ncclSuccess && b != nullptr && b != a,
                    "second init (NCCL: another communicator)");
        CHILD_CHECK(t->init(nullptr, 3, nullptr, logger, nullptr) == ncclInvalidArgument, "init without ctx");
        CHILD_CHECK(t->setNetAttr(a, nullptr) == ncclSuccess, "setNetAttr with no hints");
        ncclNetAttr_v11_t attr{{4, 1, 2, 1}, {4, 1, 2, 1}, ~0u, ~0u, ~0u};
        CHILD_CHECK(t->setNetAttr(b, &attr) == ncclSuccess, "setNetAttr with hints");
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void *lc = nullptr;
        CHILD_CHECK(t->listen(a, 0, handle, &lc) == ncclSuccess && lc != nullptr, "listen in a context");
        CHILD_CHECK(t->closeListen(lc) == ncclSuccess, "closeListen");
        CHILD_CHECK(t->finalize(a) == ncclSuccess, "finalize a");
        CHILD_CHECK(t->finalize(a) == ncclInvalidArgument, "a second finalize of a");
        lc = nullptr;
        CHILD_CHECK(t->listen(a, 0, handle, &lc) == ncclInvalidArgument && lc == nullptr,
                    "listen in a finalized context");
        void *sc = nullptr;
        CHILD_CHECK(t->connect(a, 0, handle, &sc, nullptr) == ncclInvalidArgument && sc == nullptr,
                    "connect in a finalized context");
        CHILD_CHECK(t->setNetAttr(a, &attr) == ncclInvalidArgument, "setNetAttr on a finalized context");
        void *garbage = reinterpret_cast<void *>(0xfeedull);
        CHILD_CHECK(t->listen(garbage, 0, handle, &lc) == ncclInvalidArgument, "listen in a garbage context");
        CHILD_CHECK(t->finalize(nullptr) == ncclInvalidArgument, "finalize(NULL)");
        CHILD_CHECK(t->listen(b, 0, handle, &lc) == ncclSuccess && lc != nullptr, "b still works");
        CHILD_CHECK(t->closeListen(lc) == ncclSuccess, "closeListen");
        CHILD_CHECK(t->finalize(b) == ncclSuccess, "finalize b");
        return 0;
    });
    EXPECT_EQ(wait_all({pid}, 30)[0], 0);
}

TEST(NcclNetPlugin, IntSizedV8TableTo1MiB) { transfer(8, size_t{1} << 20); }

// NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL and NCCL_IB_TC reach both sides' QPs, as
// with NCCL's own IB transport; a communicator's traffic class (v10's connect config,
// v11's init config) wins over NCCL_IB_TC on the side that connects. A value out of
// range is warned about and left out, and the transfer still runs.
TEST(NcclNetPlugin, NcclIbSettingsReachTheQps) {
    struct Env {
        const char *name, *value;
    };
    const Env env[] = {{"NCCL_IB_TIMEOUT", "18"}, {"NCCL_IB_RETRY_CNT", "5"}, {"NCCL_IB_SL", "3"}, {"NCCL_IB_TC", "104"}};
    for (const Env &e : env)
        setenv(e.name, e.value, 1);
    const std::string all = "connected: timeout 18, retry_cnt 5, sl 3, traffic class 104";
    transfer(9, size_t{1} << 16, all, all);
    g_config_traffic_class = 160;
    transfer(10, size_t{1} << 16, "sl 3, traffic class 104", "sl 3, traffic class 160");
    transfer(11, size_t{1} << 16, "sl 3, traffic class 104", "sl 3, traffic class 160");
    g_config_traffic_class = -1;
    setenv("NCCL_IB_SL", "9", 1);
    setenv("NCCL_IB_TIMEOUT", "soon", 1);
    transfer(9, size_t{1} << 16, "NCCL_IB_SL=9 ignored: not an integer in 0..7", "timeout 14, retry_cnt 5, sl 0");
    transfer(9, size_t{1} << 16, "NCCL_IB_TIMEOUT=soon ignored");
    for (const Env &e : env)
        unsetenv(e.name);
}

TEST(NcclNetPlugin, SizeTV9TableTo1MiB) { transfer(9, size_t{1} << 20); }

TEST(NcclNetPlugin, CloseWhileBusyThenStaleHandlesReturnErrors) {
    int fds[2], go[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(pipe(go), 0);
    const pid_t rx = spawn([&] {
        Net net(10);
        CHILD_CHECK(net.loaded(), "load");
        void *lc = nullptr, *rc = nullptr;
        if (receiver_setup(net, fds[1], &lc, &rc) != 0)
            return 1;
        std::vector<uint8_t> buf(16 << 20);
        void *mh = nullptr;
        CHILD_CHECK(net.reg(rc, buf.data(), buf.size(), &mh) == ncclSuccess, "regMr");
        std::vector<void *> reqs;
        for (int i = 0; i < 16; ++i) {
            void *data[1] = {buf.data() + static_cast<size_t>(i) * (1 << 20)};
            size_t size[1] = {1 << 20};
            int tag[1] = {1};
            void *mhs[1] = {mh};
            void *req = nullptr;
            CHILD_CHECK(net.irecv(rc, 1, data, size, tag, mhs, &req) == ncclSuccess && req, "irecv %d", i);
            reqs.push_back(req);
        }
        char c = 0;
        CHILD_CHECK(read(go[0], &c, 1) == 1, "sender's go"); // sends are in flight now
        CHILD_CHECK(net.close_recv(rc) == ncclSuccess, "closeRecv while busy");
        int done = 0;
        for (void *r : reqs)
            CHILD_CHECK(net.test(r, &done, nullptr) == ncclInvalidArgument, "test of a closed comm's request");
        void *req = nullptr;
        void *data[1] = {buf.data()};
        size_t size[1] = {16};
        int tag[1] = {1};
        CHILD_CHECK(net.irecv(rc, 1, data, size, tag, &mh, &req) == ncclInvalidArgument, "irecv on a closed comm");
        CHILD_CHECK(net.close_recv(rc) == ncclInvalidArgument, "second closeRecv");
        CHILD_CHECK(net.dereg(nullptr, mh) == ncclSuccess, "deregMr after the comm closed");
        CHILD_CHECK(net.dereg(nullptr, mh) == ncclInvalidArgument, "second deregMr");
        CHILD_CHECK(net.close_listen(lc) == ncclSuccess, "closeListen");
        void *again = nullptr;
        CHILD_CHECK(net.accept(lc, &again) == ncclInvalidArgument, "accept on a closed listen comm");
        return 0;
    });
    const pid_t tx = spawn([&] {
        Net net(10);
        CHILD_CHECK(net.loaded(), "load");
        void *sc = nullptr;
        if (sender_setup(net, fds[0], &sc) != 0)
            return 1;
        std::vector<uint8_t> buf(16 << 20, 0x5a);
        void *mh = nullptr;
        CHILD_CHECK(net.reg(sc, buf.data(), buf.size(), &mh) == ncclSuccess, "regMr");
        std::vector<void *> reqs;
        CHILD_CHECK(spin_until([&] {
                        void *req = nullptr;
                        if (net.isend(sc, buf.data() + reqs.size() * (1 << 20), 1 << 20, 1, mh, &req) != ncclSuccess)
                            return true;
                        if (req != nullptr)
                            reqs.push_back(req);
                        return reqs.size() == 12;
                    }, 30),
                    "isends accepted");
        CHILD_CHECK(reqs.size() == 12, "only %zu isends accepted", reqs.size());
        CHILD_CHECK(write(go[1], "g", 1) == 1, "go");
        CHILD_CHECK(net.close_send(sc) == ncclSuccess, "closeSend while busy");
        int done = 0, sent = 0;
        for (void *r : reqs)
            CHILD_CHECK(net.test(r, &done, &sent) == ncclInvalidArgument, "test of a closed comm's request");
        void *req = nullptr;
        CHILD_CHECK(net.isend(sc, buf.data(), 8, 1, mh, &req) == ncclInvalidArgument, "isend on a closed comm");
        CHILD_CHECK(net.test(reinterpret_cast<void *>(0xdeadbeefull), &done, &sent) == ncclInvalidArgument,
                    "test of a garbage handle");
        CHILD_CHECK(net.test(nullptr, &done, &sent) == ncclInvalidArgument, "test of NULL");
        CHILD_CHECK(net.isend(mh, buf.data(), 8, 1, mh, &req) == ncclInvalidArgument,
                    "a memory handle passed as a comm");
        CHILD_CHECK(net.close_send(reinterpret_cast<void *>(0x1234)) == ncclInvalidArgument, "closeSend garbage");
        CHILD_CHECK(net.dereg(nullptr, mh) == ncclSuccess, "deregMr");
        return 0;
    });
    close(fds[0]);
    close(fds[1]);
    close(go[0]);
    close(go[1]);
    const std::vector<int> codes = wait_all({rx, tx}, 90);
    EXPECT_EQ(codes[0], 0) << "receiver";
    EXPECT_EQ(codes[1], 0) << "sender";
}

// A real NCCL (NCCL_NET_PLUGIN=ibex) loading the plugin needs a CUDA host with NCCL:
// libnccl.so.2, libcudart and a GPU. NCCL_DEBUG=INFO must then name it.
TEST(NcclNetPlugin, RealNcclLoadsIt) {
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (nccl == nullptr)
        GTEST_SKIP() << "libnccl.so.2 is not installed here (no CUDA host with NCCL): the check that "
                        "a real NCCL loads libnccl-net-ibex.so cannot run";
    // A toolkit installs libcudart.so; a pip-installed torch only the versioned name.
    void *cudart = nullptr;
    for (const char *name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12"})
        if (!cudart) cudart = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    using GetCount = int (*)(int *);
    auto get_count = cudart ? reinterpret_cast<GetCount>(dlsym(cudart, "cudaGetDeviceCount")) : nullptr;
    int gpus = 0;
    if (get_count == nullptr || get_count(&gpus) != 0 || gpus < 1)
        GTEST_SKIP() << "NCCL is installed but no CUDA runtime/GPU is usable: cannot initialise a communicator";
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
        std::string dir = IBEX_NCCL_PLUGIN_PATH;
        dir = dir.substr(0, dir.rfind('/'));
        const char *old = std::getenv("LD_LIBRARY_PATH");
        setenv("LD_LIBRARY_PATH", (dir + (old ? ":" + std::string(old) : "")).c_str(), 1);
        setenv("NCCL_NET_PLUGIN", "ibex", 1);
        setenv("NCCL_DEBUG", "INFO", 1);
        setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
        setenv("IBEX_NCCL_DEVICES", "udp:lo", 1);
        // The loader reads LD_LIBRARY_PATH at start: run NCCL in a fresh image.
        execl("/proc/self/exe", "/proc/self/exe", "--gtest_filter=NcclNetPlugin.DISABLED_InitOneRank",
              "--gtest_also_run_disabled_tests", static_cast<char *>(nullptr));
        _exit(127);
    }
    close(out[1]);
    std::string log;
    char chunk[4096];
    ssize_t n;
    while ((n = read(out[0], chunk, sizeof(chunk))) > 0)
        log.append(chunk, static_cast<size_t>(n));
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_NE(log.find("IBEX"), std::string::npos) << log;
    EXPECT_NE(log.find("NET/IBEX"), std::string::npos) << log;
    // NCCL takes the newest table it knows: v11 from 2.28, v12 from 2.30 ("Loaded net
    // plugin IBEX (vN)"), so a release we state a layout for must not fall back to older.
    using GetVersion = int (*)(int *);
    auto get_version = reinterpret_cast<GetVersion>(dlsym(nccl, "ncclGetVersion"));
    int code = 0;
    if (get_version != nullptr && get_version(&code) == 0) {
        const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100; // 2.28.9: 22809
        const int want = minor >= 30 ? 12 : minor >= 28 ? 11 : 0;
        std::printf("NCCL %d, plugin table taken: %s\n", code,
                    log.find("IBEX (v") != std::string::npos ? log.substr(log.find("IBEX (v") + 6, 4).c_str() : "?");
        if (want != 0) {
            EXPECT_NE(log.find("Loaded net plugin IBEX (v" + std::to_string(want) + ")"), std::string::npos)
                << "NCCL " << code << " should take ncclNetPlugin_v" << want << ":\n" << log;
        }
    }
}

// Run only by RealNcclLoadsIt, in a child with NCCL's environment set.
TEST(NcclNetPlugin, DISABLED_InitOneRank) {
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(nccl, nullptr);
    using InitAll = int (*)(void **, int, const int *);
    using Destroy = int (*)(void *);
    auto init_all = reinterpret_cast<InitAll>(dlsym(nccl, "ncclCommInitAll"));
    auto destroy = reinterpret_cast<Destroy>(dlsym(nccl, "ncclCommDestroy"));
    ASSERT_TRUE(init_all && destroy);
    void *comm = nullptr;
    const int dev0 = 0;
    ASSERT_EQ(init_all(&comm, 1, &dev0), 0);
    destroy(comm);
}
