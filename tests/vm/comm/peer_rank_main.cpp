// SPDX-License-Identifier: Apache-2.0
// One rank of the peer-access guest tests (tests/vm/comm/peer_vm_test.cpp): the flow of
// DESIGN.md section 1 with data checked across ranks through hzc_comm_peer_ptr.
//
// Usage: hzc-vm-peer-rank MODE ROOT_INFO_HEX NRANKS RANK SYNC_FD [VICTIM]
//   MODE flow   every rank checks every peer's pattern, writes a greeting into each peer's
//               memory and checks the greetings it got; with RDMA links it does the same with
//               RDMA WRITE and READ; re-activation, deactivation and unset are then seen by
//               the peers
//   MODE kill   rank VICTIM stops after activating; the launcher kills it and sets flag 0;
//               the others must get HCCL_E_REMOTE for it and tear down cleanly
//   MODE memlock  every rank activates under a small RLIMIT_MEMLOCK without CAP_IPC_LOCK
// Exit status 0 on success; otherwise 1 and one line on stderr naming the step.
#include <acl/acl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "rdma_resources.h"
#include "root_info_hex.h"
#include "shared_sync.h"

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{120'000};
const size_t kPage = static_cast<size_t>(getpagesize());
const size_t kChunk = 16 * kPage;
constexpr size_t kGreeting = 64;  // bytes per rank at the start of the last page

uint32_t g_rank = 0;

[[noreturn]] void Fail(const std::string &what) {
  fmt::print(stderr, "rank {}: {}\n", g_rank, what);
  std::exit(1);
}

void Check(bool ok, const std::string &what) {
  if (!ok) {
    Fail(what);
  }
}

void Expect(HcclResult got, HcclResult want, const std::string &what) {
  if (got != want) {
    Fail(fmt::format("{}: got {} ({}), want {}", what, static_cast<int>(got),
                     HcclGetErrorString(got), static_cast<int>(want)));
  }
}

uint64_t Word(uint32_t rank, uint64_t tag, size_t i) {
  return (uint64_t{rank + 1} << 48) | (tag << 32) | i;
}

// Words of [p, p + bytes) except the greeting page at the end of the first two chunks.
size_t PatternWords(size_t bytes) {
  return bytes / sizeof(uint64_t);
}

void Fill(void *p, size_t bytes, uint32_t rank, uint64_t tag) {
  auto *w = static_cast<uint64_t *>(p);
  for (size_t i = 0; i < PatternWords(bytes); ++i) {
    w[i] = Word(rank, tag, i);
  }
}

std::string Verify(const void *p, size_t bytes, uint32_t rank, uint64_t tag) {
  const auto *w = static_cast<const uint64_t *>(p);
  for (size_t i = 0; i < PatternWords(bytes); ++i) {
    if (w[i] != Word(rank, tag, i)) {
      return fmt::format("word {} is {:#x}, want {:#x}", i, w[i], Word(rank, tag, i));
    }
  }
  return "";
}

// Number of /dev/hzc windows mapped in this process.
int HzcWindows() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find(hzc_device_path()) != std::string::npos ? 1 : 0;
  }
  return n;
}

struct Rank {
  HcclComm comm = nullptr;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  char *va = nullptr;  // reservation: 3 chunks, the first two activated
  aclrtDrvMemHandle h[2] = {};
  aclrtPhysicalMemProp prop{};

