// SPDX-License-Identifier: GPL-2.0
// hzc-bench-peer: read bandwidth of a peer's memory through a peer mapping of
// /dev/hzc, next to process_vm_readv() of the same bytes and a local memcpy()
// of the same size.  The owner is a child process: it activates its buffer
// and waits; this process joins the same domain, maps the owner's range and
// copies from it.  The first pass over a fresh mapping (page faults included)
// is measured on its own.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <iostream>
#include <map>
#include <memory>

#include "bench.h"
#include "ktest.h"

namespace hzc::bench {
namespace {

constexpr size_t kSizes[] = {64 * kKiB, 256 * kKiB, 1 * kMiB,  4 * kMiB,
                             16 * kMiB, 64 * kMiB,  256 * kMiB};
constexpr size_t kMaxSize = 256 * kMiB;
constexpr size_t kPage = 4096;

// What byte i of the owner's buffer holds.
char Pattern(size_t i) {
  return static_cast<char>((i >> 12) * 7 + (i & 0xff));
}

char *MapAnonymous(size_t len) {
  void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return nullptr;
  }
  // 4 KiB pages everywhere, like the PTEs of a peer mapping.
  madvise(p, len, MADV_NOHUGEPAGE);
  return static_cast<char *>(p);
}

// The owner process: rank 0 of a 2-rank domain with one range of kMaxSize
// bytes, all activated.  It reports the range's base (or an errno) through a
// pipe and exits when the pipe to it is closed.
class Owner {
 public:
  explicit Owner(ktest::DomainId id) {
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0) {
      return;
    }
    if (pipe2(from, O_CLOEXEC) != 0) {
      close(to[0]);
      close(to[1]);
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      close(to[1]);
      close(from[0]);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      _exit(Run(id, to[0], from[1]));
    }
    close(to[0]);
    close(from[1]);
    cmd_ = to[1];
    if (pid_ < 0) {
      close(from[0]);
      return;
    }
    uint64_t hello[2] = {};
    if (read(from[0], hello, sizeof(hello)) == sizeof(hello)) {
      error_ = static_cast<int>(hello[0]);
      base_ = hello[1];
    }
    close(from[0]);
  }
  ~Owner() {
    if (cmd_ >= 0) {
      close(cmd_);  // the owner's read() returns 0 and it exits
    }
    if (pid_ > 0) {
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  Owner(const Owner &) = delete;
  Owner &operator=(const Owner &) = delete;

  // Empty if the owner is ready, else why not.
  std::string Error() const {
    if (pid_ <= 0) {
      return fmt::format("fork: {}", strerror(errno));
    }
    if (base_ == 0) {
      return fmt::format("owner set-up failed: {}", error_ ? strerror(error_) : "no reply");
    }
    return "";
  }
  pid_t pid() const { return pid_; }
  uintptr_t base() const { return base_; }

 private:
  static int Run(ktest::DomainId id, int in, int out) {
    uint64_t hello[2] = {0, 0};
    const int fd = ktest::OpenDevice();
    char *buf = MapAnonymous(kMaxSize);
    if (fd < 0 || buf == nullptr) {
      hello[0] = static_cast<uint64_t>(errno);
    } else {
      for (size_t i = 0; i < kMaxSize; ++i) {
        buf[i] = Pattern(i);
      }
      int err = ktest::Join(fd, id, 0, 2);
      if (err == 0) {
        err = ktest::RegisterRange(fd, buf, kMaxSize);
      }
      if (err == 0) {
        err = ktest::Activate(fd, buf, kMaxSize);
      }
      hello[0] = static_cast<uint64_t>(err);
      hello[1] = err == 0 ? reinterpret_cast<uintptr_t>(buf) : 0;
    }
    if (write(out, hello, sizeof(hello)) != sizeof(hello)) {
      return 1;
    }
    char c;
    while (read(in, &c, 1) > 0) {
    }
    return 0;  // exit releases everything
  }

  pid_t pid_ = -1;
  int cmd_ = -1;
  int error_ = 0;
  uintptr_t base_ = 0;
};

// The reader's side: rank 1 of the owner's domain and its destination buffers.
struct Reader {
  int fd = -1;
  hzc_range_desc range{};
  char *dst = nullptr;  // kMaxSize + one page, touched (see Dst())
  char *src = nullptr;  // kMaxSize, touched: the local memcpy's source
  std::string error;
  // One steady mapping per size, made and touched on first use.
  std::map<size_t, char *> maps;

  ~Reader() {
    for (const auto &[size, map] : maps) {
      munmap(map, size);
    }
    if (dst != nullptr) {
      munmap(dst, kMaxSize + kPage);
    }
    if (src != nullptr) {
      munmap(src, kMaxSize);
    }
    if (fd >= 0) {
      close(fd);
    }
  }

  // Where to copy `from` to.  QEMU's TCG translates guest addresses with a
  // direct-mapped software TLB indexed by page number: a source and a
  // destination an even number of pages apart (e.g. two adjacent 256 MiB
  // buffers) can evict each other on every access and make a copy several
  // times slower.  An odd distance in pages never collides, so every copy
  // gets one and all columns are compared on equal terms.
  char *Dst(const void *from) const {
    const auto distance =
        (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(from)) / kPage;
    return distance % 2 == 1 ? dst : dst + kPage;
  }

  // Maps the first `size` bytes of the owner's range, or nullptr.
  char *Map(size_t size) const {
    void *p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(range.mmap_offset));
    return p == MAP_FAILED ? nullptr : static_cast<char *>(p);
  }
};

std::unique_ptr<Owner> g_owner;
std::unique_ptr<Reader> g_reader;

std::string SetUp() {
  if (MemAvailable() < 3 * kMaxSize + 256 * kMiB) {
    return fmt::format("not enough guest memory (MemAvailable {}, need {})", Size(MemAvailable()),
                       Size(3 * kMaxSize + 256 * kMiB));
  }
  const ktest::DomainId id = ktest::NewDomainId();
  g_owner = std::make_unique<Owner>(id);
  if (std::string err = g_owner->Error(); !err.empty()) {
    return err;
  }
  g_reader = std::make_unique<Reader>();
  Reader &r = *g_reader;
  r.fd = ktest::OpenDevice();
  if (r.fd < 0) {
    return fmt::format("{}: {}", ktest::kDevice, strerror(errno));
  }
  if (const int err = ktest::Join(r.fd, id, 1, 2)) {
    return fmt::format("HZC_IOC_DOMAIN_JOIN: {}", strerror(err));
  }
  std::vector<hzc_range_desc> ranges;
  if (const int err = ktest::ListRanges(r.fd, id, 1, 0, &ranges)) {
    return fmt::format("HZC_IOC_LIST_RANGES: {}", strerror(err));
  }
  if (ranges.size() != 1 || ranges[0].base != g_owner->base()) {
    return fmt::format("the owner lists {} ranges, expected its one range", ranges.size());
  }
  r.range = ranges[0];
  r.dst = MapAnonymous(kMaxSize + kPage);
  r.src = MapAnonymous(kMaxSize);
  if (r.dst == nullptr || r.src == nullptr) {
    return fmt::format("mmap: {}", strerror(errno));
  }
  for (size_t i = 0; i < kMaxSize; ++i) {
    r.src[i] = Pattern(i);
  }
  std::memset(r.dst, 0, kMaxSize + kPage);
  return "";
}

std::string g_setup_error;

// Did the copy bring the owner's bytes?  (Checks one byte per page.)
bool CopiedPattern(const char *dst, size_t size) {
  for (size_t i = 0; i < size; i += 4096) {
    if (dst[i] != Pattern(i)) {
      return false;
    }
  }
  return true;
}

std::string Name(const char *what, size_t size) {
  return fmt::format("peer/{}/{}", what, Size(size));
}

// Copies from a steady peer mapping (its page faults happened before).
void PeerMapping(benchmark::State &state, size_t size) {
  if (!g_setup_error.empty()) {
    state.SkipWithError(g_setup_error.c_str());
    return;
  }
  Reader &r = *g_reader;
  char *&map = r.maps[size];
  if (map == nullptr) {
    map = r.Map(size);
    if (map == nullptr) {
      state.SkipWithError(fmt::format("mmap of the peer range: {}", strerror(errno)).c_str());
      return;
    }
    std::memcpy(r.Dst(map), map, size);
    if (!CopiedPattern(r.Dst(map), size)) {
      state.SkipWithError("the peer mapping does not show the owner's bytes");
      return;
    }
  }
  IterationTimer timer(state, Name("mapping", size));
  char *dst = r.Dst(map);
  for (auto _ : state) {
    timer.Start();
    std::memcpy(dst, map, size);
    benchmark::ClobberMemory();
    timer.Stop();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

// The first pass over a fresh mapping: faults plus copy (mmap and munmap are
// not timed).  Also counts the page faults per pass.
void FirstTouch(benchmark::State &state, size_t size) {
  if (!g_setup_error.empty()) {
    state.SkipWithError(g_setup_error.c_str());
    return;
  }
  Reader &r = *g_reader;
  IterationTimer timer(state, Name("first_touch", size));
  long faults = 0;
  for (auto _ : state) {
    char *map = r.Map(size);
    if (map == nullptr) {
      state.SkipWithError(fmt::format("mmap of the peer range: {}", strerror(errno)).c_str());
      break;
    }
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    char *dst = r.Dst(map);
    timer.Start();
    std::memcpy(dst, map, size);
    benchmark::ClobberMemory();
    timer.Stop();
    getrusage(RUSAGE_SELF, &after);
    munmap(map, size);
    faults += after.ru_minflt - before.ru_minflt;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
  state.counters["faults"] =
      benchmark::Counter(static_cast<double>(faults), benchmark::Counter::kAvgIterations);
}

void ProcessVmReadv(benchmark::State &state, size_t size) {
  if (!g_setup_error.empty()) {
    state.SkipWithError(g_setup_error.c_str());
    return;
  }
  Reader &r = *g_reader;
  const iovec local{r.Dst(reinterpret_cast<void *>(g_owner->base())), size};
  const iovec remote{reinterpret_cast<void *>(g_owner->base()), size};
  IterationTimer timer(state, Name("process_vm_readv", size));
  for (auto _ : state) {
    timer.Start();
    const ssize_t n = process_vm_readv(g_owner->pid(), &local, 1, &remote, 1, 0);
    timer.Stop();
    if (n != static_cast<ssize_t>(size)) {
      state.SkipWithError(
          fmt::format("process_vm_readv: {}", n < 0 ? strerror(errno) : "short read").c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  if (!state.error_occurred() && !CopiedPattern(static_cast<char *>(local.iov_base), size)) {
    state.SkipWithError("process_vm_readv did not bring the owner's bytes");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

void LocalMemcpy(benchmark::State &state, size_t size) {
  if (!g_setup_error.empty()) {
    state.SkipWithError(g_setup_error.c_str());
    return;
  }
  Reader &r = *g_reader;
  IterationTimer timer(state, Name("memcpy", size));
  char *dst = r.Dst(r.src);
  for (auto _ : state) {
    timer.Start();
    std::memcpy(dst, r.src, size);
    benchmark::ClobberMemory();
    timer.Stop();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

void PrintTable(const Collector &results) {
  Notes notes;
  Table table({"size", "peer mapping (GB/s)", "process_vm_readv (GB/s)", "local memcpy (GB/s)",
               "mapping / process_vm_readv", "mapping / memcpy", "first touch (GB/s)",
               "faults per first pass", "first-touch cost per fault (us)"});
  for (const size_t size : kSizes) {
    const Result map = results.Get(Name("mapping", size));
    const Result first = results.Get(Name("first_touch", size));
    const Result pvr = results.Get(Name("process_vm_readv", size));
    const Result local = results.Get(Name("memcpy", size));
    const std::string map_missing = notes.Missing(Name("mapping", size), map);
    const std::string first_missing = notes.Missing(Name("first_touch", size), first);
    const std::string pvr_missing = notes.Missing(Name("process_vm_readv", size), pvr);
    const std::string local_missing = notes.Missing(Name("memcpy", size), local);
    const double bytes = static_cast<double>(size);
    auto rate = [&](const Result &r, const std::string &missing) {
      return missing.empty() ? GBps(bytes, r.seconds) : missing;
    };
    auto ratio = [&](const Result &slow, const std::string &a, const std::string &b) {
      return a.empty() && b.empty() ? Ratio(slow.seconds, map.seconds) : "n/a";
    };
    std::string faults = "n/a";
    std::string per_fault = "n/a";
    const auto it = first.counters.find("faults");
    if (first_missing.empty() && it != first.counters.end()) {
      faults = fmt::format("{:.0f}", it->second);
      if (map_missing.empty() && it->second >= 1) {
        const double extra = first.seconds - map.seconds;
        per_fault = extra > 0 ? Micros(extra / it->second) : "below noise";
      }
    }
    table.Add({Size(size), rate(map, map_missing), rate(pvr, pvr_missing),
               rate(local, local_missing), ratio(pvr, map_missing, pvr_missing),
               ratio(local, map_missing, local_missing), rate(first, first_missing), faults,
               per_fault});
  }
  std::cout << "### Peer read bandwidth\n\n"
            << "A reader process copies `size` bytes of an owner process's activated range "
               "(4 KiB pages) into its own buffer: through a peer mapping of /dev/hzc that is "
               "already faulted in, with process_vm_readv() of the same bytes, and, as the "
               "ceiling, with memcpy() between two buffers of its own.  Ratios > 1 mean the peer "
               "mapping is faster.  \"first touch\" copies through a fresh mapping, page faults "
               "included; the cost per fault is (first-touch time - steady time) / faults.  "
               "GB/s = 10^9 bytes per second; medians of per-iteration times.\n\n";
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
  g_setup_error = SetUp();
  if (!g_setup_error.empty()) {
    std::cerr << "set-up: " << g_setup_error << '\n';
  }
  for (const size_t size : kSizes) {
    benchmark::RegisterBenchmark(Name("mapping", size).c_str(), PeerMapping, size)->UseManualTime();
    benchmark::RegisterBenchmark(Name("first_touch", size).c_str(), FirstTouch, size)
        ->UseManualTime();
    benchmark::RegisterBenchmark(Name("process_vm_readv", size).c_str(), ProcessVmReadv, size)
        ->UseManualTime();
    benchmark::RegisterBenchmark(Name("memcpy", size).c_str(), LocalMemcpy, size)->UseManualTime();
  }
  Collector results;
  benchmark::RunSpecifiedBenchmarks(&results);
  g_reader.reset();
  g_owner.reset();
  PrintTable(results);
  benchmark::Shutdown();
  return 0;
}
