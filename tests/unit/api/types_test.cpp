// SPDX-License-Identifier: Apache-2.0
// The HCCL/ACL types and values are ABI: pin every one of them.
#include <acl/acl.h>
#include <hccl/hccl.h>

#include <cstddef>
#include <type_traits>

#include "hzc_test.h"

static_assert(sizeof(HcclRootInfo) == 4108);
static_assert(HCCL_ROOT_INFO_BYTES == 4108);
static_assert(std::is_same_v<HcclComm, void *>);
static_assert(std::is_same_v<aclrtDrvMemHandle, void *>);
static_assert(std::is_same_v<aclrtStream, void *>);
static_assert(std::is_same_v<aclError, int>);
// HcclBatchSendRecv's item: fields in CANN's order, LP64 layout.
static_assert(HCCL_SEND == 0 && HCCL_RECV == 1 && HCCL_SEND_RECV_RESERVED == 2);
static_assert(offsetof(HcclSendRecvItem, sendRecvType) == 0);
static_assert(offsetof(HcclSendRecvItem, buf) == 8);
static_assert(offsetof(HcclSendRecvItem, count) == 16);
static_assert(offsetof(HcclSendRecvItem, dataType) == 24);
static_assert(offsetof(HcclSendRecvItem, remoteRank) == 28);
static_assert(sizeof(HcclSendRecvItem) == 32);

namespace {

class TypesTest : public hzc::test::Test {};

TEST_F(TypesTest, HcclResultValues) {
  const std::pair<HcclResult, int> expected[] = {
      {HCCL_SUCCESS, 0},
      {HCCL_E_PARA, 1},
      {HCCL_E_PTR, 2},
      {HCCL_E_MEMORY, 3},
      {HCCL_E_INTERNAL, 4},
      {HCCL_E_NOT_SUPPORT, 5},
      {HCCL_E_NOT_FOUND, 6},
      {HCCL_E_UNAVAIL, 7},
      {HCCL_E_SYSCALL, 8},
      {HCCL_E_TIMEOUT, 9},
      {HCCL_E_OPEN_FILE_FAILURE, 10},
      {HCCL_E_TCP_CONNECT, 11},
      {HCCL_E_ROCE_CONNECT, 12},
      {HCCL_E_TCP_TRANSFER, 13},
      {HCCL_E_ROCE_TRANSFER, 14},
      {HCCL_E_RUNTIME, 15},
      {HCCL_E_DRV, 16},
      {HCCL_E_PROFILING, 17},
      {HCCL_E_CCE, 18},
      {HCCL_E_NETWORK, 19},
      {HCCL_E_AGAIN, 20},
      {HCCL_E_REMOTE, 21},
      {HCCL_E_SUSPENDING, 22},
      {HCCL_E_OPRETRY_FAIL, 23},
      {HCCL_E_OOM, 24},
      {HCCL_E_IN_STATUS, 1041},
      {HCCL_E_RESERVED, 1042},
  };
  for (const auto &[code, value] : expected) {
    EXPECT_EQ(static_cast<int>(code), value) << HcclGetErrorString(code);
  }
}

TEST_F(TypesTest, ReduceOpValues) {
  EXPECT_EQ(HCCL_REDUCE_SUM, 0);
  EXPECT_EQ(HCCL_REDUCE_PROD, 1);
  EXPECT_EQ(HCCL_REDUCE_MAX, 2);
  EXPECT_EQ(HCCL_REDUCE_MIN, 3);
  EXPECT_EQ(HCCL_REDUCE_RESERVED, 255);
}

TEST_F(TypesTest, DataTypeValues) {
  const std::pair<HcclDataType, int> expected[] = {
      {HCCL_DATA_TYPE_INT8, 0},     {HCCL_DATA_TYPE_INT16, 1},    {HCCL_DATA_TYPE_INT32, 2},
      {HCCL_DATA_TYPE_FP16, 3},     {HCCL_DATA_TYPE_FP32, 4},     {HCCL_DATA_TYPE_INT64, 5},
      {HCCL_DATA_TYPE_UINT64, 6},   {HCCL_DATA_TYPE_UINT8, 7},    {HCCL_DATA_TYPE_UINT16, 8},
      {HCCL_DATA_TYPE_UINT32, 9},   {HCCL_DATA_TYPE_FP64, 10},    {HCCL_DATA_TYPE_BFP16, 11},
      {HCCL_DATA_TYPE_INT128, 12},  {HCCL_DATA_TYPE_HIF8, 14},    {HCCL_DATA_TYPE_FP8E4M3, 15},
      {HCCL_DATA_TYPE_FP8E5M2, 16}, {HCCL_DATA_TYPE_FP8E8M0, 17}, {HCCL_DATA_TYPE_RESERVED, 255},
  };
  for (const auto &[type, value] : expected) {
    EXPECT_EQ(static_cast<int>(type), value);
  }
}

TEST_F(TypesTest, AclValues) {
  EXPECT_EQ(ACL_SUCCESS, 0);
  EXPECT_EQ(ACL_ERROR_INVALID_PARAM, 100000);
  EXPECT_EQ(ACL_ERROR_UNINITIALIZE, 100001);
  EXPECT_EQ(ACL_ERROR_RT_PARAM_INVALID, 107000);
  EXPECT_EQ(ACL_ERROR_RT_INVALID_HANDLE, 107017);
  EXPECT_EQ(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000);
  EXPECT_EQ(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001);
  EXPECT_EQ(ACL_ERROR_RT_INTERNAL_ERROR, 507000);
  EXPECT_EQ(ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, 0);
  EXPECT_EQ(ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1);
  EXPECT_EQ(ACL_HBM_MEM_HUGE, 4);
  EXPECT_EQ(ACL_HBM_MEM_NORMAL, 5);
  EXPECT_EQ(ACL_HBM_MEM_HUGE1G, 10);
  EXPECT_EQ(ACL_MEM_LOCATION_TYPE_DEVICE, 1);
  EXPECT_EQ(sizeof(aclrtPhysicalMemProp), 32U);
}

}  // namespace
