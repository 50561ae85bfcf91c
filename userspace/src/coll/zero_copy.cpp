// SPDX-License-Identifier: Apache-2.0
#include "coll/zero_copy.h"

#include <algorithm>
#include <cstring>

#include "coll/reduce.h"
#include "transport/transport.h"

namespace hzc::coll {

namespace {

// Bytes of the send and recv buffers of one rank.
void Lengths(const Call &c, uint32_t n, size_t *send, size_t *recv) {
  const size_t b = static_cast<size_t>(c.count) * TypeSize(c.dtype);
  switch (c.kind) {
    case Kind::kAllGather:
      *send = b, *recv = b * n;
      break;
    case Kind::kReduceScatter:
      *send = b * n, *recv = b;
      break;
    default:
      *send = b, *recv = b;
      break;
  }
}

}  // namespace

bool ZeroCopy::Eligible(Communicator &comm, const Call &c) {
  transport::PeerMemory *pm = comm.peer_memory();
  if (pm == nullptr || c.kind == Kind::kBarrier) {
    return false;
  }
  size_t send = 0, recv = 0;
  Lengths(c, comm.size(), &send, &recv);
  if (send == 0) {
    return false;
  }
  const void *in = c.kind == Kind::kBroadcast ? c.recv : c.send;
  return pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(in), send).ok() &&
         pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(c.recv), recv).ok();
}

Status ZeroCopy::MapPeers() {
  transport::PeerMemory *pm = comm_.peer_memory();
  const uint32_t n = area_.nranks();
  size_t send = 0, recv = 0;
  Lengths(c_, n, &send, &recv);
  send_.assign(n, nullptr);
  recv_.assign(n, nullptr);
  for (uint32_t p = 0; p < n; ++p) {
    const CallDesc d = area_.Posted(p, seq_);
    const uint64_t in = c_.kind == Kind::kBroadcast ? d.recv : d.send;
    if (p == area_.rank()) {
      send_[p] = static_cast<const uint8_t *>(c_.kind == Kind::kBroadcast ? c_.recv : c_.send);
      recv_[p] = static_cast<uint8_t *>(c_.recv);
      continue;
    }
    // The peer found its buffers activated when it posted them: a failure now means it
    // deactivated them (or died) since.
    auto s = pm->Translate(p, in, send);
    if (!s.ok()) {
      return Error(HCCL_E_REMOTE, "rank {}'s input is no longer accessible: {}", p,
                   s.status().message());
    }
    auto r = pm->Translate(p, d.recv, recv);
    if (!r.ok()) {
      return Error(HCCL_E_REMOTE, "rank {}'s output is no longer accessible: {}", p,
                   r.status().message());
    }
    send_[p] = static_cast<const uint8_t *>(*s);
    recv_[p] = static_cast<uint8_t *>(*r);
    const auto sb = reinterpret_cast<uintptr_t>(send_[p]);
    const auto rb = reinterpret_cast<uintptr_t>(recv_[p]);
    spans_.push_back({.begin = sb, .end = sb + send, .rank = p});
    spans_.push_back({.begin = rb, .end = rb + recv, .rank = p});
  }
  return Status::Ok();
}

Status ZeroCopy::Guarded(const std::function<void()> &fn) {
  const Fault f = RunGuarded(spans_, fn);
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s buffer became inaccessible during the call (deactivated, unset or "
                 "the rank died): fault at {:#x} of its peer mapping",
                 f.rank, f.address);
  }
  return Status::Ok();
}

namespace {

// Writes of at least this many bytes per call and rank go around the caches (StreamCopy):
// larger than a core's L2, so the output would not stay there for its reader anyway.
constexpr size_t kStreamBytes = size_t{4} << 20;

}  // namespace

Status ZeroCopy::Run() {
  HZC_RETURN_IF_ERROR(MapPeers());
  const uint32_t n = area_.nranks(), me = area_.rank();
  const size_t es = TypeSize(c_.dtype), b = static_cast<size_t>(c_.count) * es;
  ReduceFn reduce = nullptr;
  if (c_.kind == Kind::kReduceScatter || c_.kind == Kind::kAllReduce) {
    HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  }
  std::vector<const void *> in(n);
  std::vector<void *> out;
  switch (c_.kind) {
    case Kind::kAllGather:
      // Pull every rank's block, starting with the next rank so ranks spread their reads.
      HZC_RETURN_IF_ERROR(Guarded([&] {
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t p = (me + i) % n;
          uint8_t *to = recv_[me] + p * b;
          if (to != send_[p]) {
            std::memcpy(to, send_[p], b);
          }
        }
      }));
      break;
    case Kind::kBroadcast: {
      // Every rank copies its block of the root's buffer into every other rank's buffer, so
      // all ranks copy at once and each writes (n - 1) / n of the buffer.
      const Blocks blk(b, 1, n);
      if (blk.size(me) != 0) {
        HZC_RETURN_IF_ERROR(Guarded([&] {
          for (uint32_t i = 1; i < n; ++i) {
            const uint32_t p = (me + i) % n;
            if (p != c_.root) {
              std::memcpy(recv_[p] + blk.first(me), send_[c_.root] + blk.first(me), blk.size(me));
            }
          }
          if (me != c_.root) {
            std::memcpy(recv_[me] + blk.first(me), send_[c_.root] + blk.first(me), blk.size(me));
          }
        }));
      }
      break;
    }
    case Kind::kReduceScatter:
      for (uint32_t p = 0; p < n; ++p) {
        in[p] = send_[p] + me * b;
      }
      out.push_back(recv_[me]);
      HZC_RETURN_IF_ERROR(
          Guarded([&] { reduce.To(out.data(), 1, in.data(), n, c_.count, b >= kStreamBytes); }));
      break;
    case Kind::kAllReduce: {
      // One sweep: this rank reduces its block of every rank's input and writes the result
      // into every rank's output (in place too: only this rank reads or writes its block).
      const Blocks blk(c_.count, es, n);
      if (blk.size(me) != 0) {
        for (uint32_t p = 0; p < n; ++p) {
          in[p] = send_[p] + blk.first(me) * es;
          out.push_back(recv_[p] + blk.first(me) * es);
        }
        const bool stream = blk.size(me) * es * n >= kStreamBytes;
        HZC_RETURN_IF_ERROR(
            Guarded([&] { reduce.To(out.data(), n, in.data(), n, blk.size(me), stream); }));
      }
      break;
    }
    default:  // Barrier; the exchanges run in coll/exchange.cpp
      break;
  }
  // Peers may still be reading this rank's buffers, or writing them: leave together.
  return Step("the end of the call");
}

}  // namespace hzc::coll
