// SPDX-License-Identifier: Apache-2.0
// The inline protocol of small calls inside one server (as NCCL's LL and MPI's eager sends):
// the data travels with the call.
//
// Before its arrival each rank copies its input (at most the control area's inline_bytes(),
// HZC_INLINE_MAX) into its arrival line when it fits there (ControlArea::kLineData bytes), else
// into its inline region of the call's parity (coll/control.h), and says so in its arrival. The
// arrival, whose call number each rank writes after its data, is then the only synchronisation
// of the call: every rank reads what it needs straight from the peers' copies into its own
// output and returns. No peer address is translated, no second barrier is needed (a rank
// rewrites a copy of this parity only after the next call's arrival, which every reader of this
// call passed after its reads) and no system call is made when the peers are there. Buffers may be
// anywhere (activated or not), unaligned and in place: a rank reads the copies, never the peers'
// buffers.
//
// A Broadcast whose input fits the arrival line is done for its root once it announced it: the
// others read the root's line, and the root needs nobody's arrival, so it returns at once (as
// MPI's eager sends; it may run up to ControlArea::kLineDepth-1 calls ahead). A rank that
// disagrees with such a root fails the call with HCCL_E_PARA as with any mismatch; the root,
// gone already, does not learn of it.
//
// A call goes inline when every rank's input fits (the same on every rank for the collectives,
// whose counts every rank checks); an exchange where one rank's input does not fit takes
// staging.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "coll/call.h"

namespace hzc::coll {

// Bytes of this rank's input of @c (a validated collective, not an exchange) on @n ranks: what
// an inline call copies (Broadcast: the root's buffer; every rank counts it).
size_t InlineInputBytes(const Call &c, uint32_t n);

// Before the arrival of call @seq: if @input bytes fit @area's inline region, copy this rank's
// input of @c there, or into its arrival line when they fit that (for an exchange, bytes
// [0, @input) of its send buffer), and return the arrival's flags saying so
// (ControlArea::kInlined, kLineHolds); else 0.
uint32_t InlinePost(ControlArea &area, const Call &c, uint64_t seq, size_t input);

// Whether this rank's part of @c (validated, not an exchange) ends with its arrival: it is the
// root of a Broadcast whose input its arrival line holds.
bool InlineEager(const ControlArea &area, const Call &c);

// Entry points (coll/kinds.h), after the arrival where every rank posted inline.
Status InlineAllGather(Context &ctx, const Call &c);
Status InlineBroadcast(Context &ctx, const Call &c);
Status InlineReduceScatter(Context &ctx, const Call &c);
Status InlineAllReduce(Context &ctx, const Call &c);
// The exchanges' inline entry point is ExchangeInline (coll/exchange.h).

}  // namespace hzc::coll
