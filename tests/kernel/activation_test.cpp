// SPDX-License-Identifier: GPL-2.0
// HZC_IOC_ACTIVATE / HZC_IOC_DEACTIVATE: pins, accounting, memfd and huge pages.
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstddef>
#include <iostream>

#include "ktest.h"

namespace hzc::ktest {
namespace {

class ActivationTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    page_ = PageSize();
  }
  void TearDown() override {
    DeviceTest::TearDown();
    fd_ = -1;
    ExpectBalanced(before_);
  }
  size_t page_ = 0;
  Counters before_;
};

TEST_F(ActivationTest, PinsAndUnpinsWithCounters) {
  Reservation res(64 * page_, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &reg), 0);
  uint64_t range_id = 0;
  ASSERT_EQ(Activate(fd_, res.base() + 8 * page_, 16 * page_, &range_id), 0);
  EXPECT_EQ(range_id, reg.out_id);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(16 * page_));
  EXPECT_EQ(Counter("nr_activations"), before_.activations + 1);
  const Counters mid;
  EXPECT_EQ(mid.foll_pins, before_.foll_pins + 16) << "16 pages pinned with FOLL_PIN";
  const std::string dir = std::string(kSysfsRoot) + "/ranges/" + std::to_string(reg.out_id);
  EXPECT_EQ(ReadNumber(dir + "/activated_bytes"), static_cast<long long>(16 * page_));
  EXPECT_EQ(ReadNumber(dir + "/nr_activations"), 1);
  EXPECT_EQ(ReadLine(dir + "/state"), "active");

  EXPECT_EQ(UnregisterRange(fd_, res.base()), EBUSY) << "activations remain";
  EXPECT_EQ(Deactivate(fd_, res.base() + 9 * page_), ENOENT) << "not the exact start";
  EXPECT_EQ(Deactivate(fd_, res.base() + 8 * page_), 0);
  EXPECT_EQ(Deactivate(fd_, res.base() + 8 * page_), ENOENT);
  EXPECT_EQ(ReadLine(dir + "/state"), "registered");
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(ActivationTest, BadArguments) {
  Reservation res(32 * page_, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  char *b = res.base();
  ASSERT_EQ(RegisterRange(fd_, b + 8 * page_, 16 * page_), 0);
  EXPECT_EQ(Activate(fd_, b + 8 * page_, 0), EINVAL) << "zero size";
  EXPECT_EQ(Activate(fd_, b + 8 * page_ + 1, page_), EINVAL) << "unaligned va";
  EXPECT_EQ(Activate(fd_, b + 8 * page_, page_ + 1), EINVAL) << "unaligned size";
  EXPECT_EQ(Activate(fd_, b + 8 * page_, ~0ULL & ~(page_ - 1)), EOVERFLOW);
  EXPECT_EQ(Activate(fd_, b, page_), ENOENT) << "outside any range";
  EXPECT_EQ(Activate(fd_, b + 20 * page_, 8 * page_), EINVAL) << "leaves the range";
  EXPECT_EQ(Activate(fd_, b + 8 * page_, 4 * page_), 0);
  EXPECT_EQ(Activate(fd_, b + 8 * page_, 4 * page_), EEXIST) << "same";
  EXPECT_EQ(Activate(fd_, b + 11 * page_, 2 * page_), EEXIST) << "overlap";
  EXPECT_EQ(Activate(fd_, b + 12 * page_, 4 * page_), 0) << "adjacent";
  EXPECT_EQ(Counter("nr_activations"), before_.activations + 2);
  EXPECT_EQ(Deactivate(fd_, b + 8 * page_), 0);
  EXPECT_EQ(Deactivate(fd_, b + 12 * page_), 0);
  EXPECT_EQ(UnregisterRange(fd_, b + 8 * page_), 0);
}

TEST_F(ActivationTest, UnmappedOrReadOnlyIsEfaultAndPinsNothing) {
  Reservation res(16 * page_);  // PROT_NONE
  ASSERT_NE(res.base(), nullptr);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  EXPECT_EQ(Activate(fd_, res.base(), 4 * page_), EFAULT) << "PROT_NONE";
  ASSERT_EQ(mprotect(res.base(), 8 * page_, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(mprotect(res.base() + 4 * page_, page_, PROT_READ), 0);
  EXPECT_EQ(Activate(fd_, res.base(), 8 * page_), EFAULT) << "one read-only page";
  const Counters now;
  EXPECT_EQ(now.foll_pins, before_.foll_pins) << "nothing stays pinned";
  EXPECT_EQ(now.pinned, before_.pinned);
  EXPECT_EQ(Activate(fd_, res.base(), 4 * page_), 0);
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(ActivationTest, DataWrittenBeforeAndAfterPinIsKept) {
  Reservation res(4 * page_, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  std::memset(res.base(), 0x11, res.size());
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  ASSERT_EQ(Activate(fd_, res.base(), res.size()), 0);
  res.base()[5] = 0x22;
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(res.base()[4], 0x11);
  EXPECT_EQ(res.base()[5], 0x22);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(ActivationTest, MemfdPages) {
  const size_t len = 64 * page_;
  int mfd = static_cast<int>(syscall(SYS_memfd_create, "hzc-test", 0));
  ASSERT_GE(mfd, 0);
  ASSERT_EQ(ftruncate(mfd, static_cast<off_t>(len)), 0);
  Reservation res(2 * len);
  ASSERT_NE(res.base(), nullptr);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  void *p = mmap(res.base(), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd, 0);
  ASSERT_EQ(p, res.base());
  EXPECT_EQ(Activate(fd_, res.base(), len), 0);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(len));
  EXPECT_EQ(Activate(fd_, res.base() + len, len), EFAULT) << "the PROT_NONE rest";
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
  close(mfd);
}

// A shared mapping of a file whose pages the file system tracks for writing
// (here ramfs: page_mkwrite) cannot be pinned writable for the long term;
// a private mapping of the same file can (its pages are anonymous copies).
TEST_F(ActivationTest, SharedFileMappingNeedingDirtyTrackingIsEfault) {
  char dir[] = "/tmp/hzc-ramfs-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  if (mount("hzc-ramfs", dir, "ramfs", 0, nullptr) != 0) {
    rmdir(dir);
    GTEST_SKIP() << "cannot mount a ramfs: " << strerror(errno);
  }
  const std::string path = std::string(dir) + "/file";
  const size_t len = 8 * page_;
  int file = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(file, 0);
  ASSERT_EQ(ftruncate(file, static_cast<off_t>(len)), 0);
  {
    Reservation res(2 * len);
    ASSERT_NE(res.base(), nullptr);
    ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
    ASSERT_EQ(mmap(res.base(), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, file, 0),
              res.base());
    ASSERT_EQ(mmap(res.base() + len, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, file, 0),
              res.base() + len);
    std::memset(res.base(), 1, 2 * len);
    EXPECT_EQ(Activate(fd_, res.base(), len), EFAULT) << "MAP_SHARED";
    EXPECT_EQ(Activate(fd_, res.base() + len - page_, 2 * page_), EFAULT) << "straddling both";
    EXPECT_EQ(Counters().foll_pins, before_.foll_pins) << "nothing stays pinned";
    EXPECT_EQ(Activate(fd_, res.base() + len, len), 0) << "MAP_PRIVATE";
    EXPECT_EQ(Deactivate(fd_, res.base() + len), 0);
    EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
  }
  close(file);
  unlink(path.c_str());
  EXPECT_EQ(umount(dir), 0);
  rmdir(dir);
}

TEST_F(ActivationTest, TransparentHugePages) {
  const size_t huge = 2 << 20;
  Reservation res(4 * huge, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  char *aligned = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(res.base()) + huge - 1) &
                                           ~(uintptr_t)(huge - 1));
  ASSERT_EQ(madvise(aligned, 2 * huge, MADV_HUGEPAGE), 0);
  std::memset(aligned, 1, 2 * huge);
  const long long thp_before = VmStat("nr_anon_transparent_hugepages");
  ASSERT_EQ(RegisterRange(fd_, aligned, 2 * huge), 0);
  EXPECT_EQ(Activate(fd_, aligned, 2 * huge), 0);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(2 * huge));
  if (thp_before <= 0) {
    std::cout << "note: no transparent huge page was allocated (THP disabled?)\n";
  }
  EXPECT_EQ(Deactivate(fd_, aligned), 0);
  EXPECT_EQ(UnregisterRange(fd_, aligned), 0);
}

TEST_F(ActivationTest, HugetlbPages) {
  const size_t huge = 2 << 20;
  const std::string nr = "/proc/sys/vm/nr_hugepages";
  const long long old = ReadNumber(nr);
  if (old < 2) {
    std::ofstream(nr) << 2;
  }
  void *p = mmap(nullptr, 2 * huge, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p == MAP_FAILED) {
    std::ofstream(nr) << old;
    GTEST_SKIP() << "no hugetlb pages available: " << strerror(errno);
  }
  char *b = static_cast<char *>(p);
  ASSERT_EQ(RegisterRange(fd_, b, 2 * huge), 0);
  EXPECT_EQ(Activate(fd_, b, 2 * huge), 0);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(2 * huge));
  EXPECT_EQ(Deactivate(fd_, b), 0);
  EXPECT_EQ(UnregisterRange(fd_, b), 0);
  munmap(p, 2 * huge);
  std::ofstream(nr) << old;
}

// Runs body in a child without CAP_IPC_LOCK (uid nobody) and RLIMIT_MEMLOCK = limit.
template <typename Body>
int InUnprivilegedChild(rlim_t limit, Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(100);
    }
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST_F(ActivationTest, RlimitMemlockIsEnforcedWithoutCapIpcLock) {
  const size_t page = page_;
  const int rc = InUnprivilegedChild(16 * page, [page]() {
    int fd = OpenDevice();
    if (fd < 0) {
      return 1;
    }
    Reservation res(64 * page, PROT_READ | PROT_WRITE);
    if (RegisterRange(fd, res.base(), res.size()) != 0) {
      return 2;
    }
    const long long pins = Counters().foll_pins;
    if (Activate(fd, res.base(), 32 * page) != ENOMEM) {
      return 3;
    }
    if (Counters().foll_pins != pins) {
      return 4;  // something stayed pinned
    }
    if (Activate(fd, res.base(), 16 * page) != 0) {
      return 5;
    }
    if (Activate(fd, res.base() + 16 * page, page) != ENOMEM) {
      return 6;
    }
    if (Deactivate(fd, res.base()) != 0 || Activate(fd, res.base() + 16 * page, page) != 0) {
      return 7;  // the charge was returned
    }
    close(fd);
    return 0;
  });
  EXPECT_EQ(rc, 0) << "step that failed (100: could not drop privileges)";
}

// TAINT_WARN: set by any kernel warning, e.g. the allocator's on an oversized request.
bool KernelWarned() {
  return (ReadNumber("/proc/sys/kernel/tainted") & (1 << 9)) != 0;
}

// An activation whose page array alone would be 32 GiB: ENOMEM from the
// memlock charge (unprivileged) or from the allocation (CAP_IPC_LOCK), never
// a kernel warning, and nothing stays pinned or charged.
TEST_F(ActivationTest, HugeActivationIsEnomemWithoutKernelWarning) {
  if (KernelWarned()) {
    GTEST_SKIP() << "the kernel is already tainted by a warning";
  }
  const size_t len = 16ULL << 40;  // 16 TiB of address space, no memory
  Reservation res(len, PROT_NONE, MAP_NORESERVE);
  if (res.base() == nullptr) {
    GTEST_SKIP() << "cannot reserve 16 TiB of address space";
  }
  ASSERT_EQ(RegisterRange(fd_, res.base(), len), 0);
  EXPECT_EQ(Activate(fd_, res.base(), len), ENOMEM) << "CAP_IPC_LOCK caller";
  EXPECT_FALSE(KernelWarned());
  const int rc = InUnprivilegedChild(16 * page_, [len]() {
    int fd = OpenDevice();
    Reservation r(len, PROT_NONE, MAP_NORESERVE);
    if (fd < 0 || r.base() == nullptr || RegisterRange(fd, r.base(), len) != 0) {
      return 1;
    }
    return Activate(fd, r.base(), len) == ENOMEM ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << "unprivileged caller (1: setup, 2: not ENOMEM)";
  EXPECT_FALSE(KernelWarned());
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(ActivationTest, CapIpcLockIsExempt) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root";
  }
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &old), 0);
  rlimit rl{page_, old.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
  Reservation res(16 * page_, PROT_READ | PROT_WRITE);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  EXPECT_EQ(Activate(fd_, res.base(), res.size()), 0);
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &old), 0);
}

