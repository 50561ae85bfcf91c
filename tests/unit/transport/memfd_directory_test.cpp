// SPDX-License-Identifier: Apache-2.0
// The memfd peer transport between real processes: this process and forked children publish
// activations backed by memfds and map each other's through pidfd_getfd; withdrawals return
// only when the peers have dropped their mappings, and dead or stopped peers do not hang them.
#include "transport/memfd_directory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "forked_child.h"
#include "hzc_test.h"
#include "transport/memfd.h"
#include "transport/memfd_layout.h"

namespace hzc::transport {
namespace {

using MemfdTransportTest = test::Test;
using test::ForkedChild;

constexpr size_t kChunk = size_t{1} << 20;

// A memfd of @len bytes sealed against shrinking (as aclrtMallocPhysical makes them), or an
// invalid descriptor.
UniqueFd SealedMemfd(size_t len) {
  UniqueFd fd(memfd_create("memfd-transport-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(len)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return UniqueFd();
  }
  return fd;
}

// A reservation of @chunks chunks with a memfd mapped over each (like aclrtMapMem), the byte
// at offset i of chunk c holding (c * 31 + i) % 251.
struct Chunks {
  UniqueMapping reservation;
  std::vector<UniqueFd> fds;

  explicit Chunks(size_t chunks) {
    reservation = UniqueMapping::Map(chunks * kChunk, PROT_NONE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
    for (size_t c = 0; c < chunks && reservation.valid(); ++c) {
      UniqueFd fd = SealedMemfd(kChunk);
      if (!fd.valid() || mmap(reservation.as<char>() + c * kChunk, kChunk, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_FIXED, fd.get(), 0) == MAP_FAILED) {
        reservation.reset();
        return;
      }
      auto *p = reservation.as<uint8_t>() + c * kChunk;
      for (size_t i = 0; i < kChunk; ++i) {
        p[i] = static_cast<uint8_t>((c * 31 + i) % 251);
      }
      fds.push_back(std::move(fd));
    }
  }
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(reservation.get()); }
  uintptr_t at(size_t chunk) const { return base() + chunk * kChunk; }
};

// Whether this process can read [p, p + 1) (a pipe write copies from it: EFAULT when not).
bool Readable(const void *p) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return false;
  }
  const bool ok = write(fds[1], p, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return ok;
}

// Publish both chunks of @m as activations of one range of this process.
::testing::AssertionResult PublishTwo(MemfdExport *e, const Chunks &m) {
  if (!m.reservation.valid()) {
    return ::testing::AssertionFailure() << "cannot make the test memory";
  }
  for (const Status &st :
       {e->AddRange(m.base(), 4 * kChunk), e->Activate(m.at(0), kChunk, m.fds[0].get(), 0, 7),
        e->Activate(m.at(1), kChunk, m.fds[1].get(), 0, 8)}) {
    if (!st.ok()) {
      return ::testing::AssertionFailure() << st.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// A directory made by hand, as a peer could make one (transport/memfd_layout.h): its maker
// keeps a writable mapping, made before the seals that keep every later one read-only.
struct ForgedDirectory {
  UniqueFd fd;
  UniqueFd mailbox_fd;
  UniqueMapping dir;
  UniqueMapping mailbox;

  bool Make() {
    fd.reset(memfd_create("hzc-directory", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    mailbox_fd.reset(memfd_create("hzc-mailbox", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd.valid() || !mailbox_fd.valid() || ftruncate(fd.get(), memfd::kDirBytes) != 0 ||
        ftruncate(mailbox_fd.get(), memfd::kMailboxBytes) != 0) {
      return false;
    }
    dir = UniqueMapping::Map(memfd::kDirBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get());
    mailbox = UniqueMapping::Map(memfd::kMailboxBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                 mailbox_fd.get());
    if (!dir.valid() || !mailbox.valid()) {
      return false;
    }
    auto *m = mailbox.as<memfd::Mailbox>();
    m->magic = memfd::kMailboxMagic;
    m->owner = static_cast<uint32_t>(getpid());
    for (memfd::DirSlot &slot : m->slots) {
      slot.dir_fd = -1;
    }
    auto *d = dir.as<memfd::Directory>();
    d->magic = memfd::kMagic;
    d->owner = static_cast<uint32_t>(getpid());
    d->mailbox_fd = mailbox_fd.get();
    return fcntl(fd.get(), F_ADD_SEALS,
                 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0 &&
           fcntl(mailbox_fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
  }
  // List @range with the one activation @a (a new generation).
  void List(const memfd::DirRange &range, const memfd::DirAct &a) {
    auto *d = dir.as<memfd::Directory>();
    std::atomic_ref<uint64_t>(d->generation).fetch_add(1);  // odd: being written
    d->ranges[0] = range;
    d->nranges = 1;
    d->acts[0] = a;
    d->nacts = 1;
    std::atomic_ref<uint64_t>(d->generation).fetch_add(1);
  }
};

// Whether pidfd_getfd works on this machine (else the transport cannot; tests skip).
bool CanTakeDescriptors(std::string *why) {
  auto e = MemfdExport::Process();
  if (!e.ok()) {
    *why = e.status().message();
    return false;
  }
  ForkedChild child([fd = (*e)->fd()](ForkedChild::Pipes) {
    Status st = MemfdImport::Process().Attach(getppid(), fd);
    return st.ok() ? 0 : st.code() == HCCL_E_SYSCALL ? 2 : 1;
  });
  const int rc = child.Wait();
  *why = "pidfd_getfd between a parent and its child is refused here";
  return rc == 0;
}

TEST_F(MemfdTransportTest, OwnProcessTranslatesItsActivations) {
  auto e = MemfdExport::Process();
  ASSERT_TRUE(e.ok()) << e.status().message();
  Chunks m(2);
  ASSERT_TRUE(PublishTwo(*e, m));
  auto &imp = MemfdImport::Process();
  auto p = imp.Translate(getpid(), m.at(1) - 8, 16);  // spans both activations
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, reinterpret_cast<void *>(m.at(1) - 8));
  auto outside = imp.Translate(getpid(), m.at(2), 16);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), HCCL_E_PARA);
  auto unattached = imp.Translate(getpid() + 1000000, m.at(0), 16);
  ASSERT_FALSE(unattached.ok());
  EXPECT_EQ(unattached.status().code(), HCCL_E_PARA);
  // Refusals: overlapping ranges and activations, a range with activations, unknown starts.
  EXPECT_EQ((*e)->AddRange(m.base() + kChunk, kChunk).code(), HCCL_E_PARA);
  EXPECT_EQ((*e)->Activate(m.at(0), kChunk, m.fds[0].get(), 0, 1).code(), HCCL_E_PARA);
  EXPECT_EQ((*e)->Activate(m.at(3), 2 * kChunk, m.fds[0].get(), 0, 1).code(), HCCL_E_PARA);
  EXPECT_EQ((*e)->RemoveRange(m.base()).code(), HCCL_E_PARA);
  EXPECT_EQ((*e)->Deactivate(m.at(0) + 4096).code(), HCCL_E_PARA);
  UniqueFd unsealed(memfd_create("memfd-transport-test", MFD_CLOEXEC));
  ASSERT_EQ(ftruncate(unsealed.get(), kChunk), 0);
  EXPECT_EQ((*e)->Activate(m.at(2), kChunk, unsealed.get(), 0, 1).code(), HCCL_E_PARA);
  auto acts = imp.Activations(getpid());
  ASSERT_TRUE(acts.ok());
  ASSERT_EQ(acts->size(), 2u);
  EXPECT_EQ((*acts)[1].cookie, 8u);
  EXPECT_TRUE((*e)->Deactivate(m.at(0)).ok());
  EXPECT_TRUE((*e)->Deactivate(m.at(1)).ok());
  EXPECT_TRUE((*e)->RemoveRange(m.base()).ok());
  EXPECT_FALSE(imp.Translate(getpid(), m.at(0), 16).ok());
}

// The child maps the parent's activations (across the chunk boundary), writes through them,
// and after the parent's Deactivate has returned cannot reach the withdrawn chunk any more.
TEST_F(MemfdTransportTest, PeerMapsAcrossChunksAndDropsOnDeactivate) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  MemfdExport *e = *MemfdExport::Process();
  Chunks m(2);
  ASSERT_TRUE(PublishTwo(e, m));
  const uintptr_t va = m.at(1) - 8;
  const uint8_t expect_lo = m.reservation.as<uint8_t>()[kChunk - 8];
  ForkedChild child([&](ForkedChild::Pipes pipes) {
    auto &imp = MemfdImport::Process();
    if (!imp.Attach(getppid(), e->fd()).ok()) {
      return 1;
    }
    auto p = imp.Translate(getppid(), va, 16);
    if (!p.ok()) {
      return 2;
    }
    auto *b = static_cast<uint8_t *>(*p);
    if (b[0] != expect_lo || b[8] != 31 % 251 || imp.MappedWindows() != 1) {
      return 3;
    }
    std::memset(b, 0xab, 16);  // visible to the parent
    ForkedChild::Write(pipes.out, 1);
    uint64_t word = 0;
    ForkedChild::Read(pipes.in, &word, 10000);  // the parent has deactivated chunk 1
    if (Readable(b + 8)) {
      return 4;  // still mapped after Deactivate returned
    }
    // Only what was withdrawn: chunk 0 stays where it was (another thread may be using it).
    if (!Readable(b) || b[0] != 0xab || imp.MappedWindows() != 1) {
      return 5;
    }
    auto again = imp.Translate(getppid(), va, 16);
    auto first = imp.Translate(getppid(), m.at(0), 16);
    if (again.ok() || again.status().code() != HCCL_E_PARA || !first.ok() ||
        static_cast<uint8_t *>(*first) + kChunk - 8 != b) {
      return 6;
    }
    imp.Detach(getppid());
    return 0;
  });
  uint64_t word = 0;
  ASSERT_TRUE(child.Receive(&word));
  EXPECT_EQ(m.reservation.as<uint8_t>()[kChunk - 8], 0xab);
  EXPECT_EQ(m.reservation.as<uint8_t>()[kChunk + 7], 0xab);
  ASSERT_TRUE(e->Deactivate(m.at(1)).ok());
  child.Send(1);
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_EQ(e->AttachedPeers(), 0u);
  EXPECT_TRUE(e->Deactivate(m.at(0)).ok());
  EXPECT_TRUE(e->RemoveRange(m.base()).ok());
}

// An owner that dies: the peer's Translate fails with HCCL_E_REMOTE instead of touching memory.
TEST_F(MemfdTransportTest, OwnerDeathIsRemoteError) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  Chunks m(2);
  ASSERT_TRUE(m.reservation.valid());
  ForkedChild child([&](ForkedChild::Pipes pipes) {
    auto e = MemfdExport::Process();  // the child's own directory
    if (!e.ok() || !PublishTwo(*e, m)) {
      return 1;
    }
    ForkedChild::Write(pipes.out, static_cast<uint64_t>((*e)->fd()));
    pause();
    return 0;
  });
  uint64_t fd = 0;
  ASSERT_TRUE(child.Receive(&fd));
  auto &imp = MemfdImport::Process();
  ASSERT_TRUE(imp.Attach(child.pid(), static_cast<int>(fd)).ok());
  auto p = imp.Translate(child.pid(), m.at(0), 2 * kChunk);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NE(*p, reinterpret_cast<void *>(m.at(0)));
  EXPECT_EQ(static_cast<uint8_t *>(*p)[kChunk + 1], (31 + 1) % 251);
  kill(child.pid(), SIGKILL);
  ASSERT_TRUE(child.WaitExited());
  auto after = imp.Translate(child.pid(), m.at(0), 16);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(imp.MappedWindows(), 0u);
  imp.Detach(child.pid());
}

// A peer that died holding mappings does not hold up a withdrawal; one that is stopped fails it
// with HCCL_E_TIMEOUT naming it, after the timeout and not later.
TEST_F(MemfdTransportTest, DeadPeerIsSkippedStoppedPeerTimesOut) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  MemfdExport *e = *MemfdExport::Process();
  Chunks m(2);
  ASSERT_TRUE(PublishTwo(e, m));
  auto peer = [&](ForkedChild::Pipes pipes) {
    auto &imp = MemfdImport::Process();
    if (!imp.Attach(getppid(), e->fd()).ok() || !imp.Translate(getppid(), m.at(0), 16).ok()) {
      return 1;
    }
    ForkedChild::Write(pipes.out, 1);
    pause();
    return 0;
  };
  ForkedChild dead(peer);
  ForkedChild stopped(peer);
  uint64_t word = 0;
  ASSERT_TRUE(dead.Receive(&word));
  ASSERT_TRUE(stopped.Receive(&word));
  kill(dead.pid(), SIGKILL);
  ASSERT_TRUE(dead.WaitExited());
  kill(stopped.pid(), SIGSTOP);
  siginfo_t info{};  // stopped for real before the withdrawal starts
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(stopped.pid()), &info, WSTOPPED | WNOWAIT), 0);
  e->set_revoke_timeout(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  Status st = e->Deactivate(m.at(1));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(st.message(), ::testing::HasSubstr(std::to_string(stopped.pid())));
  EXPECT_THAT(st.message(), ::testing::Not(::testing::HasSubstr(std::to_string(dead.pid()))));
  EXPECT_LT(took, std::chrono::seconds(3));
  // Once it runs again its watcher answers.
  kill(stopped.pid(), SIGCONT);
  e->set_revoke_timeout(std::chrono::milliseconds(10000));
  EXPECT_TRUE(e->Deactivate(m.at(0)).ok());
  kill(stopped.pid(), SIGKILL);
  ASSERT_TRUE(stopped.WaitExited());
  EXPECT_TRUE(e->RemoveRange(m.base()).ok());
  EXPECT_EQ(e->AttachedPeers(), 0u);
}

// What a peer's directory says is the peer's word. An owner that lists what it could not have
// published (an activation past the end of its range, as a 68 KiB one in a 4 KiB range that
// would be mapped over the importer's own pages; unaligned, wrapping, outside every range, or
// backed by anything but a memfd sealed against shrinking that holds it) gets HCCL_E_REMOTE
// naming the entry, and the importer maps nothing. The honest listing maps.
TEST_F(MemfdTransportTest, CraftedListingIsRemoteErrorNeverMapped) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  constexpr uint64_t kVa = uint64_t{1} << 40;
  // The child's descriptors a crafted entry may name.
  struct Fds {
    int pipe = -1;
    int unsealed = -1;
    int short_one = -1;
  };
  struct Craft {
    std::function<void(memfd::DirAct &, const Fds &)> patch;
    std::string says;
  };
  const std::vector<Craft> crafts = {
      {[&](memfd::DirAct &a, const Fds &) { a.size = 17 * page; }, "runs past the end of range"},
      {[&](memfd::DirAct &a, const Fds &) { a.va += 8; }, "empty, unaligned or wrapping"},
      {[&](memfd::DirAct &a, const Fds &) { a.size = 0; }, "empty, unaligned or wrapping"},
      {[&](memfd::DirAct &a, const Fds &) { a.va = UINT64_MAX - page + 1, a.size = 2 * page; },
       "empty, unaligned or wrapping"},
      {[&](memfd::DirAct &a, const Fds &) { a.offset = 8; }, "memfd offset 0x8"},
      {[&](memfd::DirAct &a, const Fds &) { a.offset = INT64_MAX & ~(page - 1); }, "memfd offset"},
      // A size past off_t's range must not wrap the end of the file it claims.
      {[&](memfd::DirAct &a, const Fds &) { a.size = (uint64_t{1} << 63) + page; }, "memfd offset"},
      {[&](memfd::DirAct &a, const Fds &) { a.va += page; }, "outside its ranges"},
      {[&](memfd::DirAct &a, const Fds &) { a.fd = -1; }, "with descriptor -1"},
      {[&](memfd::DirAct &a, const Fds &f) { a.fd = f.pipe; }, "not a regular file"},
      {[&](memfd::DirAct &a, const Fds &f) { a.fd = f.unsealed; },
       "not a memfd sealed against shrinking"},
      {[&](memfd::DirAct &a, const Fds &f) { a.fd = f.short_one, a.offset = page; },
       fmt::format("its memfd holds {:#x} bytes", page)},
  };
  ForkedChild owner([&](ForkedChild::Pipes pipes) {
    ForgedDirectory forged;
    UniqueFd big = SealedMemfd(17 * page);  // room for the 68 KiB it will claim
    UniqueFd short_one = SealedMemfd(page);
    UniqueFd unsealed(memfd_create("memfd-transport-test", MFD_CLOEXEC));
    int pipe_fds[2] = {-1, -1};
    const uint8_t mark = 0x5a;
    if (!forged.Make() || !big.valid() || !short_one.valid() || !unsealed.valid() ||
        ftruncate(unsealed.get(), static_cast<off_t>(17 * page)) != 0 || pipe(pipe_fds) != 0 ||
        pwrite(big.get(), &mark, 1, 0) != 1) {
      return 1;
    }
    const memfd::DirRange range{.base = kVa, .size = page};
    const memfd::DirAct honest{
        .va = kVa, .size = page, .cookie = 1, .offset = 0, .fd = big.get(), .serial = 1};
    const Fds fds{.pipe = pipe_fds[0], .unsealed = unsealed.get(), .short_one = short_one.get()};
    forged.List(range, honest);
    ForkedChild::Write(pipes.out, static_cast<uint64_t>(forged.fd.get()));
    for (uint64_t i = 0; ForkedChild::Read(pipes.in, &i, 10000);) {
      memfd::DirAct a = honest;
      if (i < crafts.size()) {
        crafts[i].patch(a, fds);
      }
      forged.List(range, a);
      ForkedChild::Write(pipes.out, i);
    }
    return 0;
  });
  uint64_t word = 0;
  ASSERT_TRUE(owner.Receive(&word));
  auto &imp = MemfdImport::Process();
  ASSERT_TRUE(imp.Attach(owner.pid(), static_cast<int>(word)).ok());
  const std::string pid = std::to_string(owner.pid());
  for (size_t i = 0; i < crafts.size(); ++i) {
    SCOPED_TRACE(crafts[i].says);
    ASSERT_TRUE(owner.Send(i) && owner.Receive(&word));
    auto p = imp.Translate(owner.pid(), kVa, 16);
    ASSERT_FALSE(p.ok()) << "mapped at " << *p;
    EXPECT_EQ(p.status().code(), HCCL_E_REMOTE);
    EXPECT_THAT(p.status().message(), ::testing::HasSubstr(crafts[i].says));
    EXPECT_THAT(p.status().message(), ::testing::HasSubstr("pid " + pid));
    EXPECT_EQ(imp.MappedWindows(), 0u);
  }
  // Through a communicator's peer memory the error names the rank.
  ASSERT_TRUE(owner.Send(0) && owner.Receive(&word));
  MemfdPeerMemory peers(0, {static_cast<uint32_t>(getpid()), static_cast<uint32_t>(owner.pid())});
  auto named = peers.Translate(1, kVa, 16);
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(named.status().message(),
              ::testing::HasSubstr("rank 1 (pid " + pid + ") lists activation"));
  EXPECT_EQ(peers.Activations(1).status().code(), HCCL_E_REMOTE);
  // The honest listing again.
  ASSERT_TRUE(owner.Send(crafts.size()) && owner.Receive(&word));
  auto p = imp.Translate(owner.pid(), kVa, 16);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*static_cast<uint8_t *>(*p), 0x5a);
  imp.Detach(owner.pid());
}

// Windows and mapped directories are not inherited across fork (the kernel transport's windows
// are VM_DONTCOPY): a child of the importer cannot reach the owner's memory through its parent's
// window, so no withdrawal can miss it. It attaches afresh and maps windows of its own.
TEST_F(MemfdTransportTest, ForkedChildOfImporterInheritsNoWindow) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  MemfdExport *e = *MemfdExport::Process();
  Chunks m(2);
  ASSERT_TRUE(PublishTwo(e, m));
  const pid_t owner = getpid();
  ForkedChild importer([&](ForkedChild::Pipes) {
    auto &imp = MemfdImport::Process();
    if (!imp.Attach(owner, e->fd()).ok()) {
      return 1;
    }
    auto p = imp.Translate(owner, m.at(0), 16);
    if (!p.ok() || !Readable(*p)) {
      return 2;
    }
    ForkedChild grandchild([&](ForkedChild::Pipes) {
      if (Readable(*p)) {
        return 3;  // the parent's window came along
      }
      auto &mine = MemfdImport::Process();
      if (!mine.Attach(owner, e->fd()).ok()) {
        return 4;
      }
      auto q = mine.Translate(owner, m.at(1), 16);
      if (!q.ok() || static_cast<uint8_t *>(*q)[0] != 31 % 251) {
        return 5;
      }
      mine.Detach(owner);
      return 0;
    });
    const int rc = grandchild.Wait();
    imp.Detach(owner);
    return rc;
  });
  EXPECT_EQ(importer.Wait(), 0);
  EXPECT_TRUE(e->Deactivate(m.at(0)).ok());
  EXPECT_EQ(e->AttachedPeers(), 0u);  // both detached (and the dead are freed by a withdrawal)
  EXPECT_TRUE(e->Deactivate(m.at(1)).ok());
  EXPECT_TRUE(e->RemoveRange(m.base()).ok());
}

