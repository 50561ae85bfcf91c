// SPDX-License-Identifier: Apache-2.0
// The log format and HZC_LOG levels, checked in fresh processes (the environment is read
// once per process, so each case re-executes the test binary).
#include "core/log.h"

#include <cstdlib>

#include "hzc_test.h"

namespace hzc {
namespace {

class LogDeathTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

void LogAllAndExit(const char *level) {
  if (level != nullptr) {
    setenv("HZC_LOG", level, 1);
  } else {
    unsetenv("HZC_LOG");
  }
  LogError("e-line");
  LogWarn("w-line");
  LogInfo("i-line");
  LogDebug("d-line");
  std::exit(0);
}

TEST_F(LogDeathTest, DefaultIsWarn) {
  EXPECT_EXIT(LogAllAndExit(nullptr), testing::ExitedWithCode(0),
              "^hzc\\[[0-9]+\\]: error: e-line\nhzc\\[[0-9]+\\]: warning: w-line\n$");
}

TEST_F(LogDeathTest, ErrorOnly) {
  EXPECT_EXIT(LogAllAndExit("ERROR"), testing::ExitedWithCode(0),
              "^hzc\\[[0-9]+\\]: error: e-line\n$");
}

TEST_F(LogDeathTest, DebugShowsEverythingAndTheConfig) {
  EXPECT_EXIT(LogAllAndExit("DEBUG"), testing::ExitedWithCode(0),
              "info: config: HZC_LOG=DEBUG\n(.|\n)*error: e-line\n(.|\n)*warning: w-line\n(.|\n)*"
              "info: i-line\n(.|\n)*debug: d-line\n");
}

TEST_F(LogDeathTest, BadLevelIsReportedAndWarnUsed) {
  EXPECT_EXIT(LogAllAndExit("chatty"), testing::ExitedWithCode(0),
              "warning: config: HZC_LOG=\"chatty\": not one of ERROR, WARN, INFO, DEBUG; using "
              "WARN\n(.|\n)*error: e-line\n(.|\n)*warning: w-line\n$");
}

}  // namespace
}  // namespace hzc
