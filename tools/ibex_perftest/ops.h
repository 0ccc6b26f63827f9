// The measured operations, shared by the bandwidth and latency runners: the work request
// of each verb and single posts that explain their failure.
#pragma once

#include <ibex/ibex.h>

#include <cstdint>
#include <string>

#include "tools/ibex_perftest/oob.h"
#include "tools/ibex_perftest/options.h"

namespace ibex::perftest {

// The work request of o's verb: `size` bytes from/into `local` (lkey), towards the peer's
// advertised buffer (SEND ignores it; atomics add 1 or swap 0 -> 1 on its first 8 bytes).
// sge must outlive the request.
ibex_send_wr_t measured_wr(const Options &o, const KeyRecord &peer, const uint8_t *local, uint64_t size, uint32_t lkey,
                           ibex_sge_t *sge);

// Takes up to max completions into wc (*n of them); false, with *err, when the poll fails
// or a completion carries an error status.
bool poll_completions(ibex_cq_t *cq, int max, ibex_wc_t *wc, int *n, std::string *err);

bool post_send_one(ibex_qp_t *qp, ibex_send_wr_t &wr, std::string *err);
bool post_recv_one(ibex_qp_t *qp, const uint8_t *addr, size_t len, uint32_t lkey, uint64_t wr_id, std::string *err);

} // namespace ibex::perftest
