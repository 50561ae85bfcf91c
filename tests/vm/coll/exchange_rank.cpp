// SPDX-License-Identifier: Apache-2.0
// The exchange scenarios of hzc-coll-rank (coll_rank.cpp): Reduce, Scatter, AllGatherV,
// ReduceScatterV, AlltoAll, AlltoAllV, AlltoAllVC.
//   xmatrix    every exchange with every type (the reducing ones: every reducible type and op),
//              counts 0, 1, 7 and 1001, per-pair counts that vary (some 0) and layouts with
//              gaps, some calls in place and with the buffers that matter only on the root NULL
//              elsewhere, then sizes above the staging area (the tests set HCCL_BUFFSIZE=1;
//              across servers an eighth of them);
//              every rank's whole output (gaps included) and the bytes around its buffers are
//              checked against a reference made here
//   xmismatch  (3 ranks or more) calls whose ranks disagree (a pair's counts, with a server's
//              first rank or between two others, arrays that must be the same everywhere,
//              count, root, op, collective) fail with HCCL_E_PARA on every rank and change no
//              byte; then a matching call works
//   xrefuse    (3 ranks) calls where one rank's own arguments are bad (NULL arrays or buffers,
//              root out of range, recvType, overflowing counts or displacements, a block to
//              itself that disagrees, INT128 reduced) fail at once: that rank with its own code,
//              the others with HCCL_E_PARA; a Reduce whose non-roots pass recvBuf NULL works
// Exit status as coll_rank.cpp's; 80 + the step of xmismatch/xrefuse whose results differ.
#include <acl/acl.h>
#include <hccl/hccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "coll_rank.h"
#include "reference.h"

namespace hzc::coll_rank {
namespace {

using Counts = std::vector<std::vector<uint64_t>>;

enum class X {
  kReduce,
  kScatter,
  kAllGatherV,
  kReduceScatterV,
  kAlltoAll,
  kAlltoAllV,
  kAlltoAllVC
};
const char *const kXNames[] = {"Reduce",   "Scatter",   "AllGatherV", "ReduceScatterV",
                               "AlltoAll", "AlltoAllV", "AlltoAllVC"};

bool Reducing(X k) {
  return k == X::kReduce || k == X::kReduceScatterV;
}

// One exchange as every rank makes it, in elements: rank p sends rank q cnt[p][q] elements at
// element sd[p][q] of its input; rank q puts them at rd[q][p] of its output (the reducing ones
// reduce them into [0, cnt[*][q]) of its output).
struct World {
  X kind;
  HcclDataType type;
  HcclReduceOp op;
  uint32_t root;
  uint64_t count;
  Counts cnt, sd, rd;

