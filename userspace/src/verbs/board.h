// SPDX-License-Identifier: Apache-2.0
// The kernel domain board as link setup uses it: publish a blob under a key, wait until
// every rank has published that key and read all blobs back (HZC_IOC_BOARD_PUT / WAIT on
// the caller's /dev/hzc descriptor).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hzc::verbs {

// A rank of a kernel domain the caller has joined through @fd.
struct BoardRef {
  int fd = -1;
  std::array<uint64_t, 2> domain{};
  uint32_t rank = 0;
  uint32_t nranks = 0;
};

// Every rank's blob of one key, rank r's at blob(r).
class BoardBlobs {
 public:
  BoardBlobs(uint32_t nranks, uint32_t stride)
      : stride_(stride), data_(size_t{nranks} * stride), lens_(nranks) {}
  std::span<const std::byte> blob(uint32_t rank) const {
    return {data_.data() + size_t{rank} * stride_, lens_[rank]};
  }

 private:
  friend Expected<BoardBlobs> BoardWait(const BoardRef &, uint32_t, uint32_t,
                                        std::chrono::steady_clock::time_point, std::string_view);
  uint32_t stride_;
  std::vector<std::byte> data_;
  std::vector<uint32_t> lens_;
};

// Publish @blob under @key. HCCL_E_REMOTE when the domain broke (a member left or died),
// HCCL_E_INTERNAL when this rank already published @key, HCCL_E_DRV otherwise.
Status BoardPut(const BoardRef &board, uint32_t key, std::span<const std::byte> blob);

// Wait until @deadline for every rank's blob under @key (at most @stride bytes each).
// HCCL_E_TIMEOUT naming the ranks that did not publish (@what says what was awaited),
// HCCL_E_REMOTE when the domain broke, HCCL_E_INTERNAL when a blob is larger than @stride,
// HCCL_E_DRV otherwise. Restarted after EINTR.
Expected<BoardBlobs> BoardWait(const BoardRef &board, uint32_t key, uint32_t stride,
                               std::chrono::steady_clock::time_point deadline,
                               std::string_view what);

}  // namespace hzc::verbs
