// SPDX-License-Identifier: Apache-2.0
// The collectives of a communicator whose ranks span servers: a hierarchical schedule.
//
// The ranks of each server form a server-local communicator (made by the first call, linked
// over the process's transport so that its collectives take the zero-copy path whenever the
// buffers lie in activated memory, whichever communicator activated them); the first rank of
// each server (its leader) talks to the other servers' leaders over the wire (coll/wire.h:
// RDMA WRITE into registered landing slots). Every call first has the leaders agree on it
// across servers (over the TCP connections) and tells the local ranks the verdict, so a
// mismatched call fails with HCCL_E_PARA on every rank before any byte moves. Then:
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

// The kinds RunAcrossServers runs; the others are HCCL_E_NOT_SUPPORT across servers.
bool RunsAcrossServers(Kind kind);

}  // namespace hzc::coll
