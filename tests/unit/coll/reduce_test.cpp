// SPDX-License-Identifier: Apache-2.0
// The reduction kernels against a scalar reference written independently (wide integer
// arithmetic, the compiler's _Float16 conversions, a nearest-even bfloat16 rounding by
// comparison), for every type and op, odd lengths, in-place use and IEEE special values.
#include "coll/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hzc_test.h"
#include "reference.h"

namespace hzc::coll {
namespace {

constexpr HcclDataType kReducible[] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_INT64,
    HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_FP64};
constexpr HcclReduceOp kOps[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                 HCCL_REDUCE_MIN};

using test::BfToFloat;
using test::FloatToBf;
using test::FloatToHalf;
using test::HalfToFloat;
using test::RefOp;

// Reference reduction of @in (each of @count elements) for element type T.
template <typename T>
std::vector<T> RefNative(HcclReduceOp op, const std::vector<std::vector<T>> &in) {
  std::vector<T> out = in[0];
  for (size_t p = 1; p < in.size(); ++p) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = RefOp<T>(op, out[i], in[p][i]);
    }
  }
  return out;
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
std::vector<uint16_t> RefHalf(HcclReduceOp op, const std::vector<std::vector<uint16_t>> &in) {
  std::vector<uint16_t> out(in[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = Load(in[0][i]);
    for (size_t p = 1; p < in.size(); ++p) {
      acc = RefOp<float>(op, acc, Load(in[p][i]));
    }
    out[i] = Store(acc);
  }
  return out;
}

// --- inputs ----------------------------------------------------------------------------

template <typename T>
std::vector<T> Random(std::mt19937_64 &rng, size_t n, HcclDataType type) {
  std::vector<T> v(n);
  for (auto &x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(rng));
    } else if (type == HCCL_DATA_TYPE_FP16) {
      x = FloatToHalf(static_cast<float>(std::uniform_real_distribution<double>(-4, 4)(rng)));
    } else if (type == HCCL_DATA_TYPE_BFP16) {
      x = FloatToBf(static_cast<float>(std::uniform_real_distribution<double>(-4, 4)(rng)));
    } else {
      x = static_cast<T>(rng());
    }
  }
  return v;
}

// Run the kernel on @in (out of place and in place) and compare bitwise with @ref.
template <typename T>
void Check(HcclDataType type, HcclReduceOp op, const std::vector<std::vector<T>> &in,
           const std::vector<T> &ref) {
  ReduceFn fn = nullptr;
  const Status st = GetReduce(type, op, &fn);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<const void *> ptrs;
  for (const auto &v : in) {
    ptrs.push_back(v.data());
  }
  std::vector<T> out(ref.size());
  fn(out.data(), ptrs.data(), ptrs.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(std::memcmp(&out[i], &ref[i], sizeof(T)), 0)
        << TypeName(type) << " " << OpName(op) << " element " << i << " of " << ref.size()
        << " with " << in.size() << " inputs";
  }
  std::vector<T> inplace = in[0];  // out aliases the first input
  ptrs[0] = inplace.data();
  fn(inplace.data(), ptrs.data(), ptrs.size(), ref.size());
  ASSERT_EQ(std::memcmp(inplace.data(), ref.data(), ref.size() * sizeof(T)), 0)
      << TypeName(type) << " " << OpName(op) << " in place";
}

template <typename T>
void RunType(HcclDataType type) {
  std::mt19937_64 rng(static_cast<uint64_t>(type) * 7919);
  for (HcclReduceOp op : kOps) {
    for (size_t nin : {1, 2, 3, 8}) {
      for (size_t n : {0, 1, 3, 17, 1023, 4097, 10001}) {
        std::vector<std::vector<T>> in;
        for (size_t p = 0; p < nin; ++p) {
          in.push_back(Random<T>(rng, n, type));
        }
        std::vector<T> ref;
        if constexpr (std::is_same_v<T, uint16_t>) {
          if (type == HCCL_DATA_TYPE_FP16) {
            ref = RefHalf<HalfToFloat, FloatToHalf>(op, in);
          } else if (type == HCCL_DATA_TYPE_BFP16) {
            ref = RefHalf<BfToFloat, FloatToBf>(op, in);
          } else {
            ref = RefNative(op, in);
          }
        } else {
          ref = RefNative(op, in);
        }
        Check(type, op, in, ref);
        if (::testing::Test::HasFatalFailure()) {
          return;
        }
      }
    }
  }
}

