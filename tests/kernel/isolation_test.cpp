// SPDX-License-Identifier: GPL-2.0
// A hostile local user against context lifetime and peer mappings: the owner's death while
// someone else holds its file, pins of short-lived workers, mmap() errors as an address
// oracle, peer mappings that outlive their domain, pinning stalled in a page fault, and
// /proc/PID/mem at a peer mapping.  Every attack runs in forked children as an
// unprivileged uid (the stalled-fault one as root, see there); the test process (root)
// only coordinates them and reads the counters.
#include <linux/fuse.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <atomic>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>

#include "ktest.h"

namespace hzc::ktest {
namespace {

constexpr size_t kMiB = 1 << 20;
// What a child says when it has nothing to say in time (no errno has this value).
constexpr uint64_t kNoReply = ~0ull;
// How long the test waits for a child's answer that needs no kernel liveness.
constexpr int kReplyMs = 60000;

// ---------------------------------------------------------------------------------------
// Helpers of this file: numbers over a Channel, access probes, owned memory.
// ---------------------------------------------------------------------------------------

// A child as `uid`, with RLIMIT_MEMLOCK `memlock` (uid 0: stays root).
UserOptions As(uid_t uid, rlim_t memlock = 64 * kMiB) {
  return UserOptions{uid, memlock, ""};
}

// Numbers (errnos, sizes, offsets, commands) over a Channel, one per message.
bool Put(const Channel &c, uint64_t v) {
  return c.Send(std::to_string(v));
}
bool Put(const UserProcess &p, uint64_t v) {
  return Put(p.channel(), v);
}
// The next number, or kNoReply on timeout or when the other end is gone.
uint64_t Take(const Channel &c, int timeout_ms = kReplyMs) {
  const std::optional<std::string> m = c.Receive(timeout_ms);
  return m ? std::strtoull(m->c_str(), nullptr, 10) : kNoReply;
}
uint64_t Take(const UserProcess &p, int timeout_ms = kReplyMs) {
  return Take(p.channel(), timeout_ms);
}
// In a child: waits (without a timeout) for the next command; false once the test is gone.
bool Next(const Channel &c, uint64_t *cmd) {
  const std::optional<std::string> m = c.Receive(-1);
  if (m) {
    *cmd = std::strtoull(m->c_str(), nullptr, 10);
  }
  return m.has_value();
}

// Kills and reaps a process that is not (yet) the test's child: a grandchild becomes one
// when its parent dies, because the test process is a child subreaper.
struct Reaper {
  pid_t pid = -1;
  ~Reaper() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// mmap() of /dev/hzc: 0 if it worked (and is undone), else the errno.
int MmapErrno(int fd, uint64_t offset, size_t len, int prot = PROT_READ) {
  void *p = mmap(nullptr, len, prot, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    return errno;
  }
  munmap(p, len);
  return 0;
}

// Memory of one owner: a range of `pages` pages, all activated and filled with `marker`.
struct OwnedRange {
  int fd = -1;
  char *base = nullptr;
  size_t len = 0;
  hzc_range_register reg{};
  // 0, or the step that failed.
  int Make(int file, size_t pages, char marker) {
    fd = file;
    len = pages * PageSize();
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fd < 0 || p == MAP_FAILED) {
      return 1;
    }
    base = static_cast<char *>(p);
    std::memset(base, marker, len);
    if (RegisterRange(fd, base, len, &reg) != 0) {
      return 2;
    }
    return Activate(fd, base, len) == 0 ? 0 : 3;
  }
};

// Commands the tests send to their children.
enum : uint64_t {
  kCmdExit = 1000,
  kCmdGo,
  kCmdLeave,       // + index of the domain; answer: errno
  kCmdReactivate,  // + marker; deactivate, refill, activate; answer: errno
  kCmdProbe,       // + page index; answer: signal, byte read
  kCmdRemap,       // a new mmap of the peer's range; answer: errno
  kCmdIoctl,       // an ioctl on the held file; answer: errno
  kCmdMmap,        // an mmap of the held file; answer: errno
  kCmdProcMem,     // + marker; pread of /proc/self/mem at the peer mapping; answer: result, markers
  kCmdProcMemWrite,  // pwrite of /proc/self/mem at the peer mapping; answer: result
  kCmdSplit,         // mprotect() the middle of the peer mapping (3 VMAs); answer: errno
  kCmdPeek,          // the owner's own byte at page 3; answer: byte
  kCmdUnregister,    // unregister the range; answer: errno
  kCmdList,          // LIST_RANGES; answer: errno, count, activated bytes
  kCmdListActs,      // LIST_ACTIVATIONS; answer: errno, count
  kCmdJoin,  // + id.lo, id.hi; join that 2-rank domain as this process's rank; answer: errno
};

// In a child: the domain id following a kCmdJoin, joined as `rank` of 2; the errno, or
// kNoReply without an id.
uint64_t JoinCommanded(const Channel &c, int fd, uint32_t rank) {
  DomainId id{};
  if (!Next(c, &id.lo) || !Next(c, &id.hi)) {
    return kNoReply;
  }
  return static_cast<uint64_t>(Join(fd, id, rank, 2));
}

// Waits for kCmdExit (or the test's end).
int AwaitExit(const Channel &c) {
  for (uint64_t cmd; Next(c, &cmd);) {
    if (cmd == kCmdExit) {
      break;
    }
  }
  return 0;
}

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = PageSize();
    // Grandchildren whose parent dies become the test's children, so it can reap them.
    ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ASSERT_EQ(geteuid(), 0u) << "the test drops privileges in its children";
  }
  // Runs after the test body has killed and reaped every child.
  void TearDown() override { ExpectBalanced(before_); }

  // Checks that what the owner pinned is gone while its file is still open elsewhere.
  void ExpectOwnerTornDown(const char *what) {
    const Counters now;
    EXPECT_EQ(now.pinned, before_.pinned) << "pinned_bytes " << what;
    EXPECT_EQ(now.activations, before_.activations) << "nr_activations " << what;
    EXPECT_EQ(now.ranges, before_.ranges) << "nr_ranges " << what;
    EXPECT_EQ(now.foll_pins, before_.foll_pins) << "FOLL_PIN pages " << what;
  }

  const Counters before_;
  size_t page_ = 0;
};

// ---------------------------------------------------------------------------------------
// Owner death while someone else holds the file
// ---------------------------------------------------------------------------------------

constexpr size_t kOwnerPages = 16;
constexpr uint32_t kNeverPublished = 3;

