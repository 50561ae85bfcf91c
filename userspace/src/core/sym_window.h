// SPDX-License-Identifier: Apache-2.0
// Symmetric memory windows (HcclCommSymWinRegister): names for ranges of activated memory.
// The peers of a communicator already map every rank's activated memory (transport/transport.h),
// so a window adds no mapping: registering checks that the range is activated memory this
// communicator sees, and the handle only finds the range again.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "core/comm.h"

namespace hzc::sym_window {

// A handle for [addr, addr + size) of @comm: HCCL_E_PARA when the range is not inside memory
// activated through HcclCommActivateCommMemory that @comm sees (its memory range is set).
Expected<void *> Register(const Communicator &comm, uintptr_t addr, size_t size);
// HCCL_E_PARA for a handle that is not a registered window.
Status Deregister(void *handle);
// The window of @comm holding [addr, addr + size), and addr's offset in it; HCCL_E_NOT_FOUND
// when none does.
Expected<void *> Find(const Communicator &comm, uintptr_t addr, size_t size, size_t *offset);
// Drop the windows of the communicator whose serial is @comm_serial (it was destroyed).
void Forget(uint64_t comm_serial);
// Windows registered and not deregistered.
size_t Count();

}  // namespace hzc::sym_window
