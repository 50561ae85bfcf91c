// SPDX-License-Identifier: Apache-2.0
// Fuzzer: HCCL's trust list (HCCL_WHITELIST_FILE's JSON, bootstrap/auth.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bootstrap/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)hzc::bootstrap::ParseTrustList(std::string_view(reinterpret_cast<const char *>(data), size),
                                       "fuzz");
  return 0;
}
