// SPDX-License-Identifier: Apache-2.0
// Point-to-point transfers with real processes (tests/vm/p2p/p2p_rank.cpp) against the real
// module: 2, 3 and 4 ranks, eager, staging and zero-copy paths, and the fault cases (at the
// default HZC_INLINE_MAX: their small messages go eagerly; the zero-copy ones with 0).
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "hzc_test.h"
#include "rank_launch.h"
#include "shared_sync.h"

namespace {

// Exit status of each rank (-signal when killed).
std::vector<int> RunRanks(uint32_t n, const char *scenario, const char *mode,
                          const std::map<std::string, std::string> &env = {}) {
  return hzc::test::RunRankProcesses(HZC_P2P_RANK, n, {scenario, mode}, [&](uint32_t) {
    setenv("HCCL_BUFFSIZE", "1", 1);
    setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    for (const auto &[k, v] : env) {
      setenv(k.c_str(), v.c_str(), 1);
    }
  });
}

class P2pTest : public hzc::test::Test {
 protected:
  static bool HaveModule() { return access(hzc_device_path(), F_OK) == 0; }
  // Zero-copy needs a peer transport: hzc.ko, or else the memfd transport (HZC_TRANSPORT unset,
  // auto or memfd), which runs these tests on a host without the module.
  static bool HaveTransport() {
    const char *t = std::getenv("HZC_TRANSPORT");
    return HaveModule() || t == nullptr || std::string(t) != "kernel";
  }
};

// The matrix's modes: the ranks' buffers (p2p_rank.cpp's MODE), HZC_INLINE_MAX,
// HZC_P2P_BUFFERED_MAX and HZC_P2P_ZERO_COPY_MIN, which force a protocol at every size: 0 and 0
// turn eager and buffered messages off (staging, zero-copy); 1 MiB sends every message of up to
// half a slot eagerly, but the ones of up to 4 KiB buffered; the defaults send from 4 KiB
// zero-copy what they sent eagerly before (the ranks check which path each receive took).
struct Mode {
  const char *name;
  const char *buffers;
  const char *inline_max;
  const char *buffered_max;
  const char *zero_copy_min;  // HZC_P2P_ZERO_COPY_MIN
};
constexpr Mode kModes[] = {{"staging", "staging", "0", "0", "0"},
                           {"zerocopy", "zerocopy", "0", "0", "0"},
                           {"eager", "zerocopy", "1048576", "4096", "0"},
                           {"defaults", "zerocopy", "16384", "2048", "4096"}};

class P2pMatrixTest : public P2pTest,
                      public ::testing::WithParamInterface<std::tuple<uint32_t, Mode>> {};

TEST_P(P2pMatrixTest, EveryPairTypeAndSize) {
  const auto [n, mode] = GetParam();
  if (std::string(mode.buffers) == "zerocopy" && !HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  EXPECT_EQ(RunRanks(n, "matrix", mode.buffers,
                     {{"HZC_INLINE_MAX", mode.inline_max},
                      {"HZC_P2P_BUFFERED_MAX", mode.buffered_max},
                      {"HZC_P2P_ZERO_COPY_MIN", mode.zero_copy_min}}),
            std::vector<int>(n, 0));
}

INSTANTIATE_TEST_SUITE_P(Ranks, P2pMatrixTest,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u),
                                            ::testing::ValuesIn(kModes)),
                         [](const auto &param_info) {
                           return std::to_string(std::get<0>(param_info.param)) + "ranks_" +
                                  std::get<1>(param_info.param).name;
                         });

// Mismatches and one side's bad arguments fail both sides at once; the channel stays usable
// (messages that are not buffered: a buffered send learns of neither, BufferedSends).
TEST_F(P2pTest, MismatchAndRefusalFailBothSidesAtOnce) {
  ExpectErrorLog("HcclSend: ");
  ExpectErrorLog("HcclRecv: ");
  ExpectErrorLog("HcclBatchSendRecv: sendRecvInfo is null");
  EXPECT_EQ(RunRanks(2, "mismatch", "staging", {{"HZC_P2P_BUFFERED_MAX", "0"}}),
            std::vector<int>(2, 0));
}

