// SPDX-License-Identifier: GPL-2.0
// Domains and the board: join/leave, rendezvous with timeout, wake-ups on leave/death.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "ktest.h"

namespace hzc::ktest {
namespace {

class DomainTest : public DeviceTest {
 protected:
  void TearDown() override {
    DeviceTest::TearDown();
    fd_ = -1;
    ExpectBalanced(before_);
  }
  Counters before_;
};

TEST_F(DomainTest, JoinLeaveAndSysfs) {
  const DomainId id = NewDomainId();
  int other = OpenDevice();
  ASSERT_GE(other, 0);
  ASSERT_EQ(Join(fd_, id, 0, 2), 0);
  // domains/<N>: a sequence number, not the id (which only root may read, in `id`).
  const std::string dir = FindDomainDir(id);
  ASSERT_NE(dir, "") << "no domains/<N>/id shows " << DomainIdHex(id);
  const std::string number = dir.substr(dir.rfind('/') + 1);
  EXPECT_EQ(number.find_first_not_of("0123456789"), std::string::npos) << number;
  EXPECT_EQ(ReadLine(dir + "/state"), "live");
  EXPECT_EQ(ReadNumber(dir + "/nranks"), 2);
  EXPECT_EQ(ReadNumber(dir + "/joined"), 1);
  EXPECT_EQ(ReadNumber(dir + "/rank0/pid"), getpid());
  EXPECT_EQ(ReadNumber(dir + "/creator_uid"), geteuid());
  EXPECT_EQ(Counter("nr_domains"), before_.domains + 1);
  ASSERT_EQ(Join(other, id, 1, 2), 0);
  EXPECT_EQ(ReadNumber(dir + "/joined"), 2);
  EXPECT_EQ(ReadNumber(dir + "/rank1/pid"), getpid());
  EXPECT_EQ(Counter("nr_domains"), before_.domains + 1) << "same domain";

  // A range's sysfs lists its owner's domains by number.
  Reservation res(PageSize());
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &reg), 0);
  EXPECT_EQ(
      ReadLine(std::string(kSysfsRoot) + "/ranges/" + std::to_string(reg.out_id) + "/domains"),
      number);

  // A broken domain keeps its directory and its count until its last member left.
  EXPECT_EQ(Leave(fd_, id, 0), 0);
  EXPECT_EQ(access(dir.c_str(), F_OK), 0) << "rank 1 still holds the broken domain";
  EXPECT_EQ(ReadLine(dir + "/state"), "broken");
  EXPECT_EQ(Counter("nr_domains"), before_.domains + 1) << "counted until freed";
  EXPECT_EQ(Leave(fd_, id, 0), ENOENT);
  EXPECT_EQ(Put(other, id, 1, 0, "x", 1), ECONNRESET) << "the domain broke";
  EXPECT_EQ(Wait(other, id, 1, 0, 2, 0).err, ECONNRESET);
  // The same id now names a new domain, with a new number.
  EXPECT_EQ(Join(fd_, id, 0, 2), 0);
  const std::string again = FindDomainDir(id);
  EXPECT_NE(again, "");
  EXPECT_NE(again, dir) << "numbers are not reused";
  EXPECT_EQ(Counter("nr_domains"), before_.domains + 2);
  EXPECT_EQ(Leave(fd_, id, 0), 0);
  EXPECT_EQ(Leave(other, id, 1), 0);
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "freed with its last member";
  EXPECT_NE(access(again.c_str(), F_OK), 0);
  EXPECT_EQ(Counter("nr_domains"), before_.domains);
  close(other);
}

