// Test helper for the perftest-style tools: run a tool as a child process with its output
// in files and a deadline, run a server/client pair over loopback, and parse the tables.
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/support/paths.h"

#include "tests/support/free_port.h"

namespace ibex::test::perftest {

using Clock = std::chrono::steady_clock;

inline std::string tool(const std::string &name) { return build_dir() + "/tools/" + name + "/" + name; }

inline std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

using ibex::test::free_port;

struct Result {
    int status = -1; // exit status; -1 when killed at the deadline (or by a signal)
    std::string out, err;
    double seconds = 0;
};

// A child process with stdout and stderr in files, killed if it outlives its deadline.
class Proc {
public:
    explicit Proc(std::vector<std::string> args) : args_(std::move(args)) {
        char tmpl[] = "/tmp/ibex_perftest_test_XXXXXX";
        dir_ = mkdtemp(tmpl);
        start_ = Clock::now();
        pid_ = fork();
        if (pid_ == 0) {
            const int o = open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int e = open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(o, 1);
            dup2(e, 2);
            std::vector<char *> argv;
            for (auto &a : args_) argv.push_back(a.data());
            argv.push_back(nullptr);
            execvp(argv[0], argv.data());
            _exit(127);
        }
    }
    ~Proc() {
        if (pid_ > 0 && !done_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    Proc(const Proc &) = delete;
    Proc &operator=(const Proc &) = delete;

    void signal(int sig) {
        if (pid_ > 0 && !done_) kill(pid_, sig);
    }
    std::string out_so_far() const { return slurp(dir_ + "/out"); }

    Result wait(int timeout_s) {
        Result r;
        const auto deadline = start_ + std::chrono::seconds(timeout_s);
        int st = 0;
        for (;;) {
            const pid_t p = waitpid(pid_, &st, WNOHANG);
            if (p == pid_) break;
            if (Clock::now() > deadline) {
                kill(pid_, SIGKILL);
                waitpid(pid_, &st, 0);
                st = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        done_ = true;
        r.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        r.status = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
        r.out = slurp(dir_ + "/out");
        r.err = slurp(dir_ + "/err");
        return r;
    }

private:
    std::vector<std::string> args_;
    std::string dir_;
    pid_t pid_ = -1;
    bool done_ = false;
    Clock::time_point start_;
};

inline std::vector<std::string> cmd(const std::string &name, std::vector<std::string> args) {
    std::vector<std::string> v{tool(name)};
    v.insert(v.end(), args.begin(), args.end());
    return v;
}

// Runs server then client with the same flags (plus a fresh -p); returns {server, client}.
inline std::pair<Result, Result> run_pair(const std::string &name, std::vector<std::string> flags, int timeout_s,
                                          std::vector<std::string> client_extra = {}) {
    flags.push_back("-p");
    flags.push_back(std::to_string(free_port()));
    Proc server(cmd(name, flags));
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the client retries anyway
    std::vector<std::string> c = flags;
    c.insert(c.end(), client_extra.begin(), client_extra.end());
    c.push_back("127.0.0.1");
    Proc client(cmd(name, c));
    Result cr = client.wait(timeout_s);
    Result sr = server.wait(timeout_s);
    return {sr, cr};
}

// The numeric rows under the first line that starts with `header_start`, up to the next
// dashed line; a line that does not have `columns` numbers fails the test.
inline std::vector<std::vector<double>> table(const std::string &text, const std::string &header_start,
                                              size_t columns) {
    std::vector<std::vector<double>> rows;
    std::istringstream in(text);
    std::string line;
    bool in_table = false;
    while (std::getline(in, line)) {
        if (line.rfind(header_start, 0) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        if (line.rfind("----", 0) == 0) break;
        std::istringstream ls(line);
        std::vector<double> v;
        double x;
        while (ls >> x) v.push_back(x);
        if (v.size() == columns) rows.push_back(v);
        else ADD_FAILURE() << "unparsable table line: \"" << line << "\"";
    }
    return rows;
}

inline const char *kBwHeaderMiB = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
inline const char *kBwHeaderGb = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
inline const char *kLatHeader = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
                                "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

// Whether python3 accepts `path` as JSON (python3 -m json.tool).
inline bool valid_json_file(const std::string &path, std::string *why) {
    Proc p({"python3", "-m", "json.tool", path});
    const Result r = p.wait(20);
    *why = r.err;
    return r.status == 0;
}

} // namespace ibex::test::perftest
