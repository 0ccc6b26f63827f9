// What the soft provider puts on the wire, seen by tshark: a capture on lo of a short
// exchange between two pairs of contexts (MTU 4096 and MTU 1024) using every RC opcode
// must decode as InfiniBand (RoCEv2) with the expected opcodes, no malformed packets,
// PSNs that advance per QP, ECT(0) in the IP header, IP ID 0 with DF set, and an ICRC
// that is right for every frame (checked here on the raw bytes: tshark does not check it).
//
// Needs tshark on PATH and root (to capture); skips with the reason otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/support/endpoint.h"
#include "tests/support/roce_pcap.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"

using namespace ibex::test;
namespace roce = ibex::roce;

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kProbePort = 9; // discard: probes that show the capture is running

std::string hex_op(unsigned op) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%02x", op);
    return b;
}

bool on_path(const char *prog) {
    const char *path = std::getenv("PATH");
    if (!path) return false;
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        const std::string p = (dir.empty() ? "." : dir) + "/" + prog;
        if (access(p.c_str(), X_OK) == 0) return true;
    }
    return false;
}

std::string ip_str(uint32_t host_order) {
    in_addr a{htonl(host_order)};
    return inet_ntoa(a);
}

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Runs a shell command, returns its stdout; *status gets the wait status.
std::string run(const std::string &cmd, int *status) {
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) {
        *status = -1;
        return out;
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    *status = pclose(p);
    return out;
}

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

// tshark in the background, in its own process group, stopped with a bounded wait.
class Capture {
public:
    ~Capture() { stop(); }

