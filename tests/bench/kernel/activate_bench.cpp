// SPDX-License-Identifier: GPL-2.0
// hzc-bench-activate: HZC_IOC_ACTIVATE + HZC_IOC_DEACTIVATE (long-term pin and
// unpin) throughput of one buffer, for 4 KiB pages, transparent huge pages and
// hugetlb pages, next to ibv_reg_mr + ibv_dereg_mr of the same buffer on the
// first RDMA device (rxe0 in the guest).
#include <fmt/format.h>
#ifdef HZC_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <utility>

#include "bench.h"
#include "ktest.h"

namespace hzc::bench {
namespace {

enum class Pages { kSmall, kTransparentHuge, kHugetlb };
constexpr Pages kPages[] = {Pages::kSmall, Pages::kTransparentHuge, Pages::kHugetlb};
constexpr size_t kSizes[] = {2 * kMiB, 64 * kMiB, 512 * kMiB};

const char *PagesName(Pages p) {
  switch (p) {
    case Pages::kSmall:
      return "4 KiB";
    case Pages::kTransparentHuge:
      return "THP";
    case Pages::kHugetlb:
      return "hugetlb 2 MiB";
  }
  return "?";
}

const char *PagesKey(Pages p) {
  switch (p) {
    case Pages::kSmall:
      return "4k";
    case Pages::kTransparentHuge:
      return "thp";
    case Pages::kHugetlb:
      return "hugetlb";
  }
  return "?";
}

int g_fd = -1;

// Bytes of [addr, addr + len) that /proc/self/smaps reports as huge pages
// (AnonHugePages of the mapping that contains addr).
size_t HugeBytes(const void *addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  FILE *f = std::fopen("/proc/self/smaps", "re");
  if (f == nullptr) {
    return 0;
  }
  char line[512];
  bool inside = false;
  size_t kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long start = 0, end = 0;
    unsigned long long value = 0;
    if (std::sscanf(line, "%lx-%lx ", &start, &end) == 2) {
      inside = start <= a && a < end;
    } else if (inside && std::sscanf(line, "AnonHugePages: %llu kB", &value) == 1) {
      kib = value;
    }
  }
  std::fclose(f);
  return kib * kKiB;
}

// A touched, writable buffer registered as one hzc range; the hzc and verbs
// benchmarks of one row share it.
class Buffer {
 public:
  Buffer(Pages pages, size_t size) : pages_(pages), size_(size) {}
  ~Buffer() {
    if (registered_) {
      ktest::UnregisterRange(g_fd, base_);
    }
    if (map_ != nullptr) {
      munmap(map_, map_len_);
    }
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  // Empty on success, else why the buffer cannot be had.
  std::string Setup() {
    if (MemAvailable() < size_ + 256 * kMiB && pages_ != Pages::kHugetlb) {
      return fmt::format("not enough guest memory for {} (MemAvailable {})", Size(size_),
                         Size(MemAvailable()));
    }
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    map_len_ = size_;
    if (pages_ == Pages::kHugetlb) {
      flags |= MAP_HUGETLB;
    } else if (pages_ == Pages::kTransparentHuge) {
      map_len_ += kHugePage;  // room to align
    }
    void *p = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) {
      map_ = nullptr;
      return pages_ == Pages::kHugetlb
                 ? fmt::format("no {} of hugetlb pages ({}; raise vm.nr_hugepages)", Size(size_),
                               strerror(errno))
                 : fmt::format("mmap: {}", strerror(errno));
    }
    map_ = static_cast<char *>(p);
    base_ = map_;
    if (pages_ == Pages::kTransparentHuge) {
      base_ = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(map_) + kHugePage - 1) &
                                       ~(kHugePage - 1));
      if (madvise(base_, size_, MADV_HUGEPAGE) != 0) {
        return fmt::format("madvise(MADV_HUGEPAGE): {}", strerror(errno));
      }
    } else if (pages_ == Pages::kSmall && madvise(base_, size_, MADV_NOHUGEPAGE) != 0) {
      return fmt::format("madvise(MADV_NOHUGEPAGE): {}", strerror(errno));
    }
    std::memset(base_, 0x5a, size_);
    huge_bytes_ = pages_ == Pages::kHugetlb ? size_ : HugeBytes(base_);
    if (const int err = ktest::RegisterRange(g_fd, base_, size_)) {
      return fmt::format("HZC_IOC_RANGE_REGISTER: {}", strerror(err));
    }
    registered_ = true;
    return "";
  }

  Pages pages() const { return pages_; }
  size_t size() const { return size_; }
  char *base() const { return base_; }
  size_t huge_bytes() const { return huge_bytes_; }

 private:
  Pages pages_;
  size_t size_;
  char *map_ = nullptr;
  size_t map_len_ = 0;
  char *base_ = nullptr;
  size_t huge_bytes_ = 0;
  bool registered_ = false;
};

