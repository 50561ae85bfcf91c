// SPDX-License-Identifier: Apache-2.0
// runtime/vmm on its own: reservations, physical allocations and mappings on host memory, the
// statuses it returns (the api layer adds the log line) and its bookkeeping.
#include "runtime/vmm.h"

#include <acl/acl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "acl_prop.h"
#include "hzc_test.h"

namespace hzc::runtime {
namespace {

using ::testing::HasSubstr;

const size_t kPage = static_cast<size_t>(getpagesize());

using hzc::test::Prop;

class VmmTest : public test::Test {
 protected:
  void TearDown() override {
    const auto st = GetStats();
    EXPECT_EQ(st.reservations, 0U) << "test left reservations";
    EXPECT_EQ(st.mappings, 0U) << "test left mappings";
    EXPECT_EQ(st.live_handles, 0U) << "test left handles";
    EXPECT_EQ(st.physical_objects, 0U) << "test left physical memory";
    test::Test::TearDown();
  }
};

TEST_F(VmmTest, GranularityFollowsTheMemoryAttribute) {
  size_t g = 0;
  ASSERT_TRUE(Granularity(Prop(), ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g).ok());
  EXPECT_EQ(g, kPage);
  ASSERT_TRUE(Granularity(Prop(ACL_HBM_MEM_HUGE), ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g).ok());
  EXPECT_EQ(g, kHugePageSize);
  ASSERT_TRUE(Granularity(Prop(ACL_HBM_MEM_HUGE1G), ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g).ok());
  EXPECT_EQ(g, kGiantPageSize);
}

// Where the library picks the address, a reservation's base can take any allocation that fits:
// 2 MiB-aligned (huge pages) whatever the flags, 1 GiB-aligned once a 1 GiB page fits. Eight
// small reservations in a row: the kernel would place them next to each other, so at most one
// would be 2 MiB-aligned by chance.
TEST_F(VmmTest, ReservationBaseIsAlignedForTheLargestPageThatFits) {
  std::vector<void *> small;
  for (int i = 0; i < 8; ++i) {
    void *va = nullptr;
    ASSERT_TRUE(Reserve(&va, 3 * kPage, nullptr, 0).ok());
    small.push_back(va);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % kHugePageSize, 0U) << "reservation " << i;
  }
  void *giant = nullptr;
  ASSERT_TRUE(Reserve(&giant, kGiantPageSize + kPage, nullptr, 0).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(giant) % kGiantPageSize, 0U);
  void *below = nullptr;  // no 1 GiB page fits: 2 MiB is enough
  ASSERT_TRUE(Reserve(&below, kGiantPageSize - kHugePageSize, nullptr, 1).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(below) % kHugePageSize, 0U);
  for (void *va : small) {
    EXPECT_TRUE(Release(va).ok());
  }
  EXPECT_TRUE(Release(giant).ok());
  EXPECT_TRUE(Release(below).ok());
}

// An expectPtr is taken as given: flags 0 need the page alignment only.
TEST_F(VmmTest, ExpectPtrNeedsOnlyTheAlignmentOfTheFlags) {
  void *va = nullptr;
  ASSERT_TRUE(Reserve(&va, 4 * kPage, nullptr, 0).ok());
  ASSERT_TRUE(Release(va).ok());
  void *at = static_cast<char *>(va) + kPage;
  void *got = nullptr;
  ASSERT_TRUE(Reserve(&got, kPage, at, 0).ok());
  EXPECT_EQ(got, at);
  EXPECT_TRUE(Release(got).ok());
  const auto st = Reserve(&got, kHugePageSize, at, 1);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_THAT(st.message(), HasSubstr("not aligned to 0x200000"));
}

// Every object is counted while it lives; a freed handle's memory lives on in its mapping.
TEST_F(VmmTest, StatsCountEveryObjectUntilItGoes) {
  void *va = nullptr;
  ASSERT_TRUE(Reserve(&va, 2 * kPage, nullptr, 0).ok());
  EXPECT_EQ(GetStats().reservations, 1U);
  aclrtDrvMemHandle h = nullptr;
  ASSERT_TRUE(MallocPhysical(&h, kPage, Prop()).ok());
  EXPECT_EQ(GetStats().live_handles, 1U);
  EXPECT_EQ(GetStats().physical_objects, 1U);
  ASSERT_TRUE(Map(va, kPage, h).ok());
  EXPECT_EQ(GetStats().mappings, 1U);
  std::memset(va, 0x33, kPage);

  ASSERT_TRUE(FreePhysical(h).ok());
  EXPECT_EQ(GetStats().live_handles, 0U);
  EXPECT_EQ(GetStats().physical_objects, 1U);
  EXPECT_EQ(static_cast<unsigned char *>(va)[kPage - 1], 0x33);

  const auto busy = Release(va);
  EXPECT_EQ(busy.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_THAT(busy.message(), HasSubstr("still inside; call aclrtUnmapMem first"));
  ASSERT_TRUE(Unmap(va).ok());
  EXPECT_EQ(GetStats().physical_objects, 0U);
  ASSERT_TRUE(Release(va).ok());
}

TEST_F(VmmTest, DeadHandleIsInvalidHandle) {
  aclrtDrvMemHandle h = nullptr;
  ASSERT_TRUE(MallocPhysical(&h, kPage, Prop()).ok());
  ASSERT_TRUE(FreePhysical(h).ok());
  EXPECT_EQ(FreePhysical(h).code(), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(VmmTest, CheckMappedSaysWhyNot) {
  void *va = nullptr;
  ASSERT_TRUE(Reserve(&va, 2 * kPage, nullptr, 0).ok());
  aclrtDrvMemHandle h = nullptr;
  ASSERT_TRUE(MallocPhysical(&h, kPage, Prop()).ok());
  EXPECT_THAT(CheckMapped(va, kPage, h), HasSubstr("not mapped there"));
  ASSERT_TRUE(Map(va, kPage, h).ok());
  EXPECT_EQ(CheckMapped(va, kPage, h), "");
  EXPECT_THAT(CheckMapped(va, 2 * kPage, h), HasSubstr("has 0x1000 bytes"));
  EXPECT_THAT(CheckMapped(static_cast<char *>(va) + kPage, kPage, h),
              HasSubstr("not mapped there"));
  ASSERT_TRUE(FreePhysical(h).ok());
  EXPECT_THAT(CheckMapped(va, kPage, h), HasSubstr("not a live allocation"));
  ASSERT_TRUE(Unmap(va).ok());
  ASSERT_TRUE(Release(va).ok());
}

}  // namespace
}  // namespace hzc::runtime