    bool start(const std::string &file, const std::string &filter, const std::string &log, std::string *err) {
        pid_ = fork();
        if (pid_ < 0) {
            *err = "fork failed";
            return false;
        }
        if (pid_ == 0) {
            setpgid(0, 0);
            FILE *l = std::freopen(log.c_str(), "w", stderr);
            if (l) dup2(fileno(stderr), 1);
            execlp("tshark", "tshark", "-i", "lo", "-f", filter.c_str(), "-w", file.c_str(), "-F", "pcap",
                   static_cast<char *>(nullptr));
            _exit(127);
        }
        setpgid(pid_, pid_);
        // "Capturing on" comes when the capture runs; then probes show that packets land
        // in the file (dumpcap flushes it from time to time).
        const auto end = Clock::now() + std::chrono::seconds(30);
        while (slurp(log).find("Capturing on") == std::string::npos) {
            if (Clock::now() > end || exited()) {
                *err = "tshark did not start capturing within 30 s: " + slurp(log);
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(kProbePort);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bool seen = false;
        while (!seen && Clock::now() < end && !exited()) {
            [[maybe_unused]] ssize_t r = sendto(s, "probe", 5, 0, reinterpret_cast<sockaddr *>(&to), sizeof to);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            struct stat st {};
            seen = stat(file.c_str(), &st) == 0 && st.st_size > 24;
        }
        close(s);
        if (!seen) *err = "no probe packet reached the capture file within 30 s: " + slurp(log);
        return seen;
    }

    // SIGINT (tshark writes out what it has), then SIGKILL if it takes over 10 s.
    void stop() {
        if (pid_ <= 0) return;
        kill(-pid_, SIGINT);
        const auto end = Clock::now() + std::chrono::seconds(10);
        while (!exited() && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (pid_ > 0) {
            kill(-pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }

private:
    bool exited() {
        if (pid_ <= 0) return true;
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return true;
        }
        return false;
    }
    pid_t pid_ = -1;
};

// One row of `tshark -T fields` per frame.
struct Decoded {
    unsigned number = 0;
    bool has_bth = false;
    unsigned opcode = 0, dest_qp = 0, psn = 0, ecn = 0, pad = 0;
    size_t data_len = 0; // tshark's "data": payload and pad
};

// The capture and everything read from it.
struct Result {
    std::string skip;  // non-empty: skip with this reason
    std::string error; // non-empty: the setup failed
    std::string dir;
    std::string pcap;
    std::vector<Frame> frames;
    std::map<unsigned, Decoded> decoded; // by frame number
    std::string malformed;               // tshark's listing of malformed frames
    std::set<unsigned> opcodes_sent;     // what the exchange must have produced
    std::map<uint32_t, uint32_t> mtu_to; // path MTU of the requests sent to an address
};

#define SETUP_CHECK(cond, msg)                                                                       \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            r.error = std::string(msg) + " [" #cond "]: " + ibex_last_error();                       \
            return;                                                                                  \
        }                                                                                            \
    } while (0)

bool wait_ok(Endpoint &e, size_t n, std::string *why) {
    auto wc = e.wait(n);
    if (wc.size() != n) {
        *why = "expected " + std::to_string(n) + " completions, got " + std::to_string(wc.size());
        return false;
    }
    for (auto &w : wc)
        if (w.status != IBEX_WC_SUCCESS) {
            *why = std::string("completion status ") + ibex_wc_status_str(w.status);
            return false;
        }
    return true;
}

// The exchange: every opcode on pair (a, b) at MTU 4096, multi-packet messages at MTU 1024
// on pair (c, d). Opens the contexts, starts the capture once their addresses are known,
// runs the work requests one at a time and verifies the data moved.
void exchange(Result &r, Capture &cap) {
    Endpoint a, b, c, d;
    a.open(1 << 20);
    b.open(1 << 20);
    c.open(1 << 20);
    d.open(1 << 20);
    SETUP_CHECK(a.ok() && b.ok() && c.ok() && d.ok(), "opening four soft contexts on udp:lo");
    ibex_ep_addr_t aa = a.addr(), ba = b.addr(), ca = c.addr(), da = d.addr();
    SETUP_CHECK(ibex_qp_connect(a.qp, &ba) == IBEX_OK && ibex_qp_connect(b.qp, &aa) == IBEX_OK, "connect a-b");
    ca.mtu = da.mtu = IBEX_MTU_1024; // the connect takes the smaller MTU of both ends
    SETUP_CHECK(ibex_qp_connect(c.qp, &da) == IBEX_OK && ibex_qp_connect(d.qp, &ca) == IBEX_OK, "connect c-d");
    ibex_qp_attr_t qa = IBEX_QP_ATTR_INIT;
    SETUP_CHECK(ibex_query_qp(c.qp, &qa) == IBEX_OK && qa.path_mtu == IBEX_MTU_1024, "pair c-d at MTU 1024");

    auto ip_of = [](const ibex_ep_addr_t &e) { return ip_str(roce::get32(e.gid + 12)); };
    r.mtu_to[roce::get32(ba.gid + 12)] = 4096;
    r.mtu_to[roce::get32(da.gid + 12)] = 1024;
    const std::string filter = "(udp port 4791 and ((host " + ip_of(aa) + " and host " + ip_of(ba) + ") or (host " +
                               ip_of(ca) + " and host " + ip_of(da) + "))) or (udp dst port " +
                               std::to_string(kProbePort) + " and dst host 127.0.0.1)";
    std::string err;
    if (!cap.start(r.pcap, filter, r.dir + "/tshark.log", &err)) {
        r.error = err;
        return;
    }

    for (size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<uint8_t>(i * 7 + 3);
    for (size_t i = 0; i < b.buf.size(); ++i) b.buf[i] = static_cast<uint8_t>(i * 5 + 1);
    for (size_t i = 0; i < c.buf.size(); ++i) c.buf[i] = static_cast<uint8_t>(i * 3 + 2);
    const uint32_t brkey = ibex_mr_rkey(b.mr), drkey = ibex_mr_rkey(d.mr);
    std::string why;
    auto step = [&](const char *what, ibex_status_t st, Endpoint &req, Endpoint *resp) {
        if (!r.error.empty()) return;
        if (st != IBEX_OK) {
            r.error = std::string(what) + ": post failed: " + ibex_last_error();
            return;
        }
        if (!wait_ok(req, 1, &why) || (resp && !wait_ok(*resp, 1, &why))) r.error = std::string(what) + ": " + why;
    };

    // Sizes that are not a multiple of 4 put pad counts 1..3 on the wire.
    // SEND: ONLY (3000 B) and FIRST/MIDDLE/LAST (10000 B); SEND_WITH_IMM: ONLY_IMM and LAST_IMM.
    for (int i = 0; i < 6; ++i) SETUP_CHECK(b.post_recv(100 + i, 600000 + size_t(i) * 16384, 16384) == IBEX_OK, "post_recv");
    step("SEND 3000", a.post_rdma(IBEX_WR_SEND, 1, 0, 3000, 0, 0), a, &b);
    step("SEND 10000", a.post_rdma(IBEX_WR_SEND, 2, 0, 10000, 0, 0), a, &b);
    step("SEND_WITH_IMM 101", a.post_rdma(IBEX_WR_SEND_WITH_IMM, 3, 0, 101, 0, 0, true, 0x01020304), a, &b);
    step("SEND_WITH_IMM 9000", a.post_rdma(IBEX_WR_SEND_WITH_IMM, 4, 0, 9000, 0, 0, true, 0x05060708), a, &b);
    // WRITE: FIRST/MIDDLE/LAST and ONLY; WRITE_WITH_IMM: LAST_IMM and ONLY_IMM (each takes a receive).
    step("WRITE 10000", a.post_rdma(IBEX_WR_RDMA_WRITE, 5, 20000, 10000, b.va(100000), brkey), a, nullptr);
    step("WRITE 99", a.post_rdma(IBEX_WR_RDMA_WRITE, 6, 40000, 99, b.va(120000), brkey), a, nullptr);
    step("WRITE_WITH_IMM 10000", a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 7, 50000, 10000, b.va(130000), brkey, true, 9),
         a, &b);
    step("WRITE_WITH_IMM 64", a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 8, 70000, 64, b.va(150000), brkey, true, 10), a,
         &b);
    // READ: REQUEST and RESPONSE FIRST/MIDDLE/LAST (10000 B) and ONLY (100 B).
    step("READ 10000", a.post_rdma(IBEX_WR_RDMA_READ, 9, 200000, 10000, b.va(300000), brkey), a, nullptr);
    step("READ 102", a.post_rdma(IBEX_WR_RDMA_READ, 10, 220000, 102, b.va(320000), brkey), a, nullptr);
    // Atomics: FETCH_ADD and COMPARE_SWAP, answered by ATOMIC_ACKNOWLEDGE.
    uint64_t v = 40;
    std::memcpy(b.buf.data() + 400000, &v, 8);
    step("FETCH_ADD", a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 11, 230000, b.va(400000), brkey, 2), a, nullptr);
    step("CMP_SWAP", a.post_atomic(IBEX_WR_ATOMIC_CMP_AND_SWP, 12, 230008, b.va(400000), brkey, 42, 7), a, nullptr);
    // MTU 1024: a 10000-byte WRITE (FIRST, 8 MIDDLE, LAST), a SEND and a READ.
    SETUP_CHECK(d.post_recv(200, 600000, 16384) == IBEX_OK, "post_recv on d");
    step("WRITE 10000 @1024", c.post_rdma(IBEX_WR_RDMA_WRITE, 20, 0, 10000, d.va(100000), drkey), c, nullptr);
    step("SEND 3000 @1024", c.post_rdma(IBEX_WR_SEND, 21, 20000, 3000, 0, 0), c, &d);
    step("READ 5000 @1024", c.post_rdma(IBEX_WR_RDMA_READ, 22, 40000, 5000, d.va(200000), drkey), c, nullptr);
    if (!r.error.empty()) return;

