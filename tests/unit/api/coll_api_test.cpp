// SPDX-License-Identifier: Apache-2.0
// The exchanges' entry points (HcclReduce, HcclScatter, HcclAllGatherV, HcclReduceScatterV,
// HcclAlltoAll, HcclAlltoAllV, HcclAlltoAllVC) on a one-rank communicator on the host: the
// argument checks of each (codes and log lines) and the data of the staging path with one rank.
// More ranks and the zero-copy path: tests/vm/coll.
#include <hccl/hccl.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "one_rank.h"

namespace {

class CollApiTest : public hzc::test::OneRankTest {};

constexpr auto kI32 = HCCL_DATA_TYPE_INT32;

TEST_F(CollApiTest, OneRankMovesItsOwnBlock) {
  std::vector<int32_t> in{1, 2, 3, 4}, out(6, -1);
  const uint64_t c2[] = {2}, c3[] = {3}, d0[] = {0}, d1[] = {1}, d2[] = {2};
  EXPECT_EQ(HcclAlltoAll(in.data(), 2, kI32, out.data(), 2, kI32, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, -1, -1, -1, -1}));
  EXPECT_EQ(HcclAlltoAllV(in.data(), c3, d1, kI32, out.data(), c3, d2, kI32, comm_, nullptr),
            HCCL_SUCCESS);  // elements 1..3 of the input to 2..4 of the output
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 2, 3, 4, -1}));
  EXPECT_EQ(HcclAlltoAllVC(in.data(), c2, kI32, out.data(), kI32, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 2, 3, 4, -1}));
  EXPECT_EQ(HcclAllGatherV(in.data(), 3, out.data(), c3, d2, kI32, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 1, 2, 3, -1}));
  EXPECT_EQ(HcclScatter(in.data(), out.data(), 1, kI32, 0, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(HcclReduce(in.data(), out.data(), 4, kI32, HCCL_REDUCE_MAX, 0, comm_, nullptr),
            HCCL_SUCCESS);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 4, 3, -1}));
  EXPECT_EQ(HcclReduceScatterV(in.data(), c2, d0, out.data() + 4, 2, kI32, HCCL_REDUCE_SUM, comm_,
                               nullptr),
            HCCL_SUCCESS);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 4, 1, 2}));
}

TEST_F(CollApiTest, BadArgumentsGetTheirCodeAndOneLine) {
  ExpectErrorLog("HcclAlltoAllV: sdispls is null");
  ExpectErrorLog("HcclAllGatherV: recvCounts is null");
  ExpectErrorLog("HcclReduceScatterV: sendDispls is null");
  ExpectErrorLog("HcclAlltoAllVC: sendCountMatrix is null");
  ExpectErrorLog("HcclScatter: root=1: must be below the rank count 1");
  ExpectErrorLog("HcclScatter: sendBuf is null");
  ExpectErrorLog("HcclReduce: recvBuf is null");
  ExpectErrorLog("HcclReduce: dataType=int128");
  ExpectErrorLog("HcclAlltoAll: recvType=7: must be sendType (int32)");
  ExpectErrorLog("HcclAlltoAll: sendCount=");
  ExpectErrorLog("HcclAlltoAll: comm is null");
  ExpectErrorLog("HcclAlltoAllV: this rank sends itself 1 elements but expects 2");
  int32_t buf[4] = {};
  const uint64_t one[] = {1}, two[] = {2}, zero[] = {0};
  EXPECT_EQ(HcclAlltoAllV(buf, one, nullptr, kI32, buf, one, zero, kI32, comm_, nullptr),
            HCCL_E_PTR);
  EXPECT_EQ(HcclAllGatherV(buf, 1, buf, nullptr, zero, kI32, comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclReduceScatterV(buf, one, nullptr, buf, 1, kI32, HCCL_REDUCE_SUM, comm_, nullptr),
            HCCL_E_PTR);
  EXPECT_EQ(HcclAlltoAllVC(buf, nullptr, kI32, buf, kI32, comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclScatter(buf, buf, 1, kI32, 1, comm_, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclScatter(nullptr, buf, 1, kI32, 0, comm_, nullptr), HCCL_E_PTR);  // the root's
  EXPECT_EQ(HcclReduce(buf, nullptr, 1, kI32, HCCL_REDUCE_SUM, 0, comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclReduce(buf, buf, 1, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_SUM, 0, comm_, nullptr),
            HCCL_E_NOT_SUPPORT);
  EXPECT_EQ(HcclAlltoAll(buf, 1, kI32, buf, 1, HCCL_DATA_TYPE_UINT8, comm_, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclAlltoAll(buf, UINT64_MAX / 2, kI32, buf, UINT64_MAX / 2, kI32, comm_, nullptr),
            HCCL_E_PARA);
  EXPECT_EQ(HcclAlltoAll(buf, 1, kI32, buf, 1, kI32, nullptr, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclAlltoAllV(buf, one, zero, kI32, buf, two, zero, kI32, comm_, nullptr), HCCL_E_PARA);
  // Count 0 moves nothing and succeeds.
  EXPECT_EQ(HcclAlltoAll(buf, 0, kI32, buf, 0, kI32, comm_, nullptr), HCCL_SUCCESS);
}

}  // namespace
