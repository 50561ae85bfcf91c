// SPDX-License-Identifier: Apache-2.0
// The zero-copy memory calls after their argument checks (api/hccl_api.cpp), end to end: the
// process's range registry (core/range_registry.h), the RDMA registration of activated memory
// with the communicator it was activated through, and the ranges and activations published
// through the process's transport (transport/transport.h: hzc.ko or the memfd directory, which
// also tell peers their cached view is stale). Each call does all of its
// steps or, on failure, undoes those it made (base/rollback.h): a failed call changes nothing.
//
// @handle is the communicator's handle, named in messages; @comm is the live communicator
// behind it.
#pragma once

#include <hccl/hccl_types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "core/comm.h"

namespace hzc::memory {

// HcclCommSetMemoryRange: single-server communicators only; the first call of a communicator
// establishes its links (every rank calls it together). [base, base + size) is page aligned.
Status SetRange(HcclComm handle, Communicator &comm, uintptr_t base, size_t size);

// Link the ranks of single-server communicator @comm (every rank calls it together) over the
// process's transport, so that its collectives reach activated memory of every communicator
// of the ranks' processes: what SetRange does first, without a range.
Status LinkPeers(Communicator &comm);

// HcclCommUnsetMemoryRange: @base is the base of a set range without activations.
Status UnsetRange(uintptr_t base);

// HcclCommActivateCommMemory: [va, va + size) is mapped with @handle (aclrtMapMem) inside one
// set range. With RDMA links the activation is registered with @comm's links and the key travels
// with the activation (transport/activation_cookie.h).
Status Activate(const std::shared_ptr<Communicator> &comm, uintptr_t va, size_t size, void *handle);

// HcclCommDeactivateCommMemory: @va starts an activation. Its RDMA registration is
// dropped from the communicator it was activated through, whichever communicator the call
// names.
Status Deactivate(uintptr_t va);

}  // namespace hzc::memory