    // The data arrived as sent.
    SETUP_CHECK(std::memcmp(b.buf.data() + 600000 + 16384, a.buf.data(), 10000) == 0, "SEND data");
    SETUP_CHECK(std::memcmp(b.buf.data() + 100000, a.buf.data() + 20000, 10000) == 0, "WRITE data");
    SETUP_CHECK(std::memcmp(b.buf.data() + 130000, a.buf.data() + 50000, 10000) == 0, "WRITE_WITH_IMM data");
    SETUP_CHECK(std::memcmp(a.buf.data() + 200000, b.buf.data() + 300000, 10000) == 0, "READ data");
    std::memcpy(&v, b.buf.data() + 400000, 8);
    SETUP_CHECK(v == 7, "atomics: 40 + 2 = 42, then 42 -> 7");
    SETUP_CHECK(std::memcmp(d.buf.data() + 100000, c.buf.data(), 10000) == 0, "WRITE data at MTU 1024");
    SETUP_CHECK(std::memcmp(c.buf.data() + 40000, d.buf.data() + 200000, 5000) == 0, "READ data at MTU 1024");

    // Let the last coalesced ACKs leave and reach the capture.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 5; ++i) {
        int n = 0;
        ibex_wc_t wc[8];
        ibex_poll_cq(a.cq, 8, wc, &n);
        ibex_poll_cq(c.cq, 8, wc, &n);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    for (unsigned op = 0x00; op <= 0x14; ++op) r.opcodes_sent.insert(op);
}

