// SPDX-License-Identifier: Apache-2.0
// One rank of the collective tests (run as a process by coll_vm_test.cpp).
//
// Usage: hzc-coll-rank ROOT_INFO_HEX|table:PATH NRANKS RANK SCENARIO MODE
//   table:PATH: HcclCommInitClusterInfo with the rank table at PATH instead of root info
//   MODE: staging (malloc'd buffers) or zerocopy (activated memory)
//   HZC_TEST_PER_SERVER=L: the ranks span servers, L consecutive ranks per server; the
//   references reduce each server's ranks first (the order of the hierarchical schedule), the
//   arena is set and activated through a sub-communicator of the server's ranks, and
//   HcclCommSetMemoryRange on the spanning communicator must be HCCL_E_NOT_SUPPORT (57).
//   SCENARIO:
//     matrix    every collective, type, op, in place or not, sizes from 1 element to ~3 MiB
//               (not multiples of the rank count), checked against a reference made here
//     edges     (HZC_INLINE_MAX=B set) the inline protocol's edges: every collective in int8,
//               fp32 and fp64 with inputs of B (and of 16, the arrival line's, 256, the bytes
//               beside it, and HZC_ZERO_COPY_MIN when set) bytes per rank less an element,
//               exactly B and an element more, in place or not; then
//               AllGatherVs where one rank's input is 16 bytes and another's 17 (inline), and
//               B and B + 1 (the call takes staging or zero-copy)
//     scale     AllReduce, ReduceScatter (fp32 sums), AllGather, Broadcast (int8) of 1, 1001 and
//               16384 elements, checked; prints the descriptors the rank has open
//     large     every collective once with 64 MiB buffers and an odd count, checked the same way
//               (across servers: 16 MiB but for AllReduce); Broadcast from the last rank
//     mismatch  calls that disagree across ranks fail with HCCL_E_PARA on every rank and leave
//               the bytes around the buffers alone (a small Broadcast whose ranks name
//               themselves root: the next call fails on every rank); a matching call afterwards
//               works
//     eager     small Broadcasts whose root does not wait, among calls that wait, from every
//               root; rank 0 the root of 2, then the last rank of 8, running ahead of the others;
//               then rank 0 runs 7 of them ahead of the others (86: it could not)
//     absent    the last rank never calls: the others get HCCL_E_TIMEOUT
//     die       rank 1 is killed before a call: the others get an error, quickly (in zerocopy
//               mode its buffer is activated memory)
//     refuse    after a first call, rank 1 passes an unknown dataType (refusenull: rank 2 a
//               null sendBuf) to an AllReduce the others make: it gets HCCL_E_PARA (HCCL_E_PTR)
//               and the others HCCL_E_PARA, quickly; then an AllReduce works on every rank
//               (75 if it does not)
//     refusefirst  the same as the communicator's first call: the others time out
//               (HCCL_CONNECT_TIMEOUT) opening the control area
//     xmatrix, xmismatch, xrefuse  the exchanges (Reduce, Scatter, AllGatherV, ...): see
//               exchange_rank.cpp
//     revoke    (zerocopy) rank 1 deactivates its input during a large AllGather: the readers
//               get HCCL_E_REMOTE and do not crash (58: the deactivation never came inside a
//               call in 10 attempts)
//     p2p       (across servers) point-to-point transfers between the servers: see
//               p2p_span_rank.cpp
//     subcomm   (across servers, 2 x 2 ranks) sub-communicators whose ranks span the servers:
//               see subcomm_span_rank.cpp
//     traffic   (across servers, a power of two of them) the bytes each rank moves between
//               servers per call, against the schedules: see traffic_span_rank.cpp
//     onesided  (two servers) HCCL's one-sided calls between pairs of ranks of the two
//               servers: see onesided_span_rank.cpp
//     cut       (across servers) after a first AllReduce this rank touches
//               $TMPDIR/hzc-span-ready-RANK and makes 4 MiB AllReduce calls until one fails,
//               as it must once the test takes a server's link down (or the server away): the
//               failure must be HCCL_E_ROCE_TRANSFER or HCCL_E_REMOTE, within
//               HCCL_EXEC_TIMEOUT; HcclCommDestroy must return within 10 s and leave no queue
//               pair or memory region of this process (76: no call failed within 180 s; 77:
//               destroy too slow; 78: verbs objects left; 74: the failure took too long)
//     cutp2p    (across servers) the same with HcclBatchSendRecv calls (4 MiB each way
//               between this rank and rank + L mod n, on the other server)
//     revokewrite  (zerocopy) the same during a large Broadcast from rank 0, which writes its
//               share of the buffer into rank 1's: the writer gets HCCL_E_REMOTE as well
// Exit status: 0 success; an HcclResult for an unexpected result; 60 wrong data; 61 bytes
// outside a buffer changed; 50+ setup failures. The scenarios absent/die/revoke/refuse* exit
// with the result of the decisive call (74: it took more than 5 s).
#include <acl/acl.h>
#include <dirent.h>
#include <hccl/hccl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "coll_rank.h"
#include "rdma_tool.h"
#include "reference.h"
#include "root_info_hex.h"

