// SPDX-License-Identifier: GPL-2.0
// A hostile local user (issue 10): each attack runs as an unprivileged uid in a forked
// child; root in the test process sets module parameters and checks root-only files.
// What each attack must achieve against a safe module is said above its TEST.
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "ktest.h"

namespace hzc::ktest {
namespace {

using namespace std::chrono_literals;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

std::string ErrnoName(int err) {
  if (err == 0) {
    return "0";
  }
  const char *name = strerrorname_np(err);
  return name != nullptr ? name : std::to_string(err);
}

// Every test switches users: root only.  Counters must be back once its processes are gone.
class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root to switch users and set module parameters";
    }
  }
  void TearDown() override { ExpectBalanced(before_); }
  Counters before_;
};

// read() of a whole sysfs file with raw syscalls: the text, or the errno.
struct FileRead {
  int err = 0;
  std::string text;
};

FileRead ReadFile(const std::string &path) {
  FileRead r;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.err = errno;
    return r;
  }
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  if (n < 0) {
    r.err = errno;
  } else {
    r.text.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return r;
}

bool IsDecimal(const std::string &s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// ---------------------------------------------------------------------------------------
// Attack 1 (issue item 1): a range's sysfs directory became visible before the range was
// initialised, so reading ranges/<next id>/owner_pid (or domains) while another thread
// registers ranges dereferenced a NULL context: an oops any user could trigger.
// Must: 5 s of register/unregister (and join/leave) in some threads while others read
// every file of ranges/<last id + 1..3>/ and domains/*/ never splats (the guest run fails
// on a kernel splat); every read either fails with ENOENT/ENODEV (not there yet, or gone),
// or shows the reader's own pid as owner; the counters return to baseline. As root: the
// per-object files are root's now (SysfsObjectFilesAreRootsOnly), and the race is the same.
TEST_F(LimitsTest, SysfsReadsRacingRegisterAndUnregisterNeverOops) {
  const std::string outcome = []() -> std::string {
    const size_t page = PageSize();
    const std::string ranges = std::string(kSysfsRoot) + "/ranges/";
    const std::string domains = std::string(kSysfsRoot) + "/domains/";
    const char *range_files[] = {"owner_pid", "domains",         "size",
                                 "state",     "activated_bytes", "nr_activations"};
    std::atomic<uint64_t> last_id{0};
    std::atomic<bool> stop{false};
    std::atomic<long> registered{0}, owner_reads{0}, domain_reads{0};
    std::mutex bad_lock;
    std::string bad;
    auto report = [&](const std::string &what) {
      std::lock_guard<std::mutex> lock(bad_lock);
      if (bad.empty()) {
        bad = what;
      }
    };
    auto check_read = [&](const std::string &path, const FileRead &r) {
      if (r.err != 0 && r.err != ENOENT && r.err != ENODEV && r.err != EACCES) {
        report(Failed("read " + path, r.err));
      }
    };

    // Writers: two contexts (each also a member of a domain, so `domains` has
    // something to list) registering and unregistering one range in a loop.
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        const int fd = OpenDevice();
        Reservation res(4 * page, PROT_READ | PROT_WRITE);
        const DomainId id = NewDomainId();
        if (fd < 0 || res.base() == nullptr || Join(fd, id, 0, 2) != 0) {
          report("writer " + std::to_string(w) + ": set-up failed");
          return;
        }
        while (!stop.load()) {
          hzc_range_register reg{};
          const int err = RegisterRange(fd, res.base(), res.size(), &reg);
          if (err != 0) {
            report(Failed("register", err));
            break;
          }
          uint64_t seen = last_id.load();
          while (seen < reg.out_id && !last_id.compare_exchange_weak(seen, reg.out_id)) {
          }
          registered++;
          if (UnregisterRange(fd, res.base()) != 0) {
            report("unregister failed");
            break;
          }
        }
        close(fd);
      });
    }
    // Domain churn: domains/<N>/ and rank<R>/ directories come and go.
    threads.emplace_back([&] {
      const int fd = OpenDevice();
      while (fd >= 0 && !stop.load()) {
        const DomainId id = NewDomainId();
        if (Join(fd, id, 0, 2) != 0 || Join(fd, id, 1, 2) != 0) {
          report("churn: join failed");
          break;
        }
        Leave(fd, id, 0);
        Leave(fd, id, 1);
      }
      if (fd >= 0) {
        close(fd);
      }
    });
    // Readers: the next ranges' files as soon as they appear, and every domain file.
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        long round = 0;
        while (!stop.load()) {
          const uint64_t last = last_id.load();
          for (uint64_t id = last + 1; id <= last + 3; ++id) {
            for (const char *file : range_files) {
              const std::string path = ranges + std::to_string(id) + "/" + file;
              const FileRead r = ReadFile(path);
              check_read(path, r);
              if (r.err == 0 && std::string(file) == "owner_pid") {
                owner_reads++;
                if (std::strtoll(r.text.c_str(), nullptr, 10) != getpid()) {
                  report(path + " shows \"" + r.text + "\", not the owner " +
                         std::to_string(getpid()));
                }
              }
            }
          }
          if (++round % 8 != static_cast<long>(t) * 4) {
            continue;
          }
          for (const std::string &dom : ListDir(domains)) {
            for (const std::string &file : ListDir(domains + dom)) {
              const std::string path = domains + dom + "/" + file;
              if (file.rfind("rank", 0) == 0) {
                check_read(path + "/pid", ReadFile(path + "/pid"));
                continue;
              }
              const FileRead r = ReadFile(path);
              check_read(path, r);
              domain_reads += r.err == 0;
            }
          }
        }
      });
    }
    std::this_thread::sleep_for(5s);
    stop = true;
    for (auto &t : threads) {
      t.join();
    }
    std::cout << registered.load() << " ranges registered, " << owner_reads.load()
              << " owner_pid reads of a new range, " << domain_reads.load() << " domain file reads"
              << std::endl;
    if (!bad.empty()) {
      return bad;
    }
    if (registered.load() < 100 || owner_reads.load() == 0) {
      return "the race was not exercised: " + std::to_string(registered.load()) +
             " ranges registered, " + std::to_string(owner_reads.load()) + " owner_pid reads";
    }
    return "";
  }();
  EXPECT_EQ(outcome, "");
}

