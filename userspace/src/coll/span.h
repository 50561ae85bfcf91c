// SPDX-License-Identifier: Apache-2.0
// The collectives of a communicator whose ranks span servers: a hierarchical schedule.
//
// The ranks of each server form a server-local communicator (made by the first call, linked
// over the process's transport so that its collectives take the zero-copy path whenever the
// buffers lie in activated memory, whichever communicator activated them); the first rank of
// each server (its leader) talks to the other servers' leaders over the wire (coll/wire.h:
// RDMA WRITE into registered landing slots). Every call is first checked: the ranks of each
// server gather every rank's word on it (its arguments, or that it refused the call), the
// leaders exchange their servers' words over the TCP connections and tell their ranks the
// verdict, so a call that differs between any two ranks, or that a rank refused, fails with
// HCCL_E_PARA on every rank before any byte moves and the communicator stays usable. Then:
// - AllReduce: local AllReduce; the leaders reduce-scatter and all-gather across servers;
//   local Broadcast of the result.
// - Broadcast: local Broadcast on the root's server; the root server's leader writes to the
//   other leaders; local Broadcast on the other servers.
// - AllGather: local AllGather of the server's blocks; the leaders exchange their servers'
//   blocks; local Broadcast of the whole result.
// - ReduceScatter: local AllReduce of the whole input; the leaders exchange the other servers'
//   blocks and reduce their own; local Scatter of the server's blocks.
// - Barrier: local Barrier, the leaders meet, local Barrier.
// A failure half-way aborts the call on every rank of every server (the local communicators
// and the wire carry the abort) and leaves the communicator's collectives unusable.
#pragma once

#include "base/status.h"
#include "coll/collectives.h"
#include "core/comm.h"

namespace hzc::coll {

// Run @call (already validated) on @comm, whose ranks span servers.
Status RunAcrossServers(Communicator &comm, const Call &call);

// This rank refuses a call of @comm (spanning servers) for @why: it takes part in the call's
// check, so that every other rank fails the call at once with HCCL_E_PARA naming it; @why.
Status RefuseAcrossServers(Communicator &comm, const Status &why);

// The kinds RunAcrossServers runs; the others are HCCL_E_NOT_SUPPORT across servers.
bool RunsAcrossServers(Kind kind);

}  // namespace hzc::coll
