// SPDX-License-Identifier: Apache-2.0
// Element types and reduction kernels of the collectives.
//
// Semantics (the same on every rank and every path, so results are bitwise identical):
// - Inputs are combined in rank order: out = op(...op(op(in[0], in[1]), in[2])..., in[n-1]).
// - Integers wrap around (two's complement) on SUM and PROD overflow.
// - FP16 and BFP16 are accumulated in float across all inputs and rounded once to the nearest
//   even value at the end; FP32 and FP64 are accumulated in their own type.
// - SUM and PROD follow IEEE 754 (inf - inf and 0 * inf give NaN; NaN propagates).
// - MAX and MIN propagate NaN: the result is NaN if any input is NaN. Between -0.0 and +0.0
//   (equal values) the earlier rank's value is kept.
#pragma once

#include <hccl/hccl_types.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace hzc::coll {

// Bytes per element of @type; 0 if @type is not an HcclDataType value.
size_t TypeSize(HcclDataType type);
// "int8", "fp16", ... ; "unknown" for other values.
const char *TypeName(HcclDataType type);
// "sum", "prod", "max", "min"; "unknown" for other values.
const char *OpName(HcclReduceOp op);

// Writes @bytes from @from to @to with non-temporal stores where the CPU has them (plain
// stores elsewhere): for data that is not read again soon and larger than the caches, which
// saves the read of every destination line before its write. Call StreamFence() before
// another thread or process may read what was written.
void StreamCopy(void *to, const void *from, size_t bytes);
void StreamFence();

// A reduction kernel: combines @nin inputs of @count elements each, block by block (every
// block of the inputs is read before the block of the outputs is written, so an output may be
// one of the inputs).
class ReduceFn {
 public:
  using Kernel = void (*)(void *const *out, size_t nout, const void *const *in, size_t nin,
                          size_t count, bool stream);
  ReduceFn(std::nullptr_t = nullptr) {}  // NOLINT(google-explicit-constructor): none yet
  explicit ReduceFn(Kernel k) : k_(k) {}
  explicit operator bool() const { return k_ != nullptr; }

  // Into @out.
  void operator()(void *out, const void *const *in, size_t nin, size_t count) const {
    k_(&out, 1, in, nin, count, false);
  }
  // The same result into each of the @nout outputs (one sweep over the inputs); @stream writes
  // them with StreamCopy and ends with StreamFence().
  void To(void *const *out, size_t nout, const void *const *in, size_t nin, size_t count,
          bool stream) const {
    k_(out, nout, in, nin, count, stream);
  }

 private:
  Kernel k_ = nullptr;
};

// The kernel for @type and @op in @fn: HCCL_E_PARA for values outside the enums,
// HCCL_E_NOT_SUPPORT for types that cannot be reduced (INT128, HIF8, FP8*), naming both.
Status GetReduce(HcclDataType type, HcclReduceOp op, ReduceFn *fn);

}  // namespace hzc::coll
