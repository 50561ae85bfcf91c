// SPDX-License-Identifier: GPL-2.0
// Every slab allocation of open, register, activate, unregister, join, board
// put/wait and the listings fails in turn (fault injection's per-task fail-nth, as
// tools/testing/selftests/iommu/iommufd_fail_nth.c does): each call either
// succeeds or fails with ENOMEM, and the counters show nothing left behind.
// Needs CONFIG_FAILSLAB and debugfs (the debug kernel of scripts/debug-kernel);
// skipped elsewhere.
#include <sys/mount.h>

#include <functional>

#include "ktest.h"

namespace hzc::ktest {
namespace {

constexpr const char *kFailslab = "/sys/kernel/debug/failslab";

void WriteFile(const std::string &path, const std::string &value) {
  std::ofstream(path) << value;
}

class FailNthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/sys/kernel/debug/failslab", F_OK) != 0) {
      mount("debugfs", "/sys/kernel/debug", "debugfs", 0, nullptr);
    }
    if (access(kFailslab, F_OK) != 0 || access("/proc/thread-self/fail-nth", W_OK) != 0) {
      GTEST_SKIP() << "no slab fault injection (CONFIG_FAILSLAB, debugfs): "
                      "run under scripts/debug-kernel test";
    }
    // Fail GFP_KERNEL allocations too, and quietly: a stack dump per
    // injected failure would read as a kernel splat.
    old_ignore_ = ReadLine(std::string(kFailslab) + "/ignore-gfp-wait");
    old_verbose_ = ReadLine(std::string(kFailslab) + "/verbose");
    WriteFile(std::string(kFailslab) + "/ignore-gfp-wait", "N");
    WriteFile(std::string(kFailslab) + "/verbose", "0");
    nth_ = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
    ASSERT_GE(nth_, 0);
    page_ = PageSize();
  }
  void TearDown() override {
    if (nth_ >= 0) {
      close(nth_);
      WriteFile(std::string(kFailslab) + "/ignore-gfp-wait", old_ignore_);
      WriteFile(std::string(kFailslab) + "/verbose", old_verbose_);
      ExpectBalanced(before_);
    }
  }

  // Arms the n-th fault injection point of this thread (0 disarms).
  void Arm(unsigned n) {
    const std::string s = std::to_string(n);
    ASSERT_EQ(pwrite(nth_, s.data(), s.size(), 0), static_cast<ssize_t>(s.size()));
  }
  // Disarms and tells whether the armed failure was injected.
  bool Injected() {
    char buf[16] = {};
    const ssize_t n = pread(nth_, buf, sizeof(buf) - 1, 0);
    Arm(0);
    return n > 0 && std::stoul(buf) == 0;
  }

  // Runs op with its 1st, 2nd, ... injection point failing until it runs
  // without reaching the armed one.  op returns 0 or an errno; an injected
  // failure must give ENOMEM (or be absorbed: 0).  Each round runs setup,
  // op, undo (only if op succeeded) and cleanup, and must leave the global
  // counters as it found them.  Returns the number of points swept.
  unsigned Sweep(
      const char *what, const std::function<int()> &op, const std::function<void()> &undo,
      const std::function<int()> &setup = [] { return 0; },
      const std::function<void()> &cleanup = [] {}) {
    for (unsigned n = 1; n < 500; ++n) {
      const Counters start;
      if (setup() != 0) {
        ADD_FAILURE() << what << ": setup failed";
        return n;
      }
      Arm(n);
      const int err = op();
      const bool injected = Injected();
      if (err == 0) {
        undo();
      }
      cleanup();
      if (err != 0) {
        EXPECT_EQ(err, ENOMEM) << what << ": point " << n << " gave " << strerror(err);
      }
      const Counters now;
      EXPECT_EQ(now.ranges, start.ranges) << what << " round " << n;
      EXPECT_EQ(now.activations, start.activations) << what << " round " << n;
      EXPECT_EQ(now.domains, start.domains) << what << " round " << n;
      EXPECT_EQ(now.pinned, start.pinned) << what << " round " << n;
      EXPECT_EQ(now.contexts, start.contexts) << what << " round " << n;
      EXPECT_EQ(now.foll_pins, start.foll_pins) << what << " round " << n;
      if (!injected) {
        EXPECT_EQ(err, 0) << what << ": fails without an injected failure";
        return n - 1;
      }
      if (err != 0 && err != ENOMEM) {
        return n;
      }
    }
    ADD_FAILURE() << what << ": more than 500 injection points";
    return 500;
  }

  static int Errno(int ret) { return ret == 0 ? 0 : errno; }

  int nth_ = -1;
  size_t page_ = 0;
  std::string old_ignore_, old_verbose_;
  Counters before_;
};