TEST_F(ActivationTest, MaxPinnedBytesParameterGivesEnomem) {
  const std::string param = "/sys/module/hzc/parameters/max_pinned_bytes";
  const long long old = ReadNumber(param);
  ASSERT_GE(old, 0);
  std::ofstream(param) << 8 * page_;
  Reservation res(16 * page_, PROT_READ | PROT_WRITE);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  EXPECT_EQ(Activate(fd_, res.base(), 9 * page_), ENOMEM);
  EXPECT_EQ(Activate(fd_, res.base(), 8 * page_), 0);
  EXPECT_EQ(Activate(fd_, res.base() + 8 * page_, page_), ENOMEM);
  {
    // The limit is per user: another context of the same user shares it.
    const int other = OpenDevice();
    ASSERT_GE(other, 0);
    Reservation more(page_, PROT_READ | PROT_WRITE);
    ASSERT_EQ(RegisterRange(other, more.base(), more.size()), 0);
    EXPECT_EQ(Activate(other, more.base(), page_), ENOMEM) << "another context, same user";
    close(other);
  }
  std::ofstream(param) << old;
  EXPECT_EQ(Activate(fd_, res.base() + 8 * page_, page_), 0);
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(Deactivate(fd_, res.base() + 8 * page_), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(ActivationTest, CloseReleasesEverything) {
  Reservation res(64 * page_, PROT_READ | PROT_WRITE);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  ASSERT_EQ(Activate(fd_, res.base(), 16 * page_), 0);
  ASSERT_EQ(Activate(fd_, res.base() + 32 * page_, 16 * page_), 0);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(32 * page_));
  // TearDown closes the file and checks every counter is back.
}

TEST_F(ActivationTest, AbiSizesAndFlags) {
  Reservation res(8 * page_, PROT_READ | PROT_WRITE);
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size()), 0);
  hzc_activate act{};
  act.size = sizeof(act);
  act.va = reinterpret_cast<uintptr_t>(res.base());
  act.length = 4 * page_;
  CheckAbi(
      fd_, HZC_IOC_ACTIVATE, act, 0,
      [&](const hzc_activate &) { EXPECT_EQ(Deactivate(fd_, res.base()), 0); },
      offsetof(hzc_activate, cookie));
  // The first version of the struct (without the cookie) still works, with its size in
  // the command.
  act.size = offsetof(hzc_activate, cookie);
  act.cookie = 0x5a5a;
  ASSERT_EQ(SizedIoctl(fd_, HZC_IOC_ACTIVATE, &act), 0);
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  ASSERT_EQ(Activate(fd_, res.base(), 4 * page_), 0);
  hzc_deactivate deact{};
  deact.size = sizeof(deact);
  deact.va = reinterpret_cast<uintptr_t>(res.base());
  CheckAbi(fd_, HZC_IOC_DEACTIVATE, deact, 0,
           [&](const hzc_deactivate &) { EXPECT_EQ(Activate(fd_, res.base(), 4 * page_), 0); });
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

}  // namespace
}  // namespace hzc::ktest
