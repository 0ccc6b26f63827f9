// Work requests and completions between ibex's and libibverbs' structures. The enums
// are numbered alike (checked at compile time), so most of this is a field copy; what
// is not: immediate data (host order in ibex, network order in verbs), verbs statuses and
// opcodes ibex does not model, and errno values from the verbs calls. Pure.
#pragma once

#include <cstddef>
#include <functional>

#include <infiniband/verbs.h>

#include <ibex/ibex.h>

namespace ibex::verbs {

ibex_wc_status_t map_wc_status(int ibv_status);
// False for opcodes ibex does not model (BIND_MW, LOCAL_INV, TSO, ...).
bool map_wc_opcode(int ibv_opcode, ibex_wc_opcode_t *out);
void convert_wc(const ibv_wc &in, ibex_wc_t *out);

// The status an errno from a verbs call stands for.
ibex_status_t status_from_errno(int e);

// Converts up to `max` WRs of the chain starting at `wr` into out[0..n), linked in order;
// returns n. The SGE lists are shared, not copied (ibex_sge_t is laid out as ibv_sge).
int convert_send_chain(ibex_send_wr_t *wr, ibv_send_wr *out, int max);
int convert_recv_chain(ibex_recv_wr_t *wr, ibv_recv_wr *out, int max);

// WRs converted on the stack and handed to one ibv_post_* call.
inline constexpr int kPostBatch = 32;

// Posts a chain in batches of kPostBatch through `post` (ibv_post_send/recv on the QP;
// returns 0 or an errno and sets its bad WR). A WR failing ibex's own checks (opcode,
// SGE list) stops the chain there after the WRs before it are posted, as a refusal by
// the device would; *bad (if given) points at the first WR not posted, nullptr when all
// were. ENOMEM from the device is IBEX_ERR_QUEUE_FULL.
using SendPostFn = std::function<int(ibv_send_wr *, ibv_send_wr **)>;
using RecvPostFn = std::function<int(ibv_recv_wr *, ibv_recv_wr **)>;
ibex_status_t post_send_chain(ibex_send_wr_t *wr, ibex_send_wr_t **bad, uint32_t qpn, const SendPostFn &post);
ibex_status_t post_recv_chain(ibex_recv_wr_t *wr, ibex_recv_wr_t **bad, uint32_t qpn, const RecvPostFn &post);

} // namespace ibex::verbs
