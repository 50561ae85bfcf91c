// SPDX-License-Identifier: Apache-2.0
#include "coll/zero_copy.h"

#include <cstring>
#include <functional>
#include <vector>

#include "coll/control.h"
#include "coll/guard.h"
#include "coll/kinds.h"
#include "coll/reduce.h"
#include "transport/transport.h"

namespace hzc::coll {

namespace {

// Writes of at least this many bytes per call and rank go around the caches (StreamCopy):
// larger than a core's L2, so the output would not stay there for its reader anyway.
constexpr size_t kStreamBytes = size_t{4} << 20;

// Bytes of the send and recv buffers of one rank.
void Lengths(const Call &c, uint32_t n, size_t *send, size_t *recv) {
  const KindInfo &k = Info(c.kind);
  const size_t b = static_cast<size_t>(c.count) * TypeSize(c.dtype);
  *send = k.send_per_rank ? b * n : b;
  *recv = k.recv_per_rank ? b * n : b;
}

// The input of @c (Broadcast: its one buffer).
const void *Input(const Call &c) {
  return c.kind == Kind::kBroadcast ? c.recv : c.send;
}

// Every rank's buffers of one call, mapped (this rank's own for itself).
class Peers {
 public:
  Peers(Context &ctx, const Call &c) : ctx_(ctx), c_(c) {}

  Status Map();
  // Run @fn in a guarded region over the peers' buffers.
  Status Guarded(const std::function<void()> &fn) const;
  // Peers may still be reading this rank's buffers, or writing them: leave together.
  Status End() const { return ctx_.area->Barrier(ctx_.deadline, "the end of the call"); }

  std::vector<const uint8_t *> send;
  std::vector<uint8_t *> recv;

 private:
  Context &ctx_;
  const Call &c_;
  std::vector<Span> spans_;
};

Status Peers::Map() {
  transport::PeerMemory *pm = ctx_.comm.peer_memory();
  const ControlArea &area = *ctx_.area;
  const uint32_t n = area.nranks();
  size_t sbytes = 0, rbytes = 0;
  Lengths(c_, n, &sbytes, &rbytes);
  send.assign(n, nullptr);
  recv.assign(n, nullptr);
  for (uint32_t p = 0; p < n; ++p) {
    const CallDesc d = area.Posted(p, ctx_.seq);
    const uint64_t in = c_.kind == Kind::kBroadcast ? d.recv : d.send;
    if (p == area.rank()) {
      send[p] = static_cast<const uint8_t *>(Input(c_));
      recv[p] = static_cast<uint8_t *>(c_.recv);
      continue;
    }
    // The peer found its buffers activated when it posted them: a failure now means it
    // deactivated them (or died) since.
    auto s = pm->Translate(p, in, sbytes);
    if (!s.ok()) {
      return Error(HCCL_E_REMOTE, "rank {}'s input is no longer accessible: {}", p,
                   s.status().message());
    }
    auto r = pm->Translate(p, d.recv, rbytes);
    if (!r.ok()) {
      return Error(HCCL_E_REMOTE, "rank {}'s output is no longer accessible: {}", p,
                   r.status().message());
    }
    send[p] = static_cast<const uint8_t *>(*s);
    recv[p] = static_cast<uint8_t *>(*r);
    const auto sb = reinterpret_cast<uintptr_t>(send[p]);
    const auto rb = reinterpret_cast<uintptr_t>(recv[p]);
    spans_.push_back({.begin = sb, .end = sb + sbytes, .rank = p});
    spans_.push_back({.begin = rb, .end = rb + rbytes, .rank = p});
  }
  return Status::Ok();
}

Status Peers::Guarded(const std::function<void()> &fn) const {
  const Fault f = RunGuarded(spans_, fn);
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s buffer became inaccessible during the call (deactivated, unset or "
                 "the rank died): fault at {:#x} of its peer mapping",
                 f.rank, f.address);
  }
  return Status::Ok();
}

}  // namespace

bool ZeroCopyEligible(Communicator &comm, const Call &c) {
  transport::PeerMemory *pm = comm.peer_memory();
  if (pm == nullptr) {
    return false;
  }
  size_t send = 0, recv = 0;
  Lengths(c, comm.size(), &send, &recv);
  if (send == 0) {
    return false;
  }
  return pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(Input(c)), send).ok() &&
         pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(c.recv), recv).ok();
}

// Pull every rank's block, starting with the next rank so ranks spread their reads.
Status ZeroCopyAllGather(Context &ctx, const Call &c) {
  Peers peers(ctx, c);
  HZC_RETURN_IF_ERROR(peers.Map());
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const size_t b = static_cast<size_t>(c.count) * TypeSize(c.dtype);
  HZC_RETURN_IF_ERROR(peers.Guarded([&] {
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t p = (me + i) % n;
      uint8_t *to = peers.recv[me] + p * b;
      if (to != peers.send[p]) {
        std::memcpy(to, peers.send[p], b);
      }
    }
  }));
  return peers.End();
}

// Every rank copies its block of the root's buffer into every other rank's buffer, so all
// ranks copy at once and each writes (n - 1) / n of the buffer.
Status ZeroCopyBroadcast(Context &ctx, const Call &c) {
  Peers peers(ctx, c);
  HZC_RETURN_IF_ERROR(peers.Map());
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const Blocks blk(static_cast<size_t>(c.count) * TypeSize(c.dtype), 1, n);
  if (blk.size(me) != 0) {
    const uint8_t *from = peers.send[c.root] + blk.first(me);
    HZC_RETURN_IF_ERROR(peers.Guarded([&] {
      for (uint32_t i = 1; i < n; ++i) {
        const uint32_t p = (me + i) % n;
        if (p != c.root) {
          std::memcpy(peers.recv[p] + blk.first(me), from, blk.size(me));
        }
      }
      if (me != c.root) {
        std::memcpy(peers.recv[me] + blk.first(me), from, blk.size(me));
      }
    }));
  }
  return peers.End();
}

// This rank reduces its own slice straight from every peer's input.
Status ZeroCopyReduceScatter(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  Peers peers(ctx, c);
  HZC_RETURN_IF_ERROR(peers.Map());
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const size_t b = static_cast<size_t>(c.count) * TypeSize(c.dtype);
  std::vector<const void *> in(n);
  for (uint32_t p = 0; p < n; ++p) {
    in[p] = peers.send[p] + me * b;
  }
  void *out = peers.recv[me];
  HZC_RETURN_IF_ERROR(
      peers.Guarded([&] { reduce.To(&out, 1, in.data(), n, c.count, b >= kStreamBytes); }));
  return peers.End();
}

// One sweep: this rank reduces its block of every rank's input and writes the result into
// every rank's output (in place too: only this rank reads or writes its block).
Status ZeroCopyAllReduce(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  Peers peers(ctx, c);
  HZC_RETURN_IF_ERROR(peers.Map());
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const size_t es = TypeSize(c.dtype);
  const Blocks blk(c.count, es, n);
  if (blk.size(me) != 0) {
    std::vector<const void *> in(n);
    std::vector<void *> out(n);
    for (uint32_t p = 0; p < n; ++p) {
      in[p] = peers.send[p] + blk.first(me) * es;
      out[p] = peers.recv[p] + blk.first(me) * es;
    }
    const bool stream = blk.size(me) * es * n >= kStreamBytes;
    HZC_RETURN_IF_ERROR(
        peers.Guarded([&] { reduce.To(out.data(), n, in.data(), n, blk.size(me), stream); }));
  }
  return peers.End();
}

}  // namespace hzc::coll
