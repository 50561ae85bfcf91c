// SPDX-License-Identifier: Apache-2.0
// One rank of the HCCL-level RDMA guest tests (hccl_rdma_vm_test.cpp): the zero-copy flow
// through the public API only (HCCL, ACL and hzc.h), with RDMA WRITE/READ between the ranks'
// activated memory through hzc_comm_rdma_write / hzc_comm_rdma_read.
//
// Usage: hzc-hccl-rdma-rank MODE ROOT_INFO_HEX NRANKS RANK SYNC_FD [ARG...]
//   data SLOT THREADS  links come up in the first HcclCommSetMemoryRange (one queue pair per
//                      peer); every rank RDMA-WRITEs a pattern into its slot of every peer's
//                      activated memory (from one thread per peer if THREADS is 1), checks
//                      what the peers wrote, and RDMA-READs its slots back
//   mr                 every activation is one memory region (rdma resource show mr), gone
//                      on deactivation; transfers that span two activations or touch memory
//                      the peer deactivated are refused, and re-activated memory is reachable
//   args ROOT2_HEX     argument errors of hzc_comm_link_info / rdma_write / rdma_read; a
//                      second communicator (ROOT2) reaches only memory activated on it
//   missing ABSENT     rank ABSENT calls HcclCommSetMemoryRange only after the others timed
//                      out (HCCL_E_TIMEOUT, no RDMA objects left; rank r arrives r seconds
//                      late); then all retry and succeed
//   kill VICTIM        rank VICTIM sets flag 1 and stops once links are up; the launcher
//                      kills it and sets flag 0; transfers to it fail (no hang) and the
//                      survivors' tear-down is prompt
//   wrongdev           ranks with HZC_RDMA_DEVICE set expect HCCL_E_NOT_FOUND from the first
//                      HcclCommSetMemoryRange, the others an early failure; nothing is left
//   kernel ROOT2_HEX   kernel-only links (no RDMA device): rdma=0, the RDMA calls are
//                      HCCL_E_UNAVAIL, peer access works; a second communicator (ROOT2) links
//                      kernel-only too
// Exit status 0 on success; otherwise 1 after a line "FAIL rank R: what" on stderr, and the
// abort flag (the last flag of the sync page) set so the other ranks stop waiting.
#include <acl/acl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hccl_rdma_util.h"
#include "shared_sync.h"

namespace {

using hzc::hccl_rdma_test::RdmaLeftovers;
using hzc::hccl_rdma_test::RdmaResources;
using hzc::test::RdmaDevices;
using hzc::test::SharedSync;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{200'000};
const size_t kPage = static_cast<size_t>(getpagesize());
const size_t kChunk = 16 * kPage;

// Set by a rank that fails, so the others stop waiting at barriers.
constexpr int kAbortFlag = SharedSync::kSlots - 1;

uint32_t g_rank = 0;
SharedSync *g_sync = nullptr;
const Clock::time_point g_start = Clock::now();
std::string g_timeline;  // "step s, ..." since the start, printed at the end

[[noreturn]] void Fail(const std::string &what) {
  fmt::print(stderr, "FAIL rank {}: {}\n", g_rank, what);
  std::fflush(stderr);
  if (g_sync != nullptr) {
    g_sync->flags[kAbortFlag].store(1);
  }
  std::exit(1);
}

void Mark(const char *step) {
  g_timeline += fmt::format("{}{} {:.2f}", g_timeline.empty() ? "" : ", ", step,
                            std::chrono::duration<double>(Clock::now() - g_start).count());
}

void Check(bool ok, const std::string &what) {
  if (!ok) {
    Fail(what);
  }
}

std::string Code(HcclResult r) {
  return fmt::format("{} ({})", static_cast<int>(r), HcclGetErrorString(r));
}

void Expect(HcclResult got, HcclResult want, const std::string &what) {
  if (got != want) {
    Fail(fmt::format("{}: got {}, want {}", what, Code(got), Code(want)));
  }
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint8_t Pattern(uint32_t writer, uint32_t target, size_t i) {
  return static_cast<uint8_t>(writer * 131 + target * 31 + i * 7 + (i >> 9) + 1);
}

void Fill(void *p, size_t n, uint32_t writer, uint32_t tag) {
  auto *b = static_cast<uint8_t *>(p);
  for (size_t i = 0; i < n; ++i) {
    b[i] = Pattern(writer, tag, i);
  }
}

// "" if [p, p + n) holds Fill(writer, tag); else the first difference.
std::string Verify(const void *p, size_t n, uint32_t writer, uint32_t tag) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != Pattern(writer, tag, i)) {
      return fmt::format("byte {} is {:#x}, want {:#x}", i, b[i], Pattern(writer, tag, i));
    }
  }
  return "";
}

double g_tool_s = 0;  // time spent in rdma resource show

int Resources(const char *kind) {
  const auto t0 = Clock::now();
  const int n = RdmaResources(kind, getpid());
  g_tool_s += Since(t0);
  return n;
}

// This process holds @want memory regions.
void ExpectMrs(int want, const std::string &when) {
  const int got = Resources("mr");
  Check(got == want, fmt::format("{}: rdma resource show mr lists {} memory regions of this "
                                 "process, want {}",
                                 when, got, want));
}

