// SPDX-License-Identifier: Apache-2.0
// The hzc_comm_* peer access calls after their argument checks (api/hzc_api.cpp): pointers
// into peers' activated memory, their lists of activations, and RDMA transfers to and from them.
//
// @handle is the communicator's handle, named in messages; @comm is the live communicator
// behind it.
#pragma once

#include <hccl/hccl_types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/comm.h"
#include "transport/transport.h"

namespace hzc {

// hzc_comm_link_info: what @comm's links are made of.
struct LinkInfo {
  bool linked = false;  // the first HcclCommSetMemoryRange made them
  bool rdma = false;    // they include RDMA queue pairs (else kernel-only)
  std::string device;   // RDMA device, port and GID index when rdma
  uint32_t port = 0;
  uint32_t gid_index = 0;
};
LinkInfo DescribeLinks(const Communicator &comm);

// hzc_comm_peer_ptr: a local pointer to [peer_va, peer_va + size) of @rank. HCCL_E_UNAVAIL
// before the links are made.
Expected<void *> PeerPointer(HcclComm handle, const Communicator &comm, uint32_t rank,
                             uintptr_t peer_va, size_t size);

// hzc_comm_peer_activations: the activations of @rank. HCCL_E_UNAVAIL as PeerPointer.
Expected<std::vector<transport::PeerActivation>> PeerActivations(HcclComm handle,
                                                                 const Communicator &comm,
                                                                 uint32_t rank);

// hzc_comm_rdma_write (@write) or hzc_comm_rdma_read between [local, local + size), inside one
// activation this process made on @comm, and [peer_va, peer_va + size) of @rank, activated on
// the same communicator (neither range wraps around); see hzc/hzc.h.
Status Transfer(HcclComm handle, Communicator &comm, uint32_t rank, void *local, uintptr_t peer_va,
                size_t size, bool write);

}  // namespace hzc