  uint64_t SendElems(uint32_t p) const {
    uint64_t e = 0;
    for (uint32_t q = 0; q < g_n; ++q) {
      e = cnt[p][q] != 0 ? std::max(e, sd[p][q] + cnt[p][q]) : e;
    }
    return e;
  }
  uint64_t RecvElems(uint32_t q) const {
    uint64_t e = 0;
    for (uint32_t p = 0; p < g_n; ++p) {
      e = cnt[p][q] != 0 ? std::max(e, (Reducing(kind) ? 0 : rd[q][p]) + cnt[p][q]) : e;
    }
    return e;
  }
};

// A per-pair count of the vector kinds: varied, some 0.
uint64_t VCount(uint64_t c, uint32_t p, uint32_t q, uint64_t seed) {
  return c == 0 || (p + 2 * q + seed) % 5 == 0 ? 0 : c + p + 2 * q;
}

// Displacements of the blocks cnt[i] (i = 0..n-1): packed in rank order (@gap 0, @reverse
// false) or in reverse order with @gap elements between blocks.
std::vector<uint64_t> Layout(const std::vector<uint64_t> &cnt, uint64_t gap, bool reverse) {
  std::vector<uint64_t> d(cnt.size());
  uint64_t at = 0;
  for (size_t k = 0; k < cnt.size(); ++k) {
    const size_t i = reverse ? cnt.size() - 1 - k : k;
    d[i] = at;
    at += cnt[i] + gap;
  }
  return d;
}

World MakeWorld(X kind, HcclDataType type, HcclReduceOp op, uint64_t c, uint64_t seed) {
  const uint32_t n = g_n;
  World w{kind, type, op, static_cast<uint32_t>(seed % n), c, {}, {}, {}};
  w.cnt.assign(n, std::vector<uint64_t>(n, 0));
  w.sd = w.cnt;
  w.rd = w.cnt;
  for (uint32_t p = 0; p < n; ++p) {
    for (uint32_t q = 0; q < n; ++q) {
      uint64_t &k = w.cnt[p][q];
      switch (kind) {
        case X::kReduce:
          k = q == w.root ? c : 0;
          break;
        case X::kScatter:
          k = p == w.root ? c : 0;
          w.sd[p][q] = q * c;
          break;
        case X::kAllGatherV:
          k = VCount(c, p, 0, seed);
          break;
        case X::kReduceScatterV:
          k = VCount(c, 0, q, seed);
          break;
        case X::kAlltoAll:
          k = c, w.sd[p][q] = q * c, w.rd[q][p] = p * c;
          break;
        default:
          k = VCount(c, p, q, seed);
          break;
      }
    }
  }
  const bool packed = kind == X::kAlltoAllVC;
  for (uint32_t r = 0; r < n && kind != X::kAlltoAll && kind != X::kScatter; ++r) {
    std::vector<uint64_t> column(n);
    for (uint32_t p = 0; p < n; ++p) {
      column[p] = w.cnt[p][r];
    }
    if (kind != X::kReduce && kind != X::kAllGatherV) {
      w.sd[r] = Layout(w.cnt[r], packed ? 0 : 1, !packed);
    }
    if (!Reducing(kind)) {
      w.rd[r] = Layout(column, packed ? 0 : 2, kind == X::kAllGatherV);
    }
  }
  return w;
}

// Rank g_rank's arguments of @w and the call itself.
struct Args {
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs, matrix;
};

HcclResult Call(const World &w, void *send, void *recv, const Args &a) {
  const uint32_t me = g_rank;
  switch (w.kind) {
    case X::kReduce:
      return HcclReduce(send, recv, w.count, w.type, w.op, w.root, g_comm, nullptr);
    case X::kScatter:
      return HcclScatter(send, recv, w.count, w.type, w.root, g_comm, nullptr);
    case X::kAllGatherV:
      return HcclAllGatherV(send, w.cnt[me][0], recv, a.recv_counts.data(), a.recv_displs.data(),
                            w.type, g_comm, nullptr);
    case X::kReduceScatterV:
      return HcclReduceScatterV(send, a.send_counts.data(), a.send_displs.data(), recv,
                                w.cnt[0][me], w.type, w.op, g_comm, nullptr);
    case X::kAlltoAll:
      return HcclAlltoAll(send, w.count, w.type, recv, w.count, w.type, g_comm, nullptr);
    case X::kAlltoAllV:
      return HcclAlltoAllV(send, a.send_counts.data(), a.send_displs.data(), w.type, recv,
                           a.recv_counts.data(), a.recv_displs.data(), w.type, g_comm, nullptr);
    case X::kAlltoAllVC:
      return HcclAlltoAllVC(send, a.matrix.data(), w.type, recv, w.type, g_comm, nullptr);
  }
  return HCCL_E_INTERNAL;
}

Args ArgsOf(const World &w) {
  const uint32_t me = g_rank;
  Args a;
  for (uint32_t q = 0; q < g_n; ++q) {
    a.send_counts.push_back(w.cnt[me][q]);
    a.send_displs.push_back(w.sd[me][q]);
    a.recv_counts.push_back(w.cnt[q][me]);
    a.recv_displs.push_back(w.rd[me][q]);
    for (uint32_t r = 0; r < g_n; ++r) {
      a.matrix.push_back(w.cnt[q][r]);
    }
  }
  return a;
}

// What rank g_rank's output of @w holds afterwards (@out: its bytes before the call).
std::vector<uint8_t> Want(const World &w, const std::vector<std::vector<uint8_t>> &inputs,
                          std::vector<uint8_t> out) {
  const size_t es = hzc::test::RefTypeSize(w.type), me = g_rank;
  if (Reducing(w.kind)) {
    if (!out.empty()) {
      std::vector<const void *> ptrs;
      for (uint32_t p = 0; p < g_n; ++p) {
        ptrs.push_back(inputs[p].data() + w.sd[p][me] * es);
      }
      Reference(w.type, w.op, ptrs, out.data(), out.size() / es);
    }
    return out;
  }
  for (uint32_t p = 0; p < g_n; ++p) {
    if (w.cnt[p][me] != 0) {
      std::memcpy(out.data() + w.rd[me][p] * es, inputs[p].data() + w.sd[p][me] * es,
                  w.cnt[p][me] * es);
    }
  }
  return out;
}

bool Untouched(const uint8_t *p, size_t len) {
  return std::all_of(p, p + len, [](uint8_t b) { return b == kGuardByte; });
}

// Run @w on @arena (in place: AlltoAll's recvBuf is its sendBuf, AllGatherV's sendBuf is its
// block of recvBuf; @null_unused: the buffer that matters only on the root is NULL elsewhere)
// and check it; 0 or an exit status.
int RunX(Arena &arena, const World &w, uint64_t seed, bool in_place, bool null_unused) {
  const size_t es = hzc::test::RefTypeSize(w.type), me = g_rank;
  const size_t sb = w.SendElems(me) * es, rb = w.RecvElems(me) * es;
  uint8_t *recv = arena.base + kGuard;
  uint8_t *send = recv + rb + kGuard;
  in_place = in_place && (w.kind == X::kAlltoAll || (w.kind == X::kAllGatherV && sb != 0));
  if (in_place) {
    send = w.kind == X::kAlltoAll ? recv : recv + w.rd[me][me] * es;
  }
  if (send + sb + kGuard > arena.base + arena.size) {
    return 51;
  }
  std::memset(arena.base, kGuardByte, sb + rb + 3 * kGuard);
  std::vector<std::vector<uint8_t>> inputs(g_n);
  for (uint32_t p = 0; p < g_n; ++p) {
    inputs[p].resize(w.SendElems(p) * es);
    hzc::test::FillInput(w.type, es, p, seed, inputs[p].data(), w.SendElems(p));
  }
  std::memcpy(send, inputs[me].data(), sb);
  const std::vector<uint8_t> before(recv, recv + rb);
  const bool root = me == w.root;
  void *s = null_unused && w.kind == X::kScatter && !root ? nullptr : send;
  void *r = null_unused && w.kind == X::kReduce && !root ? nullptr : recv;
  const HcclResult res = Call(w, s, r, ArgsOf(w));
  if (res != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %u: %s type %d op %d count %lu: %s\n", g_rank,
                 kXNames[static_cast<int>(w.kind)], w.type, w.op,
                 static_cast<unsigned long>(w.count), HcclGetErrorString(res));
    return res;
  }
  const std::vector<uint8_t> want = Want(w, inputs, before);
  if (std::memcmp(recv, want.data(), rb) != 0) {
    size_t i = 0;
    while (recv[i] == want[i]) {
      ++i;
    }
    std::fprintf(stderr,
                 "rank %u: %s type %d op %d count %lu in_place %d: byte %zu of %zu is %#x, "
                 "want %#x\n",
                 g_rank, kXNames[static_cast<int>(w.kind)], w.type, w.op,
                 static_cast<unsigned long>(w.count), in_place, i, rb, recv[i], want[i]);
    return 60;
  }
  if (!Untouched(arena.base, kGuard) || !Untouched(recv + rb, kGuard) ||
      (!in_place && !Untouched(send + sb, kGuard))) {
    std::fprintf(stderr, "rank %u: %s wrote outside its buffers\n", g_rank,
                 kXNames[static_cast<int>(w.kind)]);
    return 61;
  }
  return 0;
}

constexpr HcclDataType kAllTypes[] = {
    HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,   HCCL_DATA_TYPE_FP16,
    HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_INT64,  HCCL_DATA_TYPE_UINT64,  HCCL_DATA_TYPE_UINT8,
    HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_FP64,    HCCL_DATA_TYPE_BFP16,
    HCCL_DATA_TYPE_INT128, HCCL_DATA_TYPE_HIF8,   HCCL_DATA_TYPE_FP8E4M3, HCCL_DATA_TYPE_FP8E5M2,
    HCCL_DATA_TYPE_FP8E8M0};
constexpr HcclDataType kReducibleTypes[] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_INT64,
    HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_FP64};
