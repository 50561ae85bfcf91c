// SPDX-License-Identifier: Apache-2.0
// The log format (NCCL_DEBUG's prefix), HZC_LOG levels and HZC_LOG_FILE. The environment is read
// once per process, so the cases that depend on it run in fresh processes (death tests).
#include "base/log.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

// ^prefix-regex LEVEL message$ of one line, as a death test's regex.
std::string Line(const char *level, const char *message) {
  return std::string(test::kLogPrefixRe) + level + " " + message + "\n";
}

TEST(LogPrefixTest, HostPidTidRankLevel) {
  EXPECT_EQ(LogPrefix("node1", 4242, 4243, 3, LogLevel::kError), "node1:4242:4243 [3] hzc ERROR ");
  EXPECT_EQ(LogPrefix("node1", 1, 2, std::nullopt, LogLevel::kWarn), "node1:1:2 [-] hzc WARN ");
  EXPECT_EQ(LogPrefix("n", 1, 2, 0, LogLevel::kInfo), "n:1:2 [0] hzc INFO ");
  EXPECT_EQ(LogPrefix("n", 1, 2, 17, LogLevel::kDebug), "n:1:2 [17] hzc DEBUG ");
}

TEST(LogPrefixTest, HostNameStopsAtTheFirstDot) {
  const std::string host = LogHostName();
  EXPECT_FALSE(host.empty());
  EXPECT_EQ(host.find('.'), std::string::npos) << host;
  EXPECT_EQ(host.find(':'), std::string::npos) << host;
}

TEST(LogFilePatternTest, Expansion) {
  EXPECT_EQ(ExpandLogFilePattern("/tmp/hzc.%h.%p.log", "node1", 4242), "/tmp/hzc.node1.4242.log");
  EXPECT_EQ(ExpandLogFilePattern("/var/log/hzc.log", "node1", 1), "/var/log/hzc.log");
  EXPECT_EQ(ExpandLogFilePattern("%p%p-%h%h", "a", 7), "77-aa");
  EXPECT_EQ(ExpandLogFilePattern("100%%-%x-%", "a", 7), "100%-%x-%");
  EXPECT_EQ(ExpandLogFilePattern("%%p", "a", 7), "%p");
  EXPECT_EQ(ExpandLogFilePattern("", "a", 7), "");
}

// A budget of 3 lines a second: three lines go, the rest of the second's are counted and
// reported with the first line of a later second, once.
TEST(LineBudgetTest, ThreeLinesASecondThenHowManyWereRefused) {
  LineBudget budget(3);
  uint64_t skipped = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(budget.Allow(&skipped)) << i;
  }
  EXPECT_EQ(skipped, 0U) << "the first second reports nothing refused";
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(budget.Allow(&skipped)) << i;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  EXPECT_TRUE(budget.Allow(&skipped));
  EXPECT_EQ(skipped, 5U);
  skipped = 99;
  EXPECT_TRUE(budget.Allow(&skipped));
  EXPECT_EQ(skipped, 99U) << "reported once, with the first line of the new second";
  EXPECT_TRUE(budget.Allow(nullptr));
  EXPECT_FALSE(budget.Allow(nullptr));
}

// The rank of the prefix: a thread's own (inside a scope), else the process's when its
// communicators agree (this test's process creates no communicator through the API).
TEST(LogRankTest, ScopeSetsAndRestores) {
  const auto before = CurrentLogRank();
  {
    const LogRankScope scope;
    EXPECT_EQ(CurrentLogRank(), before);
    SetLogRank(5);
    EXPECT_EQ(CurrentLogRank(), 5U);
    {
      const LogRankScope inner;
      EXPECT_EQ(CurrentLogRank(), before);
      SetLogRank(6);
      EXPECT_EQ(CurrentLogRank(), 6U);
    }
    EXPECT_EQ(CurrentLogRank(), 5U);
    std::optional<uint32_t> other;
    std::thread([&] { other = CurrentLogRank(); }).join();
    EXPECT_EQ(other, before) << "the rank of a scope is the thread's own";
  }
  EXPECT_EQ(CurrentLogRank(), before);
}

class LogDeathTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

void SetEnv(const char *name, const char *value) {
  if (value != nullptr) {
    setenv(name, value, 1);
  } else {
    unsetenv(name);
  }
}

void LogAllAndExit(const char *level, const char *file = nullptr) {
  SetEnv("HZC_LOG", level);
  SetEnv("HZC_LOG_FILE", file);
  LogError("e-line");
  LogWarn("w-line");
  LogInfo("i-line");
  LogDebug("d-line");
  std::exit(0);
}

TEST_F(LogDeathTest, DefaultIsWarn) {
  EXPECT_EXIT(LogAllAndExit(nullptr), testing::ExitedWithCode(0),
              "^" + Line("ERROR", "e-line") + Line("WARN", "w-line") + "$");
}

TEST_F(LogDeathTest, ErrorOnly) {
  EXPECT_EXIT(LogAllAndExit("ERROR"), testing::ExitedWithCode(0),
              "^" + Line("ERROR", "e-line") + "$");
}

TEST_F(LogDeathTest, DebugShowsEverythingAndTheConfig) {
  EXPECT_EXIT(LogAllAndExit("DEBUG"), testing::ExitedWithCode(0),
              "INFO config: HZC_LOG=DEBUG\n(.|\n)*ERROR e-line\n(.|\n)*WARN w-line\n(.|\n)*"
              "INFO i-line\n(.|\n)*DEBUG d-line\n");
}