TEST_F(DomainTest, BadArguments) {
  const DomainId id = NewDomainId();
  hzc_info info{};
  info.size = sizeof(info);
  ASSERT_EQ(Ioctl(fd_, HZC_IOC_INFO, &info), 0);
  EXPECT_EQ(Join(fd_, DomainId{0, 0}, 0, 2), EINVAL) << "zero id";
  EXPECT_EQ(Join(fd_, id, 0, 0), EINVAL) << "nranks 0";
  EXPECT_EQ(Join(fd_, id, 0, info.out_max_ranks + 1), EINVAL) << "too many ranks";
  EXPECT_EQ(Join(fd_, id, 2, 2), EINVAL) << "rank >= nranks";
  ASSERT_EQ(Join(fd_, id, 0, 3), 0);
  EXPECT_EQ(Join(fd_, id, 1, 4), EINVAL) << "nranks differs";
  EXPECT_EQ(Join(fd_, id, 0, 3), EBUSY) << "rank taken (same context)";
  int other = OpenDevice();
  EXPECT_EQ(Join(other, id, 0, 3), EBUSY) << "rank taken";
  EXPECT_EQ(Join(fd_, id, 1, 3), 0) << "a second rank in the same context";
  EXPECT_EQ(Leave(fd_, id, 2), ENOENT);
  EXPECT_EQ(Put(fd_, id, 0, HZC_BOARD_KEYS, "x", 1), EINVAL) << "key";
  std::vector<char> big(4097);
  EXPECT_EQ(Put(fd_, id, 0, 0, big.data(), 4097), EINVAL) << "blob too long";
  EXPECT_EQ(Put(fd_, id, 2, 0, "x", 1), ENOENT) << "rank not held";
  EXPECT_EQ(Put(fd_, id, 0, 0, reinterpret_cast<void *>(8), 16), EFAULT);
  EXPECT_EQ(Put(fd_, id, 0, 0, "x", 1), 0);
  EXPECT_EQ(Put(fd_, id, 0, 0, "y", 1), EEXIST) << "one blob per key";
  EXPECT_EQ(Put(fd_, id, 0, 1, big.data(), 4096), 0) << "4 KiB is allowed";
  EXPECT_EQ(Put(fd_, id, 0, 2, nullptr, 0), 0) << "empty blob";
  EXPECT_EQ(Wait(fd_, id, 0, HZC_BOARD_KEYS, 3, 0).err, EINVAL);
  EXPECT_EQ(Wait(fd_, id, 2, 0, 3, 0).err, ENOENT);
  {
    char buf[8];
    hzc_board_wait w{};
    w.size = sizeof(w);
    w.domain_id[0] = id.lo;
    w.domain_id[1] = id.hi;
    w.blobs = reinterpret_cast<uintptr_t>(buf);
    w.blob_stride = 0;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_WAIT, &w), EINVAL) << "blobs without a stride";
    // Buffers that would wrap around the end of the address space.
    w.blob_stride = 1u << 31;
    w.blobs = ~0ULL << 32;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_WAIT, &w), EOVERFLOW) << "blobs wrap";
    w.blobs = 0;
    w.blob_stride = 0;
    w.blob_lens = ~0ULL - 4;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_WAIT, &w), EOVERFLOW) << "blob_lens wrap";
    w.blob_lens = 0;
    w.missing = ~0ULL - 4;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_WAIT, &w), EOVERFLOW) << "missing wraps";
  }
  close(other);
}

TEST_F(DomainTest, BoardRendezvous) {
  const DomainId id = NewDomainId();
  const uint32_t n = 3;
  std::vector<int> fds(n);
  for (uint32_t r = 0; r < n; ++r) {
    fds[r] = OpenDevice();
    ASSERT_EQ(Join(fds[r], id, r, n), 0);
  }
  for (uint32_t r = 0; r < n; ++r) {
    const std::string blob = "endpoint of rank " + std::to_string(r);
    ASSERT_EQ(Put(fds[r], id, r, 5, blob.data(), static_cast<uint32_t>(blob.size())), 0);
  }
  for (uint32_t r = 0; r < n; ++r) {
    WaitResult w = Wait(fds[r], id, r, 5, n, 1000);
    ASSERT_EQ(w.err, 0);
    EXPECT_EQ(w.nr_missing, 0u);
    EXPECT_EQ(w.missing[0], 0u);
    for (uint32_t p = 0; p < n; ++p) {
      EXPECT_EQ(w.blobs[p], "endpoint of rank " + std::to_string(p));
    }
  }
  // Other keys are independent.
  EXPECT_EQ(Wait(fds[0], id, 0, 6, n, 0).err, ETIMEDOUT);
  // A stride shorter than a blob.
  EXPECT_EQ(Wait(fds[0], id, 0, 5, n, 0, 4).err, EMSGSIZE);
  for (int fd : fds) {
    close(fd);
  }
}

