// SPDX-License-Identifier: GPL-2.0
// HZC_IOC_RANGE_REGISTER / HZC_IOC_RANGE_UNREGISTER and the per-range sysfs directory.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>

#include "ktest.h"

namespace hzc::ktest {
namespace {

class RangeTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    page_ = PageSize();
  }
  size_t page_ = 0;
  Counters before_;
  void TearDown() override {
    DeviceTest::TearDown();
    fd_ = -1;
    ExpectBalanced(before_);
  }
};

TEST_F(RangeTest, RegisterUnregisterProtNoneReservation) {
  Reservation res(64 * page_);
  ASSERT_NE(res.base(), nullptr);
  hzc_range_register out{};
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &out), 0);
  EXPECT_NE(out.out_id, 0u);
  EXPECT_NE(out.out_mmap_offset, 0u);
  EXPECT_EQ(out.out_mmap_offset % page_, 0u);
  EXPECT_EQ(Counter("nr_ranges"), before_.ranges + 1);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), ENOENT);
}

TEST_F(RangeTest, BadArguments) {
  Reservation res(16 * page_);
  ASSERT_NE(res.base(), nullptr);
  char *b = res.base();
  EXPECT_EQ(RegisterRange(fd_, b, 0), EINVAL) << "zero size";
  EXPECT_EQ(RegisterRange(fd_, b + 1, page_), EINVAL) << "unaligned base";
  EXPECT_EQ(RegisterRange(fd_, b, page_ + 1), EINVAL) << "unaligned size";
  EXPECT_EQ(RegisterRange(fd_, reinterpret_cast<void *>(~0ULL & ~(page_ - 1)), 2 * page_),
            EOVERFLOW)
      << "base + size overflows";
  EXPECT_EQ(RegisterRange(fd_, reinterpret_cast<void *>(1ULL << 62), page_), EINVAL)
      << "beyond user space";
  EXPECT_EQ(RegisterRange(fd_, b - page_ * 1024 * 1024, page_), EFAULT) << "not mapped";
  // A hole in the middle.
  ASSERT_EQ(munmap(b + 8 * page_, page_), 0);
  EXPECT_EQ(RegisterRange(fd_, b, 16 * page_), EFAULT) << "hole";
  EXPECT_EQ(Counter("nr_ranges"), before_.ranges) << "failed calls changed nothing";
  EXPECT_EQ(UnregisterRange(fd_, b), ENOENT);
}

TEST_F(RangeTest, OverlapIsEexistAndChangesNothing) {
  Reservation res(32 * page_);
  ASSERT_NE(res.base(), nullptr);
  char *b = res.base();
  ASSERT_EQ(RegisterRange(fd_, b + 8 * page_, 8 * page_), 0);
  EXPECT_EQ(RegisterRange(fd_, b + 8 * page_, 8 * page_), EEXIST) << "equal";
  EXPECT_EQ(RegisterRange(fd_, b, 9 * page_), EEXIST) << "overlaps the start";
  EXPECT_EQ(RegisterRange(fd_, b + 15 * page_, 4 * page_), EEXIST) << "overlaps the end";
  EXPECT_EQ(RegisterRange(fd_, b + 10 * page_, page_), EEXIST) << "inside";
  EXPECT_EQ(RegisterRange(fd_, b, 32 * page_), EEXIST) << "contains";
  EXPECT_EQ(Counter("nr_ranges"), before_.ranges + 1);
  // Adjacent ranges are fine.
  EXPECT_EQ(RegisterRange(fd_, b, 8 * page_), 0);
  EXPECT_EQ(RegisterRange(fd_, b + 16 * page_, 8 * page_), 0);
  EXPECT_EQ(UnregisterRange(fd_, b + 9 * page_), ENOENT) << "not the exact base";
  EXPECT_EQ(UnregisterRange(fd_, b), 0);
  EXPECT_EQ(UnregisterRange(fd_, b + 8 * page_), 0);
  EXPECT_EQ(UnregisterRange(fd_, b + 16 * page_), 0);
}

