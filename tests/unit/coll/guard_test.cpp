// SPDX-License-Identifier: Apache-2.0
// Guarded regions: a fault inside a declared span becomes a report, any other fault still
// kills the process with its own signal.
#include "coll/guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <csignal>

#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "hzc_test.h"

namespace hzc::coll {
namespace {

using GuardTest = test::Test;

size_t Page() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

Span SpanOf(const UniqueMapping &m, uint32_t rank) {
  const auto begin = reinterpret_cast<uintptr_t>(m.get());
  return Span{.begin = begin, .end = begin + m.size(), .rank = rank};
}

void Touch(volatile char *p) {
  *p = 1;
}

TEST_F(GuardTest, NoFaultRunsToTheEnd) {
  int ran = 0;
  const Fault f = RunGuarded({}, [&] { ran = 1; });
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(f.faulted);
}

TEST_F(GuardTest, SegvInASpanIsReported) {
  auto m = UniqueMapping::Map(2 * Page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  ASSERT_TRUE(m.valid());
  bool after = false;
  const Fault f = RunGuarded({SpanOf(m, 3)}, [&] {
    Touch(m.as<char>() + Page() + 8);
    after = true;
  });
  EXPECT_TRUE(f.faulted);
  EXPECT_FALSE(after);
  EXPECT_EQ(f.rank, 3U);
  EXPECT_EQ(f.address, reinterpret_cast<uintptr_t>(m.as<char>() + Page() + 8));
  // The guard is reusable after a fault.
  EXPECT_TRUE(RunGuarded({SpanOf(m, 1)}, [&] { Touch(m.as<char>()); }).faulted);
}

TEST_F(GuardTest, SigbusInASpanIsReported) {
  UniqueFd mem(memfd_create("guard-test", MFD_CLOEXEC));
  ASSERT_TRUE(mem.valid());
  ASSERT_EQ(ftruncate(mem.get(), static_cast<off_t>(Page())), 0);
  auto m = UniqueMapping::Map(Page(), PROT_READ | PROT_WRITE, MAP_SHARED, mem.get());
  ASSERT_TRUE(m.valid());
  ASSERT_EQ(ftruncate(mem.get(), 0), 0);  // the page is beyond the end of the file: SIGBUS
  const Fault f = RunGuarded({SpanOf(m, 5)}, [&] { Touch(m.as<char>()); });
  EXPECT_TRUE(f.faulted);
  EXPECT_EQ(f.rank, 5U);
}

TEST_F(GuardTest, FaultOutsideTheSpansIsNotTakenOver) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto declared = UniqueMapping::Map(Page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  auto other = UniqueMapping::Map(Page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  ASSERT_TRUE(declared.valid() && other.valid());
  EXPECT_EXIT(RunGuarded({SpanOf(declared, 0)}, [&] { Touch(other.as<char>()); }),
              ::testing::KilledBySignal(SIGSEGV), "");
  // Outside any guarded region, with the handler installed by an earlier region.
  EXPECT_EXIT(
      {
        (void)RunGuarded({}, [] {});
        Touch(other.as<char>());
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// A handler the program installed before the library's first guarded region still gets the
// faults the library does not take over.
TEST_F(GuardTest, FaultOutsideTheSpansGoesToTheProgramsHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto other = UniqueMapping::Map(Page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  ASSERT_TRUE(other.valid());
  EXPECT_EXIT(
      {
        struct sigaction sa {};
        sa.sa_handler = [](int) { _exit(42); };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, nullptr);
        (void)RunGuarded({}, [] {});
        Touch(other.as<char>());
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace hzc::coll
