// SPDX-License-Identifier: Apache-2.0
// The exchanges: Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll, AlltoAllV, AlltoAllVC.
//
// Each is one pattern: rank p sends rank q the bytes [send_off[q], + send_len[q]) of its
// input, and rank q puts what it receives from p at [recv_off[p], + recv_len[p]) of its output
// (a Plan, made from the call's own arguments by MakePlan). Reduce and ReduceScatterV reduce
// instead: rank q combines the blocks every rank sends it, in rank order, into [0, recv_len)
// of its output (Reduce: every rank sends its whole input to the root; ReduceScatterV: rank p
// sends sendCounts[q] elements at sendDispls[q] to rank q).
//
// Each rank posts its plan in its argument region of the control area (coll/control.h) with
// its descriptor; after the arrival barrier every rank checks every pair (p sends q as many
// bytes as q expects from p), so a disagreement fails on every rank with HCCL_E_PARA before
// any byte moves. Then:
// - inline (every rank's input fits its inline region, coll/inline.h): each rank copies its
//   input's extent there before the arrival barrier, then reads its blocks from the copies;
// - zero-copy (every rank's buffers in activated memory): each rank copies (or reduces) its
//   blocks straight from the peers' inputs through the peer mappings, inside guarded regions,
//   one copy per byte; a barrier ends the call (peers may still read this rank's input);
// - staging: rounds of at most one block per (sender, receiver) pair: block (p, q) of half
//   (round % 2) of the staging area holds the round's chunk of what p sends q; one barrier per
//   round; a rank's block to itself is copied directly (after the rounds) or reduced from its
//   own input.
// The blocks a rank sends or receives must not overlap the other blocks it receives (in-place
// forms where a rank's own input block is its own output block are fine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "coll/call.h"

namespace hzc::coll {

// This rank's plan of @c: HCCL_E_PARA naming the argument when a count or displacement
// overflows, the buffers wrap around the address space, or what this rank sends itself is not
// what it expects from itself.
Expected<Plan> MakePlan(const Call &c, uint32_t nranks, uint32_t rank);

// HCCL_E_PARA on the first pair (p, q), in order, where rank p sends rank q a different number
// of bytes than q expects from p; @seq names the call.
Status CheckPlans(const std::vector<Plan> &plans, uint64_t seq);
// CheckPlans' error for call @seq: rank @p sends rank @q @sent bytes, q expects @expected.
Status PairDisagrees(uint64_t seq, uint64_t p, uint64_t q, uint64_t sent, uint64_t expected);

// Post this rank's plan of the validated call @c (call @seq) in its argument region of @area;
// the plan.
Plan ExchangePost(ControlArea &area, const Call &c, uint64_t seq);
// Whether this rank's buffers of @c with its @plan lie in activated memory (zero-copy
// eligible) and no block it receives overlaps a block the peers read.
bool ExchangeEligible(Communicator &comm, const Call &c, const Plan &plan);
// After the arrival barrier: read every rank's plan into @ctx.plans and check the pairs
// (CheckPlans).
Status ExchangeCheck(Context &ctx);

// Entry points (coll/kinds.h), after ExchangeCheck: @ctx.area is the control area.
// ExchangeInline: every rank posted its input inline (coll/inline.h); HCCL_E_REMOTE when a
// peer's plan reaches past its inline region.
Status ExchangeZeroCopy(Context &ctx, const Call &c);
Status ExchangeStaging(Context &ctx, const Call &c);
Status ExchangeInline(Context &ctx, const Call &c);

// The plans of the kinds (coll/kinds.h's PlanFn), with each kind's own checks: the element
// counts of AlltoAll and Scatter are multiplied by the rank count; AlltoAll(V/VC) do not convert
// types.
Status PlanReduce(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanScatter(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanAllGatherV(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanReduceScatterV(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanAlltoAll(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanAlltoAllV(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);
Status PlanAlltoAllVC(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);

}  // namespace hzc::coll
