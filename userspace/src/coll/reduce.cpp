// SPDX-License-Identifier: Apache-2.0
// Reduction kernels, written so that GCC vectorises them (this file is built with -O3):
// straight loops over a block of accumulators on the stack, branch-free conversions and
// branch-free operators, so every loop body is a select/convert/arith sequence.
#include "coll/reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

namespace hzc::coll {

namespace {

// Native types: the accumulator is the element type itself.
template <typename T>
struct Native {
  using Elem = T;
  using Acc = T;
  static Acc Load(T v) { return v; }
  static T Store(Acc a) { return a; }
};

// @c ? @a : @b as mask arithmetic, which the vectoriser never turns into a branch.
inline uint32_t Select(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

// IEEE binary16 <-> float, round to nearest even, branch-free.
struct Half {
  using Elem = uint16_t;
  using Acc = float;
  static float Load(uint16_t h) {
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t em = static_cast<uint32_t>(h) & 0x7fffu;
    // Normal and subnormal halves: the bits shifted into a float's place, rescaled by 2^112.
    const uint32_t scaled = std::bit_cast<uint32_t>(std::bit_cast<float>(em << 13) * 0x1p112f);
    const uint32_t special = (em << 13) | 0x7f800000u;  // inf and NaN keep their payload
    return std::bit_cast<float>(Select(em >= 0x7c00u, special, scaled) | sign);
  }
  static uint16_t Store(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    // Subnormal results: adding 0.5 lets the FPU round the mantissa bits into place.
    const float abs_f = std::bit_cast<float>(ax);
    const uint32_t sub = std::bit_cast<uint32_t>(abs_f + 0.5f) - 0x3f000000u;
    // Normal results: rebias the exponent (-112 << 23) and round to nearest even.
    const uint32_t odd = (ax >> 13) & 1u;
    const uint32_t normal = (ax + 0xc8000fffu + odd) >> 13;
    const uint32_t big = Select(ax > 0x7f800000u, 0x7e00u, 0x7c00u);  // NaN : overflow, inf
    const uint32_t r = Select(ax < 0x38800000u, sub, Select(ax < 0x47800000u, normal, big));
    return static_cast<uint16_t>(r | sign);
  }
};

// bfloat16 <-> float, round to nearest even, NaN stays a (quiet) NaN.
struct BHalf {
  using Elem = uint16_t;
  using Acc = float;
  static float Load(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
  static uint16_t Store(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x40u;
    return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
};

// Integer arithmetic in a wide unsigned type: wraps around, never undefined.
template <typename A>
using Wide = std::conditional_t<(sizeof(A) < 4), uint32_t, std::make_unsigned_t<A>>;

template <typename A>
struct Sum {
  static A Apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return static_cast<A>(static_cast<Wide<A>>(a) + static_cast<Wide<A>>(b));
    } else {
      return a + b;
    }
  }
};

template <typename A>
struct Prod {
  static A Apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return static_cast<A>(static_cast<Wide<A>>(a) * static_cast<Wide<A>>(b));
    } else {
      return a * b;
    }
  }
};

template <typename A>
struct Max {
  static A Apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return b > a ? b : a;
    } else {
      return (b > a || b != b) ? b : a;  // a NaN in b wins; a NaN in a stays
    }
  }
};

template <typename A>
struct Min {
  static A Apply(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return b < a ? b : a;
    } else {
      return (b < a || b != b) ? b : a;
    }
  }
};

template <typename Cvt, template <typename> class Op>
void Kernel(void *out, const void *const *in, size_t nin, size_t count) {
  using T = typename Cvt::Elem;
  using A = typename Cvt::Acc;
  constexpr size_t kBlock = 2048 / sizeof(A) * 2;  // 4 KiB of accumulators: stays in L1
  A acc[kBlock];
  T *o = static_cast<T *>(out);
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    const T *first = static_cast<const T *>(in[0]) + base;
    for (size_t i = 0; i < n; ++i) {
      acc[i] = Cvt::Load(first[i]);
    }
    for (size_t p = 1; p < nin; ++p) {
      const T *next = static_cast<const T *>(in[p]) + base;
      for (size_t i = 0; i < n; ++i) {
        acc[i] = Op<A>::Apply(acc[i], Cvt::Load(next[i]));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      o[base + i] = Cvt::Store(acc[i]);
    }
  }
}

template <typename Cvt>
ReduceFn ForOp(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM:
      return &Kernel<Cvt, Sum>;
    case HCCL_REDUCE_PROD:
      return &Kernel<Cvt, Prod>;
    case HCCL_REDUCE_MAX:
      return &Kernel<Cvt, Max>;
    case HCCL_REDUCE_MIN:
      return &Kernel<Cvt, Min>;
    default:
      return nullptr;
  }
}

}  // namespace