TEST_F(RangeTest, ContextsAreIndependent) {
  Reservation res(4 * page_);
  ASSERT_NE(res.base(), nullptr);
  int other = OpenDevice();
  ASSERT_GE(other, 0);
  EXPECT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  EXPECT_EQ(RegisterRange(other, res.base(), res.size()), 0) << "another context of the process";
  EXPECT_EQ(UnregisterRange(other, res.base()), 0);
  close(other);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(RangeTest, IdsAreUniqueAndWindowsDistinct) {
  Reservation res(4 * page_);
  ASSERT_NE(res.base(), nullptr);
  std::set<uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    hzc_range_register out{};
    ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &out), 0);
    EXPECT_TRUE(ids.insert(out.out_id).second) << "id " << out.out_id << " reused";
    ASSERT_EQ(UnregisterRange(fd_, res.base()), 0);
  }
  // Live ranges have disjoint windows.
  std::vector<hzc_range_register> live(4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(RegisterRange(fd_, res.base() + i * page_, page_, &live[i]), 0);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) {
      EXPECT_NE(live[i].out_mmap_offset, live[j].out_mmap_offset);
    }
    EXPECT_EQ(UnregisterRange(fd_, res.base() + i * page_), 0);
  }
}

TEST_F(RangeTest, TenThousandCyclesNeverExhaustWindows) {
  const size_t len = 1ULL << 36;  // 64 GiB of reserved VA per cycle.
  Reservation res(len, PROT_NONE, MAP_NORESERVE);
  ASSERT_NE(res.base(), nullptr);
  uint64_t last_id = 0;
  for (int i = 0; i < 10000; ++i) {
    hzc_range_register out{};
    ASSERT_EQ(RegisterRange(fd_, res.base(), len, &out), 0) << "cycle " << i;
    ASSERT_GT(out.out_id, last_id);
    last_id = out.out_id;
    ASSERT_EQ(UnregisterRange(fd_, res.base()), 0);
  }
}

