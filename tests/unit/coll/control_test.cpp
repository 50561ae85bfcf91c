// SPDX-License-Identifier: Apache-2.0
// The control area of the collectives without hzc.ko: ranks as threads of this process, or a
// forked child, meet in it, post descriptors, pass barriers, abort, time out and notice a
// rank that died.
#include "coll/control.h"

#include <future>
#include <string>
#include <vector>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc::coll {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

class ControlAreaTest : public test::Test {
 protected:
  ControlArea::Options Options(uint32_t rank, uint32_t nranks,
                               milliseconds timeout = milliseconds(5000)) const {
    return ControlArea::Options{.name = name_,
                                .rank = rank,
                                .nranks = nranks,
                                .staging_bytes = 10000,
                                .connect_timeout = timeout};
  }
  // Every rank of @nranks opens the area in a thread of its own.
  std::vector<std::unique_ptr<ControlArea>> OpenAll(uint32_t nranks) {
    std::vector<std::future<Expected<std::unique_ptr<ControlArea>>>> futures;
    for (uint32_t r = 0; r < nranks; ++r) {
      futures.push_back(std::async(std::launch::async,
                                   [=, this] { return ControlArea::Open(Options(r, nranks)); }));
    }
    std::vector<std::unique_ptr<ControlArea>> areas;
    for (auto &f : futures) {
      auto area = f.get();
      EXPECT_TRUE(area.ok()) << area.status().message();
      areas.push_back(area.ok() ? std::move(*area) : nullptr);
    }
    return areas;
  }
  // Every area passes one barrier concurrently; their statuses.
  static std::vector<Status> BarrierAll(const std::vector<std::unique_ptr<ControlArea>> &areas,
                                        milliseconds timeout) {
    std::vector<std::future<Status>> futures;
    for (const auto &a : areas) {
      futures.push_back(std::async(std::launch::async, [&a, timeout] {
        return a->Barrier(Clock::now() + timeout, "the test barrier");
      }));
    }
    std::vector<Status> out;
    for (auto &f : futures) {
      out.push_back(f.get());
    }
    return out;
  }

  const std::string name_ = "hzc-test-control-" + std::to_string(getpid()) + "-" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

TEST_F(ControlAreaTest, RanksShareTheAreaAndPassBarriers) {
  auto areas = OpenAll(3);
  ASSERT_EQ(areas.size(), 3U);
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_NE(areas[r], nullptr);
    EXPECT_EQ(areas[r]->rank(), r);
    EXPECT_EQ(areas[r]->nranks(), 3U);
    EXPECT_EQ(areas[r]->staging_bytes(), 12288U);  // page-aligned
    areas[r]->Post(CallDesc{.seq = 1, .kind = 7, .count = 100 + r});
  }
  areas[0]->staging()[5] = 42;
  for (const Status &st : BarrierAll(areas, milliseconds(5000))) {
    EXPECT_TRUE(st.ok()) << st.message();
  }
  EXPECT_EQ(areas[2]->staging()[5], 42);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(areas[1]->Posted(r, 1).count, 100 + r);
    EXPECT_EQ(areas[1]->Posted(r, 1).kind, 7U);
  }
}

TEST_F(ControlAreaTest, ArgumentRegionsAreSharedPerRankAndParity) {
  auto areas = OpenAll(3);
  ASSERT_TRUE(areas[0] && areas[1] && areas[2]);
  const size_t words = ControlArea::kArgWords * 3;
  for (uint32_t r = 0; r < 3; ++r) {
    for (uint64_t seq : {1, 2}) {
      uint64_t *w = areas[r]->Args(r, seq);
      for (size_t i = 0; i < words; ++i) {
        w[i] = r * 1000 + seq * 100 + i;
      }
    }
  }
  for (const Status &st : BarrierAll(areas, milliseconds(5000))) {
    EXPECT_TRUE(st.ok()) << st.message();
  }
  for (uint32_t r = 0; r < 3; ++r) {
    for (uint64_t seq : {3, 4}) {  // the parities of calls 1 and 2
      const uint64_t *w = areas[(r + 1) % 3]->Args(r, seq);
      EXPECT_EQ(w[0], r * 1000 + (seq - 2) * 100);
      EXPECT_EQ(w[words - 1], r * 1000 + (seq - 2) * 100 + words - 1);
    }
  }
  // The staging area is not part of them.
  EXPECT_GE(areas[0]->staging(), reinterpret_cast<uint8_t *>(areas[0]->Args(2, 1) + words));
}

