// SPDX-License-Identifier: Apache-2.0
#include "coll/exchange.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <span>

#include "coll/control.h"
#include "coll/guard.h"
#include "coll/kinds.h"
#include "coll/reduce.h"
#include "transport/transport.h"

namespace hzc::coll {

namespace {

constexpr size_t kAlign = 64;

using Entry = std::function<uint64_t(uint32_t)>;

// Entries 0..@n-1 of @off/@len: count(i) elements of @es bytes at element displ(i), or
// (@displ empty) packed right after entry i-1. HCCL_E_PARA naming @what and the entry when
// the bytes overflow 64 bits.
Status Fill(uint32_t n, size_t es, const Entry &count, const Entry &displ, const char *what,
            std::vector<uint64_t> *off, std::vector<uint64_t> *len) {
  off->assign(n, 0);
  len->assign(n, 0);
  uint64_t next = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t c = count(i), d = displ ? displ(i) : 0;
    uint64_t o = 0, l = 0, end = 0;
    if (__builtin_mul_overflow(c, es, &l) || __builtin_mul_overflow(d, es, &o) ||
        __builtin_add_overflow(displ ? o : next, l, &end)) {
      return Error(HCCL_E_PARA, "{}, entry {}: {} elements at element {} overflow 64-bit offsets",
                   what, i, c, d);
    }
    (*off)[i] = displ ? o : next;
    (*len)[i] = l;
    next = end;
  }
  return Status::Ok();
}

bool Overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return alen != 0 && blen != 0 && a < b + blen && b < a + alen;
}

// Whether a block this rank writes (received from a peer) overlaps a block a peer reads from
// it: zero-copy would race with the readers (in-place AlltoAll); such calls take staging.
bool WritesWhatPeersRead(const Call &c, const Plan &p, uint32_t me) {
  const auto in = reinterpret_cast<uintptr_t>(c.send), out = reinterpret_cast<uintptr_t>(c.recv);
  for (size_t w = 0; w < p.recv_len.size(); ++w) {
    for (size_t r = 0; r < p.send_len.size(); ++r) {
      if (w != me && r != me &&
          Overlap(out + p.recv_off[w], p.recv_len[w], in + p.send_off[r], p.send_len[r])) {
        return true;
      }
    }
  }
  return false;
}

// The entries of @c's plan as functions of the peer rank.
const Entry kNone = [](uint32_t) -> uint64_t { return 0; };
const Entry kPacked;  // empty: blocks follow each other
Entry All(uint64_t v) {
  return [v](uint32_t) { return v; };
}
Entry Only(uint32_t r, uint64_t v) {
  return [r, v](uint32_t i) { return i == r ? v : 0; };
}
Entry At(const uint64_t *a) {
  return [a](uint32_t i) { return a[i]; };
}
Entry Times(uint64_t v) {
  return [v](uint32_t i) { return i * v; };
}

// HCCL_E_PARA when @count elements of @es bytes for each of @n ranks overflow 64 bits.
Status Scaled(uint64_t count, const char *name, uint32_t n, size_t es) {
  if (count > UINT64_MAX / es / n) {
    return Error(HCCL_E_PARA, "{}={}: the blocks of {} ranks overflow 64-bit offsets", name, count,
                 n);
  }
  return Status::Ok();
}

// AlltoAll(V/VC) do not convert types.
Status SameType(const Call &c) {
  if (c.recv_dtype != c.dtype) {
    return Error(HCCL_E_PARA, "recvType={}: must be sendType ({}); types are not converted",
                 static_cast<int>(c.recv_dtype), TypeName(c.dtype));
  }
  return Status::Ok();
}

}  // namespace

Status PlanReduce(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(
      Fill(n, es, Only(c.root, c.count), kNone, "count", &p->send_off, &p->send_len));
  return Fill(n, es, me == c.root ? All(c.count) : kNone, kNone, "count", &p->recv_off,
              &p->recv_len);
}

Status PlanScatter(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(Scaled(c.count, "recvCount", n, es));
  HZC_RETURN_IF_ERROR(Fill(n, es, me == c.root ? All(c.count) : kNone, Times(c.count), "recvCount",
                           &p->send_off, &p->send_len));
  return Fill(n, es, Only(c.root, c.count), kNone, "recvCount", &p->recv_off, &p->recv_len);
}

