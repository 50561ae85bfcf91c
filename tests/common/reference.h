// SPDX-License-Identifier: Apache-2.0
// Scalar reference of the reductions, written independently of the kernels: wide integer
// arithmetic, the compiler's _Float16 conversions and a nearest-even bfloat16 rounding by
// comparison. Shared by the host and guest tests of the collectives.
#pragma once

#include <hccl/hccl_types.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hzc::test {

// Bytes per element of @type, from the HCCL documentation (independent of the library's own
// table); 0 for a value that is not a data type.
inline size_t RefTypeSize(HcclDataType type) {
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

inline float BfToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBf(float f) {
  if (std::isnan(f)) {
    return static_cast<uint16_t>((std::bit_cast<uint32_t>(f) >> 16) | 0x40);
  }
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);  // truncated towards zero
  if ((bits & 0xffff) == 0) {
    return lo;
  }
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next away from zero
  const double dlo = std::fabs(static_cast<double>(f) - BfToFloat(lo));
  const double dhi = std::fabs(static_cast<double>(BfToFloat(hi)) - f);
  if (dlo < dhi) {
    return lo;
  }
  if (dhi < dlo) {
    return hi;
  }
  return (lo & 1) ? hi : lo;
}

inline float HalfToFloat(uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
inline uint16_t FloatToHalf(float f) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}

template <typename A>
A RefOp(HcclReduceOp op, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using W = std::conditional_t<std::is_signed_v<A>, __int128, unsigned __int128>;
    const W wa = a, wb = b;
    switch (op) {
      case HCCL_REDUCE_SUM:
        return static_cast<A>(static_cast<unsigned __int128>(wa + wb));
      case HCCL_REDUCE_PROD:
        return static_cast<A>(static_cast<unsigned __int128>(wa) *
                              static_cast<unsigned __int128>(wb));
      case HCCL_REDUCE_MAX:
        return std::max(a, b);
      default:
        return std::min(a, b);
    }
  } else {
    switch (op) {
      case HCCL_REDUCE_SUM:
        return a + b;
      case HCCL_REDUCE_PROD:
        return a * b;
      case HCCL_REDUCE_MAX:
        if (std::isnan(a) || std::isnan(b)) {
          return std::isnan(a) ? a : b;
        }
        return b > a ? b : a;
      default:
        if (std::isnan(a) || std::isnan(b)) {
          return std::isnan(a) ? a : b;
        }
        return b < a ? b : a;
    }
  }
}

template <typename T>
void RefNative(HcclReduceOp op, const std::vector<const void *> &in, void *out, size_t n) {
  std::vector<T> acc(n);
  std::memcpy(acc.data(), in[0], n * sizeof(T));
  for (size_t p = 1; p < in.size(); ++p) {
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, static_cast<const T *>(in[p]) + i, sizeof(T));
      acc[i] = RefOp<T>(op, acc[i], v);
    }
  }
  std::memcpy(out, acc.data(), n * sizeof(T));
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void RefHalf(HcclReduceOp op, const std::vector<const void *> &in, void *out, size_t n) {
  std::vector<uint16_t> res(n);
  for (size_t i = 0; i < n; ++i) {
    float acc = Load(static_cast<const uint16_t *>(in[0])[i]);
    for (size_t p = 1; p < in.size(); ++p) {
      acc = RefOp<float>(op, acc, Load(static_cast<const uint16_t *>(in[p])[i]));
    }
    res[i] = Store(acc);
  }
  std::memcpy(out, res.data(), n * 2);
}

// out = reduction of @in (n elements each), in rank order; false for types not reducible.
inline bool RefReduce(HcclDataType type, HcclReduceOp op, const std::vector<const void *> &in,
                      void *out, size_t n) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
      RefNative<int8_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_INT16:
      RefNative<int16_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_INT32:
      RefNative<int32_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_INT64:
      RefNative<int64_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_UINT8:
      RefNative<uint8_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_UINT16:
      RefNative<uint16_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_UINT32:
      RefNative<uint32_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_UINT64:
      RefNative<uint64_t>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_FP16:
      RefHalf<HalfToFloat, FloatToHalf>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_BFP16:
      RefHalf<BfToFloat, FloatToBf>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_FP32:
      RefNative<float>(op, in, out, n);
      return true;
    case HCCL_DATA_TYPE_FP64:
      RefNative<double>(op, in, out, n);
      return true;
    default:
      return false;
  }
}

// Deterministic input of rank @rank, element @i, as raw bytes of @type: small values so that
// products of 8 ranks stay finite, with negative values and zeros.
inline void FillInput(HcclDataType type, size_t es, uint32_t rank, uint64_t seed, void *buf,
                      size_t n) {
  auto *b = static_cast<uint8_t *>(buf);
  for (size_t i = 0; i < n; ++i) {
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (rank + 1) * 0xc2b2ae3d27d4eb4full ^ seed;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    const float f = static_cast<float>(static_cast<int>(h % 17) - 8) / 4.0f;
    uint8_t *at = b + i * es;
    switch (type) {
      case HCCL_DATA_TYPE_FP16: {
        const uint16_t v = FloatToHalf(f);
        std::memcpy(at, &v, 2);
        break;
      }
      case HCCL_DATA_TYPE_BFP16: {
        const uint16_t v = FloatToBf(f);
        std::memcpy(at, &v, 2);
        break;
      }
      case HCCL_DATA_TYPE_FP32:
        std::memcpy(at, &f, 4);
        break;
      case HCCL_DATA_TYPE_FP64: {
        const double d = f;
        std::memcpy(at, &d, 8);
        break;
      }
      default:
        for (size_t k = 0; k < es; ++k) {
          at[k] = static_cast<uint8_t>(h >> (8 * (k % 8)));
        }
        break;
    }
  }
}

}  // namespace hzc::test
