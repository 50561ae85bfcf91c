// SPDX-License-Identifier: Apache-2.0
// Link setup across servers: the board of verbs::Links (verbs::BlobBoard) over the TCP
// connections of a communicator that spans servers (bootstrap::Group), among some of its ranks.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "bootstrap/group.h"
#include "verbs/board.h"

namespace hzc::transport {

class GroupBoard : public verbs::BlobBoard {
 public:
  // Board of @members (ascending ranks of @group, including its own rank): board rank i is
  // member i. Key k is sent under tag @tag_base + k (boards that may be in use on one pair of
  // ranks at once need tag ranges apart).
  static constexpr uint32_t kTagBase = 0x100;
  GroupBoard(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t tag_base = kTagBase);

  uint32_t rank() const override { return rank_; }
  uint32_t nranks() const override { return static_cast<uint32_t>(members_.size()); }
  // Sends @blob to every other member at once (a failure tells them without a wait).
  Status Put(uint32_t key, std::span<const std::byte> blob) const override;
  // Receives every other member's blob of @key. HCCL_E_INTERNAL when one is larger than
  // @stride; the group's errors otherwise (naming the rank).
  Expected<verbs::BoardBlobs> Wait(uint32_t key, uint32_t stride,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::string_view what) const override;

 private:
  bootstrap::Group &group_;
  const std::vector<uint32_t> members_;
  const uint32_t tag_base_;
  uint32_t rank_ = 0;
  mutable std::map<uint32_t, bootstrap::Group::Blob> mine_;  // by key
};

}  // namespace hzc::transport
