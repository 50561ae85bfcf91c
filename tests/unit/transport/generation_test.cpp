// SPDX-License-Identifier: Apache-2.0
// The process's generation page and a peer's view of it, the peer being this process or a
// forked child.
#include "transport/generation.h"

#include <sys/mman.h>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc::transport {
namespace {

using GenerationTest = test::Test;
using test::ForkedChild;

TEST_F(GenerationTest, ProcessPageIsSharedAndBumps) {
  auto a = Generation::Process();
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = Generation::Process();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  const uint64_t before = (*a)->Load();
  (*a)->Bump();
  Generation::BumpProcess();
  EXPECT_EQ((*b)->Load(), before + 2);
}

TEST_F(GenerationTest, PeerSeesTheCounter) {
  auto own = Generation::Process();
  ASSERT_TRUE(own.ok());
  auto peer = PeerGeneration::Attach(getpid(), (*own)->fd());
  if (!peer.ok()) {
    GTEST_SKIP() << "pidfd_getfd refused here: " << peer.status().message();
  }
  EXPECT_EQ((*peer)->Load(), (*own)->Load());
  (*own)->Bump();
  EXPECT_EQ((*peer)->Load(), (*own)->Load());
  EXPECT_TRUE((*peer)->Alive());
}

TEST_F(GenerationTest, AttachRefusesOtherDescriptors) {
  UniqueFd mem(memfd_create("not-a-generation", MFD_CLOEXEC));
  ASSERT_TRUE(mem.valid());
  auto peer = PeerGeneration::Attach(getpid(), mem.get());
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), HCCL_E_SYSCALL);
  auto none = PeerGeneration::Attach(getpid(), 4095);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), HCCL_E_SYSCALL);
  EXPECT_THAT(none.status().message(), ::testing::HasSubstr("generation page: pidfd_getfd"));
}

TEST_F(GenerationTest, ChildHasItsOwnPageAndItsExitIsSeen) {
  ASSERT_TRUE(Generation::Process().ok());  // the parent's page exists before the fork
  ForkedChild child([](ForkedChild::Pipes pipes) {
    auto g = Generation::Process();
    if (!g.ok()) {
      return 1;
    }
    (*g)->Bump();
    (*g)->Bump();
    uint64_t word = 0;
    return ForkedChild::Write(pipes.out, uint64_t((*g)->fd())) && ForkedChild::Read(pipes.in, &word)
               ? 0
               : 2;
  });
  uint64_t remote_fd = 0;
  ASSERT_TRUE(child.Receive(&remote_fd));
  auto peer = PeerGeneration::Attach(child.pid(), static_cast<int>(remote_fd));
  if (!peer.ok()) {
    GTEST_SKIP() << "pidfd_getfd refused here: " << peer.status().message();
  }
  EXPECT_EQ((*peer)->Load(), 2U);  // a fresh page, not the parent's
  EXPECT_TRUE((*peer)->Alive());
  ASSERT_TRUE(child.Send(0));
  ASSERT_TRUE(child.WaitExited());
  EXPECT_FALSE((*peer)->Alive());
  EXPECT_EQ((*peer)->Load(), 2U);  // the mapping outlives the process
  EXPECT_EQ(child.Wait(), 0);
}

}  // namespace
}  // namespace hzc::transport
