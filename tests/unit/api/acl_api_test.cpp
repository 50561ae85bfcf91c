// SPDX-License-Identifier: Apache-2.0
// The ACL virtual-memory entry points (api/acl_api.cpp over runtime/vmm): argument checks, error
// codes and log lines, and the memory they give.
#include <acl/acl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "acl_prop.h"
#include "hzc_test.h"
#include "runtime/vmm.h"

namespace {

using hzc::runtime::GetStats;
using ::testing::HasSubstr;

const size_t kPage = static_cast<size_t>(getpagesize());
constexpr size_t k2M = size_t{2} << 20;

using hzc::test::Prop;

// Permissions of the mapping containing @p in /proc/self/maps ("---p", "rw-s", ...).
std::string Perms(const void *p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi) {
      return perms;
    }
  }
  return "unmapped";
}

class AclVmmTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    const auto st = GetStats();
    EXPECT_EQ(st.reservations, 0U) << "test left reservations";
    EXPECT_EQ(st.mappings, 0U) << "test left mappings";
    EXPECT_EQ(st.live_handles, 0U) << "test left handles";
    EXPECT_EQ(st.physical_objects, 0U) << "test left physical memory";
    hzc::test::Test::TearDown();
  }
};

TEST_F(AclVmmTest, Granularity) {
  size_t g = 0;
  auto p = Prop();
  ASSERT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
            ACL_SUCCESS);
  EXPECT_EQ(g, kPage);
  ASSERT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g),
            ACL_SUCCESS);
  EXPECT_EQ(g, k2M);
  for (auto attr : {ACL_HBM_MEM_HUGE, ACL_DDR_MEM_HUGE, ACL_HBM_MEM_P2P_HUGE}) {
    p = Prop(attr);
    ASSERT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
              ACL_SUCCESS);
    EXPECT_EQ(g, k2M) << attr;
  }
  p = Prop(ACL_HBM_MEM_HUGE1G);
  ASSERT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
            ACL_SUCCESS);
  EXPECT_EQ(g, size_t{1} << 30);
}

TEST_F(AclVmmTest, GranularityBadArguments) {
  ExpectErrorLog("aclrtMemGetAllocationGranularity: ");
  size_t g = 0;
  auto p = Prop();
  EXPECT_EQ(aclrtMemGetAllocationGranularity(nullptr, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF, &g),
            ACL_ERROR_RT_PARAM_INVALID);
  p.memAttr = static_cast<aclrtMemAttr>(99);
  EXPECT_EQ(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
            ACL_ERROR_RT_PARAM_INVALID);
}

TEST_F(AclVmmTest, ReserveIsProtNoneAndAligned) {
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 3 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % kPage, 0U);
  EXPECT_EQ(Perms(va), "---p");
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);

  ASSERT_EQ(aclrtReserveMemAddress(&va, k2M, 0, nullptr, 1), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % k2M, 0U);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
  EXPECT_EQ(Perms(va), "unmapped");
}

TEST_F(AclVmmTest, ReserveHonoursExpectPtr) {
  ExpectErrorLog("aclrtReserveMemAddress: ");
  void *first = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&first, 4 * k2M, 0, nullptr, 1), ACL_SUCCESS);
  ASSERT_EQ(aclrtReleaseMemAddress(first), ACL_SUCCESS);
  void *again = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&again, 2 * k2M, 0, first, 1), ACL_SUCCESS);
  EXPECT_EQ(again, first);
  // Occupied now.
  void *clash = nullptr;
  EXPECT_EQ(aclrtReserveMemAddress(&clash, k2M, 0, first, 1), ACL_ERROR_RT_MEMORY_ALLOCATION);
  EXPECT_EQ(aclrtReserveMemAddress(&clash, k2M, 0, static_cast<char *>(first) + k2M, 1),
            ACL_ERROR_RT_MEMORY_ALLOCATION);
  // Misaligned.
  EXPECT_EQ(aclrtReserveMemAddress(&clash, k2M, 0, static_cast<char *>(first) + kPage, 1),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReleaseMemAddress(again), ACL_SUCCESS);
}

