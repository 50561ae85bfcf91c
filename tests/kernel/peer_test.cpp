// SPDX-License-Identifier: GPL-2.0
// Peer mappings: listing a peer's ranges, mmap of /dev/hzc, SIGBUS, revocation, lifetime.
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <algorithm>
#include <iterator>

#include "ktest.h"

namespace hzc::ktest {
namespace {

constexpr size_t kRangePages = 1024;  // 4 MiB: two 2 MiB blocks
constexpr size_t kActPages = 512;
constexpr uint64_t kOwnerCookie = 0x1234567890abcdefull;

// The owner: a child process that holds rank 0 and obeys one-letter commands
// ('d' deactivate, 'a' activate, 'u' unregister, 'r' register, 'l' leave,
// 'x' exit); it answers each with the errno byte.
class Owner {
 public:
  explicit Owner(DomainId id) : id_(id) {
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      close(to[1]);
      close(from[0]);
      _exit(Run(to[0], from[1]));
    }
    close(to[0]);
    close(from[1]);
    cmd_ = to[1];
    reply_ = from[0];
    char hello[16];
    if (read(reply_, hello, sizeof(hello)) != sizeof(hello)) {
      pid_ = -1;
      return;
    }
    std::memcpy(&base_, hello, 8);
    std::memcpy(&range_id_, hello + 8, 8);
  }
  ~Owner() {
    if (pid_ > 0) {
      Command('x');
      int status;
      waitpid(pid_, &status, 0);
    }
    close(cmd_);
    close(reply_);
  }
  int Command(char c) {
    char err = -1;
    if (write(cmd_, &c, 1) != 1 || read(reply_, &err, 1) != 1) {
      return -1;
    }
    return err;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  bool ok() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  uintptr_t base() const { return base_; }
  uint64_t range_id() const { return range_id_; }

 private:
  int Run(int in, int out) {
    const size_t page = PageSize();
    int fd = OpenDevice();
    char *b = static_cast<char *>(mmap(nullptr, kRangePages * page, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < kRangePages * page; ++i) {
      b[i] = static_cast<char>(i / page);
    }
    hzc_range_register reg{};
    if (fd < 0 || b == MAP_FAILED || Join(fd, id_, 0, 2) != 0 ||
        RegisterRange(fd, b, kRangePages * page, &reg) != 0 ||
        Activate(fd, b, kActPages * page, nullptr, kOwnerCookie) != 0) {
      return 1;
    }
    char hello[16];
    uintptr_t base = reinterpret_cast<uintptr_t>(b);
    std::memcpy(hello, &base, 8);
    std::memcpy(hello + 8, &reg.out_id, 8);
    if (write(out, hello, sizeof(hello)) != sizeof(hello)) {
      return 1;
    }
    char c;
    while (read(in, &c, 1) == 1) {
      int err = 0;
      switch (c) {
        case 'd':
          err = Deactivate(fd, b);
          break;
        case 'a':
          err = Activate(fd, b, kActPages * page, nullptr, kOwnerCookie + 1);
          break;
        case 'u':
          err = UnregisterRange(fd, b);
          break;
        case 'r':
          err = RegisterRange(fd, b, kRangePages * page);
          break;
        case 'l':
          err = Leave(fd, id_, 0);
          break;
        case 'x':
          return 0;
      }
      char e = static_cast<char>(err);
      if (write(out, &e, 1) != 1) {
        return 1;
      }
    }
    return 0;
  }

  DomainId id_;
  pid_t pid_ = -1;
  int cmd_ = -1;
  int reply_ = -1;
  uintptr_t base_ = 0;
  uint64_t range_id_ = 0;
};

class PeerTest : public DeviceTest {
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
  // Joins rank 1 and finds the owner's range.
  void Attach(Owner &owner, DomainId id) {
    ASSERT_TRUE(owner.ok());
    ASSERT_EQ(Join(fd_, id, 1, 2), 0);
    uint32_t pid = 0;
    ASSERT_EQ(ListRanges(fd_, id, 1, 0, &ranges_, &pid), 0);
    EXPECT_EQ(pid, static_cast<uint32_t>(owner.pid()));
    ASSERT_EQ(ranges_.size(), 1u);
  }
  char *Map(const hzc_range_desc &d, size_t len, off_t extra = 0) {
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                   static_cast<off_t>(d.mmap_offset) + extra);
    return p == MAP_FAILED ? nullptr : static_cast<char *>(p);
  }
  size_t page_ = 0;
  Counters before_;
  std::vector<hzc_range_desc> ranges_;
};

TEST_F(PeerTest, ListAndReadThroughMapping) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  const hzc_range_desc &d = ranges_[0];
  EXPECT_EQ(d.id, owner.range_id());
  EXPECT_EQ(d.base, owner.base());
  EXPECT_EQ(d.length, kRangePages * page_);
  EXPECT_EQ(d.activated_bytes, kActPages * page_);
  EXPECT_EQ(d.nr_activations, 1u);
  std::vector<hzc_activation_desc> acts;
  ASSERT_EQ(ListActivations(fd_, id, 1, 0, d.id, &acts), 0);
  ASSERT_EQ(acts.size(), 1u);
  EXPECT_EQ(acts[0].va, owner.base());
  EXPECT_EQ(acts[0].length, kActPages * page_);
  EXPECT_EQ(acts[0].cookie, kOwnerCookie);
  EXPECT_EQ(ListActivations(fd_, id, 1, 0, d.id + 1000000, &acts), ENOENT);
  EXPECT_EQ(ListRanges(fd_, id, 1, 2, &ranges_), EINVAL) << "peer rank out of bounds";