void ExpectNoLeftovers(const std::string &when) {
  if (RdmaDevices().empty()) {
    return;  // no device, no RDMA objects (and rdma resource show has nothing to show)
  }
  const auto t0 = Clock::now();
  const std::string left = RdmaLeftovers(getpid());
  g_tool_s += Since(t0);
  Check(left.empty(), fmt::format("{}: this process still holds RDMA objects: {}", when, left));
}

struct Rank {
  HcclComm comm = nullptr;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  SharedSync *sync = nullptr;
  char *base = nullptr;  // the reservation, set as one range
  size_t reserved = 0;
  std::map<size_t, aclrtDrvMemHandle> mapped;  // offset -> handle, activated
  int step = 0;

  void Barrier(uint32_t n) {
    sync->arrived[step].fetch_add(1);
    const bool met = SharedSync::WaitFor(
        [&] { return sync->arrived[step].load() >= n || sync->flags[kAbortFlag].load() != 0; },
        kTimeout);
    if (sync->arrived[step].load() < n) {
      Fail(met ? fmt::format("barrier {}: another rank failed", step)
               : fmt::format("barrier {} timed out", step));
    }
    ++step;
    Mark(fmt::format("b{}", step - 1).c_str());
  }
  void Barrier() { Barrier(nranks); }

  void Reserve(size_t size) {
    void *v = nullptr;
    Check(aclrtReserveMemAddress(&v, size, 0, nullptr, 0) == ACL_SUCCESS, "reserve");
    base = static_cast<char *>(v);
    reserved = size;
  }
  void Set() {
    Expect(HcclCommSetMemoryRange(comm, base, reserved, 0, 0), HCCL_SUCCESS, "set");
    Mark("set");
  }
  char *At(size_t off) const { return base + off; }
  void Activate(size_t off, size_t size) {
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    aclrtDrvMemHandle h = nullptr;
    Check(aclrtMallocPhysical(&h, size, &prop, 0) == ACL_SUCCESS, "malloc physical");
    Check(aclrtMapMem(At(off), size, 0, h, 0) == ACL_SUCCESS, "map");
    Expect(HcclCommActivateCommMemory(comm, At(off), size, 0, h, 0), HCCL_SUCCESS,
           fmt::format("activate at +{:#x}", off));
    mapped[off] = h;
  }
  void Deactivate(size_t off) {
    Expect(HcclCommDeactivateCommMemory(comm, At(off)), HCCL_SUCCESS,
           fmt::format("deactivate at +{:#x}", off));
    Check(aclrtUnmapMem(At(off)) == ACL_SUCCESS, "unmap");
    Check(aclrtFreePhysical(mapped.at(off)) == ACL_SUCCESS, "free physical");
    mapped.erase(off);
  }
  // Deactivate everything, unset, release, destroy.
  void Teardown() {
    while (!mapped.empty()) {
      Deactivate(mapped.begin()->first);
    }
    Expect(HcclCommUnsetMemoryRange(comm, base), HCCL_SUCCESS, "unset");
    Check(aclrtReleaseMemAddress(base) == ACL_SUCCESS, "release");
    Expect(HcclCommDestroy(comm), HCCL_SUCCESS, "destroy");
    Mark("destroyed");
  }
  // The activations of rank @q, @want of them.
  std::vector<hzc_peer_activation> Activations(uint32_t q, uint32_t want) {
    std::vector<hzc_peer_activation> activations(8);
    uint32_t count = static_cast<uint32_t>(activations.size());
    Expect(hzc_comm_peer_activations(comm, q, activations.data(), &count), HCCL_SUCCESS,
           fmt::format("activations of rank {}", q));
    Check(count == want, fmt::format("rank {} has {} activations, want {}", q, count, want));
    activations.resize(count);
    return activations;
  }
  HcclResult Write(uint32_t q, const void *local, uintptr_t peer_va, size_t size) {
    return hzc_comm_rdma_write(comm, q, local, reinterpret_cast<void *>(peer_va), size);
  }
  HcclResult Read(uint32_t q, void *local, uintptr_t peer_va, size_t size) {
    return hzc_comm_rdma_read(comm, q, local, reinterpret_cast<const void *>(peer_va), size);
  }
};

hzc_link_info LinkInfo(HcclComm comm, const std::string &when) {
  hzc_link_info info;
  std::memset(&info, 0xa5, sizeof(info));
  Expect(hzc_comm_link_info(comm, &info), HCCL_SUCCESS, "link info " + when);
  return info;
}

