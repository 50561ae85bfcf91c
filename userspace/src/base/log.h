// SPDX-License-Identifier: Apache-2.0
// Logging: one line per event, in the format of NCCL_DEBUG,
//
//   host:pid:tid [rank] hzc LEVEL message
//
// (host name up to its first dot, the thread's kernel id, the rank of the communicator the
// line is about or "-" when that is not known, LEVEL one of ERROR WARN INFO DEBUG), on stderr
// or in HZC_LOG_FILE, level from HZC_LOG. Messages are lowercase and name the API, the argument
// and the cause; the function that first sees an error reports it (through a Status) and
// callers only propagate.
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/config.h"

namespace hzc {

// The library's own logger (not registered with spdlog, so it never clashes with an
// application's). Created on first use with the level and destination of GetConfig().
spdlog::logger &Log();

namespace log_detail {
inline std::atomic<int> g_level{-1};  // Log()'s level once made
}  // namespace log_detail
// Whether Log() writes lines of @level: a relaxed load once the logger exists (its level is set
// once), so a disabled LogDebug on a hot path costs a compare.
inline bool LogEnabled(spdlog::level::level_enum level) {
  int current = log_detail::g_level.load(std::memory_order_relaxed);
  if (current < 0) {
    current = Log().level();
  }
  return level >= current;
}

template <typename... Args>
void LogError(fmt::format_string<Args...> format, Args &&...args) {
  Log().error(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(fmt::format_string<Args...> format, Args &&...args) {
  Log().warn(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(fmt::format_string<Args...> format, Args &&...args) {
  Log().info(format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogDebug(fmt::format_string<Args...> format, Args &&...args) {
  if (!LogEnabled(spdlog::level::debug)) {
    return;
  }
  Log().debug(format, std::forward<Args>(args)...);
}

// The prefix of a line, up to and including the space before the message:
// "node1:4242:4243 [3] hzc ERROR " (rank nullopt: "[-]").
std::string LogPrefix(std::string_view host, long pid, long tid, std::optional<uint32_t> rank,
                      LogLevel level);

// The host name as the prefix shows it: gethostname() up to the first dot.
std::string LogHostName();

// HZC_LOG_FILE's pattern with %h replaced by @host, %p by @pid and %% by %; any other % is
// kept as it is (as NCCL_DEBUG_FILE does).
std::string ExpandLogFilePattern(std::string_view pattern, std::string_view host, long pid);

// The rank shown in the prefix of the calling thread's lines: the rank set by SetLogRank()
// inside the innermost LogRankScope of the thread, else the process's rank (the rank of every
// communicator the process has created, when they all have the same one), else unknown.
std::optional<uint32_t> CurrentLogRank();

// The calling thread is working on a communicator of rank @rank, until the end of the
// innermost LogRankScope (every C entry point opens one).
void SetLogRank(uint32_t rank);

// The process created a communicator of rank @rank.
void NoteProcessRank(uint32_t rank);

// A budget of log lines for something a remote host can make happen as often as it likes (a
// dropped connection): at most @per_second lines in each second. Allow() says whether the next
// line may go; once a new second begins, *@skipped gets the number of lines refused in the
// seconds before, for one line that says so (null: that number is dropped). The number comes
// with the next line allowed, whenever that is: a flood that stops is summed up by the next
// such event, not at once. One thread at a time (the object's owner).
class LineBudget {
 public:
  explicit LineBudget(int per_second) : per_second_(per_second) {}
  bool Allow(uint64_t *skipped);

 private:
  const int per_second_;
  std::chrono::steady_clock::time_point since_{};
  int lines_ = 0;
  uint64_t refused_ = 0;
};

// Saves the thread's log rank and restores it on destruction.
class LogRankScope {
 public:
  LogRankScope();
  ~LogRankScope();
  LogRankScope(const LogRankScope &) = delete;
  LogRankScope &operator=(const LogRankScope &) = delete;

 private:
  int64_t saved_;
};

}  // namespace hzc
