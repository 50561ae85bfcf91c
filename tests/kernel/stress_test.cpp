// SPDX-License-Identifier: GPL-2.0
// Stress and faults: many peers, racing threads, SIGKILL at random moments, ioctl fuzzing.
// Each test is bounded in time; the guest's splat check does the rest.
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "ktest.h"

namespace hzc::ktest {
namespace {

using Clock = std::chrono::steady_clock;

class StressTest : public ::testing::Test {
 protected:
  void TearDown() override { ExpectBalanced(before_); }
  Counters before_;
};

sigjmp_buf read_jmp;

void ReadHandler(int sig) {
  siglongjmp(read_jmp, sig);
}

// Reads one byte of every page of @m: 0 if all held @expect, -1 on a wrong
// value, else the signal that interrupted the read (SIGBUS once revoked).
int ReadEveryPage(volatile const char *m, size_t len, size_t page, char expect) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = ReadHandler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &old);
  int ret = sigsetjmp(read_jmp, 1);
  if (ret == 0) {
    for (size_t i = 0; i < len; i += page) {
      if (m[i] != expect) {
        ret = -1;
        break;
      }
    }
  }
  sigaction(SIGBUS, &old, nullptr);
  return ret;
}

// Every process registers and activates one range, writes its rank into it,
// maps every peer's range and checks their ranks; then owners deactivate
// while peers keep reading (peers must only see their data or SIGBUS).
void PeerProcess(DomainId id, uint32_t rank, uint32_t n) {
  const size_t page = PageSize(), len = 64 * page;
  int fd = OpenDevice();
  char *b = static_cast<char *>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(b, static_cast<int>(rank + 1), len);
  if (fd < 0 || Join(fd, id, rank, n) != 0 || RegisterRange(fd, b, len) != 0 ||
      Activate(fd, b, len) != 0 || Put(fd, id, rank, 0, "", 0) != 0 ||
      Wait(fd, id, rank, 0, n, 30000).err != 0) {
    _exit(10);
  }
  std::vector<char *> maps(n, nullptr);
  for (uint32_t p = 0; p < n; ++p) {
    std::vector<hzc_range_desc> r;
    if (ListRanges(fd, id, rank, p, &r) != 0 || r.size() != 1) {
      _exit(11);
    }
    void *m = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(r[0].mmap_offset));
    if (m == MAP_FAILED) {
      _exit(12);
    }
    maps[p] = static_cast<char *>(m);
    for (size_t i = 0; i < len; i += page) {
      if (maps[p][i] != static_cast<char>(p + 1)) {
        _exit(13);
      }
    }
  }
  // Everyone has read everyone: now deactivate while the others read.
  if (Put(fd, id, rank, 1, "", 0) != 0 || Wait(fd, id, rank, 1, n, 30000).err != 0) {
    _exit(14);
  }
  if (Deactivate(fd, b) != 0) {
    _exit(15);
  }
  // Read peers until SIGBUS shows up for each (bounded).
  for (uint32_t p = 0; p < n; ++p) {
    const auto end = Clock::now() + std::chrono::seconds(10);
    int got = 0;
    while (got == 0 && Clock::now() < end) {
      got = ReadEveryPage(maps[p], len, page, static_cast<char>(p + 1));
    }
    if (got != SIGBUS) {
      _exit(got == 0 ? 17 : 16);
    }
  }
  // Close everything only after all peers are done reading.
  Put(fd, id, rank, 2, "", 0);
  Wait(fd, id, rank, 2, n, 30000);
  _exit(0);
}

TEST_F(StressTest, ProcessesMapEachOtherAndRevokeWhileReading) {
  for (uint32_t n : {2u, 4u, 8u}) {
    const DomainId id = NewDomainId();
    std::vector<pid_t> pids;
    for (uint32_t r = 0; r < n; ++r) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        PeerProcess(id, r, n);
      }
      pids.push_back(pid);
    }
    for (uint32_t r = 0; r < n; ++r) {
      int status = 0;
      waitpid(pids[r], &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << n << " processes, rank " << r << " status " << status;
    }
  }
}

