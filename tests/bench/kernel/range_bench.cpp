// SPDX-License-Identifier: GPL-2.0
// hzc-bench-range: latency of HZC_IOC_RANGE_REGISTER + HZC_IOC_RANGE_UNREGISTER
// of one range next to an ioctl that does no work (HZC_IOC_INFO), with 0, 1,
// 1,000 and 50,000 other ranges registered in the same context.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "bench.h"
#include "ktest.h"

namespace hzc::bench {
namespace {

using ktest::RegisterRange;
using ktest::Reservation;
using ktest::UnregisterRange;

constexpr int64_t kExisting[] = {0, 1, 1000, 50000};
constexpr size_t kRangePages = 16;  // the measured range: 64 KiB

int g_fd = -1;  // for HZC_IOC_INFO

// A context (open file) holding `existing` ranges of one page each, plus the
// reservation of the range that is registered and unregistered.  One per
// row, all kept until the end, so repetitions can be interleaved cheaply.
class Context {
 public:
  explicit Context(size_t existing)
      : background_(std::max<size_t>(existing, 1) * ktest::PageSize()),
        target_(kRangePages * ktest::PageSize()) {
    fd_ = ktest::OpenDevice();
    if (fd_ < 0) {
      error_ = fmt::format("{}: {}", ktest::kDevice, strerror(errno));
      return;
    }
    if (background_.base() == nullptr || target_.base() == nullptr) {
      error_ = fmt::format("mmap: {}", strerror(errno));
      return;
    }
    const size_t page = ktest::PageSize();
    for (size_t i = 0; i < existing; ++i) {
      if (const int err = RegisterRange(fd_, background_.base() + i * page, page)) {
        error_ = fmt::format("registering range {} of {}: {}", i + 1, existing, strerror(err));
        return;
      }
    }
  }
  ~Context() {
    if (fd_ >= 0) {
      close(fd_);  // drops the background ranges
    }
  }
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  int fd() const { return fd_; }
  const Reservation &target() const { return target_; }
  const std::string &error() const { return error_; }

 private:
  Reservation background_;
  Reservation target_;
  int fd_ = -1;
  std::string error_;
};

std::map<int64_t, std::unique_ptr<Context>> g_contexts;

constexpr char kInfoName[] = "range/info_ioctl";

// Batches of calls, so the clock reads around them do not count.
void EmptyIoctl(benchmark::State &state) {
  constexpr int kBatch = 64;
  hzc_info info{};
  info.size = sizeof(info);
  IterationTimer timer(state, kInfoName, kBatch);
  for (auto _ : state) {
    int err = 0;
    timer.Start();
    for (int i = 0; i < kBatch && err == 0; ++i) {
      err = ioctl(g_fd, HZC_IOC_INFO, &info) == 0 ? 0 : errno;
    }
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("HZC_IOC_INFO: {}", strerror(err)).c_str());
      break;
    }
  }
}

std::string RegisterName(int64_t existing) {
  return fmt::format("range/register_unregister/existing:{}", existing);
}

void RegisterUnregister(benchmark::State &state, int64_t existing) {
  auto &ctx = g_contexts[existing];
  if (!ctx) {
    ctx = std::make_unique<Context>(static_cast<size_t>(existing));
  }
  if (!ctx->error().empty()) {
    state.SkipWithError(ctx->error().c_str());
    return;
  }
  const int fd = ctx->fd();
  const Reservation &target = ctx->target();
  // Each call is also timed on its own, to show where the time goes.
  const std::string name = RegisterName(existing);
  IterationTimer timer(state, name);
  for (auto _ : state) {
    timer.Start();
    const double t0 = IterationTimer::Now();
    int err = RegisterRange(fd, target.base(), target.size());
    const double t1 = IterationTimer::Now();
    if (err == 0) {
      err = UnregisterRange(fd, target.base());
    }
    const double t2 = IterationTimer::Now();
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("register/unregister: {}", strerror(err)).c_str());
      break;
    }
    AddSample(name + "#register", t1 - t0);
    AddSample(name + "#unregister", t2 - t1);
  }
}

void PrintTable(const Collector &results) {
  Notes notes;
  const Result info = results.Get(kInfoName);
  const std::string info_missing = notes.Missing(kInfoName, info);
  Table table({"ranges already in the context", "register + unregister (us)", "register (us)",
               "unregister (us)", "HZC_IOC_INFO (us)", "ratio"});
  for (const int64_t existing : kExisting) {
    const std::string name = RegisterName(existing);
    const Result r = results.Get(name);
    const std::string missing = notes.Missing(name, r);
    auto split = [&](const char *call) {
      const Result part = results.Get(name, name + call);
      return missing.empty() && part.ok() ? Micros(part.seconds) : "n/a";
    };
    table.Add({fmt::format("{}", existing), missing.empty() ? Micros(r.seconds) : missing,
               split("#register"), split("#unregister"),
               info_missing.empty() ? Micros(info.seconds) : info_missing,
               missing.empty() && info_missing.empty() ? Ratio(r.seconds, info.seconds) : "n/a"});
  }
  std::cout << "### Range register + unregister latency\n\n"
            << "One 64 KiB range (a PROT_NONE reservation) registered and unregistered again, "
               "next to HZC_IOC_INFO (an ioctl that only copies a struct back); ratio = "
               "register + unregister / INFO.  Medians of per-iteration times.  The other ranges "
               "(one page each) are in the "
               "same context (open file).  The "
               "register and unregister columns time each call on its own inside the same "
               "loop.\n\n";
  table.Print(std::cout);
  notes.Print(std::cout);
  std::cout << '\n';
}

}  // namespace
}  // namespace hzc::bench

int main(int argc, char **argv) {
  using namespace hzc::bench;
  if (!Init(argc, argv)) {
    return 2;
  }
  g_fd = hzc::ktest::OpenDevice();
  if (g_fd < 0) {
    std::cerr << fmt::format("{}: {} (is hzc.ko loaded?)\n", hzc::ktest::kDevice, strerror(errno));
    return 1;
  }
  benchmark::RegisterBenchmark(kInfoName, EmptyIoctl)->UseManualTime();
  for (const int64_t existing : kExisting) {
    benchmark::RegisterBenchmark(RegisterName(existing).c_str(), RegisterUnregister, existing)
        ->UseManualTime();
  }
  Collector results;
  benchmark::RunSpecifiedBenchmarks(&results);
  g_contexts.clear();
  PrintTable(results);
  close(g_fd);
  benchmark::Shutdown();
  return 0;
}