// The files of ranges, domains and members show every user's objects, which the netlink
// family shows each user only for its own: another user's read of any of them is EACCES,
// root's works, and the global counters are for everyone.
TEST_F(LimitsTest, SysfsObjectFilesAreRootsOnly) {
  const size_t page = PageSize();
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  Reservation res(4 * page, PROT_READ | PROT_WRITE);
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd, res.base(), res.size(), &reg), 0);
  const DomainId id = NewDomainId();
  ASSERT_EQ(Join(fd, id, 0, 2), 0);
  const std::string range = std::string(kSysfsRoot) + "/ranges/" + std::to_string(reg.out_id);
  const std::string domain = FindDomainDir(id);
  ASSERT_FALSE(domain.empty());
  std::vector<std::string> files;
  for (const char *f :
       {"owner_pid", "base", "size", "activated_bytes", "nr_activations", "state", "domains"}) {
    files.push_back(range + "/" + f);
  }
  for (const char *f : {"id", "state", "nranks", "joined", "creator_uid", "rank0/pid"}) {
    files.push_back(domain + "/" + f);
  }
  for (const std::string &f : files) {
    EXPECT_EQ(ReadFile(f).err, 0) << "root reads " << f;
  }
  const std::string outcome = AsUser(kNobody, [&]() -> std::string {
    for (const std::string &f : files) {
      if (const int err = ReadFile(f).err; err != EACCES) {
        return f + ": " + (err == 0 ? std::string("readable") : std::strerror(err)) +
               ", not EACCES";
      }
    }
    for (const char *counter : {"nr_ranges", "nr_domains", "pinned_bytes", "abi_version"}) {
      if (const int err = ReadFile(std::string(kSysfsRoot) + "/" + counter).err; err != 0) {
        return std::string(counter) + ": " + std::strerror(err);
      }
    }
    return "";
  });
  EXPECT_EQ(outcome, "");
  close(fd);
}

// ---------------------------------------------------------------------------------------
// Attack 2 (issue item 2): board blobs lived as long as any member held a broken domain,
// broken domains stopped counting against max_domains, and nothing was charged: a user
// looping {A joins rank 0 of a new 2-rank domain, B joins rank 1, both publish 4 KiB on
// all 16 keys, A leaves (the domain breaks), B stays} held unbounded kernel memory.
// Must: the loop stops, on the first call over a limit, with that limit's errno:
//   max_memberships (per context)            ENOSPC on B's JOIN
//   max_user_memberships (per user)          EDQUOT on the JOIN that would pass it
//   max_board_bytes (per context)            ENOSPC on B's BOARD_PUT
//   max_user_board_bytes (blobs that live)   EDQUOT on A's BOARD_PUT
//   max_domains (global, broken ones count)  ENOSPC on A's JOIN (creating the domain)
// While the flooder holds everything, a per-user limit refuses another process of the
// same user (EDQUOT) but not another user; a per-context limit refuses neither; the
// global one refuses everyone.  nr_domains counts the broken domains B holds; once the
// flooder is gone every counter is back and a second flooder stops at the same point
// (the per-user charges were returned).

constexpr uint32_t kBlob = 4096;
constexpr size_t kRoundBlobBytes = 2 * HZC_BOARD_KEYS * kBlob;  // A's and B's blobs

struct Flood {
  int rounds = 0;             // complete rounds
  int held = 0;               // domains still held when it stopped (broken ones included)
  std::string stopped_at;     // the call that failed, "" if the loop never stopped
  int err = 0;                // its errno
  long long blob_bytes = 0;   // bytes of blobs published (and alive) when it stopped
  long long nr_domains = -1;  // nr_domains when it stopped
};

std::ostream &operator<<(std::ostream &os, const Flood &f) {
  return os << f.rounds << " rounds (" << f.held << " domains held), stopped at \"" << f.stopped_at
            << "\" with " << ErrnoName(f.err) << ", " << f.blob_bytes / kKiB
            << " KiB of blobs, nr_domains " << f.nr_domains;
}

// Runs the loop as nobody, at most max_rounds rounds, then calls while_held (if any)
// before the flooder closes its files and exits.  An incomplete last round is not
// undone: A and B keep what they got.
Flood RunBoardFlood(int max_rounds, const std::function<void()> &while_held = {}) {
  UserProcess child(kNobody, [max_rounds](Channel &channel) -> std::string {
    const int a = OpenDevice(), b = OpenDevice();
    if (a < 0 || b < 0) {
      return "open failed";
    }
    const std::vector<char> blob(kBlob, 'x');
    Flood f;
    for (; f.rounds < max_rounds; ++f.rounds) {
      const DomainId id = NewDomainId();
      if ((f.err = Join(a, id, 0, 2)) != 0) {
        f.stopped_at = "A joins rank 0";
        break;
      }
      f.held++;
      if ((f.err = Join(b, id, 1, 2)) != 0) {
        f.stopped_at = "B joins rank 1";
      }
      for (uint32_t key = 0; key < HZC_BOARD_KEYS && f.stopped_at.empty(); ++key) {
        if ((f.err = Put(a, id, 0, key, blob.data(), kBlob)) != 0) {
          f.stopped_at = "A publishes key " + std::to_string(key);
        } else {
          f.blob_bytes += kBlob;
        }
      }
      for (uint32_t key = 0; key < HZC_BOARD_KEYS && f.stopped_at.empty(); ++key) {
        if ((f.err = Put(b, id, 1, key, blob.data(), kBlob)) != 0) {
          f.stopped_at = "B publishes key " + std::to_string(key);
        } else {
          f.blob_bytes += kBlob;
        }
      }
      if (!f.stopped_at.empty()) {
        break;
      }
      if (Leave(a, id, 0) != 0) {
        return "A could not leave";
      }
    }
    f.nr_domains = Counter("nr_domains");
    std::ostringstream out;
    out << f.rounds << ' ' << f.held << ' ' << f.err << ' ' << f.blob_bytes << ' ' << f.nr_domains
        << ' ' << f.stopped_at;
    if (!channel.Send(out.str()) || !channel.Expect("close", 300000)) {
      return "lost the test";
    }
    close(a);
    close(b);
    return "";
  });
  Flood f;
  const std::optional<std::string> report = child.channel().Receive(300000);
  if (report) {
    std::istringstream in(*report);
    in >> f.rounds >> f.held >> f.err >> f.blob_bytes >> f.nr_domains >> std::ws;
    std::getline(in, f.stopped_at);
    if (while_held) {
      while_held();
    }
    child.channel().Send("close");
  }
  EXPECT_EQ(child.Wait(), "") << "the flooding process";
  EXPECT_TRUE(report.has_value()) << "no report from the flooding process";
  return f;
}