std::string ReadLine(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// After the first HcclCommSetMemoryRange on a machine with an RDMA device: RDMA links on an
// existing device, port and GID.
void ExpectRdmaLinks(HcclComm comm) {
  const hzc_link_info info = LinkInfo(comm, "after set");
  Check(info.linked == 1, fmt::format("linked is {} after the first set, want 1", info.linked));
  Check(info.rdma == 1, fmt::format("rdma is {} with an RDMA device present, want 1", info.rdma));
  Check(std::memchr(info.device, '\0', sizeof(info.device)) != nullptr,
        "device name is not NUL-terminated");
  const std::string dev = info.device;
  bool known = false;
  for (const auto &d : RdmaDevices()) {
    known |= d == dev;
  }
  Check(known, fmt::format("device \"{}\" is not in /sys/class/infiniband", dev));
  const std::string port = fmt::format("/sys/class/infiniband/{}/ports/{}", dev, info.port);
  Check(info.port >= 1 && ReadLine(port + "/state").find("ACTIVE") != std::string::npos,
        fmt::format("port {} of {} is not an active port", info.port, dev));
  const std::string gid = ReadLine(fmt::format("{}/gids/{}", port, info.gid_index));
  Check(
      !gid.empty() && gid.find_first_not_of("0:") != std::string::npos,
      fmt::format("GID index {} of {} port {} is empty ({})", info.gid_index, dev, info.port, gid));
}

// What rank @writer sends to rank @target in data mode: [off, off + len) of the slot.
struct Span {
  size_t off;
  size_t len;
};
Span Xfer(uint32_t writer, uint32_t target, size_t slot) {
  const size_t off = (writer + target) % 3;
  return {off, slot - off - ((writer + 2 * target) % 4) * 3};
}

void Data(Rank &r, size_t slot, bool threaded) {
  const uint32_t n = r.nranks;
  const hzc_link_info before = LinkInfo(r.comm, "before set");
  Check(
      before.linked == 0 && before.rdma == 0,
      fmt::format("before the first set: linked {} rdma {}, want 0 0", before.linked, before.rdma));
  const size_t region = (3 * n * slot + kPage - 1) / kPage * kPage;
  r.Reserve(region);
  const auto set0 = Clock::now();
  r.Set();
  const double set_s = Since(set0);
  ExpectRdmaLinks(r.comm);
  // The rdma tool is slow under emulation: the first and the last rank audit their objects.
  const bool audit = r.rank == 0 || r.rank == n - 1;
  int mr0 = 0;
  if (audit) {
    const int qps = Resources("qp");
    Check(qps == static_cast<int>(n - 1),
          fmt::format("rdma resource show qp lists {} queue pairs of this rank, want {} (one per "
                      "peer)",
                      qps, n - 1));
    mr0 = Resources("mr");
    Check(mr0 >= 0, "rdma resource show mr failed");
  }
  r.Activate(0, region);
  if (audit) {
    ExpectMrs(mr0 + 1, "after the activation");
  }
  // inbox: slot p receives rank p's writes; out: what this rank writes; back: read back.
  uint8_t *inbox = reinterpret_cast<uint8_t *>(r.At(0));
  uint8_t *out = inbox + n * slot;
  uint8_t *back = out + n * slot;
  for (uint32_t p = 0; p < n; ++p) {
    for (size_t i = 0; i < slot; ++i) {
      out[p * slot + i] = Pattern(r.rank, p, i);
    }
  }
  r.Barrier();
  std::vector<uintptr_t> peer(n);
  for (uint32_t p = 0; p < n; ++p) {
    const auto activations = r.Activations(p, 1);
    Check(activations[0].size == region,
          fmt::format("rank {}: activation of {:#x} bytes, want {:#x}", p, activations[0].size,
                      region));
    peer[p] = activations[0].va;
  }
  // Run @op(p) for every peer, from one thread per peer when threaded.
  auto each_peer = [&](const char *what, auto op) {
    std::vector<HcclResult> res(n, HCCL_SUCCESS);
    std::vector<std::thread> threads;
    for (uint32_t p = 0; p < n; ++p) {
      if (p == r.rank) {
        continue;
      }
      if (threaded) {
        threads.emplace_back([&, p] { res[p] = op(p); });
      } else {
        res[p] = op(p);
      }
    }
    for (auto &t : threads) {
      t.join();
    }
    for (uint32_t p = 0; p < n; ++p) {
      Expect(res[p], HCCL_SUCCESS, fmt::format("rdma {} with rank {}", what, p));
    }
  };
  auto t0 = Clock::now();
  each_peer("write", [&](uint32_t p) {
    const Span s = Xfer(r.rank, p, slot);
    return r.Write(p, out + p * slot + s.off, peer[p] + r.rank * slot + s.off, s.len);
  });
  r.Barrier();
  for (uint32_t p = 0; p < n; ++p) {
    if (p == r.rank) {
      continue;
    }
    const Span s = Xfer(p, r.rank, slot);
    const uint8_t *got = inbox + p * slot;
    for (size_t i = 0; i < slot; ++i) {
      const uint8_t want = i >= s.off && i < s.off + s.len ? Pattern(p, r.rank, i) : 0;
      if (got[i] != want) {
        Fail(fmt::format("byte {} of the slot rank {} wrote [{}, +{}) is {:#x}, want {:#x}", i, p,
                         s.off, s.len, got[i], want));
      }
    }
  }
  const double write_s = Since(t0);
  t0 = Clock::now();
  each_peer("read", [&](uint32_t p) {
    const Span s = Xfer(r.rank, p, slot);
    return r.Read(p, back + p * slot + s.off, peer[p] + r.rank * slot + s.off, s.len);
  });
  for (uint32_t p = 0; p < n; ++p) {
    const Span s = Xfer(r.rank, p, slot);
    Check(p == r.rank || std::memcmp(back + p * slot + s.off, out + p * slot + s.off, s.len) == 0,
          fmt::format("what was read back from rank {} differs from what was written", p));
  }
  fmt::print(stderr,
             "rank {}: set {:.2f} s; {} peers x {} KiB: writes {:.2f} s (with the barrier), reads "
             "{:.2f} s\n",
             r.rank, set_s, n - 1, slot / 1024, write_s, Since(t0));
  Mark("data");
  r.Barrier();  // nobody tears down while a peer may still read from it
  r.Deactivate(0);
  if (audit) {
    ExpectMrs(mr0, "after the deactivation");
  }
  r.Teardown();
  if (audit) {
    ExpectNoLeftovers("after HcclCommDestroy");
  }
}

void Mr(Rank &r) {
  Check(r.nranks == 2, "mr mode runs with 2 ranks");
  const uint32_t peer = 1 - r.rank;
  r.Reserve(4 * kChunk);  // c0, c1: patterns; c2: local scratch; c3: never activated
  r.Set();
  ExpectRdmaLinks(r.comm);
  const int mr0 = Resources("mr");
  Check(mr0 >= 0, "rdma resource show mr failed");
  for (size_t c = 0; c < 3; ++c) {
    r.Activate(c * kChunk, kChunk);
  }
  ExpectMrs(mr0 + 3, "after activating 3 adjacent chunks");
  Fill(r.At(0), kChunk, r.rank, 1);
  Fill(r.At(kChunk), kChunk, r.rank, 2);
  char *scratch = r.At(2 * kChunk);
  r.Barrier();
  const auto activations = r.Activations(peer, 3);
  const uintptr_t pb = activations[0].va;
  for (size_t c = 0; c < 3; ++c) {
    Check(activations[c].va == pb + c * kChunk && activations[c].size == kChunk,
          fmt::format("activation {} of rank {} is not chunk {}", c, peer, c));
  }
  for (uint32_t c = 0; c < 2; ++c) {
    Expect(r.Read(peer, scratch, pb + c * kChunk, kChunk), HCCL_SUCCESS,
           fmt::format("read chunk {} of rank {}", c, peer));
    const std::string bad = Verify(scratch, kChunk, peer, c + 1);
    Check(bad.empty(), fmt::format("chunk {} of rank {} read back: {}", c, peer, bad));
  }
  // A transfer may not span two activations, on either side, even adjacent ones.
  Expect(r.Read(peer, scratch, pb + kChunk - kPage, 2 * kPage), HCCL_E_PARA,
         "read spanning two of the peer's activations");
  Expect(r.Write(peer, r.At(2 * kChunk - kPage), pb, 2 * kPage), HCCL_E_PARA,
         "write from memory spanning two own activations");
  Expect(r.Write(peer, scratch, pb + 3 * kChunk, kPage), HCCL_E_PARA,
         "write into the peer's reserved memory that is not activated");
  r.Barrier();
  if (r.rank == 1) {
    r.Deactivate(kChunk);
    ExpectMrs(mr0 + 2, "after deactivating chunk 1");
  }
  r.Barrier();
  if (r.rank == 0) {
    Expect(r.Write(peer, scratch, pb + kChunk, kPage), HCCL_E_PARA,
           "write into memory the peer deactivated");
    Expect(r.Read(peer, scratch, pb + kChunk + kPage, kPage), HCCL_E_PARA,
           "read from memory the peer deactivated");
    // The refused requests did not break the link.
    Expect(r.Read(peer, scratch, pb, kChunk), HCCL_SUCCESS, "read chunk 0 after the refusals");
    const std::string bad = Verify(scratch, kChunk, peer, 1);
    Check(bad.empty(), "chunk 0 read after the refusals: " + bad);
  }
  r.Barrier();
  if (r.rank == 1) {  // new memory at the same address: a new registration
    r.Activate(kChunk, kChunk);
    Fill(r.At(kChunk), kChunk, r.rank, 3);
    ExpectMrs(mr0 + 3, "after re-activating chunk 1");
  }
  r.Barrier();
  if (r.rank == 0) {
    Expect(r.Read(peer, scratch, pb + kChunk, kChunk), HCCL_SUCCESS,
           "read re-activated chunk 1 of the peer");
    const std::string bad = Verify(scratch, kChunk, peer, 3);
    Check(bad.empty(), "re-activated chunk 1 of the peer: " + bad);
    Fill(scratch, kChunk, r.rank, 4);
    Expect(r.Write(peer, scratch, pb + kChunk, kChunk), HCCL_SUCCESS,
           "write into re-activated chunk 1 of the peer");
  }
  r.Barrier();
  if (r.rank == 1) {
    const std::string bad = Verify(r.At(kChunk), kChunk, peer, 4);
    Check(bad.empty(), "what rank 0 wrote into the re-activated chunk: " + bad);
  }
  r.Barrier();
  r.Deactivate(0);
  ExpectMrs(mr0 + 2, "after deactivating chunk 0 at tear-down");
  r.Deactivate(kChunk);
  r.Deactivate(2 * kChunk);
  ExpectMrs(mr0, "after deactivating every chunk");
  r.Teardown();
  ExpectNoLeftovers("after HcclCommDestroy");
}

bool ParseRoot(const char *hex, HcclRootInfo *root) {
  if (std::strlen(hex) != 2 * sizeof(HcclRootInfo)) {
    return false;
  }
  for (size_t i = 0; i < sizeof(*root); ++i) {
    root->internal[i] = static_cast<char>(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16));
  }
  return true;
}

