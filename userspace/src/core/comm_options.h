// SPDX-License-Identifier: Apache-2.0
// A communicator's own settings, from the HcclCommConfig given when it was made (or none).
#pragma once

#include <hccl/hccl_types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace hzc {

struct CommOptions {
  std::string name;                                  // empty: made from the unique id
  std::optional<uint64_t> buffer_mb;                 // nullopt: HCCL_BUFFSIZE
  std::optional<std::chrono::seconds> exec_timeout;  // nullopt: HCCL_EXEC_TIMEOUT
  std::string udi;
  uint32_t deterministic = 0;  // kept for the log; reductions are always in rank order
  // hcclSymWinMaxMemSizePerRank: the bytes of symmetric windows each rank may register on the
  // communicator (the stride of HCCL's window address space).
  uint64_t sym_win_bytes = uint64_t{HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE} << 30;

  // The options of @config (nullptr: none). HCCL_E_PARA naming the field for a header that
  // HcclCommConfigInit did not fill, a name without its NUL, or a value out of its range.
  // Fields beyond the size recorded in the header (a program built against an older, shorter
  // HcclCommConfig) count as not set.
  static Expected<CommOptions> FromConfig(const HcclCommConfig *config);
};

}  // namespace hzc
