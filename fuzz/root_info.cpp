// SPDX-License-Identifier: Apache-2.0
// Fuzzer: an HcclRootInfo as HcclCommInitRootInfo decodes it (bootstrap/root_info.h); the input
// fills its first bytes, the rest stays zero.
#include <hccl/hccl_types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/root_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HcclRootInfo info{};
  std::memcpy(info.internal, data, std::min(size, sizeof(info.internal)));
  (void)hzc::bootstrap::Decode(info);
  return 0;
}