namespace hzc::coll_rank {

void Reference(HcclDataType type, HcclReduceOp op, const std::vector<const void *> &in, void *out,
               size_t count) {
  if (g_per_server == 0) {
    hzc::test::RefReduce(type, op, in, out, count);
    return;
  }
  const size_t es = hzc::test::RefTypeSize(type), servers = in.size() / g_per_server;
  std::vector<std::vector<uint8_t>> partial(servers, std::vector<uint8_t>(count * es));
  std::vector<const void *> parts;
  for (size_t s = 0; s < servers; ++s) {
    const std::vector<const void *> mine(in.begin() + s * g_per_server,
                                         in.begin() + (s + 1) * g_per_server);
    hzc::test::RefReduce(type, op, mine, partial[s].data(), count);
    parts.push_back(partial[s].data());
  }
  hzc::test::RefReduce(type, op, parts, out, count);
}

}  // namespace hzc::coll_rank

namespace {

using namespace hzc::coll_rank;

enum Kind { kAllGather, kBroadcast, kReduceScatter, kAllReduce };
const char *kKindNames[] = {"AllGather", "Broadcast", "ReduceScatter", "AllReduce"};

// Run one collective on @arena and check it; 0 or an exit status.
int RunOne(Arena &arena, Kind kind, HcclDataType type, HcclReduceOp op, uint64_t count,
           bool in_place, uint32_t root, uint64_t seed) {
  const size_t es = hzc::test::RefTypeSize(type), b = count * es, n = g_n, me = g_rank;
  const size_t send_bytes = kind == kReduceScatter ? n * b : b;
  const size_t recv_bytes = kind == kAllGather ? n * b : b;
  // Layout: guard | recv | guard | send | guard
  uint8_t *recv = arena.base + kGuard;
  uint8_t *send = recv + recv_bytes + kGuard;
  if (send + send_bytes + kGuard > arena.base + arena.size) {
    std::fprintf(stderr, "arena too small\n");
    return 51;
  }
  std::memset(arena.base, kGuardByte, send_bytes + recv_bytes + 3 * kGuard);
  // Inputs of every rank (for the reference), this rank's copied into place.
  std::vector<std::vector<uint8_t>> inputs(n, std::vector<uint8_t>(send_bytes));
  for (uint32_t p = 0; p < n; ++p) {
    hzc::test::FillInput(type, es, p, seed, inputs[p].data(), send_bytes / std::max<size_t>(es, 1));
    if (g_per_server != 0 && op == HCCL_REDUCE_PROD && type == HCCL_DATA_TYPE_FP32 &&
        (kind == kAllReduce || kind == kReduceScatter)) {
      // Across servers the leaders combine in the order of their algorithm (a tree, a ring):
      // factors of +-1/2, 1, 2 make every order's product exact.
      auto *f = reinterpret_cast<float *>(inputs[p].data());
      for (size_t i = 0; i < send_bytes / 4; ++i) {
        const float m = std::fabs(f[i]) < 0.3f ? 0.5f : std::fabs(f[i]) < 1.1f ? 1.0f : 2.0f;
        f[i] = std::signbit(f[i]) ? -m : m;
      }
    }
  }
  uint8_t *in = send;
  uint8_t *out = recv;
  if (in_place) {
    in = kind == kAllGather ? recv + me * b : kind == kReduceScatter ? send : recv;
    out = kind == kReduceScatter ? send + me * b : recv;
  }
  if (kind == kBroadcast) {
    if (me == root) {
      std::memcpy(recv, inputs[root].data(), b);
    }
  } else {
    std::memcpy(in, inputs[me].data(), send_bytes);
  }
  HcclResult r = HCCL_SUCCESS;
  switch (kind) {
    case kAllGather:
      r = HcclAllGather(in, recv, count, type, g_comm, nullptr);
      break;
    case kBroadcast:
      r = HcclBroadcast(recv, count, type, root, g_comm, nullptr);
      break;
    case kReduceScatter:
      r = HcclReduceScatter(in, out, count, type, op, g_comm, nullptr);
      break;
    case kAllReduce:
      r = HcclAllReduce(in, recv, count, type, op, g_comm, nullptr);
      break;
  }
  if (r != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %u: %s type %d op %d count %lu in_place %d: %s\n", g_rank,
                 kKindNames[kind], type, op, static_cast<unsigned long>(count), in_place,
                 HcclGetErrorString(r));
    return r;
  }
  std::vector<uint8_t> want(kind == kReduceScatter ? b : recv_bytes);
  std::vector<const void *> ptrs(n);
  switch (kind) {
    case kAllGather:
      for (uint32_t p = 0; p < n; ++p) {
        std::memcpy(want.data() + p * b, inputs[p].data(), b);
      }
      break;
    case kBroadcast:
      std::memcpy(want.data(), inputs[root].data(), b);
      break;
    case kReduceScatter:
      for (uint32_t p = 0; p < n; ++p) {
        ptrs[p] = inputs[p].data() + me * b;
      }
      Reference(type, op, ptrs, want.data(), count);
      break;
    case kAllReduce:
      for (uint32_t p = 0; p < n; ++p) {
        ptrs[p] = inputs[p].data();
      }
      Reference(type, op, ptrs, want.data(), count);
      break;
  }
  const uint8_t *got = kind == kReduceScatter ? out : recv;
  if (std::memcmp(got, want.data(), want.size()) != 0) {
    size_t i = 0;
    while (got[i] == want[i]) {
      ++i;
    }
    std::fprintf(stderr,
                 "rank %u: %s type %d op %d count %lu in_place %d: byte %zu is %#x, want %#x\n",
                 g_rank, kKindNames[kind], type, op, static_cast<unsigned long>(count), in_place, i,
                 got[i], want[i]);
    return 60;
  }
  // Bytes around the buffers (the buffers of this layout minus the ones the call may write).
  auto untouched = [](const uint8_t *p, size_t len) {
    for (size_t i = 0; i < len; ++i) {
      if (p[i] != kGuardByte) {
        return false;
      }
    }
    return true;
  };
  if (!untouched(arena.base, kGuard) || !untouched(recv + recv_bytes, kGuard) ||
      !untouched(send + send_bytes, kGuard)) {
    std::fprintf(stderr, "rank %u: %s wrote outside its buffers\n", g_rank, kKindNames[kind]);
    return 61;
  }
  return 0;
}

