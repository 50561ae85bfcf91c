// SPDX-License-Identifier: Apache-2.0
// The collectives of a communicator whose ranks span servers: a hierarchical schedule.
//
// The ranks of each server form a server-local communicator (made by the first call through core's
// MakeServerLocal, linked over the process's transport so that its collectives take the zero-copy
// path whenever the buffers lie in activated memory, whichever communicator activated them); the
// first rank of each server (its leader) talks to the other servers' leaders over the wire
// (transport/wire.h: RDMA WRITE into registered landing slots, or TCP). Every call is first
// checked: the ranks of each server gather every rank's word on it (its arguments, or that it
// refused the call), the leaders exchange their servers' words over the TCP connections (Bruck's
// all-gather: ceil(log2 S) rounds of one message each) and tell their ranks the verdict, so a
// call that differs between any two ranks, or that a rank refused, fails with HCCL_E_PARA on
// every rank before any byte moves and the communicator stays usable.
// Then:
// - AllReduce: local AllReduce; the leaders reduce it across servers, by size (HZC_SPAN_RING_MIN,
//   256 KiB): below, recursive doubling (ceil(log2 S) rounds, one partner each); from there, a
//   ring (S-1 steps of reduce-scatter, S-1 of all-gather, one block to the next server each);
//   local Broadcast of the result. Either way every leader ends with the same bits.
// - Broadcast: local Broadcast on the root's server; the root server's leader sends to the
//   other leaders (below 256 KiB, or between two servers, down a binomial tree: ceil(log2 S)
//   rounds, each leader passing the buffer to at most ceil(log2 S) others; from 256 KiB across
//   three or more servers scattered, block i to server i, then all-gathered); local Broadcast
//   on the other servers.
// - AllGather: local AllGather of the server's blocks; the leaders gather their servers' blocks
//   (below HZC_SPAN_RING_MIN of output by Bruck's algorithm, ceil(log2 S) rounds; from there in a
//   ring, S-1 steps); local Broadcast of the whole result.
// - ReduceScatter: local AllReduce of the whole input; the leaders reduce-scatter the servers'
//   blocks (below HZC_SPAN_RING_MIN of input by recursive halving, ceil(log2 S) rounds, one
//   partner each, in an order fixed by the servers; from there in a ring, S-1 steps); local
//   Scatter of the server's blocks.
// - Barrier: local Barrier, the leaders meet (dissemination: ceil(log2 S) rounds of one 8-byte
//   message each), local Barrier.
// What a leader sends per call across S servers, M the call's buffer (for AllGather and
// ReduceScatter the whole output or input, as NCCL counts), against the least any schedule
// moves (docs/architecture.md):
//   AllReduce 2 (S-1)/S M by the ring, ceil(log2 S) M (+ M beyond the largest power of two) by
//   recursive doubling in ceil(log2 S) rounds (bound 2 (S-1)/S M; ceil(log2 S) rounds);
//   AllGather and ReduceScatter (S-1)/S M, by the ring, or in ceil(log2 S) rounds by Bruck's
//   algorithm (AllGather) or recursive halving (ReduceScatter, when S is a power of two; else
//   the leaders beyond the largest power of two, P, hand over M first and a leader below sends
//   up to (P-1)/P M + M/S) (bound the same); Broadcast from the root's leader ceil(log2 S) M
//   below 256 KiB or with S = 2 (the tree; each other leader as many times as it has children),
//   else 2 (S-1)/S M, and (S-2)/S M from the others (bound M from the root); Barrier ceil(log2 S)
//   messages (bound the same); AlltoAll(V/VC) what its server's ranks send to other servers' ranks
//   (bound the same); AllGatherV (S-1)/S of every rank's input region (the same).
// The other exchanges (coll/exchange.h) are compositions of these: correct, not bandwidth-optimal.
// Their plans (MakePlan) follow from the words the ranks compared (counts, roots, the arrays
// every rank must share) and each rank's own checks, except AlltoAllV's, whose arrays each rank
// holds alone: its pairs are checked once, by the sending rank's leader (its server's pairs on
// the server; each other server's leader sends it what that server's ranks expect from its
// ranks: its ranks times theirs words), and the leaders agree on the first disagreement, so it
// fails with HCCL_E_PARA on every rank, with one message, before any byte moves. No rank holds
// another server's plans (N words per rank of its server at most). Then:
// - Reduce: AllReduce of the input into a temporary; the root copies it to its output.
// - Scatter: Broadcast of the root's whole input into a temporary; each rank copies its block.
// - ReduceScatterV: AllReduce of the whole input region; each rank copies its block.
// - AllGatherV: AllGather of every rank's whole input region, padded to the largest, into a
//   temporary; each rank copies the blocks addressed to it.
// - AlltoAll, AlltoAllV, AlltoAllVC: pairwise. The pairs on one server exchange directly (a
//   local AlltoAllV); each rank packs its blocks for other servers' ranks (by server, then rank),
//   its leader gathers the packs (a local AlltoAllV to local rank 0), sends each other leader
//   the blocks of that server's ranks, and scatters what it received to its ranks, which unpack
//   it. Every size follows from the checked plans: nothing but the blocks travels.
// Over RDMA a leader keeps the temporaries of ReduceScatter, Reduce, Scatter and ReduceScatterV
// (up to HCCL_BUFFSIZE) in a scratch buffer of its own that the wire registers like activated
// memory: what it sends from there or receives into it moves without a copy.
// A failure half-way aborts the call on every rank of every server (the local communicators
// and the wire carry the abort) and leaves the communicator's collectives unusable.
#pragma once

#include "base/status.h"
#include "coll/call.h"
#include "core/comm.h"

namespace hzc::coll {

// Run @call (already validated) on @comm, whose ranks span servers.
Status RunAcrossServers(Communicator &comm, const Call &call);

// This rank refuses a call of @comm (spanning servers) for @why: it takes part in the call's
// check, so that every other rank fails the call at once with HCCL_E_PARA naming it; @why.
Status RefuseAcrossServers(Communicator &comm, const Status &why);

// Entry points (coll/kinds.h): @ctx.span is the communicator's state, @ctx.plans the plans of the
// exchanges (by rank: this rank's, and the lengths of its server's ranks' for AlltoAll(V/VC)).
Status AcrossAllReduce(Context &ctx, const Call &c);
Status AcrossBroadcast(Context &ctx, const Call &c);
Status AcrossAllGather(Context &ctx, const Call &c);
Status AcrossReduceScatter(Context &ctx, const Call &c);
Status AcrossBarrier(Context &ctx, const Call &c);
Status AcrossReduce(Context &ctx, const Call &c);
Status AcrossScatter(Context &ctx, const Call &c);
Status AcrossReduceScatterV(Context &ctx, const Call &c);
// AllGatherV: every rank's whole input region to every rank.
Status AcrossRegions(Context &ctx, const Call &c);
// AlltoAll(V/VC): each pair's block, through the leaders.
Status AcrossPairwise(Context &ctx, const Call &c);

}  // namespace hzc::coll