  void Setup() {
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    void *v = nullptr;
    Check(aclrtReserveMemAddress(&v, 3 * kChunk, 0, nullptr, 0) == ACL_SUCCESS, "reserve");
    va = static_cast<char *>(v);
    Expect(HcclCommSetMemoryRange(comm, va, 3 * kChunk, 0, 0), HCCL_SUCCESS, "set");
    for (int i = 0; i < 2; ++i) {
      MapAndActivate(i);
    }
  }
  void MapAndActivate(int i) {
    Check(aclrtMallocPhysical(&h[i], kChunk, &prop, 0) == ACL_SUCCESS, "malloc physical");
    Check(aclrtMapMem(va + i * kChunk, kChunk, 0, h[i], 0) == ACL_SUCCESS, "map");
    Expect(HcclCommActivateCommMemory(comm, va + i * kChunk, kChunk, 0, h[i], 0), HCCL_SUCCESS,
           "activate");
  }
  void DeactivateAndFree(int i) {
    Expect(HcclCommDeactivateCommMemory(comm, va + i * kChunk), HCCL_SUCCESS, "deactivate");
    Check(aclrtUnmapMem(va + i * kChunk) == ACL_SUCCESS, "unmap");
    Check(aclrtFreePhysical(h[i]) == ACL_SUCCESS, "free physical");
  }
  void Teardown() {
    Expect(HcclCommUnsetMemoryRange(comm, va), HCCL_SUCCESS, "unset");
    Check(aclrtReleaseMemAddress(va) == ACL_SUCCESS, "release");
    Expect(HcclCommDestroy(comm), HCCL_SUCCESS, "destroy");
  }
  // The base of rank @q's activated memory, learnt through the library.
  uintptr_t PeerBase(uint32_t q, uint32_t want_activations) {
    hzc_peer_activation activations[4];
    uint32_t count = 4;
    Expect(hzc_comm_peer_activations(comm, q, activations, &count), HCCL_SUCCESS,
           fmt::format("activations of rank {}", q));
    Check(count == want_activations,
          fmt::format("rank {} has {} activations, want {}", q, count, want_activations));
    if (want_activations == 2) {
      Check(activations[0].size == kChunk && activations[1].va == activations[0].va + kChunk,
            fmt::format("rank {}: activations are not two adjacent chunks", q));
    }
    return want_activations > 0 ? activations[0].va : 0;
  }
  void *Ptr(uint32_t q, uintptr_t peer_va, size_t len) {
    void *p = nullptr;
    Expect(hzc_comm_peer_ptr(comm, q, reinterpret_cast<void *>(peer_va), len, &p), HCCL_SUCCESS,
           fmt::format("peer ptr of rank {} at {:#x} (+{:#x})", q, peer_va, len));
    return p;
  }
};

// With RDMA links: every rank writes a message into each peer's greeting page with RDMA WRITE
// and reads the start of each peer's pattern with RDMA READ; a read spanning two activations
// is refused. Layout of the greeting page (the last page of the second chunk): greetings at
// q * kGreeting, RDMA messages from rank q at kRdmaIn + q * kGreeting, own scratch above.
template <typename Barrier>
void Rdma(Rank &r, const std::vector<uintptr_t> &base, Barrier &&barrier) {
  constexpr size_t kRdmaIn = 1024, kScratch = 3072, kRead = 256;
  hzc_link_info info{};
  Expect(hzc_comm_link_info(r.comm, &info), HCCL_SUCCESS, "link info");
  Check(info.linked == 1, "link info: not linked after the first set");
  const bool want = hzc::test::RdmaLinksExpected();
  Check(info.rdma == (want ? 1U : 0U),
        fmt::format("link info: rdma is {}, want {}", info.rdma, want ? 1 : 0));
  char *page = r.va + 2 * kChunk - kPage;
  const std::string msg = fmt::format("rdma from rank {}", r.rank);
  std::memcpy(page + kScratch, msg.c_str(), msg.size() + 1);
  for (uint32_t q = 0; q < r.nranks && info.rdma != 0; ++q) {
    if (q == r.rank) {
      continue;
    }
    const uintptr_t their_page = base[q] + 2 * kChunk - kPage;
    Expect(hzc_comm_rdma_write(r.comm, q, page + kScratch,
                               reinterpret_cast<void *>(their_page + kRdmaIn + r.rank * kGreeting),
                               kGreeting),
           HCCL_SUCCESS, fmt::format("rdma write to rank {}", q));
    Expect(hzc_comm_rdma_read(r.comm, q, page + kScratch + kGreeting,
                              reinterpret_cast<const void *>(base[q]), kRead),
           HCCL_SUCCESS, fmt::format("rdma read from rank {}", q));
    const std::string bad = Verify(page + kScratch + kGreeting, kRead, q, 1);
    Check(bad.empty(), fmt::format("rdma read from rank {}: {}", q, bad));
    Expect(hzc_comm_rdma_read(r.comm, q, page + kScratch + kGreeting,
                              reinterpret_cast<const void *>(base[q] + kChunk - 64), 128),
           HCCL_E_PARA, fmt::format("rdma read across two activations of rank {}", q));
  }
  barrier();
  for (uint32_t q = 0; q < r.nranks && info.rdma != 0; ++q) {
    const char *got = page + kRdmaIn + q * kGreeting;
    Check(q == r.rank || fmt::format("rdma from rank {}", q) == got,
          fmt::format("rdma message of rank {} is \"{:.40}\"", q, got));
  }
  barrier();
}

