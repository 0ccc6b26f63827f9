// The TCP helpers shared by the bootstrap and the perftest tools' out-of-band channel: what a
// failure reports (the call and errno, a timeout, a closed peer), waiting without a
// deadline, and retrying only refused connections. Loopback only.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "runtime/bootstrap/socket.h"

namespace ibex::bootstrap {
namespace {

sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    EXPECT_EQ(resolve_ipv4("127.0.0.1", port, &a), IBEX_OK);
    return a;
}

// A loopback listener on an ephemeral port (-1 and a test failure if none).
int listener(uint16_t *port, int backlog = 1) {
    int fd = -1;
    EXPECT_EQ(listen_tcp(loopback(0), &fd, port, backlog), IBEX_OK);
    return fd;
}

// A loopback port nobody listens on (bound for a moment, then released).
uint16_t closed_port() {
    uint16_t port = 0;
    ::close(listener(&port));
    return port;
}

int64_t ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A connected pair over loopback: *client and *server.
void connected_pair(int *client, int *server) {
    uint16_t port = 0;
    const int lfd = listener(&port);
    ASSERT_GE(lfd, 0);
    ASSERT_EQ(connect_tcp(loopback(port), deadline_after_ms(5000), client), IBEX_OK);
    ASSERT_EQ(accept_tcp(lfd, deadline_after_ms(5000), server), IBEX_OK);
    ::close(lfd);
}

TEST(BootstrapSocket, NoDeadlineNeverPasses) {
    EXPECT_GT(ms_left(kNoDeadline), 1000 * 1000);
    EXPECT_EQ(ms_left(deadline_after_ms(-5)), 0);
}

TEST(BootstrapSocket, ListenOnATakenPortNamesBindAndItsErrno) {
    uint16_t port = 0;
    const int first = listener(&port);
    ASSERT_GE(first, 0);
    int second = -1;
    uint16_t again = 0;
    SocketFailure why;
    EXPECT_EQ(listen_tcp(loopback(port), &second, &again, 1, &why), IBEX_ERR_ADDRESS_IN_USE);
    EXPECT_STREQ(why.call, "bind");
    EXPECT_EQ(why.error, EADDRINUSE);
    EXPECT_FALSE(why.timed_out);
    EXPECT_FALSE(why.closed);
    ::close(first);
}

TEST(BootstrapSocket, UnresolvableHostGivesTheResolverCode) {
    sockaddr_in a{};
    SocketFailure why;
    EXPECT_NE(resolve_ipv4("no-such-host.invalid", 1, &a, &why), IBEX_OK);
    EXPECT_STREQ(why.call, "getaddrinfo");
    EXPECT_NE(why.error, 0);
}

TEST(BootstrapSocket, RefusedConnectionIsRetriedUntilTheDeadlineThenReported) {
    const uint16_t port = closed_port();
    for (const bool refused_only : {false, true}) {
        const auto start = Clock::now();
        int fd = -1;
        SocketFailure why;
        EXPECT_EQ(connect_tcp(loopback(port), deadline_after_ms(300), &fd, ConnectRetry{refused_only, 50}, &why),
                  IBEX_ERR_TIMEOUT);
        const int64_t took = ms_since(start);
        EXPECT_GE(took, 250) << "gave up before the deadline";
        EXPECT_LT(took, 3000);
        EXPECT_STREQ(why.call, "connect");
        EXPECT_EQ(why.error, ECONNREFUSED) << std::strerror(why.error);
        EXPECT_FALSE(why.timed_out);
    }
}

TEST(BootstrapSocket, ConnectReachesAServerThatListensLate) {
    const uint16_t port = closed_port();
    int lfd = -1;
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        uint16_t bound = 0;
        EXPECT_EQ(listen_tcp(loopback(port), &lfd, &bound, 1), IBEX_OK);
    });
    int fd = -1;
    EXPECT_EQ(connect_tcp(loopback(port), deadline_after_ms(5000), &fd, ConnectRetry{true, 20}), IBEX_OK);
    late.join();
    if (fd >= 0) ::close(fd);
    if (lfd >= 0) ::close(lfd);
}

