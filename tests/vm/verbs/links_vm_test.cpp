// SPDX-License-Identifier: Apache-2.0
// RDMA links through the kernel domain board, on soft-RoCE in the guest: N ranks as forked
// processes set up RC links, RDMA-WRITE a pattern into every peer's activated memory and
// RDMA-READ it back; missing, failing and killed ranks; no leaked verbs objects.
#include <fmt/format.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "hzc_test.h"
#include "verbs/links.h"
#include "verbs/port.h"
#include "verbs_test_util.h"

namespace hzc::verbs {
namespace {

using std::chrono::seconds;
using test::ActivatedBuffer;
using test::AllRanks;
using test::Member;
using test::RunMembers;
using test::RunRanks;

// Board keys of the tests (link setup uses 1 and 2).
constexpr uint32_t kBufferKey = 3;
constexpr uint32_t kWrittenKey = 4;
constexpr uint32_t kDoneKey = 5;

// What a rank publishes about its buffer.
struct BufferBlob {
  RemoteBuffer remote;
  uint32_t pid = 0;
  uint32_t reserved = 0;
};

uint8_t Pattern(uint32_t writer, uint32_t target, size_t i) {
  return static_cast<uint8_t>(writer * 131 + target * 31 + i * 7 + (i >> 9));
}

LinkOptions TestOptions(seconds timeout) {
  LinkOptions options;
  options.timeout = timeout;
  return options;
}

std::string Describe(const Status &st) {
  return fmt::format("code {}: {}", static_cast<int>(st.code()), st.message());
}

// Publish own buffer under kBufferKey and read every rank's back.
Expected<std::vector<BufferBlob>> ExchangeBuffers(const Board &board, const MemoryRegion &mr) {
  BufferBlob mine{.remote = mr.remote(), .pid = static_cast<uint32_t>(getpid())};
  HZC_RETURN_IF_ERROR(board.Put(kBufferKey, Bytes(mine)));
  auto blobs = board.Wait(kBufferKey, sizeof(BufferBlob),
                          std::chrono::steady_clock::now() + seconds(60), "buffers");
  if (!blobs.ok()) {
    return blobs.status();
  }
  std::vector<BufferBlob> all(board.nranks());
  for (uint32_t r = 0; r < board.nranks(); ++r) {
    if (blobs->blob(r).size() != sizeof(BufferBlob)) {
      return Error(HCCL_E_INTERNAL, "rank {} published a {}-byte buffer blob", r,
                   blobs->blob(r).size());
    }
    std::memcpy(&all[r], blobs->blob(r).data(), sizeof(BufferBlob));
  }
  return all;
}

Status Barrier(const Board &board, uint32_t key) {
  const uint32_t one = 1;
  HZC_RETURN_IF_ERROR(board.Put(key, Bytes(one)));
  auto st = board.Wait(key, sizeof(one), std::chrono::steady_clock::now() + seconds(60), "barrier");
  return st.ok() ? Status::Ok() : st.status();
}

class VerbsVmTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    if (access("/dev/hzc", F_OK) != 0) {
      GTEST_SKIP() << "/dev/hzc is absent: hzc.ko is not loaded";
    }
    if (!hzc::test::HaveRdmaDevice()) {
      GTEST_SKIP() << "no RDMA device (/sys/class/infiniband is empty): soft-RoCE is not set up";
    }
  }
};