// A second communicator (@root2) over the same ranks: each communicator's RDMA reaches only
// memory activated on it, on either side; @pb is the peer's activation made on r.comm.
void CrossComm(Rank &r, const HcclRootInfo &root2, uintptr_t pb) {
  const uint32_t peer = 1 - r.rank;
  HcclComm second = nullptr;
  Expect(HcclCommInitRootInfo(r.nranks, &root2, r.rank, &second), HCCL_SUCCESS, "init comm 2");
  void *va = nullptr;
  Check(aclrtReserveMemAddress(&va, kChunk, 0, nullptr, 0) == ACL_SUCCESS, "reserve 2");
  Expect(HcclCommSetMemoryRange(second, va, kChunk, 0, 0), HCCL_SUCCESS, "set on comm 2");
  ExpectRdmaLinks(second);
  aclrtPhysicalMemProp prop{};
  prop.memAttr = ACL_HBM_MEM_NORMAL;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  aclrtDrvMemHandle h = nullptr;
  Check(aclrtMallocPhysical(&h, kChunk, &prop, 0) == ACL_SUCCESS, "malloc physical 2");
  Check(aclrtMapMem(va, kChunk, 0, h, 0) == ACL_SUCCESS, "map 2");
  Expect(HcclCommActivateCommMemory(second, va, kChunk, 0, h, 0), HCCL_SUCCESS,
         "activate on comm 2");
  Fill(va, 64, r.rank, 7);
  // Publish the address through the sync page: flags 8 + 2 * rank (low) and 9 + 2 * rank.
  const auto mine = reinterpret_cast<uintptr_t>(va);
  r.sync->flags[8 + 2 * r.rank].store(static_cast<uint32_t>(mine));
  r.sync->flags[9 + 2 * r.rank].store(static_cast<uint32_t>(mine >> 32));
  r.Barrier();
  const uintptr_t pb2 =
      r.sync->flags[8 + 2 * peer].load() | (uintptr_t{r.sync->flags[9 + 2 * peer].load()} << 32);
  Expect(hzc_comm_rdma_write(second, peer, va, reinterpret_cast<void *>(pb), 64), HCCL_E_PARA,
         "comm 2: write into peer memory activated on comm 1");
  Expect(hzc_comm_rdma_read(second, peer, va, reinterpret_cast<const void *>(pb), 64), HCCL_E_PARA,
         "comm 2: read from peer memory activated on comm 1");
  Expect(hzc_comm_rdma_write(second, peer, r.At(0), reinterpret_cast<void *>(pb2 + 128), 64),
         HCCL_E_PARA, "comm 2: write from local memory activated on comm 1");
  Expect(r.Write(peer, r.At(0), pb2 + 128, 64), HCCL_E_PARA,
         "comm 1: write into peer memory activated on comm 2");
  Expect(
      hzc_comm_rdma_write(second, peer, va, reinterpret_cast<void *>(pb2 + 128 + r.rank * 64), 64),
      HCCL_SUCCESS, "comm 2: write between memory activated on comm 2");
  r.Barrier();
  const std::string bad = Verify(static_cast<char *>(va) + 128 + peer * 64, 64, peer, 7);
  Check(bad.empty(), "what the peer wrote over comm 2: " + bad);
  r.Barrier();
  Expect(HcclCommDeactivateCommMemory(second, va), HCCL_SUCCESS, "deactivate on comm 2");
  Check(aclrtUnmapMem(va) == ACL_SUCCESS, "unmap 2");
  Check(aclrtFreePhysical(h) == ACL_SUCCESS, "free physical 2");
  Expect(HcclCommUnsetMemoryRange(second, va), HCCL_SUCCESS, "unset on comm 2");
  Check(aclrtReleaseMemAddress(va) == ACL_SUCCESS, "release 2");
  Expect(HcclCommDestroy(second), HCCL_SUCCESS, "destroy comm 2");
}

