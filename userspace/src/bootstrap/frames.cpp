// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/frames.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace hzc::bootstrap {

FrameHeader MakeFrameHeader(uint64_t space, uint32_t tag, uint32_t len) {
  return FrameHeader{htobe64(space), htonl(tag), htonl(len)};
}

std::string FrameInput::Add(std::span<const std::byte> data) {
  partial_.insert(partial_.end(), data.begin(), data.end());
  size_t used = 0;
  std::string why;
  while (why.empty() && partial_.size() - used >= sizeof(FrameHeader)) {
    FrameHeader h{};
    std::memcpy(&h, partial_.data() + used, sizeof(h));
    const uint32_t len = ntohl(h.len);
    if (len > kMaxPayload) {
      why = fmt::format(
          " sent a message of {} bytes, more than 1 MiB (not this protocol?); "
          "the connection is closed",
          len);
      break;
    }
    if (partial_.size() - used - sizeof(h) < len) {
      break;
    }
    const auto *begin = partial_.data() + used + sizeof(h);
    why = Queue({be64toh(h.space), ntohl(h.tag), Blob(begin, begin + len)});
    used += sizeof(h) + len;
  }
  if (!why.empty()) {
    Clear();
    return why;
  }
  partial_.erase(partial_.begin(), partial_.begin() + static_cast<ptrdiff_t>(used));
  return why;
}

std::string FrameInput::Queue(Frame f) {
  uint32_t &count = per_tag_[{f.space, f.tag}];
  const size_t cost = kFrameCost + f.payload.size();
  if (count >= kMaxQueuedPerTag) {
    return fmt::format(
        " sent more than {} messages of tag {} (space {:#x}) that no receive "
        "took (a flood?); the connection is closed",
        kMaxQueuedPerTag, f.tag, f.space);
  }
  if (queued_ + cost > kMaxQueuedBytes) {
    return fmt::format(
        " sent more than {} MiB of messages that no receive took ({} of them; "
        "a flood?); the connection is closed",
        kMaxQueuedBytes >> 20, frames_.size() + 1);
  }
  ++count;
  queued_ += cost;
  frames_.push_back(std::move(f));
  return "";
}

std::optional<FrameInput::Blob> FrameInput::Take(uint64_t space, uint32_t tag) {
  auto it = std::find_if(frames_.begin(), frames_.end(), [&](const Frame &frame) {
    return frame.space == space && frame.tag == tag;
  });
  if (it == frames_.end()) {
    return std::nullopt;
  }
  Blob out = std::move(it->payload);
  frames_.erase(it);
  queued_ -= kFrameCost + out.size();
  auto count = per_tag_.find({space, tag});
  if (--count->second == 0) {
    per_tag_.erase(count);
  }
  return out;
}

void FrameInput::Clear() {
  std::vector<std::byte>().swap(partial_);
  std::deque<Frame>().swap(frames_);
  per_tag_.clear();
  queued_ = 0;
}

}  // namespace hzc::bootstrap
