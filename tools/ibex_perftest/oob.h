// Out-of-band exchange of the perftest-style tools: a TCP connection (port 18515 by
// default) carrying stock perftest's messages (version field, system data, MTU, ASCII key
// records as barriers, binary reports, "done"), plus ibex's own fixed-size control
// messages, which are sent only when both ends are ibex tools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ibex::perftest {

// perftest's pingpong_dest as it crosses the wire.
struct KeyRecord {
    uint16_t lid = 0;
    uint16_t out_reads = 0;
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t vaddr = 0;
    uint32_t srqn = 0;
    uint8_t gid[16] = {};
};

// perftest's sizes: the record with its NUL, without and with the GID.
inline constexpr size_t kKeyMsgSize = 59;
inline constexpr size_t kKeyMsgSizeGid = 108;

// "%04x:%04x:%06x:%06x:%08x:%016llx:%08x" (59 bytes with the NUL) or, for RoCE, perftest's
// KEY_PRINT_FMT_GID: the 16 GID bytes as "%02x:" fields between vaddr and srqn, and a
// trailing ':' (108 bytes with the NUL). Returns the bytes to send, NUL included.
std::string format_key(const KeyRecord &k, bool with_gid);
// Parses either form; false if malformed.
bool parse_key(const char *buf, size_t len, bool with_gid, KeyRecord *k);

inline constexpr size_t kCtrlMsgSize = 256;

// Stock perftest's version field: a NUL-padded string of this size, swapped right after
// connecting. ibex claims the 6.x sequence it speaks and tags the bytes after the NUL
// (which perftest never looks at) so that two ibex tools can recognise each other.
inline constexpr size_t kVersionFieldSize = 16;
inline constexpr const char *kPerftestVersion = "6.06";
inline constexpr const char *kIbexTag = "ibex1";
// perftest 6.x stops on a peer older than this; so does ibex (older releases exchange a
// different number of key records).
inline constexpr double kOldestPeerVersion = 5.70;

// Our version field, and what a received one says.
std::string version_field();
struct PeerVersion {
    std::string text; // up to the first NUL, e.g. "6.06"
    double number = 0;
    bool ibex = false;
};
PeerVersion parse_version_field(const char *buf, size_t len);

// The end-of-run report perftest swaps (bw_report_data): five fields, each in its own
// exchange, each in network byte order (the doubles' IEEE bits swapped as one 64-bit word).
struct WireReport {
    uint64_t size = 0;
    uint64_t iters = 0;
    double bw_peak = 0;
    double bw_avg = 0;
    double msg_rate = 0;
};

// The 8 bytes of a report field as they cross the wire.
void put_be64(uint64_t v, unsigned char out[8]);
uint64_t get_be64(const unsigned char in[8]);
uint64_t double_bits(double d);
double bits_double(uint64_t b);

class Oob {
public:
    Oob() = default;
    ~Oob();
    Oob(const Oob &) = delete;
    Oob &operator=(const Oob &) = delete;

    // Server: listen on all addresses (as perftest does) and accept one client.
    // listen() fails at once when the port is taken.
    bool listen(uint16_t port, std::string *err);
    bool accept(std::string *err);
    // Client: resolve host and connect, retrying refused connections until timeout_ms
    // passes (the server may be a moment late to listen).
    bool connect(const std::string &host, uint16_t port, int timeout_ms, std::string *err);

    // Blocking exact transfers; timeout_ms < 0 waits without limit. False on EOF, error
    // or timeout, with the reason in *err.
    bool send_all(const void *buf, size_t len, std::string *err);
    bool recv_all(void *buf, size_t len, int timeout_ms, std::string *err);

    // Control messages: text padded with NULs to kCtrlMsgSize bytes.
    bool send_msg(const std::string &msg, std::string *err);
    bool recv_msg(std::string *msg, int timeout_ms, std::string *err);

    // Exchanges key records, one per QP in order, each as perftest does: the client writes
    // first, then reads; the server the reverse.
    bool exchange_keys(bool client, const std::vector<KeyRecord> &mine, std::vector<KeyRecord> *theirs,
                       std::string *err);
    // Barrier with a tag both sides must agree on.
    bool barrier(bool client, const std::string &tag, int timeout_ms, std::string *err);

    // perftest's generic swap (ctx_xchg_data): n bytes each way, the client writing first.
    bool xchg(bool client, const void *mine, void *theirs, size_t n, int timeout_ms, std::string *err);
    // perftest's ctx_hand_shake with one key record, used as its barrier between phases
    // (QP 0's record); the peer's record must parse. timeout_ms < 0: no limit.
    bool key_barrier(bool client, const KeyRecord &mine, int timeout_ms, std::string *err);
    // xchg_bw_reports: size, iters (64-bit, the peer being >= 5.33), peak, average,
    // message rate, five separate exchanges.
    bool exchange_reports(bool client, const WireReport &mine, WireReport *theirs, std::string *err);
    // ctx_close_connection: a key barrier, then "done" with its NUL. perftest never reads
    // the peer's "done"; ibex drains it briefly so that closing with unread bytes does not
    // reset the connection under a peer still writing. timeout_ms < 0: no limit.
    bool close_exchange(bool client, const KeyRecord &mine, int timeout_ms, std::string *err);

    // Non-blocking look at the connection while spinning: returns 0 when nothing came,
    // 1 when a whole control message was read into *msg, -1 when the peer closed or
    // failed (*err says why).
    int poll_msg(std::string *msg, std::string *err);

    int fd() const { return fd_; }

    // Called about every millisecond while a receive waits for the peer (and so while every
    // exchange built on it does). A tool whose engine runs only inside ibex calls
    // (IBEX_PROGRESS_THREAD=0) drives it from here: the peer may still wait for an ACK
    // that this side's engine owes it. Empty: receives block in the kernel.
    void set_while_waiting(std::function<void()> f) { while_waiting_ = std::move(f); }

private:
    bool recv_all_driving(void *buf, size_t len, int timeout_ms, std::string *err);

    int listen_fd_ = -1;
    int fd_ = -1;
    std::string partial_;
    std::function<void()> while_waiting_;
};

} // namespace ibex::perftest