void Args(Rank &r, const HcclRootInfo &root2) {
  Check(r.nranks == 2, "args mode runs with 2 ranks");
  const uint32_t peer = 1 - r.rank;
  char byte = 0;
  const hzc_link_info before = LinkInfo(r.comm, "before set");
  Check(before.linked == 0 && before.rdma == 0, "linked or rdma set before the first set");
  Expect(r.Write(peer, &byte, 0x10000, 1), HCCL_E_UNAVAIL, "write before the first set");
  Expect(r.Read(peer, &byte, 0x10000, 1), HCCL_E_UNAVAIL, "read before the first set");
  hzc_link_info info{};
  Expect(hzc_comm_link_info(nullptr, &info), HCCL_E_PTR, "link info of a null comm");
  Expect(hzc_comm_link_info(r.comm, nullptr), HCCL_E_PTR, "link info into null");
  const auto foreign = reinterpret_cast<HcclComm>(uintptr_t{0x1234});
  Expect(hzc_comm_link_info(foreign, &info), HCCL_E_PARA, "link info of a foreign comm");

  r.Reserve(2 * kChunk);  // c0 activated, c1 reserved only
  r.Set();
  ExpectRdmaLinks(r.comm);
  r.Activate(0, kChunk);
  Fill(r.At(0), kChunk / 2, r.rank, 1);
  r.Barrier();
  const uintptr_t pb = r.Activations(peer, 1)[0].va;
  char *mine = r.At(0);
  std::vector<char> heap(kPage);
  struct Case {
    std::string what;
    HcclResult want;
    HcclComm comm;
    uint32_t rank;
    void *local;
    uintptr_t peer_va;
    size_t size;
  };
  const std::vector<Case> cases = {
      {"null comm", HCCL_E_PTR, nullptr, peer, mine, pb, 64},
      {"null local", HCCL_E_PTR, r.comm, peer, nullptr, pb, 64},
      {"null peer_va", HCCL_E_PTR, r.comm, peer, mine, 0, 64},
      {"foreign comm", HCCL_E_PARA, foreign, peer, mine, pb, 64},
      {"own rank", HCCL_E_PARA, r.comm, r.rank, mine, pb, 64},
      {"rank = rank size", HCCL_E_PARA, r.comm, r.nranks, mine, pb, 64},
      {"rank UINT32_MAX", HCCL_E_PARA, r.comm, UINT32_MAX, mine, pb, 64},
      {"size 0", HCCL_E_PARA, r.comm, peer, mine, pb, 0},
      {"size SIZE_MAX", HCCL_E_PARA, r.comm, peer, mine, pb, SIZE_MAX},
      {"local on the heap (not activated)", HCCL_E_PARA, r.comm, peer, heap.data(), pb, 64},
      {"local reserved but not activated", HCCL_E_PARA, r.comm, peer, r.At(kChunk), pb, 64},
      {"local past the end of its activation", HCCL_E_PARA, r.comm, peer, r.At(kChunk - 32), pb,
       64},
      {"peer range reserved but not activated", HCCL_E_PARA, r.comm, peer, mine, pb + kChunk, 64},
      {"peer range past the end of its activation", HCCL_E_PARA, r.comm, peer, mine,
       pb + kChunk - 32, 64},
      {"peer range before its activation", HCCL_E_PARA, r.comm, peer, mine, pb - 32, 64},
      {"peer address in no range", HCCL_E_PARA, r.comm, peer, mine, 0x10000, 64},
  };
  for (const Case &c : cases) {
    Expect(
        hzc_comm_rdma_write(c.comm, c.rank, c.local, reinterpret_cast<void *>(c.peer_va), c.size),
        c.want, "write, " + c.what);
    Expect(hzc_comm_rdma_read(c.comm, c.rank, c.local, reinterpret_cast<const void *>(c.peer_va),
                              c.size),
           c.want, "read, " + c.what);
  }
  // None of that broke the link or wrote anything: a good transfer still works.
  Check(Verify(mine, kChunk / 2, r.rank, 1).empty(), "own pattern changed by refused requests");
  Expect(r.Write(peer, mine, pb + kChunk / 2 + r.rank * 64, 64), HCCL_SUCCESS,
         "write after the refusals");
  r.Barrier();
  const std::string bad = Verify(mine + kChunk / 2 + peer * 64, 64, peer, 1);
  Check(bad.empty(), "what the peer wrote after the refusals: " + bad);
  Expect(r.Read(peer, mine + kChunk / 2 + 2 * 64, pb, 64), HCCL_SUCCESS, "read after the refusals");
  Check(Verify(mine + kChunk / 2 + 2 * 64, 64, peer, 1).empty(), "read after the refusals: data");
  r.Barrier();
  CrossComm(r, root2, pb);
  r.Barrier();
  const HcclComm destroyed = r.comm;
  r.Teardown();
  Expect(hzc_comm_link_info(destroyed, &info), HCCL_E_PARA, "link info of a destroyed comm");
  Expect(hzc_comm_rdma_write(destroyed, peer, &byte, reinterpret_cast<void *>(pb), 1), HCCL_E_PARA,
         "write on a destroyed comm");
  Expect(hzc_comm_rdma_read(destroyed, peer, &byte, reinterpret_cast<const void *>(pb), 1),
         HCCL_E_PARA, "read on a destroyed comm");
  ExpectNoLeftovers("after HcclCommDestroy");
}

