// SPDX-License-Identifier: Apache-2.0
// The kernel domain board as link setup uses it: publish a blob under a key, wait until
// every rank has published that key and read all blobs back, through the caller's Device
// (HZC_IOC_BOARD_PUT / WAIT), with messages that say what was awaited.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/rank_list.h"
#include "base/status.h"
#include "device/device.h"

namespace hzc::verbs {

// Every rank's blob of one key, rank r's at blob(r).
class BoardBlobs {
 public:
  BoardBlobs(uint32_t nranks, uint32_t stride)
      : stride_(stride), data_(size_t{nranks} * stride), lens_(nranks) {}
  uint32_t nranks() const { return static_cast<uint32_t>(lens_.size()); }
  uint32_t stride() const { return stride_; }
  std::span<const std::byte> blob(uint32_t rank) const {
    return {data_.data() + size_t{rank} * stride_, lens_[rank]};
  }
  // What the board fills: nranks * stride bytes and nranks lengths.
  std::byte *data() { return data_.data(); }
  uint32_t *lens() { return lens_.data(); }

 private:
  uint32_t stride_;
  std::vector<std::byte> data_;
  std::vector<uint32_t> lens_;
};

// The status of a failed publish of rank @rank under @key as link setup reports it:
// HCCL_E_REMOTE when the domain broke, HCCL_E_INTERNAL when the rank already published @key,
// else HCCL_E_DRV with @failed's message.
Status BoardPutError(const Status &failed, uint32_t key, uint32_t rank);

// The status of a failed board wait on @key as link setup reports it (@what says what was
// awaited): HCCL_E_TIMEOUT naming the @missing ranks of @nranks, HCCL_E_REMOTE when the
// domain broke, HCCL_E_INTERNAL when a blob is larger than @stride, else HCCL_E_DRV.
Status BoardWaitError(const Status &failed, std::string_view what, uint32_t key, uint32_t stride,
                      std::span<const uint32_t> missing, uint32_t nranks);

// Where link setup meets: every rank publishes a blob under a key and waits for every rank's
// blob of that key: the kernel domain board of the ranks inside a server (Board).
class BlobBoard {
 public:
  virtual ~BlobBoard() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t nranks() const = 0;
  // Publish @blob under @key (once per key and rank).
  virtual Status Put(uint32_t key, std::span<const std::byte> blob) const = 0;
  // Wait until @deadline for every rank's blob under @key (at most @stride bytes each).
  virtual Expected<BoardBlobs> Wait(uint32_t key, uint32_t stride,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::string_view what) const = 0;
};

// Rank @rank of @nranks of kernel domain @domain, which the caller joined through @device.
class Board : public BlobBoard {
 public:
  Board(const Device &device, const Device::DomainId &domain, uint32_t rank, uint32_t nranks)
      : device_(device), domain_(domain), rank_(rank), nranks_(nranks) {}

  uint32_t rank() const override { return rank_; }
  uint32_t nranks() const override { return nranks_; }

  // Publish @blob under @key. HCCL_E_REMOTE when the domain broke (a member left or died),
  // HCCL_E_INTERNAL when this rank already published @key, as Device::BoardPut otherwise
  // (BoardPutError).
  Status Put(uint32_t key, std::span<const std::byte> blob) const override;

  // Wait until @deadline for every rank's blob under @key (at most @stride bytes each).
  // Errors as BoardWaitError.
  Expected<BoardBlobs> Wait(uint32_t key, uint32_t stride,
                            std::chrono::steady_clock::time_point deadline,
                            std::string_view what) const override;

 private:
  const Device &device_;
  Device::DomainId domain_;
  uint32_t rank_;
  uint32_t nranks_;
};

// The bytes of @value, to publish it.
template <typename T>
std::span<const std::byte> Bytes(const T &value) {
  return std::as_bytes(std::span<const T, 1>(&value, 1));
}

}  // namespace hzc::verbs