Status PlanAllGatherV(const Call &c, uint32_t n, uint32_t, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(Fill(n, es, All(c.count), kNone, "sendCount", &p->send_off, &p->send_len));
  return Fill(n, es, At(c.recv_counts), At(c.recv_displs), "recvCounts/recvDispls", &p->recv_off,
              &p->recv_len);
}

Status PlanReduceScatterV(const Call &c, uint32_t n, uint32_t, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(Fill(n, es, At(c.send_counts), At(c.send_displs), "sendCounts/sendDispls",
                           &p->send_off, &p->send_len));
  return Fill(n, es, All(c.count), kNone, "recvCount", &p->recv_off, &p->recv_len);
}

Status PlanAlltoAll(const Call &c, uint32_t n, uint32_t, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(Scaled(c.count, "sendCount", n, es));
  HZC_RETURN_IF_ERROR(Scaled(c.recv_count, "recvCount", n, es));
  HZC_RETURN_IF_ERROR(SameType(c));
  HZC_RETURN_IF_ERROR(
      Fill(n, es, All(c.count), Times(c.count), "sendCount", &p->send_off, &p->send_len));
  return Fill(n, es, All(c.recv_count), Times(c.recv_count), "recvCount", &p->recv_off,
              &p->recv_len);
}

Status PlanAlltoAllV(const Call &c, uint32_t n, uint32_t, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(SameType(c));
  HZC_RETURN_IF_ERROR(Fill(n, es, At(c.send_counts), At(c.send_displs), "sendCounts/sdispls",
                           &p->send_off, &p->send_len));
  return Fill(n, es, At(c.recv_counts), At(c.recv_displs), "recvCounts/rdispls", &p->recv_off,
              &p->recv_len);
}

Status PlanAlltoAllVC(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p) {
  HZC_RETURN_IF_ERROR(SameType(c));
  const uint64_t *m = c.count_matrix;
  HZC_RETURN_IF_ERROR(Fill(
      n, es, [m, n, me](uint32_t i) { return m[size_t{me} * n + i]; }, kPacked,
      "sendCountMatrix row of this rank", &p->send_off, &p->send_len));
  return Fill(
      n, es, [m, n, me](uint32_t i) { return m[size_t{i} * n + me]; }, kPacked,
      "sendCountMatrix column of this rank", &p->recv_off, &p->recv_len);
}

Expected<Plan> MakePlan(const Call &c, uint32_t n, uint32_t me) {
  const size_t es = TypeSize(c.dtype);
  if (es == 0 || n == 0 || me >= n) {
    return Error(HCCL_E_INTERNAL, "plan of an unchecked call");
  }
  const KindInfo *kind = Find(c.kind);
  if (kind == nullptr || kind->plan == nullptr) {
    return Error(HCCL_E_INTERNAL, "{} is not an exchange", KindName(c.kind));
  }
  Plan p;
  HZC_RETURN_IF_ERROR(kind->plan(c, n, me, es, &p));
  const uint64_t send = p.SendExtent(), recv = p.RecvExtent();
  const auto in = reinterpret_cast<uintptr_t>(c.send), out = reinterpret_cast<uintptr_t>(c.recv);
  if ((in != 0 && in > UINTPTR_MAX - send) || (out != 0 && out > UINTPTR_MAX - recv)) {
    return Error(HCCL_E_PARA,
                 "the buffers wrap around the address space (sendBuf={}, {} bytes; recvBuf={}, "
                 "{} bytes)",
                 c.send, send, static_cast<const void *>(c.recv), recv);
  }
  if (p.send_len[me] != p.recv_len[me]) {
    return Error(HCCL_E_PARA,
                 "this rank sends itself {} elements but expects {} from itself (the counts of "
                 "rank {} disagree)",
                 p.send_len[me] / es, p.recv_len[me] / es, me);
  }
  return p;
}

Status CheckPlans(const std::vector<Plan> &plans, uint64_t seq) {
  const auto n = static_cast<uint32_t>(plans.size());
  for (uint32_t p = 0; p < n; ++p) {
    for (uint32_t q = 0; q < n; ++q) {
      const uint64_t sent = plans[p].send_len[q], expected = plans[q].recv_len[p];
      if (sent != expected) {
        return PairDisagrees(seq, p, q, sent, expected);
      }
    }
  }
  return Status::Ok();
}

Status PairDisagrees(uint64_t seq, uint64_t p, uint64_t q, uint64_t sent, uint64_t expected) {
  return Error(
      HCCL_E_PARA,
      "ranks disagree on call {}: rank {} sends rank {} {} bytes, rank {} expects {} bytes "
      "from rank {}; nothing was moved",
      seq, p, q, sent, q, expected, p);
}