// Each rank writes 64 bytes of its chunk into every peer at kChunk / 2 + rank * 64 (tag
// @tag) and checks what every peer wrote into it.
void Exchange(Rank &r, uint32_t tag, const std::vector<uint32_t> &peers, uint32_t barrier_n) {
  std::vector<uintptr_t> pb(r.nranks);
  Fill(r.At(0), 64, r.rank, tag);
  for (uint32_t p : peers) {
    pb[p] = r.Activations(p, 1)[0].va;
    Expect(r.Write(p, r.At(0), pb[p] + kChunk / 2 + r.rank * 64, 64), HCCL_SUCCESS,
           fmt::format("write to rank {}", p));
  }
  r.Barrier(barrier_n);
  for (uint32_t p : peers) {
    const std::string bad = Verify(r.At(kChunk / 2 + p * 64), 64, p, tag);
    Check(bad.empty(), fmt::format("what rank {} wrote: {}", p, bad));
  }
}

std::vector<uint32_t> Others(const Rank &r, uint32_t except) {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < r.nranks; ++p) {
    if (p != r.rank && p != except) {
      out.push_back(p);
    }
  }
  return out;
}

void Missing(Rank &r, uint32_t absent) {
  r.Reserve(kChunk);
  if (r.rank != absent) {
    // Ranks never arrive together: each waiting rank comes one second after the one before,
    // so the first to time out does so while the others still wait.
    std::this_thread::sleep_for(std::chrono::seconds(r.rank));
    const auto t0 = Clock::now();
    Expect(HcclCommSetMemoryRange(r.comm, r.base, r.reserved, 0, 0), HCCL_E_TIMEOUT,
           fmt::format("set without rank {}", absent));
    // Neither an early failure nor a much later one. The first rank waits its whole timeout;
    // a later one may fail when the first gives up (the domain breaks then), r seconds early.
    const char *env = std::getenv("HCCL_CONNECT_TIMEOUT");
    const double timeout = env != nullptr ? std::atof(env) : 120;
    const double earliest = timeout - 0.5 - (r.rank == 0 ? 0 : r.rank + 0.5);
    Check(Since(t0) >= earliest && Since(t0) < timeout + 30,
          fmt::format("the timeout took {:.1f} s (HCCL_CONNECT_TIMEOUT={}, want at least {:.1f} s)",
                      Since(t0), timeout, earliest));
    const hzc_link_info info = LinkInfo(r.comm, "after the timeout");
    Check(info.linked == 0 && info.rdma == 0, "linked after a failed set");
    ExpectNoLeftovers("after the failed set");
  }
  r.Barrier();
  // A retry starts afresh and meets the late rank.
  r.Set();
  ExpectRdmaLinks(r.comm);
  r.Activate(0, kChunk);
  r.Barrier();
  Exchange(r, 1, Others(r, r.rank), r.nranks);
  r.Barrier();
  r.Teardown();
  ExpectNoLeftovers("after HcclCommDestroy");
}