// Attack: rank 0 forks a child that keeps its file open (fork without exec), so that a
// SIGKILL of rank 0 leaves the context, its pins and its domain seat alive: peers wait on
// the board until their timeout, the pins outlive the owner, and so does what peers mapped.
// Must happen: the owner's death tears the context down at once: rank 1's BOARD_WAIT (30 s
// timeout) returns ECONNRESET, the domain is broken, rank 1's mapping of rank 0's range is
// SIGBUS, pins, activations and ranges return to baseline while the forked child still
// holds the file, and that child's ioctl and mmap on it are EPERM.
TEST_F(IsolationTest, OwnerKilledWhileForkedChildHoldsFile) {
  const DomainId id = NewDomainId();
  Reaper keeper_reaper;  // destroyed after `owner`, so the keeper is the test's child by then
  auto [keeper, keeper_end] = Channel::Pair();  // the test and the owner's forked child
  UserProcess owner(As(kNobody), [&](const Channel &c) {
    OwnedRange r;
    const int fd = OpenDevice();
    int step = fd < 0 || Join(fd, id, 0, 2) != 0 ? 10 : r.Make(fd, kOwnerPages, 0x4b);
    Put(c, step);
    if (step != 0) {
      return step;
    }
    const pid_t child = fork();
    if (child == 0) {
      // The keeper: holds the file and tries it on command.
      for (uint64_t cmd; Next(keeper_end, &cmd) && cmd != kCmdExit;) {
        if (cmd == kCmdIoctl) {
          std::vector<hzc_range_desc> ranges;
          Put(keeper_end, ListRanges(fd, id, 0, 0, &ranges));
          Put(keeper_end, Activate(fd, r.base, page_));
        } else if (cmd == kCmdMmap) {
          Put(keeper_end, MmapErrno(fd, r.reg.out_mmap_offset, page_));
        }
      }
      _exit(0);
    }
    Put(c, static_cast<uint64_t>(child));
    return AwaitExit(c);
  });
  keeper_end.Close();
  ASSERT_EQ(Take(owner), 0u) << "owner set-up step";
  keeper_reaper.pid = static_cast<pid_t>(Take(owner));
  ASSERT_GT(keeper_reaper.pid, 0);

  // Rank 1: maps rank 0's range, waits on the board, reads the mapping.
  UserProcess peer(As(kNobody), [&](const Channel &c) {
    const int fd = OpenDevice();
    std::vector<hzc_range_desc> ranges;
    int step = fd < 0 || Join(fd, id, 1, 2) != 0 ? 1 : 0;
    if (step == 0 && (ListRanges(fd, id, 1, 0, &ranges) != 0 || ranges.size() != 1)) {
      step = 2;
    }
    void *m = step != 0 ? MAP_FAILED
                        : mmap(nullptr, page_, PROT_READ, MAP_SHARED, fd,
                               static_cast<off_t>(ranges[0].mmap_offset));
    Put(c, step != 0 ? step : m == MAP_FAILED ? 3 : 0);
    for (uint64_t cmd; Next(c, &cmd) && cmd != kCmdExit;) {
      if (cmd == kCmdGo) {
        Put(c, Wait(fd, id, 1, kNeverPublished, 2, 30000).err);
      } else if (cmd == kCmdLeave) {
        Put(c, Leave(fd, id, 1));
      } else if (cmd == kCmdProbe) {
        char v = 0;
        const int sig = Probe(static_cast<char *>(m), false, &v);
        Put(c, sig != 0 ? sig : static_cast<uint8_t>(v));
      }
    }
    return 0;
  });
  ASSERT_EQ(Take(peer), 0u) << "rank 1 set-up step (join, list, map)";
  Put(peer, kCmdProbe);
  ASSERT_EQ(Take(peer), 0x4bu) << "premise: rank 1 reads rank 0's memory";
  ASSERT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(kOwnerPages * page_))
      << "premise: the owner's activation is pinned";
  const std::string domain_dir = FindDomainDir(id);
  EXPECT_NE(domain_dir, "") << "the domain's sysfs directory";

  ASSERT_TRUE(Put(peer, kCmdGo));
  usleep(300 * 1000);  // let rank 1 go to sleep in BOARD_WAIT (either order must give ECONNRESET)
  kill(owner.pid(), SIGKILL);
  owner.Wait();
  EXPECT_EQ(Take(peer), static_cast<uint64_t>(ECONNRESET))
      << "rank 1's BOARD_WAIT after rank 0 was killed (ETIMEDOUT = " << ETIMEDOUT
      << ": the domain outlived its owner for the whole 30 s)";
  ExpectOwnerTornDown("after the owner's death, while its forked child holds the file");
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + 2) << "two files stay open";
  if (!domain_dir.empty()) {
    EXPECT_EQ(ReadLine(domain_dir + "/state"), "broken") << "the dead owner left its seat";
  }
  Put(peer, kCmdProbe);
  EXPECT_EQ(Take(peer), static_cast<uint64_t>(SIGBUS))
      << "rank 1's mapping of the dead owner's range";

  ASSERT_TRUE(Put(keeper, kCmdIoctl));
  EXPECT_EQ(Take(keeper), static_cast<uint64_t>(EPERM)) << "LIST_RANGES by the forked child";
  EXPECT_EQ(Take(keeper), static_cast<uint64_t>(EPERM)) << "ACTIVATE by the forked child";
  ASSERT_TRUE(Put(keeper, kCmdMmap));
  EXPECT_EQ(Take(keeper), static_cast<uint64_t>(EPERM)) << "mmap by the forked child";
  ASSERT_TRUE(Put(peer, kCmdLeave));
  EXPECT_EQ(Take(peer), 0u) << "rank 1 leaves the broken domain";
  Put(keeper, kCmdExit);
  Put(peer, kCmdExit);
  EXPECT_EQ(peer.Wait(), "");
}

// Attack: the opener hands its file to another process over SCM_RIGHTS and exits; the
// receiver keeps the context (and the opener's pins) alive.  Must happen: the opener's
// exit tears the context down; the receiver's ioctl on the file is EPERM.
TEST_F(IsolationTest, OwnerExitAfterScmRightsHandOffUnpins) {
  auto [to_holder, from_opener] = Channel::Pair();
  UserProcess holder(As(kNobody), [&](const Channel &c) {
    const int fd = from_opener.ReceiveFd();
    Put(c, fd >= 0 ? 0 : 1);
    for (uint64_t cmd; Next(c, &cmd) && cmd != kCmdExit;) {
      if (cmd == kCmdIoctl) {
        hzc_info info{};
        info.size = sizeof(info);
        Put(c, Ioctl(fd, HZC_IOC_INFO, &info));
      } else if (cmd == kCmdMmap) {
        Put(c, MmapErrno(fd, 0, page_));
      }
    }
    return 0;
  });
  UserProcess opener(As(kNobody), [&](const Channel &c) {
    OwnedRange r;
    int step = r.Make(OpenDevice(), kOwnerPages, 0x5e);
    if (step == 0 && to_holder.SendFd(r.fd) != 0) {
      step = 4;
    }
    Put(c, step);
    return AwaitExit(c);
  });
  to_holder.Close();
  from_opener.Close();
  ASSERT_EQ(Take(opener), 0u) << "opener set-up step";
  ASSERT_EQ(Take(holder), 0u) << "holder received the file";
  ASSERT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(kOwnerPages * page_))
      << "premise: the opener's activation is pinned";

  Put(opener, kCmdExit);
  ASSERT_EQ(opener.Wait(), "");
  ExpectOwnerTornDown("after the opener's exit, while the receiver holds its file");
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + 1) << "the receiver's file stays open";
  ASSERT_TRUE(Put(holder, kCmdIoctl));
  EXPECT_EQ(Take(holder), static_cast<uint64_t>(EPERM)) << "INFO by the receiver";
  ASSERT_TRUE(Put(holder, kCmdMmap));
  EXPECT_EQ(Take(holder), static_cast<uint64_t>(EPERM)) << "mmap by the receiver";
  Put(holder, kCmdExit);
  EXPECT_EQ(holder.Wait(), "");
}

