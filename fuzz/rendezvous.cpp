// SPDX-License-Identifier: Apache-2.0
// Fuzzer: what crosses the network at the rendezvous (bootstrap/rendezvous.h): the first byte
// picks the parser, a rank's hello as the root reads it (even) or the root's answer as a rank of
// 1-64 ranks reads it (odd); the rest is the message.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bootstrap/rendezvous.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view body(reinterpret_cast<const char *>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    (void)hzc::bootstrap::CheckHello(body);
  } else {
    (void)hzc::bootstrap::CheckAnswer(body, 1 + data[0] / 2 % 64);
  }
  return 0;
}