// Every row's buffer, made on first use and kept until the end, so that
// repetitions can be interleaved without remaking them (about 1.7 GiB in all).
std::map<std::pair<Pages, size_t>, std::unique_ptr<Buffer>> g_buffers;
std::map<std::pair<Pages, size_t>, std::string> g_buffer_errors;

Buffer *GetBuffer(Pages pages, size_t size, std::string *error) {
  const auto key = std::make_pair(pages, size);
  auto &buf = g_buffers[key];
  if (!buf) {
    buf = std::make_unique<Buffer>(pages, size);
    g_buffer_errors[key] = buf->Setup();
  }
  *error = g_buffer_errors[key];
  return error->empty() ? buf.get() : nullptr;
}

// Percentage of the buffer in huge pages, per row (set when a row's buffer is made).
std::map<std::string, double> g_huge_share;

std::string RowKey(Pages pages, size_t size) {
  return fmt::format("{}/{}", PagesKey(pages), Size(size));
}

std::string Name(const char *what, Pages pages, size_t size) {
  return fmt::format("activate/{}/{}", what, RowKey(pages, size));
}

void ActivateDeactivate(benchmark::State &state, Pages pages, size_t size) {
  std::string error;
  Buffer *buf = GetBuffer(pages, size, &error);
  if (buf == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  g_huge_share[RowKey(pages, size)] =
      100.0 * static_cast<double>(buf->huge_bytes()) / static_cast<double>(size);
  IterationTimer timer(state, Name("hzc", pages, size));
  for (auto _ : state) {
    timer.Start();
    int err = ktest::Activate(g_fd, buf->base(), size);
    if (err == 0) {
      err = ktest::Deactivate(g_fd, buf->base());
    }
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("activate/deactivate: {}", strerror(err)).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

#ifdef HZC_HAVE_IBVERBS
// The first RDMA device, opened once, with a protection domain.
struct Verbs {
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;
  std::string device;
  std::string error;

  Verbs() {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) {
      error = "no RDMA device (soft-RoCE not set up?)";
      if (list != nullptr) {
        ibv_free_device_list(list);
      }
      return;
    }
    device = ibv_get_device_name(list[0]);
    ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (ctx == nullptr) {
      error = fmt::format("ibv_open_device({}): {}", device, strerror(errno));
      return;
    }
    pd = ibv_alloc_pd(ctx);
    if (pd == nullptr) {
      error = fmt::format("ibv_alloc_pd({}): {}", device, strerror(errno));
    }
  }
  ~Verbs() {
    if (pd != nullptr) {
      ibv_dealloc_pd(pd);
    }
    if (ctx != nullptr) {
      ibv_close_device(ctx);
    }
  }
  Verbs(const Verbs &) = delete;
  Verbs &operator=(const Verbs &) = delete;
};

std::unique_ptr<Verbs> g_verbs;

void RegMrDeregMr(benchmark::State &state, Pages pages, size_t size) {
  if (!g_verbs->error.empty()) {
    state.SkipWithError(g_verbs->error.c_str());
    return;
  }
  std::string error;
  Buffer *buf = GetBuffer(pages, size, &error);
  if (buf == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  IterationTimer timer(state, Name("ibv_reg_mr", pages, size));
  for (auto _ : state) {
    timer.Start();
    ibv_mr *mr = ibv_reg_mr(g_verbs->pd, buf->base(), size, access);
    if (mr == nullptr) {
      state.SkipWithError(fmt::format("ibv_reg_mr: {}", strerror(errno)).c_str());
      break;
    }
    const int err = ibv_dereg_mr(mr);
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("ibv_dereg_mr: {}", strerror(err)).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}
#endif

void PrintTable(const Collector &results) {
  Notes notes;
#ifdef HZC_HAVE_IBVERBS
  const std::string verbs = g_verbs->error.empty() ? g_verbs->device : "RDMA";
  if (!g_verbs->error.empty()) {
    notes.Add(fmt::format("ibv_reg_mr column skipped: {}", g_verbs->error));
  }
#else
  const std::string verbs = "RDMA";
  notes.Add("ibv_reg_mr column skipped: built without libibverbs");
#endif
  Table table({"pages", "size", "huge pages", "hzc activate + deactivate (GB/s)",
               fmt::format("ibv_reg_mr + ibv_dereg_mr on {} (GB/s)", verbs), "ratio hzc / verbs"});
  for (const Pages pages : kPages) {
    for (const size_t size : kSizes) {
      const std::string hzc_name = Name("hzc", pages, size);
      const std::string ibv_name = Name("ibv_reg_mr", pages, size);
      const Result hzc = results.Get(hzc_name);
      const Result ibv = results.Get(ibv_name);
      const std::string hzc_missing = notes.Missing(hzc_name, hzc);
      std::string ibv_missing = "n/a";
#ifdef HZC_HAVE_IBVERBS
      ibv_missing = g_verbs->error.empty() ? notes.Missing(ibv_name, ibv) : "n/a";
#endif
      const auto share = g_huge_share.find(RowKey(pages, size));
      const double bytes = static_cast<double>(size);
      table.Add(
          {PagesName(pages), Size(size),
           share == g_huge_share.end() ? "n/a" : fmt::format("{:.0f}%", share->second),
           hzc_missing.empty() ? GBps(bytes, hzc.seconds) : hzc_missing,
           ibv_missing.empty() ? GBps(bytes, ibv.seconds) : ibv_missing,
           hzc_missing.empty() && ibv_missing.empty() ? Ratio(ibv.seconds, hzc.seconds) : "n/a"});
    }
  }
  std::cout << "### Activation (pin + unpin) throughput\n\n"
            << "One touched buffer, registered once; each iteration activates all of it (long-"
               "term pin, FOLL_WRITE) and deactivates it (unpin, dirty).  The verbs column "
               "registers and deregisters the same buffer as a memory region (local write, "
               "remote read and write).  GB/s = 10^9 bytes of buffer per second; ratio > 1 means "
               "hzc is faster.  \"huge pages\" is the share of the buffer the kernel backed with "
               "2 MiB pages.  Medians of per-iteration times.\n\n";
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
#ifdef HZC_HAVE_IBVERBS
  g_verbs = std::make_unique<Verbs>();
#endif
  for (const Pages pages : kPages) {
    for (const size_t size : kSizes) {
      benchmark::RegisterBenchmark(Name("hzc", pages, size).c_str(), ActivateDeactivate, pages,
                                   size)
          ->UseManualTime();
#ifdef HZC_HAVE_IBVERBS
      benchmark::RegisterBenchmark(Name("ibv_reg_mr", pages, size).c_str(), RegMrDeregMr, pages,
                                   size)
          ->UseManualTime();
#endif
    }
  }
  Collector results;
  benchmark::RunSpecifiedBenchmarks(&results);
  g_buffers.clear();
  PrintTable(results);
#ifdef HZC_HAVE_IBVERBS
  g_verbs.reset();
#endif
  close(g_fd);
  benchmark::Shutdown();
  return 0;
}
