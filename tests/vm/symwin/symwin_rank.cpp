// SPDX-License-Identifier: Apache-2.0
// One rank of the symmetric window tests (run as a process by symwin_vm_test.cpp), on memory
// that is reserved and mapped only (no memory range, no activation), as HCCL's programs do.
//
// Usage: hzc-symwin-rank ROOT_INFO_HEX NRANKS RANK SCENARIO
//   SCENARIO:
//     flow     a window over two adjacent mappings (registered with a size inside the second: the
//              window is both), found again with HcclCommSymWinGet; every rank writes its part
//              and reads and writes every peer's part through HcclSymWinGetPeerPointer; AllGather,
//              ReduceScatter, AllReduce, AlltoAll and Broadcast on buffers in the window (the test
//              checks from the debug log that they ran zero-copy), and an AllReduce from memory
//              activated the usual way (a range of its own) into the window; the window's memory
//              refused to the memory calls and to aclrtUnmapMem, aclrtFreePhysical under it
//              harmless; a second window; bad arguments of HcclCommSymWinGet,
//              HcclSymWinGetPeerPointer and HcclCommSymWinDeregister; deregistration
//     refuse   (2 ranks) every mismatch and bad argument fails on both ranks, with the bad rank's
//              own code: sizes, flags, null address and handle, size 0, unmapped memory, a size
//              above hcclSymWinMaxMemSizePerRank, mappings of different sizes; then deregistering
//              different windows, and a window in use (calls queued on a stream): HCCL_E_AGAIN on
//              that rank, HCCL_E_PARA on the other, nothing released; then both deregister;
//              then memory a window cannot have: an allocation freed before the registration,
//              memory inside a range set with HcclCommSetMemoryRange (activated or not)
//     servers  (2 ranks on two simulated servers) HCCL_E_NOT_SUPPORT on both
//     destroy  (2 ranks) HcclCommDestroy with a live window releases it: aclrtUnmapMem works
//     limit    (2 ranks) windows that together exceed hcclSymWinMaxMemSizePerRank fail on every
//              rank, and register after a deregistration; other communicators' do not count
//     free     every rank frees its window's allocations under the live window: peer pointers
//              and an AllGather still work, unmap and release wait for the deregistration
// Exit status: 0 success; 10 a check failed (the line is on stderr); 50+ setup failures.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_sym_win.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arena.h"
#include "mapped.h"
#include "rank_args.h"

namespace {

uint32_t g_rank = 0, g_n = 0;
HcclComm g_comm = nullptr;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "rank %u: line %d: %s failed\n", g_rank, __LINE__, #cond); \
      return 10;                                                                      \
    }                                                                                 \
  } while (0)

#define CHECK_EQ(got, want)                                                                     \
  do {                                                                                          \
    const long long got_ = static_cast<long long>(got);                                         \
    const long long want_ = static_cast<long long>(want);                                       \
    if (got_ != want_) {                                                                        \
      std::fprintf(stderr, "rank %u: line %d: %s is %lld, want %lld\n", g_rank, __LINE__, #got, \
                   got_, want_);                                                                \
      return 10;                                                                                \
    }                                                                                           \
  } while (0)

constexpr size_t kBlock = hzc::test::kMappedBlock;
using hzc::test::Mapped;

// A window over a block of @m, made here (a reservation of one block, mapped): the
// registration's result.
HcclResult OneBlockWindow(Mapped &m, HcclCommSymWindow *win) {
  if (!m.Make(1, 1)) {
    return HCCL_E_INTERNAL;
  }
  return HcclCommSymWinRegister(g_comm, m.va, kBlock, win, HCCL_WIN_COLL_SYMMETRIC);
}

