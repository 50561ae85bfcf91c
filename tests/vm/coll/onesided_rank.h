// SPDX-License-Identifier: Apache-2.0
// What the one-sided scenarios of hzc-coll-rank share (onesided_span_rank.cpp,
// onesided_local_rank.cpp): the ranks' byte pattern, the check of a call's code and of bytes, and
// a window's first half cut in pieces for a batch, and the check of what a queued batch holds.
#pragma once

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "coll_rank.h"

namespace hzc::coll_rank::onesided {

inline constexpr size_t kWindow = 1 << 20;
inline constexpr size_t kPieces = 16;

// Byte @i of rank @rank's pattern.
inline uint8_t Pattern(uint32_t rank, size_t i) {
  return static_cast<uint8_t>(rank * 37 + i * 7 + (i >> 12));
}

// Whether call @what returned @want (else logged).
inline bool Want(const char *what, HcclResult got, HcclResult want) {
  if (got != want) {
    std::fprintf(stderr, "rank %u: %s: %d, expected %d\n", g_rank, what, got, want);
    return false;
  }
  return true;
}

// 0 when bytes [from, to) of @buf are rank @rank's pattern, else 63 (the first wrong one logged).
inline int Check(const char *what, const uint8_t *buf, size_t from, size_t to, uint32_t rank) {
  for (size_t i = from; i < to; ++i) {
    if (buf[i] != Pattern(rank, i)) {
      std::fprintf(stderr, "rank %u: %s: byte %zu is %u, expected %u (rank %u's)\n", g_rank, what,
                   i, buf[i], Pattern(rank, i), rank);
      return 63;
    }
  }
  return 0;
}

// kPieces transfers that together move half a window from @local to @remote.
inline std::vector<HcclOneSideOpDesc> Pieces(uint8_t *local, uint8_t *remote) {
  std::vector<HcclOneSideOpDesc> ops;
  const size_t piece = kWindow / 2 / kPieces;
  for (size_t k = 0; k < kPieces; ++k) {
    ops.push_back({local + k * piece, remote + k * piece, piece, HCCL_DATA_TYPE_INT8});
  }
  return ops;
}

// Enable the peer's window @theirs (a second enable must fail) and return where it is, or null.
inline uint8_t *EnableWindow(HcclMemDesc *theirs) {
  HcclMem mem{};
  if (!Want("HcclEnableMemAccess", HcclEnableMemAccess(g_comm, theirs, &mem), HCCL_SUCCESS) ||
      !Want("HcclEnableMemAccess again", HcclEnableMemAccess(g_comm, theirs, &mem), HCCL_E_PARA)) {
    return nullptr;
  }
  if (mem.size != kWindow || mem.addr == nullptr) {
    std::fprintf(stderr, "rank %u: HcclEnableMemAccess: %lu bytes at %p\n", g_rank,
                 static_cast<unsigned long>(mem.size), mem.addr);
    return nullptr;
  }
  return static_cast<uint8_t *>(mem.addr);
}

// A batch of this rank that is still queued holds what it uses: until its stream ran it,
// deregistering its local span (@src) or disabling the pair's (@theirs) is HCCL_E_AGAIN and
// leaves both as they were. The ranks that @queue (one of each pair) queue a barrier and, behind
// it, a put of @ops[0] into the pair's window on a stream of their own; the pair joins the barrier
// only once told (a byte put into the last of its @window, from @back, once every rank checked its
// window), and both meet again once the put ran. 0, or 63 when a code differs.
inline int HeldWhileQueued(bool queue, uint32_t pair, HcclMemDesc *src, HcclMemDesc *theirs,
                           const std::vector<HcclOneSideOpDesc> &ops, uint8_t *remote_window,
                           uint8_t *back, uint8_t *window) {
  if (!Want("HcclBarrier after the checks", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS)) {
    return 63;
  }
  if (!queue) {
    const uint8_t told = Pattern(g_rank, kWindow - 1) ^ 0xff;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::atomic_ref<uint8_t>(window[kWindow - 1]).load(std::memory_order_acquire) != told) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "rank %u: rank %u never said its put was queued\n", g_rank, pair);
        return 63;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Want("HcclBarrier", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS) &&
                   Want("HcclBarrier after the queued put", HcclBarrier(g_comm, nullptr),
                        HCCL_SUCCESS)
               ? 0
               : 63;
  }
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 63;
  }
  back[0] = Pattern(pair, kWindow - 1) ^ 0xff;
  HcclOneSideOpDesc tell{back, remote_window + kWindow - 1, 1, HCCL_DATA_TYPE_INT8};
  HcclOneSideOpDesc queued = ops[0];
  const bool ok =
      Want("HcclBarrier on a stream", HcclBarrier(g_comm, stream), HCCL_SUCCESS) &&
      Want("HcclBatchPut on a stream behind it", HcclBatchPut(g_comm, pair, &queued, 1, stream),
           HCCL_SUCCESS) &&
      Want("HcclDeregisterMem of a queued batch's source", HcclDeregisterMem(g_comm, src),
           HCCL_E_AGAIN) &&
      Want("HcclDisableMemAccess of a queued batch's target", HcclDisableMemAccess(g_comm, theirs),
           HCCL_E_AGAIN) &&
      Want("HcclBatchPut telling the pair", HcclBatchPut(g_comm, pair, &tell, 1, nullptr),
           HCCL_SUCCESS) &&
      Want("aclrtSynchronizeStream of the queued put",
           static_cast<HcclResult>(aclrtSynchronizeStream(stream) == ACL_SUCCESS ? 0 : 4),
           HCCL_SUCCESS) &&
      Want("HcclBarrier after the queued put", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS);
  (void)aclrtDestroyStream(stream);
  return ok ? 0 : 63;
}

}  // namespace hzc::coll_rank::onesided
