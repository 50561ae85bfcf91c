// SPDX-License-Identifier: Apache-2.0
// Making communicators, after the argument checks of the C entry points: a new rendezvous
// (HcclGetRootInfo), joining one (HcclCommInitRootInfo) or reading a rank table
// (HcclCommInitClusterInfo). Each new communicator is added to the process's CommRegistry.
#pragma once

#include <hccl/hccl_types.h>

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "core/comm_options.h"

namespace hzc {

// Start the rendezvous of a new communicator (this process serves it) and describe it.
Status NewRootInfo(HcclRootInfo *out);

// Rank @rank of @nranks (@rank < @nranks) of the communicator whose rendezvous @root_info
// describes: waits until every rank has joined.
Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank,
                                CommOptions options = {});

// Rank @rank of the communicator the rank table at @path describes; HCCL_E_PARA when the
// table has no such rank.
Expected<HcclComm> FromRankTable(const char *path, uint32_t rank, CommOptions options = {});

// @n ranks in this process (HcclCommInitAll): a new unique id, every rank this process.
Expected<std::vector<HcclComm>> AllInProcess(uint32_t n);

// The communicator of ranks @members (ascending, distinct, ranks of @parent) of @parent, as
// member @position (@members[@position] is @parent's own rank), @sub_id telling apart the
// communicators made from one parent (HCCL_E_PARA when used before with @parent). Its id derives
// from @parent's id, @sub_id and @members, so every member makes the same one without exchanging
// anything.
Expected<HcclComm> SubCommunicator(HcclComm parent, const std::vector<uint32_t> &members,
                                   uint64_t sub_id, uint32_t position, CommOptions options);

}  // namespace hzc
