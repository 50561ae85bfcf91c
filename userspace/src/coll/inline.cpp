// SPDX-License-Identifier: Apache-2.0
#include "coll/inline.h"

#include <array>
#include <cstring>
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

// Every rank's inline region of the call (by rank), from byte @offset on; on the stack up to
// 64 ranks (a small call allocates nothing).
class Regions {
 public:
  Regions(const Context &ctx, size_t offset) : n_(ctx.area->nranks()) {
    if (n_ > kStack) {
      heap_.resize(n_);
    }
    const void **p = n_ > kStack ? heap_.data() : stack_.data();
    for (uint32_t r = 0; r < n_; ++r) {
      p[r] = ctx.area->Inline(r, ctx.seq) + offset;
    }
    data_ = p;
  }
  Regions(const Regions &) = delete;  // data_ points into this object
  Regions &operator=(const Regions &) = delete;
  const void *const *data() const { return data_; }
  size_t size() const { return n_; }

 private:
  static constexpr uint32_t kStack = 64;
  uint32_t n_;
  std::array<const void *, kStack> stack_{};
  std::vector<const void *> heap_;
  const void *const *data_ = nullptr;
};

}  // namespace

size_t InlineInputBytes(const Call &c, uint32_t n) {
  const KindInfo &k = Info(c.kind);
  return k.send_per_rank ? BlockBytes(c) * n : BlockBytes(c);
}

bool InlinePost(ControlArea &area, const Call &c, uint64_t seq, size_t input) {
  if (input > area.inline_bytes() || area.inline_bytes() == 0) {
    return false;
  }
  const bool holds = c.kind != Kind::kBroadcast || c.root == area.rank();
  const void *from = c.kind == Kind::kBroadcast ? c.recv : c.send;
  if (holds && input != 0) {
    std::memcpy(area.Inline(area.rank(), seq), from, input);
  }
  return true;
}

Status InlineAllGather(Context &ctx, const Call &c) {
  const uint32_t n = ctx.area->nranks(), me = ctx.area->rank();
  const size_t b = BlockBytes(c);
  auto *const out = static_cast<uint8_t *>(c.recv);
  for (uint32_t p = 0; p < n; ++p) {
    const void *from = p == me ? c.send : ctx.area->Inline(p, ctx.seq);
    if (out + p * b != from) {
      std::memmove(out + p * b, from, b);  // own block: in place when equal
    }
  }
  return Status::Ok();
}

Status InlineBroadcast(Context &ctx, const Call &c) {
  if (ctx.area->rank() != c.root) {
    std::memcpy(c.recv, ctx.area->Inline(c.root, ctx.seq), BlockBytes(c));
  }
  return Status::Ok();
}

// Every input is read from the inline copies (this rank's own too), so the output may be the
// input.
Status InlineReduceScatter(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const Regions in(ctx, ctx.area->rank() * BlockBytes(c));
  reduce(c.recv, in.data(), in.size(), c.count);
  return Status::Ok();
}

// Every rank reduces the whole buffer in rank order: the same bits on every rank, and the
// same as the other paths (coll/reduce.h).
Status InlineAllReduce(Context &ctx, const Call &c) {
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const Regions in(ctx, 0);
  reduce(c.recv, in.data(), in.size(), c.count);
  return Status::Ok();
}

}  // namespace hzc::coll
