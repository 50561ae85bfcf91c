// SPDX-License-Identifier: Apache-2.0
// Room in RLIMIT_NOFILE for the connections a communicator needs.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "base/status.h"

namespace hzc {

// Descriptors kept free beyond what a caller asks for (the process's own files, pidfds, memfds).
inline constexpr size_t kSpareDescriptors = 64;

// The soft limit that leaves room for @more descriptors beyond the @open ones under @limit:
// nullopt when the current soft limit does (with kSpareDescriptors to spare), else the open
// ones, @more and the spare, at most the hard limit. HCCL_E_UNAVAIL when even the hard limit
// cannot hold @open + @more.
Expected<std::optional<rlim_t>> SoftLimitFor(size_t open, size_t more, const rlimit &limit);

// Make room for @more descriptors beyond those this process has open: raise RLIMIT_NOFILE's soft
// limit when it is short (logged at INFO, naming @what), as SoftLimitFor says. HCCL_E_UNAVAIL
// naming @what, the descriptors needed and the limits when the hard limit is short.
Status ReserveDescriptors(size_t more, std::string_view what);

}  // namespace hzc