// Every rank writes a pattern into its slot of every peer's activated buffer, checks what
// the peers wrote into its own buffer, and reads its slots back from every peer.
std::string DataRank(const Member &member, size_t slot) {
  const uint32_t rank = member.rank();
  const uint32_t nranks = member.nranks();
  auto links = member.Establish(TestOptions(seconds(60)));
  if (!links.ok()) {
    return "establish: " + Describe(links.status());
  }
  if (!*links) {
    return "establish: kernel-only links although rxe0 is present";
  }
  Links &l = **links;
  // inbox: slot r receives rank r's writes; out: the patterns this rank writes; back: reads.
  ActivatedBuffer buf(member.fd(), 3 * nranks * slot);
  if (!buf.error().empty()) {
    return buf.error();
  }
  uint8_t *inbox = buf.data();
  uint8_t *out = inbox + nranks * slot;
  uint8_t *back = out + nranks * slot;
  auto mr = l.Register(buf.data(), buf.length());
  if (!mr.ok()) {
    return "register: " + Describe(mr.status());
  }
  auto peers = ExchangeBuffers(member.board(), **mr);
  if (!peers.ok()) {
    return "exchange: " + Describe(peers.status());
  }
  std::vector<WorkRequest> writes;
  for (uint32_t p = 0; p < nranks; ++p) {
    if (p == rank) {
      continue;
    }
    for (size_t i = 0; i < slot; ++i) {
      out[p * slot + i] = Pattern(rank, p, i);
    }
    // The last peer gets an odd length, so not every transfer is whole pages.
    const size_t len = p == nranks - 1 || (rank == nranks - 1 && p == nranks - 2) ? slot - 3 : slot;
    writes.push_back({.op = WorkRequest::kWrite,
                      .peer = p,
                      .mr = mr->get(),
                      .local = out + p * slot,
                      .length = len,
                      .remote_addr = (*peers)[p].remote.addr + rank * slot,
                      .rkey = (*peers)[p].remote.rkey});
  }
  if (Status st = l.Execute(writes); !st.ok()) {
    return "rdma write: " + Describe(st);
  }
  if (Status st = Barrier(member.board(), kWrittenKey); !st.ok()) {
    return "barrier: " + Describe(st);
  }
  for (uint32_t p = 0; p < nranks; ++p) {
    const size_t len =
        rank == nranks - 1 || (p == nranks - 1 && rank == nranks - 2) ? slot - 3 : slot;
    for (size_t i = 0; p != rank && i < len; ++i) {
      if (inbox[p * slot + i] != Pattern(p, rank, i)) {
        return fmt::format("byte {} written by rank {} is {:#x}, expected {:#x}", i, p,
                           inbox[p * slot + i], Pattern(p, rank, i));
      }
    }
  }
  for (const WorkRequest &w : writes) {
    const uint32_t p = w.peer;
    if (Status st = l.Read(p, **mr, back + p * slot, w.length, w.remote_addr, w.rkey); !st.ok()) {
      return "rdma read: " + Describe(st);
    }
    if (std::memcmp(back + p * slot, out + p * slot, w.length) != 0) {
      return fmt::format("read back from rank {} differs from what was written", p);
    }
  }
  // Nobody tears down while a peer may still read from it.
  if (Status st = Barrier(member.board(), kDoneKey); !st.ok()) {
    return "final barrier: " + Describe(st);
  }
  return "";
}

void RunDataTest(uint32_t nranks) {
  const auto results = RunMembers(
      AllRanks(nranks), nranks, [](const Member &member) { return DataRank(member, 64 * 1024); },
      seconds(240));
  for (uint32_t r = 0; r < nranks; ++r) {
    EXPECT_EQ(results[r], "") << "rank " << r;
  }
}

TEST_F(VerbsVmTest, TwoRanksWriteAndReadBack) {
  RunDataTest(2);
}

TEST_F(VerbsVmTest, FourRanksWriteAndReadBack) {
  RunDataTest(4);
}

TEST_F(VerbsVmTest, EightRanksWriteAndReadBack) {
  RunDataTest(8);
}

// The rdma tool sees this process's objects while links exist and none once they are gone;
// the other tests rely on this to show that nothing leaks.
TEST_F(VerbsVmTest, ResourceCountSeesOwnObjects) {
  const auto results = RunMembers(
      {0}, 1,
      [&](const Member &member) -> std::string {
        {
          auto links = member.Establish(TestOptions(seconds(10)));
          if (!links.ok() || !*links) {
            return "establish: " + Describe(links.status());
          }
          std::vector<uint8_t> mem(1 << 16);
          auto mr = (*links)->Register(mem.data(), mem.size());
          if (!mr.ok()) {
            return "register: " + Describe(mr.status());
          }
          for (const char *kind : {"cq", "pd", "mr"}) {
            if (test::RdmaResources(kind, getpid()) < 1) {
              return fmt::format("rdma resource show {} does not list this process's object", kind);
            }
          }
        }
        return test::NoLeftovers("after teardown");
      },
      seconds(60));
  EXPECT_EQ(results[0], "");
}

// Rank 2 of 3 never shows up: the others fail with HCCL_E_TIMEOUT naming it, and hold no
// QP, CQ, PD or MR afterwards.
TEST_F(VerbsVmTest, MissingRankTimesOutWithoutLeaks) {
  const auto results = RunMembers(
      {0, 1}, 3,
      [&](const Member &member) -> std::string {
        const auto start = std::chrono::steady_clock::now();
        auto links = member.Establish(TestOptions(seconds(3)));
        const auto took = std::chrono::steady_clock::now() - start;
        if (links.ok()) {
          return "establish succeeded without rank 2";
        }
        if (links.status().code() != HCCL_E_TIMEOUT) {
          return "expected HCCL_E_TIMEOUT, got " + Describe(links.status());
        }
        if (links.status().message().find("rank(s) 2 of 3") == std::string::npos) {
          return "message does not name rank 2: " + links.status().message();
        }
        if (took > seconds(20)) {
          return fmt::format("took {} s for a 3 s timeout",
                             std::chrono::duration_cast<seconds>(took).count());
        }
        return test::NoLeftovers("after the failed setup");
      },
      seconds(90));
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1], "");
}