Plan ExchangePost(ControlArea &area, const Call &c, uint64_t seq) {
  const uint32_t n = area.nranks(), me = area.rank();
  auto plan = MakePlan(c, n, me);
  uint64_t *w = area.Args(me, seq);
  std::fill(w, w + ControlArea::kArgWords * n, 0);
  if (!plan.ok()) {
    return Plan{};  // Validate passed: not reached
  }
  std::copy(plan->send_off.begin(), plan->send_off.end(), w);
  std::copy(plan->send_len.begin(), plan->send_len.end(), w + n);
  std::copy(plan->recv_off.begin(), plan->recv_off.end(), w + 2 * n);
  std::copy(plan->recv_len.begin(), plan->recv_len.end(), w + 3 * n);
  return std::move(*plan);
}

bool ExchangeEligible(Communicator &comm, const Call &c, const Plan &plan) {
  transport::PeerMemory *pm = comm.peer_memory();
  const uint64_t send = plan.SendExtent(), recv = plan.RecvExtent();
  if (pm == nullptr || plan.send_len.empty() || send + recv == 0 ||
      WritesWhatPeersRead(c, plan, comm.rank())) {
    return false;
  }
  return (send == 0 ||
          pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(c.send), send).ok()) &&
         (recv == 0 || pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(c.recv), recv).ok());
}

Status ExchangeCheck(Context &ctx) {
  const uint32_t n = ctx.area->nranks();
  std::vector<Plan> &plans = ctx.plans;
  plans.assign(n, Plan{});
  for (uint32_t r = 0; r < n; ++r) {
    const uint64_t *w = ctx.area->Args(r, ctx.seq);
    plans[r].send_off.assign(w, w + n);
    plans[r].send_len.assign(w + n, w + 2 * n);
    plans[r].recv_off.assign(w + 2 * n, w + 3 * n);
    plans[r].recv_len.assign(w + 3 * n, w + 4 * n);
  }
  return CheckPlans(plans, ctx.seq);
}

