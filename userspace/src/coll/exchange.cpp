// SPDX-License-Identifier: Apache-2.0
#include "coll/exchange.h"

#include <algorithm>
#include <cstring>
#include <functional>

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

uint64_t Extent(const std::vector<uint64_t> &off, const std::vector<uint64_t> &len) {
  uint64_t e = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    if (len[i] != 0) {
      e = std::max(e, off[i] + len[i]);
    }
  }
  return e;
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

// The kind-specific half of MakePlan: the entries of @p from @c's arguments.
Status FillPlan(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p) {
  const Entry none = [](uint32_t) -> uint64_t { return 0; };
  const Entry packed;  // empty: blocks follow each other
  auto all = [](uint64_t v) -> Entry { return [v](uint32_t) { return v; }; };
  auto only = [](uint32_t r, uint64_t v) -> Entry {
    return [r, v](uint32_t i) { return i == r ? v : 0; };
  };
  auto at = [](const uint64_t *a) -> Entry { return [a](uint32_t i) { return a[i]; }; };
  auto times = [](uint64_t v) -> Entry { return [v](uint32_t i) { return i * v; }; };
  const uint64_t *m = c.count_matrix;
  auto &so = p->send_off, &sl = p->send_len, &ro = p->recv_off, &rl = p->recv_len;
  switch (c.kind) {
    case Kind::kReduce:
      HZC_RETURN_IF_ERROR(Fill(n, es, only(c.root, c.count), none, "count", &so, &sl));
      return Fill(n, es, me == c.root ? all(c.count) : none, none, "count", &ro, &rl);
    case Kind::kScatter:
      HZC_RETURN_IF_ERROR(
          Fill(n, es, me == c.root ? all(c.count) : none, times(c.count), "recvCount", &so, &sl));
      return Fill(n, es, only(c.root, c.count), none, "recvCount", &ro, &rl);
    case Kind::kAllGatherV:
      HZC_RETURN_IF_ERROR(Fill(n, es, all(c.count), none, "sendCount", &so, &sl));
      return Fill(n, es, at(c.recv_counts), at(c.recv_displs), "recvCounts/recvDispls", &ro, &rl);
    case Kind::kReduceScatterV:
      HZC_RETURN_IF_ERROR(
          Fill(n, es, at(c.send_counts), at(c.send_displs), "sendCounts/sendDispls", &so, &sl));
      return Fill(n, es, all(c.count), none, "recvCount", &ro, &rl);
    case Kind::kAlltoAll:
      HZC_RETURN_IF_ERROR(Fill(n, es, all(c.count), times(c.count), "sendCount", &so, &sl));
      return Fill(n, es, all(c.recv_count), times(c.recv_count), "recvCount", &ro, &rl);
    case Kind::kAlltoAllV:
      HZC_RETURN_IF_ERROR(
          Fill(n, es, at(c.send_counts), at(c.send_displs), "sendCounts/sdispls", &so, &sl));
      return Fill(n, es, at(c.recv_counts), at(c.recv_displs), "recvCounts/rdispls", &ro, &rl);
    case Kind::kAlltoAllVC:
      HZC_RETURN_IF_ERROR(Fill(
          n, es, [m, n, me](uint32_t i) { return m[size_t{me} * n + i]; }, packed,
          "sendCountMatrix row of this rank", &so, &sl));
      return Fill(
          n, es, [m, n, me](uint32_t i) { return m[size_t{i} * n + me]; }, packed,
          "sendCountMatrix column of this rank", &ro, &rl);
    default:
      return Error(HCCL_E_INTERNAL, "{} is not an exchange", KindName(c.kind));
  }
}

// The element counts of AlltoAll and Scatter are multiplied by the rank count: check them
// first; AlltoAll(V/VC) do not convert types.
Status CheckBlocks(const Call &c, uint32_t n, size_t es) {
  auto scaled = [&](uint64_t count, const char *name) {
    if (count > UINT64_MAX / es / n) {
      return Error(HCCL_E_PARA, "{}={}: the blocks of {} ranks overflow 64-bit offsets", name,
                   count, n);
    }
    return Status::Ok();
  };
  if (c.kind == Kind::kAlltoAll) {
    HZC_RETURN_IF_ERROR(scaled(c.count, "sendCount"));
    HZC_RETURN_IF_ERROR(scaled(c.recv_count, "recvCount"));
  } else if (c.kind == Kind::kScatter) {
    HZC_RETURN_IF_ERROR(scaled(c.count, "recvCount"));
  }
  const bool typed =
      c.kind == Kind::kAlltoAll || c.kind == Kind::kAlltoAllV || c.kind == Kind::kAlltoAllVC;
  if (typed && c.recv_dtype != c.dtype) {
    return Error(HCCL_E_PARA, "recvType={}: must be sendType ({}); types are not converted",
                 static_cast<int>(c.recv_dtype), TypeName(c.dtype));
  }
  return Status::Ok();
}

}  // namespace

