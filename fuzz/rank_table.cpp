// SPDX-License-Identifier: Apache-2.0
// Fuzzer: a rank table's JSON (HcclCommInitClusterInfo's file, bootstrap/rank_table.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/rank_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)hzc::bootstrap::ParseRankTable(std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}