// The collectives HCCL runs on windows, on buffers in @base (@stride bytes apart), checked.
int Collectives(char *base, size_t stride) {
  constexpr uint64_t kCount = 4096;  // int32 elements per rank: zero-copy sizes
  auto *in = reinterpret_cast<int32_t *>(base);
  auto *out = reinterpret_cast<int32_t *>(base + stride);
  for (uint64_t i = 0; i < kCount * g_n; ++i) {
    in[i] = static_cast<int32_t>(g_rank * 100000 + i);
  }
  CHECK_EQ(HcclAllGather(in, out, kCount, HCCL_DATA_TYPE_INT32, g_comm, nullptr), HCCL_SUCCESS);
  for (uint32_t r = 0; r < g_n; ++r) {
    CHECK_EQ(out[r * kCount + 7], r * 100000 + 7);
  }
  CHECK_EQ(HcclAllReduce(in, out, kCount, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, g_comm, nullptr),
           HCCL_SUCCESS);
  int64_t ranks = int64_t{g_n} * (g_n - 1) / 2;
  CHECK_EQ(out[9], ranks * 100000 + int64_t{g_n} * 9);
  for (uint64_t i = 0; i < kCount * g_n; ++i) {
    in[i] = static_cast<int32_t>(g_rank * 100000 + i);
  }
  CHECK_EQ(
      HcclReduceScatter(in, out, kCount, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, g_comm, nullptr),
      HCCL_SUCCESS);
  CHECK_EQ(out[3], ranks * 100000 + int64_t{g_n} * (g_rank * kCount + 3));
  for (uint64_t i = 0; i < kCount * g_n; ++i) {
    in[i] = static_cast<int32_t>(g_rank * 100000 + i);
  }
  CHECK_EQ(HcclAlltoAll(in, kCount, HCCL_DATA_TYPE_INT32, out, kCount, HCCL_DATA_TYPE_INT32, g_comm,
                        nullptr),
           HCCL_SUCCESS);
  for (uint32_t r = 0; r < g_n; ++r) {
    CHECK_EQ(out[r * kCount + 5], r * 100000 + g_rank * kCount + 5);
  }
  CHECK_EQ(HcclBroadcast(in, kCount, HCCL_DATA_TYPE_INT32, g_n - 1, g_comm, nullptr), HCCL_SUCCESS);
  CHECK_EQ(in[11], (g_n - 1) * 100000 + 11);
  return 0;
}

// Every rank writes its part, reads every peer's through its peer pointer and writes its
// mark into a slot of every peer's part.
int PeerPointers(HcclCommSymWindow win, char *own, size_t window) {
  constexpr size_t kSlots = 64 << 10;  // offset of the slots, one int64 per writer
  auto *mine = reinterpret_cast<int64_t *>(own);
  for (int i = 0; i < 64; ++i) {
    mine[i] = g_rank * 1000 + i;
  }
  CHECK_EQ(HcclBarrier(g_comm, nullptr), HCCL_SUCCESS);
  for (uint32_t p = 0; p < g_n; ++p) {
    void *at = nullptr;
    CHECK_EQ(HcclSymWinGetPeerPointer(win, 8, p, &at), HCCL_SUCCESS);
    CHECK(p != g_rank || at == own + 8);
    CHECK_EQ(static_cast<int64_t *>(at)[0], p * 1000 + 1);
    CHECK_EQ(HcclSymWinGetPeerPointer(win, kSlots + 8 * g_rank, p, &at), HCCL_SUCCESS);
    *static_cast<int64_t *>(at) = 7000 + g_rank * 10 + p;
  }
  CHECK_EQ(HcclBarrier(g_comm, nullptr), HCCL_SUCCESS);
  for (uint32_t w = 0; w < g_n; ++w) {
    CHECK_EQ(reinterpret_cast<int64_t *>(own + kSlots)[w], 7000 + w * 10 + g_rank);
  }
  void *at = nullptr;
  CHECK_EQ(HcclSymWinGetPeerPointer(win, window - 1, g_n - 1, &at), HCCL_SUCCESS);
  CHECK_EQ(HcclSymWinGetPeerPointer(win, window, 0, &at), HCCL_E_PARA);
  CHECK_EQ(HcclSymWinGetPeerPointer(win, 0, g_n, &at), HCCL_E_PARA);
  CHECK_EQ(HcclSymWinGetPeerPointer(win, 0, 0, nullptr), HCCL_E_PTR);
  CHECK_EQ(HcclSymWinGetPeerPointer(nullptr, 0, 0, &at), HCCL_E_PTR);
  int not_a_window = 0;
  CHECK_EQ(HcclSymWinGetPeerPointer(&not_a_window, 0, 0, &at), HCCL_E_PARA);
  return 0;
}