constexpr HcclReduceOp kAllOps[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                    HCCL_REDUCE_MIN};
constexpr X kMoving[] = {X::kScatter, X::kAllGatherV, X::kAlltoAll, X::kAlltoAllV, X::kAlltoAllVC};

int XMatrix() {
  Arena arena(16 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint64_t seed = 100;
  for (uint64_t count : {0ul, 1ul, 7ul, 1001ul}) {
    for (HcclDataType t : kAllTypes) {
      for (X k : kMoving) {
        if (count == 0 && t != HCCL_DATA_TYPE_INT8) {
          continue;
        }
        ++seed;
        const World w = MakeWorld(k, t, HCCL_REDUCE_SUM, count, seed);
        if (int rc = RunX(arena, w, seed, seed % 3 == 0, seed % 2 == 0)) {
          return rc;
        }
      }
    }
    for (HcclDataType t : kReducibleTypes) {
      for (HcclReduceOp op : kAllOps) {
        for (X k : {X::kReduce, X::kReduceScatterV}) {
          if ((count == 0 && t != HCCL_DATA_TYPE_FP32) || !AcrossServersCase(t, op)) {
            continue;
          }
          ++seed;
          if (int rc = RunX(arena, MakeWorld(k, t, op, count, seed), seed, false, seed % 2 == 0)) {
            return rc;
          }
        }
      }
    }
  }
  // Above the staging area (1 MiB): several rounds, odd sizes.
  struct Big {
    X kind;
    HcclDataType type;
    HcclReduceOp op;
    uint64_t bytes;  // about what one rank sends
    bool in_place;
  };
  const Big bigs[] = {{X::kAlltoAll, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, 3 << 19, false},
                      {X::kAlltoAll, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 3 << 19, true},
                      {X::kAlltoAllV, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 3 << 19, false},
                      {X::kAlltoAllVC, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_SUM, 3 << 19, false},
                      {X::kReduce, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 3 << 19, false},
                      {X::kScatter, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_SUM, 3 << 19, false},
                      {X::kAllGatherV, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_SUM, 3 << 19, true},
                      {X::kReduceScatterV, HCCL_DATA_TYPE_INT16, HCCL_REDUCE_MAX, 3 << 19, false}};
  for (const Big &b : bigs) {
    const size_t es = hzc::test::RefTypeSize(b.type);
    const bool per_rank = b.kind != X::kReduce && b.kind != X::kAllGatherV;
    // Across servers (the wire moves a few MB/s under emulation): an eighth.
    const uint64_t bytes = g_per_server != 0 ? b.bytes / 8 : b.bytes;
    const uint64_t count = bytes / es / (per_rank ? g_n : 1) + 3;
    ++seed;
    if (int rc =
            RunX(arena, MakeWorld(b.kind, b.type, b.op, count, seed), seed, b.in_place, false)) {
      return rc;
    }
  }
  return HcclBarrier(g_comm, nullptr);
}

// @got against @want (one per rank, this rank's entry) of step @step: 0 or 80 + step.
int Expect(int step, HcclResult got, const std::vector<HcclResult> &want) {
  if (got != want[g_rank]) {
    std::fprintf(stderr, "rank %u: step %d: %s, want %s\n", g_rank, step, HcclGetErrorString(got),
                 HcclGetErrorString(want[g_rank]));
    return 80 + step;
  }
  return 0;
}

// Every rank's result of the steps of @steps (calls of 3 ranks), each against its wanted results,
// each within 5 s; then the arena is untouched.
struct Step {
  std::vector<HcclResult> want;
  std::function<HcclResult()> call;
};

int RunSteps(Arena &arena, const std::vector<Step> &steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const HcclResult r = steps[i].call();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
      return 74;
    }
    if (int rc = Expect(static_cast<int>(i), r, steps[i].want)) {
      return rc;
    }
  }
  return Untouched(arena.base, arena.size) ? 0 : 61;
}

