// SPDX-License-Identifier: Apache-2.0
// Fuzzer: what a peer sends on a Group connection (bootstrap/frames.h), arriving in pieces of
// the sizes the input's first bytes choose, with receives taking frames between them. The input
// must never hold more than its bounds, whatever the bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "bootstrap/frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using hzc::bootstrap::FrameHeader;
  using hzc::bootstrap::FrameInput;
  if (size < 2) {
    return 0;
  }
  const size_t piece = 1 + data[0] % 64;  // bytes per arrival
  const auto take_tag = static_cast<uint32_t>(data[1] % 4);
  data += 2, size -= 2;
  FrameInput in;
  const auto *bytes = reinterpret_cast<const std::byte *>(data);
  for (size_t at = 0; at < size; at += piece) {
    const std::string why = in.Add(std::span(bytes + at, std::min(piece, size - at)));
    if (!why.empty() && (in.queued_frames() != 0 || in.partial() != 0)) {
      std::abort();  // a broken protocol leaves nothing behind
    }
    if (in.queued_bytes() > FrameInput::kMaxQueuedBytes ||
        in.partial() >= sizeof(FrameHeader) + FrameInput::kMaxPayload) {
      std::abort();
    }
    (void)in.Take(0, take_tag);
  }
  while (in.queued_frames() > 0) {
    bool took = false;
    for (uint32_t tag = 0; tag < 4 && !took; ++tag) {
      took = in.Take(0, tag).has_value();
    }
    if (!took) {
      break;  // frames of other spaces and tags stay
    }
  }
  return 0;
}