uint64_t Plan::SendExtent() const {
  return Extent(send_off, send_len);
}

uint64_t Plan::RecvExtent() const {
  return Extent(recv_off, recv_len);
}

bool IsExchange(Kind kind) {
  return static_cast<uint32_t>(kind) >= static_cast<uint32_t>(Kind::kReduce) &&
         static_cast<uint32_t>(kind) <= static_cast<uint32_t>(Kind::kAlltoAllVC);
}

bool IsVector(Kind kind) {
  return kind == Kind::kAllGatherV || kind == Kind::kReduceScatterV || kind == Kind::kAlltoAllV ||
         kind == Kind::kAlltoAllVC;
}

uint64_t SharedArgsHash(const Call &c, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
  auto mix = [&h](const uint64_t *a, size_t words) {
    for (size_t i = 0; i < words; ++i) {
      h = (h ^ a[i]) * 0x100000001b3ull;
    }
  };
  switch (c.kind) {
    case Kind::kAllGatherV:
      mix(c.recv_counts, n), mix(c.recv_displs, n);
      return h;
    case Kind::kReduceScatterV:
      mix(c.send_counts, n), mix(c.send_displs, n);
      return h;
    case Kind::kAlltoAllVC:
      mix(c.count_matrix, size_t{n} * n);
      return h;
    default:
      return 0;
  }
}

Expected<Plan> MakePlan(const Call &c, uint32_t n, uint32_t me) {
  const size_t es = TypeSize(c.dtype);
  if (es == 0 || n == 0 || me >= n) {
    return Error(HCCL_E_INTERNAL, "plan of an unchecked call");
  }
  HZC_RETURN_IF_ERROR(CheckBlocks(c, n, es));
  Plan p;
  HZC_RETURN_IF_ERROR(FillPlan(c, n, me, es, &p));
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
        return Error(HCCL_E_PARA,
                     "ranks disagree on call {}: rank {} sends rank {} {} bytes, rank {} expects "
                     "{} bytes from rank {}; nothing was moved",
                     seq, p, q, sent, q, expected, p);
      }
    }
  }
  return Status::Ok();
}

bool Exchange::Post(Communicator &comm, ControlArea &area, const Call &c, uint64_t seq) {
  const uint32_t n = area.nranks(), me = area.rank();
  auto plan = MakePlan(c, n, me);
  uint64_t *w = area.Args(me, seq);
  std::fill(w, w + ControlArea::kArgWords * n, 0);
  if (!plan.ok()) {
    return false;  // Validate passed: not reached
  }
  std::copy(plan->send_off.begin(), plan->send_off.end(), w);
  std::copy(plan->send_len.begin(), plan->send_len.end(), w + n);
  std::copy(plan->recv_off.begin(), plan->recv_off.end(), w + 2 * n);
  std::copy(plan->recv_len.begin(), plan->recv_len.end(), w + 3 * n);
  transport::PeerMemory *pm = comm.peer_memory();
  const uint64_t send = plan->SendExtent(), recv = plan->RecvExtent();
  if (pm == nullptr || send + recv == 0 || WritesWhatPeersRead(c, *plan, me)) {
    return false;
  }
  return (send == 0 || pm->Translate(me, reinterpret_cast<uintptr_t>(c.send), send).ok()) &&
         (recv == 0 || pm->Translate(me, reinterpret_cast<uintptr_t>(c.recv), recv).ok());
}

Status Exchange::Check() {
  const uint32_t n = area_.nranks();
  plans_.assign(n, Plan{});
  for (uint32_t r = 0; r < n; ++r) {
    const uint64_t *w = area_.Args(r, seq_);
    plans_[r].send_off.assign(w, w + n);
    plans_[r].send_len.assign(w + n, w + 2 * n);
    plans_[r].recv_off.assign(w + 2 * n, w + 3 * n);
    plans_[r].recv_len.assign(w + 3 * n, w + 4 * n);
  }
  return CheckPlans(plans_, seq_);
}

Status Exchange::Run(bool zero_copy) {
  return zero_copy ? ZeroCopy() : Staging();
}