TEST(BootstrapSocket, ConnectToAFullListenerTimesOut) {
    // Backlog 0 holds one connection; the next handshake is dropped, so the attempt waits
    // out the deadline instead of being refused.
    uint16_t port = 0;
    const int lfd = listener(&port, 0);
    ASSERT_GE(lfd, 0);
    int queued = -1;
    ASSERT_EQ(connect_tcp(loopback(port), deadline_after_ms(5000), &queued), IBEX_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int fd = -1;
    SocketFailure why;
    const auto start = Clock::now();
    EXPECT_EQ(connect_tcp(loopback(port), deadline_after_ms(300), &fd, ConnectRetry{true, 20}, &why),
              IBEX_ERR_TIMEOUT);
    EXPECT_GE(ms_since(start), 250);
    EXPECT_TRUE(why.timed_out);
    ::close(queued);
    ::close(lfd);
}

TEST(BootstrapSocket, AcceptWithoutDeadlineWaitsForTheClient) {
    uint16_t port = 0;
    const int lfd = listener(&port);
    ASSERT_GE(lfd, 0);
    int client = -1;
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        EXPECT_EQ(connect_tcp(loopback(port), deadline_after_ms(5000), &client), IBEX_OK);
    });
    int server = -1;
    EXPECT_EQ(accept_tcp(lfd, kNoDeadline, &server), IBEX_OK);
    late.join();
    for (int fd : {client, server, lfd})
        if (fd >= 0) ::close(fd);
}

TEST(BootstrapSocket, AcceptTimesOut) {
    uint16_t port = 0;
    const int lfd = listener(&port);
    ASSERT_GE(lfd, 0);
    int fd = -1;
    SocketFailure why;
    EXPECT_EQ(accept_tcp(lfd, deadline_after_ms(50), &fd, &why), IBEX_ERR_TIMEOUT);
    EXPECT_TRUE(why.timed_out);
    ::close(lfd);
}

TEST(BootstrapSocket, ReceiveTellsASilentPeerFromAClosedOne) {
    int client = -1, server = -1;
    connected_pair(&client, &server);
    char buf[8];
    SocketFailure why;
    EXPECT_FALSE(recv_all(server, buf, sizeof buf, deadline_after_ms(100), &why));
    EXPECT_TRUE(why.timed_out);
    EXPECT_FALSE(why.closed);

    ASSERT_TRUE(send_all(client, "abc", 3, kNoDeadline));
    ::close(client);
    why = {};
    EXPECT_FALSE(recv_all(server, buf, sizeof buf, kNoDeadline, &why));
    EXPECT_TRUE(why.closed);
    EXPECT_FALSE(why.timed_out);
    ::close(server);
}

TEST(BootstrapSocket, ReceiveAvailableNeverWaits) {
    int client = -1, server = -1;
    connected_pair(&client, &server);
    char buf[16];
    SocketFailure why;
    EXPECT_EQ(recv_available(server, buf, sizeof buf, &why), 0);
    ASSERT_TRUE(send_all(client, "hello", 5, kNoDeadline));
    // Whatever has arrived, up to everything sent.
    size_t got = 0;
    for (int i = 0; i < 1000 && got < 5; ++i) {
        const ssize_t n = recv_available(server, buf + got, sizeof buf - got, &why);
        ASSERT_GE(n, 0);
        got += static_cast<size_t>(n);
        if (got < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(std::string(buf, got), "hello");
    ::close(client);
    ssize_t n = 0;
    for (int i = 0; i < 1000 && n == 0; ++i) {
        n = recv_available(server, buf, sizeof buf, &why);
        if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(n, -1);
    EXPECT_TRUE(why.closed);
    ::close(server);
}

TEST(BootstrapSocket, SendToAGonePeerNamesSendAndItsErrno) {
    int client = -1, server = -1;
    connected_pair(&client, &server);
    ::close(server);
    // The first write after the peer left draws its reset; a later one fails.
    const char data[4096] = {};
    SocketFailure why;
    bool ok = true;
    for (int i = 0; i < 100 && ok; ++i) {
        ok = send_all(client, data, sizeof data, deadline_after_ms(2000), &why);
        if (ok) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_FALSE(ok);
    EXPECT_STREQ(why.call, "send");
    EXPECT_TRUE(why.error == EPIPE || why.error == ECONNRESET) << std::strerror(why.error);
    ::close(client);
}

} // namespace
} // namespace ibex::bootstrap
