// SPDX-License-Identifier: Apache-2.0
// The point-to-point scenario of hzc-coll-rank (coll_rank.cpp) across servers:
//   p2p   (HZC_TEST_PER_SERVER=L) HcclSend, HcclRecv and HcclBatchSendRecv between ranks of
//         different servers, each rank with its partner rank (rank + L) mod n:
//         1. separate calls (the lower rank sends first, the higher receives first) of several
//            types and sizes: 1 element, 7, one chunk of the wire (1 MiB) - 1 and + 1 bytes,
//            3 MiB + 6 bytes;
//         2. one batch on both sides that sends and receives 2 MiB + 3 bytes at once, and one
//            with two sends and two receives of one pair, matched in list order;
//         3. a ring in one batch (send to rank + 1, receive from rank - 1): with L > 1 it mixes
//            transfers inside a server and across servers;
//         4. a count and a dataType mismatch: HCCL_E_PARA on both sides within 5 s, the
//            receive buffer untouched; then a transfer works;
//         5. refusals (an unknown dataType) by the sender, by the receiver and by both: the
//            refusing rank gets HCCL_E_PARA at once, its partner HCCL_E_PARA within 5 s; after
//            each, a transfer works.
//         Every received byte and the guard bytes around every buffer are checked.
// Exit status as coll_rank.cpp's; 90 + the step whose result differs.
#include <hccl/hccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "coll_rank.h"

namespace hzc::coll_rank {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kQuick = std::chrono::seconds(5);
const auto kBadType = static_cast<HcclDataType>(255);

size_t Size(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
      return 1;
    case HCCL_DATA_TYPE_FP16:
      return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_FP32:
      return 4;
    default:
      return 8;
  }
}