int XMismatch() {
  Arena arena(1 << 20, g_zero_copy);
  if (!arena.ok || g_n < 3) {
    return 52;
  }
  std::memset(arena.base, kGuardByte, arena.size);
  uint8_t *in = arena.base, *out = arena.base + (512 << 10);
  const uint32_t me = g_rank;
  std::vector<uint64_t> c16(g_n, 16), packed(g_n);
  for (uint32_t i = 0; i < g_n; ++i) {
    packed[i] = 16 * i;
  }
  std::vector<uint64_t> rc = c16, rd = packed, m(size_t{g_n} * g_n, 8);
  rc[0] = me == 1 ? 17 : 16;          // rank 1 expects 17 elements from rank 0, which sends 16
  rd[1] = me == 2 ? 40 : 16;          // rank 2's recvDispls differ
  m[2] = me == 1 ? 9 : 8;             // rank 1's matrix differs (in an entry it does not use)
  std::vector<uint64_t> last = c16;   // the last rank expects 15 elements from rank 1 (across
  last[1] = me == g_n - 1 ? 15 : 16;  // servers when it spans them, neither a server's first)
  const HcclResult para = HCCL_E_PARA;
  const std::vector<HcclResult> all_para(g_n, para);
  const std::vector<Step> steps = {
      {all_para,
       [&] {
         return HcclAlltoAllV(in, c16.data(), packed.data(), HCCL_DATA_TYPE_INT8, out, rc.data(),
                              packed.data(), HCCL_DATA_TYPE_INT8, g_comm, nullptr);
       }},
      {all_para,
       [&] {
         return HcclAlltoAllV(in, c16.data(), packed.data(), HCCL_DATA_TYPE_INT8, out, last.data(),
                              packed.data(), HCCL_DATA_TYPE_INT8, g_comm, nullptr);
       }},
      {all_para,
       [&] {
         return HcclAllGatherV(in, 16, out, c16.data(), rd.data(), HCCL_DATA_TYPE_INT8, g_comm,
                               nullptr);
       }},
      {all_para,
       [&] {
         return HcclAlltoAllVC(in, m.data(), HCCL_DATA_TYPE_INT8, out, HCCL_DATA_TYPE_INT8, g_comm,
                               nullptr);
       }},
      {all_para,
       [&] {
         const uint64_t n = me == 0 ? 32 : 16;
         return HcclAlltoAll(in, n, HCCL_DATA_TYPE_INT8, out, n, HCCL_DATA_TYPE_INT8, g_comm,
                             nullptr);
       }},
      {all_para,
       [&] {
         return HcclReduce(in, out, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, me == 0 ? 0 : 1,
                           g_comm, nullptr);
       }},
      {all_para,
       [&] {
         return HcclReduceScatterV(in, c16.data(), packed.data(), out, 16, HCCL_DATA_TYPE_FP32,
                                   me == 0 ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM, g_comm, nullptr);
       }},
      {all_para, [&] {
         return me == 2 ? HcclScatter(in, out, 16, HCCL_DATA_TYPE_INT8, 0, g_comm, nullptr)
                        : HcclAlltoAll(in, 16, HCCL_DATA_TYPE_INT8, out, 16, HCCL_DATA_TYPE_INT8,
                                       g_comm, nullptr);
       }}};
  if (int rc2 = RunSteps(arena, steps)) {
    return rc2;
  }
  // The communicator still works.
  return RunX(arena, MakeWorld(X::kAlltoAllV, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 100, 5), 5,
              false, false);
}