// The INFO dump names every variable, including the ones read outside base/ before.
TEST_F(LogDeathTest, InfoDumpsEveryVariable) {
  EXPECT_EXIT(LogAllAndExit("INFO"), testing::ExitedWithCode(0),
              "INFO config: HZC_LOG_FILE=\\(stderr\\)\n(.|\n)*"
              "INFO config: HCCL_EXEC_TIMEOUT=1836\n(.|\n)*"
              "INFO config: HCCL_IF_IP=");
}

TEST_F(LogDeathTest, BadLevelIsReportedAndWarnUsed) {
  EXPECT_EXIT(LogAllAndExit("chatty"), testing::ExitedWithCode(0),
              "WARN config: HZC_LOG=\"chatty\": not one of ERROR, WARN, INFO, DEBUG; using "
              "WARN\n(.|\n)*ERROR e-line\n(.|\n)*WARN w-line\n$");
}

// The thread id of the prefix is the kernel's id of the thread that logs, the pid the process's.
TEST(LogPrefixTest, LinesNamePidAndThread) {
  long tid = 0;
  testing::internal::CaptureStderr();
  std::thread([&] {
    tid = static_cast<long>(syscall(SYS_gettid));
    LogWarn("from a thread");
  }).join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, LogHostName() + ":" + std::to_string(getpid()) + ":" + std::to_string(tid) +
                     " [-] hzc WARN from a thread\n");
}

class LogFileTest : public LogDeathTest {
 protected:
  // The directory is made by the test and named to its death-test child in the environment.
  void SetUp() override {
    LogDeathTest::SetUp();
    if (const char *dir = std::getenv(kDirVariable);
        dir != nullptr && !GTEST_FLAG_GET(internal_run_death_test).empty()) {
      dir_ = dir;
      return;
    }
    std::string dir = (std::filesystem::temp_directory_path() / "hzc-log-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    setenv(kDirVariable, dir.c_str(), 1);
  }
  void TearDown() override {
    if (GTEST_FLAG_GET(internal_run_death_test).empty()) {
      std::filesystem::remove_all(dir_);
      unsetenv(kDirVariable);
    }
    LogDeathTest::TearDown();
  }
  static constexpr const char *kDirVariable = "HZC_LOG_TEST_DIR";
  // Files in the directory, name -> contents.
  std::map<std::string, std::string> Files() const {
    std::map<std::string, std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(dir_)) {
      std::ifstream f(e.path());
      std::stringstream s;
      s << f.rdbuf();
      out[e.path().filename().string()] = s.str();
    }
    return out;
  }
  std::filesystem::path dir_;
};

// Lines go to the expanded file, nothing to stderr.
TEST_F(LogFileTest, PatternExpandsHostAndPid) {
  const std::string pattern = (dir_ / "hzc.%h.%p.log").string();
  EXPECT_EXIT(LogAllAndExit("WARN", pattern.c_str()), testing::ExitedWithCode(0), "^$");
  const auto files = Files();
  ASSERT_EQ(files.size(), 1U);
  const std::string name = files.begin()->first;
  EXPECT_THAT(name, testing::MatchesRegex("hzc\\." + LogHostName() + "\\.[0-9]+\\.log"));
  EXPECT_THAT(files.begin()->second,
              testing::MatchesRegex(Line("ERROR", "e-line") + Line("WARN", "w-line")));
}

// A process forked after the file was opened writes to its own file when the pattern has %p,
// and its lines show its own pid and thread id (the main thread's id is the pid).
void LogForkAndExit(const char *pattern) {
  SetEnv("HZC_LOG_FILE", pattern);
  unsetenv("HZC_LOG");
  LogWarn("parent");
  const pid_t child = fork();
  if (child == 0) {
    LogWarn("child");
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  LogWarn("parent again");
  std::exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

TEST_F(LogFileTest, ForkedProcessOpensItsOwnFile) {
  const std::string pattern = (dir_ / "%p.log").string();
  EXPECT_EXIT(LogForkAndExit(pattern.c_str()), testing::ExitedWithCode(0), "^$");
  const auto files = Files();
  ASSERT_EQ(files.size(), 2U);
  std::vector<std::string> contents;
  for (const auto &[name, text] : files) {
    const std::string pid = name.substr(0, name.find('.'));
    EXPECT_THAT(text, testing::StartsWith(LogHostName() + ":" + pid + ":" + pid + " [-] ")) << name;
    contents.push_back(text);
  }
  std::sort(contents.begin(), contents.end(),
            [](const std::string &a, const std::string &b) { return a.size() < b.size(); });
  EXPECT_THAT(contents[0], testing::MatchesRegex(Line("WARN", "child")));
  EXPECT_THAT(contents[1],
              testing::MatchesRegex(Line("WARN", "parent") + Line("WARN", "parent again")));
}

// A file that cannot be opened: one warning, then everything on stderr.
TEST_F(LogFileTest, UnopenableFileFallsBackToStderrWithOneWarning) {
  const std::string pattern = (dir_ / "missing" / "hzc.%p.log").string();
  EXPECT_EXIT(LogAllAndExit("WARN", pattern.c_str()), testing::ExitedWithCode(0),
              "^" +
                  Line("WARN",
                       "config: HZC_LOG_FILE=\"[^\"]+/missing/hzc.%p.log\": cannot open "
                       "[^ ]+/missing/hzc.[0-9]+.log: No such file or directory; logging "
                       "to stderr") +
                  Line("ERROR", "e-line") + Line("WARN", "w-line") + "$");
  EXPECT_TRUE(Files().empty());
}

}  // namespace
}  // namespace hzc