TEST_F(RangeTest, SysfsDirectoryPerRange) {
  Reservation res(8 * page_);
  ASSERT_NE(res.base(), nullptr);
  hzc_range_register out{};
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &out), 0);
  const std::string dir = std::string(kSysfsRoot) + "/ranges/" + std::to_string(out.out_id);
  EXPECT_EQ(ReadNumber(dir + "/owner_pid"), getpid());
  EXPECT_EQ(ReadNumber(dir + "/base"), reinterpret_cast<intptr_t>(res.base()));
  EXPECT_EQ(ReadNumber(dir + "/size"), static_cast<long long>(res.size()));
  EXPECT_EQ(ReadNumber(dir + "/activated_bytes"), 0);
  EXPECT_EQ(ReadNumber(dir + "/nr_activations"), 0);
  EXPECT_EQ(ReadLine(dir + "/state"), "registered");
  EXPECT_EQ(ReadLine(dir + "/domains"), "");
  struct stat st {};
  ASSERT_EQ(stat((dir + "/base").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u) << "base reveals an address: root only";
  ASSERT_EQ(stat((dir + "/size").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u) << "every user's objects: root only";
  ASSERT_EQ(stat((std::string(kSysfsRoot) + "/nr_ranges").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u) << "the counters are for everyone";
  ASSERT_EQ(UnregisterRange(fd_, res.base()), 0);
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " still exists";
}

TEST_F(RangeTest, MaxRangesParameterGivesEnospc) {
  const std::string param = "/sys/module/hzc/parameters/max_ranges";
  const long long old = ReadNumber(param);
  ASSERT_GT(old, 0);
  { std::ofstream(param) << 3; }
  ASSERT_EQ(ReadNumber(param), 3);
  Reservation res(8 * page_);
  ASSERT_NE(res.base(), nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(RegisterRange(fd_, res.base() + i * page_, page_), 0);
  }
  EXPECT_EQ(RegisterRange(fd_, res.base() + 3 * page_, page_), ENOSPC);
  { std::ofstream(param) << old; }
  EXPECT_EQ(RegisterRange(fd_, res.base() + 3 * page_, page_), 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(UnregisterRange(fd_, res.base() + i * page_), 0);
  }
}

// HZC_TEST_RANGES sets the number (scripts/debug-kernel uses fewer: under KASAN and lockdep
// a hundred thousand take most of an hour, and the point there is the paths, not the scale).
TEST_F(RangeTest, HundredThousandRanges) {
  const char *env = std::getenv("HZC_TEST_RANGES");
  const size_t n = env != nullptr ? std::strtoul(env, nullptr, 10) : 100000;
  ASSERT_TRUE(n >= 1000 && n % 7919 != 0)
      << "HZC_TEST_RANGES: at least 1000, not a multiple of 7919";
  const std::string param = "/sys/module/hzc/parameters/max_ranges";
  const long long old = ReadNumber(param);
  if (old <= static_cast<long long>(n)) {
    std::ofstream(param) << n + 1;
  }
  Reservation res(2 * n * page_, PROT_NONE, MAP_NORESERVE);
  ASSERT_NE(res.base(), nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  // Every other page, so neighbours never touch; register in a scattered order.
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (k * 7919) % n;
    if (k == n / 2) {
      std::cout << "register " << k << ": "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
                << " s\n";
    }
    ASSERT_EQ(RegisterRange(fd_, res.base() + 2 * i * page_, page_), 0) << "range " << k;
  }
  EXPECT_EQ(Counter("nr_ranges"), before_.ranges + static_cast<long long>(n));
  EXPECT_EQ(RegisterRange(fd_, res.base() + 2 * 500 * page_, page_), EEXIST);
  EXPECT_EQ(RegisterRange(fd_, res.base() + (2 * 500 + 1) * page_, page_), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base() + (2 * 500 + 1) * page_), 0);
  for (size_t i = 0; i < n; i += 2) {
    ASSERT_EQ(UnregisterRange(fd_, res.base() + 2 * i * page_), 0);
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::cout << "register " << n << " + unregister " << n / 2 << ": "
            << std::chrono::duration<double>(t1 - t0).count() << " s\n";
  // The rest goes away with the file (TearDown checks the counters).
  close(fd_);
  fd_ = -1;
  std::cout << "close with " << n / 2 << " ranges: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count()
            << " s\n";
  EXPECT_EQ(Counter("nr_ranges"), before_.ranges);
  std::ofstream(param) << old;
}

TEST_F(RangeTest, AbiSizesAndFlags) {
  Reservation res(4 * page_);
  ASSERT_NE(res.base(), nullptr);
  hzc_range_register reg{};
  reg.size = sizeof(reg);
  reg.base = reinterpret_cast<uintptr_t>(res.base());
  reg.length = res.size();
  CheckAbi(fd_, HZC_IOC_RANGE_REGISTER, reg, 0, [&](const hzc_range_register &r) {
    EXPECT_NE(r.out_id, 0u);
    EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
  });

  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  hzc_range_unregister unreg{};
  unreg.size = sizeof(unreg);
  unreg.base = reinterpret_cast<uintptr_t>(res.base());
  CheckAbi(fd_, HZC_IOC_RANGE_UNREGISTER, unreg, 0, [&](const hzc_range_unregister &) {
    EXPECT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  });
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0) << "the last undo registered it again";
}

TEST_F(RangeTest, ForkedChildCannotUseParentContext) {
  Reservation res(4 * page_);
  ASSERT_NE(res.base(), nullptr);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int ok = RegisterRange(fd_, res.base() + page_, page_) == EPERM &&
             UnregisterRange(fd_, res.base()) == EPERM;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

}  // namespace
}  // namespace hzc::ktest
