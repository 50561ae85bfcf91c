// SPDX-License-Identifier: Apache-2.0
// A new memfd and its shared read-write mapping: memory that processes share by handing the
// descriptor over (the collectives' control area, a point-to-point pair's channel).
#pragma once

#include <cstddef>

#include "base/status.h"
#include "base/unique_fd.h"
#include "base/unique_mapping.h"

namespace hzc {

struct SharedMemfd {
  UniqueFd fd;
  UniqueMapping map;
};

// A memfd of @len bytes named @name (close-on-exec), mapped MAP_SHARED. HCCL_E_SYSCALL when
// memfd_create fails, HCCL_E_MEMORY when it cannot be sized or mapped.
Expected<SharedMemfd> MakeSharedMemfd(const char *name, size_t len);

}  // namespace hzc
