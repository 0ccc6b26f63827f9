// Test helper: a forked child process joined to the parent by a socketpair, with bounded
// I/O and a bounded reap. The child is a real separate process (own address space, own
// ibex context); it dies with the parent (PR_SET_PDEATHSIG) and by its own alarm, and the
// parent's destructor SIGKILLs and reaps it, so nothing can outlive or hang a test.
//
// Fork before the parent opens any ibex context: a context runs a progress thread, and a
// child forked from a multi-threaded process must not touch the parent's objects.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ibex::test {

// Blocking-with-deadline I/O on a stream socket. Both return false on timeout, EOF or error.
inline bool io_wait(int fd, short events, std::chrono::steady_clock::time_point end) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, static_cast<int>(left.count()));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return false;
    }
}

inline bool send_all(int fd, const void *data, size_t len, int timeout_ms = 30000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    const auto *p = static_cast<const uint8_t *>(data);
    while (len) {
        if (!io_wait(fd, POLLOUT, end)) return false;
        const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) return false;
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

inline bool recv_all(int fd, void *data, size_t len, int timeout_ms = 30000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto *p = static_cast<uint8_t *>(data);
    while (len) {
        if (!io_wait(fd, POLLIN, end)) return false;
        const ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) return false;
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

class ChildProcess {
public:
    ChildProcess() = default;
    ChildProcess(const ChildProcess &) = delete;
    ChildProcess &operator=(const ChildProcess &) = delete;
    ~ChildProcess() { kill_and_reap(); }

    // Forks. The child runs body(fd) and _exits with its return value (never returns
    // into the test framework); it is killed by SIGALRM after max_seconds regardless.
    bool start(const std::function<int(int fd)> &body, unsigned max_seconds = 60) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) {
            ::close(sv[0]);
            ::close(sv[1]);
            return false;
        }
        if (pid == 0) {
            ::close(sv[0]);
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            ::signal(SIGALRM, SIG_DFL);
            ::alarm(max_seconds);
            int rc = 120;
            try {
                rc = body(sv[1]);
            } catch (...) {
                rc = 121;
            }
            std::fflush(nullptr);
            ::_exit(rc);
        }
        ::close(sv[1]);
        pid_ = pid;
        fd_ = sv[0];
        return true;
    }

    pid_t pid() const { return pid_; }
    int fd() const { return fd_; }
    bool running() const { return pid_ > 0; }

    // Waits up to timeout_ms for the child to exit. Returns its exit code (0..255), 256 +
    // signal number if it was killed by a signal, or -1 on timeout (the child is then
    // SIGKILLed and reaped, so it never outlives the call).
    int wait_exit(int timeout_ms) {
        if (pid_ <= 0) return exit_code_;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            int status = 0;
            const pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                pid_ = -1;
                close_fd();
                exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
                return exit_code_;
            }
            if (r < 0 && errno != EINTR) {
                pid_ = -1;
                close_fd();
                return exit_code_ = -1;
            }
            if (std::chrono::steady_clock::now() >= end) {
                kill_and_reap();
                return exit_code_ = -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }

    void kill_and_reap() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
            }
            exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
            pid_ = -1;
        }
        close_fd();
    }

    static std::string describe(int code) {
        if (code < 0) return "timed out (killed)";
        if (code >= 256) return "killed by signal " + std::to_string(code - 256);
        return "exit " + std::to_string(code);
    }

private:
    void close_fd() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    pid_t pid_ = -1;
    int fd_ = -1;
    int exit_code_ = -1;
};

} // namespace ibex::test
