// Out-of-band exchange of the perftest-style tools: a TCP connection (port 18515 by
// default) carrying perftest's ASCII key record, then short fixed-size control messages
// (parameters, barriers, "done").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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

inline constexpr size_t kCtrlMsgSize = 128;

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

    // Exchanges key records: the client writes first, then reads; the server the reverse.
    bool exchange_keys(bool client, const KeyRecord &mine, KeyRecord *theirs, std::string *err);
    // Barrier with a tag both sides must agree on.
    bool barrier(bool client, const std::string &tag, int timeout_ms, std::string *err);

    // Non-blocking look at the connection while spinning: returns 0 when nothing came,
    // 1 when a whole control message was read into *msg, -1 when the peer closed or
    // failed (*err says why).
    int poll_msg(std::string *msg, std::string *err);

    int fd() const { return fd_; }

private:
    int listen_fd_ = -1;
    int fd_ = -1;
    std::string partial_;
};

} // namespace ibex::perftest