// A rank is the process that held its pid when the ranks arrived (its card, a pidfd), not
// whichever holds the pid later: under a card whose process has exited no other process's
// memory is reached, attached already or not. Connect adopts the cards it is given and names a
// rank that is gone already when it has to open one itself.
TEST_F(MemfdTransportTest, RankIsItsCardNotItsPid) {
  std::string why;
  if (!CanTakeDescriptors(&why)) {
    GTEST_SKIP() << why;
  }
  Chunks m(2);
  ASSERT_TRUE(m.reservation.valid());
  ForkedChild live([&](ForkedChild::Pipes pipes) {
    auto e = MemfdExport::Process();
    if (!e.ok() || !PublishTwo(*e, m)) {
      return 1;
    }
    ForkedChild::Write(pipes.out, 1);
    pause();
    return 0;
  });
  ForkedChild gone([](ForkedChild::Pipes) { return 0; });
  uint64_t word = 0;
  ASSERT_TRUE(live.Receive(&word));
  ASSERT_TRUE(gone.WaitExited());
  auto gone_card = bootstrap::PeerProcess::Open(gone.pid());  // a zombie's: it has exited
  ASSERT_TRUE(gone_card.ok()) << gone_card.status().message();
  const auto gone_pid = static_cast<uint32_t>(gone.pid());
  ASSERT_EQ(gone.Wait(), 0);
  const std::vector<uint32_t> pids = {static_cast<uint32_t>(getpid()),
                                      static_cast<uint32_t>(live.pid())};
  auto cards = [](Expected<bootstrap::PeerProcess> card) {
    std::vector<bootstrap::PeerProcess> v(2);
    v[1] = std::move(*card);
    return v;
  };
  // The live process stands where the card's process was (as if it had taken its pid).
  MemfdPeerMemory stale(0, pids, cards(std::move(gone_card)));
  auto p = stale.Translate(1, m.at(0), 16);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(p.status().message(), ::testing::HasSubstr("has exited"));
  EXPECT_EQ(MemfdImport::Process().MappedWindows(), 0u);
  MemfdPeerMemory right(0, pids, cards(bootstrap::PeerProcess::Open(live.pid())));
  auto q = right.Translate(1, m.at(1), 16);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(static_cast<uint8_t *>(*q)[0], 31 % 251);
  // Attached now, and still not through the stale card.
  EXPECT_EQ(stale.Translate(1, m.at(0), 16).status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(stale.Activations(1).status().code(), HCCL_E_REMOTE);
  EXPECT_TRUE(right.Translate(1, m.at(0), 16).ok());
  MemfdTransport transport;
  auto link = transport.Connect({.rank = 0, .pids = {pids[0], gone_pid}});
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(link.status().message(), fmt::format("rank 1 (pid {}) has exited", gone_pid));

  // A card held since the ranks arrived is the rank even if its process has exited since (it
  // may have linked and left before this rank linked): the link is made, and the first use of
  // that rank's memory names it.
  ForkedChild left([](ForkedChild::Pipes) { return 0; });
  ASSERT_TRUE(left.WaitExited());
  std::vector<bootstrap::PeerProcess> held(2);
  auto left_card = bootstrap::PeerProcess::Open(left.pid());
  ASSERT_TRUE(left_card.ok()) << left_card.status().message();
  held[1] = std::move(*left_card);
  const auto left_pid = static_cast<uint32_t>(left.pid());
  ASSERT_EQ(left.Wait(), 0);  // reaped: only the card still names it
  auto linked = transport.Connect(
      {.rank = 0, .pids = {pids[0], left_pid}, .processes = std::move(held), .timeout = {}});
  ASSERT_TRUE(linked.ok()) << linked.status().message();
  auto gone_memory = (*linked)->peers().Translate(1, m.at(0), 16);
  ASSERT_FALSE(gone_memory.ok());
  EXPECT_EQ(gone_memory.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(gone_memory.status().message(), ::testing::HasSubstr("has exited"));
  MemfdImport::Process().Detach(live.pid());
}

// Only its owner writes a directory: no descriptor of it maps writable or writes, not even the
// owner's own (peers take that one), so what a peer lists is what the peer wrote.
TEST_F(MemfdTransportTest, DirectoryIsWrittenByItsOwnerOnly) {
  auto e = MemfdExport::Process();
  ASSERT_TRUE(e.ok()) << e.status().message();
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void *w = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, (*e)->fd(), 0);
  EXPECT_EQ(w, MAP_FAILED) << "a writable mapping of the directory";
  if (w != MAP_FAILED) {
    munmap(w, page);
  }
  const uint64_t junk = ~uint64_t{0};
  EXPECT_EQ(pwrite((*e)->fd(), &junk, sizeof(junk), 8), -1);  // over its generation
  auto r = UniqueMapping::Map(page, PROT_READ, MAP_SHARED, (*e)->fd());
  ASSERT_TRUE(r.valid());
  EXPECT_EQ(mprotect(r.get(), page, PROT_READ | PROT_WRITE), -1);
  EXPECT_EQ(r.as<memfd::Directory>()->generation, (*e)->generation());
}

}  // namespace
}  // namespace hzc::transport
