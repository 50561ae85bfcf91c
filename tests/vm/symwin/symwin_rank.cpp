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
//              harmless; a second window; bad peer-pointer arguments; deregistration
//     refuse   (2 ranks) every mismatch and bad argument fails on both ranks, with the bad rank's
//              own code: sizes, flags, null address, unmapped memory, a size above
//              hcclSymWinMaxMemSizePerRank, mappings of different sizes; then deregistering
//              different windows, and a window in use (calls queued on a stream): HCCL_E_AGAIN on
//              that rank, HCCL_E_PARA on the other, nothing released; then both deregister
//     servers  (2 ranks on two simulated servers) HCCL_E_NOT_SUPPORT on both
//     destroy  (2 ranks) HcclCommDestroy with a live window releases it: aclrtUnmapMem works
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
#include "root_info_hex.h"

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

constexpr size_t kBlock = 256 << 10;

// A reservation of @n blocks of @block bytes with the first @mapped of them mapped (aclrtMapMem),
// each its own physical allocation: HCCL's symmetric-memory set-up.
struct Mapped {
  size_t block = kBlock;
  void *va = nullptr;
  std::vector<aclrtDrvMemHandle> handles;
  std::vector<bool> is_mapped;

  bool Make(size_t n, size_t mapped, size_t bytes = kBlock) {
    block = bytes;
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    if (aclrtReserveMemAddress(&va, n * block, 0, nullptr, 0) != ACL_SUCCESS) {
      return false;
    }
    for (size_t i = 0; i < mapped; ++i) {
      aclrtDrvMemHandle h = nullptr;
      if (aclrtMallocPhysical(&h, block, &prop, 0) != ACL_SUCCESS ||
          aclrtMapMem(At(i), block, 0, h, 0) != ACL_SUCCESS) {
        return false;
      }
      handles.push_back(h);
      is_mapped.push_back(true);
    }
    return true;
  }
  char *At(size_t i) const { return static_cast<char *>(va) + i * block; }
  ~Mapped() {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (is_mapped[i]) {
        aclrtUnmapMem(At(i));
      }
      if (handles[i] != nullptr) {
        aclrtFreePhysical(handles[i]);
      }
    }
    if (va != nullptr) {
      aclrtReleaseMemAddress(va);
    }
  }
};

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
  CHECK(m2.Make(1, 1));
  HcclCommSymWindow win2 = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m2.va, kBlock, &win2, HCCL_WIN_COLL_SYMMETRIC),
           HCCL_SUCCESS);
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
  CHECK_EQ(HcclCommSymWinRegister(g_comm, r0 ? m.va : m.At(1), 4096, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, uint64_t{2} << 30, &win, 1), HCCL_E_PARA);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, uneven.va, 4096, &win, 1), HCCL_E_PARA);
  CHECK(win == nullptr);
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_SUCCESS);  // no failed call held it
  CHECK_EQ(aclrtMapMem(m.va, kBlock, 0, m.handles[0], 0), ACL_SUCCESS);
  // Then windows work; deregistering different windows fails on both, and so does one in use.
  Mapped m3;
  CHECK(m3.Make(1, 1));
  HcclCommSymWindow w1 = nullptr, w2 = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock, &w1, 1), HCCL_SUCCESS);
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m3.va, kBlock, &w2, 1), HCCL_SUCCESS);
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
  return 0;
}

int Servers() {
  Mapped m;
  CHECK(m.Make(1, 1));
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock, &win, 1), HCCL_E_NOT_SUPPORT);
  return 0;
}

int Destroy() {
  Mapped m;
  CHECK(m.Make(1, 1));
  HcclCommSymWindow win = nullptr;
  CHECK_EQ(HcclCommSymWinRegister(g_comm, m.va, kBlock, &win, 1), HCCL_SUCCESS);
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_ERROR_RT_PARAM_INVALID);
  CHECK_EQ(HcclCommDestroy(g_comm), HCCL_SUCCESS);
  g_comm = nullptr;
  CHECK_EQ(aclrtUnmapMem(m.va), ACL_SUCCESS);
  m.is_mapped[0] = false;
  CHECK_EQ(HcclCommSymWinDeregister(win), HCCL_E_PARA);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 5 || std::strlen(argv[1]) != 2 * sizeof(HcclRootInfo)) {
    return 50;
  }
  HcclRootInfo root;
  if (!hzc::test::RootInfoFromHex(argv[1], &root)) {
    return 50;
  }
  g_n = static_cast<uint32_t>(std::atoi(argv[2]));
  g_rank = static_cast<uint32_t>(std::atoi(argv[3]));
  const std::string scenario = argv[4];
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  config.hcclSymWinMaxMemSizePerRank = 1;  // GB
  if (HcclCommInitRootInfoConfig(g_n, &root, g_rank, &config, &g_comm) != HCCL_SUCCESS) {
    return 54;
  }
  int rc = 55;
  if (scenario == "flow") {
    rc = Flow();
  } else if (scenario == "refuse") {
    rc = Refuse();
  } else if (scenario == "servers") {
    rc = Servers();
  } else if (scenario == "destroy") {
    rc = Destroy();
  }
  if (g_comm != nullptr && HcclCommDestroy(g_comm) != HCCL_SUCCESS && rc == 0) {
    rc = 56;
  }
  return rc;
}
