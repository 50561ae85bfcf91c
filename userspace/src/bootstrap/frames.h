// SPDX-License-Identifier: Apache-2.0
// The frames of a Group's connections (bootstrap/group.h): a 16-byte header (space, tag, payload
// length; network order) before each message's payload, and one connection's input: the bytes
// as they arrive, cut into frames and queued for the receives that take them, within bounds.
//
// What arrives is the peer's word: a length is checked before anything is read into it, space
// and tag may be any value, and a peer beyond the bounds (a message over 1 MiB, more than 256
// messages of one space and tag or 32 MiB of messages in all that no receive took) breaks the
// protocol. Not thread-safe (Group holds its lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hzc::bootstrap {

// Before each message's payload; network order. @space is the sending Group's (0, or a view's).
struct FrameHeader {
  uint64_t space;
  uint32_t tag;
  uint32_t len;
};
static_assert(sizeof(FrameHeader) == 16);

// The header of a message of @len bytes under @space and @tag.
FrameHeader MakeFrameHeader(uint64_t space, uint32_t tag, uint32_t len);

class FrameInput {
 public:
  using Blob = std::vector<std::byte>;

  static constexpr uint32_t kMaxPayload = 1U << 20;
  // Ranks exchange a few messages per tag at a time (link setup, keys, a call's agreement); a
  // peer beyond these bounds floods, and its connection fails rather than this process's memory
  // grow. Each frame is charged kFrameCost besides its payload, so that empty frames count too.
  static constexpr uint32_t kMaxQueuedPerTag = 256;
  static constexpr size_t kMaxQueuedBytes = 32U << 20;
  static constexpr size_t kFrameCost = 64;

  // Append @data and queue the frames it completes. "" while the peer keeps to the protocol;
  // else how it broke it, to be said after the peer's name (" sent a message of ..."), and the
  // input is cleared (the caller closes the connection).
  std::string Add(std::span<const std::byte> data);
  // The first queued frame of @space and @tag, if there is one.
  std::optional<Blob> Take(uint64_t space, uint32_t tag);
  // Drop everything queued and partial.
  void Clear();

  // Bytes of a frame that is not whole yet.
  size_t partial() const { return partial_.size(); }
  size_t queued_frames() const { return frames_.size(); }
  // What the queued frames are charged (kFrameCost each besides the payload).
  size_t queued_bytes() const { return queued_; }

 private:
  struct Frame {
    uint64_t space;
    uint32_t tag;
    Blob payload;
  };
  // Queue @f unless that is beyond the bounds: then why.
  std::string Queue(Frame f);

  std::vector<std::byte> partial_;  // read, not yet a whole frame
  std::deque<Frame> frames_;        // whole frames not yet taken
  size_t queued_ = 0;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> per_tag_;  // frames by (space, tag)
};

}  // namespace hzc::bootstrap