TEST_F(ControlAreaTest, OneRankNeedsNobody) {
  auto area = ControlArea::Open(Options(0, 1, milliseconds(0)));
  ASSERT_TRUE(area.ok()) << area.status().message();
  EXPECT_TRUE((*area)->Barrier(Clock::now(), "nothing").ok());
}

TEST_F(ControlAreaTest, AbortReachesEveryRank) {
  auto areas = OpenAll(2);
  ASSERT_TRUE(areas[0] && areas[1]);
  areas[1]->Abort(HCCL_E_PARA);
  Status st = areas[0]->Barrier(Clock::now() + milliseconds(5000), "the test barrier");
  EXPECT_EQ(st.code(), HCCL_E_REMOTE);
  EXPECT_THAT(st.message(), HasSubstr("rank 1 failed a collective call"));
  areas[0]->Abort(HCCL_E_TIMEOUT);  // the first abort stays
  EXPECT_EQ(areas[1]->CheckAbort().code(), HCCL_E_REMOTE);
}

TEST_F(ControlAreaTest, TimeoutNamesTheRankThatDidNotCome) {
  auto areas = OpenAll(3);
  ASSERT_TRUE(areas[0] && areas[1] && areas[2]);
  areas.pop_back();  // rank 2 does not come to the barrier; the others have 2 s to
  for (const Status &st : BarrierAll(areas, milliseconds(2000))) {
    EXPECT_EQ(st.code(), HCCL_E_TIMEOUT);
    EXPECT_THAT(st.message(), HasSubstr("rank(s) 2 of 3 did not reach the test barrier"));
  }
}

TEST_F(ControlAreaTest, OpenTimesOutWhenARankNeverCalls) {
  auto area = ControlArea::Open(Options(0, 2, milliseconds(100)));
  ASSERT_FALSE(area.ok());
  EXPECT_EQ(area.status().code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(area.status().message(), HasSubstr("control area: rank(s) 1 of 2"));
  EXPECT_THAT(area.status().message(), HasSubstr("HCCL_CONNECT_TIMEOUT"));
  area = ControlArea::Open(Options(1, 2, milliseconds(100)));
  EXPECT_EQ(area.status().code(), HCCL_E_TIMEOUT);
}

TEST_F(ControlAreaTest, ARankThatDiesIsNoticed) {
  const ControlArea::Options child_options = Options(1, 2);
  test::ForkedChild child([&](test::ForkedChild::Pipes pipes) {
    auto area = ControlArea::Open(child_options);
    if (!area.ok() || !(*area)->Barrier(Clock::now() + milliseconds(5000), "one").ok()) {
      return 1;
    }
    uint64_t word = 0;
    test::ForkedChild::Read(pipes.in, &word);  // then exit without the next barrier
    return 0;
  });
  auto area = ControlArea::Open(Options(0, 2));
  ASSERT_TRUE(area.ok()) << area.status().message();
  ASSERT_TRUE((*area)->Barrier(Clock::now() + milliseconds(5000), "one").ok());
  ASSERT_TRUE(child.Send(0));
  Status st = (*area)->Barrier(Clock::now() + milliseconds(10000), "two");
  EXPECT_EQ(st.code(), HCCL_E_REMOTE);
  EXPECT_EQ(st.message(), fmt::format("rank 1 (pid {}) died", child.pid()));
  EXPECT_EQ(child.Wait(), 0);
}

}  // namespace
}  // namespace hzc::coll