TEST_F(DomainTest, TimeoutReportsMissingRanks) {
  const DomainId id = NewDomainId();
  const uint32_t n = 70;  // more than one word of the bitmap
  ASSERT_EQ(Join(fd_, id, 0, n), 0);
  ASSERT_EQ(Join(fd_, id, 2, n), 0);
  ASSERT_EQ(Join(fd_, id, 65, n), 0);
  ASSERT_EQ(Put(fd_, id, 0, 1, "a", 1), 0);
  ASSERT_EQ(Put(fd_, id, 2, 1, "b", 1), 0);
  ASSERT_EQ(Put(fd_, id, 65, 1, "c", 1), 0);
  const auto t0 = std::chrono::steady_clock::now();
  WaitResult w = Wait(fd_, id, 0, 1, n, 200);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(w.err, ETIMEDOUT);
  EXPECT_GE(ms, 190);
  EXPECT_EQ(w.nr_missing, n - 3);
  ASSERT_EQ(w.missing.size(), 2u);
  EXPECT_EQ(w.missing[0], ~0ULL & ~1ULL & ~4ULL);
  EXPECT_EQ(w.missing[1], ((1ULL << 6) - 1) & ~2ULL);
}

TEST_F(DomainTest, LastPublisherWakesWaiter) {
  const DomainId id = NewDomainId();
  int other = OpenDevice();
  ASSERT_EQ(Join(fd_, id, 0, 2), 0);
  ASSERT_EQ(Join(other, id, 1, 2), 0);
  ASSERT_EQ(Put(fd_, id, 0, 0, "a", 1), 0);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(Put(other, id, 1, 0, "b", 1), 0);
  });
  WaitResult w = Wait(fd_, id, 0, 0, 2, 10000);
  late.join();
  EXPECT_EQ(w.err, 0);
  ASSERT_EQ(w.blobs.size(), 2u);
  EXPECT_EQ(w.blobs[1], "b");
  close(other);
}

TEST_F(DomainTest, LeaveWakesWaitersWithEconnreset) {
  const DomainId id = NewDomainId();
  int other = OpenDevice();
  ASSERT_EQ(Join(fd_, id, 0, 2), 0);
  ASSERT_EQ(Join(other, id, 1, 2), 0);
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(Leave(other, id, 1), 0);
  });
  EXPECT_EQ(Wait(fd_, id, 0, 0, 2, 10000).err, ECONNRESET);
  leaver.join();
  close(other);
}

// A rank that finished its rendezvous may leave before a slower rank reads
// the board: a key every rank published stays readable, other keys do not.
TEST_F(DomainTest, CompleteKeySurvivesALeaver) {
  const DomainId id = NewDomainId();
  const uint32_t n = 3;
  std::vector<int> fds(n);
  for (uint32_t r = 0; r < n; ++r) {
    fds[r] = OpenDevice();
    ASSERT_EQ(Join(fds[r], id, r, n), 0);
    ASSERT_EQ(Put(fds[r], id, r, 2, &"xyz"[r], 1), 0);
  }
  ASSERT_EQ(Put(fds[0], id, 0, 3, "p", 1), 0);
  ASSERT_EQ(Wait(fds[0], id, 0, 2, n, 1000).err, 0);
  ASSERT_EQ(Leave(fds[0], id, 0), 0);  // the fast rank is done
  for (uint32_t r = 1; r < n; ++r) {
    WaitResult w = Wait(fds[r], id, r, 2, n, 1000);
    ASSERT_EQ(w.err, 0) << "rank " << r;
    ASSERT_EQ(w.blobs.size(), n);
    EXPECT_EQ(w.blobs[0], "x");
    EXPECT_EQ(w.blobs[2], "z");
    EXPECT_EQ(Wait(fds[r], id, r, 3, n, 1000).err, ECONNRESET) << "incomplete key";
    EXPECT_EQ(Put(fds[r], id, r, 4, "q", 1), ECONNRESET) << "no new blobs once broken";
  }
  for (int fd : fds) {
    close(fd);
  }
}