// What a fresh process of `uid` gets for one more membership: a new 1-rank domain (the
// JOIN's errno name).
std::string ProbeJoin(uid_t uid) {
  return UserProcess(uid,
                     []() -> std::string {
                       const int fd = OpenDevice();
                       return ErrnoName(Join(fd, NewDomainId(), 0, 1));
                     })
      .Wait();
}

// What a fresh process of `uid` gets for one more 4 KiB blob, in a new 1-rank domain
// (the BOARD_PUT's errno name, or the JOIN's).
std::string ProbePut(uid_t uid) {
  return UserProcess(uid,
                     []() -> std::string {
                       const int fd = OpenDevice();
                       const DomainId id = NewDomainId();
                       const int err = Join(fd, id, 0, 1);
                       if (err != 0) {
                         return "JOIN " + ErrnoName(err);
                       }
                       const std::vector<char> blob(kBlob, 'y');
                       return ErrnoName(Put(fd, id, 0, 0, blob.data(), kBlob));
                     })
      .Wait();
}

struct FloodStop {
  int rounds;
  int held;
  std::string stopped_at;
  int err;
};

// The loop with one limit lowered, twice (two flooders, one after the other).
void ExpectFloodStops(const std::string &param, long long value, const FloodStop &want,
                      long long domains_before, const std::function<void()> &while_held) {
  ScopedParam limit(param, value);
  EXPECT_TRUE(limit.ok()) << "module parameter " << param << " missing or refused " << value;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("flooder " + std::to_string(run + 1));
    const Flood f = RunBoardFlood(200, while_held);
    EXPECT_EQ(f.stopped_at, want.stopped_at) << f;
    EXPECT_EQ(ErrnoName(f.err), ErrnoName(want.err)) << f;
    EXPECT_EQ(f.rounds, want.rounds) << f;
    EXPECT_EQ(f.held, want.held) << f;
    EXPECT_EQ(f.nr_domains, domains_before + f.held)
        << "every domain held, broken or not, is counted: " << f;
    EXPECT_EQ(Counter("nr_domains"), domains_before) << "freed once the flooder is gone";
  }
}

TEST_F(LimitsTest, BoardFloodStopsAtMaxMembershipsPerContext) {
  // B holds one membership per complete round: its 9th join is one too many.
  ExpectFloodStops("max_memberships", 8, {8, 9, "B joins rank 1", ENOSPC}, before_.domains, [] {
    EXPECT_EQ(ProbeJoin(kNobody), "0") << "per context: another process of the user may join";
  });
}

TEST_F(LimitsTest, BoardFloodStopsAtMaxUserMemberships) {
  // After r rounds the user holds r memberships (B's), r + 1 once A joined: B's join in
  // round 8 would make 9.
  ExpectFloodStops("max_user_memberships", 8, {7, 8, "B joins rank 1", EDQUOT}, before_.domains,
                   [] {
                     EXPECT_EQ(ProbeJoin(kNobody), "EDQUOT") << "per user: any process of it";
                     EXPECT_EQ(ProbeJoin(kOtherUser), "0") << "another user may join";
                   });
}

TEST_F(LimitsTest, BoardFloodStopsAtMaxBoardBytesPerContext) {
  // B's memberships carry 64 KiB per round: 4 rounds fill 256 KiB; in round 5 A (whose
  // only membership is the new domain) publishes, B's first blob is over.
  ExpectFloodStops(
      "max_board_bytes", 256 * kKiB, {4, 5, "B publishes key 0", ENOSPC}, before_.domains, [] {
        EXPECT_EQ(ProbePut(kNobody), "0") << "per context: another process of the user may publish";
      });
}

TEST_F(LimitsTest, BoardFloodStopsAtMaxUserBoardBytes) {
  // Every round leaves 128 KiB of blobs alive (A's too: the broken domain is not freed
  // while B holds it): 4 rounds fill 512 KiB; A's first blob of round 5 is over.
  ExpectFloodStops("max_user_board_bytes", 512 * kKiB, {4, 5, "A publishes key 0", EDQUOT},
                   before_.domains, [] {
                     EXPECT_EQ(ProbePut(kNobody), "EDQUOT") << "per user: any process of it";
                     EXPECT_EQ(ProbePut(kOtherUser), "0") << "another user may publish";
                   });
}

TEST_F(LimitsTest, BoardFloodStopsAtMaxDomainsCountingBrokenOnes) {
  // Each round leaves one broken domain held by B; it counts until freed.
  ExpectFloodStops("max_domains", before_.domains + 4, {4, 4, "A joins rank 0", ENOSPC},
                   before_.domains,
                   [] { EXPECT_EQ(ProbeJoin(kOtherUser), "ENOSPC") << "global: every user"; });
}

TEST_F(LimitsTest, BoardFloodStopsUnderTheDefaultLimits) {
  // With the defaults the user cannot keep more than max_user_board_bytes of blobs.
  long long user_bytes = ReadParam("max_user_board_bytes");
  EXPECT_GT(user_bytes, 0) << "module parameter max_user_board_bytes missing";
  if (user_bytes <= 0) {
    user_bytes = 16 * kMiB;  // the documented default
  }
  const int cap = static_cast<int>(user_bytes / kRoundBlobBytes) + 8;
  const Flood f = RunBoardFlood(cap);
  EXPECT_NE(f.stopped_at, "") << "still going after " << cap << " rounds: " << f;
  EXPECT_TRUE(f.err == ENOSPC || f.err == EDQUOT) << f;
  EXPECT_LE(f.blob_bytes, user_bytes) << f;
  EXPECT_EQ(f.nr_domains, before_.domains + f.held) << f;
}