void build_result(Result &r) {
    if (!on_path("tshark")) {
        r.skip = "tshark is not installed (apt-get install tshark) - cannot check the frames on the wire";
        return;
    }
    if (geteuid() != 0) {
        r.skip = "capturing on lo needs root";
        return;
    }
    char tmpl[] = "/tmp/ibex_wire_XXXXXX";
    if (!mkdtemp(tmpl)) {
        r.error = "mkdtemp failed";
        return;
    }
    r.dir = tmpl;
    r.pcap = r.dir + "/exchange.pcap";
    // GSO trains would show as one giant frame on lo; fault injection must be off.
    setenv("IBEX_UDP_GSO", "0", 1);
    for (const char *v : {"IBEX_FAULT_LOSS", "IBEX_FAULT_REORDER", "IBEX_FAULT_DUPLICATE", "IBEX_FAULT_CORRUPT"})
        unsetenv(v);
    {
        Capture cap;
        exchange(r, cap);
        cap.stop();
    }
    if (!r.error.empty()) return;

    if (!read_pcap(r.pcap, &r.frames, &r.error)) return;
    if (r.frames.empty()) {
        r.error = "the capture holds no RoCEv2 frame";
        return;
    }
    int st = 0;
    const std::string tshark = "tshark -r '" + r.pcap + "' --disable-protocol rpcordma ";
    const std::string fields =
        run(tshark + "-Y 'udp.dstport == 4791' -T fields -E separator=/t -E occurrence=f -e frame.number "
                     "-e infiniband.bth -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn "
                     "-e ip.dsfield.ecn -e data.len -e infiniband.bth.padcnt 2>'" + r.dir + "/fields.err'",
            &st);
    if (st != 0) {
        r.error = "tshark -T fields failed: " + slurp(r.dir + "/fields.err");
        return;
    }
    for (const std::string &line : split(fields, '\n')) {
        if (line.empty()) continue;
        const auto f = split(line, '\t');
        if (f.size() < 8) {
            r.error = "unexpected tshark line: " + line;
            return;
        }
        Decoded dcd;
        dcd.number = static_cast<unsigned>(std::strtoul(f[0].c_str(), nullptr, 10));
        dcd.has_bth = !f[1].empty();
        dcd.opcode = static_cast<unsigned>(std::strtoul(f[2].c_str(), nullptr, 0));
        dcd.dest_qp = static_cast<unsigned>(std::strtoul(f[3].c_str(), nullptr, 0));
        dcd.psn = static_cast<unsigned>(std::strtoul(f[4].c_str(), nullptr, 0));
        dcd.ecn = static_cast<unsigned>(std::strtoul(f[5].c_str(), nullptr, 0));
        dcd.data_len = std::strtoul(f[6].c_str(), nullptr, 10); // tshark hands the payload to "data"
        dcd.pad = static_cast<unsigned>(std::strtoul(f[7].c_str(), nullptr, 0));
        r.decoded[dcd.number] = dcd;
    }
    // Not the probes: tshark picks a dissector by port, and a probe whose ephemeral source
    // port is one that some protocol claims (PROFINET's 34962-34964, say) decodes as a
    // malformed frame of it (seen once: "PN-RT 47 PROFINET Real-Time [Malformed Packet]").
    r.malformed = run(tshark + "-Y '(_ws.malformed || _ws.expert.severity >= error) && !(udp.dstport == " +
                          std::to_string(kProbePort) + ")' 2>'" + r.dir + "/malformed.err'",
                      &st);
    if (st != 0) r.error = "tshark -Y _ws.malformed failed: " + slurp(r.dir + "/malformed.err");
}

