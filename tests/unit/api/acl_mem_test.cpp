// SPDX-License-Identifier: Apache-2.0
// The ACL memory entry points (api/acl_mem_api.cpp over runtime/memory): argument checks, codes
// and log lines, and the bytes they copy and set, at once and on streams.
#include <acl/acl.h>

#include <cstring>
#include <vector>

#include "hzc_test.h"
#include "runtime/memory.h"

namespace {

using hzc::runtime::GetMemoryStats;

class AclMemTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    const auto st = GetMemoryStats();
    EXPECT_EQ(st.device_blocks, 0U) << "test left aclrtMalloc blocks";
    EXPECT_EQ(st.host_blocks, 0U) << "test left aclrtMallocHost blocks";
    hzc::test::Test::TearDown();
  }
};

constexpr size_t kSize = 3000;

TEST_F(AclMemTest, CopyThroughDeviceMemory) {
  void *dev = nullptr;
  void *dev2 = nullptr;
  void *host = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, kSize, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMalloc(&dev2, kSize, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocHost(&host, kSize), ACL_SUCCESS);
  std::vector<unsigned char> src(kSize);
  for (size_t i = 0; i < kSize; ++i) {
    src[i] = static_cast<unsigned char>(i * 7);
  }
  ASSERT_EQ(aclrtMemcpy(dev, kSize, src.data(), kSize, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(dev2, kSize, dev, kSize, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(host, kSize, dev2, kSize, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
  EXPECT_EQ(std::memcmp(host, src.data(), kSize), 0);
  ASSERT_EQ(aclrtMemset(dev, kSize, 0x1ab, 100), ACL_SUCCESS);
  std::vector<unsigned char> back(kSize);
  ASSERT_EQ(aclrtMemcpy(back.data(), kSize, dev, kSize, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(back[0], 0xab);
  EXPECT_EQ(back[99], 0xab);
  EXPECT_EQ(back[100], src[100]);
  size_t free = 0;
  size_t total = 0;
  ASSERT_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &free, &total), ACL_SUCCESS);
  EXPECT_GT(total, 0U);
  EXPECT_LE(free, total);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(dev2), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
}

TEST_F(AclMemTest, AsyncCopiesRunInStreamOrder) {
  void *dev = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, kSize, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::vector<unsigned char> a(kSize, 1);
  std::vector<unsigned char> out(kSize, 0);
  ASSERT_EQ(aclrtMemcpyAsync(dev, kSize, a.data(), kSize, ACL_MEMCPY_HOST_TO_DEVICE, s),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(dev, kSize, 9, 10, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(out.data(), kSize, dev, kSize, ACL_MEMCPY_DEVICE_TO_HOST, s),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(out[0], 9);
  EXPECT_EQ(out[9], 9);
  EXPECT_EQ(out[10], 1);
  EXPECT_EQ(out[kSize - 1], 1);
  // NULL stream: done when the call returns.
  ASSERT_EQ(aclrtMemsetAsync(dev, kSize, 4, kSize, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(out.data(), kSize, dev, kSize, ACL_MEMCPY_DEVICE_TO_HOST, nullptr),
            ACL_SUCCESS);
  EXPECT_EQ(out[kSize - 1], 4);
  // A dead stream: refused, nothing queued or done.
  ASSERT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  ExpectErrorLog("aclrtMemsetAsync: stream=");
  EXPECT_EQ(aclrtMemsetAsync(dev, kSize, 5, kSize, s), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtMemcpyAsync: stream=");
  EXPECT_EQ(aclrtMemcpyAsync(dev, kSize, a.data(), kSize, ACL_MEMCPY_HOST_TO_DEVICE, s),
            ACL_ERROR_RT_INVALID_HANDLE);
  ASSERT_EQ(aclrtMemcpy(out.data(), kSize, dev, kSize, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
}

TEST_F(AclMemTest, AllocationBadArguments) {
  void *p = nullptr;
  ExpectErrorLog("aclrtMalloc: devPtr is null");
  EXPECT_EQ(aclrtMalloc(nullptr, 10, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMalloc: size=0: must not be 0");
  EXPECT_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMalloc: policy=0x9: not an aclrtMemMallocPolicy");
  EXPECT_EQ(aclrtMalloc(&p, 10, static_cast<aclrtMemMallocPolicy>(9)), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMalloc: policy=0x100000: ACL_MEM_ACCESS_USER_SPACE_READONLY");
  EXPECT_EQ(aclrtMalloc(&p, 10, ACL_MEM_ACCESS_USER_SPACE_READONLY),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  ExpectErrorLog("aclrtMalloc: size=0xffffffffffffffff");
  EXPECT_EQ(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION);
  ExpectErrorLog("aclrtMallocHost: hostPtr is null");
  EXPECT_EQ(aclrtMallocHost(nullptr, 10), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMallocHost: size=0: must not be 0");
  EXPECT_EQ(aclrtMallocHost(&p, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(p, nullptr);
  ExpectErrorLog("aclrtFree: devPtr is null");
  EXPECT_EQ(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtFreeHost: hostPtr is null");
  EXPECT_EQ(aclrtFreeHost(nullptr), ACL_ERROR_INVALID_PARAM);
  void *dev = nullptr;
  void *host = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocHost(&host, 64), ACL_SUCCESS);
  ExpectErrorLog("aclrtFree: devPtr=");
  EXPECT_EQ(aclrtFree(host), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtFree(static_cast<char *>(dev) + 1), ACL_ERROR_RT_PARAM_INVALID);
  ExpectErrorLog("aclrtFreeHost: hostPtr=");
  EXPECT_EQ(aclrtFreeHost(dev), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(dev), ACL_ERROR_RT_PARAM_INVALID) << "double free";
  EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreeHost(host), ACL_ERROR_RT_PARAM_INVALID) << "double free";
}

TEST_F(AclMemTest, CopyBadArguments) {
  void *dev = nullptr;
  ASSERT_EQ(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
  char host[64] = {};
  ExpectErrorLog("aclrtMemcpy: dst is null");
  EXPECT_EQ(aclrtMemcpy(nullptr, 64, host, 64, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpy: src is null");
  EXPECT_EQ(aclrtMemcpy(host, 64, nullptr, 64, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpy: kind=8: not an aclrtMemcpyKind");
  EXPECT_EQ(aclrtMemcpy(host, 64, host, 64, static_cast<aclrtMemcpyKind>(8)),
            ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpy: count=0x41: more than destMax=0x40");
  EXPECT_EQ(aclrtMemcpy(dev, 64, host, 65, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpy: dst=");
  EXPECT_EQ(aclrtMemcpy(host, 64, dev, 64, ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  ExpectErrorLog("aclrtMemcpy: src=");
  EXPECT_EQ(aclrtMemcpy(host, 64, host, 64, ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  ExpectErrorLog("aclrtMemcpyAsync: dst is null");
  EXPECT_EQ(aclrtMemcpyAsync(nullptr, 64, host, 64, ACL_MEMCPY_HOST_TO_HOST, nullptr),
            ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpyAsync: src is null");
  EXPECT_EQ(aclrtMemcpyAsync(host, 64, nullptr, 64, ACL_MEMCPY_HOST_TO_HOST, nullptr),
            ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemcpyAsync: kind=-1: not an aclrtMemcpyKind");
  EXPECT_EQ(aclrtMemcpyAsync(host, 64, host, 64, static_cast<aclrtMemcpyKind>(-1), nullptr),
            ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemset: devPtr is null");
  EXPECT_EQ(aclrtMemset(nullptr, 64, 0, 64), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemset: count=0x41: more than maxCount=0x40");
  EXPECT_EQ(aclrtMemset(dev, 64, 0, 65), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemset: devPtr=");
  EXPECT_EQ(aclrtMemset(host, 64, 0, 64), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  ExpectErrorLog("aclrtMemsetAsync: devPtr is null");
  EXPECT_EQ(aclrtMemsetAsync(nullptr, 64, 0, 64, nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtMemsetAsync: count=0x41: more than maxCount=0x40");
  EXPECT_EQ(aclrtMemsetAsync(dev, 64, 0, 65, nullptr), ACL_ERROR_INVALID_PARAM);
  size_t free = 0;
  size_t total = 0;
  ExpectErrorLog("aclrtGetMemInfo: free is null");
  EXPECT_EQ(aclrtGetMemInfo(ACL_DDR_MEM, nullptr, &total), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtGetMemInfo: total is null");
  EXPECT_EQ(aclrtGetMemInfo(ACL_DDR_MEM, &free, nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtGetMemInfo: attr=99: not an aclrtMemAttr");
  EXPECT_EQ(aclrtGetMemInfo(static_cast<aclrtMemAttr>(99), &free, &total), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFree(dev), ACL_SUCCESS);
}

}  // namespace
