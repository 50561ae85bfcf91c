// SPDX-License-Identifier: Apache-2.0
// What each transport's PeerMemory decides before it looks at a peer: the checks of its
// arguments, the same on every transport.
#include <unistd.h>

#include <memory>
#include <vector>

#include "hzc_test.h"
#include "transport/kernel.h"
#include "transport/memfd.h"

namespace hzc::transport {
namespace {

using ::testing::HasSubstr;

// Rank 0 is this process, rank 1 a process that does not exist.
std::unique_ptr<PeerMemory> Make(Kind kind) {
  const auto self = static_cast<uint32_t>(getpid());
  if (kind == Kind::kKernel) {
    // No device: every call below must fail before it would use one.
    return std::make_unique<KernelPeerMemory>(
        nullptr, Device::DomainId{}, 0,
        std::vector<RankCard>{RankCard{.pid = self}, RankCard{.pid = self + 1000000}});
  }
  return std::make_unique<MemfdPeerMemory>(0, std::vector<uint32_t>{self, self + 1000000});
}

class PeerMemoryTest : public test::Test, public ::testing::WithParamInterface<Kind> {
 protected:
  std::unique_ptr<PeerMemory> memory_ = Make(GetParam());
};

TEST_P(PeerMemoryTest, BadRank) {
  auto p = memory_->Translate(2, 0x1000, 8);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_EQ(p.status().message(), "rank=2: the communicator has 2 ranks");
  EXPECT_EQ(memory_->Activation(5, 0x1000, 8).status().code(), HCCL_E_PARA);
  EXPECT_EQ(memory_->Activations(2).status().code(), HCCL_E_PARA);
}

TEST_P(PeerMemoryTest, ZeroLength) {
  auto p = memory_->Translate(1, 0x1000, 0);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_EQ(p.status().message(), "size=0: must not be 0");
  EXPECT_EQ(memory_->Activation(1, 0x1000, 0).status().code(), HCCL_E_PARA);
}

TEST_P(PeerMemoryTest, WrappingRange) {
  auto p = memory_->Translate(1, UINTPTR_MAX - 4, 8);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_THAT(p.status().message(), HasSubstr("wraps around"));
  EXPECT_EQ(memory_->Activation(0, UINTPTR_MAX, 2).status().code(), HCCL_E_PARA);
}

TEST_P(PeerMemoryTest, NothingMappedAtFirst) {
  EXPECT_EQ(memory_->MappedWindows(), 0U);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerMemoryTest, ::testing::Values(Kind::kKernel, Kind::kMemfd),
                         [](const ::testing::TestParamInfo<Kind> &p) {
                           return std::string(KindName(p.param));
                         });

}  // namespace
}  // namespace hzc::transport
