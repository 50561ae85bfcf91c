// SPDX-License-Identifier: Apache-2.0
#include "coll/staging.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "coll/control.h"
#include "coll/reduce.h"

namespace hzc::coll {

namespace {

constexpr size_t kAlign = 64;

size_t AlignDown(size_t v) {
  return v / kAlign * kAlign;
}

// What every staging algorithm works with.
struct Stage {
  Stage(Context &ctx, const Call &call)
      : area(*ctx.area), c(call), deadline(ctx.deadline), n(area.nranks()), me(area.rank()) {}

  Status Step() { return area.Barrier(deadline, "the staging step"); }
  uint8_t *Half(size_t k) const { return area.staging() + (k % 2) * (area.staging_bytes() / 2); }
  const uint8_t *Send() const { return static_cast<const uint8_t *>(c.send); }
  uint8_t *Recv() const { return static_cast<uint8_t *>(c.recv); }
  // Bytes one rank contributes (AllGather, ReduceScatter: per rank block) or holds.
  size_t Bytes() const { return static_cast<size_t>(c.count) * TypeSize(c.dtype); }

  ControlArea &area;
  const Call &c;
  const std::chrono::steady_clock::time_point deadline;
  const uint32_t n;
  const uint32_t me;
};

}  // namespace

// Double-buffered: a chunk is written into one half while the other half's chunk may still
// be read; one barrier per chunk.
Status StagingAllGather(Context &ctx, const Call &c) {
  Stage s(ctx, c);
  const size_t bytes = s.Bytes(), slot = AlignDown(s.area.staging_bytes() / 2 / s.n);
  for (size_t k = 0, off = 0; off < bytes; ++k, off += slot) {
    const size_t len = std::min(slot, bytes - off);
    std::memcpy(s.Half(k) + s.me * slot, s.Send() + off, len);
    HZC_RETURN_IF_ERROR(s.Step());
    for (uint32_t p = 0; p < s.n; ++p) {
      uint8_t *to = s.Recv() + p * bytes + off;
      const uint8_t *from = p == s.me ? s.Send() + off : s.Half(k) + p * slot;
      if (to != from) {
        std::memmove(to, from, len);
      }
    }
  }
  return Status::Ok();
}

Status StagingBroadcast(Context &ctx, const Call &c) {
  Stage s(ctx, c);
  const size_t bytes = s.Bytes(), slot = AlignDown(s.area.staging_bytes() / 2);
  for (size_t k = 0, off = 0; off < bytes; ++k, off += slot) {
    const size_t len = std::min(slot, bytes - off);
    if (s.me == c.root) {
      std::memcpy(s.Half(k), s.Send() + off, len);
    }
    HZC_RETURN_IF_ERROR(s.Step());
    if (s.me != c.root) {
      std::memcpy(s.Recv() + off, s.Half(k), len);
    }
  }
  return Status::Ok();
}

// Block (p, q) of a half holds rank p's input for rank q; rank q reduces its own input and
// the blocks (p, q), in rank order.
Status StagingReduceScatter(Context &ctx, const Call &c) {
  Stage s(ctx, c);
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const uint32_t n = s.n, me = s.me;
  const size_t es = TypeSize(c.dtype), bytes = s.Bytes();
  const size_t blk = AlignDown(s.area.staging_bytes() / 2 / (n * n));
  std::vector<const void *> in(n);
  for (size_t k = 0, off = 0; off < bytes; ++k, off += blk) {
    const size_t len = std::min(blk, bytes - off);
    for (uint32_t q = 0; q < n; ++q) {
      if (q != me) {
        std::memcpy(s.Half(k) + (me * n + q) * blk, s.Send() + q * bytes + off, len);
      }
    }
    HZC_RETURN_IF_ERROR(s.Step());
    for (uint32_t p = 0; p < n; ++p) {
      in[p] = p == me ? s.Send() + me * bytes + off : s.Half(k) + (p * n + me) * blk;
    }
    reduce(s.Recv() + off, in.data(), n, len / es);
  }
  return Status::Ok();
}

// Per chunk: every rank stages its input; rank r reduces segment r of the chunk into the
// result region; everyone copies the result out. Two barriers per chunk, no double buffer
// needed (the barriers separate every write from the reads of the previous chunk).
Status StagingAllReduce(Context &ctx, const Call &c) {
  Stage s(ctx, c);
  ReduceFn reduce = nullptr;
  HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &reduce));
  const uint32_t n = s.n, me = s.me;
  const size_t es = TypeSize(c.dtype), bytes = s.Bytes();
  const size_t slot = AlignDown(s.area.staging_bytes() / (n + 1));
  uint8_t *const staging = s.area.staging(), *const result = staging + n * slot;
  std::vector<const void *> in(n);
  for (size_t off = 0; off < bytes; off += slot) {
    const size_t len = std::min(slot, bytes - off), elems = len / es;
    std::memcpy(staging + me * slot, s.Send() + off, len);
    HZC_RETURN_IF_ERROR(s.Step());
    const Blocks blk(elems, es, n);
    if (blk.size(me) != 0) {
      for (uint32_t p = 0; p < n; ++p) {
        in[p] = staging + p * slot + blk.first(me) * es;
      }
      reduce(result + blk.first(me) * es, in.data(), n, blk.size(me));
    }
    HZC_RETURN_IF_ERROR(s.Step());
    std::memcpy(s.Recv() + off, result, len);
  }
  return Status::Ok();
}

}  // namespace hzc::coll