  char *m = Map(d, kRangePages * page_);
  ASSERT_NE(m, nullptr) << strerror(errno);
  for (size_t i = 0; i < kActPages; i += 17) {
    char v = 0;
    ASSERT_EQ(Probe(m + i * page_ + 3, false, &v), 0) << "page " << i;
    EXPECT_EQ(v, static_cast<char>(i));
  }
  EXPECT_EQ(Probe(m + kActPages * page_, false), SIGBUS) << "not activated";
  EXPECT_EQ(Probe(m + (kRangePages - 1) * page_, false), SIGBUS);
  // Writes go to the owner's pages.
  EXPECT_EQ(Probe(m + 5 * page_, true), 0);
  munmap(m, kRangePages * page_);
  // A mapping of part of the range, at an offset inside it.
  m = Map(d, page_, static_cast<off_t>(7 * page_));
  ASSERT_NE(m, nullptr);
  char v = 0;
  EXPECT_EQ(Probe(m, false, &v), 0);
  EXPECT_EQ(v, 7);
  munmap(m, page_);
}

// A file opened read-only maps peers read-only (and only read-only).
TEST_F(PeerTest, ReadOnlyFileMapsReadOnly) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  ASSERT_TRUE(owner.ok());
  const int ro = open(kDevice, O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  ASSERT_EQ(Join(ro, id, 1, 2), 0);
  ASSERT_EQ(ListRanges(ro, id, 1, 0, &ranges_), 0);
  ASSERT_EQ(ranges_.size(), 1u);
  const off_t off = static_cast<off_t>(ranges_[0].mmap_offset);
  void *p = mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_SHARED, ro, off);
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EACCES) << "writable mapping of a read-only file";
  void *m = mmap(nullptr, 4 * page_, PROT_READ, MAP_SHARED, ro, off);
  ASSERT_NE(m, MAP_FAILED) << strerror(errno);
  char v = 0;
  EXPECT_EQ(Probe(static_cast<char *>(m) + 3 * page_, false, &v), 0);
  EXPECT_EQ(v, 3);
  EXPECT_EQ(mprotect(m, page_, PROT_READ | PROT_WRITE), -1);
  EXPECT_EQ(errno, EACCES) << "mprotect(PROT_WRITE)";
  munmap(m, 4 * page_);
  p = mmap(nullptr, page_, PROT_READ, MAP_PRIVATE, ro, off);
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EINVAL) << "MAP_PRIVATE";
  close(ro);
}

