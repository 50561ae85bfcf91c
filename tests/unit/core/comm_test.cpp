// SPDX-License-Identifier: Apache-2.0
// Communicators and their registry without the module: identity, servers, the memory
// registrations of a communicator without links, handles that are never reused, and a destroy
// (Remove) that waits for the calls holding the communicator.
#include "core/comm.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

using ::testing::HasSubstr;

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

// Remove waits for a caller that holds the communicator (a call in progress, a call queued on
// a stream); meanwhile the handle refuses new callers and a second Remove, and the communicator
// is released only once the hold is gone.
TEST_F(CommTest, RemoveWaitsForTheHoldsThenReleases) {
  auto &registry = CommRegistry::Process();
  auto made = MakeComm(0, {"a"});
  const std::weak_ptr<Communicator> owner = made;
  const HcclComm handle = registry.Add(std::move(made));
  ASSERT_TRUE(registry.Get(handle).ok());
  std::shared_ptr<Communicator> held = registry.Get(handle).value();  // a call in progress
  const std::weak_ptr<Communicator> weak = held;  // as the range registry keeps one
  std::atomic<bool> removed{false};
  Status result = Error(HCCL_E_INTERNAL, "not run");
  std::thread destroyer([&] {
    result = registry.Remove(handle);
    removed = true;
  });
  while (registry.Get(handle).ok()) {  // closed as soon as the Remove begins
    std::this_thread::yield();
  }
  EXPECT_EQ(registry.Get(handle).status().code(), HCCL_E_PARA);
  EXPECT_THAT(registry.Get(handle).status().message(), HasSubstr("HcclCommDestroy has begun"));
  EXPECT_EQ(registry.Remove(handle).code(), HCCL_E_PARA);  // another thread is destroying it
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(removed.load());
  EXPECT_EQ(held->size(), 1U);  // the holder still uses it
  EXPECT_FALSE(owner.expired());
  held.reset();  // the call returns
  destroyer.join();
  EXPECT_TRUE(result.ok()) << result.message();
  EXPECT_TRUE(owner.expired());  // released by Remove
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(registry.Get(handle).status().code(), HCCL_E_PARA);
  EXPECT_EQ(registry.Remove(handle).code(), HCCL_E_PARA);
}

// A Remove whose wait (the communicator's exec timeout) ends while a caller still holds the
// communicator is HCCL_E_AGAIN and releases nothing; the handle stays closed, and a later
// Remove waits again and succeeds once the hold is gone.
TEST_F(CommTest, RemoveThatGivesUpIsAgainAndCanBeRepeated) {
  auto &registry = CommRegistry::Process();
  std::vector<bootstrap::RankIdentity> ranks{{.host = "a", .pid = 100, .address = ""}};
  CommOptions options;
  options.exec_timeout = std::chrono::seconds(1);
  auto made = std::make_shared<Communicator>(bootstrap::UniqueId{}, 0, std::move(ranks),
                                             std::move(options));
  const std::weak_ptr<Communicator> owner = made;
  const HcclComm handle = registry.Add(std::move(made));
  const size_t count = registry.Count();
  ASSERT_TRUE(registry.Get(handle).ok());
  std::shared_ptr<Communicator> held = registry.Get(handle).value();
  const auto start = std::chrono::steady_clock::now();
  const Status again = registry.Remove(handle);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(again.code(), HCCL_E_AGAIN);
  EXPECT_THAT(again.message(), HasSubstr("1 call(s) on it still running or queued"));
  EXPECT_FALSE(owner.expired());
  EXPECT_EQ(registry.Count(), count);  // still there, closed
  EXPECT_EQ(registry.Get(handle).status().code(), HCCL_E_PARA);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    held.reset();
  });
  uint64_t serial = 0;
  EXPECT_TRUE(registry.Remove(handle, &serial).ok());
  release.join();
  EXPECT_NE(serial, 0U);
  EXPECT_TRUE(owner.expired());
  EXPECT_EQ(registry.Count(), count - 1);
}

// Many threads call while another removes: every call either got the communicator (and Remove
// waited for it) or was refused with HCCL_E_PARA; none sees it released.
TEST_F(CommTest, CallsRacingRemoveNeverSeeItReleased) {
  auto &registry = CommRegistry::Process();
  for (int round = 0; round < 200; ++round) {
    const HcclComm handle = registry.Add(MakeComm(0, {"a", "b"}));
    std::atomic<bool> go{false};
    std::atomic<int> refused{0}, used{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t) {
      callers.emplace_back([&] {
        while (!go.load()) {
          std::this_thread::yield();
        }
        for (;;) {
          auto c = registry.Get(handle);
          if (!c.ok()) {
            EXPECT_EQ(c.status().code(), HCCL_E_PARA);
            ++refused;
            return;
          }
          EXPECT_EQ((*c)->size(), 2U);  // alive while held
          ++used;
        }
      });
    }
    go = true;
    const Status st = registry.Remove(handle);
    EXPECT_TRUE(st.ok()) << st.message();
    for (auto &t : callers) {
      t.join();
    }
    EXPECT_EQ(refused.load(), 4);
  }
}

TEST_F(CommTest, ForeignHandleIsPara) {
  int not_a_comm = 0;
  EXPECT_EQ(CommRegistry::Process().Get(&not_a_comm).status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc
