// SPDX-License-Identifier: Apache-2.0
#include "base/log.h"

#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

namespace hzc {

namespace {

constexpr int64_t kNoRank = -1;
thread_local int64_t t_rank = kNoRank;
// The rank of every communicator the process created; kNoRank before the first, kMixed once
// two differ.
constexpr int64_t kMixed = -2;
std::atomic<int64_t> g_process_rank{kNoRank};

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kDebug:
      return spdlog::level::debug;
  }
  return spdlog::level::warn;
}

LogLevel FromSpdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
    case spdlog::level::err:
      return LogLevel::kError;
    case spdlog::level::warn:
      return LogLevel::kWarn;
    case spdlog::level::info:
      return LogLevel::kInfo;
    default:
      return LogLevel::kDebug;
  }
}

// Formats every line as LogPrefix() + message; the pid and tid are read per line (ranks are
// forked).
class PrefixFormatter final : public spdlog::formatter {
 public:
  explicit PrefixFormatter(std::string host) : host_(std::move(host)) {}

  void format(const spdlog::details::log_msg &msg, spdlog::memory_buf_t &dest) override {
    // Not msg.thread_id: spdlog caches it per thread, and a forked child would show its
    // parent's.
    const std::string prefix =
        LogPrefix(host_, static_cast<long>(getpid()), static_cast<long>(syscall(SYS_gettid)),
                  CurrentLogRank(), FromSpdlog(msg.level));
    dest.append(prefix.data(), prefix.data() + prefix.size());
    dest.append(msg.payload.data(), msg.payload.data() + msg.payload.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<PrefixFormatter>(host_);
  }

 private:
  std::string host_;
};

// HZC_LOG_FILE: lines are appended to the expanded pattern; a process forked after the file was
// opened opens its own file when the pattern names the pid. If a file cannot be opened, lines go
// to stderr (the caller reports the first failure).
class PatternFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  PatternFileSink(std::string pattern, std::string host)
      : pattern_(std::move(pattern)), host_(std::move(host)) {}
  ~PatternFileSink() override { Close(); }

  // Opens the file of this process; "" or the reason it could not.
  std::string Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    return OpenLocked();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg &msg) override {
    if (pid_ != getpid() && pattern_.find("%p") != std::string::npos) {
      Close();
      OpenLocked();
    }
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::FILE *out = file_ != nullptr ? file_ : stderr;
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
  }
  void flush_() override { std::fflush(file_ != nullptr ? file_ : stderr); }

 private:
  std::string OpenLocked() {
    pid_ = getpid();
    const std::string path = ExpandLogFilePattern(pattern_, host_, static_cast<long>(pid_));
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return fmt::format("HZC_LOG_FILE=\"{}\": cannot open {}: {}; logging to stderr", pattern_,
                         path, std::strerror(errno));
    }
    file_ = fdopen(fd, "a");
    if (file_ == nullptr) {
      close(fd);
      return fmt::format("HZC_LOG_FILE=\"{}\": cannot open {}: out of memory", pattern_, path);
    }
    return "";
  }
  void Close() {
    if (file_ != nullptr) {
      std::fclose(file_);
      file_ = nullptr;
    }
  }

  const std::string pattern_;
  const std::string host_;
  std::FILE *file_ = nullptr;
  pid_t pid_ = 0;
};

std::unique_ptr<spdlog::logger> MakeLogger() {
  const Config &config = GetConfig();
  const std::string host = LogHostName();
  std::string open_error;
  spdlog::sink_ptr sink;
  if (!config.log_file.empty()) {
    auto file = std::make_shared<PatternFileSink>(config.log_file, host);
    open_error = file->Open();
    sink = std::move(file);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  auto logger = std::make_unique<spdlog::logger>("hzc", std::move(sink));
  logger->set_formatter(std::make_unique<PrefixFormatter>(host));
  logger->set_level(ToSpdlog(config.log_level));
  logger->flush_on(spdlog::level::trace);
  if (!open_error.empty()) {
    logger->warn("config: {}", open_error);
  }
  for (const auto &warning : config.warnings) {
    logger->warn("config: {}", warning);
  }
  for (const auto &line : config.Describe()) {
    logger->info("config: {}", line);
  }
  return logger;
}

}  // namespace

spdlog::logger &Log() {
  // Never destroyed: the library may log from other static destructors at exit.
  static spdlog::logger *const logger = [] {
    spdlog::logger *made = MakeLogger().release();
    log_detail::g_level.store(made->level(), std::memory_order_relaxed);
    return made;
  }();
  return *logger;
}

std::string LogPrefix(std::string_view host, long pid, long tid, std::optional<uint32_t> rank,
                      LogLevel level) {
  return fmt::format("{}:{}:{} [{}] hzc {} ", host, pid, tid,
                     rank ? std::to_string(*rank) : std::string("-"), LogLevelName(level));
}

std::string LogHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "unknown";
  }
  std::string host(name);
  return host.substr(0, host.find('.'));
}

std::string ExpandLogFilePattern(std::string_view pattern, std::string_view host, long pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] == '%' && next == 'h') {
      out += host;
      ++i;
    } else if (pattern[i] == '%' && next == 'p') {
      out += std::to_string(pid);
      ++i;
    } else if (pattern[i] == '%' && next == '%') {
      out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

std::optional<uint32_t> CurrentLogRank() {
  int64_t rank = t_rank;
  if (rank < 0) {
    rank = g_process_rank.load(std::memory_order_relaxed);
  }
  if (rank < 0) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(rank);
}

void SetLogRank(uint32_t rank) {
  t_rank = rank;
}

void NoteProcessRank(uint32_t rank) {
  int64_t seen = kNoRank;
  if (!g_process_rank.compare_exchange_strong(seen, rank) && seen != rank) {
    g_process_rank.store(kMixed);
  }
}

LogRankScope::LogRankScope() : saved_(t_rank) {
  t_rank = kNoRank;
}

LogRankScope::~LogRankScope() {
  t_rank = saved_;
}

bool LineBudget::Allow(uint64_t *skipped) {
  const auto now = std::chrono::steady_clock::now();
  if (now - since_ >= std::chrono::seconds(1)) {
    if (skipped != nullptr) {
      *skipped = refused_;
    }
    since_ = now;
    lines_ = 0;
    refused_ = 0;
  }
  if (lines_ < per_second_) {
    ++lines_;
    return true;
  }
  ++refused_;
  return false;
}

}  // namespace hzc