void check_decodes_as_infiniband(const Result &r) {
    ASSERT_EQ(r.decoded.size(), r.frames.size()) << "tshark and the pcap reader disagree on the frame count";
    for (const Frame &f : r.frames) {
        auto it = r.decoded.find(f.number);
        ASSERT_NE(it, r.decoded.end()) << "frame " << f.number << " missing from tshark's output";
        const Decoded &d = it->second;
        EXPECT_TRUE(d.has_bth) << "frame " << f.number << " has no InfiniBand BTH in tshark";
        EXPECT_EQ(d.opcode, f.opcode) << "frame " << f.number;
        EXPECT_EQ(d.dest_qp, f.dest_qp) << "frame " << f.number;
        EXPECT_EQ(d.psn, f.psn) << "frame " << f.number;
        EXPECT_EQ(d.pad, f.pad) << "frame " << f.number;
        // Wireshark 4.0 leaves the pad bytes in the payload it hands to "data".
        if (roce::op_info(f.opcode).flags & roce::kHasPayload) {
            EXPECT_EQ(d.data_len, f.payload_len + f.pad) << "frame " << f.number << " opcode " << hex_op(f.opcode);
        }
    }
}

void check_no_malformed(const Result &r) {
    EXPECT_TRUE(r.malformed.empty()) << "tshark reports malformed frames:\n" << r.malformed;
}

void check_expected_opcodes(const Result &r) {
    std::map<unsigned, int> seen;
    for (const Frame &f : r.frames) ++seen[f.opcode];
    for (unsigned op : r.opcodes_sent)
        EXPECT_GT(seen[op], 0) << "opcode " << hex_op(op) << " (" << roce::op_info(static_cast<uint8_t>(op)).name
                               << ") never appeared";
    for (auto [op, n] : seen)
        EXPECT_TRUE(r.opcodes_sent.count(op)) << "unexpected opcode " << hex_op(op) << " x" << n;
    // At MTU 1024 a 10000-byte WRITE is FIRST + 8 MIDDLE + LAST.
    EXPECT_GE(seen[roce::kWriteMiddle], 8 + 1);
}