void Kill(Rank &r, uint32_t victim) {
  r.Reserve(kChunk);
  r.Set();
  ExpectRdmaLinks(r.comm);
  r.Activate(0, kChunk);
  r.Barrier();
  Exchange(r, 1, Others(r, r.rank), r.nranks);  // every link works, the victim's too
  // The victim's memory, learnt while it lives (afterwards its activations are HCCL_E_REMOTE).
  const uintptr_t victim_va = r.rank == victim ? 0 : r.Activations(victim, 1)[0].va;
  const uintptr_t other_va = r.rank == victim ? 0 : r.Activations(Others(r, victim)[0], 1)[0].va;
  r.Barrier();
  if (r.rank == victim) {
    r.sync->flags[1].store(1);  // links are up everywhere: kill me now
    for (;;) {
      pause();  // the launcher kills us
    }
  }
  Check(SharedSync::WaitFor([&] { return r.sync->flags[0].load() != 0; }, kTimeout),
        "the launcher did not report the victim's death");
  Mark("victim dead");
  // @what (e.g. "write 1 to") of the killed rank fails in time, and says how.
  auto expect_failed = [&](const std::string &what, auto transfer) {
    const auto t0 = Clock::now();
    const HcclResult st = transfer();
    Check(st == HCCL_E_REMOTE || st == HCCL_E_ROCE_TRANSFER,
          fmt::format("{} the killed rank: got {}, want HCCL_E_REMOTE or HCCL_E_ROCE_TRANSFER",
                      what, Code(st)));
    Check(Since(t0) < 30, fmt::format("{} the killed rank took {:.1f} s", what, Since(t0)));
    return fmt::format("failed after {:.2f} s: {}", Since(t0), Code(st));
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string how = expect_failed(fmt::format("write {} to", attempt + 1), [&] {
      return r.Write(victim, r.At(0), victim_va + kChunk / 2 + r.rank * 64, 64);
    });
    fmt::print(stderr, "rank {}: write {} to the killed rank {}\n", r.rank, attempt + 1, how);
    expect_failed(fmt::format("read {} from", attempt + 1),
                  [&] { return r.Read(victim, r.At(kChunk / 4), victim_va, 64); });
  }
  {
    // The domain broke with the death (DESIGN.md: a member that leaves breaks it): a transfer
    // to a surviving rank may still work or fail with HCCL_E_REMOTE, but it does not hang.
    const uint32_t other = Others(r, victim)[0];
    const auto t0 = Clock::now();
    const HcclResult st = r.Write(other, r.At(0), other_va + kChunk / 2 + r.rank * 64, 64);
    Check(st == HCCL_SUCCESS || st == HCCL_E_REMOTE,
          fmt::format("write to the surviving rank {}: got {}, want success or HCCL_E_REMOTE",
                      other, Code(st)));
    Check(Since(t0) < 30, fmt::format("write to the surviving rank took {:.1f} s", Since(t0)));
  }
  // The survivors tear down, locally and without waiting for anyone.
  r.Deactivate(0);
  Expect(HcclCommUnsetMemoryRange(r.comm, r.base), HCCL_SUCCESS, "unset");
  Check(aclrtReleaseMemAddress(r.base) == ACL_SUCCESS, "release");
  const auto t0 = Clock::now();
  Expect(HcclCommDestroy(r.comm), HCCL_SUCCESS, "destroy after a peer died");
  Check(Since(t0) < 20, fmt::format("HcclCommDestroy took {:.1f} s after a peer died", Since(t0)));
  ExpectNoLeftovers("after HcclCommDestroy");
}

void WrongDevice(Rank &r) {
  const char *dev = std::getenv("HZC_RDMA_DEVICE");
  r.Reserve(kChunk);
  const auto t0 = Clock::now();
  const HcclResult st = HcclCommSetMemoryRange(r.comm, r.base, r.reserved, 0, 0);
  const double took = Since(t0);
  if (dev != nullptr) {
    Expect(st, HCCL_E_NOT_FOUND, fmt::format("set with HZC_RDMA_DEVICE={}", dev));
  } else {
    Check(
        st != HCCL_SUCCESS && st != HCCL_E_TIMEOUT,
        fmt::format("set while a peer's device is wrong: got {}, want an early failure", Code(st)));
  }
  Check(took < 30, fmt::format("the failed set took {:.1f} s (HCCL_CONNECT_TIMEOUT=60)", took));
  const hzc_link_info info = LinkInfo(r.comm, "after the failed set");
  Check(info.linked == 0 && info.rdma == 0, "linked after a failed set");
  ExpectNoLeftovers("after the failed set");
  r.Barrier();
  Check(aclrtReleaseMemAddress(r.base) == ACL_SUCCESS, "release");
  Expect(HcclCommDestroy(r.comm), HCCL_SUCCESS, "destroy");
  ExpectNoLeftovers("after HcclCommDestroy");
}

