// SPDX-License-Identifier: Apache-2.0
// One rank of the point-to-point tests (run as a process by p2p_vm_test.cpp).
//
// Usage: hzc-p2p-rank ROOT_INFO_HEX NRANKS RANK SCENARIO MODE
//   MODE: staging (malloc'd buffers) or zerocopy (activated memory)
//   SCENARIO:
//     matrix    every pair of ranks, both ways (HcclSend/HcclRecv in both orders), every
//               dataType, counts 0 (no transfer), 1, 7, 1001 and above the staging slot (the tests
//               set HCCL_BUFFSIZE=1); zerocopy also sends into plain memory (staged); then a ring
//               exchange in one HcclBatchSendRecv per rank (small and above the slot), two
//               items to the same peer in one batch (kept in order), an empty batch, and 300
//               small messages in a row from rank 0 to rank 1. Every byte is checked, and the
//               bytes around each receive buffer. The rank logs at debug level into its own
//               file and checks that exactly the receives of at most HZC_P2P_BUFFERED_MAX
//               bytes (default 2048) came buffered, the others of at most HZC_INLINE_MAX bytes
//               (default 16384; at most 512 KiB, half the slot) eagerly, but from
//               HZC_P2P_ZERO_COPY_MIN bytes (default 4096) on from activated memory, and
//               exactly the others whose buffers were both activated took the zero-copy path
//     mismatch  (2 ranks) count and dataType mismatches fail with HCCL_E_PARA on both sides
//               and leave the receive buffer alone; a rank with a bad argument (null buffer,
//               bad dataType) gets its own code and its peer HCCL_E_PARA at once; a send to
//               itself (HCCL_E_NOT_SUPPORT), a receive from a rank out of range (HCCL_E_PARA),
//               a null batch (HCCL_E_PTR) involve no peer; then transfers work
//     lateopen  (3 ranks) rank 0 sends to ranks 1 and 2 in one batch; rank 2 receives from
//               rank 1 first, which sends only after its receive from rank 0: rank 0's send
//               to rank 1 has to progress while its channel with rank 2 waits to be opened
//     revoke    (2 ranks, zerocopy) rank 0 deactivates its send buffer while rank 1 copies
//               from it: HCCL_E_REMOTE on both, no crash (58: the deactivation never came
//               inside the copy in 10 attempts; 70: this rank's transfer succeeded and its
//               peer's failed; 59: no sync page, HZC_P2P_SYNC_FD, from the test)
//     timeout   (3 ranks, HCCL_EXEC_TIMEOUT=1) rank 0 receives from rank 1 which never sends
//               (their channel is open) and sends to rank 2 which never receives (no channel
//               yet): HCCL_E_TIMEOUT both times; ranks 1 and 2 only wait
//     die       (3 ranks) rank 1 is killed after a first exchange with rank 0; rank 0's next
//               receive from it fails with HCCL_E_REMOTE quickly, then rank 0 and rank 2 still
//               exchange
//     buffered  (2 ranks, HZC_P2P_BUFFERED_MAX=B, HZC_INLINE_MAX=0) messages of B-1, B, B+1
//               bytes between unaligned buffers; both ranks send 16 messages (the boxes) before
//               receiving; one batch per rank of 40 sends and 40 receives; in-place echoes; a
//               buffered mismatch fails the receive only (75 otherwise), a box sent to a
//               refused receive is dropped, a refused send fails the receive; every receive
//               took the path counted (62); then rank 1 is killed and rank 0's 17th buffered
//               send fails with HCCL_E_REMOTE (76 otherwise)
// Exit status: 0 success; an HcclResult for an unexpected result; 60 wrong data; 61 bytes
// outside a buffer changed; 62 wrong number of zero-copy receives; 50+ setup failures;
// 70+ a scenario step that did not fail as it should; 74 an error that took more than 5 s.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "arena.h"
#include "rank_args.h"
#include "reference.h"
#include "shared_sync.h"

