// SPDX-License-Identifier: Apache-2.0
// examples/cann/hccl_collectives, a program written against the CANN API and built by a plain
// Makefile with -lhccl -lascendcl -lmsprofiler -Wl,-z,now, run under mpirun with 2 and 4
// ranks against the real module: every collective and point-to-point call with its data
// check, on staging buffers and on activated memory; and examples/cann/hccl_symmetric, the
// symmetric-memory flow.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include <hzc/hzc.h>

#include "hzc_test.h"

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome RunExample(int ranks, const char *program = HZC_CANN_EXAMPLE) {
  // HZC_LOG=DEBUG: the library logs the path each collective takes.
  const std::string cmd = "HZC_LOG=DEBUG " + std::string(HZC_MPIRUN) +
                          " --allow-run-as-root --oversubscribe --mca btl self,vader -np " +
                          std::to_string(ranks) + " " + program + " 4099 2>&1";
  Outcome o;
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    return o;
  }
  std::array<char, 4096> buf;
  while (fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) {
    o.output += buf.data();
  }
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

size_t Count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

class CannExampleTest : public ::testing::TestWithParam<int> {};

TEST_P(CannExampleTest, EveryCheckPassesOnEveryRank) {
  if (access(hzc_device_path(), F_OK) != 0) {
    GTEST_SKIP() << "no " << hzc_device_path() << " (hzc.ko not loaded)";
  }
  const Outcome o = RunExample(GetParam());
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("PASS: 0 failed check(s)"), std::string::npos) << o.output;
  // Every rank ran every call, the zero-copy ones included.
  for (const char *call : {"AllReduce ", "AlltoAllVC", "BatchSendRecv", "AllGather (zc)"}) {
    EXPECT_GE(Count(o.output, call), static_cast<size_t>(GetParam())) << call << "\n" << o.output;
  }
  // The "(zc)" calls, and only they, take the zero-copy path: two collectives on every rank.
  EXPECT_EQ(Count(o.output, "takes the zero-copy path"), 2U * static_cast<size_t>(GetParam()))
      << o.output;
  std::printf("%s", o.output.c_str());
}

// examples/cann/hccl_symmetric: HCCL's symmetric-memory flow (windows on reserved and mapped
// memory, collectives on them, stores through peer pointers).
TEST_P(CannExampleTest, SymmetricMemoryProgramPasses) {
  if (access(hzc_device_path(), F_OK) != 0) {
    GTEST_SKIP() << "no " << hzc_device_path() << " (hzc.ko not loaded)";
  }
  const Outcome o = RunExample(GetParam(), HZC_CANN_SYMMETRIC);
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("PASS: 0 failed check(s)"), std::string::npos) << o.output;
  // The four collectives on the window take the zero-copy path on every rank.
  EXPECT_EQ(Count(o.output, "takes the zero-copy path"), 4U * static_cast<size_t>(GetParam()))
      << o.output;
  std::printf("%s", o.output.c_str());
}

INSTANTIATE_TEST_SUITE_P(Ranks, CannExampleTest, ::testing::Values(2, 4));

}  // namespace