constexpr HcclDataType kReducible[] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_INT64,
    HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_FP64};
constexpr HcclDataType kMoved[] = {HCCL_DATA_TYPE_INT8,    HCCL_DATA_TYPE_FP16,
                                   HCCL_DATA_TYPE_FP32,    HCCL_DATA_TYPE_INT128,
                                   HCCL_DATA_TYPE_FP8E4M3, HCCL_DATA_TYPE_HIF8};
constexpr HcclReduceOp kOps[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                 HCCL_REDUCE_MIN};

// Many ranks: each collective at a few sizes (fp32 sums, int8 moved), checked; then a Barrier.
// Prints the descriptors this rank has open after its calls.
int Scale() {
  Arena arena(16 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint64_t seed = 9000;
  for (uint64_t count : {uint64_t{1}, uint64_t{1001}, uint64_t{16384}}) {
    for (Kind k : {kAllReduce, kReduceScatter, kAllGather, kBroadcast}) {
      const HcclDataType t =
          k == kAllGather || k == kBroadcast ? HCCL_DATA_TYPE_INT8 : HCCL_DATA_TYPE_FP32;
      if (int rc = RunOne(arena, k, t, HCCL_REDUCE_SUM, count, false, g_n - 1, ++seed)) {
        return rc;
      }
    }
  }
  size_t fds = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (const dirent *e = readdir(d)) {
      fds += e->d_name[0] != '.';
    }
    closedir(d);
  }
  std::fprintf(stderr, "rank %u: %zu descriptors open\n", g_rank, fds - 1);
  return HcclBarrier(g_comm, nullptr);
}