HcclResult Code(HcclDataType type, HcclReduceOp op) {
  ReduceFn fn = nullptr;
  return GetReduce(type, op, &fn).code();
}

class ReduceTest : public hzc::test::Test {};

TEST_F(ReduceTest, Int8) {
  RunType<int8_t>(HCCL_DATA_TYPE_INT8);
}
TEST_F(ReduceTest, Int16) {
  RunType<int16_t>(HCCL_DATA_TYPE_INT16);
}
TEST_F(ReduceTest, Int32) {
  RunType<int32_t>(HCCL_DATA_TYPE_INT32);
}
TEST_F(ReduceTest, Int64) {
  RunType<int64_t>(HCCL_DATA_TYPE_INT64);
}
TEST_F(ReduceTest, Uint8) {
  RunType<uint8_t>(HCCL_DATA_TYPE_UINT8);
}
TEST_F(ReduceTest, Uint16) {
  RunType<uint16_t>(HCCL_DATA_TYPE_UINT16);
}
TEST_F(ReduceTest, Uint32) {
  RunType<uint32_t>(HCCL_DATA_TYPE_UINT32);
}
TEST_F(ReduceTest, Uint64) {
  RunType<uint64_t>(HCCL_DATA_TYPE_UINT64);
}
TEST_F(ReduceTest, Fp16) {
  RunType<uint16_t>(HCCL_DATA_TYPE_FP16);
}
TEST_F(ReduceTest, Bfp16) {
  RunType<uint16_t>(HCCL_DATA_TYPE_BFP16);
}
TEST_F(ReduceTest, Fp32) {
  RunType<float>(HCCL_DATA_TYPE_FP32);
}
TEST_F(ReduceTest, Fp64) {
  RunType<double>(HCCL_DATA_TYPE_FP64);
}

TEST_F(ReduceTest, IntegerOverflowWraps) {
  const std::vector<std::vector<int8_t>> in = {{127, -128, 100}, {1, -1, 100}};
  Check<int8_t>(HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, in, {-128, 127, -56});
  Check<int8_t>(HCCL_DATA_TYPE_INT8, HCCL_REDUCE_PROD, in, {127, -128, 16});
  const std::vector<std::vector<uint16_t>> u = {{65535}, {65535}};
  Check<uint16_t>(HCCL_DATA_TYPE_UINT16, HCCL_REDUCE_PROD, u, {1});
  const std::vector<std::vector<int64_t>> l = {{INT64_MAX, INT64_MIN}, {1, INT64_MIN}};
  Check<int64_t>(HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, l, {INT64_MIN, 0});
}

// The documented IEEE behaviour: NaN propagates through every op (MAX/MIN included, from any
// rank), inf - inf and 0 * inf are NaN, -0.0 vs +0.0 keeps the earlier rank's value.
TEST_F(ReduceTest, SpecialFloatValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> in = {{nan, 1, 1, inf, inf, 0, -0.0f, 0.0f},
                                              {1, nan, 2, -inf, 0, inf, 0.0f, -0.0f}};
  for (HcclReduceOp op : kOps) {
    ReduceFn fn = nullptr;
    ASSERT_TRUE(GetReduce(HCCL_DATA_TYPE_FP32, op, &fn).ok());
    const void *ptrs[] = {in[0].data(), in[1].data()};
    std::vector<float> out(in[0].size());
    fn(out.data(), ptrs, 2, out.size());
    EXPECT_TRUE(std::isnan(out[0])) << OpName(op) << ": NaN from rank 0";
    EXPECT_TRUE(std::isnan(out[1])) << OpName(op) << ": NaN from rank 1";
    if (op == HCCL_REDUCE_SUM) {
      EXPECT_TRUE(std::isnan(out[3])) << "inf + -inf";
    }
    if (op == HCCL_REDUCE_PROD) {
      EXPECT_TRUE(std::isnan(out[4])) << "inf * 0";
      EXPECT_TRUE(std::isnan(out[5])) << "0 * inf";
    }
    if (op == HCCL_REDUCE_MAX) {
      EXPECT_EQ(out[3], inf);
      EXPECT_TRUE(std::signbit(out[6])) << "-0.0 (rank 0) kept over +0.0";
      EXPECT_FALSE(std::signbit(out[7])) << "+0.0 (rank 0) kept over -0.0";
    }
    if (op == HCCL_REDUCE_MIN) {
      EXPECT_EQ(out[3], -inf);
    }
  }
}