// A named device that does not exist is HCCL_E_NOT_FOUND (through the configuration, as
// HZC_RDMA_DEVICE reaches it); the peer learns at once that the rank failed.
TEST_F(VerbsVmTest, WrongDeviceIsNotFound) {
  const auto results = RunMembers(
      {0, 1}, 2,
      [&](const Member &member) -> std::string {
        const uint32_t rank = member.rank();
        LinkOptions options = TestOptions(seconds(60));
        if (rank == 0) {
          const Config config = Config::FromLookup([](const char *name) -> const char * {
            return std::string(name) == "HZC_RDMA_DEVICE" ? "nosuch0" : nullptr;
          });
          options = LinkOptions::FromConfig(config);
          options.timeout = seconds(60);
        }
        const auto start = std::chrono::steady_clock::now();
        auto links = member.Establish(options);
        const auto took = std::chrono::steady_clock::now() - start;
        if (links.ok()) {
          return "establish succeeded";
        }
        const Status &st = links.status();
        if (rank == 0 &&
            (st.code() != HCCL_E_NOT_FOUND || st.message().find("nosuch0") == std::string::npos)) {
          return "expected HCCL_E_NOT_FOUND naming nosuch0, got " + Describe(st);
        }
        if (rank == 1 && (st.code() != HCCL_E_ROCE_CONNECT ||
                          st.message().find("rank(s) 0 ") == std::string::npos)) {
          return "expected HCCL_E_ROCE_CONNECT naming rank 0, got " + Describe(st);
        }
        if (took > seconds(30)) {
          return "the failure waited for the timeout";
        }
        return test::NoLeftovers("after the failed setup");
      },
      seconds(120));
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1], "");
}

TEST_F(VerbsVmTest, WrongPortAndGidAreNotFound) {
  const auto results = RunRanks(
      {0},
      [](uint32_t) -> std::string {
        // The first device with an active port, to name a wrong port and GID of it.
        auto any = OpenPort({}, std::nullopt);
        if (!any.ok() || !*any) {
          return "no active port found";
        }
        const std::string dev = (*any)->device;
        auto port = OpenPort({.name = dev, .port = 9}, std::nullopt);
        if (port.ok() || port.status().code() != HCCL_E_NOT_FOUND) {
          return "port 9: expected HCCL_E_NOT_FOUND";
        }
        auto gid = OpenPort({.name = dev, .port = 0}, 4000);
        if (gid.ok() || gid.status().code() != HCCL_E_NOT_FOUND ||
            gid.status().message().find("HZC_RDMA_GID_INDEX=4000") == std::string::npos) {
          return "gid 4000: expected HCCL_E_NOT_FOUND, got " +
                 (gid.ok() ? std::string("success") : Describe(gid.status()));
        }
        auto same = OpenPort({.name = dev, .port = (*any)->port_num}, (*any)->gid_index);
        if (!same.ok() || !*same || (*same)->gid_index != (*any)->gid_index) {
          return "naming the chosen port and gid index explicitly failed";
        }
        return "";
      },
      seconds(60));
  EXPECT_EQ(results[0], "");
}

