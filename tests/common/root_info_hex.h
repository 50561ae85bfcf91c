// SPDX-License-Identifier: Apache-2.0
// HcclRootInfo as text, for the command line of a rank process (tests and their rank binaries).
#pragma once

#include <hccl/hccl.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace hzc::test {

// @root as 2 * sizeof(HcclRootInfo) lowercase hex digits.
inline std::string RootInfoToHex(const HcclRootInfo &root) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : root.internal) {
    out += kDigits[static_cast<unsigned char>(c) >> 4];
    out += kDigits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// The inverse of RootInfoToHex; false if @hex is not exactly that many hex digits.
inline bool RootInfoFromHex(const char *hex, HcclRootInfo *root) {
  if (std::strlen(hex) != 2 * sizeof(HcclRootInfo)) {
    return false;
  }
  for (size_t i = 0; i < sizeof(HcclRootInfo); ++i) {
    char digits[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
    char *end = nullptr;
    const long v = std::strtol(digits, &end, 16);
    if (end != digits + 2) {
      return false;
    }
    root->internal[i] = static_cast<char>(v);
  }
  return true;
}

}  // namespace hzc::test