TEST_F(ReduceTest, HalfRoundingOverflowAndSubnormals) {
  // fp16: 65504 is the largest finite value; 65504 + 16 rounds to inf; subnormals add exactly.
  const std::vector<std::vector<uint16_t>> h = {
      {FloatToHalf(65504.0f), FloatToHalf(65504.0f), 0x0001, 0x7e00, 0x7c00, 0x3c00},
      {FloatToHalf(16.0f), FloatToHalf(8.0f), 0x0001, 0x3c00, 0xfc00, 0x1000}};
  Check<uint16_t>(HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, h,
                  RefHalf<HalfToFloat, FloatToHalf>(HCCL_REDUCE_SUM, h));
  ReduceFn fn = nullptr;
  ASSERT_TRUE(GetReduce(HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, &fn).ok());
  std::vector<uint16_t> out(6);
  const void *ptrs[] = {h[0].data(), h[1].data()};
  fn(out.data(), ptrs, 2, 6);
  EXPECT_EQ(out[0], 0x7c00) << "65504 + 16 overflows to inf";
  EXPECT_EQ(out[1], 0x7bff) << "65504 + 8 rounds to even (65504)";
  EXPECT_EQ(out[2], 0x0002) << "subnormal + subnormal";
  EXPECT_EQ(out[3] & 0x7c00, 0x7c00);
  EXPECT_NE(out[3] & 0x03ff, 0) << "NaN stays NaN";
  EXPECT_EQ(out[4] & 0x7c00, 0x7c00);
  EXPECT_NE(out[4] & 0x03ff, 0) << "inf + -inf is NaN";
  // bfp16: accumulation in float, one rounding: 1 + 2^-9 + 2^-9 = 1 + 2^-8 is exact in float and
  // representable in bfloat16 only as 1 + 2^-7 or 1 (ties to even: 1).
  const std::vector<std::vector<uint16_t>> b = {
      {FloatToBf(1.0f)}, {FloatToBf(0x1p-9f)}, {FloatToBf(0x1p-9f)}};
  Check<uint16_t>(HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_SUM, b, {FloatToBf(1.0f + 0x1p-8f)});
}