TEST_F(PeerTest, DeactivateRevokesAndReactivateRestores) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  char *m = Map(ranges_[0], kRangePages * page_);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(Probe(m, false), 0);
  ASSERT_EQ(owner.Command('d'), 0);
  EXPECT_EQ(Probe(m, false), SIGBUS);
  EXPECT_EQ(Probe(m + 100 * page_, false), SIGBUS);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned) << "unpinned despite the peer mapping";
  ASSERT_EQ(owner.Command('a'), 0);
  char v = 0;
  EXPECT_EQ(Probe(m + 3 * page_, false, &v), 0);
  EXPECT_EQ(v, 3);
  munmap(m, kRangePages * page_);
}

TEST_F(PeerTest, StaleMappingNeverReachesANewRange) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  char *m = Map(ranges_[0], kRangePages * page_);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(Probe(m, false), 0);
  ASSERT_EQ(owner.Command('d'), 0);
  ASSERT_EQ(owner.Command('u'), 0);
  EXPECT_EQ(Probe(m, false), SIGBUS);
  // Same base again: the new range gets a window of its own (a freed window may
  // also be reused), and the old VMA keeps the old (dead) range.
  ASSERT_EQ(owner.Command('r'), 0);
  ASSERT_EQ(owner.Command('a'), 0);
  std::vector<hzc_range_desc> now;
  ASSERT_EQ(ListRanges(fd_, id, 1, 0, &now), 0);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0].id, ranges_[0].id);
  EXPECT_EQ(Probe(m, false), SIGBUS) << "stale VMA reached the new range";
  char *m2 = Map(now[0], kRangePages * page_);
  ASSERT_NE(m2, nullptr);
  EXPECT_EQ(Probe(m2, false), 0);
  munmap(m2, kRangePages * page_);
  munmap(m, kRangePages * page_);
}

TEST_F(PeerTest, OwnerDeathRevokes) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  char *m = Map(ranges_[0], kRangePages * page_);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(Probe(m, false), 0);
  owner.Kill();
  EXPECT_EQ(Probe(m, false), SIGBUS);
  EXPECT_EQ(Counter("pinned_bytes"), before_.pinned);
  EXPECT_EQ(ListRanges(fd_, id, 1, 0, &ranges_), ECONNRESET);
  munmap(m, kRangePages * page_);
  EXPECT_EQ(Leave(fd_, id, 1), 0);
}

// A caller that may not map the range gets EPERM whatever the offset and length: no
// other errno tells it whether a window exists there or how long the range is.
TEST_F(PeerTest, NoCommonDomainIsEperm) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  const hzc_range_desc d = ranges_[0];
  ASSERT_EQ(Leave(fd_, id, 1), 0);  // also breaks the domain
  EXPECT_EQ(Map(d, page_), nullptr);
  EXPECT_EQ(errno, EPERM) << "domain broken";
  EXPECT_EQ(Map(d, (kRangePages + 1) * page_), nullptr);
  EXPECT_EQ(errno, EPERM) << "domain broken, longer than the range";
  int other = OpenDevice();
  const struct {
    const char *what;
    uint64_t offset;
    size_t len;
  } probes[] = {
      {"the window", d.mmap_offset, page_},
      {"the whole range", d.mmap_offset, kRangePages * page_},
      {"longer than the range", d.mmap_offset, (kRangePages + 1) * page_},
      {"last page and one past", d.mmap_offset + (kRangePages - 1) * page_, 2 * page_},
      {"past the window", d.mmap_offset + kRangePages * page_, page_},
      {"offset 0", 0, page_},
      {"the range's base address", d.base, page_},
  };
  for (const auto &probe : probes) {
    void *p =
        mmap(nullptr, probe.len, PROT_READ, MAP_SHARED, other, static_cast<off_t>(probe.offset));
    EXPECT_EQ(p, MAP_FAILED) << probe.what;
    EXPECT_EQ(errno, EPERM) << probe.what;
    if (p != MAP_FAILED) {
      munmap(p, probe.len);
    }
  }
  close(other);
}

