#include "runtime/bootstrap/unique_id.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/random.h>
#include <unistd.h>

#include "runtime/bootstrap/socket.h"
#include "runtime/base/config.h"
#include "runtime/base/status.h"

namespace ibex::bootstrap {
namespace {

std::mutex g_mu;
std::map<std::string, int> &listeners() {
    static std::map<std::string, int> m;
    return m;
}

} // namespace

ibex_status_t parse_unique_id(const char *text, ParsedId *out) {
    const size_t len = strnlen(text, IBEX_UNIQUE_ID_BYTES);
    if (len == 0 || len == IBEX_UNIQUE_ID_BYTES)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unique id is empty or not NUL-terminated");
    const char *slash = std::strchr(text, '/');
    if (!slash || !slash[1])
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unique id \"%s\" is not host:port/token", text);
    std::string hp(text, slash);
    IBEX_TRY(parse_host_port(hp.c_str(), &out->host, &out->port, false));
    out->token = slash + 1;
    return IBEX_OK;
}

ibex_status_t id_from_root_addr(const char *host_port, ibex_unique_id_t *id) {
    std::string host;
    uint16_t port = 0;
    IBEX_TRY(parse_host_port(host_port, &host, &port, false));
    const int n = std::snprintf(id->text, sizeof id->text, "%s:%u/launcher", host.c_str(), port);
    if (n < 0 || static_cast<size_t>(n) >= sizeof id->text)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "rendezvous address too long: %s", host_port);
    return IBEX_OK;
}

int take_listener(const char *id_text) {
    std::lock_guard l(g_mu);
    auto it = listeners().find(id_text);
    if (it == listeners().end()) return -1;
    const int fd = it->second;
    listeners().erase(it);
    return fd;
}

void release_unique_id(const ibex_unique_id_t *id) {
    const int fd = take_listener(id->text);
    if (fd >= 0) ::close(fd);
}

ibex_status_t create_unique_id(const char *host, uint16_t port, ibex_unique_id_t *id) {
    sockaddr_in addr{};
    IBEX_TRY(resolve_ipv4(host, port, &addr));
    int fd = -1;
    uint16_t bound = 0;
    IBEX_TRY(listen_tcp(addr, &fd, &bound));
    uint64_t token = 0;
    if (getrandom(&token, sizeof token, 0) != sizeof token)
        token = (static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    const int n = std::snprintf(id->text, sizeof id->text, "%s:%u/%016llx", host, bound,
                                static_cast<unsigned long long>(token));
    if (n < 0 || static_cast<size_t>(n) >= sizeof id->text) {
        ::close(fd);
        return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap host name too long: %s", host);
    }
    std::lock_guard l(g_mu);
    listeners()[id->text] = fd;
    return IBEX_OK;
}

} // namespace ibex::bootstrap

extern "C" ibex_status_t ibex_get_unique_id(ibex_unique_id_t *id) {
    using namespace ibex::bootstrap;
    ibex::clear_error();
    if (!id) return ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_get_unique_id: id is NULL");
    std::string host = "127.0.0.1";
    uint16_t port = 0;
    if (const char *root = ibex::config::get_string("IBEX_ROOT_ADDR", nullptr)) {
        IBEX_TRY(parse_host_port(root, &host, &port, true));
    } else {
        host = ibex::config::get_string("IBEX_BOOTSTRAP_ADDR", "127.0.0.1");
    }
    return create_unique_id(host.c_str(), port, id);
}

