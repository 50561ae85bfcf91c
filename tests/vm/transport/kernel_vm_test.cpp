// SPDX-License-Identifier: Apache-2.0
// The kernel transport (transport/kernel.h) at its own layer, against the loaded hzc.ko: this
// process publishes memory, a forked peer links with it and reads it through its window, and
// after the withdrawal the peer no longer reaches it; link set-up names a rank that never came.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "acl_prop.h"
#include "forked_child.h"
#include "runtime/vmm.h"
#include "transport/kernel.h"

namespace hzc::transport {
namespace {

const size_t kPage = static_cast<size_t>(getpagesize());
constexpr uint64_t kPattern = 0x6b65726e656c2121ULL;

std::array<uint64_t, 2> NewId() {
  std::random_device rd;
  return {(uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd()};
}

// The child's side: link as rank 1, read the first word of [va, +8) of rank 0 and send it, wait
// for the parent's word, then send the code of a second Translate.
int Peer(test::ForkedChild::Pipes pipes, std::array<uint64_t, 2> id, uint32_t parent,
         uintptr_t va) {
  KernelTransport t;
  const auto self = static_cast<uint32_t>(getpid());
  auto link =
      t.Connect({.id = id, .rank = 1, .pids = {parent, self}, .timeout = std::chrono::seconds(20)});
  if (!link.ok()) {
    return 10;
  }
  auto p = (*link)->peers().Translate(0, va, sizeof(uint64_t));
  uint64_t word = 0;
  if (p.ok()) {
    std::memcpy(&word, *p, sizeof(word));
  }
  if (!test::ForkedChild::Write(pipes.out, p.ok() ? word : 0)) {
    return 11;
  }
  if (!test::ForkedChild::Read(pipes.in, &word, 20000)) {
    return 12;
  }
  auto again = (*link)->peers().Translate(0, va, sizeof(uint64_t));
  return test::ForkedChild::Write(pipes.out, static_cast<uint64_t>(again.status().code())) ? 0 : 13;
}

TEST(KernelTransportTest, APeerReadsPublishedMemoryUntilItIsWithdrawn) {
  KernelTransport t;
  void *base = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  ASSERT_TRUE(runtime::Reserve(&base, 2 * kPage, nullptr, 0).ok());
  ASSERT_TRUE(runtime::MallocPhysical(&handle, kPage, test::Prop()).ok());
  ASSERT_TRUE(runtime::Map(base, kPage, handle).ok());
  const auto va = reinterpret_cast<uintptr_t>(base);
  std::memcpy(base, &kPattern, sizeof(kPattern));
  ASSERT_TRUE(t.AddRange(va, 2 * kPage).ok());
  ASSERT_TRUE(t.Activate(va, kPage, 0).ok());

  const auto id = NewId();
  const auto self = static_cast<uint32_t>(getpid());
  test::ForkedChild child(
      [&](test::ForkedChild::Pipes pipes) { return Peer(pipes, id, self, va); });
  auto link = t.Connect({.id = id,
                         .rank = 0,
                         .pids = {self, static_cast<uint32_t>(child.pid())},
                         .timeout = std::chrono::seconds(20)});
  ASSERT_TRUE(link.ok()) << link.status().message();
  uint64_t word = 0;
  ASSERT_TRUE(child.Receive(&word, 20000));
  EXPECT_EQ(word, kPattern);  // through its window of our range

  ASSERT_TRUE(t.Deactivate(va).ok());
  ASSERT_TRUE(child.Send(1));
  ASSERT_TRUE(child.Receive(&word, 20000));
  EXPECT_EQ(word, static_cast<uint64_t>(HCCL_E_PARA));  // withdrawn: not activated any more
  EXPECT_EQ(child.Wait(), 0);
  link->reset();  // leaves the domain
  EXPECT_TRUE(t.RemoveRange(va).ok());
  EXPECT_TRUE(runtime::Unmap(base).ok());
  EXPECT_TRUE(runtime::FreePhysical(handle).ok());
  EXPECT_TRUE(runtime::Release(base).ok());
}

TEST(KernelTransportTest, ConnectNamesTheRankThatNeverCame) {
  KernelTransport t;
  const auto self = static_cast<uint32_t>(getpid());
  auto link = t.Connect(
      {.id = NewId(), .rank = 0, .pids = {self, self + 1}, .timeout = std::chrono::seconds(1)});
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), HCCL_E_TIMEOUT);
  EXPECT_NE(link.status().message().find("rank(s) 1 of 2"), std::string::npos)
      << link.status().message();
}

}  // namespace
}  // namespace hzc::transport