void KernelOnly(Rank &r, const HcclRootInfo &root2) {
  Check(r.nranks == 2, "kernel mode runs with 2 ranks");
  const uint32_t peer = 1 - r.rank;
  r.Reserve(kChunk);
  r.Set();
  hzc_link_info info = LinkInfo(r.comm, "after set");
  Check(info.linked == 1 && info.rdma == 0 && info.device[0] == '\0',
        fmt::format("without an RDMA device: linked {} rdma {} device \"{:.64}\", want 1 0 \"\"",
                    info.linked, info.rdma, info.device));
  r.Activate(0, kChunk);
  Fill(r.At(0), kChunk / 2, r.rank, 1);
  r.Barrier();
  const uintptr_t pb = r.Activations(peer, 1)[0].va;
  Expect(r.Write(peer, r.At(0), pb + kChunk / 2, 64), HCCL_E_UNAVAIL,
         "rdma write on kernel-only links");
  Expect(r.Read(peer, r.At(kChunk / 2), pb, 64), HCCL_E_UNAVAIL, "rdma read on kernel-only links");
  void *p = nullptr;
  Expect(hzc_comm_peer_ptr(r.comm, peer, reinterpret_cast<void *>(pb), kChunk, &p), HCCL_SUCCESS,
         "peer ptr on kernel-only links");
  const std::string bad = Verify(p, kChunk / 2, peer, 1);
  Check(bad.empty(), "peer memory through the peer pointer: " + bad);
  Fill(static_cast<char *>(p) + kChunk / 2 + r.rank * 64, 64, r.rank, 2);
  r.Barrier();
  const std::string got = Verify(r.At(kChunk / 2 + peer * 64), 64, peer, 2);
  Check(got.empty(), "what the peer wrote through its peer pointer: " + got);
  r.Barrier();
  // A second communicator links kernel-only too (the INFO line is not repeated).
  HcclComm second = nullptr;
  Expect(HcclCommInitRootInfo(r.nranks, &root2, r.rank, &second), HCCL_SUCCESS,
         "init the second communicator");
  void *va = nullptr;
  Check(aclrtReserveMemAddress(&va, kChunk, 0, nullptr, 0) == ACL_SUCCESS, "reserve 2");
  Expect(HcclCommSetMemoryRange(second, va, kChunk, 0, 0), HCCL_SUCCESS, "set on the second comm");
  info = LinkInfo(second, "of the second comm");
  Check(info.linked == 1 && info.rdma == 0,
        fmt::format("second comm: linked {} rdma {}, want 1 0", info.linked, info.rdma));
  Expect(HcclCommUnsetMemoryRange(second, va), HCCL_SUCCESS, "unset on the second comm");
  Check(aclrtReleaseMemAddress(va) == ACL_SUCCESS, "release 2");
  Expect(HcclCommDestroy(second), HCCL_SUCCESS, "destroy the second comm");
  r.Barrier();
  r.Teardown();
}

}  // namespace

int main(int argc, char **argv) {
  HcclRootInfo root;
  if (argc < 6 || !ParseRoot(argv[2], &root)) {
    fmt::print(stderr, "usage: {} MODE ROOT_INFO_HEX NRANKS RANK SYNC_FD [ARG...]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  Rank r;
  r.nranks = static_cast<uint32_t>(std::atoi(argv[3]));
  r.rank = static_cast<uint32_t>(std::atoi(argv[4]));
  g_rank = r.rank;
  r.sync = SharedSync::Attach(std::atoi(argv[5]));
  Check(r.sync != nullptr, "cannot map the sync page");
  auto arg = [&](int i) -> const char * {
    if (argc <= 6 + i) {
      Fail(fmt::format("mode {} needs more arguments", mode));
    }
    return argv[6 + i];
  };
  g_sync = r.sync;
  Expect(HcclCommInitRootInfo(r.nranks, &root, r.rank, &r.comm), HCCL_SUCCESS, "init");
  Mark("init");
  if (mode == "data") {
    Data(r, std::strtoul(arg(0), nullptr, 0), std::atoi(arg(1)) != 0);
  } else if (mode == "mr") {
    Mr(r);
  } else if (mode == "args") {
    HcclRootInfo root2;
    Check(ParseRoot(arg(0), &root2), "bad second root info");
    Args(r, root2);
  } else if (mode == "missing") {
    Missing(r, static_cast<uint32_t>(std::atoi(arg(0))));
  } else if (mode == "kill") {
    Kill(r, static_cast<uint32_t>(std::atoi(arg(0))));
  } else if (mode == "wrongdev") {
    WrongDevice(r);
  } else if (mode == "kernel") {
    HcclRootInfo root2;
    Check(ParseRoot(arg(0), &root2), "bad second root info");
    KernelOnly(r, root2);
  } else {
    Fail("unknown mode " + mode);
  }
  Mark("done");
  fmt::print(stderr, "rank {}: seconds since start: {} (rdma resource show: {:.2f} s)\n", r.rank,
             g_timeline, g_tool_s);
}
