// SPDX-License-Identifier: Apache-2.0
// Communicators and their registry without the module: identity, servers, the memory
// registrations of a communicator without links, and handles that are never reused.
#include "core/comm.h"

#include <memory>
#include <string>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

std::shared_ptr<Communicator> MakeComm(uint32_t rank, const std::vector<std::string> &hosts) {
  std::vector<bootstrap::RankIdentity> ranks;
  for (uint32_t r = 0; r < hosts.size(); ++r) {
    ranks.push_back({.host = hosts[r], .pid = 100 + r, .address = ""});
  }
  return std::make_shared<Communicator>(bootstrap::UniqueId{}, rank, std::move(ranks));
}

class CommTest : public test::Test {};

TEST_F(CommTest, RankSizeAndServers) {
  auto comm = MakeComm(2, {"a", "b", "a", "c"});
  EXPECT_EQ(comm->rank(), 2U);
  EXPECT_EQ(comm->size(), 4U);
  EXPECT_EQ(comm->ServerCount(), 3U);
  EXPECT_EQ(comm->ranks()[3].pid, 103U);
  EXPECT_EQ(MakeComm(0, {"a", "a"})->ServerCount(), 1U);
}

TEST_F(CommTest, SerialsAreDistinct) {
  EXPECT_NE(MakeComm(0, {"a"})->serial(), MakeComm(0, {"a"})->serial());
}

// Before link establishment there are no links and no peer memory, and registering memory
// registers nothing (cookie 0): the kernel-only case.
TEST_F(CommTest, UnlinkedCommunicatorRegistersNothing) {
  auto comm = MakeComm(0, {"a", "a"});
  EXPECT_FALSE(comm->linked());
  EXPECT_EQ(comm->links(), nullptr);
  EXPECT_EQ(comm->peer_memory(), nullptr);
  int x = 0;
  auto cookie = comm->RegisterMemory(reinterpret_cast<uintptr_t>(&x), sizeof(x));
  ASSERT_TRUE(cookie.ok()) << cookie.status().message();
  EXPECT_EQ(*cookie, 0U);
  EXPECT_EQ(comm->FindMemory(&x, sizeof(x)), nullptr);
  EXPECT_FALSE(comm->DropMemory(reinterpret_cast<uintptr_t>(&x)));
}

TEST_F(CommTest, RegistryHandlesAreNeverReused) {
  auto &registry = CommRegistry::Process();
  const size_t before = registry.Count();
  const HcclComm first = registry.Add(MakeComm(0, {"a"}));
  ASSERT_NE(first, nullptr);
  {
    auto got = registry.Get(first);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)->size(), 1U);
  }
  EXPECT_EQ(registry.Count(), before + 1);
  ASSERT_TRUE(registry.Remove(first).ok());
  EXPECT_EQ(registry.Count(), before);
  EXPECT_EQ(registry.Get(first).status().code(), HCCL_E_PARA);
  EXPECT_EQ(registry.Remove(first).code(), HCCL_E_PARA);

  const HcclComm second = registry.Add(MakeComm(0, {"a"}));
  EXPECT_NE(second, first);
  ASSERT_TRUE(registry.Remove(second).ok());
}

// A caller holding the communicator (a call in progress) makes Remove say HCCL_E_AGAIN.
TEST_F(CommTest, RemoveWhileHeldIsAgain) {
  auto &registry = CommRegistry::Process();
  const HcclComm handle = registry.Add(MakeComm(0, {"a"}));
  {
    auto held = registry.Get(handle);
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(registry.Remove(handle).code(), HCCL_E_AGAIN);
  }
  EXPECT_TRUE(registry.Remove(handle).ok());
}

TEST_F(CommTest, ForeignHandleIsPara) {
  int not_a_comm = 0;
  EXPECT_EQ(CommRegistry::Process().Get(&not_a_comm).status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc
