// SPDX-License-Identifier: Apache-2.0
// The hand-off of a descriptor from rank 0 to the other ranks, with ranks as threads.
#include "bootstrap/local_exchange.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <string>
#include <vector>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

ino_t Inode(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

class LocalExchangeTest : public test::Test {
 protected:
  LocalExchange Exchange(uint32_t rank, uint32_t nranks, milliseconds timeout) const {
    return LocalExchange{.name = name_,
                         .rank = rank,
                         .nranks = nranks,
                         .deadline = std::chrono::steady_clock::now() + timeout};
  }
  // Ranks @ranks of @nranks take the descriptor concurrently.
  std::vector<std::future<Expected<HandedDescriptor>>> Take(std::vector<uint32_t> ranks,
                                                            uint32_t nranks) {
    std::vector<std::future<Expected<HandedDescriptor>>> out;
    for (uint32_t r : ranks) {
      out.push_back(std::async(std::launch::async, [this, r, nranks] {
        return TakeDescriptor(Exchange(r, nranks, milliseconds(5000)));
      }));
    }
    return out;
  }

  const std::string name_ = "hzc-test-exchange-" + std::to_string(getpid()) + "-" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

TEST_F(LocalExchangeTest, EveryRankGetsTheDescriptor) {
  UniqueFd mem(memfd_create("local-exchange-test", MFD_CLOEXEC));
  ASSERT_TRUE(mem.valid());
  auto takers = Take({3, 1, 2}, 4);
  Status st = GiveDescriptor(Exchange(0, 4, milliseconds(5000)), mem.get(), 0x1234);
  ASSERT_TRUE(st.ok()) << st.message();
  for (auto &f : takers) {
    auto got = f.get();
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->word, 0x1234U);
    EXPECT_NE(got->fd.get(), mem.get());
    EXPECT_EQ(Inode(got->fd.get()), Inode(mem.get()));
    EXPECT_GE(fcntl(got->fd.get(), F_GETFD) & FD_CLOEXEC, 1);
  }
}

TEST_F(LocalExchangeTest, OneRankGivesToNobody) {
  EXPECT_TRUE(GiveDescriptor(Exchange(0, 1, milliseconds(0)), 0, 0).ok());
}

TEST_F(LocalExchangeTest, GiverTimesOutNamingMissingRanks) {
  UniqueFd mem(memfd_create("local-exchange-test", MFD_CLOEXEC));
  auto takers = Take({2}, 4);
  // Ranks 1 and 3 never come; rank 2 has 2 s to connect (plenty, also on a loaded machine).
  LocalExchange x = Exchange(0, 4, milliseconds(2000));
  x.arrival = "make the test call";
  Status st = GiveDescriptor(x, mem.get(), 1);
  EXPECT_EQ(st.code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(st.message(), HasSubstr("rank(s) 1,3 of 4 did not make the test call"));
  EXPECT_THAT(st.message(), Not(HasSubstr(name_)));
  EXPECT_TRUE(takers[0].get().ok());
}

TEST_F(LocalExchangeTest, TakerTimesOutWithoutRankZero) {
  auto got = TakeDescriptor(Exchange(1, 2, milliseconds(100)));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(got.status().message(), HasSubstr("rank 0 did not come in time"));
}

TEST_F(LocalExchangeTest, ARankThatComesTwiceIsRefused) {
  UniqueFd mem(memfd_create("local-exchange-test", MFD_CLOEXEC));
  auto first = Take({1}, 3);
  auto giver = std::async(std::launch::async, [&] {
    return GiveDescriptor(Exchange(0, 3, milliseconds(5000)), mem.get(), 7);
  });
  ASSERT_TRUE(first[0].get().ok());
  auto again = TakeDescriptor(Exchange(1, 3, milliseconds(5000)));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), HCCL_E_REMOTE);
  auto last = Take({2}, 3);
  EXPECT_TRUE(last[0].get().ok());
  EXPECT_TRUE(giver.get().ok());
}

// The Unix socket is abstract (no file permissions), so both ends check the other's uid: a
// process of another user gets nothing, and rank 0 does not count it as the rank it claims.
TEST_F(LocalExchangeTest, ARankOfAnotherUserIsRefused) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to run a rank as another user (make check runs it as root)";
  }
  UniqueFd mem(memfd_create("local-exchange-test", MFD_CLOEXEC));
  test::ForkedChild intruder([&](test::ForkedChild::Pipes) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) {
      return 3;
    }
    auto got = TakeDescriptor(Exchange(1, 2, milliseconds(5000)));
    if (got.ok()) {
      return 0;
    }
    return got.status().code() == HCCL_E_REMOTE ? 1 : 2;
  });
  Status st = GiveDescriptor(Exchange(0, 2, milliseconds(1500)), mem.get(), 1);
  EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << st.message();
  EXPECT_THAT(st.message(), HasSubstr("rank(s) 1 of 2"));
  EXPECT_EQ(intruder.Wait(), 1) << "0: it got the descriptor; 2: another error; 3: no setresuid";
}

}  // namespace
}  // namespace hzc::bootstrap