// Rank 1 of 3 dies after the links are up: rank 0's next transfer to it fails with
// HCCL_E_ROCE_TRANSFER (not a hang), later ones fail at once, rank 2 is still reachable,
// and tearing down does not wait for the dead peer.
TEST_F(VerbsVmTest, KilledPeerFailsTransfers) {
  int done[2];
  ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
  const auto results = RunMembers(
      AllRanks(3), 3,
      [&](const Member &member) -> std::string {
        const uint32_t rank = member.rank();
        auto links = member.Establish(TestOptions(seconds(60)));
        if (!links.ok() || !*links) {
          return "establish: " +
                 (links.ok() ? std::string("kernel-only") : Describe(links.status()));
        }
        std::vector<uint8_t> mem(1 << 16, static_cast<uint8_t>(rank + 1));
        auto mr = (*links)->Register(mem.data(), mem.size());
        if (!mr.ok()) {
          return "register: " + Describe(mr.status());
        }
        auto peers = ExchangeBuffers(member.board(), **mr);
        if (!peers.ok()) {
          return "exchange: " + Describe(peers.status());
        }
        if (rank == 1) {
          raise(SIGKILL);
        }
        if (rank == 2) {
          // Stay alive (memory registered) until rank 0 is done with it.
          char c;
          close(done[1]);
          return read(done[0], &c, 1) == 1 ? "" : "rank 0 did not report";
        }
        close(done[0]);
        // Wait until rank 1 is dead and its files (and so its queue pairs) are closed.
        const std::string stat = fmt::format("/proc/{}/stat", (*peers)[1].pid);
        for (int i = 0; i < 600; ++i) {
          std::string line;
          FILE *f = fopen(stat.c_str(), "r");
          if (f == nullptr) {
            break;
          }
          char buf[512] = {};
          const bool zombie =
              fgets(buf, sizeof(buf), f) != nullptr && std::strstr(buf, ") Z ") != nullptr;
          fclose(f);
          if (zombie) {
            break;
          }
          usleep(100 * 1000);
        }
        Links &l = **links;
        const auto start = std::chrono::steady_clock::now();
        Status st =
            l.Write(1, **mr, mem.data(), 4096, (*peers)[1].remote.addr, (*peers)[1].remote.rkey);
        const auto took = std::chrono::steady_clock::now() - start;
        if (st.ok() || st.code() != HCCL_E_ROCE_TRANSFER) {
          return "write to the dead rank: expected HCCL_E_ROCE_TRANSFER, got " +
                 (st.ok() ? std::string("success") : Describe(st));
        }
        if (took > seconds(30)) {
          return "the failure took longer than 30 s";
        }
        fprintf(stderr, "rank 0: write to the dead rank failed after %lld ms: %s\n",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                st.message().c_str());
        st = l.Read(1, **mr, mem.data(), 4096, (*peers)[1].remote.addr, (*peers)[1].remote.rkey);
        if (st.code() != HCCL_E_ROCE_TRANSFER || l.broken(1).empty()) {
          return "second transfer: expected the link to stay broken, got " + Describe(st);
        }
        st = l.Read(2, **mr, mem.data(), 4096, (*peers)[2].remote.addr, (*peers)[2].remote.rkey);
        if (!st.ok() || mem[0] != 3 || mem[4095] != 3) {
          return "rank 2 is no longer reachable: " + Describe(st);
        }
        ssize_t unused = write(done[1], "x", 1);
        (void)unused;
        return "";
      },
      seconds(180));
  close(done[0]);
  close(done[1]);
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1], "killed by signal 9");
  EXPECT_EQ(results[2], "");
}

// Registration under a small RLIMIT_MEMLOCK without CAP_IPC_LOCK: HCCL_E_MEMORY with a hint.
TEST_F(VerbsVmTest, MemlockLimitIsMemoryError) {
  const auto results = RunMembers(
      {0}, 1,
      [&](const Member &member) -> std::string {
        auto links = member.Establish(TestOptions(seconds(10)));
        if (!links.ok() || !*links) {
          return "establish failed";
        }
        // Drop CAP_IPC_LOCK from the effective set (it exempts from the limit).
        __user_cap_header_struct hdr{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        __user_cap_data_struct data[2] = {};
        if (syscall(SYS_capget, &hdr, data) != 0) {
          return "capget: " + ErrnoString(errno);
        }
        data[CAP_IPC_LOCK / 32].effective &= ~(1U << (CAP_IPC_LOCK % 32));
        if (syscall(SYS_capset, &hdr, data) != 0) {
          return "capset: " + ErrnoString(errno);
        }
        rlimit lim{.rlim_cur = 64 * 1024, .rlim_max = 64 * 1024};
        if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
          return "setrlimit: " + ErrnoString(errno);
        }
        std::vector<uint8_t> mem(4 << 20);
        auto mr = (*links)->Register(mem.data(), mem.size());
        if (mr.ok()) {
          return "registering 4 MiB under a 64 KiB RLIMIT_MEMLOCK succeeded";
        }
        if (mr.status().code() != HCCL_E_MEMORY ||
            mr.status().message().find("RLIMIT_MEMLOCK is 64 KiB") == std::string::npos) {
          return "expected HCCL_E_MEMORY with the limit, got " + Describe(mr.status());
        }
        return "";
      },
      seconds(60));
  EXPECT_EQ(results[0], "");
}

