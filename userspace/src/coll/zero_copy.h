// SPDX-License-Identifier: Apache-2.0
// The zero-copy path of AllGather, Broadcast, ReduceScatter and AllReduce inside one server:
// every rank's buffers lie in activated memory, and each rank reads its peers' buffers through
// the communicator's peer mappings (transport/transport.h), one copy per byte, inside guarded
// regions (coll/guard.h) so revoked peer memory is an error, not a crash. A barrier ends each
// call (peers may still read or write this rank's buffers). The exchanges' zero-copy path is in
// coll/exchange.h.
#pragma once

#include "base/status.h"
#include "coll/call.h"

namespace hzc::coll {

// Whether this rank's buffers of @call (a kind with a zero-copy entry point) lie in activated
// memory (and the communicator has peer mappings).
bool ZeroCopyEligible(Communicator &comm, const Call &call);

// Entry points (coll/kinds.h): @ctx.area is the control area; every rank found its buffers
// eligible.
Status ZeroCopyAllGather(Context &ctx, const Call &c);
Status ZeroCopyBroadcast(Context &ctx, const Call &c);
Status ZeroCopyReduceScatter(Context &ctx, const Call &c);
Status ZeroCopyAllReduce(Context &ctx, const Call &c);

}  // namespace hzc::coll