TEST_F(AclVmmTest, ReserveBadArguments) {
  ExpectErrorLog("aclrtReleaseMemAddress: ");
  ExpectErrorLog("aclrtReserveMemAddress: ");
  void *va = nullptr;
  EXPECT_EQ(aclrtReserveMemAddress(nullptr, kPage, 0, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReserveMemAddress(&va, 0, 0, nullptr, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReserveMemAddress(&va, kPage, kPage, nullptr, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReserveMemAddress(&va, kPage, 0, nullptr, 2), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReserveMemAddress(&va, SIZE_MAX, 0, nullptr, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(va, nullptr);
  EXPECT_EQ(aclrtReleaseMemAddress(nullptr), ACL_ERROR_INVALID_PARAM);
  int local = 0;
  EXPECT_EQ(aclrtReleaseMemAddress(&local), ACL_ERROR_RT_PARAM_INVALID);
}

TEST_F(AclVmmTest, FullFlowSharesMemoryAndRestoresReservation) {
  ExpectErrorLog("aclrtFreePhysical: ");
  ExpectErrorLog("aclrtReleaseMemAddress: ");
  ExpectErrorLog("aclrtUnmapMem: ");
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 4 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  auto prop = Prop();
  aclrtDrvMemHandle h = nullptr;
  ASSERT_EQ(aclrtMallocPhysical(&h, 2 * kPage, &prop, 0), ACL_SUCCESS);
  ASSERT_NE(h, nullptr);
  char *lo = static_cast<char *>(va);
  char *hi = lo + 2 * kPage;
  ASSERT_EQ(aclrtMapMem(lo, 2 * kPage, 0, h, 0), ACL_SUCCESS);
  ASSERT_EQ(aclrtMapMem(hi, 2 * kPage, 0, h, 0), ACL_SUCCESS);  // same memory, second view
  EXPECT_EQ(Perms(lo), "rw-s");
  std::memset(lo, 0x5a, 2 * kPage);
  EXPECT_EQ(hi[0], 0x5a);
  EXPECT_EQ(hi[2 * kPage - 1], 0x5a);

  // Free the handle: the memory stays while mapped, and the handle is dead.
  ASSERT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(GetStats().physical_objects, 1U);
  lo[5] = 7;
  EXPECT_EQ(hi[5], 7);

  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);  // still mapped
  ASSERT_EQ(aclrtUnmapMem(lo), ACL_SUCCESS);
  EXPECT_EQ(Perms(lo), "---p");
  EXPECT_EQ(hi[5], 7);
  ASSERT_EQ(aclrtUnmapMem(hi), ACL_SUCCESS);
  EXPECT_EQ(GetStats().physical_objects, 0U);
  EXPECT_EQ(aclrtUnmapMem(hi), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(AclVmmTest, HugeAllocation) {
  ExpectErrorLog("aclrtMallocPhysical: ");
  ExpectErrorLog("aclrtMapMem: ");
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 2 * k2M, 0, nullptr, 1), ACL_SUCCESS);
  auto prop = Prop(ACL_HBM_MEM_HUGE);
  aclrtDrvMemHandle h = nullptr;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtMallocPhysical(&h, k2M, &prop, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(static_cast<char *>(va) + kPage, k2M, 0, h, 0),
            ACL_ERROR_RT_PARAM_INVALID);  // not 2 MiB aligned
  ASSERT_EQ(aclrtMapMem(static_cast<char *>(va) + k2M, k2M, 0, h, 0), ACL_SUCCESS);
  static_cast<char *>(va)[k2M + 123] = 1;
  EXPECT_EQ(aclrtUnmapMem(static_cast<char *>(va) + k2M), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

// The flow of a caller that reserves with flags 0 and maps a huge-page allocation at the base
// (the alignment argument is reserved, so it cannot ask for 2 MiB).
TEST_F(AclVmmTest, HugeAllocationMapsAtTheBaseOfAFlagsZeroReservation) {
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, k2M + kPage, 0, nullptr, 0), ACL_SUCCESS);
  auto prop = Prop(ACL_HBM_MEM_HUGE);
  aclrtDrvMemHandle h = nullptr;
  ASSERT_EQ(aclrtMallocPhysical(&h, k2M, &prop, 0), ACL_SUCCESS);
  ASSERT_EQ(aclrtMapMem(va, k2M, 0, h, 0), ACL_SUCCESS);
  static_cast<char *>(va)[k2M - 1] = 1;
  EXPECT_EQ(aclrtUnmapMem(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(AclVmmTest, MallocBadArguments) {
  ExpectErrorLog("aclrtFreePhysical: ");
  ExpectErrorLog("aclrtMallocPhysical: ");
  auto prop = Prop();
  aclrtDrvMemHandle h = nullptr;
  EXPECT_EQ(aclrtMallocPhysical(nullptr, kPage, &prop, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &prop, 1), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMallocPhysical(&h, 0, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage + 1, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
  auto bad = prop;
  bad.handleType = static_cast<aclrtMemHandleType>(1);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &bad, 0), ACL_ERROR_RT_PARAM_INVALID);
  bad = prop;
  bad.allocationType = static_cast<aclrtMemAllocationType>(1);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &bad, 0), ACL_ERROR_RT_PARAM_INVALID);
  bad = prop;
  bad.location.type = ACL_MEM_LOCATION_TYPE_UNREGISTERED;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &bad, 0), ACL_ERROR_RT_PARAM_INVALID);
  bad = prop;
  bad.reserve = 1;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &bad, 0), ACL_ERROR_RT_PARAM_INVALID);
  bad = prop;
  bad.memAttr = static_cast<aclrtMemAttr>(-1);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &bad, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(aclrtFreePhysical(nullptr), ACL_ERROR_INVALID_PARAM);
  int local = 0;
  EXPECT_EQ(aclrtFreePhysical(&local), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(AclVmmTest, MapBadArguments) {
  ExpectErrorLog("aclrtMapMem: ");
  ExpectErrorLog("aclrtReleaseMemAddress: ");
  ExpectErrorLog("aclrtUnmapMem: ");
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 4 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  auto prop = Prop();
  aclrtDrvMemHandle h = nullptr;
  ASSERT_EQ(aclrtMallocPhysical(&h, 2 * kPage, &prop, 0), ACL_SUCCESS);
  char *base = static_cast<char *>(va);
  int local = 0;
  EXPECT_EQ(aclrtMapMem(nullptr, 2 * kPage, 0, h, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, 0, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, 0, &local, 0), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, kPage, h, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, 0, h, 1), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMapMem(base, 0, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtMapMem(base, kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);          // size differs
  EXPECT_EQ(aclrtMapMem(base + 1, 2 * kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // align
  EXPECT_EQ(aclrtMapMem(base + 3 * kPage, 2 * kPage, 0, h, 0),
            ACL_ERROR_RT_PARAM_INVALID);  // runs past the reservation
  EXPECT_EQ(aclrtMapMem(&local, 2 * kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // no reserve
  ASSERT_EQ(aclrtMapMem(base + kPage, 2 * kPage, 0, h, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // overlap
  EXPECT_EQ(aclrtMapMem(base + 2 * kPage, 2 * kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(Perms(base), "---p");                              // failed calls changed nothing
  EXPECT_EQ(aclrtUnmapMem(base), ACL_ERROR_RT_PARAM_INVALID);  // not a start
  EXPECT_EQ(aclrtUnmapMem(base + 2 * kPage), ACL_ERROR_RT_PARAM_INVALID);  // inside
  EXPECT_EQ(aclrtUnmapMem(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReleaseMemAddress(base + kPage), ACL_ERROR_RT_PARAM_INVALID);  // not a base
  ASSERT_EQ(aclrtUnmapMem(base + kPage), ACL_SUCCESS);
  ASSERT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(base, 2 * kPage, 0, h, 0), ACL_ERROR_RT_INVALID_HANDLE);  // freed
  ASSERT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(AclVmmTest, FailureLogsOneLineNamingApiAndArgument) {
  void *va = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(aclrtReserveMemAddress(&va, kPage, 4096, nullptr, 0), ACL_ERROR_RT_PARAM_INVALID);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, testing::MatchesRegex(std::string(hzc::test::kLogPrefixRe) +
                                         "ERROR aclrtReserveMemAddress: alignment=0x1000: "
                                         "reserved, must be 0\n"));
}

}  // namespace