// Requests that are wrong on this side are HCCL_E_PARA and post nothing.
TEST_F(VerbsVmTest, BadRequestsAreRejected) {
  const auto results = RunMembers(
      AllRanks(2), 2,
      [&](const Member &member) -> std::string {
        const uint32_t rank = member.rank();
        auto links = member.Establish(TestOptions(seconds(60)));
        if (!links.ok() || !*links) {
          return "establish failed";
        }
        Links &l = **links;
        std::vector<uint8_t> mem(8192);
        auto mr = l.Register(mem.data(), 4096);
        if (!mr.ok()) {
          return "register: " + Describe(mr.status());
        }
        const uint32_t peer = 1 - rank;
        const std::vector<std::pair<std::string, Status>> cases = {
            {"self", l.Write(rank, **mr, mem.data(), 16, 0, 0)},
            {"rank out of range", l.Write(7, **mr, mem.data(), 16, 0, 0)},
            {"local past the registration", l.Write(peer, **mr, mem.data() + 4000, 200, 0, 0)},
            {"local before the registration", l.Read(peer, **mr, mem.data() - 1, 2, 0, 0)},
        };
        for (const auto &[what, st] : cases) {
          if (st.code() != HCCL_E_PARA) {
            return what + ": expected HCCL_E_PARA, got " + Describe(st);
          }
          if (!l.broken(peer).empty()) {
            return what + ": broke the link";
          }
        }
        if (auto bad = l.Register(nullptr, 4096); bad.ok() || bad.status().code() != HCCL_E_PARA) {
          return "registering NULL: expected HCCL_E_PARA";
        }
        // A bad rkey is the peer's to refuse: HCCL_E_ROCE_TRANSFER.
        Status st = l.Write(peer, **mr, mem.data(), 16, 0x1000, 0xdead);
        if (st.code() != HCCL_E_ROCE_TRANSFER) {
          return "bad rkey: expected HCCL_E_ROCE_TRANSFER, got " + Describe(st);
        }
        return "";
      },
      seconds(120));
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1], "");
}

// Connect @a (rank @ra) and @b (rank @rb), links of one process.
Status Pair(Links &a, uint32_t ra, Links &b, uint32_t rb) {
  auto qa = a.AddPeer(rb);
  auto qb = b.AddPeer(ra);
  if (!qa.ok() || !qb.ok()) {
    return qa.ok() ? qb.status() : qa.status();
  }
  HZC_RETURN_IF_ERROR(a.ConnectPeer(rb, b.Header(), *qb));
  return b.ConnectPeer(ra, a.Header(), *qa);
}

// Links between servers keep each peer in a protection domain of its own (domain_per_peer):
// memory registered for rank 2 is read by rank 2 with its key, and the same key on rank 1's
// queue pair is refused by the device (rank 1 reads nothing). With one domain for all, the same
// read goes through: the test can tell the two apart.
TEST_F(VerbsVmTest, APeerCannotUseTheKeyOfMemoryRegisteredForAnother) {
  for (bool per_peer : {true, false}) {
    SCOPED_TRACE(per_peer ? "a domain per peer" : "one domain");
    LinkOptions options = TestOptions(seconds(60));
    options.domain_per_peer = per_peer;
    auto a = Links::OpenLazy(0, 3, options);
    auto b = Links::OpenLazy(1, 3, options);
    auto c = Links::OpenLazy(2, 3, options);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok() && *a && *b && *c);
    ASSERT_TRUE(Pair(**a, 0, **b, 1).ok());
    ASSERT_TRUE(Pair(**a, 0, **c, 2).ok());
    std::vector<uint8_t> secret(4096, 0x5a), by_b(4096, 0), by_c(4096, 0);
    auto reg = [&](Links &l, uint32_t peer, std::vector<uint8_t> &m, bool remote) {
      return per_peer ? l.RegisterFor(peer, m.data(), m.size(), remote)
                      : l.Register(m.data(), m.size());
    };
    auto x = reg(**a, 2, secret, true);
    auto mb = reg(**b, 0, by_b, false);
    auto mc = reg(**c, 0, by_c, false);
    ASSERT_TRUE(x.ok() && mb.ok() && mc.ok());
    const auto where = reinterpret_cast<uint64_t>(secret.data());
    Status st = (*c)->Read(0, **mc, by_c.data(), 4096, where, (*x)->rkey());
    EXPECT_TRUE(st.ok()) << Describe(st);
    EXPECT_EQ(by_c[4095], 0x5a);
    st = (*b)->Read(0, **mb, by_b.data(), 4096, where, (*x)->rkey());
    if (per_peer) {
      EXPECT_EQ(st.code(), HCCL_E_ROCE_TRANSFER) << Describe(st);
      EXPECT_EQ(by_b[0], 0);
      // Nor may this rank use memory registered for one peer in a request to another.
      auto other = (*a)->RegisterFor(1, by_b.data(), 4096, false);
      ASSERT_TRUE(other.ok());
      EXPECT_EQ((*a)->Write(2, **other, by_b.data(), 16, where, (*x)->rkey()).code(), HCCL_E_PARA);
    } else {
      EXPECT_TRUE(st.ok()) << Describe(st);
      EXPECT_EQ(by_b[0], 0x5a);
    }
  }
}

