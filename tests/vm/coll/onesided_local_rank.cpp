// SPDX-License-Identifier: Apache-2.0
// hzc-coll-rank's scenario of HCCL's one-sided calls among the ranks of one server (an even
// number of them, zero-copy: their windows lie in activated memory), through the peer transport:
//   onesidedlocal  rank r pairs with r ^ 1: registers a 1 MiB window and a 1 MiB source of its
//             arena for its pair, swaps the window's descriptor with it (twice: a second exchange
//             of the pair), enables it, writes its pattern into the first half of the pair's
//             window (HcclBatchPut, 16 transfers, now) and reads the second half, which the pair
//             filled itself (HcclBatchGet, on a stream); every byte is checked after a barrier.
//             Memory that is not activated cannot be registered (HCCL_E_NOT_SUPPORT); a write
//             past the enabled window, from memory not registered, after HcclDisableMemAccess,
//             and a second deregistration fail with their codes, and so do a deregistration and
//             a disable while a batch that uses them is queued. Then global memory: every
//             rank's window bound and HcclCommPrepare, each rank writes its pattern into its own
//             slot of every other rank's window, checked after a barrier; HcclCommDestroy is
//             refused while memory is bound. Last, the odd ranks deactivate their arena and the
//             even ranks' next write into it fails (HCCL_E_REMOTE), the communicator intact.
// Exit 63 when a byte or a code differs (the rank logs which).
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coll_rank.h"
#include "onesided_rank.h"

namespace hzc::coll_rank {
namespace {

using onesided::Check;
using onesided::EnableWindow;
using onesided::HeldWhileQueued;
using onesided::kPieces;
using onesided::kWindow;
using onesided::Pattern;
using onesided::Pieces;
using onesided::Want;

bool Barrier() {
  return Want("HcclBarrier", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS);
}

// The pair's transfers (window, source and back: three 1 MiB parts of the arena).
int Pairs(uint8_t *window, uint8_t *source, uint8_t *back) {
  const uint32_t pair = g_rank ^ 1;
  for (size_t i = 0; i < kWindow; ++i) {
    window[i] = i < kWindow / 2 ? 0 : Pattern(g_rank, i);
    source[i] = Pattern(g_rank, i);
    back[i] = 0;
  }
  std::vector<uint8_t> loose(kWindow);
  HcclMemDesc win{}, src{}, bk{}, none{};
  if (!Want("HcclRegisterMem of memory not activated",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_HOST, loose.data(), kWindow, &none),
            HCCL_E_NOT_SUPPORT) ||
      !Want("HcclRegisterMem window",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, window, kWindow, &win),
            HCCL_SUCCESS) ||
      !Want("HcclRegisterMem source",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, source, kWindow, &src),
            HCCL_SUCCESS) ||
      !Want("HcclRegisterMem back",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, back, kWindow, &bk),
            HCCL_SUCCESS)) {
    return 63;
  }
  HcclMemDesc theirs[2]{};
  HcclMemDescs local{&win, 1}, remote{theirs, 2}, nothing{&win, 0};
  uint32_t got = 0;
  if (!Want("HcclExchangeMemDesc of nothing",
            HcclExchangeMemDesc(g_comm, pair, &nothing, 0, &remote, &got), HCCL_SUCCESS) ||
      got != 0 ||
      !Want("HcclExchangeMemDesc", HcclExchangeMemDesc(g_comm, pair, &local, 0, &remote, &got),
            HCCL_SUCCESS) ||
      got != 1) {
    std::fprintf(stderr, "rank %u: HcclExchangeMemDesc: %u descriptors\n", g_rank, got);
    return 63;
  }
  uint8_t *const remote_window = EnableWindow(&theirs[0]);
  if (remote_window == nullptr) {
    return 63;
  }
  std::vector<HcclOneSideOpDesc> put = Pieces(source, remote_window);
  if (!Want("HcclBatchPut", HcclBatchPut(g_comm, pair, put.data(), kPieces, nullptr),
            HCCL_SUCCESS)) {
    return 63;
  }
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 63;
  }
  std::vector<HcclOneSideOpDesc> get = Pieces(back + kWindow / 2, remote_window + kWindow / 2);
  if (!Want("HcclBatchGet", HcclBatchGet(g_comm, pair, get.data(), kPieces, stream),
            HCCL_SUCCESS) ||
      aclrtSynchronizeStream(stream) != ACL_SUCCESS || aclrtDestroyStream(stream) != ACL_SUCCESS) {
    return 63;
  }
  if (int rc = Check("HcclBatchGet's bytes", back, kWindow / 2, kWindow, pair)) {
    return rc;
  }
  // Past the enabled window, from memory not registered, after disabling.
  HcclOneSideOpDesc past{source, remote_window + kWindow - 8, 16, HCCL_DATA_TYPE_INT8};
  HcclOneSideOpDesc unregistered{loose.data(), remote_window, 16, HCCL_DATA_TYPE_INT8};
  if (!Want("HcclBatchPut past the window", HcclBatchPut(g_comm, pair, &past, 1, nullptr),
            HCCL_E_PARA) ||
      !Want("HcclBatchPut from memory not registered",
            HcclBatchPut(g_comm, pair, &unregistered, 1, nullptr), HCCL_E_PARA) ||
      !Barrier()) {
    return 63;
  }
  if (int rc = Check("HcclBatchPut's bytes", window, 0, kWindow / 2, pair)) {
    return rc;
  }
  if (int rc = Check("the window's own half", window, kWindow / 2, kWindow, g_rank)) {
    return rc;
  }
  if (int rc = HeldWhileQueued(g_rank % 2 == 0, pair, &src, &theirs[0], put, remote_window, back,
                               window)) {
    return rc;
  }
  if (!Want("HcclDisableMemAccess", HcclDisableMemAccess(g_comm, &theirs[0]), HCCL_SUCCESS) ||
      !Want("HcclBatchPut after HcclDisableMemAccess",
            HcclBatchPut(g_comm, pair, put.data(), 1, nullptr), HCCL_E_PARA) ||
      !Want("HcclDeregisterMem window", HcclDeregisterMem(g_comm, &win), HCCL_SUCCESS) ||
      !Want("HcclDeregisterMem window again", HcclDeregisterMem(g_comm, &win), HCCL_E_NOT_FOUND) ||
      !Want("HcclDeregisterMem source", HcclDeregisterMem(g_comm, &src), HCCL_SUCCESS) ||
      !Want("HcclDeregisterMem back", HcclDeregisterMem(g_comm, &bk), HCCL_SUCCESS)) {
    return 63;
  }
  return Barrier() ? 0 : 63;
}