TEST_F(PeerTest, MmapErrors) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  const hzc_range_desc &d = ranges_[0];
  void *p = mmap(nullptr, page_, PROT_READ, MAP_PRIVATE, fd_, static_cast<off_t>(d.mmap_offset));
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EINVAL) << "MAP_PRIVATE";
  EXPECT_EQ(Map(d, (kRangePages + 1) * page_), nullptr);
  EXPECT_EQ(errno, EINVAL) << "beyond the range";
  // Offsets that name no range the caller may map are EPERM, like a stranger's range.
  if (d.mmap_offset != 0) {
    p = mmap(nullptr, page_, PROT_READ, MAP_SHARED, fd_, 0);
    EXPECT_EQ(p, MAP_FAILED);
    EXPECT_EQ(errno, EPERM) << "offset 0 is no window";
  }
  // Nothing is mapped past the end of the window either.
  EXPECT_EQ(Map(d, page_, static_cast<off_t>(kRangePages * page_)), nullptr);
  EXPECT_EQ(errno, EPERM) << "past the end of the window";
  // A peer's memory is never executable, at mmap() or later.
  p = mmap(nullptr, page_, PROT_READ | PROT_EXEC, MAP_SHARED, fd_,
           static_cast<off_t>(d.mmap_offset));
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EPERM) << "PROT_EXEC";
  if (p != MAP_FAILED) {
    munmap(p, page_);
  }
  char *m = Map(d, page_);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(mprotect(m, page_, PROT_READ | PROT_EXEC), -1);
  EXPECT_EQ(errno, EACCES) << "mprotect(PROT_EXEC)";
  munmap(m, page_);
}

TEST_F(PeerTest, ForkedChildGetsNeitherContextNorMapping) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  char *m = Map(ranges_[0], kRangePages * page_);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(Probe(m, false), 0);
  // Not even on request: the mapping stays out of children.
  EXPECT_EQ(madvise(m, kRangePages * page_, MADV_DOFORK), -1);
  EXPECT_EQ(errno, EINVAL) << "MADV_DOFORK";
  const uint64_t off = ranges_[0].mmap_offset;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    if (Probe(m, false) != SIGSEGV) {
      code |= 1;  // the mapping was inherited
    }
    void *p = mmap(nullptr, page_, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(off));
    if (p != MAP_FAILED || errno != EPERM) {
      code |= 2;
    }
    std::vector<hzc_range_desc> r;
    if (ListRanges(fd_, id, 1, 0, &r) != EPERM) {
      code |= 4;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bit 1: mapping inherited, 2: mmap, 4: ioctl";
  munmap(m, kRangePages * page_);
}

TEST_F(PeerTest, OwnerMapsItsOwnRange) {
  Reservation res(8 * page_, PROT_READ | PROT_WRITE);
  std::memset(res.base(), 0x33, res.size());
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd_, res.base(), res.size(), &reg), 0);
  ASSERT_EQ(Activate(fd_, res.base(), 4 * page_), 0);
  void *p =
      mmap(nullptr, 8 * page_, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(reg.out_mmap_offset));
  ASSERT_NE(p, MAP_FAILED);
  char v = 0;
  EXPECT_EQ(Probe(static_cast<char *>(p), false, &v), 0);
  EXPECT_EQ(v, 0x33);
  munmap(p, 8 * page_);
  EXPECT_EQ(Deactivate(fd_, res.base()), 0);
  EXPECT_EQ(UnregisterRange(fd_, res.base()), 0);
}