TEST_F(FailNthTest, Open) {
  int fd = -1;
  EXPECT_GT(Sweep(
                "open",
                [&] {
                  fd = open(kDevice, O_RDWR | O_CLOEXEC);
                  return fd >= 0 ? 0 : errno;
                },
                [&] { close(fd); }),
            0u);
}

TEST_F(FailNthTest, RegisterAndActivate) {
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  Reservation res(16 * page_, PROT_READ | PROT_WRITE);
  hzc_range_register reg{};
  reg.size = sizeof(reg);
  reg.base = reinterpret_cast<uintptr_t>(res.base());
  reg.length = res.size();
  EXPECT_GT(Sweep(
                "register", [&] { return Errno(ioctl(fd, HZC_IOC_RANGE_REGISTER, &reg)); },
                [&] { EXPECT_EQ(UnregisterRange(fd, res.base()), 0); }),
            0u);

  hzc_activate act{};
  act.size = sizeof(act);
  act.va = reinterpret_cast<uintptr_t>(res.base());
  act.length = 8 * page_;
  EXPECT_GT(Sweep(
                "activate", [&] { return Errno(ioctl(fd, HZC_IOC_ACTIVATE, &act)); },
                [&] { EXPECT_EQ(Deactivate(fd, res.base()), 0); },
                [&] { return RegisterRange(fd, res.base(), res.size()); },
                [&] { EXPECT_EQ(UnregisterRange(fd, res.base()), 0); }),
            0u);
  close(fd);
}