// The window's memory belongs to it: the memory calls and aclrtUnmapMem refuse it; freeing its
// allocation's handle is harmless (the mapping keeps the memory).
int Guards(const Mapped &m) {
  CHECK_EQ(HcclCommDeactivateCommMemory(g_comm, m.va), HCCL_E_PARA);
  CHECK_EQ(HcclCommUnsetMemoryRange(g_comm, m.va), HCCL_E_PARA);
  CHECK_EQ(HcclCommSetMemoryRange(g_comm, m.va, kBlock, 0, 0), HCCL_E_PARA);
  CHECK_EQ(aclrtUnmapMem(m.At(1)), ACL_ERROR_RT_PARAM_INVALID);
  CHECK_EQ(aclrtReleaseMemAddress(m.va), ACL_ERROR_RT_PARAM_INVALID);
  return 0;
}

int Flow() {
  Mapped m;
  CHECK(m.Make(2, 2));
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock + 4096, &win, HCCL_WIN_COLL_SYMMETRIC),
           HCCL_SUCCESS);
  HcclCommSymWindow found = nullptr;
  size_t offset = 0;
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.At(2) - 8, 8, &found, &offset), HCCL_SUCCESS);
  CHECK(found == win);
  CHECK_EQ(offset, 2 * kBlock - 8);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.At(2) - 8, 16, &found, &offset), HCCL_E_NOT_FOUND);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.va, 0, &found, &offset), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.At(1), SIZE_MAX, &found, &offset), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinGet(nullptr, m.va, 8, &found, &offset), HCCL_E_PTR);
  CHECK_EQ(HcclCommSymWinGet(g_comm, nullptr, 8, &found, &offset), HCCL_E_PTR);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.va, 8, nullptr, &offset), HCCL_E_PTR);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.va, 8, &found, nullptr), HCCL_E_PTR);
  CHECK_EQ(HcclCommSymWinDeregister(nullptr), HCCL_E_PTR);
  if (int rc = PeerPointers(win, m.At(0), 2 * kBlock); rc != 0) {
    return rc;
  }
  if (int rc = Guards(m); rc != 0) {
    return rc;
  }
  CHECK_EQ(aclrtFreePhysical(m.handles[1]), ACL_SUCCESS);
  m.handles[1] = nullptr;
  if (int rc = Collectives(m.At(0), kBlock / 2 / g_n * g_n); rc != 0) {
    return rc;
  }
  // A range activated the usual way beside the window: an AllReduce from it into the window.
  hzc::test::Arena arena(g_comm, 1 << 20, true);
  CHECK(arena.ok);
  auto *src = reinterpret_cast<int32_t *>(arena.base);
  auto *dst = reinterpret_cast<int32_t *>(m.At(1));
  for (int i = 0; i < 8192; ++i) {
    src[i] = static_cast<int32_t>(g_rank + i);
  }
  CHECK_EQ(HcclAllReduce(src, dst, 8192, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, g_comm, nullptr),
           HCCL_SUCCESS);
  CHECK_EQ(dst[100], g_n - 1 + 100);
  // A second window, deregistered first.
  Mapped m2;
  HcclCommSymWindow win2 = nullptr;
  CHECK_EQ(OneBlockWindow(m2, &win2), HCCL_SUCCESS);
  CHECK(win2 != win);
  CHECK_EQ(HcclCommSymWinDeregister(win2), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinGet(g_comm, m.va, 8, &found, &offset), HCCL_E_NOT_FOUND);
  void *at = nullptr;
  CHECK_EQ(HcclSymWinGetPeerPointer(win, 0, 0, &at), HCCL_E_PARA);
  CHECK_EQ(aclrtUnmapMem(m.At(1)), ACL_SUCCESS);  // no longer held
  m.is_mapped[1] = false;
  return 0;
}

// A window in use: rank 0 queues a call of @comm on a stream behind a call of @sub that waits
// for rank 1; its deregistration is HCCL_E_AGAIN, rank 1's HCCL_E_PARA; nothing is released.
int InUse(HcclComm sub, HcclCommSymWindow win, int32_t *buf) {
  aclrtStream stream = nullptr;
  CHECK_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  if (g_rank == 0) {
    CHECK_EQ(HcclBarrier(sub, stream), HCCL_SUCCESS);
    CHECK_EQ(HcclAllReduce(buf, buf, 16, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, g_comm, stream),
             HCCL_SUCCESS);
    CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_E_AGAIN);
  } else {
    CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_E_PARA);
    CHECK_EQ(HcclBarrier(sub, nullptr), HCCL_SUCCESS);
    CHECK_EQ(HcclAllReduce(buf, buf, 16, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, g_comm, nullptr),
             HCCL_SUCCESS);
  }
  CHECK_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  CHECK_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
  void *at = nullptr;
  CHECK_EQ(HcclSymWinGetPeerPointer(win, 0, 1 - g_rank, &at), HCCL_SUCCESS);  // still there
  return 0;
}