int Matrix() {
  Arena arena(16 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint64_t seed = 1;
  // Across servers each call costs the emulated guests' network round trips: counts 1 and
  // 1001 only there (7 is inside one server's tests).
  const std::vector<uint64_t> counts =
      g_per_server != 0 ? std::vector<uint64_t>{1, 1001} : std::vector<uint64_t>{1, 7, 1001};
  for (bool in_place : {false, true}) {
    for (uint64_t count : counts) {
      for (HcclDataType t : kMoved) {
        for (Kind k : {kAllGather, kBroadcast}) {
          ++seed;
          const auto root = static_cast<uint32_t>(seed % g_n);
          if (int rc = RunOne(arena, k, t, HCCL_REDUCE_SUM, count, in_place, root, seed)) {
            return rc;
          }
        }
      }
      for (HcclDataType t : kReducible) {
        for (HcclReduceOp op : kOps) {
          if (!AcrossServersCase(t, op)) {
            continue;
          }
          for (Kind k : {kReduceScatter, kAllReduce}) {
            if (int rc = RunOne(arena, k, t, op, count, in_place, 0, ++seed)) {
              return rc;
            }
          }
        }
      }
    }
    // Large, odd sizes: several staging chunks (the tests set HCCL_BUFFSIZE=1).
    struct Big {
      Kind kind;
      HcclDataType type;
      HcclReduceOp op;
      uint64_t bytes;
    };
    const std::vector<Big> bigs = {
        Big{kAllGather, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 3 << 19},
        Big{kBroadcast, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_SUM, 3 << 20},
        Big{kReduceScatter, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_MAX, 3 << 19},
        Big{kAllReduce, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 3 << 20},
        Big{kAllReduce, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_PROD, 5 << 18}};
    // The references of 8 ranks are costly in the guest: fewer large cases there.
    for (size_t i = 0; i < bigs.size(); ++i) {
      if (g_n > 4 && (in_place || i == 1 || i == 2 || i == 4)) {
        continue;
      }
      const Big &big = bigs[i];
      const size_t es = hzc::test::RefTypeSize(big.type);
      const uint64_t count = big.bytes / es / (big.kind == kAllGather ? g_n : 1) + 3;
      if (int rc = RunOne(arena, big.kind, big.type, big.op, count, in_place, g_n - 1, ++seed)) {
        return rc;
      }
    }
  }
  return HcclBarrier(g_comm, nullptr);
}

// An AllGatherV where rank 0 gives @bytes bytes, rank 1 @bytes + 1 and the others 1, checked.
int AllGatherVEdge(const Arena &arena, uint64_t bytes) {
  std::vector<uint64_t> counts(g_n, 1), displs(g_n);
  counts[0] = bytes;
  counts[1] = bytes + 1;
  for (uint32_t p = 1; p < g_n; ++p) {
    displs[p] = displs[p - 1] + counts[p - 1] + 3;  // gaps, left alone
  }
  const uint64_t total = displs[g_n - 1] + counts[g_n - 1];
  uint8_t *recv = arena.base, *send = arena.base + total + 64;
  std::memset(recv, 0xee, total);
  for (uint64_t i = 0; i < counts[g_rank]; ++i) {
    send[i] = static_cast<uint8_t>(g_rank * 31 + i);
  }
  if (HcclResult r = HcclAllGatherV(send, counts[g_rank], recv, counts.data(), displs.data(),
                                    HCCL_DATA_TYPE_INT8, g_comm, nullptr);
      r != HCCL_SUCCESS) {
    return r;
  }
  for (uint32_t p = 0; p < g_n; ++p) {
    for (uint64_t i = 0; i < counts[p]; ++i) {
      if (recv[displs[p] + i] != static_cast<uint8_t>(p * 31 + i)) {
        std::fprintf(stderr, "rank %u: AllGatherV: byte %lu of rank %u's block is wrong\n", g_rank,
                     static_cast<unsigned long>(i), p);
        return 60;
      }
    }
    if (p + 1 < g_n && recv[displs[p] + counts[p]] != 0xee) {
      return 61;
    }
  }
  return 0;
}

// The edges of the inline protocol (HZC_INLINE_MAX bytes per rank's input).
int Edges() {
  const char *limit_env = std::getenv("HZC_INLINE_MAX");
  const uint64_t limit = limit_env != nullptr ? std::strtoull(limit_env, nullptr, 10) : 0;
  if (limit == 0) {
    return 50;
  }
  Arena arena(4 * g_n * (limit + 4096) + (1 << 20), g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  // HZC_ZERO_COPY_MIN's edge too, when set (0: none, no edge).
  const char *zc_env = std::getenv("HZC_ZERO_COPY_MIN");
  const uint64_t zero_copy_min = zc_env != nullptr ? std::strtoull(zc_env, nullptr, 10) : 0;
  uint64_t seed = 9000;
  for (bool in_place : {false, true}) {
    for (HcclDataType t : {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP64}) {
      for (Kind k : {kAllGather, kBroadcast, kReduceScatter, kAllReduce}) {
        const uint64_t unit = hzc::test::RefTypeSize(t) * (k == kReduceScatter ? g_n : 1);
        // Every edge: the arrival line's 16 bytes, the 256 beside it and the inline region's
        // limit.
        for (uint64_t bytes : {uint64_t{16}, uint64_t{256}, zero_copy_min, limit}) {
          const uint64_t edge = bytes / unit;
          if (edge == 0) {
            continue;  // an element is more than the edge
          }
          for (uint64_t count : {edge - 1, edge, edge + 1}) {
            const uint32_t root = static_cast<uint32_t>(++seed % g_n);
            if (int rc = RunOne(arena, k, t, HCCL_REDUCE_SUM, count, in_place, root, seed)) {
              return rc;
            }
          }
        }
      }
    }
  }
  // AllGatherV: rank 0 gives 16 bytes (its arrival line), rank 1 17 (beside it), the others 1:
  // inline; then 256 and 257 (beside the line, the inline region); then rank 0 limit bytes and
  // rank 1 limit + 1: staging.
  for (uint64_t bytes : {uint64_t{16}, uint64_t{256}, limit}) {
    if (int rc = AllGatherVEdge(arena, bytes)) {
      return rc;
    }
  }
  return HcclBarrier(g_comm, nullptr);
}

// The top size of the tests: every collective once with 64 MiB buffers and an odd count,
// checked like the matrix.
int Large() {
  constexpr uint64_t kBytes = 64ul << 20;
  Arena arena(2 * kBytes + (1 << 20), g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  struct Call {
    Kind kind;
    HcclDataType type;
    HcclReduceOp op;
  };
  const Call calls[] = {{kAllGather, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM},
                        {kBroadcast, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM},
                        {kReduceScatter, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM},
                        {kAllReduce, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM}};
  uint64_t seed = 7000;
  for (const Call &c : calls) {
    const size_t es = hzc::test::RefTypeSize(c.type);
    const bool per_rank = c.kind == kAllGather || c.kind == kReduceScatter;
    // Across servers the emulated wire moves a few MB/s: 64 MiB for AllReduce, 16 for the rest.
    const uint64_t bytes = g_per_server != 0 && c.kind != kAllReduce ? kBytes / 4 : kBytes;
    const uint64_t count = bytes / es / (per_rank ? g_n : 1) - 3;
    // Broadcast from the last rank (across servers: the last server's).
    if (int rc = RunOne(arena, c.kind, c.type, c.op, count, false, g_n - 1, ++seed)) {
      return rc;
    }
  }
  return HcclBarrier(g_comm, nullptr);
}

int Mismatch() {
  Arena arena(1 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint8_t *buf = arena.base;
  std::memset(buf, kGuardByte, 1 << 20);
  // Counts differ (rank 0 asks for more than the others provide).
  const uint64_t count = g_rank == 0 ? 4096 : 1024;
  HcclResult r = HcclAllGather(buf, buf + 65536, count, HCCL_DATA_TYPE_INT8, g_comm, nullptr);
  if (r != HCCL_E_PARA) {
    return r == HCCL_SUCCESS ? 70 : r;
  }
  for (size_t i = 0; i < (1 << 20); ++i) {
    if (buf[i] != kGuardByte) {
      return 61;
    }
  }
  // Roots differ (a Broadcast too large for its root to return at once); types differ;
  // collectives differ.
  r = HcclBroadcast(buf, 257, HCCL_DATA_TYPE_INT8, g_rank == 0 ? 0 : 1, g_comm, nullptr);
  if (r != HCCL_E_PARA) {
    return r == HCCL_SUCCESS ? 71 : r;
  }
  r = HcclAllReduce(buf, buf, 16, g_rank == 0 ? HCCL_DATA_TYPE_FP32 : HCCL_DATA_TYPE_INT32,
                    HCCL_REDUCE_SUM, g_comm, nullptr);
  if (r != HCCL_E_PARA) {
    return r == HCCL_SUCCESS ? 72 : r;
  }
  r = g_rank == 0
          ? HcclBarrier(g_comm, nullptr)
          : HcclAllReduce(buf, buf, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr);
  if (r != HCCL_E_PARA) {
    return r == HCCL_SUCCESS ? 73 : r;
  }
  // Roots differ on a Broadcast whose root does not wait (16 bytes fit its arrival line): ranks
  // 0 and 1 both name themselves root and return at once, the others fail it; ranks 0 and 1
  // learn of it at their next call, which fails on every rank (inside one server: across
  // servers, and with HZC_INLINE_MAX=0, every root waits).
  const char *inline_max = std::getenv("HZC_INLINE_MAX");
  if (g_per_server == 0 && (inline_max == nullptr || std::string(inline_max) != "0")) {
    r = HcclBroadcast(buf, 16, HCCL_DATA_TYPE_INT8, g_rank == 0 ? 0 : 1, g_comm, nullptr);
    if (r != (g_rank <= 1 ? HCCL_SUCCESS : HCCL_E_PARA)) {
      return r == HCCL_SUCCESS ? 79 : r;
    }
    r = HcclAllReduce(buf, buf, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr);
    if (r != HCCL_E_PARA) {
      return r == HCCL_SUCCESS ? 79 : r;
    }
  }
  // The communicator still works.
  return RunOne(arena, kAllReduce, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1000, false, 0, 99);
}

// Rank 0 makes 7 small Broadcasts (coll/control.h's kLineDepth - 1) before the others come:
// they wait for the file it writes after them (86 if it never comes: the root waited); then 16
// in all, each checked.
int RunAhead(Arena &arena, uint64_t seed) {
  const char *tmp = std::getenv("TMPDIR");
  const std::string flag =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/hzc-eager-" + std::to_string(getppid());
  if (g_rank == 0) {
    unlink(flag.c_str());
  }
  if (HcclResult r = HcclBarrier(g_comm, nullptr); r != HCCL_SUCCESS) {
    return r;
  }
  int rc = 0;
  if (g_rank != 0) {
    for (int i = 0; i < 2000 && access(flag.c_str(), F_OK) != 0; ++i) {
      usleep(10000);
    }
    rc = access(flag.c_str(), F_OK) == 0 ? 0 : 86;
  }
  for (int i = 0; i < 16; ++i) {  // 16 bytes (the arrival line), 256 (beside it), in turn
    if (int e = RunOne(arena, kBroadcast, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, i % 2 ? 32 : 2,
                       false, 0, seed + i)) {
      return e;
    }
    if (g_rank == 0 && i == 6) {
      FILE *f = std::fopen(flag.c_str(), "w");
      if (f != nullptr) {
        std::fclose(f);
      }
    }
  }
  if (HcclResult r = HcclBarrier(g_comm, nullptr); r != HCCL_SUCCESS) {
    return r;
  }
  if (g_rank == 0) {
    unlink(flag.c_str());
  }
  return rc;
}

// Rank 0 is the root of 2 small Broadcasts, then the last rank of 8 while the others sleep: it
// runs as far ahead as it may and reuses the line of rank 0's first call before rank 0, which
// had returned at once from both, looks at it. A reused line is no disagreement (rank 0's next
// call failed with HCCL_E_PARA here once). Three rounds, every output checked.
int TurnAhead(Arena &arena, uint64_t seed) {
  const uint32_t last = g_n - 1;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      if (i == 2 && g_rank != last) {
        usleep(20000);  // the last rank's run goes ahead meanwhile
      }
      if (int rc = RunOne(arena, kBroadcast, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, 1, false,
                          i < 2 ? 0 : last, seed + i)) {
        return rc;
      }
    }
    seed += 10;
  }
  return HcclBarrier(g_comm, nullptr);
}

// Small Broadcasts whose root does not wait (3, 8, 16, 200 and 256 bytes), runs of them from each
// root in turn among calls that wait (an inline AllGather of 2 KiB per rank, an in-place AllReduce,
// a Barrier, a 1 MiB Broadcast), every output checked; then RunAhead.
int Eager() {
  Arena arena(4 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint64_t seed = 500;
  for (int round = 0; round < 2; ++round) {
    for (uint32_t root = 0; root < g_n; ++root) {
      for (int i = 0; i < 20; ++i) {
        const bool bytes = i % 3 == 0;
        const uint64_t count = i % 5 == 4 ? (i % 10 == 4 ? 25 : 32) : bytes ? 3 : 1 + i % 2;
        if (int rc = RunOne(arena, kBroadcast, bytes ? HCCL_DATA_TYPE_INT8 : HCCL_DATA_TYPE_INT64,
                            HCCL_REDUCE_SUM, count, false, root, ++seed)) {
          return rc;
        }
      }
      if (int rc = RunOne(arena, kAllGather, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 2048, false, 0,
                          ++seed)) {
        return rc;
      }
      if (int rc =
              RunOne(arena, kAllReduce, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 4, true, 0, ++seed)) {
        return rc;
      }
      if (HcclResult r = HcclBarrier(g_comm, nullptr); r != HCCL_SUCCESS) {
        return r;
      }
      if (int rc = RunOne(arena, kBroadcast, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, (1 << 18) + 1,
                          false, (root + 1) % g_n, ++seed)) {
        return rc;
      }
    }
  }
  if (int rc = TurnAhead(arena, seed)) {
    return rc;
  }
  return RunAhead(arena, seed + 100);
}

int Absent() {
  if (HcclBarrier(g_comm, nullptr) != HCCL_SUCCESS) {  // the control area exists
    return 53;
  }
  if (g_rank == g_n - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // never calls
    return 0;
  }
  float x = 1;
  return HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr);
}

int Die() {
  Arena arena(4096, g_zero_copy);  // activated memory in zerocopy mode: the peers map it
  if (!arena.ok) {
    return 52;
  }
  float &x = *reinterpret_cast<float *>(arena.base);
  x = 1;
  if (HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr) !=
      HCCL_SUCCESS) {
    return 53;
  }
  if (g_rank == 1) {
    raise(SIGKILL);
  }
  const auto start = std::chrono::steady_clock::now();
  const HcclResult r =
      HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::fprintf(stderr, "rank %u: error after %lld ms\n", g_rank, static_cast<long long>(ms));
  return ms > 5000 ? 74 : r;
}

// The AllReduce every rank makes, rank @bad with a bad argument (@null_buffer: sendBuf NULL,
// else an unknown dataType), after a Barrier when @after_a_call; its result (74 if it took
// more than 5 s).
int Refuse(uint32_t bad, bool null_buffer, bool after_a_call) {
  if (after_a_call && HcclBarrier(g_comm, nullptr) != HCCL_SUCCESS) {  // the control area exists
    return 53;
  }
  float x = 1;
  const bool me = g_rank == bad;
  const auto start = std::chrono::steady_clock::now();
  const HcclResult r =
      HcclAllReduce(me && null_buffer ? nullptr : &x, &x, 1,
                    me && !null_buffer ? static_cast<HcclDataType>(99) : HCCL_DATA_TYPE_FP32,
                    HCCL_REDUCE_SUM, g_comm, nullptr);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::fprintf(stderr, "rank %u: result %d after %lld ms\n", g_rank, r, static_cast<long long>(ms));
  if (!after_a_call) {
    return r;
  }
  if (ms > 5000) {
    return 74;
  }
  float sum = static_cast<float>(g_rank + 1);
  if (HcclAllReduce(&sum, &sum, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm, nullptr) !=
          HCCL_SUCCESS ||
      sum != static_cast<float>(g_n * (g_n + 1) / 2)) {
    return 75;
  }
  return r;
}

// @write: the call is a Broadcast from rank 0, whose share of the copy is a write into rank 1's
// buffer; else an AllGather, whose readers read rank 1's input.
int Revoke(bool write) {
  const size_t count = 16 << 20;
  Arena arena(count * (g_n + 1) + 4096, true);
  if (!arena.ok) {
    return 52;
  }
  std::memset(arena.base, 1, arena.size);
  // The deactivation has to land inside a call that chose zero-copy; one that lands before
  // a call turns it and the rest into staging calls, which succeed. Then try again.
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (attempt > 0 && g_rank == 1 &&
        HcclCommActivateCommMemory(g_comm, arena.va, arena.size, 0, arena.handle, 0) !=
            HCCL_SUCCESS) {
      return 57;
    }
    if (HcclBarrier(g_comm, nullptr) != HCCL_SUCCESS) {
      return 53;
    }
    std::atomic<bool> calling{false};
    std::thread revoker;
    if (g_rank == 1) {
      revoker = std::thread([&] {
        while (!calling.load()) {
          std::this_thread::yield();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        HcclCommDeactivateCommMemory(g_comm, arena.va);
      });
    }
    HcclResult r = HCCL_SUCCESS;
    for (int i = 0; i < 20 && r == HCCL_SUCCESS; ++i) {
      calling.store(true);
      r = write ? HcclBroadcast(arena.base, count * g_n, HCCL_DATA_TYPE_INT8, 0, g_comm, nullptr)
                : HcclAllGather(arena.base, arena.base + count, count, HCCL_DATA_TYPE_INT8, g_comm,
                                nullptr);
    }
    if (revoker.joinable()) {
      revoker.join();
    }
    if (r != HCCL_SUCCESS) {
      return r;
    }
    std::fprintf(stderr, "rank %u: attempt %d: the deactivation came between calls\n", g_rank,
                 attempt);
  }
  return 58;
}

// The communicator from root info (hex) or a rank table ("table:PATH"); 0 or an exit status.
int Init(const char *how) {
  if (std::strncmp(how, "table:", 6) == 0) {
    return HcclCommInitClusterInfo(how + 6, g_rank, &g_comm) == HCCL_SUCCESS ? 0 : 54;
  }
  HcclRootInfo root;
  if (!hzc::test::RootInfoFromHex(how, &root)) {
    return 50;
  }
  return HcclCommInitRootInfo(g_n, &root, g_rank, &g_comm) == HCCL_SUCCESS ? 0 : 54;
}

// Across servers: the spanning communicator refuses memory ranges; this server's ranks get a
// sub-communicator that sets them. 0 or an exit status.
int JoinServer() {
  const char *per = std::getenv("HZC_TEST_PER_SERVER");
  g_per_server = per != nullptr ? static_cast<uint32_t>(std::atoi(per)) : 0;
  if (g_per_server == 0) {
    return 0;
  }
  void *va = nullptr;
  if (aclrtReserveMemAddress(&va, 2 << 20, 0, nullptr, 0) != ACL_SUCCESS) {
    return 52;
  }
  const HcclResult set = HcclCommSetMemoryRange(g_comm, va, 2 << 20, 0, 0);
  aclrtReleaseMemAddress(va);
  if (set != HCCL_E_NOT_SUPPORT) {
    std::fprintf(stderr, "rank %u: HcclCommSetMemoryRange on the spanning communicator: %d\n",
                 g_rank, set);
    return 57;
  }
  std::vector<uint32_t> ranks;
  const uint32_t first = g_rank / g_per_server * g_per_server;
  for (uint32_t r = first; r < first + g_per_server; ++r) {
    ranks.push_back(r);
  }
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  return HcclCreateSubCommConfig(&g_comm, g_per_server, ranks.data(), 1, g_rank - first, &config,
                                 &g_server_comm) == HCCL_SUCCESS
             ? 0
             : 54;
}

int Cut(bool p2p) {
  Arena arena(8 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  const uint64_t count = (4 << 20) / sizeof(float);
  auto *buf = reinterpret_cast<float *>(arena.base);
  std::fill(buf, buf + 2 * count, 1.0f);
  // p2p: this rank and its partner on the other server send each other 4 MiB at once.
  const uint32_t partner = (g_rank + g_per_server) % g_n;
  HcclSendRecvItem items[] = {
      {HCCL_SEND, buf, count, HCCL_DATA_TYPE_FP32, partner},
      {HCCL_RECV, buf + count, count, HCCL_DATA_TYPE_FP32, partner},
  };
  auto call = [&] {
    return p2p ? HcclBatchSendRecv(items, 2, g_comm, nullptr)
               : HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm,
                               nullptr);
  };
  return FailUntilCut(
      call,
      [](HcclResult r) {
        return r == HCCL_E_ROCE_TRANSFER || r == HCCL_E_TCP_TRANSFER || r == HCCL_E_REMOTE;
      },
      [] { return 0; });
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 6) {
    return 50;
  }
  g_n = static_cast<uint32_t>(std::atoi(argv[2]));
  g_rank = static_cast<uint32_t>(std::atoi(argv[3]));
  const std::string scenario = argv[4];
  g_zero_copy = std::string(argv[5]) == "zerocopy";
  // HZC_TEST_NET_BY_SERVER=A,B,...: the ranks of server s ask for the s-th kind of link
  // (HZC_NET), read by the library at its first call, below.
  const char *by_server = std::getenv("HZC_TEST_NET_BY_SERVER");
  const char *per_server = std::getenv("HZC_TEST_PER_SERVER");
  if (by_server != nullptr && per_server != nullptr && std::atoi(per_server) > 0) {
    std::vector<std::string> nets;
    std::stringstream list(by_server);
    for (std::string net; std::getline(list, net, ',');) {
      nets.push_back(net);
    }
    const uint32_t server = g_rank / static_cast<uint32_t>(std::atoi(per_server));
    if (server < nets.size()) {
      setenv("HZC_NET", nets[server].c_str(), 1);
    }
  }
  if (int rc = Init(argv[1]); rc != 0) {
    return rc;
  }
  if (int rc = JoinServer(); rc != 0) {
    return rc;
  }
  int rc = 55;
  if (scenario == "matrix") {
    rc = Matrix();
  } else if (scenario == "scale") {
    rc = Scale();
  } else if (scenario == "large") {
    rc = Large();
  } else if (scenario == "edges") {
    rc = Edges();
  } else if (scenario == "mismatch") {
    rc = Mismatch();
  } else if (scenario == "eager") {
    rc = Eager();
  } else if (scenario == "absent") {
    rc = Absent();
  } else if (scenario == "die") {
    rc = Die();
  } else if (scenario == "revoke" || scenario == "revokewrite") {
    rc = Revoke(scenario == "revokewrite");
  } else if (scenario == "refuse") {
    rc = Refuse(1, false, true);
  } else if (scenario == "refusenull") {
    rc = Refuse(2, true, true);
  } else if (scenario == "refusefirst") {
    rc = Refuse(1, false, false);
  } else if (int p = P2pScenario(scenario); p >= 0) {
    rc = p;
  } else if (int s = SubcommScenario(scenario); s >= 0) {
    rc = s;
  } else if (int t = TrafficScenario(scenario); t >= 0) {
    rc = t;
  } else if (int o = OneSidedScenario(scenario); o >= 0) {
    rc = o;
  } else if (int l = OneSidedLocalScenario(scenario); l >= 0) {
    rc = l;
  } else if (scenario == "cut" || scenario == "cutp2p") {
    rc = Cut(scenario == "cutp2p");
  } else if (int x = ExchangeScenario(scenario); x >= 0) {
    rc = x;
  }
  if (scenario != "die" && scenario != "absent" && scenario.rfind("revoke", 0) != 0 &&
      scenario != "refusefirst" && scenario.rfind("cut", 0) != 0 && scenario != "subcomm" &&
      HcclCommDestroy(g_comm) != HCCL_SUCCESS && rc == 0) {
    rc = 56;
  }
  if (g_server_comm != nullptr && HcclCommDestroy(g_server_comm) != HCCL_SUCCESS && rc == 0) {
    rc = 56;
  }
  return rc;
}