void check_psns_advance(const Result &r) {
    // Per (destination, QP): each new request takes the PSN after the previous one's last
    // (a READ request spans one PSN per response packet); a retransmission may repeat an
    // old PSN, never skip one. Responses never go back unless requests were resent.
    struct Stream {
        bool any = false;
        uint32_t high = 0; // next PSN a new request takes; for responses the highest seen
        int repeats = 0, frames = 0;
    };
    auto span = [&](const Frame &f) -> uint32_t {
        if (f.opcode != roce::kReadRequest) return 1;
        const uint32_t mtu = r.mtu_to.at(f.dst);
        return std::max<uint32_t>(1, (f.dma_len + mtu - 1) / mtu);
    };
    std::map<std::pair<uint32_t, uint32_t>, Stream> req, resp;
    int resent = 0;
    for (const Frame &f : r.frames) {
        const bool request = roce::op_info(f.opcode).flags & roce::kIsRequest;
        Stream &s = (request ? req : resp)[{f.dst, f.dest_qp}];
        ++s.frames;
        if (request) {
            if (!s.any) {
                s = {true, roce::psn_add(f.psn, span(f)), 0, 1};
                continue;
            }
            const int32_t d = roce::psn_diff(f.psn, s.high);
            EXPECT_LE(d, 0) << "frame " << f.number << ": request PSN 0x" << std::hex << f.psn
                            << " skips past the next one, 0x" << s.high;
            if (d < 0) {
                ++s.repeats;
                ++resent;
            } else {
                s.high = roce::psn_add(f.psn, span(f));
            }
            continue;
        }
        if (!s.any) {
            s = {true, f.psn, 0, 1};
            continue;
        }
        const int32_t d = roce::psn_diff(f.psn, s.high);
        if (d < 0) ++s.repeats;
        if (d > 0) s.high = f.psn;
    }
    EXPECT_EQ(req.size(), 2u) << "two requester QPs (a and c) sent";
    EXPECT_EQ(resp.size(), 2u) << "two responder QPs (b and d) answered";
    for (auto &[k, s] : resp)
        if (!resent) {
            EXPECT_EQ(s.repeats, 0) << "responses to QP 0x" << std::hex << k.second << " went back in PSN";
        }
    if (resent) std::printf("note: %d request retransmission(s) seen (a loaded machine)\n", resent);
}

void check_icrc(const Result &r) {
    for (const Frame &f : r.frames)
        EXPECT_TRUE(f.icrc_ok) << "frame " << f.number << " opcode " << hex_op(f.opcode) << ": ICRC on the wire 0x"
                               << std::hex << f.icrc_wire << ", computed 0x" << f.icrc_computed;
}

void check_ect0(const Result &r) {
    for (const Frame &f : r.frames) {
        EXPECT_EQ(f.tos & 3, 2) << "frame " << f.number << ": ECN bits in the IP header";
        auto it = r.decoded.find(f.number);
        if (it != r.decoded.end()) {
            EXPECT_EQ(it->second.ecn, 2u) << "frame " << f.number << ": tshark ip.dsfield.ecn";
        }
    }
}

void check_ip_id_df(const Result &r) {
    // The receiver's ICRC check assumes what the sender's kernel writes: DF, IP ID 0.
    for (const Frame &f : r.frames) {
        EXPECT_EQ(f.frag, 0x4000) << "frame " << f.number << ": flags/fragment offset";
        EXPECT_EQ(f.ip_id, 0) << "frame " << f.number << ": IP ID";
    }
}

// One capture, every check: ctest runs each gtest case as its own process, and a capture
// per check would cost a tshark start and an exchange each.
TEST(WireCapture, ShortExchangeDecodesAsRoCEv2) {
    Result r;
    build_result(r);
    if (!r.skip.empty()) GTEST_SKIP() << r.skip;
    ASSERT_TRUE(r.error.empty()) << r.error << " (capture dir " << r.dir << ")";
    std::printf("captured %zu RoCEv2 frames in %s\n", r.frames.size(), r.pcap.c_str());
    const std::pair<const char *, void (*)(const Result &)> checks[] = {
        {"every frame decodes as InfiniBand, fields as sent", check_decodes_as_infiniband},
        {"no malformed packets", check_no_malformed},
        {"the expected opcodes appear", check_expected_opcodes},
        {"PSNs advance per QP", check_psns_advance},
        {"the ICRC of every frame is right", check_icrc},
        {"packets leave with ECT(0)", check_ect0},
        {"IP ID 0 and DF", check_ip_id_df},
    };
    for (const auto &[what, check] : checks) {
        SCOPED_TRACE(what);
        check(r);
    }
    if (!HasFailure()) {
        for (const char *f : {"/exchange.pcap", "/tshark.log", "/fields.err", "/malformed.err"})
            std::remove((r.dir + f).c_str());
        rmdir(r.dir.c_str());
    } else {
        std::printf("capture kept for inspection: %s\n", r.pcap.c_str());
    }
}

} // namespace
