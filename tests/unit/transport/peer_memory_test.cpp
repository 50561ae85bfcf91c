// SPDX-License-Identifier: Apache-2.0
// What PeerMemory decides before it asks hzc.ko: the checks of its arguments.
#include "transport/peer_memory.h"

#include <unistd.h>

#include <memory>
#include <vector>

#include "hzc_test.h"

namespace hzc::transport {
namespace {

using ::testing::HasSubstr;

class PeerMemoryTest : public test::Test {
 protected:
  // No device: every call below must fail before it would use one.
  PeerMemory memory_{nullptr, Device::DomainId{}, 0,
                     std::vector<RankCard>{RankCard{.pid = static_cast<uint32_t>(getpid())},
                                           RankCard{.pid = static_cast<uint32_t>(getpid()) + 1}}};
};

TEST_F(PeerMemoryTest, BadRank) {
  auto p = memory_.Translate(2, 0x1000, 8);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_EQ(p.status().message(), "rank=2: the communicator has 2 ranks");
  EXPECT_EQ(memory_.Activation(5, 0x1000, 8).status().code(), HCCL_E_PARA);
  EXPECT_EQ(memory_.Activations(2).status().code(), HCCL_E_PARA);
}

TEST_F(PeerMemoryTest, ZeroLength) {
  auto p = memory_.Translate(1, 0x1000, 0);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_EQ(p.status().message(), "size=0: must not be 0");
  EXPECT_EQ(memory_.Activation(1, 0x1000, 0).status().code(), HCCL_E_PARA);
}

TEST_F(PeerMemoryTest, WrappingRange) {
  auto p = memory_.Translate(1, UINTPTR_MAX - 4, 8);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_THAT(p.status().message(), HasSubstr("wraps around"));
  EXPECT_EQ(memory_.Activation(0, UINTPTR_MAX, 2).status().code(), HCCL_E_PARA);
}

TEST_F(PeerMemoryTest, NothingMappedAtFirst) {
  EXPECT_EQ(memory_.MappedWindows(), 0U);
}

}  // namespace
}  // namespace hzc::transport