// cgroup2 with the memory controller, mounted and enabled if need be: a child group for
// one test, removed (and the mount undone) afterwards.  error() says why there is none.
class MemoryCgroup {
 public:
  MemoryCgroup() {
    const std::string root = "/sys/fs/cgroup";
    if (access((root + "/cgroup.controllers").c_str(), F_OK) != 0) {
      mkdir(root.c_str(), 0755);
      if (mount("cgroup2", root.c_str(), "cgroup2", 0, nullptr) != 0) {
        error_ = std::string("cannot mount cgroup2 on /sys/fs/cgroup: ") + strerror(errno);
        return;
      }
      mounted_ = root;
    }
    if (ReadLine(root + "/cgroup.controllers").find("memory") == std::string::npos) {
      error_ = "no memory controller in cgroup2";
      return;
    }
    if (ReadLine(root + "/cgroup.subtree_control").find("memory") == std::string::npos) {
      std::ofstream control(root + "/cgroup.subtree_control");
      control << "+memory" << std::endl;
      if (!control) {
        error_ = "cannot enable +memory in /sys/fs/cgroup/cgroup.subtree_control";
        return;
      }
    }
    path_ = root + "/hzc-limits-" + std::to_string(getpid());
    if (mkdir(path_.c_str(), 0755) != 0 || access((path_ + "/memory.current").c_str(), F_OK)) {
      error_ = "cannot make a memory cgroup " + path_ + ": " + strerror(errno);
      path_.clear();
    }
  }
  ~MemoryCgroup() {
    if (!path_.empty()) {
      rmdir(path_.c_str());
    }
    if (!mounted_.empty()) {
      umount(mounted_.c_str());
    }
  }
  const std::string &path() const { return path_; }
  const std::string &error() const { return error_; }

 private:
  std::string path_, mounted_, error_;
};

