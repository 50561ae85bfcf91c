// SPDX-License-Identifier: Apache-2.0
// Making communicators, after the argument checks of the C entry points: a new rendezvous
// (HcclGetRootInfo), joining one (HcclCommInitRootInfo) or reading a rank table
// (HcclCommInitClusterInfo). Each new communicator is added to the process's CommRegistry.
#pragma once

#include <hccl/hccl_types.h>

#include <cstdint>

#include "base/status.h"

namespace hzc {

// Start the rendezvous of a new communicator (this process serves it) and describe it.
Status NewRootInfo(HcclRootInfo *out);

// Rank @rank of @nranks (@rank < @nranks) of the communicator whose rendezvous @root_info
// describes: waits until every rank has joined.
Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank);

// Rank @rank of the communicator the rank table at @path describes; HCCL_E_PARA when the
// table has no such rank.
Expected<HcclComm> FromRankTable(const char *path, uint32_t rank);

}  // namespace hzc