namespace hzc::coll_rank {

int FailUntilCut(const std::function<HcclResult()> &call,
                 const std::function<bool(HcclResult)> &allowed,
                 const std::function<int()> &after) {
  if (call() != HCCL_SUCCESS) {
    return 53;
  }
  const char *tmp = std::getenv("TMPDIR");
  const std::string ready =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/hzc-span-ready-" + std::to_string(g_rank);
  std::fclose(std::fopen(ready.c_str(), "w"));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  HcclResult r = HCCL_SUCCESS;
  auto start = std::chrono::steady_clock::now();
  while (r == HCCL_SUCCESS && std::chrono::steady_clock::now() < give_up) {
    start = std::chrono::steady_clock::now();
    r = call();
  }
  const auto seconds = [](auto since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 since)
               .count() /
           1000.0;
  };
  const double failed_after = seconds(start);
  std::fprintf(stderr, "rank %u: the call failed with %d after %.1f s\n", g_rank, r, failed_after);
  if (r == HCCL_SUCCESS) {
    return 76;
  }
  if (!allowed(r)) {
    return r;
  }
  const char *exec = std::getenv("HCCL_EXEC_TIMEOUT");
  if (exec != nullptr && failed_after >= std::atof(exec)) {
    return 74;
  }
  if (int rc = after(); rc != 0) {
    return rc;
  }
  const auto destroy = std::chrono::steady_clock::now();
  if (g_server_comm != nullptr && HcclCommDestroy(g_server_comm) != HCCL_SUCCESS) {
    return 56;
  }
  g_server_comm = nullptr;
  const HcclResult d = HcclCommDestroy(g_comm);
  std::fprintf(stderr, "rank %u: HcclCommDestroy: %d after %.1f s\n", g_rank, d, seconds(destroy));
  if (d != HCCL_SUCCESS || seconds(destroy) > 10) {
    return 77;
  }
  const pid_t me = getpid();
  for (const char *kind : {"qp", "mr"}) {
    const int left = hzc::test::ShowAndCountRdmaObjects(
        kind, [&](const nlohmann::json &o) { return hzc::test::RdmaObjectOf(o, me); });
    // -1: the rdma tool shows nothing where no RDMA device exists (TCP between the servers).
    if (left != 0 && (left > 0 || hzc::test::HaveRdmaDevice())) {
      std::fprintf(stderr, "rank %u: %d %s objects left\n", g_rank, left, kind);
      return 78;
    }
  }
  return 0;
}

}  // namespace hzc::coll_rank
