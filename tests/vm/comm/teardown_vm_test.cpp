// SPDX-License-Identifier: Apache-2.0
// HcclCommDestroy with real processes (tests/vm/comm/teardown_rank.cpp), 2 and 4 ranks: after
// calls every rank refused (a NULL buffer on a stream and on the NULL stream, 200 rounds of a
// fresh communicator each), while another thread's call runs, with calls queued on a stream,
// and with a dead peer. The destroy must succeed on every rank every time (issue 28). The
// staging path only, so the suite runs on the host as well (HZC_TRANSPORT=memfd or no module).
// HZC_TEST_ROUNDS overrides the 200 rounds.
#include <hccl/hccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "rank_launch.h"

namespace {

class TeardownTest : public hzc::test::Test, public ::testing::WithParamInterface<uint32_t> {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    char dir[] = "/tmp/hzc-teardown-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    logs_ = dir;
  }
  void TearDown() override {
    std::filesystem::remove_all(logs_);
    hzc::test::Test::TearDown();
  }

  static std::string Rounds() {
    const char *r = std::getenv("HZC_TEST_ROUNDS");
    return r != nullptr ? r : "200";
  }

  // Run @scenario on GetParam() ranks (their library logs go to files); their exit statuses.
  std::vector<int> Run(const char *scenario) {
    return hzc::test::RunRankProcesses(HZC_TEARDOWN_RANK, GetParam(), {scenario, Rounds()},
                                       [&](uint32_t) {
                                         setenv("HCCL_BUFFSIZE", "1", 1);
                                         setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
                                         setenv("HCCL_EXEC_TIMEOUT", "60", 1);
                                         setenv("HZC_LOG_FILE", (logs_ + "/rank.%p").c_str(), 1);
                                       });
  }

  // Every error line the ranks logged contains one of @allowed (a refusal they were made to
  // make); any other one fails the test.
  void ExpectOnlyErrors(std::initializer_list<const char *> allowed) {
    for (const auto &entry : std::filesystem::directory_iterator(logs_)) {
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        if (!hzc::test::IsErrorLogLine(line)) {
          continue;
        }
        bool ok = false;
        for (const char *a : allowed) {
          ok = ok || line.find(a) != std::string::npos;
        }
        EXPECT_TRUE(ok) << "a rank logged: " << line;
      }
    }
  }

  std::string logs_;
};

// Every rank passes a NULL sendBuf to an AllReduce on a stream (HCCL_E_PTR at once, the
// refusal queued on the stream) and destroys the communicator at once: HCCL_SUCCESS every round.
TEST_P(TeardownTest, RefuseOnAStreamThenDestroy) {
  EXPECT_EQ(Run("refuse-stream"), std::vector<int>(GetParam(), 0));
  ExpectOnlyErrors({"HcclAllReduce: sendBuf is null"});
}

// The same on the NULL stream (the refusal made in the call).
TEST_P(TeardownTest, RefuseOnTheNullStreamThenDestroy) {
  EXPECT_EQ(Run("refuse-null"), std::vector<int>(GetParam(), 0));
  ExpectOnlyErrors({"HcclAllReduce: sendBuf is null"});
}

// Rank 0 destroys while another of its threads is in an AllReduce that waits for the other
// ranks: the destroy waits for it and succeeds; a call that starts meanwhile is HCCL_E_PARA.
TEST_P(TeardownTest, DestroyWaitsForACallOfAnotherThread) {
  EXPECT_EQ(Run("busy"), std::vector<int>(GetParam(), 0));
  ExpectOnlyErrors({"HcclGetRankSize: comm=", "HcclAllReduce: comm="});
}

// Rank 0 destroys right after queueing three AllReduces on a stream that the others make 1.5 s
// later: the destroy waits until they have run, and succeeds.
TEST_P(TeardownTest, DestroyWaitsForTheCallsQueuedOnAStream) {
  EXPECT_EQ(Run("queued"), std::vector<int>(GetParam(), 0));
  ExpectOnlyErrors({});
}

// Rank 1 dies; the others destroy with an AllReduce queued that cannot complete: the call
// fails on the dead peer and the destroy succeeds.
TEST_P(TeardownTest, DestroyWithADeadPeerSucceeds) {
  std::vector<int> expect(GetParam(), 0);
  expect[1] = -SIGKILL;
  EXPECT_EQ(Run("deadpeer"), expect);
  ExpectOnlyErrors({"HcclAllReduce (queued on a stream): ",
                    "aclrtSynchronizeStream: task HcclAllReduce failed"});
}

std::string RanksName(const ::testing::TestParamInfo<uint32_t> &p) {
  return std::to_string(p.param) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Ranks, TeardownTest, ::testing::Values(2U, 4U), RanksName);

}  // namespace