// Global memory: every rank's window bound and prepared; rank r writes slot r of every other
// rank's window (the windows lie at the same offset of every rank's arena: the program's own
// knowledge of the addresses, as HCCL's users share them).
int Global(uint8_t *window, uint8_t *source) {
  const size_t slot = kWindow / g_n;
  std::memset(window, 0, kWindow);
  for (size_t i = 0; i < kWindow; ++i) {
    source[i] = Pattern(g_rank, i);
  }
  HcclMem mem{HCCL_MEM_TYPE_DEVICE, window, kWindow}, src{HCCL_MEM_TYPE_DEVICE, source, kWindow};
  void *handle = nullptr, *src_handle = nullptr;
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  if (!Want("HcclRegisterGlobalMem", HcclRegisterGlobalMem(&mem, &handle), HCCL_SUCCESS) ||
      !Want("HcclRegisterGlobalMem source", HcclRegisterGlobalMem(&src, &src_handle),
            HCCL_SUCCESS) ||
      !Want("HcclCommBindMem", HcclCommBindMem(g_comm, handle), HCCL_SUCCESS) ||
      !Want("HcclCommBindMem source", HcclCommBindMem(g_comm, src_handle), HCCL_SUCCESS) ||
      !Want("HcclCommPrepare", HcclCommPrepare(g_comm, &config, 0), HCCL_SUCCESS)) {
    return 63;
  }
  // The others' windows are at the same address in their processes when the arenas are (each
  // rank's arena address is its own: exchange them).
  std::vector<uint64_t> at(g_n);
  uint64_t mine = reinterpret_cast<uint64_t>(window);
  if (!Want("HcclAllGather of the windows' addresses",
            HcclAllGather(&mine, at.data(), 8, HCCL_DATA_TYPE_INT8, g_comm, nullptr),
            HCCL_SUCCESS)) {
    return 63;
  }
  for (uint32_t p = 0; p < g_n; ++p) {
    if (p == g_rank) {
      continue;
    }
    HcclOneSideOpDesc op{source + g_rank * slot, reinterpret_cast<uint8_t *>(at[p]) + g_rank * slot,
                         slot, HCCL_DATA_TYPE_INT8};
    if (!Want("HcclBatchPut into global memory", HcclBatchPut(g_comm, p, &op, 1, nullptr),
              HCCL_SUCCESS)) {
      return 63;
    }
  }
  if (!Barrier()) {
    return 63;
  }
  for (uint32_t p = 0; p < g_n; ++p) {
    if (p != g_rank) {
      if (int rc = Check("global memory", window, p * slot, (p + 1) * slot, p)) {
        return rc;
      }
    }
  }
  if (!Want("HcclCommDestroy with bound memory", HcclCommDestroy(g_comm), HCCL_E_PARA) ||
      !Want("HcclCommUnbindMem", HcclCommUnbindMem(g_comm, handle), HCCL_SUCCESS) ||
      !Want("HcclCommUnbindMem source", HcclCommUnbindMem(g_comm, src_handle), HCCL_SUCCESS) ||
      !Want("HcclDeregisterGlobalMem", HcclDeregisterGlobalMem(handle), HCCL_SUCCESS) ||
      !Want("HcclDeregisterGlobalMem source", HcclDeregisterGlobalMem(src_handle), HCCL_SUCCESS)) {
    return 63;
  }
  return Barrier() ? 0 : 63;
}

