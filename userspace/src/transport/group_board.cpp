// SPDX-License-Identifier: Apache-2.0
#include "transport/group_board.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace hzc::transport {

namespace {

// Link setup's publishes are short; a peer that never sends is waited for until the deadline
// of Wait, so Put only needs a generous one of its own.
constexpr std::chrono::seconds kPutTime{30};

}  // namespace

GroupBoard::GroupBoard(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t tag_base)
    : group_(group), members_(std::move(members)), tag_base_(tag_base) {
  const auto it = std::find(members_.begin(), members_.end(), group_.rank());
  rank_ = static_cast<uint32_t>(it - members_.begin());
}

Status GroupBoard::Put(uint32_t key, std::span<const std::byte> blob) const {
  if (mine_.contains(key)) {
    return Error(HCCL_E_INTERNAL, "board key {}: rank {} already published it", key, group_.rank());
  }
  mine_[key].assign(blob.begin(), blob.end());
  const auto deadline = std::chrono::steady_clock::now() + kPutTime;
  for (uint32_t m : members_) {
    if (m != group_.rank()) {
      HZC_RETURN_IF_ERROR(group_.Send(m, tag_base_ + key, blob, deadline));
    }
  }
  return Status::Ok();
}

Expected<verbs::BoardBlobs> GroupBoard::Wait(uint32_t key, uint32_t stride,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::string_view what) const {
  verbs::BoardBlobs out(nranks(), stride);
  for (uint32_t i = 0; i < nranks(); ++i) {
    bootstrap::Group::Blob blob;
    if (i == rank_) {
      const auto it = mine_.find(key);
      if (it == mine_.end()) {
        return Error(HCCL_E_INTERNAL, "{}: this rank did not publish key {}", what, key);
      }
      blob = it->second;
    } else {
      auto got = group_.Recv(members_[i], tag_base_ + key, deadline);
      if (!got.ok()) {
        return Error(got.status().code(), "{}: {}", what, got.status().message());
      }
      blob = std::move(*got);
    }
    if (blob.size() > stride) {
      return Error(HCCL_E_INTERNAL, "{}: rank {} published {} bytes under key {}, more than {}",
                   what, members_[i], blob.size(), key, stride);
    }
    std::memcpy(out.data() + size_t{i} * stride, blob.data(), blob.size());
    out.lens()[i] = static_cast<uint32_t>(blob.size());
  }
  return out;
}

}  // namespace hzc::transport