// A peer that is gone, with the retries of links between servers (HCCL's defaults: soft-RoCE
// retries for ever at a count of 7, the data path's wait is 44 s): a request given a deadline
// fails at it, HCCL_E_TIMEOUT naming the deadline, and the link stays broken.
TEST_F(VerbsVmTest, ARequestToAPeerThatIsGoneEndsAtItsDeadline) {
  LinkOptions options = LinkOptions::BetweenServers(Config{});
  options.timeout = seconds(60);
  auto a = Links::OpenLazy(0, 2, options);
  auto b = Links::OpenLazy(1, 2, options);
  ASSERT_TRUE(a.ok() && b.ok() && *a && *b);
  ASSERT_TRUE(Pair(**a, 0, **b, 1).ok());
  std::vector<uint8_t> mine(4096, 1), theirs(4096, 0);
  auto mr = (*a)->RegisterFor(1, mine.data(), mine.size(), false);
  auto target = (*b)->RegisterFor(0, theirs.data(), theirs.size(), true);
  ASSERT_TRUE(mr.ok() && target.ok());
  const WorkRequest write{.op = WorkRequest::kWrite,
                          .peer = 1,
                          .mr = mr->get(),
                          .local = mine.data(),
                          .length = mine.size(),
                          .remote_addr = reinterpret_cast<uint64_t>(theirs.data()),
                          .rkey = (*target)->rkey()};
  ASSERT_TRUE((*a)->Execute({&write, 1}).ok());
  target->reset();
  b->reset();  // its queue pair is gone: nothing answers rank 0 any more
  const auto start = std::chrono::steady_clock::now();
  Status st = (*a)->Execute({&write, 1}, start + std::chrono::milliseconds(1500));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << Describe(st);
  EXPECT_NE(st.message().find("no completion by the deadline"), std::string::npos) << st.message();
  EXPECT_LT(took, seconds(10));
  EXPECT_FALSE((*a)->broken(1).empty());
}

// Links of one process, rank 0 writing to rank 1 (which keeps @arrivals receive entries), with a
// buffer at each end registered for the other (rank 1's for remote writes).
struct ImmPair {
  std::unique_ptr<Links> a, b;
  std::vector<uint8_t> src, dst;
  std::unique_ptr<MemoryRegion> from, into;

  static ImmPair Make(uint32_t arrivals, size_t bytes, uint64_t post_bytes = 0) {
    ImmPair pair;
    LinkOptions options = LinkOptions::BetweenServers(Config{});
    options.timeout = seconds(60);
    options.arrivals = arrivals;
    options.post_bytes = post_bytes;
    auto a = Links::OpenLazy(0, 2, options);
    auto b = Links::OpenLazy(1, 2, options);
    EXPECT_TRUE(a.ok() && b.ok() && *a && *b);
    if (!a.ok() || !b.ok() || !*a || !*b) {
      return pair;
    }
    pair.a = std::move(*a);
    pair.b = std::move(*b);
    EXPECT_TRUE(Pair(*pair.a, 0, *pair.b, 1).ok());
    pair.src.resize(bytes);
    pair.dst.assign(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) {
      pair.src[i] = Pattern(0, 1, i);
    }
    auto from = pair.a->RegisterFor(1, pair.src.data(), bytes, false);
    auto into = pair.b->RegisterFor(0, pair.dst.data(), bytes, true);
    EXPECT_TRUE(from.ok() && into.ok());
    if (from.ok() && into.ok()) {
      pair.from = std::move(*from);
      pair.into = std::move(*into);
    }
    return pair;
  }

  // Rank 0's write of [off, off + len) to the same offset at rank 1, with @imm.
  WorkRequest Write(size_t off, size_t len, uint32_t imm) const {
    return {.op = WorkRequest::kWriteImm,
            .peer = 1,
            .mr = from.get(),
            .local = const_cast<uint8_t *>(src.data()) + off,
            .length = len,
            .remote_addr = reinterpret_cast<uint64_t>(dst.data()) + off,
            .rkey = into->rkey(),
            .imm = imm};
  }

  // Rank 1 takes arrivals until it has @n (or 20 s pass); *@waits counts its AwaitArrival calls.
  std::vector<Links::Arrival> Take(size_t n, size_t *waits = nullptr) const {
    std::vector<Links::Arrival> got;
    const auto until = std::chrono::steady_clock::now() + seconds(20);
    std::array<Links::Arrival, 8> some;
    while (got.size() < n && std::chrono::steady_clock::now() < until) {
      const size_t k = b->Arrivals(some);
      got.insert(got.end(), some.begin(), some.begin() + static_cast<ptrdiff_t>(k));
      if (k == 0) {
        b->AwaitArrival(until);
        if (waits != nullptr) {
          ++*waits;
        }
      }
    }
    return got;
  }
};