Status Exchange::MapPeers(std::vector<const uint8_t *> *send, std::vector<Span> *spans) const {
  transport::PeerMemory *pm = comm_.peer_memory();
  const uint32_t n = area_.nranks(), me = area_.rank();
  send->assign(n, nullptr);
  (*send)[me] = Send();
  for (uint32_t p = 0; p < n; ++p) {
    const uint64_t extent = plans_[p].SendExtent();
    if (p == me || extent == 0) {
      continue;
    }
    // The peer found its input activated when it posted it: a failure now means it
    // deactivated it (or died) since.
    auto s = pm->Translate(p, area_.Posted(p, seq_).send, extent);
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

Status Exchange::ZeroCopy() {
  std::vector<const uint8_t *> send;
  std::vector<Span> spans;
  HZC_RETURN_IF_ERROR(MapPeers(&send, &spans));
  const uint32_t n = area_.nranks(), me = area_.rank();
  const Plan &mine = plans_[me];
  ReduceFn reduce = nullptr;
  if (Reduces(c_.kind)) {
    HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  }
  std::vector<const void *> in(n);
  const Fault f = RunGuarded(spans, [&] {
    if (reduce) {  // every rank sends this rank recv_len[*] bytes, output at 0
      if (mine.recv_len[0] != 0) {
        for (uint32_t p = 0; p < n; ++p) {
          in[p] = send[p] + plans_[p].send_off[me];
        }
        reduce(Recv(), in.data(), n, mine.recv_len[0] / TypeSize(c_.dtype));
      }
      return;
    }
    for (uint32_t i = 0; i < n; ++i) {  // from the next rank on, so ranks spread their reads
      const uint32_t p = (me + i) % n;
      const uint8_t *from = send[p] + plans_[p].send_off[me];
      uint8_t *to = Recv() + mine.recv_off[p];
      if (mine.recv_len[p] != 0 && to != from) {
        std::memmove(to, from, mine.recv_len[p]);
      }
    }
  });
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s buffer became inaccessible during the call (deactivated, unset or "
                 "the rank died): fault at {:#x} of its peer mapping",
                 f.rank, f.address);
  }
  // Peers may still be reading this rank's input: leave together.
  return area_.Barrier(deadline_, "the end of the call");
}

Status Exchange::Staging() {
  const uint32_t n = area_.nranks(), me = area_.rank();
  const Plan &mine = plans_[me];
  ReduceFn reduce = nullptr;
  if (Reduces(c_.kind)) {
    HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  }
  const size_t half = area_.staging_bytes() / 2, blk = half / (size_t{n} * n) / kAlign * kAlign;
  if (blk == 0) {
    return Error(HCCL_E_MEMORY,
                 "the staging area ({} bytes, HCCL_BUFFSIZE) is too small for {} "
                 "ranks",
                 area_.staging_bytes(), n);
  }
  uint64_t most = 0;  // the longest block of any pair: the rounds every rank makes
  for (const Plan &p : plans_) {
    most = std::max(most, *std::max_element(p.send_len.begin(), p.send_len.end()));
  }
  std::vector<const void *> in(n);
  for (uint64_t k = 0, off = 0; off < most; ++k, off += blk) {
    uint8_t *const base = area_.staging() + (k % 2) * half;
    auto block = [&](uint32_t p, uint32_t q) { return base + (size_t{p} * n + q) * blk; };
    auto part = [&](uint64_t len) { return len > off ? std::min<uint64_t>(blk, len - off) : 0; };
    for (uint32_t q = 0; q < n; ++q) {
      if (const size_t len = part(mine.send_len[q]); q != me && len != 0) {
        std::memcpy(block(me, q), Send() + mine.send_off[q] + off, len);
      }
    }
    HZC_RETURN_IF_ERROR(area_.Barrier(deadline_, "the staging step"));
    if (const size_t len = part(mine.recv_len[0]); reduce && len != 0) {
      for (uint32_t p = 0; p < n; ++p) {
        in[p] = p == me ? Send() + mine.send_off[me] + off : block(p, me);
      }
      reduce(Recv() + off, in.data(), n, len / TypeSize(c_.dtype));
    }
    for (uint32_t p = 0; p < n && !reduce; ++p) {
      if (const size_t len = part(mine.recv_len[p]); p != me && len != 0) {
        std::memcpy(Recv() + mine.recv_off[p] + off, block(p, me), len);
      }
    }
  }
  if (!reduce && mine.recv_len[me] != 0) {
    std::memmove(Recv() + mine.recv_off[me], Send() + mine.send_off[me], mine.recv_len[me]);
  }
  return Status::Ok();
}

}  // namespace hzc::coll
