// SPDX-License-Identifier: Apache-2.0
#include "coll/inline.h"

#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "coll/control.h"
#include "coll/kinds.h"
#include "coll/reduce.h"

namespace hzc::coll {

namespace {

// Bytes of one rank's block of @c.
size_t BlockBytes(const Call &c) {
  return static_cast<size_t>(c.count) * TypeSize(c.dtype);
}

// Rank @r's inline input of the call, which must hold @bytes.
Expected<const uint8_t *> Input(const Context &ctx, uint32_t r, size_t bytes) {
  const std::span<const uint8_t> in = ctx.area->InlineInput(r, ctx.seq);
  if (in.size() < bytes) {
    return Error(HCCL_E_REMOTE,
                 "rank {} posted its input inline but its {}-byte inline input cannot hold the "
                 "call's {} bytes",
                 r, in.size(), bytes);
  }
  return in.data();
}

// Every rank's inline input of the call (by rank), from byte @offset on, @bytes of it, this
// rank's own from @own (its own copy may still wait in this CPU's store buffer, where reading it
// back stalls); on the stack up to 64 ranks (a small call allocates nothing). HCCL_E_REMOTE
// (status()) when a rank's input is shorter: a peer that broke the protocol.
class Regions {
 public:
  Regions(const Context &ctx, size_t offset, size_t bytes, const void *own)
      : n_(ctx.area->nranks()) {
    if (n_ > kStack) {
      heap_.resize(n_);
    }
    const void **p = n_ > kStack ? heap_.data() : stack_.data();
    for (uint32_t r = 0; r < n_ && status_.ok(); ++r) {
      if (r == ctx.area->rank()) {
        p[r] = static_cast<const uint8_t *>(own) + offset;
        continue;
      }
      auto in = Input(ctx, r, offset + bytes);
      if (in.ok()) {
        p[r] = *in + offset;
      } else {
        status_ = in.status();
      }
    }
    data_ = p;
  }
  Regions(const Regions &) = delete;  // data_ points into this object
  Regions &operator=(const Regions &) = delete;
  const Status &status() const { return status_; }
  const void *const *data() const { return data_; }
  size_t size() const { return n_; }

 private:
  static constexpr uint32_t kStack = 64;
  uint32_t n_;
  std::array<const void *, kStack> stack_;  // [0, n_) set by the constructor (not zeroed: per call)
  std::vector<const void *> heap_;
  const void *const *data_ = nullptr;
  Status status_;
};

}  // namespace

size_t InlineInputBytes(const Call &c, uint32_t n) {
  const KindInfo &k = Info(c.kind);
  return k.send_per_rank ? BlockBytes(c) * n : BlockBytes(c);
}

uint32_t InlinePost(ControlArea &area, const Call &c, uint64_t seq, size_t input) {
  if (input > area.inline_bytes() || area.inline_bytes() == 0) {
    return 0;
  }
  const bool line = input <= ControlArea::kLineData;
  const bool eager = !line && input <= ControlArea::kEagerData;
  const bool holds = c.kind != Kind::kBroadcast || c.root == area.rank();
  const void *from = c.kind == Kind::kBroadcast ? c.recv : c.send;
  if (holds && input != 0) {
    uint8_t *to = line    ? area.LineData(seq)
                  : eager ? area.EagerData(seq)
                          : area.Inline(area.rank(), seq);
    std::memcpy(to, from, input);
  }
  return ControlArea::kInlined | (line ? ControlArea::kLineHolds : 0) |
         (eager ? ControlArea::kEagerHolds : 0);
}

bool InlineEager(const ControlArea &area, const Call &c) {
  const size_t input = c.kind == Kind::kBroadcast ? BlockBytes(c) : 0;
  return c.kind == Kind::kBroadcast && c.root == area.rank() && area.inline_bytes() != 0 &&
         input <= area.inline_bytes() && input <= ControlArea::kEagerData;
}

Status InlineAllGather(Context &ctx, const Call &c) {
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const size_t b = BlockBytes(c);
  auto *const out = static_cast<uint8_t *>(c.recv);
  for (uint32_t p = 0; p < n; ++p) {
    const void *from = c.send;
    if (p != me) {
      auto in = Input(ctx, p, b);
      HZC_RETURN_IF_ERROR(in.status());
      from = *in;
    }
    if (out + p * b != from) {
      std::memmove(out + p * b, from, b);  // own block: in place when equal
    }
  }
  return Status::Ok();
}

Status InlineBroadcast(Context &ctx, const Call &c) {
  if (ctx.area->rank() != c.root) {
    auto in = Input(ctx, c.root, BlockBytes(c));
    HZC_RETURN_IF_ERROR(in.status());
    std::memcpy(c.recv, *in, BlockBytes(c));
  }
  return Status::Ok();
}

// The peers' inputs are read from their inline copies, this rank's from its buffer (a reduction
// reads each block before it writes it, so the output may be the input).
Status InlineReduceScatter(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const Regions in(ctx, ctx.area->rank() * BlockBytes(c), BlockBytes(c), c.send);
  HZC_RETURN_IF_ERROR(in.status());
  reduce(c.recv, in.data(), in.size(), c.count);
  return Status::Ok();
}

// Every rank reduces the whole buffer in rank order: the same bits on every rank, and the
// same as the other paths (coll/reduce.h).
Status InlineAllReduce(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const Regions in(ctx, 0, BlockBytes(c), c.send);
  HZC_RETURN_IF_ERROR(in.status());
  reduce(c.recv, in.data(), in.size(), c.count);
  return Status::Ok();
}

}  // namespace hzc::coll