TEST_F(P2pTest, MismatchAndRefusalZeroCopy) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclSend: ");
  ExpectErrorLog("HcclRecv: ");
  ExpectErrorLog("HcclBatchSendRecv: sendRecvInfo is null");
  EXPECT_EQ(
      RunRanks(2, "mismatch", "zerocopy", {{"HZC_INLINE_MAX", "0"}, {"HZC_P2P_BUFFERED_MAX", "0"}}),
      std::vector<int>(2, 0));
}

// Buffered sends (1000 bytes at most here, the rest staged or zero-copy): the threshold's edges
// from and into unaligned buffers, sends that return before their receive, a batch with more
// messages in flight than boxes, in-place echoes, mismatches and refusals (only the receive
// fails), and a receiver that dies (the send that waits for a box fails).
class P2pBufferedTest : public P2pTest, public ::testing::WithParamInterface<const char *> {};

TEST_P(P2pBufferedTest, Edges) {
  if (std::string(GetParam()) == "zerocopy" && !HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  EXPECT_EQ(
      RunRanks(
          2, "buffered", GetParam(),
          {{"HZC_P2P_BUFFERED_MAX", "1000"}, {"HZC_INLINE_MAX", "0"}, {"HCCL_EXEC_TIMEOUT", "10"}}),
      (std::vector<int>{0, -SIGKILL}));
}

INSTANTIATE_TEST_SUITE_P(Buffers, P2pBufferedTest, ::testing::Values("staging", "zerocopy"));

// A batch's items progress while the channel of another of its items is still being opened.
TEST_F(P2pTest, BatchProgressesWhileAChannelWaitsToOpen) {
  EXPECT_EQ(RunRanks(3, "lateopen", "staging", {{"HCCL_EXEC_TIMEOUT", "20"}}),
            std::vector<int>(3, 0));
}

// Rank 1's receive faults on the deactivated buffer and fails; rank 0's send learns it from
// rank 1's verdict. The ranks wait for each other on a sync page after each attempt, so that
// neither exits while the other's call still runs (p2p_rank.cpp).
TEST_F(P2pTest, SendBufferDeactivatedDuringTheCopyIsAnError) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclRecv: rank 0's send buffer became inaccessible during receive");
  ExpectErrorLog("HcclSend: rank 1 failed to receive send");
  ExpectErrorLog("HcclCommDeactivateCommMemory: ");  // the rank's clean-up, already done
  int fd = -1;
  hzc::test::SharedSync *sync = hzc::test::SharedSync::Create(&fd);
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ(RunRanks(2, "revoke", "zerocopy",
                     {{"HZC_P2P_SYNC_FD", std::to_string(fd)}, {"HZC_INLINE_MAX", "0"}}),
            (std::vector<int>{HCCL_E_REMOTE, HCCL_E_REMOTE}));
  hzc::test::SharedSync::Detach(sync);
  close(fd);
}

TEST_F(P2pTest, PeerThatNeverMatchesTimesOut) {
  ExpectErrorLog("HcclRecv: rank 1 did not post send 1 to this rank within HCCL_EXEC_TIMEOUT");
  ExpectErrorLog("HcclSend: rank 2 made no send or receive with this rank");
  EXPECT_EQ(RunRanks(3, "timeout", "staging", {{"HCCL_EXEC_TIMEOUT", "1"}}),
            std::vector<int>(3, 0));
}

TEST_F(P2pTest, DeadPeerIsAnErrorNotAHang) {
  ExpectErrorLog("HcclRecv: rank 1 (pid ");
  EXPECT_EQ(RunRanks(3, "die", "staging"), (std::vector<int>{0, -SIGKILL, 0}));
}

}  // namespace
