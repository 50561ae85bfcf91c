// SPDX-License-Identifier: Apache-2.0
// runtime/memory: aclrtMalloc's page policies, the registry of blocks, and which memory the
// copy checks take for device memory.
#include "runtime/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "acl_prop.h"
#include "hzc_test.h"
#include "runtime/stream.h"
#include "runtime/vmm.h"

namespace hzc::runtime {
namespace {

using ::testing::HasSubstr;

class MemoryTest : public test::Test {
 protected:
  void TearDown() override {
    const MemoryStats st = GetMemoryStats();
    EXPECT_EQ(st.device_blocks, 0U) << "test left aclrtMalloc blocks";
    EXPECT_EQ(st.host_blocks, 0U) << "test left aclrtMallocHost blocks";
    test::Test::TearDown();
  }
};

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

TEST_F(MemoryTest, EveryPagePolicy) {
  for (uint32_t policy : {ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY,
                          ACL_MEM_MALLOC_NORMAL_ONLY, ACL_MEM_MALLOC_HUGE_FIRST_P2P,
                          ACL_MEM_MALLOC_HUGE_ONLY_P2P, ACL_MEM_MALLOC_NORMAL_ONLY_P2P}) {
    for (size_t size : {size_t{1}, size_t{4096}, size_t{3} << 20}) {
      void *p = nullptr;
      ASSERT_TRUE(Malloc(&p, size, policy).ok()) << policy << " " << size;
      ASSERT_NE(p, nullptr);
      std::memset(p, 0x5a, size);
      EXPECT_TRUE(InDeviceMemory(p, size));
      const bool huge = (policy == ACL_MEM_MALLOC_HUGE_ONLY ||
                         policy == ACL_MEM_MALLOC_HUGE_ONLY_P2P || size > (size_t{1} << 20)) &&
                        policy != ACL_MEM_MALLOC_NORMAL_ONLY &&
                        policy != ACL_MEM_MALLOC_NORMAL_ONLY_P2P;
      if (huge) {
        EXPECT_EQ(Addr(p) % kHugePageSize, 0U) << "huge pages are 2 MiB-aligned, policy " << policy;
      }
      EXPECT_TRUE(Free(p).ok());
    }
  }
}

TEST_F(MemoryTest, Huge1GOnlyIsAllOrNothing) {
  void *p = nullptr;
  AclStatus st = Malloc(&p, 4096, ACL_MEM_MALLOC_HUGE1G_ONLY);
  if (!st.ok()) {
    EXPECT_EQ(st.code(), ACL_ERROR_RT_MEMORY_ALLOCATION);
    EXPECT_THAT(st.message(), HasSubstr("mmap failed"));
    GTEST_SKIP() << "no 1 GiB huge pages: " << st.message();
  }
  EXPECT_EQ(Addr(p) % kGiantPageSize, 0U);
  EXPECT_TRUE(Free(p).ok());
}

TEST_F(MemoryTest, PolicyBits) {
  void *p = nullptr;
  for (uint32_t policy : {uint32_t{ACL_MEM_MALLOC_NORMAL_ONLY | ACL_MEM_TYPE_LOW_BAND_WIDTH},
                          uint32_t{ACL_MEM_MALLOC_HUGE_FIRST | ACL_MEM_TYPE_HIGH_BAND_WIDTH}}) {
    ASSERT_TRUE(Malloc(&p, 100, policy).ok()) << policy;
    EXPECT_TRUE(Free(p).ok());
  }
  EXPECT_EQ(Malloc(&p, 100, 8).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(Malloc(&p, 100, 0x200).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(Malloc(&p, 100, ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH).code(),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(Malloc(&p, 100, ACL_MEM_ACCESS_USER_SPACE_READONLY).code(),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(Malloc(&p, 0, ACL_MEM_MALLOC_NORMAL_ONLY).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(Malloc(&p, SIZE_MAX / 8, ACL_MEM_MALLOC_NORMAL_ONLY).code(),
            ACL_ERROR_RT_MEMORY_ALLOCATION);
  EXPECT_EQ(Malloc(&p, SIZE_MAX, ACL_MEM_MALLOC_HUGE_ONLY).code(), ACL_ERROR_RT_MEMORY_ALLOCATION);
}

TEST_F(MemoryTest, FreeOnlyWhatWasAllocated) {
  void *d = nullptr;
  void *h = nullptr;
  ASSERT_TRUE(Malloc(&d, 8192, ACL_MEM_MALLOC_NORMAL_ONLY).ok());
  ASSERT_TRUE(MallocHost(&h, 100).ok());
  EXPECT_FALSE(InDeviceMemory(h, 1)) << "aclrtMallocHost memory is host memory";
  AclStatus st = Free(static_cast<char *>(d) + 16);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_THAT(st.message(), HasSubstr("not the start of a block of aclrtMalloc"));
  st = Free(h);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_THAT(st.message(), HasSubstr("aclrtFreeHost"));
  st = FreeHost(d);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_THAT(st.message(), HasSubstr("aclrtFree"));
  EXPECT_TRUE(Free(d).ok());
  EXPECT_EQ(Free(d).code(), ACL_ERROR_RT_PARAM_INVALID) << "double free";
  EXPECT_TRUE(FreeHost(h).ok());
  EXPECT_EQ(FreeHost(h).code(), ACL_ERROR_RT_PARAM_INVALID) << "double free";
  EXPECT_EQ(MallocHost(&h, 0).code(), ACL_ERROR_INVALID_PARAM);
}

TEST_F(MemoryTest, DeviceMemoryBounds) {
  void *d = nullptr;
  ASSERT_TRUE(Malloc(&d, 1000, ACL_MEM_MALLOC_NORMAL_ONLY).ok());
  char *c = static_cast<char *>(d);
  EXPECT_TRUE(InDeviceMemory(c, 1000));
  EXPECT_TRUE(InDeviceMemory(c + 999, 1));
  EXPECT_FALSE(InDeviceMemory(c, 1001)) << "past the block's size";
  EXPECT_FALSE(InDeviceMemory(c + 1000, 1));
  EXPECT_FALSE(InDeviceMemory(c, 0));
  int stack = 0;
  EXPECT_FALSE(InDeviceMemory(&stack, sizeof(stack)));
  EXPECT_TRUE(Free(d).ok());
  EXPECT_FALSE(InDeviceMemory(c, 1)) << "freed";
}

TEST_F(MemoryTest, MappedVmmMemoryIsDeviceMemory) {
  const size_t page = static_cast<size_t>(getpagesize());
  void *va = nullptr;
  ASSERT_TRUE(Reserve(&va, 4 * page, nullptr, 0).ok());
  aclrtDrvMemHandle h1 = nullptr;
  aclrtDrvMemHandle h2 = nullptr;
  const auto prop = test::Prop();
  ASSERT_TRUE(MallocPhysical(&h1, page, prop).ok());
  ASSERT_TRUE(MallocPhysical(&h2, page, prop).ok());
  char *base = static_cast<char *>(va);
  ASSERT_TRUE(Map(base, page, h1).ok());
  ASSERT_TRUE(Map(base + page, page, h2).ok());
  EXPECT_TRUE(InDeviceMemory(base, 2 * page)) << "two mappings that follow each other";
  EXPECT_TRUE(InDeviceMemory(base + page - 8, 16));
  EXPECT_FALSE(InDeviceMemory(base, 2 * page + 1)) << "into the unmapped rest";
  EXPECT_FALSE(InDeviceMemory(base + 3 * page, 1));
  int host = 0;
  EXPECT_TRUE(CheckMemcpy(base, page, &host, sizeof(host), ACL_MEMCPY_HOST_TO_DEVICE).ok());
  EXPECT_EQ(
      CheckMemcpy(&host, sizeof(host), base + 2 * page, sizeof(host), ACL_MEMCPY_DEVICE_TO_HOST)
          .code(),
      ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  EXPECT_TRUE(Unmap(base + page).ok());
  EXPECT_TRUE(Unmap(base).ok());
  EXPECT_TRUE(FreePhysical(h1).ok());
  EXPECT_TRUE(FreePhysical(h2).ok());
  EXPECT_TRUE(Release(va).ok());
}

TEST_F(MemoryTest, MemcpyKindsAndSides) {
  void *d1 = nullptr;
  void *d2 = nullptr;
  void *h = nullptr;
  ASSERT_TRUE(Malloc(&d1, 256, ACL_MEM_MALLOC_NORMAL_ONLY).ok());
  ASSERT_TRUE(Malloc(&d2, 256, ACL_MEM_MALLOC_HUGE_FIRST).ok());
  ASSERT_TRUE(MallocHost(&h, 256).ok());
  struct Case {
    void *dst;
    const void *src;
    int kind;
    aclError code;
  };
  const Case cases[] = {
      {h, h, ACL_MEMCPY_HOST_TO_HOST, ACL_SUCCESS},
      {d1, h, ACL_MEMCPY_HOST_TO_DEVICE, ACL_SUCCESS},
      {d1, h, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE, ACL_SUCCESS},
      {h, d1, ACL_MEMCPY_DEVICE_TO_HOST, ACL_SUCCESS},
      {d2, d1, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_SUCCESS},
      {d2, d1, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE, ACL_SUCCESS},
      {d2, d1, ACL_MEMCPY_INTER_DEVICE_TO_DEVICE, ACL_SUCCESS},
      {h, d1, ACL_MEMCPY_DEFAULT, ACL_SUCCESS},
      {d1, h, ACL_MEMCPY_DEFAULT, ACL_SUCCESS},
      {h, h, ACL_MEMCPY_DEFAULT, ACL_SUCCESS},
      {d1, d1, ACL_MEMCPY_HOST_TO_HOST, ACL_ERROR_RT_INVALID_MEMORY_TYPE},
      {h, h, ACL_MEMCPY_HOST_TO_DEVICE, ACL_ERROR_RT_INVALID_MEMORY_TYPE},
      {d1, d2, ACL_MEMCPY_HOST_TO_DEVICE, ACL_ERROR_RT_INVALID_MEMORY_TYPE},
      {d1, h, ACL_MEMCPY_DEVICE_TO_HOST, ACL_ERROR_RT_INVALID_MEMORY_TYPE},
      {h, h, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_ERROR_RT_INVALID_MEMORY_TYPE},
      {h, h, 8, ACL_ERROR_INVALID_PARAM},
      {h, h, -1, ACL_ERROR_INVALID_PARAM},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(CheckMemcpy(c.dst, 256, c.src, 256, c.kind).code(), c.code)
        << "dst " << c.dst << " src " << c.src << " kind " << c.kind;
  }
  // The device side must hold the whole count; a host side must not reach into a block.
  EXPECT_EQ(CheckMemcpy(d1, 512, h, 257, ACL_MEMCPY_HOST_TO_DEVICE).code(),
            ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  char *before = static_cast<char *>(d1) - 16;
  EXPECT_EQ(CheckMemcpy(before, 32, h, 32, ACL_MEMCPY_HOST_TO_HOST).code(),
            ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  AclStatus st = CheckMemcpy(before, 32, h, 32, ACL_MEMCPY_DEFAULT);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  EXPECT_THAT(st.message(), HasSubstr("dst="));
  // destMax, then a count of 0.
  st = CheckMemcpy(d1, 100, h, 101, ACL_MEMCPY_HOST_TO_DEVICE);
  EXPECT_EQ(st.code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_THAT(st.message(), HasSubstr("destMax=0x64"));
  EXPECT_TRUE(CheckMemcpy(h, 0, h, 0, ACL_MEMCPY_DEVICE_TO_DEVICE).ok());
  // Memset: device memory only, count <= maxCount.
  EXPECT_TRUE(CheckMemset(d1, 256, 256).ok());
  EXPECT_EQ(CheckMemset(d1, 255, 256).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(CheckMemset(d1, 512, 257).code(), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  EXPECT_EQ(CheckMemset(h, 256, 1).code(), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  EXPECT_TRUE(Free(d1).ok());
  EXPECT_TRUE(Free(d2).ok());
  EXPECT_TRUE(FreeHost(h).ok());
}

TEST_F(MemoryTest, MemInfoIsTheHosts) {
  size_t free = 0;
  size_t total = 0;
  ASSERT_TRUE(MemInfo(ACL_HBM_MEM, &free, &total).ok());
  EXPECT_GT(total, 0U);
  EXPECT_LE(free, total);
  const auto pages = static_cast<size_t>(sysconf(_SC_PHYS_PAGES));
  EXPECT_EQ(total / 4096, pages * static_cast<size_t>(getpagesize()) / 4096);
  EXPECT_TRUE(MemInfo(ACL_DDR_MEM, &free, &total).ok());
  EXPECT_EQ(MemInfo(-1, &free, &total).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(MemInfo(ACL_HBM_MEM_P2P_HUGE1G + 1, &free, &total).code(), ACL_ERROR_INVALID_PARAM);
}

// Freeing a block waits for the work queued before it on every stream, so a queued copy
// never writes into memory that is gone.
TEST_F(MemoryTest, FreeWaitsForQueuedWork) {
  constexpr size_t kBytes = 8 << 20;
  void *block = nullptr;
  ASSERT_TRUE(Malloc(&block, kBytes, ACL_MEM_MALLOC_NORMAL_ONLY).ok());
  aclrtStream s = CreateStream();
  std::atomic<bool> copied{false};
  ASSERT_TRUE(Submit(s, "slow", [] {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Submit(s, "copy", [block, &copied] {
                std::memset(block, 0x5a, kBytes);
                copied = true;
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Free(block).ok());  // before the fix: the copy ran into unmapped memory
  EXPECT_TRUE(copied);
  EXPECT_TRUE(Synchronize(s).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

}  // namespace
}  // namespace hzc::runtime