TEST_F(StressTest, ThreadsRaceOnOneContext) {
  const size_t page = PageSize();
  const size_t slots = 16;
  int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  Reservation res(slots * 8 * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u);
      while (!stop.load()) {
        // Overlapping ranges of 1..16 pages at page-granular starts.
        char *base = res.base() + (rng() % (slots * 8 - 16)) * page;
        const size_t len = (1 + rng() % 16) * page;
        switch (rng() % 4) {
          case 0:
            RegisterRange(fd, base, len);
            break;
          case 1:
            UnregisterRange(fd, base);
            break;
          case 2:
            Activate(fd, base, std::min<size_t>(len, 4 * page));
            break;
          case 3:
            Deactivate(fd, base);
            break;
        }
        ops++;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  stop = true;
  for (auto &t : threads) {
    t.join();
  }
  EXPECT_GT(ops.load(), 1000);
  // Consistent final state: the sysfs counters match what the tree says.
  const long long ranges = Counter("nr_ranges") - before_.ranges;
  EXPECT_GE(ranges, 0);
  close(fd);
}

TEST_F(StressTest, SigkillAtRandomMomentsLeaksNothing) {
  std::mt19937 rng(12345);
  const auto end = Clock::now() + std::chrono::seconds(8);
  int rounds = 0;
  while (Clock::now() < end) {
    const DomainId id = NewDomainId();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const size_t page = PageSize(), len = 256 * page;
      int fd = OpenDevice();
      char *b = static_cast<char *>(
          mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      Join(fd, id, 0, 2);
      for (;;) {
        RegisterRange(fd, b, len);
        for (size_t off = 0; off < len; off += 64 * page) {
          Activate(fd, b + off, 64 * page);
        }
        void *m = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
        (void)m;
        Wait(fd, id, 0, 0, 2, 1);
        for (size_t off = 0; off < len; off += 64 * page) {
          Deactivate(fd, b + off);
        }
        UnregisterRange(fd, b);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ++rounds;
  }
  EXPECT_GT(rounds, 5);
}

TEST_F(StressTest, IoctlFuzzOnlyErrors) {
  int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(42);
  std::vector<uint64_t> buf(64);
  Reservation res(64 * PageSize(), PROT_READ | PROT_WRITE);
  const auto end = Clock::now() + std::chrono::seconds(5);
  long calls = 0;
  while (Clock::now() < end) {
    const unsigned nr = static_cast<unsigned>(rng() % 16);
    const unsigned type = rng() % 8 == 0 ? static_cast<unsigned>(rng() % 256) : HZC_IOCTL_TYPE;
    const unsigned long cmd = _IOC(static_cast<unsigned>(rng() % 4), type, nr, rng() % 512);
    for (auto &w : buf) {
      switch (rng() % 4) {
        case 0:
          w = rng();
          break;
        case 1:
          w = 0;
          break;
        case 2:
          w = reinterpret_cast<uintptr_t>(res.base()) + (rng() % 64) * PageSize();
          break;
        case 3:
          w = rng() % 8192;
          break;
      }
    }
    // A plausible size most of the time.
    reinterpret_cast<uint32_t *>(buf.data())[0] =
        rng() % 4 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % 128);
    reinterpret_cast<uint32_t *>(buf.data())[1] = rng() % 2 == 0 ? 0 : static_cast<uint32_t>(rng());
    if (nr == HZC_CMD_BOARD_WAIT) {
      continue;  // could sleep for a random timeout
    }
    ioctl(fd, cmd, buf.data());
    ++calls;
  }
  close(fd);
  EXPECT_GT(calls, 1000);
}

}  // namespace
}  // namespace hzc::ktest
