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

#include "base/status.h"

namespace hzc::coll {

// Bytes per element of @type; 0 if @type is not an HcclDataType value.
size_t TypeSize(HcclDataType type);
// "int8", "fp16", ... ; "unknown" for other values.
const char *TypeName(HcclDataType type);
// "sum", "prod", "max", "min"; "unknown" for other values.
const char *OpName(HcclReduceOp op);

// Combine @nin inputs of @count elements each into @out (which may be one of the inputs).
using ReduceFn = void (*)(void *out, const void *const *in, size_t nin, size_t count);

// The kernel for @type and @op in @fn: HCCL_E_PARA for values outside the enums,
// HCCL_E_NOT_SUPPORT for types that cannot be reduced (INT128, HIF8, FP8*), naming both.
Status GetReduce(HcclDataType type, HcclReduceOp op, ReduceFn *fn);

}  // namespace hzc::coll