namespace {

uint32_t g_rank = 0, g_n = 0;
HcclComm g_comm = nullptr;
bool g_zero_copy = false;
uint64_t g_expect_zero_copy = 0;  // receives that must have taken the zero-copy path
uint64_t g_expect_eager = 0;      // receives that must have come eagerly (with the send)
uint64_t g_eager_max = 0;         // bytes: HZC_INLINE_MAX, at most the 512 KiB of a slot's half
uint64_t g_expect_buffered = 0;   // receives that must have come buffered (in a box)
uint64_t g_buffered_max = 0;      // bytes: HZC_P2P_BUFFERED_MAX
uint64_t g_zero_copy_min = 0;     // bytes: HZC_P2P_ZERO_COPY_MIN (0: never before the eager max)

// Count a receive of @bytes (into activated memory unless @plain; the sends are from activated
// memory in zerocopy mode) as the path it must take: buffered up to g_buffered_max, else
// eager up to g_eager_max unless the send is zero-copy from g_zero_copy_min on, else zero-copy
// when both buffers are activated, else staged.
void Expect(uint64_t bytes, bool plain = false) {
  if (bytes == 0) {
    return;
  }
  const bool zero_copy_first = g_zero_copy && g_zero_copy_min != 0 && bytes >= g_zero_copy_min;
  if (bytes <= g_buffered_max) {
    ++g_expect_buffered;
  } else if (bytes <= g_eager_max && !zero_copy_first) {
    ++g_expect_eager;
  } else if (g_zero_copy && !plain) {
    ++g_expect_zero_copy;
  }
}

// Buffers: activated memory (zerocopy) or plain memory (staging).
struct Arena : hzc::test::Arena {
  Arena(size_t bytes, bool zero_copy) : hzc::test::Arena(g_comm, bytes, zero_copy) {}
};

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;
constexpr size_t kArena = 8 << 20;

constexpr HcclDataType kTypes[] = {
    HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,   HCCL_DATA_TYPE_FP16,
    HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_INT64,  HCCL_DATA_TYPE_UINT64,  HCCL_DATA_TYPE_UINT8,
    HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_FP64,    HCCL_DATA_TYPE_BFP16,
    HCCL_DATA_TYPE_INT128, HCCL_DATA_TYPE_HIF8,   HCCL_DATA_TYPE_FP8E4M3, HCCL_DATA_TYPE_FP8E5M2,
    HCCL_DATA_TYPE_FP8E8M0};

// Where rank @from's message lives in its arena and what it holds.
struct Message {
  HcclDataType type;
  uint64_t count;
  uint64_t seed;
  size_t Bytes() const { return count * hzc::test::RefTypeSize(type); }
  std::vector<uint8_t> Content(uint32_t from) const {
    std::vector<uint8_t> v(Bytes());
    hzc::test::FillInput(type, hzc::test::RefTypeSize(type), from, seed, v.data(), count);
    return v;
  }
};

// Fill the send buffer at @at with @m's content of this rank.
void Prepare(uint8_t *at, const Message &m) {
  const auto v = m.Content(g_rank);
  std::memcpy(at, v.data(), v.size());
}

// Guard the receive buffer at @at (kGuard bytes on each side of it).
void Guard(uint8_t *at, const Message &m) {
  std::memset(at - kGuard, kGuardByte, m.Bytes() + 2 * kGuard);
}

// Check the receive buffer at @at against @from's message; 0 or an exit status.
int Check(const uint8_t *at, const Message &m, uint32_t from, const char *what) {
  const auto want = m.Content(from);
  for (size_t i = 0; i < want.size(); ++i) {
    if (at[i] != want[i]) {
      std::fprintf(stderr, "rank %u: %s from %u type %d count %lu: byte %zu is %#x, want %#x\n",
                   g_rank, what, from, m.type, static_cast<unsigned long>(m.count), i, at[i],
                   want[i]);
      return 60;
    }
  }
  for (size_t i = 0; i < kGuard; ++i) {
    if (at[-1 - static_cast<ptrdiff_t>(i)] != kGuardByte || at[want.size() + i] != kGuardByte) {
      std::fprintf(stderr, "rank %u: %s from %u wrote outside its buffer\n", g_rank, what, from);
      return 61;
    }
  }
  return 0;
}

int Fail(const char *what, HcclResult r) {
  std::fprintf(stderr, "rank %u: %s: %s\n", g_rank, what, HcclGetErrorString(r));
  return r == HCCL_SUCCESS ? 70 : r;
}

// Pair (a, b), a < b: a sends then receives, b receives then sends; @plain_recv: the receive
// buffers are plain memory (staged even in zerocopy mode).
int Pair(Arena &arena, uint8_t *plain, uint32_t a, uint32_t b, const Message &m, bool plain_recv) {
  if (g_rank != a && g_rank != b) {
    return 0;
  }
  const uint32_t peer = g_rank == a ? b : a;
  uint8_t *send = arena.base + kGuard;
  uint8_t *recv = (plain_recv ? plain : send + m.Bytes() + kGuard) + kGuard;
  Prepare(send, m);
  Guard(recv, m);
  HcclResult r1, r2;
  if (g_rank == a) {
    r1 = HcclSend(send, m.count, m.type, peer, g_comm, nullptr);
    r2 = HcclRecv(recv, m.count, m.type, peer, g_comm, nullptr);
  } else {
    r1 = HcclRecv(recv, m.count, m.type, peer, g_comm, nullptr);
    r2 = HcclSend(send, m.count, m.type, peer, g_comm, nullptr);
  }
  if (r1 != HCCL_SUCCESS || r2 != HCCL_SUCCESS) {
    return Fail("Send/Recv", r1 != HCCL_SUCCESS ? r1 : r2);
  }
  Expect(m.Bytes(), plain_recv);
  return Check(recv, m, peer, "Recv");
}

// Every rank sends @m to the next and receives from the one before, in one batch (the send
// listed first on even ranks, second on odd ones).
int Ring(Arena &arena, const Message &m) {
  const uint32_t next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
  uint8_t *send = arena.base + kGuard;
  uint8_t *recv = send + m.Bytes() + 2 * kGuard;
  Prepare(send, m);
  Guard(recv, m);
  HcclSendRecvItem s{HCCL_SEND, send, m.count, m.type, next};
  HcclSendRecvItem r{HCCL_RECV, recv, m.count, m.type, prev};
  HcclSendRecvItem items[2] = {g_rank % 2 ? r : s, g_rank % 2 ? s : r};
  if (HcclResult rc = HcclBatchSendRecv(items, 2, g_comm, nullptr); rc != HCCL_SUCCESS) {
    return Fail("BatchSendRecv ring", rc);
  }
  Expect(m.Bytes());
  return Check(recv, m, prev, "ring");
}

// Two messages from rank 0 to rank 1 in one batch each side, matched in list order.
int TwoInOrder(Arena &arena) {
  if (g_rank > 1) {
    return 0;
  }
  const Message m1{HCCL_DATA_TYPE_INT32, 1000, 901}, m2{HCCL_DATA_TYPE_INT32, 1000, 902};
  uint8_t *b1 = arena.base + kGuard, *b2 = b1 + m1.Bytes() + 2 * kGuard;
  if (g_rank == 0) {
    Prepare(b1, m1);
    Prepare(b2, m2);
  } else {
    Guard(b1, m1);
    Guard(b2, m2);
  }
  const HcclSendRecvType t = g_rank == 0 ? HCCL_SEND : HCCL_RECV;
  HcclSendRecvItem items[2] = {{t, b1, 1000, HCCL_DATA_TYPE_INT32, 1 - g_rank},
                               {t, b2, 1000, HCCL_DATA_TYPE_INT32, 1 - g_rank}};
  if (HcclResult rc = HcclBatchSendRecv(items, 2, g_comm, nullptr); rc != HCCL_SUCCESS) {
    return Fail("BatchSendRecv two in order", rc);
  }
  if (g_rank == 0) {
    return 0;
  }
  Expect(m1.Bytes());
  Expect(m2.Bytes());
  if (int rc = Check(b1, m1, 0, "first of two")) {
    return rc;
  }
  return Check(b2, m2, 0, "second of two");
}

// 300 small messages in a row from rank 0 to rank 1.
int ManyInARow(Arena &arena) {
  if (g_rank > 1) {
    return 0;
  }
  uint8_t *buf = arena.base + kGuard;
  for (uint64_t i = 0; i < 300; ++i) {
    const Message m{HCCL_DATA_TYPE_FP32, 1 + i % 13, 5000 + i};
    HcclResult r;
    if (g_rank == 0) {
      Prepare(buf, m);
      r = HcclSend(buf, m.count, m.type, 1, g_comm, nullptr);
    } else {
      Guard(buf, m);
      r = HcclRecv(buf, m.count, m.type, 0, g_comm, nullptr);
    }
    if (r != HCCL_SUCCESS) {
      return Fail("many in a row", r);
    }
    if (g_rank == 1) {
      Expect(m.Bytes());
      if (int rc = Check(buf, m, 0, "many in a row")) {
        return rc;
      }
    }
  }
  return 0;
}

// Receives this process logged as taking @path ("zero-copy", "eager"; it logs at debug level
// into its own file).
uint64_t Logged(const std::string &path) {
  std::ifstream f("/tmp/hzc-p2p-rank-" + std::to_string(getpid()) + ".log");
  uint64_t n = 0;
  for (std::string line; std::getline(f, line);) {
    n += line.find(" bytes " + path) != std::string::npos ? 1 : 0;
  }
  return n;
}

// 0 if the receives logged each path as counted by Expect(), else 62.
int CheckPaths() {
  for (const auto &[path, want] : {std::pair{"zero-copy", g_expect_zero_copy},
                                   std::pair{"eager", g_expect_eager + g_expect_buffered},
                                   std::pair{"eager (buffered)", g_expect_buffered}}) {
    const uint64_t logged = Logged(path);
    if (logged != want) {
      std::fprintf(stderr, "rank %u: %lu receives were %s, want %lu\n", g_rank,
                   static_cast<unsigned long>(logged), path, static_cast<unsigned long>(want));
      return 62;
    }
  }
  return 0;
}

int Matrix() {
  Arena arena(kArena, g_zero_copy);
  std::vector<uint8_t> plain(kArena);
  if (!arena.ok) {
    return 52;
  }
  uint64_t seed = 1;
  for (HcclDataType t : kTypes) {
    const uint64_t es = hzc::test::RefTypeSize(t);
    std::vector<uint64_t> counts = {0, 1, 7, 1001};
    if (t == HCCL_DATA_TYPE_INT8 || t == HCCL_DATA_TYPE_BFP16 || t == HCCL_DATA_TYPE_INT128) {
      counts.push_back((3 << 19) / es + 3);  // 1.5 MiB and a bit: above the 1 MiB slot
    }
    for (uint64_t count : counts) {
      for (uint32_t a = 0; a < g_n; ++a) {
        for (uint32_t b = a + 1; b < g_n; ++b) {
          const Message m{t, count, ++seed};
          if (int rc = Pair(arena, plain.data(), a, b, m, false)) {
            return rc;
          }
          // Into plain memory too: a small message, and one of 4-16 KiB that a zero-copy send
          // (HZC_P2P_ZERO_COPY_MIN) stages into it.
          if (g_zero_copy && (count == 7 || count == 1001)) {
            if (int rc = Pair(arena, plain.data(), a, b, m, true)) {
              return rc;
            }
          }
        }
      }
    }
  }
  for (const Message &m :
       {Message{HCCL_DATA_TYPE_FP16, 999, 77}, Message{HCCL_DATA_TYPE_FP64, (5 << 18) / 8 + 1, 78},
        Message{HCCL_DATA_TYPE_INT8, 0, 79}}) {
    if (int rc = Ring(arena, m)) {
      return rc;
    }
  }
  if (int rc = TwoInOrder(arena)) {
    return rc;
  }
  if (HcclResult r = HcclBatchSendRecv(nullptr, 0, g_comm, nullptr); r != HCCL_SUCCESS) {
    return Fail("empty batch", r);
  }
  if (int rc = ManyInARow(arena)) {
    return rc;
  }
  if (int rc = CheckPaths()) {
    return rc;
  }
  // Leave together: a rank that destroys its communicator breaks the kernel domain, and with
  // it the peer mappings of the ranks still transferring.
  return HcclBarrier(g_comm, nullptr);
}

// Run @fn and return its result, or 74 if it took more than 5 s.
template <typename Fn>
int Quick(Fn fn, HcclResult *r) {
  const auto start = std::chrono::steady_clock::now();
  *r = fn();
  return std::chrono::steady_clock::now() - start > std::chrono::seconds(5) ? 74 : 0;
}

int Mismatch() {
  Arena arena(1 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  const uint32_t peer = 1 - g_rank;
  uint8_t *buf = arena.base + kGuard;
  const Message m{HCCL_DATA_TYPE_FP32, 1000, 3};
  auto transfer = [&](uint64_t count, HcclDataType type, void *b) {
    return g_rank == 0 ? HcclSend(b, count, type, peer, g_comm, nullptr)
                       : HcclRecv(b, count, type, peer, g_comm, nullptr);
  };
  // A good transfer opens the channel; then counts differ, then types.
  g_rank == 0 ? Prepare(buf, m) : Guard(buf, m);
  if (HcclResult r = transfer(m.count, m.type, buf); r != HCCL_SUCCESS) {
    return Fail("first transfer", r);
  }
  if (g_rank == 1) {
    Guard(buf, m);
  }
  HcclResult r;
  if (transfer(g_rank == 0 ? 1000 : 999, m.type, buf) != HCCL_E_PARA ||
      transfer(1000, g_rank == 0 ? HCCL_DATA_TYPE_FP32 : HCCL_DATA_TYPE_INT32, buf) !=
          HCCL_E_PARA) {
    return 71;
  }
  if (g_rank == 1) {
    const uint8_t *guarded = buf - kGuard;
    for (size_t i = 0; i < m.Bytes() + 2 * kGuard; ++i) {
      if (guarded[i] != kGuardByte) {
        return 61;
      }
    }
  }
  // Rank 0 sends from a null buffer, then rank 1 receives with a bad dataType: the bad side
  // gets its own code, the other HCCL_E_PARA, at once.
  if (Quick([&] { return transfer(1000, m.type, g_rank == 0 ? nullptr : buf); }, &r) ||
      r != (g_rank == 0 ? HCCL_E_PTR : HCCL_E_PARA)) {
    return Fail("null buffer", r);
  }
  if (Quick([&] { return transfer(1000, g_rank == 1 ? HcclDataType(99) : m.type, buf); }, &r) ||
      r != HCCL_E_PARA) {
    return Fail("bad dataType", r);
  }
  // Own-argument errors that involve no peer.
  if (HcclSend(buf, 1, m.type, g_rank, g_comm, nullptr) != HCCL_E_NOT_SUPPORT ||
      HcclRecv(buf, 1, m.type, 7, g_comm, nullptr) != HCCL_E_PARA ||
      HcclBatchSendRecv(nullptr, 1, g_comm, nullptr) != HCCL_E_PTR) {
    return 72;
  }
  // The channel still works, both ways.
  g_rank == 0 ? Prepare(buf, m) : Guard(buf, m);
  if (HcclResult rc = transfer(m.count, m.type, buf); rc != HCCL_SUCCESS) {
    return Fail("transfer after the errors", rc);
  }
  return g_rank == 1 ? Check(buf, m, 0, "after the errors") : 0;
}

// Rank 0 sends to 1 and 2 in one batch; rank 1 receives it in a batch, then sends to 2; rank 2
// receives from 1, then from 0. Rank 0's channel with rank 2 can only open once rank 2 is done
// with rank 1, which needs rank 0's send to rank 1 to progress meanwhile.
int LateOpen() {
  const Message m{HCCL_DATA_TYPE_INT16, 3000, 11};
  std::vector<uint8_t> a(m.Bytes() + 2 * kGuard), b(m.Bytes() + 2 * kGuard);
  uint8_t *pa = a.data() + kGuard, *pb = b.data() + kGuard;
  HcclResult r1 = HCCL_SUCCESS, r2 = HCCL_SUCCESS;
  if (g_rank == 0) {
    Prepare(pa, m);
    HcclSendRecvItem items[2] = {{HCCL_SEND, pa, m.count, m.type, 1},
                                 {HCCL_SEND, pa, m.count, m.type, 2}};
    r1 = HcclBatchSendRecv(items, 2, g_comm, nullptr);
  } else if (g_rank == 1) {
    Guard(pa, m);
    HcclSendRecvItem item{HCCL_RECV, pa, m.count, m.type, 0};
    r1 = HcclBatchSendRecv(&item, 1, g_comm, nullptr);
    Prepare(pb, m);
    r2 = HcclSend(pb, m.count, m.type, 2, g_comm, nullptr);
  } else {
    Guard(pa, m);
    Guard(pb, m);
    r1 = HcclRecv(pb, m.count, m.type, 1, g_comm, nullptr);
    r2 = HcclRecv(pa, m.count, m.type, 0, g_comm, nullptr);
  }
  if (r1 != HCCL_SUCCESS || r2 != HCCL_SUCCESS) {
    return Fail("late open", r1 != HCCL_SUCCESS ? r1 : r2);
  }
  if (g_rank == 1) {
    return Check(pa, m, 0, "late open");
  }
  if (g_rank == 2) {
    const int rc = Check(pb, m, 1, "late open");
    return rc != 0 ? rc : Check(pa, m, 0, "late open");
  }
  return 0;
}

// Rank 0 deactivates its send buffer while rank 1 copies from it (zero-copy): both get
// HCCL_E_REMOTE and nobody crashes. A deactivation that lands before the receiver mapped the
// buffer makes a staged transfer that succeeds (one after the copy, a zero-copy transfer that
// succeeds): then again (58 after 10 attempts). After each attempt the ranks count their
// failures on the test's sync page (HZC_P2P_SYNC_FD, shared_sync.h; 59 if it is missing or the
// peer does not arrive), so neither exits while the other's call runs.
int Revoke() {
  const size_t bytes = 32 << 20;
  Arena arena(bytes, true);
  if (!arena.ok) {
    return 52;
  }
  std::memset(arena.base, 1, bytes);
  const char *fd = std::getenv("HZC_P2P_SYNC_FD");
  auto *sync = fd != nullptr ? hzc::test::SharedSync::Attach(std::atoi(fd)) : nullptr;
  if (sync == nullptr) {
    return 59;
  }
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (attempt > 0 && g_rank == 0 &&
        HcclCommActivateCommMemory(g_comm, arena.va, arena.size, 0, arena.handle, 0) !=
            HCCL_SUCCESS) {
      return 57;
    }
    if (HcclBarrier(g_comm, nullptr) != HCCL_SUCCESS) {
      return 53;
    }
    std::atomic<bool> calling{false};
    std::thread revoker;
    if (g_rank == 0) {
      revoker = std::thread([&] {
        while (!calling.load()) {
          std::this_thread::yield();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        HcclCommDeactivateCommMemory(g_comm, arena.va);
      });
    }
    calling.store(true);
    const HcclResult r = g_rank == 0
                             ? HcclSend(arena.base, bytes, HCCL_DATA_TYPE_INT8, 1, g_comm, nullptr)
                             : HcclRecv(arena.base, bytes, HCCL_DATA_TYPE_INT8, 0, g_comm, nullptr);
    if (revoker.joinable()) {
      revoker.join();
    }
    // Both ranks count the failures before either goes on or exits, outside the library (its
    // last call would race the peer's exit just the same). Rank 1 returning at once would exit
    // while rank 0's send may still be waiting for its verdict: rank 0 could then see a peer
    // that died instead of the failed receive this scenario is about.
    if (r != HCCL_SUCCESS) {
      sync->flags[attempt].fetch_add(1);
    }
    if (!sync->Barrier(attempt, 2, std::chrono::seconds(120))) {
      return 59;
    }
    const uint32_t failed = sync->flags[attempt].load();
    if (failed == 2) {
      return r;
    }
    if (failed == 1) {
      return Fail("the transfer failed on one side only", r);  // 70 on the side that succeeded
    }
    std::fprintf(stderr, "rank %u: attempt %d: the deactivation did not land inside the copy\n",
                 g_rank, attempt);
  }
  return 58;
}

int Timeout() {
  float x = 1;
  if (g_rank == 0   ? HcclSend(&x, 1, HCCL_DATA_TYPE_FP32, 1, g_comm, nullptr)
      : g_rank == 1 ? HcclRecv(&x, 1, HCCL_DATA_TYPE_FP32, 0, g_comm, nullptr)
                    : HCCL_SUCCESS) {
    return 53;
  }
  if (g_rank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // never calls again
    return 0;
  }
  HcclResult r;
  if (Quick([&] { return HcclRecv(&x, 1, HCCL_DATA_TYPE_FP32, 1, g_comm, nullptr); }, &r) ||
      r != HCCL_E_TIMEOUT) {
    return Fail("receive from a rank that does not send", r);
  }
  if (Quick([&] { return HcclSend(&x, 1, HCCL_DATA_TYPE_FP32, 2, g_comm, nullptr); }, &r) ||
      r != HCCL_E_TIMEOUT) {
    return Fail("send to a rank that never calls", r);
  }
  return 0;
}

int Die() {
  std::vector<float> x(1 << 18, 1.0f);
  if (g_rank < 2 && (g_rank == 0 ? HcclSend(x.data(), 1, HCCL_DATA_TYPE_FP32, 1, g_comm, nullptr)
                                 : HcclRecv(x.data(), 1, HCCL_DATA_TYPE_FP32, 0, g_comm,
                                            nullptr)) != HCCL_SUCCESS) {
    return 53;
  }
  if (g_rank == 1) {
    raise(SIGKILL);
  }
  HcclResult r;
  if (g_rank == 0) {
    if (int rc = Quick(
            [&] { return HcclRecv(x.data(), x.size(), HCCL_DATA_TYPE_FP32, 1, g_comm, nullptr); },
            &r)) {
      return rc;
    }
    if (r != HCCL_E_REMOTE) {
      return Fail("receive from a dead rank", r);
    }
  }
  // The other pairs still work.
  r = g_rank == 0 ? HcclSend(x.data(), x.size(), HCCL_DATA_TYPE_FP32, 2, g_comm, nullptr)
                  : HcclRecv(x.data(), x.size(), HCCL_DATA_TYPE_FP32, 0, g_comm, nullptr);
  return r == HCCL_SUCCESS ? 0 : Fail("transfer with a live rank", r);
}

// Rank 0 sends @m from @send to rank 1, which receives it into @recv (guarded) and checks it.
int OneWay(uint8_t *send, uint8_t *recv, const Message &m, const char *what) {
  if (g_rank == 0) {
    Prepare(send, m);
    const HcclResult r = HcclSend(send, m.count, m.type, 1, g_comm, nullptr);
    return r == HCCL_SUCCESS ? 0 : Fail(what, r);
  }
  Guard(recv, m);
  if (HcclResult r = HcclRecv(recv, m.count, m.type, 0, g_comm, nullptr); r != HCCL_SUCCESS) {
    return Fail(what, r);
  }
  Expect(m.Bytes());
  return Check(recv, m, 0, what);
}

// Both ranks send 16 messages (as many as the boxes) before receiving any: only sends that
// return before their receive let this finish (else both time out).
int SendsFirst(uint8_t *base) {
  const uint32_t peer = 1 - g_rank;
  HcclResult r = HCCL_SUCCESS;
  for (uint32_t i = 0; i < 16 && r == HCCL_SUCCESS; ++i) {
    const Message m{HCCL_DATA_TYPE_INT32, 1 + i, 7000 + i};
    Prepare(base + i * 256, m);
    if (int rc = Quick(
            [&] { return HcclSend(base + i * 256, m.count, m.type, peer, g_comm, nullptr); }, &r)) {
      return rc;
    }
  }
  for (uint32_t i = 0; i < 16 && r == HCCL_SUCCESS; ++i) {
    const Message m{HCCL_DATA_TYPE_INT32, 1 + i, 7000 + i};
    uint8_t *at = base + (16 + i) * 256;
    Guard(at, m);
    if (r = HcclRecv(at, m.count, m.type, peer, g_comm, nullptr); r == HCCL_SUCCESS) {
      Expect(m.Bytes());
      if (int rc = Check(at, m, peer, "sends first")) {
        return rc;
      }
    }
  }
  return r == HCCL_SUCCESS ? 0 : Fail("sends first", r);
}

// One batch per rank of 40 sends to and 40 receives from the other (far more than the boxes),
// mostly buffered, every tenth above the threshold; sends listed first on rank 0, last on 1.
int ManyInFlight(uint8_t *base) {
  constexpr uint32_t kItems = 40;
  const size_t stride = g_buffered_max + 100 + 2 * kGuard;
  uint8_t *sends = base + kGuard, *recvs = sends + kItems * stride;
  const uint32_t peer = 1 - g_rank;
  std::vector<Message> ms;
  std::vector<HcclSendRecvItem> items(2 * kItems);
  for (uint32_t i = 0; i < kItems; ++i) {
    const uint64_t count = i % 10 == 9 ? g_buffered_max + 100 : 1 + (i * 37) % g_buffered_max;
    const Message &m = ms.emplace_back(Message{HCCL_DATA_TYPE_INT8, count, 8000 + i});
    Prepare(sends + i * stride, m);
    Guard(recvs + i * stride, m);
    items[(g_rank == 0 ? 0 : kItems) + i] = {HCCL_SEND, sends + i * stride, count, m.type, peer};
    items[(g_rank == 0 ? kItems : 0) + i] = {HCCL_RECV, recvs + i * stride, count, m.type, peer};
  }
  if (HcclResult r = HcclBatchSendRecv(items.data(), 2 * kItems, g_comm, nullptr);
      r != HCCL_SUCCESS) {
    return Fail("many in flight", r);
  }
  for (uint32_t i = 0; i < kItems; ++i) {
    Expect(ms[i].Bytes());
    if (int rc = Check(recvs + i * stride, ms[i], peer, "many in flight")) {
      return rc;
    }
  }
  return 0;
}

// Rank 0 sends @m from @buf, rank 1 receives it there and sends it back from there, rank 0
// receives it into the same buffer.
int Echo(uint8_t *buf, const Message &m) {
  Guard(buf, m);
  if (g_rank == 0) {
    Prepare(buf, m);
  }
  const uint32_t peer = 1 - g_rank;
  for (int step = 0; step < 2; ++step) {
    const bool sending = (step == 0) == (g_rank == 0);
    const HcclResult r = sending ? HcclSend(buf, m.count, m.type, peer, g_comm, nullptr)
                                 : HcclRecv(buf, m.count, m.type, peer, g_comm, nullptr);
    if (r != HCCL_SUCCESS) {
      return Fail("echo", r);
    }
    if (!sending) {
      Expect(m.Bytes());
      if (int rc = Check(buf, m, 0, "echo")) {
        return rc;
      }
    }
  }
  return 0;
}

// Buffered mismatches and refusals: the receive fails, the buffered send does not; a box sent
// to a refused receive is dropped; a refused send fails the receive at once; then transfers
// work.
int BufferedMismatch(uint8_t *buf) {
  const Message m{HCCL_DATA_TYPE_FP32, 100, 31};
  auto transfer = [&](uint64_t count, HcclDataType type, void *b) {
    return g_rank == 0 ? HcclSend(b, count, type, 1, g_comm, nullptr)
                       : HcclRecv(b, count, type, 0, g_comm, nullptr);
  };
  g_rank == 0 ? Prepare(buf, m) : Guard(buf, m);
  const HcclResult mine = g_rank == 0 ? HCCL_SUCCESS : HCCL_E_PARA;
  if (transfer(g_rank == 0 ? 100 : 99, m.type, buf) != mine ||
      transfer(100, g_rank == 0 ? HCCL_DATA_TYPE_FP32 : HCCL_DATA_TYPE_INT32, buf) != mine) {
    return 75;
  }
  if (g_rank == 1) {
    const uint8_t *guarded = buf - kGuard;
    for (size_t i = 0; i < m.Bytes() + 2 * kGuard; ++i) {
      if (guarded[i] != kGuardByte) {
        return 61;
      }
    }
  }
  if (HcclResult r = transfer(100, g_rank == 1 ? HcclDataType(99) : m.type, buf); r != mine) {
    return Fail("a buffered send to a refused receive", r);
  }
  HcclResult r;
  if (Quick([&] { return transfer(100, m.type, g_rank == 0 ? nullptr : buf); }, &r) ||
      r != (g_rank == 0 ? HCCL_E_PTR : HCCL_E_PARA)) {
    return Fail("a refused send", r);
  }
  return OneWay(buf, buf, Message{HCCL_DATA_TYPE_FP32, 100, 32}, "after the errors");
}

// Rank 1 dies; rank 0's buffered sends succeed while boxes are free (16), then the next fails
// with HCCL_E_REMOTE quickly.
int SendToTheDead(uint8_t *buf, const std::string &log) {
  if (g_rank == 1) {
    unlink(log.c_str());
    raise(SIGKILL);
  }
  HcclResult r = HCCL_SUCCESS;
  int sent = 0;
  for (; sent <= 16; ++sent) {
    if (int rc =
            Quick([&] { return HcclSend(buf, 8, HCCL_DATA_TYPE_INT8, 1, g_comm, nullptr); }, &r)) {
      return rc;
    }
    if (r != HCCL_SUCCESS) {
      break;
    }
  }
  if (sent != 16 || r != HCCL_E_REMOTE) {
    std::fprintf(stderr, "rank 0: %d buffered sends to a dead rank succeeded, then %s\n", sent,
                 HcclGetErrorString(r));
    return 76;
  }
  return 0;
}

// The buffered path (2 ranks, HZC_P2P_BUFFERED_MAX set by the test, HZC_INLINE_MAX=0).
int Buffered(const std::string &log) {
  Arena arena(4 << 20, g_zero_copy);
  if (!arena.ok) {
    return 52;
  }
  uint8_t *at = arena.base + kGuard;
  // The threshold's edges, from and into unaligned buffers.
  for (uint64_t bytes : {g_buffered_max - 1, g_buffered_max, g_buffered_max + 1}) {
    const Message m{HCCL_DATA_TYPE_INT8, bytes, 600 + bytes};
    if (int rc = OneWay(at + 3, at + (1 << 20) + 5, m, "threshold")) {
      return rc;
    }
  }
  int rc = SendsFirst(at);
  rc = rc != 0 ? rc : ManyInFlight(at);
  rc = rc != 0 ? rc : Echo(at + 1, Message{HCCL_DATA_TYPE_INT8, 8, 41});
  rc = rc != 0 ? rc : Echo(at, Message{HCCL_DATA_TYPE_INT8, g_buffered_max, 42});
  rc = rc != 0 ? rc : BufferedMismatch(at);
  rc = rc != 0 ? rc : CheckPaths();
  return rc != 0 ? rc : SendToTheDead(at, log);
}

}  // namespace

int main(int argc, char **argv) {
  hzc::test::RankArgs args;
  if (!hzc::test::ParseRankArgs(argc, argv, 1, 1, &args)) {
    return 50;
  }
  g_n = args.nranks;
  g_rank = args.rank;
  const std::string &scenario = args.scenario;
  g_zero_copy = args.more[0] == "zerocopy";
  const char *inline_max = std::getenv("HZC_INLINE_MAX");
  g_eager_max = std::min<uint64_t>(
      inline_max != nullptr ? std::strtoull(inline_max, nullptr, 10) : 16384, 512 << 10);
  const char *buffered_max = std::getenv("HZC_P2P_BUFFERED_MAX");
  g_buffered_max = buffered_max != nullptr ? std::strtoull(buffered_max, nullptr, 10) : 2048;
  const char *zero_copy_min = std::getenv("HZC_P2P_ZERO_COPY_MIN");
  g_zero_copy_min = zero_copy_min != nullptr ? std::strtoull(zero_copy_min, nullptr, 10) : 4096;
  const std::string log = "/tmp/hzc-p2p-rank-" + std::to_string(getpid()) + ".log";
  if (scenario == "matrix" || scenario == "buffered") {
    // Before the library's first call, which reads the environment once.
    setenv("HZC_LOG", "debug", 1);
    setenv("HZC_LOG_FILE", log.c_str(), 1);
  }
  if (HcclCommInitRootInfo(g_n, &args.root, g_rank, &g_comm) != HCCL_SUCCESS) {
    return 54;
  }
  const int rc = hzc::test::RunScenario({{"matrix", Matrix},
                                         {"mismatch", Mismatch},
                                         {"lateopen", LateOpen},
                                         {"revoke", Revoke},
                                         {"timeout", Timeout},
                                         {"die", Die},
                                         {"buffered", [&log] { return Buffered(log); }}},
                                        scenario, 55);
  const int status = hzc::test::DestroyAfter(g_comm, rc, 56);
  unlink(log.c_str());
  return status;
}