// A write with immediate data is reported once its bytes are in memory, with its value, in
// the order sent; a write of several work requests (split at post_bytes) is reported once,
// after its last bytes; a plain write and a read are not reported.
TEST_F(VerbsVmTest, AWriteWithImmediateDataIsReportedOnceItsBytesArrived) {
  constexpr size_t kBytes = 256 << 10;
  ImmPair pair = ImmPair::Make(8, kBytes, /*post_bytes=*/16 << 10);
  ASSERT_TRUE(pair.into);
  const std::vector<WorkRequest> writes = {
      pair.Write(0, 4096, 7),
      pair.Write(4096, 0, 8),
      {.op = WorkRequest::kWrite,
       .peer = 1,
       .mr = pair.from.get(),
       .local = pair.src.data() + 4096,
       .length = 4096,
       .remote_addr = reinterpret_cast<uint64_t>(pair.dst.data()) + 4096,
       .rkey = pair.into->rkey()},
      pair.Write(8192, kBytes - 8192, 0xfedcba98),
      {.op = WorkRequest::kRead,  // back what the first write put there: the same bytes
       .peer = 1,
       .mr = pair.from.get(),
       .local = pair.src.data(),
       .length = 4096,
       .remote_addr = reinterpret_cast<uint64_t>(pair.dst.data()),
       .rkey = pair.into->rkey()}};
  Status st = pair.a->Execute(writes);
  ASSERT_TRUE(st.ok()) << Describe(st);
  const std::vector<Links::Arrival> got = pair.Take(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].imm, 7u);
  EXPECT_EQ(got[1].imm, 8u);
  EXPECT_EQ(got[2].imm, 0xfedcba98u);
  for (const Links::Arrival &a : got) {
    EXPECT_EQ(a.peer, 0u);
  }
  EXPECT_EQ(pair.dst, pair.src);
  std::array<Links::Arrival, 4> more;
  EXPECT_EQ(pair.b->Arrivals(more), 0u);
}