size_t TypeSize(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
    case HCCL_DATA_TYPE_HIF8:
    case HCCL_DATA_TYPE_FP8E4M3:
    case HCCL_DATA_TYPE_FP8E5M2:
    case HCCL_DATA_TYPE_FP8E8M0:
      return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16:
      return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32:
      return 4;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
    case HCCL_DATA_TYPE_FP64:
      return 8;
    case HCCL_DATA_TYPE_INT128:
      return 16;
    default:
      return 0;
  }
}

const char *TypeName(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
      return "int8";
    case HCCL_DATA_TYPE_INT16:
      return "int16";
    case HCCL_DATA_TYPE_INT32:
      return "int32";
    case HCCL_DATA_TYPE_FP16:
      return "fp16";
    case HCCL_DATA_TYPE_FP32:
      return "fp32";
    case HCCL_DATA_TYPE_INT64:
      return "int64";
    case HCCL_DATA_TYPE_UINT64:
      return "uint64";
    case HCCL_DATA_TYPE_UINT8:
      return "uint8";
    case HCCL_DATA_TYPE_UINT16:
      return "uint16";
    case HCCL_DATA_TYPE_UINT32:
      return "uint32";
    case HCCL_DATA_TYPE_FP64:
      return "fp64";
    case HCCL_DATA_TYPE_BFP16:
      return "bfp16";
    case HCCL_DATA_TYPE_INT128:
      return "int128";
    case HCCL_DATA_TYPE_HIF8:
      return "hif8";
    case HCCL_DATA_TYPE_FP8E4M3:
      return "fp8e4m3";
    case HCCL_DATA_TYPE_FP8E5M2:
      return "fp8e5m2";
    case HCCL_DATA_TYPE_FP8E8M0:
      return "fp8e8m0";
    default:
      return "unknown";
  }
}

const char *OpName(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM:
      return "sum";
    case HCCL_REDUCE_PROD:
      return "prod";
    case HCCL_REDUCE_MAX:
      return "max";
    case HCCL_REDUCE_MIN:
      return "min";
    default:
      return "unknown";
  }
}

Status GetReduce(HcclDataType type, HcclReduceOp op, ReduceFn *out) {
  if (TypeSize(type) == 0) {
    return Error(HCCL_E_PARA, "dataType={}: not an HcclDataType", static_cast<int>(type));
  }
  if (op != HCCL_REDUCE_SUM && op != HCCL_REDUCE_PROD && op != HCCL_REDUCE_MAX &&
      op != HCCL_REDUCE_MIN) {
    return Error(HCCL_E_PARA, "op={}: not an HcclReduceOp (sum 0, prod 1, max 2, min 3)",
                 static_cast<int>(op));
  }
  ReduceFn fn = nullptr;
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
      fn = ForOp<Native<int8_t>>(op);
      break;
    case HCCL_DATA_TYPE_INT16:
      fn = ForOp<Native<int16_t>>(op);
      break;
    case HCCL_DATA_TYPE_INT32:
      fn = ForOp<Native<int32_t>>(op);
      break;
    case HCCL_DATA_TYPE_INT64:
      fn = ForOp<Native<int64_t>>(op);
      break;
    case HCCL_DATA_TYPE_UINT8:
      fn = ForOp<Native<uint8_t>>(op);
      break;
    case HCCL_DATA_TYPE_UINT16:
      fn = ForOp<Native<uint16_t>>(op);
      break;
    case HCCL_DATA_TYPE_UINT32:
      fn = ForOp<Native<uint32_t>>(op);
      break;
    case HCCL_DATA_TYPE_UINT64:
      fn = ForOp<Native<uint64_t>>(op);
      break;
    case HCCL_DATA_TYPE_FP16:
      fn = ForOp<Half>(op);
      break;
    case HCCL_DATA_TYPE_BFP16:
      fn = ForOp<BHalf>(op);
      break;
    case HCCL_DATA_TYPE_FP32:
      fn = ForOp<Native<float>>(op);
      break;
    case HCCL_DATA_TYPE_FP64:
      fn = ForOp<Native<double>>(op);
      break;
    default:
      break;
  }
  if (fn == nullptr) {
    return Error(
        HCCL_E_NOT_SUPPORT,
        "dataType={} with op={}: {} cannot be reduced (only the collectives that move "
        "data take it); reducible types are int8..int64, uint8..uint64, fp16, bfp16, fp32, "
        "fp64",
        TypeName(type), OpName(op), TypeName(type));
  }
  *out = fn;
  return Status::Ok();
}

}  // namespace hzc::coll