TEST_F(PeerTest, ListAbi) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  std::vector<hzc_range_desc> descs(1);
  hzc_list_ranges lr{};
  lr.size = sizeof(lr);
  lr.domain_id[0] = id.lo;
  lr.domain_id[1] = id.hi;
  lr.rank = 1;
  lr.peer_rank = 0;
  lr.num_ranges = 1;
  lr.ranges = reinterpret_cast<uintptr_t>(descs.data());
  CheckAbi(fd_, HZC_IOC_LIST_RANGES, lr, 0, [](const hzc_list_ranges &) {});
  lr.num_ranges = 0;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_LIST_RANGES, &lr), EMSGSIZE);
  EXPECT_EQ(lr.num_ranges, 1u) << "the needed count";

  std::vector<hzc_activation_desc> acts(1);
  hzc_list_activations la{};
  la.size = sizeof(la);
  la.domain_id[0] = id.lo;
  la.domain_id[1] = id.hi;
  la.rank = 1;
  la.range_id = owner.range_id();
  la.num_activations = 1;
  la.activations = reinterpret_cast<uintptr_t>(acts.data());
  CheckAbi(fd_, HZC_IOC_LIST_ACTIVATIONS, la, 0, [](const hzc_list_activations &) {});
  for (uint32_t bad : {8u, 12u, 20u, static_cast<uint32_t>(page_) + 8}) {
    la.desc_size = bad;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_LIST_ACTIVATIONS, &la), EINVAL) << "desc_size " << bad;
  }
  la.desc_size = 0;
  la.num_activations = 0;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_LIST_ACTIVATIONS, &la), EMSGSIZE);
  EXPECT_EQ(la.num_activations, 1u);
  la.rank = 0;
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_LIST_ACTIVATIONS, &la), ENOENT) << "caller does not hold rank 0";
}

// Elements of LIST_ACTIVATIONS are desc_size apart: 0 is the first version (va, length), a
// larger size than the kernel knows gets a zeroed tail; the cookie comes back as activated,
// and a re-activation carries its own.
TEST_F(PeerTest, ActivationCookieAndDescSize) {
  const DomainId id = NewDomainId();
  Owner owner(id);
  Attach(owner, id);
  const uint64_t range_id = ranges_[0].id;
  hzc_list_activations la{};
  la.size = sizeof(la);
  la.domain_id[0] = id.lo;
  la.domain_id[1] = id.hi;
  la.rank = 1;
  la.range_id = range_id;
  la.num_activations = 2;

  uint64_t v0[2 * 2];
  std::fill(std::begin(v0), std::end(v0), ~0ull);
  la.activations = reinterpret_cast<uintptr_t>(v0);
  ASSERT_EQ(Ioctl(fd_, HZC_IOC_LIST_ACTIVATIONS, &la), 0);
  ASSERT_EQ(la.num_activations, 1u);
  EXPECT_EQ(v0[0], owner.base());
  EXPECT_EQ(v0[1], kActPages * page_);
  EXPECT_EQ(v0[2], ~0ull) << "only one 16-byte element written";

  struct Future {
    hzc_activation_desc known;
    uint64_t unknown[3];
  };
  Future future[2];
  std::memset(future, 0xff, sizeof(future));
  la.num_activations = 2;
  la.desc_size = sizeof(Future);
  la.activations = reinterpret_cast<uintptr_t>(future);
  ASSERT_EQ(Ioctl(fd_, HZC_IOC_LIST_ACTIVATIONS, &la), 0);
  EXPECT_EQ(future[0].known.va, owner.base());
  EXPECT_EQ(future[0].known.cookie, kOwnerCookie);
  for (uint64_t u : future[0].unknown) {
    EXPECT_EQ(u, 0u) << "tail beyond what the kernel knows is zeroed";
  }
  EXPECT_EQ(future[1].known.va, ~0ull) << "second element untouched";

  ASSERT_EQ(owner.Command('d'), 0);
  ASSERT_EQ(owner.Command('a'), 0);
  std::vector<hzc_activation_desc> acts;
  ASSERT_EQ(ListActivations(fd_, id, 1, 0, range_id, &acts), 0);
  ASSERT_EQ(acts.size(), 1u);
  EXPECT_EQ(acts[0].cookie, kOwnerCookie + 1);
}

}  // namespace
}  // namespace hzc::ktest
