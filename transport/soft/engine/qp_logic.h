// The RC protocol of a soft QP: requester (segmentation, PSNs, ACK/NAK handling,
// go-back-N or selective retransmission, timers) and responder (PSN checking, placement, READ and
// atomic responses, duplicate handling). All functions run with the context lock held.
#pragma once

#include <cstdint>

#include "transport/soft/codec/packet.h"
#include "transport/soft/engine/context.h"

namespace ibex::soft {

// Transport timeout in ns for the IB timeout exponent (0 = none).
uint64_t transport_timeout_ns(uint8_t timeout);

// ---- requester
void requester_transmit(SoftContext &ctx, SoftQp &qp, uint64_t now, uint32_t &budget);
void requester_receive(SoftContext &ctx, SoftQp &qp, const roce::PacketView &pv, uint64_t now);
void requester_timers(SoftContext &ctx, SoftQp &qp, uint64_t now);
uint64_t requester_deadline(const SoftQp &qp);
void complete_send(SoftQp &qp, const SendWqe &w, ibex_wc_status_t status);

// ---- responder
// `data`/`len`: the packet as received (BTH .. ICRC), which selective mode may hold
// until a hole before it fills. `placed`: its payload was copied to where
// responder_placement() said, before this call.
void responder_receive(SoftContext &ctx, SoftQp &qp, const roce::PacketView &pv, const uint8_t *data, uint32_t len,
                       bool placed = false);
// Where the payload of a request packet lands if it is accepted, when that is known from
// the QP alone and nothing else changes on the way (an in-order WRITE MIDDLE or LAST):
// the receive path then copies it there while it checks the ICRC. nullptr otherwise.
// Changes nothing.
uint8_t *responder_placement(SoftContext &ctx, const SoftQp &qp, const roce::PacketView &pv);
// `now`: the pass's clock; `request_left`: a request of this QP is in the same batch.
void responder_transmit(SoftContext &ctx, SoftQp &qp, uint32_t &budget, uint64_t now, bool request_left);

// ibex_query_qp_retransmit (engine/retransmit_query.cpp).
ibex_status_t query_qp_retransmit(ibex_qp *qp, ibex_qp_retransmit_t *out);

// Moves the QP to the error state and flushes every outstanding work request.
void qp_to_error(SoftQp &qp);

// Encodes a BTH into `h` and returns its length.
size_t put_bth(uint8_t *h, uint8_t opcode, uint32_t dest_qpn, uint32_t psn, bool ack_req, uint8_t pad,
               bool solicited = false);

} // namespace ibex::soft
