// SPDX-License-Identifier: Apache-2.0
// hzc-bench-lib: what libhzc adds on top of hzc.ko. Latency of a non-first
// HcclCommSetMemoryRange + HcclCommUnsetMemoryRange pair and of
// HcclCommActivateCommMemory + HcclCommDeactivateCommMemory for 2 MiB, 64 MiB and 1 GiB, each
// next to the raw ioctls underneath (RANGE_REGISTER + UNREGISTER, ACTIVATE + DEACTIVATE) on
// the same memory, in the same run. Prints a markdown table; judges nothing.
#include <acl/acl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <linux/hzc.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "bench.h"

namespace hzc::bench {
namespace {

constexpr size_t kSizes[] = {2 * kMiB, 64 * kMiB, 1024 * kMiB};

HcclComm g_comm = nullptr;
int g_raw = -1;  // a second context for the raw ioctls

int RawIoctl(unsigned long request, void *arg) {
  return ioctl(g_raw, request, arg) == 0 ? 0 : errno;
}

int RawRegister(void *base, size_t size) {
  hzc_range_register a{};
  a.size = sizeof(a);
  a.base = reinterpret_cast<uintptr_t>(base);
  a.length = size;
  return RawIoctl(HZC_IOC_RANGE_REGISTER, &a);
}

int RawUnregister(void *base) {
  hzc_range_unregister a{};
  a.size = sizeof(a);
  a.base = reinterpret_cast<uintptr_t>(base);
  return RawIoctl(HZC_IOC_RANGE_UNREGISTER, &a);
}

int RawActivate(void *va, size_t size) {
  hzc_activate a{};
  a.size = sizeof(a);
  a.va = reinterpret_cast<uintptr_t>(va);
  a.length = size;
  return RawIoctl(HZC_IOC_ACTIVATE, &a);
}

int RawDeactivate(void *va) {
  hzc_deactivate a{};
  a.size = sizeof(a);
  a.va = reinterpret_cast<uintptr_t>(va);
  return RawIoctl(HZC_IOC_DEACTIVATE, &a);
}

// For one size: a huge-page reservation with one physical allocation mapped in it. The
// library measures Set/Unset on a second, unmapped reservation and Activate/Deactivate on
// this one (kept set); the raw context registers the same memory in its own context.
class Buffer {
 public:
  explicit Buffer(size_t size) : size_(size) {
    if (MemAvailable() != 0 && MemAvailable() < size + 256 * kMiB) {
      error_ = fmt::format("not enough guest memory for {} (MemAvailable {})", Size(size),
                           Size(MemAvailable()));
      return;
    }
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    if (aclrtReserveMemAddress(&va_, size, 0, nullptr, 1) != ACL_SUCCESS ||
        aclrtReserveMemAddress(&set_va_, size, 0, nullptr, 1) != ACL_SUCCESS ||
        aclrtMallocPhysical(&handle_, size, &prop, 0) != ACL_SUCCESS ||
        aclrtMapMem(va_, size, 0, handle_, 0) != ACL_SUCCESS) {
      error_ = "reserve/malloc/map failed (see the log)";
      return;
    }
    std::memset(va_, 1, size);  // fault everything in before timing
    if (HcclCommSetMemoryRange(g_comm, va_, size, 0, 0) != HCCL_SUCCESS) {
      error_ = "HcclCommSetMemoryRange failed (see the log)";
      return;
    }
    set_ = true;
    if (const int err = RawRegister(va_, size)) {
      error_ = fmt::format("raw RANGE_REGISTER: {}", strerror(err));
      return;
    }
    raw_set_ = true;
  }
  ~Buffer() {
    if (raw_set_) {
      RawUnregister(va_);
    }
    if (set_) {
      HcclCommUnsetMemoryRange(g_comm, va_);
    }
    if (handle_ != nullptr) {
      aclrtUnmapMem(va_);
      aclrtFreePhysical(handle_);
    }
    for (void *v : {va_, set_va_}) {
      if (v != nullptr) {
        aclrtReleaseMemAddress(v);
      }
    }
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  const std::string &error() const { return error_; }
  void *va() const { return va_; }
  void *set_va() const { return set_va_; }
  aclrtDrvMemHandle handle() const { return handle_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  void *va_ = nullptr;
  void *set_va_ = nullptr;
  aclrtDrvMemHandle handle_ = nullptr;
  bool set_ = false;
  bool raw_set_ = false;
  std::string error_;
};

std::map<size_t, std::unique_ptr<Buffer>> g_buffers;

Buffer *Get(benchmark::State &state, size_t size) {
  auto &b = g_buffers[size];
  if (!b) {
    b = std::make_unique<Buffer>(size);
  }
  if (!b->error().empty()) {
    state.SkipWithError(b->error().c_str());
    return nullptr;
  }
  return b.get();
}

std::string Name(const char *what, size_t size) {
  return fmt::format("lib/{}/{}", what, Size(size));
}

void LibSetUnset(benchmark::State &state, size_t size) {
  Buffer *b = Get(state, size);
  if (b == nullptr) {
    return;
  }
  IterationTimer timer(state, Name("set_unset", size));
  for (auto _ : state) {
    timer.Start();
    HcclResult rc = HcclCommSetMemoryRange(g_comm, b->set_va(), size, 0, 0);
    if (rc == HCCL_SUCCESS) {
      rc = HcclCommUnsetMemoryRange(g_comm, b->set_va());
    }
    timer.Stop();
    if (rc != HCCL_SUCCESS) {
      state.SkipWithError(fmt::format("set/unset: {}", HcclGetErrorString(rc)).c_str());
      break;
    }
  }
}

void RawRegisterUnregister(benchmark::State &state, size_t size) {
  Buffer *b = Get(state, size);
  if (b == nullptr) {
    return;
  }
  IterationTimer timer(state, Name("register_unregister", size));
  for (auto _ : state) {
    timer.Start();
    int err = RawRegister(b->set_va(), size);
    if (err == 0) {
      err = RawUnregister(b->set_va());
    }
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("register/unregister: {}", strerror(err)).c_str());
      break;
    }
  }
}

void LibActivateDeactivate(benchmark::State &state, size_t size) {
  Buffer *b = Get(state, size);
  if (b == nullptr) {
    return;
  }
  IterationTimer timer(state, Name("activate_deactivate", size));
  for (auto _ : state) {
    timer.Start();
    HcclResult rc = HcclCommActivateCommMemory(g_comm, b->va(), size, 0, b->handle(), 0);
    if (rc == HCCL_SUCCESS) {
      rc = HcclCommDeactivateCommMemory(g_comm, b->va());
    }
    timer.Stop();
    if (rc != HCCL_SUCCESS) {
      state.SkipWithError(fmt::format("activate/deactivate: {}", HcclGetErrorString(rc)).c_str());
      break;
    }
  }
}

void RawActivateDeactivate(benchmark::State &state, size_t size) {
  Buffer *b = Get(state, size);
  if (b == nullptr) {
    return;
  }
  IterationTimer timer(state, Name("ioctl_activate_deactivate", size));
  for (auto _ : state) {
    timer.Start();
    int err = RawActivate(b->va(), size);
    if (err == 0) {
      err = RawDeactivate(b->va());
    }
    timer.Stop();
    if (err != 0) {
      state.SkipWithError(fmt::format("ACTIVATE/DEACTIVATE: {}", strerror(err)).c_str());
      break;
    }
  }
}

void PrintTable(const Collector &results) {
  Notes notes;
  Table table({"size", "Set + Unset (us)", "RANGE_REGISTER + UNREGISTER (us)", "ratio",
               "Activate + Deactivate (us)", "ACTIVATE + DEACTIVATE (us)", "ratio"});
  for (const size_t size : kSizes) {
    std::vector<std::string> row{Size(size)};
    for (auto [lib, raw] : {std::pair{"set_unset", "register_unregister"},
                            std::pair{"activate_deactivate", "ioctl_activate_deactivate"}}) {
      const Result l = results.Get(Name(lib, size));
      const Result r = results.Get(Name(raw, size));
      const std::string lm = notes.Missing(Name(lib, size), l);
      const std::string rm = notes.Missing(Name(raw, size), r);
      row.push_back(lm.empty() ? Micros(l.seconds) : lm);
      row.push_back(rm.empty() ? Micros(r.seconds) : rm);
      row.push_back(lm.empty() && rm.empty() ? Ratio(l.seconds, r.seconds) : "n/a");
    }
    table.Add(std::move(row));
  }
  std::cout << "### libhzc over hzc.ko: Set/Unset and Activate/Deactivate latency\n\n"
            << "A one-rank communicator whose links already exist (so Set is not the first), "
               "huge-page memory (aclrtMallocPhysical with ACL_HBM_MEM_HUGE), faulted in "
               "before timing. The raw columns are the ioctls the library issues, made on a "
               "second /dev/hzc context on the same memory; ratio = library / raw. Medians "
               "of per-iteration times.\n\n";
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
  g_raw = open(hzc_device_path(), O_RDWR | O_CLOEXEC);
  if (g_raw < 0) {
    std::cerr << fmt::format("{}: {} (is hzc.ko loaded?)\n", hzc_device_path(), strerror(errno));
    return 1;
  }
  HcclRootInfo root;
  if (HcclGetRootInfo(&root) != HCCL_SUCCESS ||
      HcclCommInitRootInfo(1, &root, 0, &g_comm) != HCCL_SUCCESS) {
    std::cerr << "cannot make a one-rank communicator\n";
    return 1;
  }
  // The first Set establishes the links; the measured ones are later calls.
  void *first = nullptr;
  if (aclrtReserveMemAddress(&first, kHugePage, 0, nullptr, 1) != ACL_SUCCESS ||
      HcclCommSetMemoryRange(g_comm, first, kHugePage, 0, 0) != HCCL_SUCCESS) {
    std::cerr << "the first HcclCommSetMemoryRange failed\n";
    return 1;
  }
  for (const size_t size : kSizes) {
    benchmark::RegisterBenchmark(Name("set_unset", size).c_str(), LibSetUnset, size)
        ->UseManualTime();
    benchmark::RegisterBenchmark(Name("register_unregister", size).c_str(), RawRegisterUnregister,
                                 size)
        ->UseManualTime();
    benchmark::RegisterBenchmark(Name("activate_deactivate", size).c_str(), LibActivateDeactivate,
                                 size)
        ->UseManualTime();
    benchmark::RegisterBenchmark(Name("ioctl_activate_deactivate", size).c_str(),
                                 RawActivateDeactivate, size)
        ->UseManualTime();
  }
  Collector results;
  benchmark::RunSpecifiedBenchmarks(&results);
  g_buffers.clear();
  PrintTable(results);
  HcclCommUnsetMemoryRange(g_comm, first);
  aclrtReleaseMemAddress(first);
  HcclCommDestroy(g_comm);
  close(g_raw);
  benchmark::Shutdown();
  return 0;
}
