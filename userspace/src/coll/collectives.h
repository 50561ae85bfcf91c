// SPDX-License-Identifier: Apache-2.0
// The collectives of a communicator whose ranks share one server.
//
// Every call posts a descriptor (kind, type, op, count, root, buffer addresses, whether the
// buffers lie in activated memory) in the communicator's control area (coll/control.h) and
// meets the other ranks there; every rank checks every descriptor, so mismatched calls fail on
// every rank with HCCL_E_PARA before any byte moves. Then:
// - zero-copy path, when every rank's buffers lie in activated memory: each rank reads its
//   peers' buffers through the library's peer mappings (one copy per byte): AllGather and
//   Broadcast pull, ReduceScatter reduces its own slice straight from every peer's input,
//   AllReduce is a reduce-scatter phase and an all-gather phase;
// - staging path otherwise: chunks pass through the shared staging area (HCCL_BUFFSIZE MB).
// Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll, AlltoAllV and AlltoAllVC are
// exchanges (coll/exchange.h): each rank posts the byte offset and length of what it sends to
// and receives from every rank in the control area's argument region, every rank checks every
// pair (what rank p sends to rank q is what q expects from p, else HCCL_E_PARA on every rank
// before any byte moves), then each rank pulls its blocks straight from its peers' inputs
// (zero-copy; Reduce and ReduceScatterV reduce from them) or through the staging area.
// A call is complete when it returns (streams are only validated). A failure in the middle of
// a call (timeout, dead peer, revoked peer memory) aborts the communicator's collectives on
// every rank: later calls fail with HCCL_E_REMOTE.
//
// Every rank sees the same descriptors, so a mismatch fails the call with HCCL_E_PARA on
// every rank and the communicator stays usable. A call whose arguments fail this rank's own
// checks (null buffer, bad stream, type, op, root, count) would never reach the other ranks,
// which would wait for it until HCCL_EXEC_TIMEOUT; instead (Refuse) the rank returns its
// HCCL_E_PTR / HCCL_E_PARA at once and posts a "refused" descriptor for the call, so the
// others fail it at once with HCCL_E_PARA naming the rank, like a mismatch, and the
// communicator stays usable. The refusing rank passes the call's first step without waiting,
// so its next call (or next refusal) first waits until every rank reached that step (within
// HCCL_EXEC_TIMEOUT) before it posts: descriptors are double-buffered, and its next post would
// overwrite the slot of the call before, which slower ranks may still be reading. That needs
// the control area, which the first collective call of a communicator opens with every rank:
// a rank whose first call is refused does not open it for that, and the others' first call
// fails with HCCL_E_TIMEOUT after HCCL_CONNECT_TIMEOUT, naming it.
#pragma once

#include "base/status.h"
#include "coll/call.h"
#include "core/comm.h"

namespace hzc::coll {

// Check the call's local arguments (types, ops, root, sizes) without touching the peers.
Status Validate(const Communicator &comm, const Call &call);

// Run @call on @comm (all ranks must make the same call). Validate's errors go through Refuse.
Status Run(Communicator &comm, const Call &call);

// Abort @comm's collectives on every rank for @why (a step outside them failed): the other
// ranks' waits end with an error naming this rank; later calls fail. Nothing if its control
// area is not open.
void Abort(Communicator &comm, const Status &why);

// This rank refuses a call for @why (its own argument checks failed): if the communicator's
// control area is open, post the call as refused so that the others fail it too (after waiting
// for the others to reach a call this rank refused just before); @why.
Status Refuse(Communicator &comm, const Status &why);

}  // namespace hzc::coll