namespace {

// Local pointers to every rank's input (this rank's own for itself) and the spans to guard.
Status MapPeers(const Context &ctx, const Call &c, std::vector<const uint8_t *> *send,
                std::vector<Span> *spans) {
  transport::PeerMemory *pm = ctx.comm.peer_memory();
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  send->assign(n, nullptr);
  (*send)[me] = static_cast<const uint8_t *>(c.send);
  for (uint32_t p = 0; p < n; ++p) {
    const uint64_t extent = ctx.plans[p].SendExtent();
    if (p == me || extent == 0) {
      continue;
    }
    // The peer found its input activated when it posted it: a failure now means it
    // deactivated it (or died) since.
    auto s = pm->Translate(p, ctx.area->Posted(p, ctx.seq).send, extent);
    if (!s.ok()) {
      return Error(HCCL_E_REMOTE, "rank {}'s input is no longer accessible: {}", p,
                   s.status().message());
    }
    (*send)[p] = static_cast<const uint8_t *>(*s);
    const auto b = reinterpret_cast<uintptr_t>(*s);
    spans->push_back({.begin = b, .end = b + extent, .rank = p});
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Every rank's blocks for this rank, from @send (every rank's input, by rank), into this
// rank's output: copied, or (Reduce, ReduceScatterV) reduced in rank order. @in: room for
// nranks pointers (allocated before: a guarded region may be left by a jump).
void Deliver(const Context &ctx, const Call &c, ReduceFn reduce,
             const std::vector<const uint8_t *> &send, std::vector<const void *> &in) {
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const std::vector<Plan> &plans = ctx.plans;
  const Plan &mine = plans[me];
  auto *const recv = static_cast<uint8_t *>(c.recv);
  if (reduce) {  // every rank sends this rank recv_len[*] bytes, output at 0
    if (mine.recv_len[0] != 0) {
      for (uint32_t p = 0; p < n; ++p) {
        in[p] = send[p] + plans[p].send_off[me];
      }
      reduce(recv, in.data(), n, mine.recv_len[0] / TypeSize(c.dtype));
    }
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {  // from the next rank on, so ranks spread their reads
    const uint32_t p = (me + i) % n;
    const uint8_t *from = send[p] + plans[p].send_off[me];
    uint8_t *to = recv + mine.recv_off[p];
    if (mine.recv_len[p] != 0 && to != from) {
      std::memmove(to, from, mine.recv_len[p]);
    }
  }
}

}  // namespace

Status ExchangeZeroCopy(Context &ctx, const Call &c) {
  std::vector<const uint8_t *> send;
  std::vector<Span> spans;
  HZC_RETURN_IF_ERROR(MapPeers(ctx, c, &send, &spans));
  ReduceFn reduce = nullptr;
  if (Reduces(c.kind)) {
    HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  }
  std::vector<const void *> in(ctx.area->nranks());
  const Fault f = RunGuarded(spans, [&] { Deliver(ctx, c, reduce, send, in); });
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s buffer became inaccessible during the call (deactivated, unset or "
                 "the rank died): fault at {:#x} of its peer mapping",
                 f.rank, f.address);
  }
  // Peers may still be reading this rank's input: leave together.
  return ctx.area->Barrier(ctx.deadline, "the end of the call");
}

// Every rank's input is a copy in its inline region (coll/inline.h); its plan must not reach
// past it.
Status ExchangeInline(Context &ctx, const Call &c) {
  const uint32_t n = ctx.area->nranks();
  std::vector<const uint8_t *> send(n);
  for (uint32_t p = 0; p < n; ++p) {
    const std::span<const uint8_t> in = ctx.area->InlineInput(p, ctx.seq);
    if (ctx.plans[p].SendExtent() > in.size()) {
      return Error(HCCL_E_REMOTE,
                   "rank {} posted its input inline but its plan reaches byte {} of its {}-byte "
                   "inline input",
                   p, ctx.plans[p].SendExtent(), in.size());
    }
    send[p] = in.data();
  }
  ReduceFn reduce = nullptr;
  if (Reduces(c.kind)) {
    HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  }
  std::vector<const void *> in(n);
  Deliver(ctx, c, reduce, send, in);
  return Status::Ok();
}

Status ExchangeStaging(Context &ctx, const Call &c) {
  ControlArea &area = *ctx.area;
  const uint32_t n = area.nranks(), me = area.rank();
  const Plan &mine = ctx.plans[me];
  ReduceFn reduce = nullptr;
  if (Reduces(c.kind)) {
    HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  }
  const auto *const input = static_cast<const uint8_t *>(c.send);
  auto *const output = static_cast<uint8_t *>(c.recv);
  const size_t half = area.staging_bytes() / 2, blk = half / (size_t{n} * n) / kAlign * kAlign;
  if (blk == 0) {
    return Error(HCCL_E_MEMORY,
                 "the staging area ({} bytes, HCCL_BUFFSIZE) is too small for {} "
                 "ranks",
                 area.staging_bytes(), n);
  }
  uint64_t most = 0;  // the longest block of any pair: the rounds every rank makes
  for (const Plan &p : ctx.plans) {
    most = std::max(most, *std::max_element(p.send_len.begin(), p.send_len.end()));
  }
  std::vector<const void *> in(n);
  for (uint64_t k = 0, off = 0; off < most; ++k, off += blk) {
    uint8_t *const base = area.staging() + (k % 2) * half;
    auto block = [&](uint32_t p, uint32_t q) { return base + (size_t{p} * n + q) * blk; };
    auto part = [&](uint64_t len) { return len > off ? std::min<uint64_t>(blk, len - off) : 0; };
    for (uint32_t q = 0; q < n; ++q) {
      if (const size_t len = part(mine.send_len[q]); q != me && len != 0) {
        std::memcpy(block(me, q), input + mine.send_off[q] + off, len);
      }
    }
    HZC_RETURN_IF_ERROR(area.Barrier(ctx.deadline, "the staging step"));
    if (const size_t len = part(mine.recv_len[0]); reduce && len != 0) {
      for (uint32_t p = 0; p < n; ++p) {
        in[p] = p == me ? input + mine.send_off[me] + off : block(p, me);
      }
      reduce(output + off, in.data(), n, len / TypeSize(c.dtype));
    }
    for (uint32_t p = 0; p < n && !reduce; ++p) {
      if (const size_t len = part(mine.recv_len[p]); p != me && len != 0) {
        std::memcpy(output + mine.recv_off[p] + off, block(p, me), len);
      }
    }
  }
  if (!reduce && mine.recv_len[me] != 0) {
    std::memmove(output + mine.recv_off[me], input + mine.send_off[me], mine.recv_len[me]);
  }
  return Status::Ok();
}

}  // namespace hzc::coll