int XRefuse() {
  Arena arena(1 << 20, g_zero_copy);
  if (!arena.ok || g_n != 3 || HcclBarrier(g_comm, nullptr) != HCCL_SUCCESS) {
    return 52;
  }
  std::memset(arena.base, kGuardByte, arena.size);
  uint8_t *in = arena.base, *out = arena.base + (512 << 10);
  const uint32_t me = g_rank;
  const std::vector<uint64_t> c16(3, 16), packed{0, 16, 32}, m16(9, 16);
  std::vector<uint64_t> self = c16, far = packed;
  self[1] = me == 1 ? 15 : 16;            // rank 1 sends itself 16 elements but expects 15
  far[0] = me == 2 ? UINT64_MAX / 2 : 0;  // rank 2's displacement overflows
  auto one = [](uint32_t bad, HcclResult code) {
    std::vector<HcclResult> w(3, HCCL_E_PARA);
    w[bad] = code;
    return w;
  };
  const auto i8 = HCCL_DATA_TYPE_INT8;
  const std::vector<Step> steps = {
      {one(1, HCCL_E_PTR),
       [&] {
         return HcclAlltoAllV(in, c16.data(), me == 1 ? nullptr : packed.data(), i8, out,
                              c16.data(), packed.data(), i8, g_comm, nullptr);
       }},
      {one(0, HCCL_E_PARA), [&] { return HcclScatter(in, out, 16, i8, 3, g_comm, nullptr); }},
      {one(2, HCCL_E_PARA),
       [&] {
         return HcclAlltoAll(in, 16, i8, out, 16, me == 2 ? HCCL_DATA_TYPE_UINT8 : i8, g_comm,
                             nullptr);
       }},
      {one(0, HCCL_E_PARA),
       [&] {
         const uint64_t n = me == 0 ? UINT64_MAX / 2 : 16;
         return HcclAlltoAll(in, n, i8, out, n, i8, g_comm, nullptr);
       }},
      {std::vector<HcclResult>(3, HCCL_E_NOT_SUPPORT),
       [&] {
         return HcclReduce(in, out, 16, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_SUM, 0, g_comm, nullptr);
       }},
      {one(1, HCCL_E_PARA),
       [&] {
         return HcclAlltoAllV(in, c16.data(), packed.data(), i8, out, self.data(), packed.data(),
                              i8, g_comm, nullptr);
       }},
      {one(2, HCCL_E_PARA),
       [&] {
         return HcclReduceScatterV(in, c16.data(), far.data(), out, 16, HCCL_DATA_TYPE_FP32,
                                   HCCL_REDUCE_SUM, g_comm, nullptr);
       }},
      {one(0, HCCL_E_PTR),
       [&] { return HcclScatter(me == 0 ? nullptr : in, out, 16, i8, 0, g_comm, nullptr); }},
      {one(1, HCCL_E_PTR),
       [&] {
         return HcclAllGatherV(in, 16, out, me == 1 ? nullptr : c16.data(), packed.data(), i8,
                               g_comm, nullptr);
       }},
      {one(2, HCCL_E_PTR), [&] {
         return HcclAlltoAllVC(in, me == 2 ? nullptr : m16.data(), i8, out, i8, g_comm, nullptr);
       }}};
  if (int rc = RunSteps(arena, steps)) {
    return rc;
  }
  // Non-roots may pass recvBuf NULL to Reduce.
  float x = static_cast<float>(me + 1), sum = 0;
  if (HcclReduce(&x, me == 2 ? &sum : nullptr, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 2, g_comm,
                 nullptr) != HCCL_SUCCESS ||
      (me == 2 && sum != 6.0f)) {
    return 75;
  }
  return 0;
}

}  // namespace

int ExchangeScenario(const std::string &scenario) {
  if (scenario == "xmatrix") {
    return XMatrix();
  }
  if (scenario == "xmismatch") {
    return XMismatch();
  }
  if (scenario == "xrefuse") {
    return XRefuse();
  }
  return -1;
}

}  // namespace hzc::coll_rank