// Memory a window cannot have, HCCL_E_PARA on every rank: rank 0's allocation freed before the
// registration; memory inside a range set with HcclCommSetMemoryRange (a window sets its own),
// with and without an activation; the same memory registers once its range is unset.
int RefuseMemory() {
  Mapped m, r;
  CHECK(m.Make(1, 1));
  if (g_rank == 0) {
    CHECK_EQ(aclrtFreePhysical(m.handles[0]), ACL_SUCCESS);
    m.handles[0] = nullptr;
  }
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock, &win, 1), HCCL_E_PARA);
  CHECK(r.Make(1, 1));
  CHECK_EQ(HcclCommSetMemoryRange(g_comm, r.va, kBlock, 0, 0), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r.va, kBlock, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommActivateCommMemory(g_comm, r.va, kBlock, 0, r.handles[0], 0), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r.va, kBlock, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommDeactivateCommMemory(g_comm, r.va), HCCL_SUCCESS);
  CHECK_EQ(HcclCommUnsetMemoryRange(g_comm, r.va), HCCL_SUCCESS);
  CHECK(win == nullptr);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r.va, kBlock, &win, 1), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
  return 0;
}

int Refuse() {
  const bool r0 = g_rank == 0;
  Mapped m, uneven;
  CHECK(m.Make(2, 1));
  CHECK(uneven.Make(1, 1, r0 ? kBlock : 2 * kBlock));
  HcclCommSymWindow win = nullptr;
  // Sizes, flags, addresses, memory, limits: the bad rank's code, HCCL_E_PARA on the other.
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, r0 ? 4096 : 8192, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, 4096, &win, r0 ? 1 : 0),
           r0 ? HCCL_E_PARA : HCCL_E_NOT_SUPPORT);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, 4096, &win, r0 ? 1 : 2), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r0 ? nullptr : m.va, 4096, &win, 1),
           r0 ? HCCL_E_PTR : HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, 4096, r0 ? nullptr : &win, 1),
           r0 ? HCCL_E_PTR : HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, r0 ? 0 : 4096, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r0 ? m.va : m.At(1), 4096, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, uint64_t{2} << 30, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, uneven.va, 4096, &win, 1), HCCL_E_PARA);
  CHECK(win == nullptr);
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_SUCCESS);  // no failed call held it
  CHECK_EQ(aclrtMapMem(m.va, kBlock, 0, m.handles[0], 0), ACL_SUCCESS);
  // Then windows work; deregistering different windows fails on both, and so does one in use.
  Mapped m3;
  HcclCommSymWindow w1 = nullptr, w2 = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock, &w1, 1), HCCL_SUCCESS);
  CHECK_EQ(OneBlockWindow(m3, &w2), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(r0 ? w1 : w2), HCCL_E_PARA);
  HcclComm sub = nullptr;
  uint32_t ranks[] = {0, 1};
  CHECK_EQ(HcclCreateSubCommConfig(&g_comm, 2, ranks, 1, g_rank, nullptr, &sub), HCCL_SUCCESS);
  if (int rc = InUse(sub, w1, reinterpret_cast<int32_t *>(m3.va)); rc != 0) {
    return rc;
  }
  CHECK_EQ(HcclCommDestroy(sub), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(w1), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(w2), HCCL_SUCCESS);
  return RefuseMemory();
}

int Servers() {
  Mapped m;
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(OneBlockWindow(m, &win), HCCL_E_NOT_SUPPORT);
  return 0;
}

int Destroy() {
  Mapped m;
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(OneBlockWindow(m, &win), HCCL_SUCCESS);
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_ERROR_RT_PARAM_INVALID);
  CHECK_EQ(HcclCommDestroy(g_comm), HCCL_SUCCESS);
  g_comm = nullptr;
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_SUCCESS);
  m.is_mapped[0] = false;
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_E_PARA);
  return 0;
}