// More writes with immediate data than the receiver keeps entries for: the writer waits (RNR)
// until the receiver takes arrivals, whose entries go back; none is lost, none fails.
TEST_F(VerbsVmTest, MoreWritesThanReceiveEntriesWaitForThemAndAllArrive) {
  constexpr uint32_t kEntries = 2;
  constexpr size_t kWrites = 40;
  ImmPair pair = ImmPair::Make(kEntries, kWrites * 64);
  ASSERT_TRUE(pair.into);
  std::vector<WorkRequest> writes;
  for (size_t i = 0; i < kWrites; ++i) {
    writes.push_back(pair.Write(i * 64, 64, static_cast<uint32_t>(i)));
  }
  Status st;
  std::thread writer([&] { st = pair.a->Execute(writes); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the entries run out first
  const std::vector<Links::Arrival> got = pair.Take(kWrites);
  writer.join();
  EXPECT_TRUE(st.ok()) << Describe(st);
  ASSERT_EQ(got.size(), kWrites);
  for (size_t i = 0; i < kWrites; ++i) {
    EXPECT_EQ(got[i].imm, i);
  }
  EXPECT_EQ(pair.dst, pair.src);
}

// A receiver with nothing to take sleeps on the completion channel until a write arrives
// rather than polling: over a second of waiting it calls AwaitArrival a few times per 100 ms
// slice, where a loop that polled would call it thousands of times.
TEST_F(VerbsVmTest, AReceiverSleepsUntilAWriteArrives) {
  ImmPair pair = ImmPair::Make(4, 4096);
  ASSERT_TRUE(pair.into);
  Status st;
  std::thread writer([&] {
    std::this_thread::sleep_for(seconds(1));
    const WorkRequest w = pair.Write(0, 4096, 1);
    st = pair.a->Execute({&w, 1});
  });
  size_t waits = 0;
  const std::vector<Links::Arrival> got = pair.Take(1, &waits);
  writer.join();
  EXPECT_TRUE(st.ok()) << Describe(st);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(pair.dst, pair.src);
  EXPECT_GE(waits, 2u);  // it did wait: armed, then slept
  EXPECT_LE(waits, 40u);
}

// Rank 1 opens a window for rank 0 onto [kOff, kOff + kLen) of a buffer registered for windows,
// then rank 0 tries a write of @how; the bytes rank 1's buffer holds afterwards, and the write's
// status.
enum class Try { kInside, kPastTheEnd, kAfterTheClose, kWithTheRegistrationsKey, kWithTheOldKey };
constexpr size_t kWinBuf = 16384, kOff = 4096, kLen = 8192;

struct WindowTry {
  Status bind, write;
  std::vector<uint8_t> dst;
  bool supported = true;
};

WindowTry TryWindow(Try how) {
  WindowTry t;
  LinkOptions options = LinkOptions::BetweenServers(Config{});
  options.timeout = seconds(60);
  auto a = Links::OpenLazy(0, 2, options);
  auto b = Links::OpenLazy(1, 2, options);
  EXPECT_TRUE(a.ok() && b.ok() && *a && *b);
  if (!a.ok() || !b.ok() || !*a || !*b || !Pair(**a, 0, **b, 1).ok()) {
    ADD_FAILURE() << "no pair of links";
    return t;
  }
  std::vector<uint8_t> src(kWinBuf);
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = Pattern(0, 1, i) | 1;  // never 0
  }
  t.dst.assign(kWinBuf, 0);
  auto from = (*a)->RegisterFor(1, src.data(), src.size(), false);
  auto into = (*b)->RegisterForWindows(0, t.dst.data(), t.dst.size());
  auto window = (*b)->OpenWindow(0);
  if (!window.ok() && window.status().code() == HCCL_E_NOT_SUPPORT) {
    t.supported = false;
    return t;
  }
  EXPECT_TRUE(from.ok() && into.ok() && window.ok());
  if (!from.ok() || !into.ok() || !window.ok()) {
    return t;
  }
  auto bind = [&](size_t off) {
    const WorkRequest r{.op = WorkRequest::kBind,
                        .peer = 0,
                        .mr = into->get(),
                        .local = t.dst.data() + off,
                        .length = kLen,
                        .window = window->get()};
    return (*b)->Execute({&r, 1});
  };
  t.bind = bind(kOff);
  uint32_t rkey = (*window)->rkey();
  size_t at = kOff, len = kLen;
  switch (how) {
    case Try::kInside:
      break;
    case Try::kPastTheEnd:
      at = kOff + kLen - 1;
      len = 2;
      break;
    case Try::kAfterTheClose: {
      const WorkRequest close{.op = WorkRequest::kInvalidate, .peer = 0, .window = window->get()};
      t.bind = (*b)->Execute({&close, 1});
      break;
    }
    case Try::kWithTheRegistrationsKey:
      rkey = (*into)->rkey();
      break;
    case Try::kWithTheOldKey: {
      const WorkRequest close{.op = WorkRequest::kInvalidate, .peer = 0, .window = window->get()};
      t.bind = (*b)->Execute({&close, 1});
      if (t.bind.ok()) {
        t.bind = bind(kOff);  // the same bytes again: a new key
      }
      break;
    }
  }
  t.write = (*a)->Write(1, **from, src.data() + at, len,
                        reinterpret_cast<uint64_t>(t.dst.data()) + at, rkey);
  return t;
}

// A window lets its peer write through it until it is closed: the peer writes inside it; a
// write after its close, with the registration's own key or with the window's previous key
// (closed and bound again) fails at the device and changes nothing (each such write breaks the
// link: a fresh pair of links for each). A write one byte past the window fails too on a
// device that checks a window's bounds; soft-RoCE (Linux 6.1) checks the registration's
// instead, so there that case is only reported.
TEST_F(VerbsVmTest, AWindowLetsItsPeerWriteItsBytesAndNothingElse) {
  WindowTry inside = TryWindow(Try::kInside);
  if (!inside.supported) {
    GTEST_SKIP() << "the RDMA device has no type 2 memory windows";
  }
  EXPECT_TRUE(inside.bind.ok()) << Describe(inside.bind);
  EXPECT_TRUE(inside.write.ok()) << Describe(inside.write);
  for (size_t i = 0; i < kWinBuf; ++i) {
    ASSERT_EQ(inside.dst[i] != 0, i >= kOff && i < kOff + kLen) << "byte " << i;
  }
  const WindowTry past = TryWindow(Try::kPastTheEnd);
  EXPECT_TRUE(past.bind.ok()) << Describe(past.bind);
  auto port = Links::OpenLazy(0, 1, LinkOptions{});
  const bool soft = port.ok() && *port && (*port)->port().device.rfind("rxe", 0) == 0;
  if (soft) {
    std::printf(
        "note: a write one byte past the window %s on %s (soft-RoCE checks the "
        "registration's bounds, not the window's)\n",
        past.write.ok() ? "went through" : "failed", (*port)->port().device.c_str());
  } else {
    EXPECT_EQ(past.write.code(), HCCL_E_ROCE_TRANSFER) << Describe(past.write);
    EXPECT_EQ(past.dst, std::vector<uint8_t>(kWinBuf, 0));
  }
  for (Try how : {Try::kAfterTheClose, Try::kWithTheRegistrationsKey, Try::kWithTheOldKey}) {
    SCOPED_TRACE("case " + std::to_string(static_cast<int>(how)));
    WindowTry t = TryWindow(how);
    EXPECT_TRUE(t.bind.ok()) << Describe(t.bind);
    EXPECT_EQ(t.write.code(), HCCL_E_ROCE_TRANSFER) << Describe(t.write);
    EXPECT_EQ(t.dst, std::vector<uint8_t>(kWinBuf, 0));
  }
}

}  // namespace
}  // namespace hzc::verbs
