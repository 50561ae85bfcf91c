// SPDX-License-Identifier: Apache-2.0
// A Group connection's input (bootstrap/frames.h): frames cut from bytes however they arrive,
// taken by space and tag, and a peer past the bounds refused before its bytes are kept.
#include "bootstrap/frames.h"

#include <cstring>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using ::testing::HasSubstr;
using Blob = FrameInput::Blob;

// A whole frame: header and @payload.
Blob Frame(uint64_t space, uint32_t tag, const std::string &payload) {
  const FrameHeader h = MakeFrameHeader(space, tag, static_cast<uint32_t>(payload.size()));
  Blob out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

std::string Text(const std::optional<Blob> &b) {
  return b ? std::string(reinterpret_cast<const char *>(b->data()), b->size()) : "<none>";
}

TEST(FrameInputTest, FramesArriveByteByByteAndAreTakenBySpaceAndTag) {
  FrameInput in;
  Blob bytes;
  for (const Blob &f :
       {Frame(0, 7, "first"), Frame(1, 7, "other space"), Frame(0, 8, ""), Frame(0, 7, "second")}) {
    bytes.insert(bytes.end(), f.begin(), f.end());
  }
  for (std::byte b : bytes) {
    ASSERT_EQ(in.Add({&b, 1}), "");
  }
  EXPECT_EQ(in.partial(), 0U);
  EXPECT_EQ(in.queued_frames(), 4U);
  EXPECT_EQ(Text(in.Take(0, 7)), "first");
  EXPECT_EQ(Text(in.Take(0, 7)), "second");  // past the frames of other spaces and tags
  EXPECT_EQ(Text(in.Take(0, 7)), "<none>");
  EXPECT_EQ(Text(in.Take(0, 8)), "");
  EXPECT_EQ(Text(in.Take(1, 7)), "other space");
  EXPECT_EQ(in.queued_bytes(), 0U);
}

TEST(FrameInputTest, ALengthPastTheLimitIsRefusedBeforeItsPayload) {
  FrameInput in;
  const FrameHeader h = MakeFrameHeader(0, 1, FrameInput::kMaxPayload + 1);
  ASSERT_EQ(in.Add(Frame(0, 1, "kept")), "");
  EXPECT_THAT(in.Add({reinterpret_cast<const std::byte *>(&h), sizeof(h)}),
              HasSubstr("sent a message of 1048577 bytes, more than 1 MiB"));
  EXPECT_EQ(in.queued_frames(), 0U);  // cleared: the connection is closed
  EXPECT_EQ(in.partial(), 0U);
}

TEST(FrameInputTest, AFloodOfOneTagOrOfBytesBreaksTheProtocol) {
  FrameInput in;
  for (uint32_t i = 0; i < FrameInput::kMaxQueuedPerTag; ++i) {
    ASSERT_EQ(in.Add(Frame(0, 3, "")), "") << i;
  }
  ASSERT_EQ(in.Add(Frame(0, 4, "")), "");  // another tag has its own count
  EXPECT_THAT(in.Add(Frame(0, 3, "")), HasSubstr("sent more than 256 messages of tag 3"));
  EXPECT_EQ(in.queued_frames(), 0U);

  const std::string big(FrameInput::kMaxPayload, 'x');
  uint32_t tag = 0;
  std::string why;
  while (why.empty() && tag < 64) {
    why = in.Add(Frame(0, tag++, big));
  }
  EXPECT_THAT(why, HasSubstr("sent more than 32 MiB of messages that no receive took"));
  EXPECT_EQ(tag, 32U);  // 31 frames fit with their charge, the 32nd does not
  EXPECT_EQ(in.queued_bytes(), 0U);
}

TEST(FrameInputTest, TakingMakesRoomAgain) {
  FrameInput in;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < FrameInput::kMaxQueuedPerTag; ++i) {
      ASSERT_EQ(in.Add(Frame(0, 3, "x")), "");
    }
    for (uint32_t i = 0; i < FrameInput::kMaxQueuedPerTag; ++i) {
      ASSERT_EQ(Text(in.Take(0, 3)), "x");
    }
  }
  EXPECT_EQ(in.queued_bytes(), 0U);
}

}  // namespace
}  // namespace hzc::bootstrap