// Every fp16 and bfp16 value against a rotating second operand, through every op: the
// conversions and roundings of the kernel agree with the reference for all inputs (NaN results
// are compared as NaN: the kernel returns a quiet NaN without the payload).
TEST_F(ReduceTest, ExhaustiveHalfTypes) {
  const uint16_t others[] = {0x0000, 0x8000, 0x0001, 0x3c00, 0xbc01, 0x7bff, 0x0400, 0x1234};
  for (HcclDataType type : {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16}) {
    const bool fp16 = type == HCCL_DATA_TYPE_FP16;
    std::vector<std::vector<uint16_t>> in(2, std::vector<uint16_t>(65536));
    for (uint32_t i = 0; i < 65536; ++i) {
      in[0][i] = static_cast<uint16_t>(i);
      in[1][i] = others[i % 8];
    }
    for (HcclReduceOp op : kOps) {
      const auto ref =
          fp16 ? RefHalf<HalfToFloat, FloatToHalf>(op, in) : RefHalf<BfToFloat, FloatToBf>(op, in);
      ReduceFn fn = nullptr;
      ASSERT_TRUE(GetReduce(type, op, &fn).ok());
      std::vector<uint16_t> out(65536);
      const void *ptrs[] = {in[0].data(), in[1].data()};
      fn(out.data(), ptrs, 2, out.size());
      for (uint32_t i = 0; i < 65536; ++i) {
        const float got = fp16 ? HalfToFloat(out[i]) : BfToFloat(out[i]);
        const float want = fp16 ? HalfToFloat(ref[i]) : BfToFloat(ref[i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << TypeName(type) << " " << OpName(op) << " " << i;
        } else {
          ASSERT_EQ(out[i], ref[i]) << TypeName(type) << " " << OpName(op) << " input " << i;
        }
      }
    }
  }
}

TEST_F(ReduceTest, UnsupportedTypesAndBadValues) {
  for (HcclDataType t : {HCCL_DATA_TYPE_INT128, HCCL_DATA_TYPE_HIF8, HCCL_DATA_TYPE_FP8E4M3,
                         HCCL_DATA_TYPE_FP8E5M2, HCCL_DATA_TYPE_FP8E8M0}) {
    for (HcclReduceOp op : kOps) {
      ReduceFn fn = nullptr;
      const Status st = GetReduce(t, op, &fn);
      EXPECT_EQ(st.code(), HCCL_E_NOT_SUPPORT);
      EXPECT_NE(st.message().find(TypeName(t)), std::string::npos) << st.message();
      EXPECT_FALSE(fn);
      EXPECT_GT(TypeSize(t), 0u) << "still movable by AllGather/Broadcast";
    }
  }
  EXPECT_EQ(Code(static_cast<HcclDataType>(13), HCCL_REDUCE_SUM), HCCL_E_PARA);
  EXPECT_EQ(Code(HCCL_DATA_TYPE_RESERVED, HCCL_REDUCE_SUM), HCCL_E_PARA);
  EXPECT_EQ(Code(HCCL_DATA_TYPE_FP32, HCCL_REDUCE_RESERVED), HCCL_E_PARA);
  EXPECT_EQ(Code(HCCL_DATA_TYPE_FP32, static_cast<HcclReduceOp>(4)), HCCL_E_PARA);
  EXPECT_EQ(TypeSize(HCCL_DATA_TYPE_INT128), 16u);
  EXPECT_EQ(TypeSize(static_cast<HcclDataType>(13)), 0u);
}

// The library's element sizes agree with the tests' own table for every value of the enum's
// byte, so the guest tests (which size buffers with the table) test what callers get.
TEST_F(ReduceTest, TypeSizeAgreesWithTheReferenceTable) {
  for (int v = 0; v <= 255; ++v) {
    const auto t = static_cast<HcclDataType>(v);
    EXPECT_EQ(TypeSize(t), test::RefTypeSize(t)) << "type " << v;
  }
}

// StreamCopy writes exactly the bytes memcpy would, for every alignment of both sides and
// lengths around its 16- and 64-byte steps, and nothing outside them.
TEST_F(ReduceTest, StreamCopyCopiesExactlyLikeMemcpy) {
  std::vector<uint8_t> src(512), dst(600), want(600);
  std::mt19937 gen(7);
  for (auto &v : src) {
    v = static_cast<uint8_t>(gen());
  }
  for (size_t to = 0; to < 17; ++to) {
    for (size_t from = 0; from < 17; ++from) {
      for (size_t len : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 400}) {
        std::fill(dst.begin(), dst.end(), 0xa5);
        want = dst;
        std::memcpy(want.data() + to, src.data() + from, len);
        StreamCopy(dst.data() + to, src.data() + from, len);
        StreamFence();
        ASSERT_EQ(dst, want) << "to +" << to << " from +" << from << " len " << len;
      }
    }
  }
}

// ReduceFn::To writes the result of the single-output kernel into every output, streamed or
// not, for outputs at any element alignment and counts that cross the kernel's blocks.
TEST_F(ReduceTest, ToWritesTheSameResultIntoEveryOutput) {
  std::mt19937 gen(11);
  for (HcclDataType type : {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16,
                            HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP64}) {
    const size_t es = TypeSize(type);
    for (size_t count : {1, 7, 1000, 5000}) {
      std::vector<std::vector<uint8_t>> in(3, std::vector<uint8_t>(count * es));
      std::vector<const void *> ptrs;
      for (auto &v : in) {
        for (auto &byte : v) {
          byte = static_cast<uint8_t>(gen() % 64);  // small finite values of every type
        }
        ptrs.push_back(v.data());
      }
      ReduceFn fn = nullptr;
      ASSERT_TRUE(GetReduce(type, HCCL_REDUCE_SUM, &fn).ok());
      std::vector<uint8_t> want(count * es);
      fn(want.data(), ptrs.data(), ptrs.size(), count);
      for (bool stream : {false, true}) {
        // Three outputs at element offsets 0, 1 and 3 of their buffers.
        std::vector<std::vector<uint8_t>> outs(3, std::vector<uint8_t>((count + 3) * es, 0xa5));
        std::vector<void *> to = {outs[0].data(), outs[1].data() + es, outs[2].data() + 3 * es};
        fn.To(to.data(), to.size(), ptrs.data(), ptrs.size(), count, stream);
        for (size_t o = 0; o < to.size(); ++o) {
          ASSERT_EQ(std::memcmp(to[o], want.data(), want.size()), 0)
              << TypeName(type) << " count " << count << " output " << o << " stream " << stream;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hzc::coll
