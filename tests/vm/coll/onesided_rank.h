// SPDX-License-Identifier: Apache-2.0
// What the one-sided scenarios of hzc-coll-rank share (onesided_span_rank.cpp,
// onesided_local_rank.cpp): the ranks' byte pattern, the check of a call's code and of bytes, and
// a window's first half cut in pieces for a batch.
#pragma once

#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
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

}  // namespace hzc::coll_rank::onesided