// Attack: a process of the same user takes the opener's file with pidfd_getfd() (here the
// opener's parent, which Yama's ptrace scope allows) and the opener exits; the copy keeps
// the context and the opener's pins alive.  Must happen: the opener's exit tears the
// context down; the taker's ioctl on the file is EPERM.
TEST_F(IsolationTest, OwnerExitAfterPidfdGetfdUnpins) {
  UserProcess taker(As(kNobody), [&](const Channel &c) {
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) != 0 || pipe2(down, O_CLOEXEC) != 0) {
      return 1;
    }
    const pid_t opener = fork();
    if (opener == 0) {
      close(up[0]);
      close(down[1]);  // so that it exits if the taker dies
      OwnedRange r;
      const int answer[2] = {r.Make(OpenDevice(), kOwnerPages, 0x3c), r.fd};
      char go = 0;
      _exit(write(up[1], answer, sizeof(answer)) == sizeof(answer) && read(down[0], &go, 1) == 1
                ? 0
                : 1);
    }
    int answer[2] = {-1, -1};
    if (opener < 0 || read(up[0], answer, sizeof(answer)) != sizeof(answer)) {
      return 2;
    }
    Put(c, answer[0]);
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, opener, 0));
    const int fd = pidfd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, answer[1], 0));
    Put(c, fd >= 0 ? 0 : errno);
    for (uint64_t cmd; Next(c, &cmd) && cmd != kCmdExit;) {
      if (cmd == kCmdGo) {
        // The opener exits; the taker keeps its file.
        int status = 0;
        Put(c, write(down[1], "x", 1) == 1 && waitpid(opener, &status, 0) == opener ? 0 : 1);
      } else if (cmd == kCmdIoctl) {
        hzc_info info{};
        info.size = sizeof(info);
        Put(c, Ioctl(fd, HZC_IOC_INFO, &info));
      }
    }
    return 0;
  });
  ASSERT_EQ(Take(taker), 0u) << "opener set-up step";
  ASSERT_EQ(Take(taker), 0u) << "pidfd_getfd (errno)";
  ASSERT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(kOwnerPages * page_))
      << "premise: the opener's activation is pinned";

  Put(taker, kCmdGo);
  ASSERT_EQ(Take(taker), 0u) << "the opener exited";
  ExpectOwnerTornDown("after the opener's exit, while the taker holds its file");
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + 1) << "the taker's file stays open";
  Put(taker, kCmdIoctl);
  EXPECT_EQ(Take(taker), static_cast<uint64_t>(EPERM)) << "INFO by the taker";
  Put(taker, kCmdExit);
  EXPECT_EQ(taker.Wait(), "");
}