// hcclSymWinMaxMemSizePerRank (1 GB here) bounds the bytes of a rank's windows on a
// communicator together: beside a window of 1 GB (16 mappings of one 64 MB allocation) a second
// one fails on every rank, and registers once the first is deregistered; a window of another
// communicator does not count.
int Limit() {
  constexpr size_t kPiece = 64 << 20, kPieces = 16;
  Mapped big, small, other;
  CHECK(big.MakeAliased(kPieces, kPiece));
  HcclCommSymWindow a = nullptr, b = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, big.va, kPieces * kPiece, &a, 1), HCCL_SUCCESS);
  CHECK_EQ(OneBlockWindow(small, &b), HCCL_E_PARA);
  CHECK(b == nullptr);
  HcclComm sub = nullptr;
  uint32_t ranks[] = {0, 1};
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  config.hcclSymWinMaxMemSizePerRank = 1;  // GB: the 1 GB window above would fill it
  CHECK_EQ(HcclCreateSubCommConfig(&g_comm, 2, ranks, 1, g_rank, &config, &sub), HCCL_SUCCESS);
  CHECK(other.Make(1, 1));
  HcclCommSymWindow c = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(sub, other.va, kBlock, &c, 1), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(a), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, small.va, kBlock, &b, 1), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, big.va, kPieces * kPiece, &a, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinDeregister(b), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinDeregister(c), HCCL_SUCCESS);
  CHECK_EQ(HcclCommDestroy(sub), HCCL_SUCCESS);
  return 0;
}

// Every rank frees its window's allocations (aclrtFreePhysical) right after the registration:
// the mappings keep the memory, so peers still store and load through peer pointers and an
// AllGather on the window works; aclrtUnmapMem and aclrtReleaseMemAddress stay refused until
// the deregistration, after which both succeed.
int Free() {
  Mapped m;
  CHECK(m.Make(2, 2));
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, 2 * kBlock, &win, 1), HCCL_SUCCESS);
  for (aclrtDrvMemHandle &h : m.handles) {
    CHECK_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
    h = nullptr;
  }
  const uint32_t next = (g_rank + 1) % g_n;
  void *at = nullptr;
  CHECK_EQ(HcclSymWinGetPeerPointer(win, kBlock + 8, next, &at), HCCL_SUCCESS);
  *static_cast<int64_t *>(at) = 500 + g_rank;  // into the second block of the next rank
  CHECK_EQ(HcclBarrier(g_comm, nullptr), HCCL_SUCCESS);
  CHECK_EQ(*reinterpret_cast<int64_t *>(m.At(1) + 8), 500 + (g_rank + g_n - 1) % g_n);
  auto *in = reinterpret_cast<int32_t *>(m.At(0));
  auto *out = reinterpret_cast<int32_t *>(m.At(1) + 4096);
  in[0] = static_cast<int32_t>(g_rank + 1);
  CHECK_EQ(HcclAllGather(in, out, 1024, HCCL_DATA_TYPE_INT32, g_comm, nullptr), HCCL_SUCCESS);
  CHECK_EQ(out[1024 * (g_n - 1)], g_n);
  CHECK_EQ(aclrtUnmapMem(m.At(0)), ACL_ERROR_RT_PARAM_INVALID);
  CHECK_EQ(aclrtReleaseMemAddress(m.va), ACL_ERROR_RT_PARAM_INVALID);
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
  for (size_t i = 0; i < 2; ++i) {
    CHECK_EQ(aclrtUnmapMem(m.At(i)), ACL_SUCCESS);
    m.is_mapped[i] = false;
  }
  CHECK_EQ(aclrtReleaseMemAddress(m.va), ACL_SUCCESS);
  m.va = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  hzc::test::RankArgs args;
  if (!hzc::test::ParseRankArgs(argc, argv, 0, 0, &args)) {
    return 50;
  }
  g_n = args.nranks;
  g_rank = args.rank;
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  config.hcclSymWinMaxMemSizePerRank = 1;  // GB
  if (HcclCommInitRootInfoConfig(g_n, &args.root, g_rank, &config, &g_comm) != HCCL_SUCCESS) {
    return 54;
  }
  const int rc = hzc::test::RunScenario({{"flow", Flow},
                                         {"refuse", Refuse},
                                         {"servers", Servers},
                                         {"destroy", Destroy},
                                         {"limit", Limit},
                                         {"free", Free}},
                                        args.scenario, 55);
  return hzc::test::DestroyAfter(g_comm, rc, 56);
}
