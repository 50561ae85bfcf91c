// SPDX-License-Identifier: Apache-2.0
// Reduction kernels, written so that GCC vectorises them (this file is built with -O3):
// straight loops over a block of accumulators on the stack, branch-free conversions and
// branch-free operators, so every loop body is a select/convert/arith sequence.
#include "coll/reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// Built for AVX-512 and AVX2 machines too, picked when the library loads: fp16 and bf16 need
// their conversion instructions (F16C, AVX-512 BW's packs) to run at memory speed.
#if defined(__x86_64__) && defined(__GNUC__)
#define HZC_KERNEL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HZC_KERNEL_CLONES
#endif

template <typename Cvt, template <typename> class Op>
HZC_KERNEL_CLONES void Kernel(void *const *out, size_t nout, const void *const *in, size_t nin,
                              size_t count, bool stream) {
  using T = typename Cvt::Elem;
  using A = typename Cvt::Acc;
  constexpr size_t kBlock = 2048 / sizeof(A) * 2;  // 4 KiB of accumulators: stays in L1
  A acc[kBlock];
  T res[kBlock];
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
    if (nout == 1 && !stream) {
      T *o = static_cast<T *>(out[0]) + base;
      for (size_t i = 0; i < n; ++i) {
        o[i] = Cvt::Store(acc[i]);
      }
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      res[i] = Cvt::Store(acc[i]);
    }
    for (size_t o = 0; o < nout; ++o) {
      T *to = static_cast<T *>(out[o]) + base;
      if (stream) {
        StreamCopy(to, res, n * sizeof(T));
      } else {
        std::memcpy(to, res, n * sizeof(T));
      }
    }
  }
  if (stream) {
    StreamFence();
  }
}

template <typename Cvt>
ReduceFn ForOp(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM:
      return ReduceFn(&Kernel<Cvt, Sum>);
    case HCCL_REDUCE_PROD:
      return ReduceFn(&Kernel<Cvt, Prod>);
    case HCCL_REDUCE_MAX:
      return ReduceFn(&Kernel<Cvt, Max>);
    case HCCL_REDUCE_MIN:
      return ReduceFn(&Kernel<Cvt, Min>);
    default:
      return nullptr;
  }
}

}  // namespace

void StreamCopy(void *to, const void *from, size_t bytes) {
  auto *d = static_cast<uint8_t *>(to);
  const auto *s = static_cast<const uint8_t *>(from);
#if defined(__SSE2__)
  // Plain stores up to the first 16-byte boundary, then 64 bytes (a line) per round.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), e);
  }
  for (; bytes >= 16; d += 16, s += 16, bytes -= 16) {
    _mm_stream_si128(reinterpret_cast<__m128i *>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i *>(s)));
  }
#endif
  std::memcpy(d, s, bytes);
}

void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

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
  if (!fn) {
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