// Unregistering cannot fail half-way: erasing a range's window from the window tree may
// need tree nodes, and a window left behind would hand the freed range to the next mmap()
// of its offset. Around the swept range, enough others for a tree of several levels.
TEST_F(FailNthTest, Unregister) {
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  constexpr size_t kRanges = 300;
  Reservation res(2 * kRanges * page_, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  for (size_t i = 0; i < kRanges; ++i) {
    ASSERT_EQ(RegisterRange(fd, res.base() + 2 * i * page_, page_), 0) << "range " << i;
  }
  char *const target = res.base() + kRanges * page_;
  ASSERT_EQ(UnregisterRange(fd, target), 0);
  hzc_range_register reg{};
  // Allocations that may not fail are not injection points: the sweep may find none.
  Sweep(
      "unregister", [&] { return UnregisterRange(fd, target); },
      [&] {
        void *p = mmap(nullptr, page_, PROT_READ, MAP_SHARED, fd,
                       static_cast<off_t>(reg.out_mmap_offset));
        EXPECT_EQ(p, MAP_FAILED) << "mmap of the unregistered range's window";
        if (p != MAP_FAILED) {
          munmap(p, page_);
        }
      },
      [&] { return RegisterRange(fd, target, page_, &reg); }, [&] { UnregisterRange(fd, target); });
  close(fd);
}

TEST_F(FailNthTest, JoinPutWaitAndList) {
  const int fd = OpenDevice();
  const int other = OpenDevice();
  ASSERT_GE(fd, 0);
  ASSERT_GE(other, 0);
  DomainId id{};
  hzc_domain_join join{};
  join.size = sizeof(join);
  join.nranks = 2;
  const auto fresh = [&] {
    id = NewDomainId();
    join.domain_id[0] = id.lo;
    join.domain_id[1] = id.hi;
    return 0;
  };
  // Creating a domain, then joining an existing one.
  EXPECT_GT(Sweep(
                "join (create)",
                [&] {
                  join.rank = 0;
                  return Errno(ioctl(fd, HZC_IOC_DOMAIN_JOIN, &join));
                },
                [&] { EXPECT_EQ(Leave(fd, id, 0), 0); }, fresh),
            0u);
  EXPECT_GT(Sweep(
                "join (existing)",
                [&] {
                  join.rank = 1;
                  return Errno(ioctl(fd, HZC_IOC_DOMAIN_JOIN, &join));
                },
                [&] { EXPECT_EQ(Leave(fd, id, 1), 0); },
                [&] { return fresh() || Join(other, id, 0, 2); }, [&] { Leave(other, id, 0); }),
            0u);

  // Publishing (a blob leaves with its member: each round has its domain),
  // waiting on a complete key, listing a member's ranges and activations.
  hzc_board_put put{};
  put.size = sizeof(put);
  put.blob = reinterpret_cast<uintptr_t>("blob");
  put.blob_len = 4;
  const auto join_alone = [&] {
    fresh();
    put.domain_id[0] = id.lo;
    put.domain_id[1] = id.hi;
    return Join(fd, id, 0, 1);
  };
  const auto leave = [&] { EXPECT_EQ(Leave(fd, id, 0), 0); };
  EXPECT_GT(Sweep(
                "board put", [&] { return Errno(ioctl(fd, HZC_IOC_BOARD_PUT, &put)); }, [] {},
                join_alone, leave),
            0u);

  ASSERT_EQ(join_alone(), 0);
  ASSERT_EQ(Put(fd, id, 0, 0, "blob", 4), 0);
  Reservation res(4 * page_, PROT_READ | PROT_WRITE);
  ASSERT_EQ(RegisterRange(fd, res.base(), res.size()), 0);
  ASSERT_EQ(Activate(fd, res.base(), page_), 0);
  uint64_t missing = 0;
  uint32_t len = 0;
  char blob[8];
  hzc_board_wait wait{};
  wait.size = sizeof(wait);
  wait.domain_id[0] = id.lo;
  wait.domain_id[1] = id.hi;
  wait.blob_stride = sizeof(blob);
  wait.blobs = reinterpret_cast<uintptr_t>(blob);
  wait.blob_lens = reinterpret_cast<uintptr_t>(&len);
  wait.missing = reinterpret_cast<uintptr_t>(&missing);
  EXPECT_GT(Sweep(
                "board wait", [&] { return Errno(ioctl(fd, HZC_IOC_BOARD_WAIT, &wait)); }, [] {}),
            0u);
  hzc_range_desc desc{};
  hzc_list_ranges lr{};
  lr.size = sizeof(lr);
  lr.domain_id[0] = id.lo;
  lr.domain_id[1] = id.hi;
  lr.num_ranges = 1;
  lr.ranges = reinterpret_cast<uintptr_t>(&desc);
  EXPECT_GT(Sweep(
                "list ranges", [&] { return Errno(ioctl(fd, HZC_IOC_LIST_RANGES, &lr)); }, [] {}),
            0u);
  hzc_activation_desc adesc{};
  hzc_list_activations la{};
  la.size = sizeof(la);
  la.domain_id[0] = id.lo;
  la.domain_id[1] = id.hi;
  la.range_id = desc.id;
  la.num_activations = 1;
  la.activations = reinterpret_cast<uintptr_t>(&adesc);
  EXPECT_GT(Sweep(
                "list activations", [&] { return Errno(ioctl(fd, HZC_IOC_LIST_ACTIVATIONS, &la)); },
                [] {}),
            0u);
  EXPECT_EQ(Deactivate(fd, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd, res.base()), 0);
  leave();
  close(other);
  close(fd);
}

}  // namespace
}  // namespace hzc::ktest