// A heap buffer with guard bytes on both sides.
struct Buf {
  explicit Buf(size_t n) : bytes(n), v(n + 2 * kGuard, kGuardByte) {}
  uint8_t *data() { return v.data() + kGuard; }
  bool Guarded() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (v[i] != kGuardByte || v[kGuard + bytes + i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }
  size_t bytes;
  std::vector<uint8_t> v;
};

// What rank @from sends rank @to in transfer @tag: byte i.
uint8_t Pattern(uint32_t from, uint32_t to, uint32_t tag, size_t i) {
  return static_cast<uint8_t>(from * 31 + to * 7 + tag * 13 + i * 3 + (i >> 11));
}

void Fill(Buf &b, uint32_t from, uint32_t to, uint32_t tag) {
  for (size_t i = 0; i < b.bytes; ++i) {
    b.data()[i] = Pattern(from, to, tag, i);
  }
}

// 0, or 60 (wrong data) / 61 (a guard byte changed), with one line on stderr.
int Check(Buf &b, uint32_t from, uint32_t tag) {
  for (size_t i = 0; i < b.bytes; ++i) {
    if (b.data()[i] != Pattern(from, g_rank, tag, i)) {
      std::fprintf(stderr, "rank %u: transfer %u from rank %u: byte %zu of %zu is wrong\n", g_rank,
                   tag, from, i, b.bytes);
      return 60;
    }
  }
  if (!b.Guarded()) {
    std::fprintf(stderr, "rank %u: transfer %u from rank %u: a guard byte changed\n", g_rank, tag,
                 from);
    return 61;
  }
  return 0;
}

uint32_t Partner() {
  return (g_rank + g_per_server) % g_n;
}

// One transfer of @count elements of @type between this rank and its partner, each way
// (@tag numbers it): the lower rank sends first.
int Both(HcclDataType type, uint64_t count, uint32_t tag) {
  const uint32_t peer = Partner();
  Buf out(count * Size(type)), in(count * Size(type));
  Fill(out, g_rank, peer, tag);
  auto send = [&] { return HcclSend(out.data(), count, type, peer, g_comm, nullptr); };
  auto recv = [&] { return HcclRecv(in.data(), count, type, peer, g_comm, nullptr); };
  HcclResult a = g_rank < peer ? send() : recv();
  HcclResult b = a == HCCL_SUCCESS ? (g_rank < peer ? recv() : send()) : HCCL_SUCCESS;
  if (a != HCCL_SUCCESS || b != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %u: transfer %u with rank %u: %d %d\n", g_rank, tag, peer, a, b);
    return a != HCCL_SUCCESS ? a : b;
  }
  return Check(in, peer, tag);
}

int Separate() {
  const struct {
    HcclDataType type;
    uint64_t count;
  } cases[] = {
      {HCCL_DATA_TYPE_INT8, 1},
      {HCCL_DATA_TYPE_FP32, 7},
      {HCCL_DATA_TYPE_UINT8, (1 << 20) - 1},
      {HCCL_DATA_TYPE_UINT8, (1 << 20) + 1},
      {HCCL_DATA_TYPE_INT64, 1001},
      {HCCL_DATA_TYPE_FP16, ((3 << 20) + 6) / 2},
  };
  uint32_t tag = 0;
  for (const auto &c : cases) {
    if (int rc = Both(c.type, c.count, ++tag); rc != 0) {
      return rc;
    }
  }
  return 0;
}

int Batches() {
  const uint32_t peer = Partner();
  {
    Buf out((2 << 20) + 3), in((2 << 20) + 3);
    Fill(out, g_rank, peer, 20);
    HcclSendRecvItem items[] = {
        {HCCL_SEND, out.data(), out.bytes, HCCL_DATA_TYPE_UINT8, peer},
        {HCCL_RECV, in.data(), in.bytes, HCCL_DATA_TYPE_UINT8, peer},
    };
    if (HcclResult r = HcclBatchSendRecv(items, 2, g_comm, nullptr); r != HCCL_SUCCESS) {
      return r;
    }
    if (int rc = Check(in, peer, 20); rc != 0) {
      return rc;
    }
  }
  // Two messages of each direction: matched in list order.
  Buf a(7 * 4), b(100 * 4), ia(7 * 4), ib(100 * 4);
  Fill(a, g_rank, peer, 21);
  Fill(b, g_rank, peer, 22);
  HcclSendRecvItem items[] = {
      {HCCL_RECV, ia.data(), 7, HCCL_DATA_TYPE_INT32, peer},
      {HCCL_SEND, a.data(), 7, HCCL_DATA_TYPE_INT32, peer},
      {HCCL_RECV, ib.data(), 100, HCCL_DATA_TYPE_INT32, peer},
      {HCCL_SEND, b.data(), 100, HCCL_DATA_TYPE_INT32, peer},
  };
  if (HcclResult r = HcclBatchSendRecv(items, 4, g_comm, nullptr); r != HCCL_SUCCESS) {
    return r;
  }
  if (int rc = Check(ia, peer, 21); rc != 0) {
    return rc;
  }
  return Check(ib, peer, 22);
}

int Ring() {
  const uint32_t next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
  Buf out((1 << 20) + 17), in((1 << 20) + 17);
  Fill(out, g_rank, next, 30);
  HcclSendRecvItem items[] = {
      {HCCL_SEND, out.data(), out.bytes, HCCL_DATA_TYPE_UINT8, next},
      {HCCL_RECV, in.data(), in.bytes, HCCL_DATA_TYPE_UINT8, prev},
  };
  if (HcclResult r = HcclBatchSendRecv(items, 2, g_comm, nullptr); r != HCCL_SUCCESS) {
    return r;
  }
  return Check(in, prev, 30);
}

// One transfer from the lower rank of the pair to the higher, where the sender passes
// (@stype, @scount) and the receiver (@rtype, @rcount); 0 when both results are @want (the
// receive buffer unchanged unless it succeeded) and the partner's came within 5 s.
int Pair(HcclDataType stype, uint64_t scount, HcclDataType rtype, uint64_t rcount, HcclResult want,
         uint32_t tag) {
  const uint32_t peer = Partner();
  const bool sender = g_rank < peer;
  Buf buf(64 * 8);
  if (sender) {
    Fill(buf, g_rank, peer, tag);
  }
  const auto start = Clock::now();
  const HcclResult r = sender ? HcclSend(buf.data(), scount, stype, peer, g_comm, nullptr)
                              : HcclRecv(buf.data(), rcount, rtype, peer, g_comm, nullptr);
  if (Clock::now() - start > kQuick) {
    std::fprintf(stderr, "rank %u: step %u took more than 5 s (%d)\n", g_rank, tag, r);
    return 74;
  }
  if (r != want) {
    std::fprintf(stderr, "rank %u: step %u: %d where %d was due\n", g_rank, tag, r, want);
    return r == HCCL_SUCCESS ? 70 : r;
  }
  if (sender) {
    return 0;
  }
  if (want == HCCL_SUCCESS) {
    buf.bytes = rcount * Size(rtype);
    return Check(buf, peer, tag);
  }
  for (size_t i = 0; i < buf.v.size(); ++i) {
    if (buf.v[i] != kGuardByte) {
      std::fprintf(stderr, "rank %u: step %u: a failed receive changed byte %zu\n", g_rank, tag, i);
      return 61;
    }
  }
  return 0;
}

// The mismatches and refusals, each followed by a transfer that works.
int Failures() {
  const auto i32 = HCCL_DATA_TYPE_INT32, f32 = HCCL_DATA_TYPE_FP32;
  const struct {
    HcclDataType stype;
    uint64_t scount;
    HcclDataType rtype;
    uint64_t rcount;
  } steps[] = {
      {i32, 5, i32, 6},           // count
      {f32, 4, i32, 4},           // dataType
      {kBadType, 4, i32, 4},      // the sender refuses
      {i32, 4, kBadType, 4},      // the receiver refuses
      {kBadType, 4, kBadType, 4}  // both
  };
  uint32_t step = 0;
  for (const auto &s : steps) {
    ++step;
    if (Pair(s.stype, s.scount, s.rtype, s.rcount, HCCL_E_PARA, 40 + 2 * step) != 0) {
      return 90 + step;
    }
    const uint64_t n = 9 + step;
    if (int rc = Pair(i32, n, i32, n, HCCL_SUCCESS, 41 + 2 * step); rc != 0) {
      return rc;
    }
  }
  return 0;
}

}  // namespace

int P2pScenario(const std::string &scenario) {
  if (scenario != "p2p") {
    return -1;
  }
  if (g_per_server == 0 || g_n % g_per_server != 0 || g_n / g_per_server < 2) {
    return 51;
  }
  for (int (*step)() : {Separate, Batches, Ring, Failures}) {
    if (int rc = step(); rc != 0) {
      return rc;
    }
  }
  return 0;
}

}  // namespace hzc::coll_rank