TEST_F(DomainTest, DeathWakesWaitersWithEconnreset) {
  const DomainId id = NewDomainId();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = OpenDevice();
    char c = Join(fd, id, 1, 2) == 0 ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    // Wait on the board forever: the parent kills us while we wait.
    Wait(fd, id, 1, 0, 2, 100000);
    _exit(1);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  ASSERT_EQ(Join(fd_, id, 0, 2), 0);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(pid, SIGKILL);
  });
  EXPECT_EQ(Wait(fd_, id, 0, 0, 2, 20000).err, ECONNRESET);
  killer.join();
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  close(ready[0]);
  close(ready[1]);
}

TEST_F(DomainTest, OtherEuidIsEperm) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to switch users";
  }
  const DomainId id = NewDomainId();
  ASSERT_EQ(Join(fd_, id, 0, 2), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) {
      _exit(2);
    }
    int fd = OpenDevice();
    // Every join of another user's domain is EPERM, whatever else is wrong with it: the
    // errno says nothing of the domain's size or its taken seats.
    // A free seat, a wrong nranks, a taken seat: exit status 3, 4, 5 if not EPERM.
    const std::pair<uint32_t, uint32_t> joins[] = {{1, 2}, {1, 3}, {0, 2}};
    for (int i = 0; i < 3; ++i) {
      if (Join(fd, id, joins[i].first, joins[i].second) != EPERM) {
        _exit(3 + i);
      }
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: free seat, 4: wrong nranks, 5: taken seat";
}

TEST_F(DomainTest, MaxDomainsParameterGivesEnospc) {
  const std::string param = "/sys/module/hzc/parameters/max_domains";
  const long long old = ReadNumber(param);
  std::ofstream(param) << before_.domains + 2;
  const DomainId a = NewDomainId(), b = NewDomainId(), c = NewDomainId();
  EXPECT_EQ(Join(fd_, a, 0, 1), 0);
  EXPECT_EQ(Join(fd_, b, 0, 1), 0);
  EXPECT_EQ(Join(fd_, c, 0, 1), ENOSPC);
  std::ofstream(param) << old;
  EXPECT_EQ(Join(fd_, c, 0, 1), 0);
}

TEST_F(DomainTest, AbiSizesAndFlags) {
  const DomainId id = NewDomainId();
  hzc_domain_join join{};
  join.size = sizeof(join);
  join.domain_id[0] = id.lo;
  join.domain_id[1] = id.hi;
  join.rank = 0;
  join.nranks = 1;
  CheckAbi(fd_, HZC_IOC_DOMAIN_JOIN, join, 0,
           [&](const hzc_domain_join &) { EXPECT_EQ(Leave(fd_, id, 0), 0); });
  ASSERT_EQ(Join(fd_, id, 0, 1), 0);

  hzc_board_put put{};
  put.size = sizeof(put);
  put.domain_id[0] = id.lo;
  put.domain_id[1] = id.hi;
  put.key = 3;
  put.blob = reinterpret_cast<uintptr_t>("z");
  put.blob_len = 1;
  // A blob cannot be withdrawn: publish it once, then every well-sized call
  // reaches the handler and is EEXIST.
  ASSERT_EQ(Ioctl(fd_, HZC_IOC_BOARD_PUT, &put), 0);
  CheckAbi(fd_, HZC_IOC_BOARD_PUT, put, EEXIST, [](const hzc_board_put &) {});
  put.key = 9;
  put.__reserved = 1;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_PUT, &put), EOPNOTSUPP);

  hzc_board_wait wait{};
  wait.size = sizeof(wait);
  wait.domain_id[0] = id.lo;
  wait.domain_id[1] = id.hi;
  wait.key = 3;
  CheckAbi(fd_, HZC_IOC_BOARD_WAIT, wait, 0, [](const hzc_board_wait &) {});
  wait.__reserved = 1;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_BOARD_WAIT, &wait), EOPNOTSUPP);

  hzc_domain_leave leave{};
  leave.size = sizeof(leave);
  leave.domain_id[0] = id.lo;
  leave.domain_id[1] = id.hi;
  leave.__reserved = 1;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_DOMAIN_LEAVE, &leave), EOPNOTSUPP);
  leave.__reserved = 0;
  CheckAbi(fd_, HZC_IOC_DOMAIN_LEAVE, leave, 0,
           [&](const hzc_domain_leave &) { EXPECT_EQ(Join(fd_, id, 0, 1), 0); });
}

}  // namespace
}  // namespace hzc::ktest