// Attack: the opener execs another program with the file still open (no O_CLOEXEC), so the
// context outlives the address space that activated the memory.  Must happen: execve tears
// the context down; only the open file remains.
TEST_F(IsolationTest, OwnerExecveUnpins) {
  UserProcess opener(As(kNobody), [&](const Channel &c) {
    OwnedRange r;
    const int step = r.Make(open(kDevice, O_RDWR), kOwnerPages, 0x6f);
    Put(c, step);
    Put(c, static_cast<uint64_t>(r.fd));
    uint64_t cmd = 0;
    if (step != 0 || !Next(c, &cmd) || cmd != kCmdGo) {
      return step;
    }
    execl("/bin/sleep", "sleep", "1000", static_cast<char *>(nullptr));
    return 99;
  });
  ASSERT_EQ(Take(opener), 0u) << "opener set-up step";
  const uint64_t fd = Take(opener);
  ASSERT_NE(fd, kNoReply);
  ASSERT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(kOwnerPages * page_))
      << "premise: the opener's activation is pinned";

  ASSERT_TRUE(Put(opener, kCmdGo));
  // The channel is close-on-exec: its end of file says the old address space is gone.
  EXPECT_EQ(Take(opener), kNoReply);
  const std::string proc = "/proc/" + std::to_string(opener.pid());
  char link[256] = {};
  ASSERT_GT(readlink((proc + "/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1), 0)
      << "the file stays open across execve";
  ASSERT_STREQ(link, kDevice);
  EXPECT_NE(ReadLine(proc + "/comm").find("sleep"), std::string::npos) << "execve happened";
  ExpectOwnerTornDown("after execve, with the file still open in the new program");
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + 1) << "the file stays open";
  kill(opener.pid(), SIGKILL);
  opener.Wait();
}

// ---------------------------------------------------------------------------------------
// Pins of short-lived workers
// ---------------------------------------------------------------------------------------

constexpr int kWorkers = 64;

// Attack: 64 short-lived workers of one user, each with RLIMIT_MEMLOCK 1 MiB, activate 1 MiB,
// hand their file to a long-lived holder over SCM_RIGHTS and exit, leaving 64 MiB pinned
// for a user allowed 1 MiB.  Must happen: each worker's pins go with its exit, so every
// worker can activate its 1 MiB and pinned_bytes is back at baseline after each exit.
TEST_F(IsolationTest, ShortLivedWorkersHandingOnFilesLeaveNothingPinned) {
  auto [to_holder, from_workers] = Channel::Pair();
  UserProcess holder(As(kNobody), [&](const Channel &c) {
    std::vector<int> fds;
    for (uint64_t cmd; Next(c, &cmd) && cmd != kCmdExit;) {
      if (cmd == kCmdGo) {
        const int fd = from_workers.ReceiveFd();
        if (fd >= 0) {
          fds.push_back(fd);
        }
        Put(c, fds.size());
      } else if (cmd == kCmdIoctl) {
        hzc_info info{};
        info.size = sizeof(info);
        Put(c, fds.empty() ? ENOENT : Ioctl(fds[0], HZC_IOC_INFO, &info));
      }
    }
    return 0;
  });
  int leaky = 0;
  long long max_pinned = before_.pinned;
  for (int i = 0; i < kWorkers; ++i) {
    UserProcess worker(As(kNobody, kMiB), [&]() {
      OwnedRange r;
      const int step = r.Make(OpenDevice(), kMiB / page_, static_cast<char>(i));
      if (step != 0) {
        return step;
      }
      return to_holder.SendFd(r.fd) == 0 ? 0 : 4;
    });
    ASSERT_EQ(worker.Wait(), "")
        << "worker " << i << " (step 3: ACTIVATE of 1 MiB; earlier workers' pins still charged)";
    ASSERT_TRUE(Put(holder, kCmdGo));
    ASSERT_EQ(Take(holder), static_cast<uint64_t>(i + 1)) << "files the holder received";
    const long long pinned = Counter("pinned_bytes");
    max_pinned = std::max(max_pinned, pinned);
    leaky += pinned != before_.pinned;
  }
  EXPECT_EQ(leaky, 0) << "workers after whose exit something stayed pinned; pinned_bytes reached "
                      << (max_pinned - before_.pinned) << " bytes above baseline";
  ExpectOwnerTornDown("while the holder keeps all 64 files");
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + kWorkers) << "the held files stay open";
  ASSERT_TRUE(Put(holder, kCmdIoctl));
  EXPECT_EQ(Take(holder), static_cast<uint64_t>(EPERM)) << "INFO on a received file";
  Put(holder, kCmdExit);
  EXPECT_EQ(holder.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// mmap() is not an address oracle
// ---------------------------------------------------------------------------------------

constexpr size_t kVictimPages = 16;
constexpr uint64_t kOldSlotSpan = 1ull << 47;  // the old windows: (slot << 47) + base

// Attack: a user sharing no domain with the victim learns the victim's window offset and
// range size, and probes mmap() around it, and at the victim's base address and offset 0:
// with "no window" (ENXIO) and "too long" (EINVAL) decided before "may not map" (EPERM), and
// windows at (slot << 47) + base, the errnos gave the base address away.  Must happen: every
// refusal is EPERM; window offsets are unrelated to addresses (offset != base, not base
// modulo 2^47), and two contexts registering the same base get different offsets.  The
// victim itself may map its range and gets EINVAL for a mapping longer than it.
TEST_F(IsolationTest, MmapErrorsAreNoAddressOracle) {
  UserProcess victim(As(kOtherUser), [&](const Channel &c) {
    OwnedRange r;
    int step = r.Make(OpenDevice(), kVictimPages, 0x77);
    const int fd2 = OpenDevice();
    hzc_range_register reg2{};
    if (step == 0 && (fd2 < 0 || RegisterRange(fd2, r.base, r.len, &reg2) != 0)) {
      step = 5;
    }
    Put(c, step);
    if (step != 0) {
      return step;
    }
    Put(c, reinterpret_cast<uintptr_t>(r.base));
    Put(c, r.len);
    Put(c, r.reg.out_mmap_offset);
    Put(c, reg2.out_mmap_offset);
    Put(c, r.reg.out_id);
    // Its own range: mappable, and too long a mapping is EINVAL.
    char *m = static_cast<char *>(mmap(nullptr, r.len, PROT_READ, MAP_SHARED, r.fd,
                                       static_cast<off_t>(r.reg.out_mmap_offset)));
    char v = 0;
    Put(c, m == MAP_FAILED                    ? errno
           : Probe(m + page_, false, &v) == 0 ? static_cast<uint8_t>(v)
                                              : 1000);
    Put(c, MmapErrno(r.fd, r.reg.out_mmap_offset, r.len + page_));
    return AwaitExit(c);
  });
  ASSERT_EQ(Take(victim), 0u) << "victim set-up step";
  const uint64_t base = Take(victim);
  const uint64_t size = Take(victim);
  const uint64_t window = Take(victim);
  const uint64_t window2 = Take(victim);
  const uint64_t range_id = Take(victim);
  EXPECT_EQ(Take(victim), 0x77u) << "the victim maps its own range and reads it";
  EXPECT_EQ(Take(victim), static_cast<uint64_t>(EINVAL)) << "the victim maps past its range";
  ASSERT_NE(window2, kNoReply);

  EXPECT_NE(window, base) << "window offset is the range's address";
  EXPECT_NE((window - base) % kOldSlotSpan, 0u) << "window offset is (slot << 47) + base";
  EXPECT_NE((window2 - base) % kOldSlotSpan, 0u) << "second window offset is (slot << 47) + base";
  EXPECT_NE(window, window2) << "two contexts registering the same base share a window";
  EXPECT_EQ(window % page_, 0u);

  struct MmapProbe {
    const char *what;
    uint64_t offset;
    uint64_t len;
  };
  const uint64_t p = page_;
  std::vector<MmapProbe> probes = {
      {"window, exact length", window, size},
      {"window, one page", window, p},
      {"window, one page longer", window, size + p},
      {"window, twice as long", window, 2 * size},
      {"window + page, rest of the range", window + p, size - p},
      {"window + page, crossing the end", window + p, size},
      {"last page", window + size - p, p},
      {"last page and one past", window + size - p, 2 * p},
      {"just past the window", window + size, p},
      {"far past the window", window + 64 * size, p},
      {"second context's window", window2, size},
      {"second context's window, longer", window2, size + p},
      {"offset 0", 0, p},
      {"offset 0, range size", 0, size},
      {"the base address", base, p},
      {"the base address, range size", base, size},
      {"the base address, longer", base, size + p},
      {"slot 1 + base (old scheme)", kOldSlotSpan + base, size + p},
      {"slot 2 + base (old scheme)", 2 * kOldSlotSpan + base, size + p},
      {"the window's slot (old scheme)", window & ~(kOldSlotSpan - 1), p},
  };
  if (window >= 2 * p) {
    probes.push_back({"just before the window", window - p, p});
    probes.push_back({"straddling the window's start", window - p, 2 * p});
  }
  UserProcess stranger(As(kNobody), [&](const Channel &c) {
    const int fd = OpenDevice();
    // A domain of its own: membership elsewhere grants nothing.
    if (fd < 0 || Join(fd, NewDomainId(), 0, 2) != 0) {
      return 1;
    }
    for (const MmapProbe &probe : probes) {
      Put(c, MmapErrno(fd, probe.offset, probe.len));
      Put(c, MmapErrno(fd, probe.offset, probe.len, PROT_READ | PROT_WRITE));
    }
    // Nor does sysfs tell the base.
    const std::string base_file =
        std::string(kSysfsRoot) + "/ranges/" + std::to_string(range_id) + "/base";
    const int base_fd = open(base_file.c_str(), O_RDONLY | O_CLOEXEC);
    Put(c, base_fd < 0 ? errno : 0);
    return AwaitExit(c);
  });
  for (const MmapProbe &probe : probes) {
    EXPECT_EQ(Take(stranger), static_cast<uint64_t>(EPERM))
        << probe.what << ": offset " << std::hex << probe.offset << " length " << probe.len
        << " PROT_READ";
    EXPECT_EQ(Take(stranger), static_cast<uint64_t>(EPERM))
        << probe.what << ": offset " << std::hex << probe.offset << " length " << probe.len
        << " PROT_READ|PROT_WRITE";
  }
  EXPECT_EQ(Take(stranger), static_cast<uint64_t>(EACCES))
      << "ranges/<id>/base opened by a stranger";
  Put(stranger, kCmdExit);
  EXPECT_EQ(stranger.Wait(), "");
  Put(victim, kCmdExit);
  EXPECT_EQ(victim.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// Grants die with the domain
// ---------------------------------------------------------------------------------------

constexpr size_t kGrantPages = 8;
constexpr char kMarker1 = 0x41;
constexpr char kMarker2 = 0x42;

// Rank 0 of every domain in `ids`, owning kGrantPages activated pages of kMarker1.
int GrantOwner(const Channel &c, const std::vector<DomainId> &ids) {
  const int fd = OpenDevice();
  int step = fd < 0 ? 10 : 0;
  for (const DomainId &id : ids) {
    if (step == 0 && Join(fd, id, 0, 2) != 0) {
      step = 11;
    }
  }
  OwnedRange r;
  if (step == 0) {
    step = r.Make(fd, kGrantPages, kMarker1);
  }
  Put(c, step);
  if (step != 0) {
    return step;
  }
  for (uint64_t cmd, arg; Next(c, &cmd) && cmd != kCmdExit;) {
    if (cmd == kCmdLeave && Next(c, &arg)) {
      Put(c, Leave(fd, ids[arg], 0));
    } else if (cmd == kCmdReactivate && Next(c, &arg)) {
      int err = Deactivate(fd, r.base);
      std::memset(r.base, static_cast<char>(arg), r.len);
      if (err == 0) {
        err = Activate(fd, r.base, r.len);
      }
      Put(c, err);
    } else if (cmd == kCmdPeek) {
      Put(c, static_cast<uint8_t>(r.base[3 * PageSize()]));
    } else if (cmd == kCmdJoin) {
      Put(c, JoinCommanded(c, fd, 0));
    }
  }
  return 0;
}

// Rank 1 of every domain in `ids`: maps rank 0's range (found through ids[0]) and
// touches it on command.
// With `read_only`, the file is opened O_RDONLY and the mapping is PROT_READ.
int GrantPeer(const Channel &c, const std::vector<DomainId> &ids, bool read_only = false) {
  const size_t page = PageSize();
  const int prot = read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  const int fd = read_only ? open(kDevice, O_RDONLY | O_CLOEXEC) : OpenDevice();
  int step = fd < 0 ? 10 : 0;
  for (const DomainId &id : ids) {
    if (step == 0 && Join(fd, id, 1, 2) != 0) {
      step = 11;
    }
  }
  std::vector<hzc_range_desc> ranges;
  if (step == 0 && (ListRanges(fd, ids[0], 1, 0, &ranges) != 0 || ranges.size() != 1)) {
    step = 12;
  }
  char *m = nullptr;
  size_t len = 0;
  if (step == 0) {
    len = ranges[0].length;
    void *p = mmap(nullptr, len, prot, MAP_SHARED, fd, static_cast<off_t>(ranges[0].mmap_offset));
    if (p == MAP_FAILED) {
      step = 13;
    } else {
      m = static_cast<char *>(p);
    }
  }
  Put(c, step);
  if (step != 0) {
    return step;
  }
  for (uint64_t cmd, arg; Next(c, &cmd) && cmd != kCmdExit;) {
    if (cmd == kCmdProbe && Next(c, &arg)) {
      char v = 0;
      const int sig = Probe(m + arg * page, false, &v);
      Put(c, sig);
      Put(c, sig == 0 ? static_cast<uint8_t>(v) : kNoReply);
    } else if (cmd == kCmdRemap) {
      Put(c, MmapErrno(fd, ranges[0].mmap_offset, len, prot));
    } else if (cmd == kCmdSplit) {
      Put(c, mprotect(m + 2 * page, page, PROT_NONE) == 0 ? 0 : errno);
    } else if (cmd == kCmdLeave && Next(c, &arg)) {
      Put(c, Leave(fd, ids[arg], 1));
    } else if (cmd == kCmdJoin) {
      Put(c, JoinCommanded(c, fd, 1));
    } else if (cmd == kCmdProcMem && Next(c, &arg)) {
      std::vector<char> buf(2 * page, 0);
      // The result of pread(), or -errno.
      int64_t result = 0;
      const int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
      if (mem < 0) {
        result = -errno;
      } else {
        const ssize_t n =
            pread(mem, buf.data(), buf.size(), static_cast<off_t>(reinterpret_cast<uintptr_t>(m)));
        result = n < 0 ? -errno : n;
        close(mem);
      }
      Put(c, static_cast<uint64_t>(result));
      Put(c, static_cast<uint64_t>(std::count(buf.begin(), buf.end(), static_cast<char>(arg))));
    } else if (cmd == kCmdProcMemWrite) {
      const char byte = 0x57;
      int64_t result = 0;
      const int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
      if (mem < 0) {
        result = -errno;
      } else {
        const ssize_t n =
            pwrite(mem, &byte, 1, static_cast<off_t>(reinterpret_cast<uintptr_t>(m + 3 * page)));
        result = n < 0 ? -errno : n;
        close(mem);
      }
      Put(c, static_cast<uint64_t>(result));
    }
  }
  munmap(m, len);
  return 0;
}

// A (GrantOwner) and B (GrantPeer) of `ids`, both nobody.
struct GrantPair {
  std::unique_ptr<UserProcess> a, b;
  // Tells both to exit; they must have ended cleanly.
  void End() {
    Put(*a, kCmdExit);
    Put(*b, kCmdExit);
    EXPECT_EQ(a->Wait(), "");
    EXPECT_EQ(b->Wait(), "");
  }
};

// Starts the pair, each past its set-up (use with ASSERT_NO_FATAL_FAILURE).
void StartGrantPair(const std::vector<DomainId> &ids, GrantPair *pair, bool read_only = false) {
  pair->a = std::make_unique<UserProcess>(As(kNobody),
                                          [ids](const Channel &c) { return GrantOwner(c, ids); });
  ASSERT_EQ(Take(*pair->a), 0u) << "A set-up step";
  pair->b = std::make_unique<UserProcess>(
      As(kNobody), [ids, read_only](const Channel &c) { return GrantPeer(c, ids, read_only); });
  ASSERT_EQ(Take(*pair->b), 0u) << "B set-up step";
}

// The byte B reads through its peer mapping (signal, value).
std::pair<uint64_t, uint64_t> ProbePeer(UserProcess &peer, uint64_t page = 3) {
  Put(peer, kCmdProbe);
  Put(peer, page);
  const uint64_t sig = Take(peer);
  return {sig, Take(peer)};
}

uint64_t Command(UserProcess &p, uint64_t cmd, uint64_t arg) {
  Put(p, cmd);
  Put(p, arg);
  return Take(p);
}

// Attack: B maps A's range while they share a domain (and splits the mapping into three
// VMAs with mprotect), then the domain breaks (A leaves) and A activates new memory at the
// same address for another job; B's old mapping kept reading (and writing) it, since access
// was checked only at mmap().  Must happen: once A and B share no unbroken domain, every
// piece of B's mapping is revoked (SIGBUS), also after A's re-activation, and a new mmap is
// EPERM.
TEST_F(IsolationTest, GrantDiesWithTheDomain) {
  const std::vector<DomainId> ids = {NewDomainId()};
  GrantPair pair;
  ASSERT_NO_FATAL_FAILURE(StartGrantPair(ids, &pair));
  UserProcess &a = *pair.a, &b = *pair.b;
  Put(b, kCmdSplit);
  ASSERT_EQ(Take(b), 0u) << "B splits its mapping";
  const uint64_t pages[] = {0, 3, kGrantPages - 1};  // in the first and the last VMA
  for (const uint64_t page : pages) {
    ASSERT_EQ(ProbePeer(b, page), std::make_pair(uint64_t{0}, uint64_t{kMarker1}))
        << "premise: B reads A's marker at page " << page;
  }

  ASSERT_EQ(Command(a, kCmdLeave, 0), 0u) << "A leaves (the domain breaks)";
  for (const uint64_t page : pages) {
    EXPECT_EQ(ProbePeer(b, page).first, static_cast<uint64_t>(SIGBUS))
        << "B's mapping after the domain broke, page " << page;
  }
  ASSERT_EQ(Command(a, kCmdReactivate, kMarker2), 0u) << "A re-activates the same address";
  for (const uint64_t page : pages) {
    const auto [sig, value] = ProbePeer(b, page);
    EXPECT_EQ(sig, static_cast<uint64_t>(SIGBUS))
        << "B's old mapping after A's new activation, page " << page;
    EXPECT_NE(value, static_cast<uint64_t>(kMarker2)) << "B read A's new memory, page " << page;
  }
  Put(b, kCmdRemap);
  EXPECT_EQ(Take(b), static_cast<uint64_t>(EPERM)) << "B's new mmap of A's range";

  EXPECT_EQ(Command(b, kCmdLeave, 0), 0u) << "B leaves the broken domain";
  pair.End();
}

// Attack: B maps A's range under domain 1, which breaks while B does not touch the
// mapping; then A and B join domain 2 (a new job of the same user). A grant checked only
// when next used came back to life, so B's old mapping read A's memory of the new job.
// Must happen: the grant died with domain 1, so B's old mapping is SIGBUS, while a new mmap
// (allowed by domain 2) works.
TEST_F(IsolationTest, GrantStaysDeadWhenTheTwoShareANewDomain) {
  const std::vector<DomainId> ids = {NewDomainId()};
  GrantPair pair;
  ASSERT_NO_FATAL_FAILURE(StartGrantPair(ids, &pair));
  UserProcess &a = *pair.a, &b = *pair.b;
  ASSERT_EQ(ProbePeer(b), std::make_pair(uint64_t{0}, uint64_t{kMarker1}))
      << "premise: B reads A's marker";

  ASSERT_EQ(Command(a, kCmdLeave, 0), 0u) << "A leaves domain 1 (it breaks)";
  const DomainId next = NewDomainId();
  for (UserProcess *p : {&a, &b}) {
    Put(*p, kCmdJoin);
    Put(*p, next.lo);
    Put(*p, next.hi);
    ASSERT_EQ(Take(*p), 0u) << (p == &a ? "A" : "B") << " joins domain 2";
  }
  EXPECT_EQ(ProbePeer(b).first, static_cast<uint64_t>(SIGBUS))
      << "B's mapping made under domain 1, after A and B joined domain 2";
  Put(b, kCmdRemap);
  EXPECT_EQ(Take(b), 0u) << "domain 2 allows a new mmap";

  EXPECT_EQ(Command(b, kCmdLeave, 0), 0u) << "B leaves broken domain 1";
  pair.End();
}

// Attack (the other side of the same rule): A and B share two domains; breaking one of them
// must not revoke what the other still allows, and breaking both must.  Must happen: after
// B leaves domain 1, B's mapping still reads A's marker and B may map again; after A leaves
// domain 2, the mapping is SIGBUS and a new mmap is EPERM.
TEST_F(IsolationTest, GrantLivesWhileAnySharedDomainLives) {
  const std::vector<DomainId> ids = {NewDomainId(), NewDomainId()};
  GrantPair pair;
  ASSERT_NO_FATAL_FAILURE(StartGrantPair(ids, &pair));
  UserProcess &a = *pair.a, &b = *pair.b;
  ASSERT_EQ(ProbePeer(b), std::make_pair(uint64_t{0}, uint64_t{kMarker1}))
      << "premise: B reads A's marker";

  ASSERT_EQ(Command(b, kCmdLeave, 0), 0u) << "B leaves domain 1 (it breaks)";
  EXPECT_EQ(ProbePeer(b), std::make_pair(uint64_t{0}, uint64_t{kMarker1}))
      << "domain 2 still allows B's mapping";
  Put(b, kCmdRemap);
  EXPECT_EQ(Take(b), 0u) << "domain 2 still allows a new mmap";

  ASSERT_EQ(Command(a, kCmdLeave, 1), 0u) << "A leaves domain 2 (it breaks)";
  EXPECT_EQ(ProbePeer(b).first, static_cast<uint64_t>(SIGBUS))
      << "B's mapping once no shared domain is unbroken";
  Put(b, kCmdRemap);
  EXPECT_EQ(Take(b), static_cast<uint64_t>(EPERM)) << "B's new mmap once no shared domain is left";

  EXPECT_EQ(Command(a, kCmdLeave, 0), 0u) << "A leaves broken domain 1";
  EXPECT_EQ(Command(b, kCmdLeave, 1), 0u) << "B leaves broken domain 2";
  pair.End();
}

// ---------------------------------------------------------------------------------------
// ACTIVATE stalled in a page fault
// ---------------------------------------------------------------------------------------

constexpr size_t kStallPages = 16;
constexpr int kLivenessMs = 10000;
constexpr char kStallMarker = 0x5a;
constexpr uint64_t kFuseReadHeld = 2000;

// Replies to one FUSE request: the header, then `len` bytes of `arg`.
void FuseReply(int dev, uint64_t unique, int error, const void *arg, size_t len) {
  fuse_out_header out{};
  out.len = static_cast<uint32_t>(sizeof(out) + len);
  out.error = error;
  out.unique = unique;
  iovec iov[2] = {{&out, sizeof(out)}, {const_cast<void *>(arg), len}};
  if (writev(dev, iov, len > 0 ? 2 : 1) < 0) {
    // The request was interrupted or the connection is gone: nothing to do.
  }
}

fuse_attr FuseAttr(uint64_t nodeid, uint64_t file_len) {
  fuse_attr a{};
  a.ino = nodeid;
  a.nlink = nodeid == FUSE_ROOT_ID ? 2 : 1;
  a.mode = nodeid == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
  a.size = nodeid == FUSE_ROOT_ID ? 0 : file_len;
  a.blocks = (a.size + 511) / 512;
  a.blksize = 4096;
  return a;
}

// A FUSE file system with one file, "f", of `file_len` bytes of kStallMarker, mounted on
// `mnt`.  It holds the first READ until the test sends kCmdGo (after saying kFuseReadHeld).
int FuseServe(const Channel &c, const std::string &mnt, uint64_t file_len) {
  const int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  const std::string opts =
      "fd=" + std::to_string(dev) + ",rootmode=40000,user_id=0,group_id=0,allow_other";
  if (dev < 0 || mount("hzc-stall", mnt.c_str(), "fuse", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
    Put(c, errno);
    return 1;
  }
  Put(c, 0);
  std::vector<char> buf(1 << 20);
  std::vector<char> data(file_len, kStallMarker);
  bool held = false;
  for (;;) {
    const ssize_t n = read(dev, buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN)) {
      continue;
    }
    if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) {
      return 0;  // unmounted
    }
    const auto *in = reinterpret_cast<const fuse_in_header *>(buf.data());
    const char *arg = buf.data() + sizeof(*in);
    switch (in->opcode) {
      case FUSE_INIT: {
        const auto *init = reinterpret_cast<const fuse_init_in *>(arg);
        fuse_init_out out{};
        out.major = FUSE_KERNEL_VERSION;
        out.minor = std::min<uint32_t>(init->minor, FUSE_KERNEL_MINOR_VERSION);
        out.max_readahead = init->max_readahead;
        out.max_background = 16;
        out.congestion_threshold = 12;
        out.max_write = 4096;
        FuseReply(dev, in->unique, 0, &out, sizeof(out));
        break;
      }
      case FUSE_LOOKUP:
        if (in->nodeid == FUSE_ROOT_ID && std::strcmp(arg, "f") == 0) {
          fuse_entry_out out{};
          out.nodeid = 2;
          out.generation = 1;
          out.entry_valid = out.attr_valid = 3600;
          out.attr = FuseAttr(2, file_len);
          FuseReply(dev, in->unique, 0, &out, sizeof(out));
        } else {
          FuseReply(dev, in->unique, -ENOENT, nullptr, 0);
        }
        break;
      case FUSE_GETATTR: {
        fuse_attr_out out{};
        out.attr_valid = 3600;
        out.attr = FuseAttr(in->nodeid, file_len);
        FuseReply(dev, in->unique, 0, &out, sizeof(out));
        break;
      }
      case FUSE_OPEN: {
        fuse_open_out out{};
        out.fh = 1;
        FuseReply(dev, in->unique, 0, &out, sizeof(out));
        break;
      }
      case FUSE_READ: {
        const auto *rd = reinterpret_cast<const fuse_read_in *>(arg);
        if (!held) {
          held = true;
          Put(c, kFuseReadHeld);
          for (uint64_t cmd = 0; cmd != kCmdGo;) {
            if (!Next(c, &cmd)) {
              return 1;
            }
          }
        }
        const uint64_t off = std::min<uint64_t>(rd->offset, file_len);
        const uint64_t len = std::min<uint64_t>(rd->size, file_len - off);
        FuseReply(dev, in->unique, 0, data.data() + off, len);
        break;
      }
      case FUSE_FORGET:
      case FUSE_BATCH_FORGET:
      case FUSE_INTERRUPT:
        break;  // no reply
      case FUSE_RELEASE:
      case FUSE_FLUSH:
        FuseReply(dev, in->unique, 0, nullptr, 0);
        break;
      default:
        FuseReply(dev, in->unique, -ENOSYS, nullptr, 0);
        break;
    }
  }
}

// A temporary directory, unmounted (lazily) and removed on destruction.
struct MountPoint {
  std::string path;
  MountPoint() {
    char tmpl[] = "/tmp/hzc-stall-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) {
      path = tmpl;
    }
  }
  ~MountPoint() {
    if (!path.empty()) {
      umount2(path.c_str(), MNT_DETACH);
      rmdir(path.c_str());
    }
  }
};

// Whether FUSE can be mounted here (loads the module if need be).
bool HaveFuse() {
  return access("/dev/fuse", R_OK | W_OK) == 0 ||
         (system("modprobe fuse >/dev/null 2>&1") == 0 && access("/dev/fuse", R_OK | W_OK) == 0);
}

// The owner of the stall tests (root): joins rank 0 of *id (if given), then on kCmdGo maps
// the FUSE file <mnt>/f privately and writable, registers it and activates it in a second
// thread, whose write fault waits for the FUSE READ.  Meanwhile it answers kCmdUnregister;
// the next kCmdGo joins the activation and answers its errno.
int StallOwner(const Channel &c, const std::string &mnt, size_t len, const DomainId *id) {
  const int fd = OpenDevice();
  Put(c, fd < 0 ? ENODEV : id != nullptr ? Join(fd, *id, 0, 2) : 0);
  uint64_t cmd = 0;
  if (!Next(c, &cmd) || cmd != kCmdGo) {
    return 1;
  }
  const int file = open((mnt + "/f").c_str(), O_RDONLY | O_CLOEXEC);
  void *p =
      file < 0 ? MAP_FAILED : mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, file, 0);
  int step = 0;
  if (p == MAP_FAILED) {
    step = file < 0 ? 2 : 3;
  } else if (RegisterRange(fd, p, len) != 0) {
    step = 4;
  }
  Put(c, step);
  if (step != 0) {
    return step;
  }
  std::atomic<int> activate_err{-1};
  std::thread activation([&] { activate_err = Activate(fd, p, len); });
  while (Next(c, &cmd) && cmd != kCmdGo) {
    if (cmd == kCmdUnregister) {
      Put(c, UnregisterRange(fd, p));
    }
  }
  activation.join();
  Put(c, static_cast<uint64_t>(activate_err.load()));
  return AwaitExit(c);
}

// Attack: the owner activates memory whose page fault it stalls on purpose (here: a private
// mapping of a file of its own FUSE file system, whose READ it never answers); with pinning
// done under the context's lock, every peer's LIST_RANGES / LIST_ACTIVATIONS on that context
// hung (unkillably) for as long as the owner pleased.  Must happen: the peer's list calls
// return within a 10 s liveness bound while the fault is pending, and once the fault is
// resolved the activation completes and is listed.
// Why FUSE and not userfaultfd: on 6.1 a FOLL_LONGTERM pin faults without
// FAULT_FLAG_ALLOW_RETRY, so userfaultfd cannot hold its fault (the ACTIVATE is EFAULT at
// once), while a FUSE read is waited for.  Runs as root: mounting FUSE needs it; the lock
// being held is what matters, not who holds it.
TEST_F(IsolationTest, ActivateStalledInPageFaultDoesNotBlockPeers) {
  if (!HaveFuse()) {
    GTEST_SKIP() << "no FUSE in this kernel (e.g. the debug kernel): nothing here can stall "
                    "the page fault of a long-term pin";
  }
  const DomainId id = NewDomainId();
  const size_t len = kStallPages * page_;
  const MountPoint mnt;  // unmounted last, once every process using it is gone
  ASSERT_FALSE(mnt.path.empty());
  UserProcess owner(As(0), [&](const Channel &c) { return StallOwner(c, mnt.path, len, &id); });
  ASSERT_EQ(Take(owner), 0u) << "owner join";
  UserProcess peer(As(0), [&](const Channel &c) {
    const int fd = OpenDevice();
    Put(c, fd < 0 ? ENODEV : Join(fd, id, 1, 2));
    uint64_t range_id = 0;
    for (uint64_t cmd; Next(c, &cmd) && cmd != kCmdExit;) {
      if (cmd == kCmdList) {
        std::vector<hzc_range_desc> ranges;
        const int err = ListRanges(fd, id, 1, 0, &ranges);
        if (!ranges.empty()) {
          range_id = ranges[0].id;
        }
        Put(c, err);
        Put(c, ranges.size());
        Put(c, ranges.empty() ? 0 : ranges[0].activated_bytes);
      } else if (cmd == kCmdListActs) {
        std::vector<hzc_activation_desc> acts;
        Put(c, ListActivations(fd, id, 1, 0, range_id, &acts));
        Put(c, acts.size());
      }
    }
    return 0;
  });
  ASSERT_EQ(Take(peer), 0u) << "peer join";
  // Declared last, so killed first: that aborts the FUSE connection and so ends a stall
  // that would otherwise keep the owner (and, before the fix, the peer) from exiting.
  UserProcess server(As(0), [&](const Channel &c) { return FuseServe(c, mnt.path, len); });
  ASSERT_EQ(Take(server), 0u) << "FUSE mount (errno)";
  Put(owner, kCmdGo);
  ASSERT_EQ(Take(owner), 0u) << "owner maps the FUSE file and registers it";
  if (Take(server, 30000) != kFuseReadHeld) {
    Put(owner, kCmdGo);
    FAIL() << "premise: ACTIVATE waits for the FUSE READ; it returned "
           << static_cast<int64_t>(Take(owner)) << " without one";
  }

  // While the fault is pending.
  Put(peer, kCmdList);
  uint64_t err = Take(peer, kLivenessMs);
  const bool list_returned = err != kNoReply;
  EXPECT_TRUE(list_returned) << "LIST_RANGES still blocked after 10 s behind the stalled ACTIVATE";
  uint64_t acts_err = kNoReply;
  if (list_returned) {
    EXPECT_EQ(err, 0u) << "LIST_RANGES during the stall";
    EXPECT_EQ(Take(peer), 1u) << "ranges listed during the stall";
    Take(peer);  // activated bytes: whatever is committed
    Put(peer, kCmdListActs);
    acts_err = Take(peer, kLivenessMs);
    EXPECT_NE(acts_err, kNoReply)
        << "LIST_ACTIVATIONS still blocked after 10 s behind the stalled ACTIVATE";
    if (acts_err != kNoReply) {
      EXPECT_EQ(acts_err, 0u) << "LIST_ACTIVATIONS during the stall";
      Take(peer);
    }
  }

  // Resolve the fault: the activation completes.
  Put(server, kCmdGo);
  Put(owner, kCmdGo);
  EXPECT_EQ(Take(owner), 0u) << "ACTIVATE once the fault is resolved";
  if (!list_returned) {
    for (int i = 0; i < 3; ++i) {
      Take(peer);  // the late answers of the blocked LIST_RANGES
    }
  } else if (acts_err == kNoReply) {
    for (int i = 0; i < 2; ++i) {
      Take(peer);  // ... of the blocked LIST_ACTIVATIONS
    }
  }
  Put(peer, kCmdList);
  EXPECT_EQ(Take(peer), 0u) << "LIST_RANGES after the activation";
  EXPECT_EQ(Take(peer), 1u);
  EXPECT_EQ(Take(peer), len) << "activated bytes after the activation";
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned + static_cast<long long>(len));

  Put(owner, kCmdExit);
  EXPECT_EQ(owner.Wait(), "");
  Put(peer, kCmdExit);
  EXPECT_EQ(peer.Wait(), "");
}

