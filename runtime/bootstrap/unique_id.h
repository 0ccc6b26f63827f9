// The rendezvous id "host:port/token" (ibex_unique_id_t): creating one opens rank 0's
// listener, which the process keeps until its rank 0 joins (or the id is released).
#pragma once

#include <cstdint>
#include <string>

#include <ibex/coll.h>

namespace ibex::bootstrap {

struct ParsedId {
    std::string host;
    uint16_t port = 0;
    std::string token;
};

ibex_status_t parse_unique_id(const char *text, ParsedId *out);
// Formats an id for a rendezvous address chosen by the launcher (every rank derives the
// same text, so the token is fixed rather than random).
ibex_status_t id_from_root_addr(const char *host_port, ibex_unique_id_t *id);

// Opens a listener on host:port (0: ephemeral) and returns its id with a random token.
ibex_status_t create_unique_id(const char *host, uint16_t port, ibex_unique_id_t *id);
// The listener opened by ibex_get_unique_id() for this id, handed over once (-1 if this
// process did not create the id).
int take_listener(const char *id_text);
// Closes the listener of an id this process created but will not use as rank 0 (e.g. a
// test's parent process that forked the ranks).
void release_unique_id(const ibex_unique_id_t *id);

} // namespace ibex::bootstrap
