// SPDX-License-Identifier: Apache-2.0
// The staging path of AllGather, Broadcast, ReduceScatter and AllReduce inside one server:
// chunks pass through the control area's shared staging area (coll/control.h, HCCL_BUFFSIZE
// MB), one barrier of the ranks per chunk (two for AllReduce). The exchanges' staging path is
// in coll/exchange.h.
#pragma once

#include "base/status.h"
#include "coll/call.h"

namespace hzc::coll {

// Entry points (coll/kinds.h): @ctx.area is the control area.
Status StagingAllGather(Context &ctx, const Call &c);
Status StagingBroadcast(Context &ctx, const Call &c);
Status StagingReduceScatter(Context &ctx, const Call &c);
Status StagingAllReduce(Context &ctx, const Call &c);

}  // namespace hzc::coll
