// SPDX-License-Identifier: GPL-2.0
// hzc-bench-inspect: listing 100,000 ranges with hzcctl (the generic netlink dump) next to
// reading the same fields from sysfs.
//
// hzcctl: the program itself (HZCCTL_PATH) run as an operator would, `hzcctl -j range show`
// with its output to /dev/null: process start, family resolution, the dump and the JSON
// output.  sysfs: a loop in this process (no process start, no output) over
// /sys/kernel/hzc/ranges/*/ reading owner_pid, size, activated_bytes, nr_activations and
// state, each with open + read + close, as a C++ tool reading sysfs would.  The ranges are
// one page each, 50,000 in each of two contexts (max_ranges is 65,536 per context).
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <vector>

#include "bench.h"
#include "ktest.h"

namespace hzc::bench {
namespace {

constexpr size_t kRanges = 100000;
constexpr size_t kContexts = 2;

constexpr char kHzcctlName[] = "inspect/hzcctl_json_range_show";
constexpr char kSysfsName[] = "inspect/sysfs_five_files_per_range";

// kRanges ranges of one page in kContexts open files, kept until the end.
class Ranges {
 public:
  Ranges() : mem_(kRanges * ktest::PageSize()) {
    if (mem_.base() == nullptr) {
      error_ = fmt::format("mmap: {}", strerror(errno));
      return;
    }
    const size_t page = ktest::PageSize();
    for (size_t c = 0; c < kContexts && error_.empty(); ++c) {
      fds_.push_back(ktest::OpenDevice());
      if (fds_.back() < 0) {
        error_ = fmt::format("{}: {}", ktest::kDevice, strerror(errno));
        break;
      }
      for (size_t i = c; i < kRanges; i += kContexts) {
        if (const int err = ktest::RegisterRange(fds_.back(), mem_.base() + i * page, page)) {
          error_ = fmt::format("registering range {} of {}: {}", i + 1, kRanges, strerror(err));
          break;
        }
      }
    }
  }
  ~Ranges() {
    for (int fd : fds_) {
      if (fd >= 0) {
        close(fd);
      }
    }
  }
  Ranges(const Ranges &) = delete;
  Ranges &operator=(const Ranges &) = delete;
  const std::string &error() const { return error_; }

 private:
  ktest::Reservation mem_;
  std::vector<int> fds_;
  std::string error_;
};

std::unique_ptr<Ranges> g_ranges;

const std::string &SetUpRanges() {
  if (!g_ranges) {
    g_ranges = std::make_unique<Ranges>();
  }
  return g_ranges->error();
}

// Runs hzcctl -j range show with stdout to @out_fd: its exit status, or -1.
int RunHzcctl(int out_fd) {
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    execl(HZCCTL_PATH, HZCCTL_PATH, "-j", "range", "show", static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// How many ranges hzcctl lists (its output through a pipe): checks the dump is complete
// before it is timed.
size_t CountHzcctlRanges() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return 0;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    execl(HZCCTL_PATH, HZCCTL_PATH, "range", "show", static_cast<char *>(nullptr));
    _exit(127);
  }
  close(p[1]);
  size_t lines = 0;
  char buf[65536];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof(buf))) > 0) {
    lines += static_cast<size_t>(std::count(buf, buf + n, '\n'));
  }
  close(p[0]);
  waitpid(pid, nullptr, 0);
  return lines;
}

void Hzcctl(benchmark::State &state) {
  if (const std::string &error = SetUpRanges(); !error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  static const size_t listed = CountHzcctlRanges();  // once: the dump is complete
  if (listed < kRanges) {
    state.SkipWithError(fmt::format("hzcctl range show listed {} ranges", listed).c_str());
    return;
  }
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  IterationTimer timer(state, kHzcctlName);
  for (auto _ : state) {
    timer.Start();
    const int status = RunHzcctl(devnull);
    timer.Stop();
    if (status != 0) {
      state.SkipWithError(fmt::format("hzcctl exit status {}", status).c_str());
      break;
    }
  }
  close(devnull);
}

// Reads the five files of every range: the number of ranges read, or -1.
long ReadSysfs(uint64_t *checksum) {
  static const char *const kFiles[] = {"owner_pid", "size", "activated_bytes", "nr_activations",
                                       "state"};
  const std::string root = std::string(ktest::kSysfsRoot) + "/ranges/";
  DIR *dir = opendir(root.c_str());
  if (dir == nullptr) {
    return -1;
  }
  long ranges = 0;
  char buf[64];
  while (const dirent *e = readdir(dir)) {
    if (e->d_name[0] == '.') {
      continue;
    }
    for (const char *file : kFiles) {
      const std::string path = root + e->d_name + "/" + file;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      const ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
      if (fd >= 0) {
        close(fd);
      }
      *checksum += n > 0 ? static_cast<unsigned char>(buf[0]) + static_cast<uint64_t>(n) : 0;
    }
    ++ranges;
  }
  closedir(dir);
  return ranges;
}

void Sysfs(benchmark::State &state) {
  if (const std::string &error = SetUpRanges(); !error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  IterationTimer timer(state, kSysfsName);
  uint64_t checksum = 0;
  for (auto _ : state) {
    timer.Start();
    const long ranges = ReadSysfs(&checksum);
    timer.Stop();
    if (ranges < static_cast<long>(kRanges)) {
      state.SkipWithError(fmt::format("sysfs lists {} ranges", ranges).c_str());
      break;
    }
  }
  benchmark::DoNotOptimize(checksum);
}

void PrintTable(const Collector &results) {
  Notes notes;
  const Result hzcctl = results.Get(kHzcctlName);
  const Result sysfs = results.Get(kSysfsName);
  const std::string hzcctl_missing = notes.Missing(kHzcctlName, hzcctl);
  const std::string sysfs_missing = notes.Missing(kSysfsName, sysfs);
  auto ms = [](double s) { return fmt::format("{:.0f}", s * 1e3); };
  Table table(
      {"ranges", "hzcctl -j range show (ms)", "sysfs, 5 files per range (ms)", "sysfs / hzcctl"});
  table.Add({fmt::format("{}", kRanges), hzcctl_missing.empty() ? ms(hzcctl.seconds) : "n/a",
             sysfs_missing.empty() ? ms(sysfs.seconds) : "n/a",
             hzcctl_missing.empty() && sysfs_missing.empty() ? Ratio(sysfs.seconds, hzcctl.seconds)
                                                             : "n/a"});
  std::cout << "### Listing 100,000 ranges: hzcctl (generic netlink) vs sysfs\n\n"
               "hzcctl: `hzcctl -j range show > /dev/null`, the whole program (start, family "
               "resolution, dump, JSON), as root, so every range and its base.  sysfs: a C++ "
               "loop in the benchmark process over /sys/kernel/hzc/ranges/*/ reading owner_pid, "
               "size, activated_bytes, nr_activations and state (open + read + close each), "
               "with no output.  One-page ranges, 50,000 in each of two contexts.  Medians of "
               "the repetitions.\n\n";
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
  benchmark::RegisterBenchmark(kHzcctlName, Hzcctl)->UseManualTime()->Iterations(1);
  benchmark::RegisterBenchmark(kSysfsName, Sysfs)->UseManualTime()->Iterations(1);
  Collector results;
  benchmark::RunSpecifiedBenchmarks(&results);
  g_ranges.reset();
  PrintTable(results);
  benchmark::Shutdown();
  return 0;
}