// Attack: with pinning taken out of the context's lock (the fix above), the owner
// unregisters the range while its ACTIVATE of that range is stalled in the page fault; if
// the activation were then committed into the removed range, its pins would never be
// returned.  Must happen: UNREGISTER returns (0) within the 10 s liveness bound while the
// fault is pending (before the fix it waited for the whole stall), the resolved ACTIVATE
// fails with ENOENT, and nothing stays pinned, charged or counted while the owner lives on.
TEST_F(IsolationTest, UnregisterDuringStalledActivateLeavesNothingPinned) {
  if (!HaveFuse()) {
    GTEST_SKIP() << "no FUSE in this kernel (e.g. the debug kernel): nothing here can stall "
                    "the page fault of a long-term pin";
  }
  const size_t len = kStallPages * page_;
  const MountPoint mnt;  // unmounted last, once every process using it is gone
  ASSERT_FALSE(mnt.path.empty());
  UserProcess owner(As(0), [&](const Channel &c) { return StallOwner(c, mnt.path, len, nullptr); });
  ASSERT_EQ(Take(owner), 0u) << "owner opens the device";
  // Declared last, so killed first: that aborts the FUSE connection and ends the stall.
  UserProcess server(As(0), [&](const Channel &c) { return FuseServe(c, mnt.path, len); });
  ASSERT_EQ(Take(server), 0u) << "FUSE mount (errno)";
  Put(owner, kCmdGo);
  ASSERT_EQ(Take(owner), 0u) << "owner maps the FUSE file and registers it";
  if (Take(server, 30000) != kFuseReadHeld) {
    Put(owner, kCmdGo);
    FAIL() << "premise: ACTIVATE waits for the FUSE READ; it returned "
           << static_cast<int64_t>(Take(owner)) << " without one";
  }

  Put(owner, kCmdUnregister);
  const uint64_t unregister_err = Take(owner, kLivenessMs);
  EXPECT_EQ(unregister_err, 0u) << "UNREGISTER during the stalled ACTIVATE (" << kNoReply
                                << ": still blocked after 10 s)";
  Put(server, kCmdGo);
  if (unregister_err == kNoReply) {
    EXPECT_EQ(Take(owner), static_cast<uint64_t>(EBUSY)) << "the late UNREGISTER";
  }
  Put(owner, kCmdGo);
  const uint64_t activate_err = Take(owner);
  if (unregister_err == 0) {
    EXPECT_EQ(activate_err, static_cast<uint64_t>(ENOENT))
        << "ACTIVATE of a range unregistered while it was pinning";
    ExpectOwnerTornDown("after the race, with the owner alive");
  }
  EXPECT_EQ(Counter("nr_contexts"), before_.contexts + 1);

  Put(owner, kCmdExit);
  EXPECT_EQ(owner.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// /proc/PID/mem at a peer mapping
// ---------------------------------------------------------------------------------------

// Attack: /proc/PID/mem (ptrace, gdb, a checkpointer) is a second way into a peer mapping,
// beside the page tables.  Without vm_ops->access it was EIO; with it, it must not become a
// way around the grant.  Must happen: pread() returns the owner's bytes while the grant
// lives; pwrite() through a read-only mapping (file opened O_RDONLY) fails and leaves the
// owner's memory alone; once the domain broke, pread() fails, also after the owner
// activated new memory at the same address.
TEST_F(IsolationTest, ProcMemReadsPeerMapping) {
  const std::vector<DomainId> ids = {NewDomainId()};
  GrantPair pair;
  ASSERT_NO_FATAL_FAILURE(StartGrantPair(ids, &pair, true));
  UserProcess &a = *pair.a, &b = *pair.b;
  // pread of two pages at B's mapping: (result or -errno, bytes equal to `marker`).
  auto proc_mem_read = [&](char marker) {
    Put(b, kCmdProcMem);
    Put(b, static_cast<uint8_t>(marker));
    const auto n = static_cast<int64_t>(Take(b));
    return std::make_pair(n, Take(b));
  };

  EXPECT_EQ(proc_mem_read(kMarker1), std::make_pair(static_cast<int64_t>(2 * page_), 2 * page_))
      << "pread of /proc/self/mem at the peer mapping: (bytes or -errno, bytes of A's marker)";
  EXPECT_EQ(ProbePeer(b), std::make_pair(uint64_t{0}, uint64_t{kMarker1}))
      << "the mapping itself reads the same";
  Put(b, kCmdProcMemWrite);
  EXPECT_LT(static_cast<int64_t>(Take(b)), 0) << "pwrite through a read-only peer mapping";
  Put(a, kCmdPeek);
  EXPECT_EQ(Take(a), static_cast<uint64_t>(kMarker1)) << "A's memory after B's pwrite";

  ASSERT_EQ(Command(a, kCmdLeave, 0), 0u) << "A leaves (the domain breaks)";
  auto [n, seen] = proc_mem_read(kMarker1);
  EXPECT_LT(n, 0) << "pread after the domain broke";
  EXPECT_EQ(seen, 0u) << "bytes of A's memory read after the domain broke";
  ASSERT_EQ(Command(a, kCmdReactivate, kMarker2), 0u) << "A re-activates the same address";
  std::tie(n, seen) = proc_mem_read(kMarker2);
  EXPECT_LT(n, 0) << "pread after A's new activation";
  EXPECT_EQ(seen, 0u) << "bytes of A's new memory read through /proc/self/mem";

  EXPECT_EQ(Command(b, kCmdLeave, 0), 0u);
  pair.End();
}

// ---------------------------------------------------------------------------------------
// Activation racing a change of the mapping it pins
// ---------------------------------------------------------------------------------------

// Attack: one thread activates a page of a range while another swaps, with MAP_FIXED, a
// shared mapping of a file the file system tracks for writing (ramfs, page_mkwrite: not
// pinnable) and an anonymous mapping under it. A pin taken without the mapping lock and
// checked under it afterwards can pin the file's page and then check the anonymous mapping
// that replaced it: the page cache stays pinned, written behind the file system's back (on
// ext4 a WARN in ext4_dirty_folio at unpin).
// Must happen: every activation that succeeds pinned an anonymous page (the owner reads it
// through its own window: zero, never the file's marker).
TEST_F(IsolationTest, ActivateRacingMapFixedNeverPinsASharedFileMapping) {
  char dir[] = "/tmp/hzc-ramfs-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  if (mount("hzc-ramfs", dir, "ramfs", 0, "mode=0755") != 0) {
    rmdir(dir);
    GTEST_SKIP() << "cannot mount a ramfs: " << strerror(errno);
  }
  const std::string path = std::string(dir) + "/file";
  constexpr unsigned char kFileMarker = 0xab;
  {
    const std::string marker(page_, static_cast<char>(kFileMarker));
    std::ofstream(path) << marker;
  }
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  const std::string outcome = AsUser(As(kNobody), [&]() -> std::string {
    const int fd = OpenDevice();
    const int file = open(path.c_str(), O_RDWR);
    Reservation res(page_);
    hzc_range_register reg{};
    if (fd < 0 || file < 0 || res.base() == nullptr ||
        RegisterRange(fd, res.base(), page_, &reg) != 0) {
      return "set-up failed";
    }
    void *w =
        mmap(nullptr, page_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(reg.out_mmap_offset));
    if (w == MAP_FAILED) {
      return Failed("mmap of the own window", errno);
    }
    const auto *window = static_cast<volatile const unsigned char *>(w);
    std::atomic<bool> stop{false};
    std::thread swapper([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        mmap(res.base(), page_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, file, 0);
        mmap(res.base(), page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0);
      }
    });
    size_t pinned = 0, file_pages = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      if (Activate(fd, res.base(), page_) == 0) {
        ++pinned;
        file_pages += window[0] == kFileMarker;
        Deactivate(fd, res.base());
      }
    }
    stop = true;
    swapper.join();
    if (file_pages != 0) {
      return std::to_string(file_pages) + " of " + std::to_string(pinned) +
             " activations pinned the shared file's page";
    }
    if (pinned == 0) {
      return "no activation succeeded in 5 s: the race was not run";
    }
    std::cout << pinned << " activations, each of an anonymous page\n";
    return "";
  });
  EXPECT_EQ(outcome, "");
  unlink(path.c_str());
  EXPECT_EQ(umount(dir), 0);
  rmdir(dir);
}

}  // namespace
}  // namespace hzc::ktest