int Flow(Rank &r, hzc::test::SharedSync *sync) {
  const uint32_t n = r.nranks;
  int step = 0;
  auto barrier = [&] {
    Check(sync->Barrier(step, n, kTimeout), fmt::format("barrier {} timed out", step));
    ++step;
  };
  r.Setup();
  Fill(r.va, 2 * kChunk - kPage, r.rank, 1);  // the last page of chunk 2 takes greetings
  barrier();
  std::vector<uintptr_t> base(n);
  for (uint32_t q = 0; q < n; ++q) {
    base[q] = r.PeerBase(q, 2);
    char *p = static_cast<char *>(r.Ptr(q, base[q], 2 * kChunk));
    if (q == r.rank) {
      Check(p == r.va, "own rank: the pointer is not the address itself");
    }
    const std::string bad = Verify(p, 2 * kChunk - kPage, q, 1);
    Check(bad.empty(), fmt::format("pattern of rank {}: {}", q, bad));
    const std::string hello = fmt::format("rank {} was here", r.rank);
    std::memcpy(p + 2 * kChunk - kPage + r.rank * kGreeting, hello.c_str(), hello.size() + 1);
    // Beyond the activated memory: the third chunk is reserved but not activated.
    void *out = nullptr;
    Expect(
        hzc_comm_peer_ptr(r.comm, q, reinterpret_cast<void *>(base[q]), 2 * kChunk + kPage, &out),
        HCCL_E_PARA, "a span past the activated memory");
    Expect(
        hzc_comm_peer_ptr(r.comm, q, reinterpret_cast<void *>(base[q] + 2 * kChunk), kPage, &out),
        HCCL_E_PARA, "reserved memory that is not activated");
  }
  void *none = nullptr;
  Expect(hzc_comm_peer_ptr(r.comm, n, reinterpret_cast<void *>(base[0]), kPage, &none), HCCL_E_PARA,
         "a rank beyond the communicator");
  barrier();
  for (uint32_t q = 0; q < n; ++q) {
    const char *got = r.va + 2 * kChunk - kPage + q * kGreeting;
    Check(fmt::format("rank {} was here", q) == got,
          fmt::format("greeting of rank {} is \"{:.40}\"", q, got));
  }
  barrier();
  Rdma(r, base, barrier);
  // Replace the second chunk by new memory with another pattern at the same address.
  r.DeactivateAndFree(1);
  r.MapAndActivate(1);
  Fill(r.va + kChunk, kChunk, r.rank, 2);
  barrier();
  for (uint32_t q = 0; q < n; ++q) {
    const std::string bad = Verify(r.Ptr(q, base[q] + kChunk, kChunk), kChunk, q, 2);
    Check(bad.empty(), fmt::format("re-activated memory of rank {}: {}", q, bad));
  }
  barrier();
  r.DeactivateAndFree(0);
  r.DeactivateAndFree(1);
  barrier();
  for (uint32_t q = 0; q < n; ++q) {
    void *out = nullptr;
    // The cache held this memory as activated: the peer's generation must invalidate it.
    Expect(hzc_comm_peer_ptr(r.comm, q, reinterpret_cast<void *>(base[q]), kPage, &out),
           HCCL_E_PARA, fmt::format("deactivated memory of rank {}", q));
  }
  barrier();
  Expect(HcclCommUnsetMemoryRange(r.comm, r.va), HCCL_SUCCESS, "unset");
  barrier();
  for (uint32_t q = 0; q < n; ++q) {
    r.PeerBase(q, 0);
  }
  Check(HzcWindows() == 0, fmt::format("{} peer windows still mapped after unset", HzcWindows()));
  barrier();
  Check(aclrtReleaseMemAddress(r.va) == ACL_SUCCESS, "release");
  Expect(HcclCommDestroy(r.comm), HCCL_SUCCESS, "destroy");
  return 0;
}

int Kill(Rank &r, hzc::test::SharedSync *sync, uint32_t victim) {
  const uint32_t n = r.nranks;
  r.Setup();
  Fill(r.va, 2 * kChunk, r.rank, 1);
  Check(sync->Barrier(0, n, kTimeout), "barrier 0 timed out");
  if (r.rank == victim) {
    for (;;) {
      pause();  // the launcher kills us
    }
  }
  // Warm the cache: the victim's memory is readable.
  const uintptr_t vbase = r.PeerBase(victim, 2);
  const std::string bad = Verify(r.Ptr(victim, vbase, 2 * kChunk), 2 * kChunk, victim, 1);
  Check(bad.empty(), "pattern of the victim: " + bad);
  Check(sync->Barrier(1, n - 1, kTimeout), "barrier 1 timed out");
  Check(hzc::test::SharedSync::WaitFor([&] { return sync->flags[0].load() != 0; }, kTimeout),
        "the launcher did not report the victim's death");
  void *out = nullptr;
  Expect(hzc_comm_peer_ptr(r.comm, victim, reinterpret_cast<void *>(vbase), kPage, &out),
         HCCL_E_REMOTE, "peer ptr of the dead rank");
  uint32_t count = 0;
  Expect(hzc_comm_peer_activations(r.comm, victim, nullptr, &count), HCCL_E_REMOTE,
         "activations of the dead rank");
  // Local tear-down works whatever the peers did.
  r.DeactivateAndFree(0);
  r.DeactivateAndFree(1);
  r.Teardown();
  return 0;
}

