// SPDX-License-Identifier: Apache-2.0
// hzc-demo: N ranks (processes on this server) run the zero-copy flow of HCCL:
//
//   aclrtReserveMemAddress -> HcclCommSetMemoryRange -> aclrtMallocPhysical -> aclrtMapMem
//   -> HcclCommActivateCommMemory -> read every peer's memory -> HcclAllReduce and
//   HcclAllGather on the activated memory -> HcclCommDeactivateCommMemory
//   -> aclrtUnmapMem/aclrtFreePhysical -> HcclCommUnsetMemoryRange -> aclrtReleaseMemAddress
//
// Each rank writes a pattern into its activated memory, reads every peer's pattern through
// the library's peer mapping (hzc_comm_peer_ptr) and leaves a note in each peer's memory;
// then the ranks run an AllReduce (sum) and an AllGather whose send and receive buffers are
// in the activated memory, and check every element of the results; rank 0 shows the ranges
// and domains in /sys/kernel/hzc while they exist. The launcher starts the ranks as copies
// of itself; they meet at a barrier in a shared page (a real application would use
// HcclBarrier).
#include <acl/acl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tool_cli.h"

namespace {

constexpr size_t kChunk = size_t{2} << 20;  // each rank activates two adjacent 2 MiB chunks
constexpr size_t kNote = 64;                // bytes per rank for notes, at the very end

// Counters in a shared page: barrier i is done when arrived[i] == nranks.
struct Shared {
  std::atomic<uint32_t> arrived[16];
  std::atomic<uint32_t> failed;
  std::atomic<uint32_t> turn;  // rank whose report is printed next
};

bool Barrier(Shared *s, int i, uint32_t n) {
  s->arrived[i].fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (s->arrived[i].load() < n) {
    if (s->failed.load() != 0 || std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

uint64_t Word(uint32_t rank, size_t i) {
  return (uint64_t{0xc0de0000u + rank} << 32) | i;
}

// AllReduce input of rank r at element i; the sum over the ranks is Sum(n) * (i % 1024 + 1).
int32_t ReduceIn(uint32_t rank, size_t i) {
  return static_cast<int32_t>((rank + 1) * (i % 1024 + 1));
}
int32_t GatherIn(uint32_t rank, size_t i) {
  return static_cast<int32_t>((rank << 24) | (i & 0xffffff));
}
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string ReadFile(const std::filesystem::path &p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

void ShowSysfs() {
  namespace fs = std::filesystem;
  const fs::path root = "/sys/kernel/hzc";
  if (!fs::exists(root)) {
    fmt::print("  (no {}: is hzc.ko loaded?)\n", root.string());
    return;
  }
  fmt::print("  {}: nr_ranges={} nr_activations={} nr_domains={} pinned_bytes={}\n", root.string(),
             ReadFile(root / "nr_ranges"), ReadFile(root / "nr_activations"),
             ReadFile(root / "nr_domains"), ReadFile(root / "pinned_bytes"));
  if (geteuid() != 0) {
    fmt::print("  (the files of ranges and domains are root's; `hzcctl range show` lists yours)\n");
    return;
  }
  for (const char *kind : {"ranges", "domains"}) {
    if (!fs::exists(root / kind)) {
      continue;
    }
    std::vector<fs::path> dirs;
    for (const auto &e : fs::directory_iterator(root / kind)) {
      dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const auto &d : dirs) {
      std::string line;
      std::vector<fs::path> files;
      for (const auto &f : fs::recursive_directory_iterator(d)) {
        if (f.is_regular_file()) {
          files.push_back(f.path());
        }
      }
      std::sort(files.begin(), files.end());
      for (const auto &f : files) {
        line += fmt::format(" {}={}", fs::relative(f, d).string(), ReadFile(f));
      }
      fmt::print("  {}/{}:{}\n", kind, d.filename().string(), line);
    }
  }
}

#define STEP(call)                                                      \
  do {                                                                  \
    const int rc_ = static_cast<int>(call);                             \
    if (rc_ != 0) {                                                     \
      fmt::print(stderr, "rank {}: {} failed: {}\n", rank, #call, rc_); \
      shared->failed.store(1);                                          \
      return 1;                                                         \
    }                                                                   \
  } while (0)

int RunRank(uint32_t rank, uint32_t nranks, const HcclRootInfo &root, Shared *shared) {
  std::string report = fmt::format("rank {} (pid {}):\n", rank, getpid());
  HcclComm comm = nullptr;
  STEP(HcclCommInitRootInfo(nranks, &root, rank, &comm));

  // 1-2: reserve address space and publish it as a memory range (the first call also
  // establishes the links between the ranks).
  void *va = nullptr;
  STEP(aclrtReserveMemAddress(&va, 4 * kChunk, 0, nullptr, 1));  // 1: huge pages
  STEP(HcclCommSetMemoryRange(comm, va, 4 * kChunk, 0, 0));
  // 3-5: allocate, map and activate two adjacent chunks.
  aclrtPhysicalMemProp prop{};
  prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  aclrtDrvMemHandle handles[2] = {};
  char *base = static_cast<char *>(va);
  for (int i = 0; i < 2; ++i) {
    STEP(aclrtMallocPhysical(&handles[i], kChunk, &prop, 0));
    STEP(aclrtMapMem(base + i * kChunk, kChunk, 0, handles[i], 0));
    STEP(HcclCommActivateCommMemory(comm, base + i * kChunk, kChunk, 0, handles[i], 0));
  }
  const size_t words = (2 * kChunk - nranks * kNote) / sizeof(uint64_t);
  auto *mine = reinterpret_cast<uint64_t *>(base);
  for (size_t i = 0; i < words; ++i) {
    mine[i] = Word(rank, i);
  }
  report += fmt::format("  activated 2 x {} MiB at {} and wrote its pattern\n", kChunk >> 20, va);
  if (!Barrier(shared, 0, nranks)) {
    return 1;
  }

  // 6: read every peer's pattern through the library's mapping; leave a note in its memory.
  for (uint32_t q = 0; q < nranks; ++q) {
    hzc_peer_activation activations[4];
    uint32_t count = 4;
    STEP(hzc_comm_peer_activations(comm, q, activations, &count));
    void *p = nullptr;
    STEP(hzc_comm_peer_ptr(comm, q, reinterpret_cast<void *>(activations[0].va), 2 * kChunk, &p));
    const auto *theirs = static_cast<const uint64_t *>(p);
    size_t bad = 0;
    for (size_t i = 0; i < words; ++i) {
      bad += theirs[i] != Word(q, i) ? 1 : 0;
    }
    const std::string note = fmt::format("hello from rank {}", rank);
    std::memcpy(static_cast<char *>(p) + 2 * kChunk - (nranks - rank) * kNote, note.c_str(),
                note.size() + 1);
    report += fmt::format("  rank {}: {} activation(s) from {:#x}, pattern {} ({} words{})\n", q,
                          count, activations[0].va, bad == 0 ? "ok" : "WRONG", words,
                          q == rank ? ", own memory" : ", through the peer mapping");
    if (bad != 0) {
      shared->failed.store(1);
    }
  }
  if (!Barrier(shared, 1, nranks)) {
    return 1;
  }
  uint32_t notes = 0;
  for (uint32_t q = 0; q < nranks; ++q) {
    const char *note = base + 2 * kChunk - (nranks - q) * kNote;
    notes += fmt::format("hello from rank {}", q) == note ? 1 : 0;
  }
  report += fmt::format("  found {} of {} notes the ranks wrote into this memory\n", notes, nranks);
  if (notes != nranks) {
    shared->failed.store(1);
  }

  // 7: collectives on the activated memory (every peer is done reading the patterns).
  // AllReduce: send and receive 1 MiB each in the first chunk.
  const size_t rcount = (kChunk / 2) / sizeof(int32_t);
  auto *rsend = reinterpret_cast<int32_t *>(base);
  auto *rrecv = reinterpret_cast<int32_t *>(base + kChunk / 2);
  for (size_t i = 0; i < rcount; ++i) {
    rsend[i] = ReduceIn(rank, i);
  }
  auto t0 = std::chrono::steady_clock::now();
  STEP(HcclAllReduce(rsend, rrecv, rcount, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, nullptr));
  const double reduce_ms = MsSince(t0);
  const int32_t sum = static_cast<int32_t>(nranks * (nranks + 1) / 2);
  size_t bad = 0;
  for (size_t i = 0; i < rcount; ++i) {
    bad += rrecv[i] != sum * static_cast<int32_t>(i % 1024 + 1) ? 1 : 0;
  }
  report +=
      fmt::format("  HcclAllReduce sum of {} int32 in activated memory: {} ({:.1f} ms)\n", rcount,
                  bad == 0 ? "every element right" : fmt::format("{} WRONG", bad), reduce_ms);
  // AllGather: in the second chunk, before the notes; the send buffer, then nranks slots.
  const size_t gcount = ((kChunk - nranks * kNote) / (nranks + 1) / sizeof(int32_t)) & ~size_t{15};
  auto *gsend = reinterpret_cast<int32_t *>(base + kChunk);
  auto *grecv = gsend + gcount;
  for (size_t i = 0; i < gcount; ++i) {
    gsend[i] = GatherIn(rank, i);
  }
  t0 = std::chrono::steady_clock::now();
  STEP(HcclAllGather(gsend, grecv, gcount, HCCL_DATA_TYPE_INT32, comm, nullptr));
  const double gather_ms = MsSince(t0);
  size_t gbad = 0;
  for (uint32_t q = 0; q < nranks; ++q) {
    for (size_t i = 0; i < gcount; ++i) {
      gbad += grecv[q * gcount + i] != GatherIn(q, i) ? 1 : 0;
    }
  }
  report += fmt::format(
      "  HcclAllGather of {} int32 per rank in activated memory: {} ({:.1f} ms)\n", gcount,
      gbad == 0 ? "every element right" : fmt::format("{} WRONG", gbad), gather_ms);
  if (bad != 0 || gbad != 0) {
    shared->failed.store(1);
  }
  if (rank == 0) {
    fmt::print("== sysfs while the ranges exist\n");
    ShowSysfs();
    std::fflush(stdout);
  }
  if (!Barrier(shared, 2, nranks)) {
    return 1;
  }

  // 8-11: deactivate, unmap and free, unset, release.
  for (int i = 0; i < 2; ++i) {
    STEP(HcclCommDeactivateCommMemory(comm, base + i * kChunk));
    STEP(aclrtUnmapMem(base + i * kChunk));
    STEP(aclrtFreePhysical(handles[i]));
  }
  STEP(HcclCommUnsetMemoryRange(comm, va));
  STEP(aclrtReleaseMemAddress(va));
  STEP(HcclCommDestroy(comm));
  report += "  deactivated, unmapped, freed, unset, released\n";
  // The reports in rank order.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (shared->turn.load() != rank && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fmt::print("{}", report);
  std::fflush(stdout);
  shared->turn.fetch_add(1);
  return 0;
}

std::string Hex(const HcclRootInfo &root) {
  std::string out;
  for (char c : root.internal) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "N ranks (processes on this server) run HCCL's zero-copy flow through hzc: set a "
      "memory range, activate memory, read each other's memory, run an AllReduce and "
      "an AllGather on it with every element checked, and tear down.",
      "hzc-demo"};
  app.footer(
      "Needs hzc.ko loaded (HZC_DEVICE, default /dev/hzc).\n"
      "Exit status: 0 if every rank succeeded, 1 otherwise, 2 on a usage error.");
  hzc::tool::AddStandardFlags(app);
  uint32_t nranks = 4;
  int rank = -1;
  int shared_fd = -1;
  std::string root_hex;
  app.add_option("-n,--ranks", nranks, "number of ranks (processes)")->check(CLI::Range(1, 64));
  app.add_option("--rank", rank, "internal: run as this rank")->group("");
  app.add_option("--shared-fd", shared_fd, "internal")->group("");
  app.add_option("--root", root_hex, "internal")->group("");
  if (auto status = hzc::tool::Parse(app, argc, argv)) {
    return *status;
  }

  if (rank >= 0) {  // a rank started by the launcher
    HcclRootInfo root{};
    if (root_hex.size() != 2 * sizeof(root) ||
        root_hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      std::fprintf(stderr, "hzc-demo: --root: not a root info in hex\n");
      return 2;
    }
    for (size_t i = 0; i < sizeof(root); ++i) {
      root.internal[i] = static_cast<char>(std::stoi(root_hex.substr(2 * i, 2), nullptr, 16));
    }
    auto *shared = static_cast<Shared *>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0));
    if (shared == MAP_FAILED) {
      return 2;
    }
    return RunRank(static_cast<uint32_t>(rank), nranks, root, shared);
  }

  // The launcher: root info, a shared page, N copies of this program.
  HcclRootInfo root;
  if (HcclGetRootInfo(&root) != HCCL_SUCCESS) {
    return 1;
  }
  const int fd = memfd_create("hzc-demo", 0);  // inherited by the ranks
  if (fd < 0 || ftruncate(fd, sizeof(Shared)) != 0) {
    perror("hzc-demo: memfd");
    return 1;
  }
  fmt::print("== hzc-demo: {} ranks, each activates 2 x {} MiB\n", nranks, kChunk >> 20);
  std::fflush(stdout);
  const std::string hex = Hex(root), n = std::to_string(nranks), sfd = std::to_string(fd);
  std::vector<pid_t> pids;
  for (uint32_t r = 0; r < nranks; ++r) {
    const std::string me = std::to_string(r);
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "--ranks", n.c_str(), "--rank", me.c_str(), "--shared-fd",
            sfd.c_str(), "--root", hex.c_str(), nullptr);
      _exit(127);
    }
    if (pid < 0) {
      perror("hzc-demo: fork");
      return 1;
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  close(fd);
  fmt::print("== hzc-demo: {} of {} ranks succeeded\n", nranks - failed, nranks);
  return failed == 0 ? 0 : 1;
}
