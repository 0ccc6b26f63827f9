// Test helper: tshark capturing RoCEv2 (UDP 4791) on one interface inside a network
// namespace, into a classic pcap file; in its own process group, stopped with a bounded wait.
// And what tshark decodes in such a file.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <cstdlib>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ibex::test {

class NetnsCapture {
public:
    ~NetnsCapture() { stop(); }
    bool start(const std::string &ns, const std::string &ifname, const std::string &file, std::string *err) {
        log_ = file + ".log";
        pid_ = fork();
        if (pid_ < 0) return false;
        if (pid_ == 0) {
            setpgid(0, 0);
            if (FILE *l = std::freopen(log_.c_str(), "w", stderr)) dup2(fileno(l), 1);
            execlp("ip", "ip", "netns", "exec", ns.c_str(), "tshark", "-i", ifname.c_str(), "-f", "udp port 4791", "-w",
                   file.c_str(), "-F", "pcap", static_cast<char *>(nullptr));
            _exit(127);
        }
        setpgid(pid_, pid_);
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (slurp_file(log_).find("Capturing on") == std::string::npos) {
            if (std::chrono::steady_clock::now() > end || waitpid(pid_, nullptr, WNOHANG) == pid_) {
                *err = "tshark did not start: " + slurp_file(log_);
                pid_ = -1;
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return true;
    }
    void stop() {
        if (pid_ <= 0) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(300)); // let dumpcap write out
        kill(-pid_, SIGINT);
        for (int i = 0; i < 100 && waitpid(pid_, nullptr, WNOHANG) != pid_; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (waitpid(pid_, nullptr, WNOHANG) != pid_) {
            kill(-pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    std::string log_;

    static std::string slurp_file(const std::string &path) {
        std::ifstream f(path);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
};

// The BTH opcodes tshark decodes in a capture file, one per InfiniBand frame; false if
// tshark could not read it.
inline bool tshark_opcodes(const std::string &pcap, std::vector<unsigned> *opcodes) {
    FILE *p = popen(("tshark -r '" + pcap +
                     "' --disable-protocol rpcordma -Y infiniband -T fields -e infiniband.bth.opcode 2>/dev/null")
                        .c_str(),
                    "r");
    if (!p) return false;
    char line[64];
    while (fgets(line, sizeof line, p)) opcodes->push_back(unsigned(std::strtoul(line, nullptr, 0)));
    return pclose(p) == 0;
}

} // namespace ibex::test