// Attack 2, accounting: what the flood makes the kernel allocate must be charged to the
// flooder's memory cgroup (it was GFP_USER, uncharged: 128 MiB of blobs held with the
// cgroup at 1 MiB).  Must: publishing 2 MiB of blobs grows memory.current of the caller's
// cgroup by at least 2 MiB.
TEST_F(LimitsTest, BoardBlobsAreChargedToTheCallersMemoryCgroup) {
  MemoryCgroup cgroup;
  if (cgroup.path().empty()) {
    GTEST_SKIP() << cgroup.error();
  }
  constexpr uint32_t kDomains = 16;  // 2 ranks x 16 keys x 4 KiB each: 2 MiB
  const std::string current = cgroup.path() + "/memory.current";
  UserProcess child({.uid = kNobody, .memlock = std::nullopt, .cgroup = cgroup.path()},
                    [&](Channel &channel) -> std::string {
                      const int fd = OpenDevice();
                      const std::vector<char> blob(kBlob, 'x');
                      std::vector<DomainId> ids;
                      for (uint32_t d = 0; d < kDomains; ++d) {
                        ids.push_back(NewDomainId());
                        if (Join(fd, ids[d], 0, 2) != 0 || Join(fd, ids[d], 1, 2) != 0) {
                          return "join failed";
                        }
                      }
                      const std::string before = ReadFile(current).text;
                      for (uint32_t d = 0; d < kDomains; ++d) {
                        for (uint32_t rank = 0; rank < 2; ++rank) {
                          for (uint32_t key = 0; key < HZC_BOARD_KEYS; ++key) {
                            const int err = Put(fd, ids[d], rank, key, blob.data(), kBlob);
                            if (err != 0) {
                              return Failed("publish", err);
                            }
                          }
                        }
                      }
                      const std::string after = ReadFile(current).text;
                      channel.Send(before + " " + after);
                      channel.Expect("done");
                      close(fd);
                      return "";
                    });
  const std::optional<std::string> report = child.channel().Receive();
  ASSERT_TRUE(report.has_value()) << child.Wait();
  long long before = -1, after = -1;
  std::istringstream(*report) >> before >> after;
  const long long published = 2LL * kDomains * HZC_BOARD_KEYS * kBlob;
  EXPECT_GE(after - before, published)
      << "memory.current went from " << before << " to " << after << " while " << published
      << " bytes of blobs were published";
  child.channel().Send("done");
  EXPECT_EQ(child.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// Attack 3 (issue item 6): a domain id plus the creator's uid admits to the domain, and
// the ids were the names of world-readable sysfs directories: any process of the same
// user could read the id during a rendezvous and take a free seat.
// Must: domains/<N> are decimal numbers; `id` is mode 0400, EACCES for nobody, shows the
// id to root; ranges/<id>/domains lists numbers; no file or name nobody can read under
// /sys/kernel/hzc holds a 32-hex-digit token that joins the victim's domain, so the
// victim's second rank gets its seat; a broken domain keeps its directory (state
// "broken", counted in nr_domains) until its last member has left.
TEST_F(LimitsTest, DomainIdsAreShownToRootOnly) {
  UserProcess victim(kNobody, [](Channel &channel) -> std::string {
    const int fd0 = OpenDevice(), fd1 = OpenDevice();
    const DomainId id = NewDomainId();
    Reservation res(PageSize());
    hzc_range_register reg{};
    if (fd0 < 0 || fd1 < 0 || Join(fd0, id, 0, 2) != 0 ||
        RegisterRange(fd0, res.base(), res.size(), &reg) != 0) {
      return "set-up failed";
    }
    channel.Send(std::to_string(id.lo) + " " + std::to_string(id.hi) + " " +
                 std::to_string(reg.out_id));
    if (!channel.Expect("join rank 1")) {
      return "no go for rank 1";
    }
    channel.Send(ErrnoName(Join(fd1, id, 1, 2)));
    if (!channel.Expect("leave rank 0")) {
      return "no go for leaving";
    }
    channel.Send(ErrnoName(Leave(fd0, id, 0)));
    if (!channel.Expect("leave rank 1")) {
      return "no go for leaving";
    }
    channel.Send(ErrnoName(Leave(fd1, id, 1)));
    UnregisterRange(fd0, res.base());
    close(fd0);
    close(fd1);
    return "";
  });
  const Channel &ch = victim.channel();
  const std::optional<std::string> hello = ch.Receive();
  ASSERT_TRUE(hello.has_value()) << victim.Wait();
  DomainId id{};
  uint64_t range_id = 0;
  std::istringstream(*hello) >> id.lo >> id.hi >> range_id;

  const std::string range_domains =
      std::string(kSysfsRoot) + "/ranges/" + std::to_string(range_id) + "/domains";

  // Another process of the same user looks for ids everywhere it can read and tries each
  // on the free seat.
  const std::string attack = AsUser(kNobody, [&]() -> std::string {
    const int fd = OpenDevice();
    std::string found;
    auto try_token = [&](const std::string &token, const std::string &where) {
      if (token.size() != 32 || token.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return;
      }
      const DomainId guess{std::stoull(token.substr(16), nullptr, 16),
                           std::stoull(token.substr(0, 16), nullptr, 16)};
      if (Join(fd, guess, 1, 2) == 0) {
        found += "took rank 1 of the domain named in " + where + "; ";
      }
    };
    std::vector<std::string> todo = {kSysfsRoot};
    while (!todo.empty()) {
      const std::string path = todo.back();
      todo.pop_back();
      for (const std::string &name : ListDir(path)) {
        const std::string child = path + "/" + name;
        try_token(name, child);
        struct stat s {};
        if (lstat(child.c_str(), &s) != 0) {
          continue;
        }
        if (S_ISDIR(s.st_mode)) {
          todo.push_back(child);
          continue;
        }
        const FileRead r = ReadFile(child);
        if (name == "id" && r.err != EACCES) {
          found += child + " is not EACCES for nobody (" + ErrnoName(r.err) + "); ";
        }
        std::istringstream words(r.text);
        for (std::string w; words >> w;) {
          try_token(w, child);
        }
      }
    }
    const FileRead listed = ReadFile(range_domains);
    std::istringstream words(listed.text);
    for (std::string w; words >> w;) {
      if (!IsDecimal(w)) {
        found += range_domains + " lists \"" + w + "\", not a number; ";
      }
    }
    close(fd);
    return found;
  });
  EXPECT_EQ(attack, "") << "a process of the same user found the id";

  ASSERT_TRUE(ch.Send("join rank 1"));
  EXPECT_EQ(ch.Receive(), "0") << "the victim's second rank lost its seat";

  // Root sees the domain under its number, and the id in the root-only `id` file.
  const std::string dir = FindDomainDir(id);
  ASSERT_NE(dir, "") << "no domains/<N>/id (read as root) shows " << DomainIdHex(id);
  const std::string number = dir.substr(dir.rfind('/') + 1);
  EXPECT_TRUE(IsDecimal(number)) << dir;
  struct stat st {};
  ASSERT_EQ(stat((dir + "/id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u) << dir << "/id";
  EXPECT_EQ(ReadLine(dir + "/id"), DomainIdHex(id));
  EXPECT_EQ(ReadLine(dir + "/state"), "live");
  EXPECT_EQ(ReadLine(range_domains), number);

  // A broken domain stays until its last member left.
  ASSERT_TRUE(ch.Send("leave rank 0"));
  EXPECT_EQ(ch.Receive(), "0");
  EXPECT_EQ(access(dir.c_str(), F_OK), 0) << "rank 1 still holds the broken domain";
  EXPECT_EQ(ReadLine(dir + "/state"), "broken");
  EXPECT_EQ(ReadNumber(dir + "/joined"), 1);
  EXPECT_EQ(Counter("nr_domains"), before_.domains + 1) << "a broken domain counts until freed";
  ASSERT_TRUE(ch.Send("leave rank 1"));
  EXPECT_EQ(ch.Receive(), "0");
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " outlived its last member";
  EXPECT_EQ(Counter("nr_domains"), before_.domains);
  EXPECT_EQ(victim.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// Attack 4 (issue item 8): BOARD_WAIT allocated its result buffer (nranks x blob_stride,
// up to 4 MiB, uncharged) before sleeping up to its timeout, so sleeping waiters held
// kernel memory for nothing.
// Must: 8 nobody waiters with nranks 1024 and blob_stride 4096 (4 MiB each) asleep on a
// key nobody publishes do not take their 32 MiB while they sleep (free memory drops by
// less than half of it); they end with ECONNRESET when a member leaves (or ETIMEDOUT).

// MemFree of /proc/meminfo in kB.
long long MemFreeKb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long value = -1;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemFree:") {
      return value;
    }
  }
  return -1;
}

// Is the process sleeping in ioctl() (x86-64 syscall 16)?
bool SleepingInIoctl(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string stat = ReadLine(proc + "/stat");
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.compare(paren + 2, 1, "S") == 0 &&
         ReadLine(proc + "/syscall").rfind("16 ", 0) == 0;
}

TEST_F(LimitsTest, BoardWaitAllocatesItsBufferAfterTheWait) {
  constexpr uint32_t kWaiters = 8, kRanks = 1024, kStride = 4096;
  constexpr size_t kBuffer = static_cast<size_t>(kRanks) * kStride;
  const DomainId id = NewDomainId();
  std::vector<std::unique_ptr<UserProcess>> waiters;
  for (uint32_t rank = 0; rank < kWaiters; ++rank) {
    waiters.push_back(
        std::make_unique<UserProcess>(kNobody, [id, rank](Channel &channel) -> std::string {
          const int fd = OpenDevice();
          // The result buffer stays untouched (no memory) unless the kernel writes it.
          Reservation blobs(kBuffer, PROT_READ | PROT_WRITE, MAP_NORESERVE);
          std::vector<uint32_t> lens(kRanks);
          std::vector<uint64_t> missing(kRanks / 64);
          if (fd < 0 || blobs.base() == nullptr || Join(fd, id, rank, kRanks) != 0) {
            return "set-up failed";
          }
          channel.Send("ready");
          if (!channel.Expect("go")) {
            return "no go";
          }
          hzc_board_wait arg{};
          arg.size = sizeof(arg);
          arg.domain_id[0] = id.lo;
          arg.domain_id[1] = id.hi;
          arg.rank = rank;
          arg.key = 3;
          arg.timeout_ms = 120000;
          arg.blob_stride = kStride;
          arg.blobs = reinterpret_cast<uintptr_t>(blobs.base());
          arg.blob_lens = reinterpret_cast<uintptr_t>(lens.data());
          arg.missing = reinterpret_cast<uintptr_t>(missing.data());
          const int err = Ioctl(fd, HZC_IOC_BOARD_WAIT, &arg);
          close(fd);
          return err == ECONNRESET || err == ETIMEDOUT ? "" : Failed("BOARD_WAIT", err);
        }));
  }
  for (auto &w : waiters) {
    ASSERT_TRUE(w->channel().Expect("ready")) << w->Wait();
  }
  std::this_thread::sleep_for(500ms);
  const long long free_before = MemFreeKb();
  for (auto &w : waiters) {
    w->channel().Send("go");
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  auto all_asleep = [&] {
    return std::all_of(waiters.begin(), waiters.end(),
                       [](const auto &w) { return SleepingInIoctl(w->pid()); });
  };
  while (!all_asleep() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(all_asleep()) << "the waiters did not go to sleep in BOARD_WAIT";
  std::this_thread::sleep_for(500ms);
  const long long free_asleep = MemFreeKb();
  ASSERT_TRUE(all_asleep()) << "a waiter returned early: the measurement is void";
  const long long taken_kb = free_before - free_asleep;
  std::cout << "free memory dropped by " << taken_kb << " kB while " << kWaiters
            << " waiters slept\n";
  EXPECT_LT(taken_kb, static_cast<long long>(kWaiters * kBuffer / 2 / kKiB))
      << "the sleeping waiters hold their " << kBuffer / kMiB << " MiB result buffers";

  // Another rank joins and leaves: the domain breaks and every waiter wakes.
  EXPECT_EQ(AsUser(kNobody,
                   [id]() -> std::string {
                     const int fd = OpenDevice();
                     const int err = Join(fd, id, kRanks - 1, kRanks);
                     if (err != 0) {
                       return Failed("join", err);
                     }
                     return Leave(fd, id, kRanks - 1) == 0 ? "" : "leave failed";
                   }),
            "");
  for (uint32_t rank = 0; rank < kWaiters; ++rank) {
    EXPECT_EQ(waiters[rank]->Wait(), "") << "waiter " << rank;
  }
}

// ---------------------------------------------------------------------------------------
// Attack 5 (issue, low): the dispatcher matched only the command's number, so any
// direction or size bits ran the command (`_IO(HZC_IOCTL_TYPE, 0)` ran INFO).
// Must, as nobody: a command that is not exactly _IOWR(HZC_IOCTL_TYPE, nr, struct) of a
// known nr is ENOTTY (_IO, _IOR, _IOW of every nr, an unknown nr); a size in the command
// different from @size is EINVAL; and neither writes anything back.
TEST_F(LimitsTest, IoctlDispatchMatchesTheWholeCommand) {
  const std::string outcome = AsUser(kNobody, []() -> std::string {
    const int fd = OpenDevice();
    if (fd < 0) {
      return "open failed";
    }
    const std::map<unsigned, uint32_t> sizes = {
        {HZC_CMD_INFO, sizeof(hzc_info)},
        {HZC_CMD_RANGE_REGISTER, sizeof(hzc_range_register)},
        {HZC_CMD_RANGE_UNREGISTER, sizeof(hzc_range_unregister)},
        {HZC_CMD_ACTIVATE, sizeof(hzc_activate)},
        {HZC_CMD_DEACTIVATE, sizeof(hzc_deactivate)},
        {HZC_CMD_DOMAIN_JOIN, sizeof(hzc_domain_join)},
        {HZC_CMD_DOMAIN_LEAVE, sizeof(hzc_domain_leave)},
        {HZC_CMD_BOARD_PUT, sizeof(hzc_board_put)},
        {HZC_CMD_BOARD_WAIT, sizeof(hzc_board_wait)},
        {HZC_CMD_LIST_RANGES, sizeof(hzc_list_ranges)},
        {HZC_CMD_LIST_ACTIVATIONS, sizeof(hzc_list_activations)},
    };
    std::string wrong;
    auto expect = [&](const std::string &what, unsigned long cmd, uint32_t size, int want) {
      // A zeroed struct (plus a zero tail) with @size set; INFO would fill it in.
      std::vector<uint8_t> buf(256, 0);
      std::memcpy(buf.data(), &size, sizeof(size));
      const int got = Ioctl(fd, cmd, buf.data());
      if (got != want) {
        wrong += what + ": " + ErrnoName(got) + " instead of " + ErrnoName(want) + "; ";
      } else if (std::any_of(buf.begin() + 4, buf.end(), [](uint8_t b) { return b != 0; })) {
        wrong += what + ": wrote into the struct; ";
      }
    };
    for (const auto &[nr, size] : sizes) {
      const std::string name = "nr " + std::to_string(nr);
      expect(name + " _IO", _IO(HZC_IOCTL_TYPE, nr), size, ENOTTY);
      expect(name + " _IOR", _IOC(_IOC_READ, HZC_IOCTL_TYPE, nr, size), size, ENOTTY);
      expect(name + " _IOW", _IOC(_IOC_WRITE, HZC_IOCTL_TYPE, nr, size), size, ENOTTY);
      expect(name + " _IOC_NONE with size", _IOC(_IOC_NONE, HZC_IOCTL_TYPE, nr, size), size,
             ENOTTY);
      const unsigned long rw = _IOC(_IOC_READ | _IOC_WRITE, HZC_IOCTL_TYPE, nr, size);
      expect(name + " encoded size + 8", CmdWithSize(rw, size + 8), size, EINVAL);
      expect(name + " encoded size - 4", CmdWithSize(rw, size - 4), size, EINVAL);
      expect(name + " @size + 8", rw, size + 8, EINVAL);
    }
    expect("unknown nr 0x0b", _IOWR(HZC_IOCTL_TYPE, 0x0b, struct hzc_info), sizeof(hzc_info),
           ENOTTY);
    expect("unknown nr 0x3f", _IOWR(HZC_IOCTL_TYPE, 0x3f, struct hzc_info), sizeof(hzc_info),
           ENOTTY);
    // The exact command still works.
    hzc_info info{};
    info.size = sizeof(info);
    if (Ioctl(fd, HZC_IOC_INFO, &info) != 0 || info.out_abi_version == 0) {
      wrong += "_IOWR INFO failed; ";
    }
    close(fd);
    return wrong;
  });
  EXPECT_EQ(outcome, "");
}

// ---------------------------------------------------------------------------------------
// Attack 6 (issue item 3): pins were charged to each process's own mm, so a user
// spreading activations over processes pinned RLIMIT_MEMLOCK once per process.
// Must, as nobody with RLIMIT_MEMLOCK 1 MiB: while process 1 holds 1 MiB activated,
// process 2 (same uid, its own open) gets ENOMEM for another 1 MiB, and gets it once
// process 1 has deactivated; VmPin shows each process's pins.  With max_pinned_bytes at
// 256 KiB (per user) and a large RLIMIT_MEMLOCK, 128 KiB in each process fill it and one
// more page is ENOMEM.  A process exiting with pins returns them to its user.

// A nobody process with its own open that activates, deactivates and reports on command:
// "activate <bytes>" answers the errno name, "deactivate" the errno name.
UserProcess Pinner(rlim_t memlock) {
  return UserProcess(
      {.uid = kNobody, .memlock = memlock, .cgroup = ""}, [](Channel &channel) -> std::string {
        const int fd = OpenDevice();
        Reservation res(4 * kMiB, PROT_READ | PROT_WRITE);
        if (fd < 0 || res.base() == nullptr || RegisterRange(fd, res.base(), res.size()) != 0) {
          return "set-up failed";
        }
        std::memset(res.base(), 1, res.size());
        std::vector<char *> active;
        size_t used = 0;
        for (std::optional<std::string> cmd; (cmd = channel.Receive());) {
          if (cmd->rfind("activate ", 0) == 0) {
            const size_t len = std::stoull(cmd->substr(9));
            const int err = Activate(fd, res.base() + used, len);
            if (err == 0) {
              active.push_back(res.base() + used);
              used += len;
            }
            channel.Send(ErrnoName(err));
          } else if (*cmd == "deactivate") {
            int err = 0;
            for (char *va : active) {
              err = err != 0 ? err : Deactivate(fd, va);
            }
            active.clear();
            channel.Send(ErrnoName(err));
          } else {
            break;
          }
        }
        close(fd);
        return "";
      });
}

std::string Ask(const UserProcess &p, const std::string &cmd) {
  if (!p.channel().Send(cmd)) {
    return "(gone)";
  }
  return p.channel().Receive().value_or("(no answer)");
}

TEST_F(LimitsTest, PinsAreChargedPerUserAcrossProcesses) {
  {
    UserProcess one = Pinner(kMiB), two = Pinner(kMiB);
    ASSERT_EQ(Ask(one, "activate " + std::to_string(kMiB)), "0") << "process 1, 1 MiB";
    EXPECT_EQ(ProcStatusKb(one.pid(), "VmPin"), 1024) << "process 1 shows its pins";
    EXPECT_EQ(Ask(two, "activate " + std::to_string(kMiB)), ErrnoName(ENOMEM))
        << "process 2: the user's RLIMIT_MEMLOCK is taken by process 1";
    EXPECT_EQ(ProcStatusKb(two.pid(), "VmPin"), 0);
    EXPECT_EQ(Ask(one, "deactivate"), "0");
    EXPECT_EQ(ProcStatusKb(one.pid(), "VmPin"), 0);
    EXPECT_EQ(Ask(two, "activate " + std::to_string(kMiB)), "0") << "process 2, once released";
    EXPECT_EQ(ProcStatusKb(two.pid(), "VmPin"), 1024);
    EXPECT_EQ(Ask(one, "activate " + std::to_string(PageSize())), ErrnoName(ENOMEM))
        << "process 1: now process 2 holds the limit";
    one.channel().Send("exit");
    two.channel().Send("exit");  // exits still holding its 1 MiB
    EXPECT_EQ(one.Wait(), "");
    EXPECT_EQ(two.Wait(), "");
  }
  {
    UserProcess three = Pinner(kMiB);
    EXPECT_EQ(Ask(three, "activate " + std::to_string(kMiB)), "0")
        << "the pins of an exited process are uncharged from its user";
    three.channel().Send("exit");
    EXPECT_EQ(three.Wait(), "");
  }
  {
    ScopedParam max_pinned("max_pinned_bytes", 256 * kKiB);
    ASSERT_TRUE(max_pinned.ok());
    UserProcess one = Pinner(64 * kMiB), two = Pinner(64 * kMiB);
    EXPECT_EQ(Ask(one, "activate " + std::to_string(128 * kKiB)), "0");
    EXPECT_EQ(Ask(two, "activate " + std::to_string(128 * kKiB)), "0")
        << "together exactly max_pinned_bytes";
    EXPECT_EQ(Ask(two, "activate " + std::to_string(PageSize())), ErrnoName(ENOMEM))
        << "max_pinned_bytes is per user: process 1's pins count";
    EXPECT_EQ(Ask(one, "deactivate"), "0");
    EXPECT_EQ(Ask(two, "activate " + std::to_string(PageSize())), "0");
    one.channel().Send("exit");
    two.channel().Send("exit");
    EXPECT_EQ(one.Wait(), "");
    EXPECT_EQ(two.Wait(), "");
  }
}

// ---------------------------------------------------------------------------------------
// Attack 7 (review of the fixes): max_ranges bounds one context, but a user may open any
// number of contexts. Each range is kernel memory (and a sysfs directory), and takes as
// much of the window space (2^63 bytes of mmap offsets, shared by every user) as it
// covers: 2^17 contexts of one user, each registering one PROT_NONE reservation of 64 TiB,
// left no window for anybody else.
// Must: a user's ranges in all its contexts stop at max_user_ranges, and at
// max_user_range_bytes of covered bytes (by default at most 1/1024 of the window space),
// with EDQUOT, for every process of that user and no other; closing a context returns its
// share.

// A nobody process answering "register <bytes> <n>": in each of n new contexts (files) it
// registers one range of <bytes> (one reservation for all) and answers "<ranges made>
// <errno name of the first failure, or 0>"; "close" closes its last context.
UserProcess Registrar() {
  return UserProcess(kNobody, [](Channel &channel) -> std::string {
    std::vector<int> fds;
    std::map<size_t, std::unique_ptr<Reservation>> reservations;
    for (std::optional<std::string> cmd; (cmd = channel.Receive());) {
      std::istringstream in(*cmd);
      std::string verb;
      size_t bytes = 0, n = 0;
      in >> verb >> bytes >> n;
      if (verb == "register") {
        auto &res = reservations[bytes];
        if (!res) {
          res = std::make_unique<Reservation>(bytes, PROT_NONE, MAP_NORESERVE);
        }
        if (res->base() == nullptr) {
          return "cannot reserve " + std::to_string(bytes) + " bytes";
        }
        size_t made = 0;
        int err = 0;
        for (; made < n && err == 0; made += err == 0) {
          const int fd = OpenDevice();
          if (fd < 0) {
            return Failed("open", errno);
          }
          err = RegisterRange(fd, res->base(), bytes);
          if (err == 0) {
            fds.push_back(fd);
          } else {
            close(fd);
          }
        }
        channel.Send(std::to_string(made) + " " + ErrnoName(err));
      } else if (verb == "close" && !fds.empty()) {
        close(fds.back());
        fds.pop_back();
        channel.Send("0");
      } else {
        break;
      }
    }
    for (const int fd : fds) {
      close(fd);
    }
    return "";
  });
}

// What a fresh process of `uid` gets for one more range of `bytes`: the errno name.
std::string ProbeRegister(uid_t uid, size_t bytes) {
  const std::string outcome = AsUser(uid, [bytes]() -> std::string {
    const int fd = OpenDevice();
    Reservation res(bytes, PROT_NONE, MAP_NORESERVE);
    if (fd < 0 || res.base() == nullptr) {
      return "set-up failed";
    }
    const int err = RegisterRange(fd, res.base(), bytes);
    close(fd);
    return err == 0 ? "" : ErrnoName(err);
  });
  return outcome.empty() ? "0" : outcome;
}

TEST_F(LimitsTest, RangesStopAtMaxUserRanges) {
  ScopedParam limit("max_user_ranges", 8);
  ASSERT_TRUE(limit.ok());
  const size_t page = PageSize();
  UserProcess flooder = Registrar();
  EXPECT_EQ(Ask(flooder, "register " + std::to_string(page) + " 20"), "8 EDQUOT");
  EXPECT_EQ(ProbeRegister(kNobody, page), "EDQUOT") << "per user: any process of it";
  EXPECT_EQ(ProbeRegister(kOtherUser, page), "0") << "another user may register";
  EXPECT_EQ(Ask(flooder, "close"), "0");
  EXPECT_EQ(Ask(flooder, "register " + std::to_string(page) + " 2"), "1 EDQUOT")
      << "a closed context returns its ranges";
  flooder.channel().Send("exit");
  EXPECT_EQ(flooder.Wait(), "");
}

TEST_F(LimitsTest, OneUserCannotTakeTheWindowSpace) {
  const long long max_bytes = ReadParam("max_user_range_bytes");
  ASSERT_GT(max_bytes, 0) << "module parameter max_user_range_bytes missing";
  EXPECT_LE(max_bytes, 1LL << 53) << "by default no user covers more than 1/1024 of 2^63";
  const size_t big = size_t{1} << 46;  // 64 TiB, a large part of the 47-bit address space
  const size_t most = static_cast<size_t>(max_bytes) / big;
  UserProcess flooder = Registrar();
  EXPECT_EQ(Ask(flooder, "register " + std::to_string(big) + " " + std::to_string(most + 8)),
            std::to_string(most) + " EDQUOT");
  EXPECT_EQ(ProbeRegister(kNobody, big), "EDQUOT") << "per user: any process of it";
  EXPECT_EQ(ProbeRegister(kOtherUser, big), "0") << "another user still finds a window";
  flooder.channel().Send("exit");
  EXPECT_EQ(flooder.Wait(), "");
}

// ---------------------------------------------------------------------------------------
// One person with many uids: whoever creates a user namespace may map a range of uids into
// it (a subordinate range through newuidmap) and run a process as each. Charged apart, 17
// such uids within max_user_memberships each exhausted max_domains for every other user.
// Must: the uids of a namespace share its owner's per-user limits. Here a namespace that
// root creates maps 16 uids; as 8 of them, a process joins one new domain each with
// max_user_memberships at 4: the joins past the owner's 4 are EDQUOT.
TEST_F(LimitsTest, UidsOfAUserNamespaceShareTheirOwnersLimits) {
  ScopedParam cap("max_user_memberships", 4);
  ASSERT_TRUE(cap.ok());
  int report[2], go[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    close(go[1]);
    // Inside: uid u is 100000 + u outside (the map is written by root, outside: a process in
    // a new namespace has no capability in the parent to map more than its own uid).
    int joined = 0, quota = 0, other = 0;
    char mapped = 0;
    if (unshare(CLONE_NEWUSER) != 0) {
      other = 1000 + errno;
      (void)!write(report[1], "x", 1);
    } else if (write(report[1], "u", 1) != 1 || read(go[0], &mapped, 1) != 1 || mapped != 'm') {
      other = 100;
    } else {
      std::vector<int> fds;
      for (uid_t u = 1; u <= 8; ++u) {
        if (setresuid(0, 0, 0) != 0 || setresuid(u, u, 0) != 0) {
          ++other;
          continue;
        }
        const int fd = OpenDevice();
        const int err = fd < 0 ? ENODEV : Join(fd, NewDomainId(), 0, 2);
        joined += err == 0;
        quota += err == EDQUOT;
        other += err != 0 && err != EDQUOT;
        fds.push_back(fd);
      }
    }
    const std::string line =
        std::to_string(joined) + " " + std::to_string(quota) + " " + std::to_string(other);
    (void)!write(report[1], line.data(), line.size());
    _exit(0);
  }
  close(go[0]);
  char unshared = 0;  // 'u', or 'x' when unshare failed
  if (read(report[0], &unshared, 1) == 1 && unshared == 'u') {
    const std::string path = "/proc/" + std::to_string(child) + "/uid_map";
    std::ofstream map(path);
    map << "0 100000 16\n";
    map.close();
    (void)!write(go[1], map ? "m" : "x", 1);
  }
  close(go[1]);
  close(report[1]);
  char buf[64] = {};
  const ssize_t n = read(report[0], buf, sizeof(buf) - 1);
  close(report[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  int joined = -1, quota = -1, other = -1;
  std::istringstream(buf) >> joined >> quota >> other;
  if (other > 1000) {
    GTEST_SKIP() << "unshare(CLONE_NEWUSER): " << std::strerror(other - 1000)
                 << " (no user namespaces here)";
  }
  EXPECT_EQ(other, 0) << "set-up failed (100: uid_map) or a join failed otherwise";
  EXPECT_GE(joined, 1);
  EXPECT_LE(joined, 4) << "the namespace's uids were charged apart";
  EXPECT_EQ(joined + quota, 8);
}

}  // namespace
}  // namespace hzc::ktest