// The window registered anew (its older registration, HcclCommPrepare's, went with
// HcclCommUnbindMem: the new one replaces it at the peer's enable); then the odd ranks
// deactivate their arena and the even ranks' next write into it fails.
int Revoked(Arena &arena, uint8_t *window, uint8_t *source) {
  const uint32_t pair = g_rank ^ 1;
  HcclMemDesc win{}, src{}, theirs{};
  HcclMemDescs local{&win, 1}, remote{&theirs, 1};
  uint32_t got = 0;
  HcclMem mem{};
  if (!Want("HcclRegisterMem window",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, window, kWindow, &win),
            HCCL_SUCCESS) ||
      !Want("HcclRegisterMem source",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, source, kWindow, &src),
            HCCL_SUCCESS) ||
      !Want("HcclExchangeMemDesc", HcclExchangeMemDesc(g_comm, pair, &local, 0, &remote, &got),
            HCCL_SUCCESS) ||
      !Want("HcclEnableMemAccess", HcclEnableMemAccess(g_comm, &theirs, &mem), HCCL_SUCCESS) ||
      !Barrier()) {
    return 63;
  }
  if (g_rank % 2 == 1 && !Want("HcclCommDeactivateCommMemory",
                               HcclCommDeactivateCommMemory(g_comm, arena.va), HCCL_SUCCESS)) {
    return 63;
  }
  if (!Barrier()) {
    return 63;
  }
  if (g_rank % 2 == 0) {
    HcclOneSideOpDesc op{source, mem.addr, 4096, HCCL_DATA_TYPE_INT8};
    if (!Want("HcclBatchPut into deactivated memory", HcclBatchPut(g_comm, pair, &op, 1, nullptr),
              HCCL_E_REMOTE)) {
      return 63;
    }
  }
  if (!Barrier()) {
    return 63;
  }
  if (g_rank % 2 == 1 &&
      !Want("HcclCommActivateCommMemory again",
            HcclCommActivateCommMemory(g_comm, arena.va, arena.size, 0, arena.handle, 0),
            HCCL_SUCCESS)) {
    return 63;
  }
  return Barrier() ? 0 : 63;
}

}  // namespace

int OneSidedLocalScenario(const std::string &scenario) {
  if (scenario != "onesidedlocal") {
    return -1;
  }
  if (g_per_server != 0 || g_n % 2 != 0 || !g_zero_copy) {
    return 51;
  }
  Arena arena(3 * kWindow, true);
  if (!arena.ok) {
    return 52;
  }
  uint8_t *window = arena.base, *source = arena.base + kWindow, *back = arena.base + 2 * kWindow;
  if (int rc = Pairs(window, source, back)) {
    return rc;
  }
  if (int rc = Global(window, source)) {
    return rc;
  }
  return Revoked(arena, window, source);
}

}  // namespace hzc::coll_rank