// Each rank without CAP_IPC_LOCK under a small RLIMIT_MEMLOCK: activation is HCCL_E_MEMORY
// (from the RDMA registration or the kernel's pin, each with a hint) and changes nothing; the
// same activation works once the limit allows it.
int Memlock(Rank &r) {
  const size_t big = 4 << 20;
  hzc_link_info info{};
  Expect(hzc_comm_link_info(r.comm, &info), HCCL_SUCCESS, "link info");
  void *v = nullptr;
  Check(aclrtReserveMemAddress(&v, big, 0, nullptr, 0) == ACL_SUCCESS, "reserve");
  r.va = static_cast<char *>(v);
  Expect(HcclCommSetMemoryRange(r.comm, r.va, big, 0, 0), HCCL_SUCCESS, "set");
  Expect(hzc_comm_link_info(r.comm, &info), HCCL_SUCCESS, "link info");
  r.prop.memAttr = ACL_HBM_MEM_NORMAL;
  r.prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  Check(aclrtMallocPhysical(&r.h[0], big, &r.prop, 0) == ACL_SUCCESS, "malloc physical");
  Check(aclrtMapMem(r.va, big, 0, r.h[0], 0) == ACL_SUCCESS, "map");
  // CAP_IPC_LOCK exempts from the limit: drop it from the effective set.
  __user_cap_header_struct hdr{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct caps[2] = {};
  Check(syscall(SYS_capget, &hdr, caps) == 0, "capget");
  caps[CAP_IPC_LOCK / 32].effective &= ~(1U << (CAP_IPC_LOCK % 32));
  Check(syscall(SYS_capset, &hdr, caps) == 0, "capset");
  rlimit lim{};
  Check(getrlimit(RLIMIT_MEMLOCK, &lim) == 0, "getrlimit");
  auto limit = [&](size_t bytes) {
    lim.rlim_cur = bytes;
    lim.rlim_max = std::max<rlim_t>(lim.rlim_max, bytes);  // root may raise it
    Check(setrlimit(RLIMIT_MEMLOCK, &lim) == 0, fmt::format("setrlimit {}", bytes));
  };
  limit(64 << 10);
  Expect(HcclCommActivateCommMemory(r.comm, r.va, big, 0, r.h[0], 0), HCCL_E_MEMORY,
         "activate 4 MiB under a 64 KiB RLIMIT_MEMLOCK");
  if (info.rdma != 0) {
    // Room for one pin of the activation, not two: the registration works, the kernel's pin not.
    limit(6 << 20);
    Expect(HcclCommActivateCommMemory(r.comm, r.va, big, 0, r.h[0], 0), HCCL_E_MEMORY,
           "activate 4 MiB under a 6 MiB RLIMIT_MEMLOCK with RDMA links");
  }
  limit(2 * big + (1 << 20));
  Expect(HcclCommActivateCommMemory(r.comm, r.va, big, 0, r.h[0], 0), HCCL_SUCCESS,
         "activate once the limit allows it");
  r.DeactivateAndFree(0);
  r.Teardown();
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 6 || argc > 7 || std::strlen(argv[2]) != 2 * sizeof(HcclRootInfo)) {
    fmt::print(stderr, "usage: {} MODE ROOT_INFO_HEX NRANKS RANK SYNC_FD [VICTIM]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  HcclRootInfo root;
  if (!hzc::test::RootInfoFromHex(argv[2], &root)) {
    return 2;
  }
  Rank r;
  r.nranks = static_cast<uint32_t>(std::atoi(argv[3]));
  r.rank = static_cast<uint32_t>(std::atoi(argv[4]));
  g_rank = r.rank;
  auto *sync = hzc::test::SharedSync::Attach(std::atoi(argv[5]));
  Check(sync != nullptr, "cannot map the sync page");
  Expect(HcclCommInitRootInfo(r.nranks, &root, r.rank, &r.comm), HCCL_SUCCESS, "init");
  if (mode == "flow") {
    return Flow(r, sync);
  }
  if (mode == "memlock") {
    return Memlock(r);
  }
  if (mode == "kill" && argc == 7) {
    return Kill(r, sync, static_cast<uint32_t>(std::atoi(argv[6])));
  }
  Fail("unknown mode " + mode);
}
