// SPDX-License-Identifier: Apache-2.0
// hzc-coll-rank's scenarios of HCCL's one-sided calls in communicators that span servers
// (servers of HZC_TEST_PER_SERVER=L ranks):
// Over RDMA where the servers have it, else over TCP (HZC_NET=socket).
//   onesided  (two servers; rank r pairs with r + L or r - L) each rank registers a 1 MiB window
//             and a 1 MiB source for its pair, swaps the window's descriptor with it and enables
//             its pair's window; then writes its pattern into the first half of the pair's
//             window (HcclBatchPut, 16 transfers, now) and reads the second half, which the pair
//             filled itself (HcclBatchGet, on a stream); with L > 1 it also writes 64 KiB into
//             its neighbour's window on its own server; every byte of the windows is checked
//             after a barrier. A write past the enabled window, from memory not registered,
//             after HcclDisableMemAccess, and a second deregistration fail with their codes, and
//             so do a deregistration and a disable while a batch that uses them is queued
//             (HeldWhileQueued).
//   onesidedglobal  (two or more servers of two or more ranks) the same with global memory: a
//             window bound to the communicator and HcclCommPrepare, written by every rank of the
//             other servers and read without per-peer registrations (RunGlobal).
//   cutonesided  (two servers) transfers to the pair until the test cuts the link or kills a
//             server: a transfer error within HCCL_EXEC_TIMEOUT, then a quick destroy (RunCut).
//   cutonesidedglobal  (three or more servers) global memory prepared among all; every round
//             writes into every rank of the other servers until the test kills a server: every
//             other rank fails within HCCL_EXEC_TIMEOUT, then a quick destroy (RunCutGlobal).
//   onesidednone  (HZC_NET=rdma on servers without RDMA) every one-sided call to another server
//             is HCCL_E_NOT_SUPPORT (RunNone).
//   onesidedmixed  (three servers asking for RDMA, TCP and either) HcclCommPrepare fails fast on
//             every rank (RunMixed).
// Exit 63 when a byte or a code differs (the rank logs which).
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coll_rank.h"
#include "onesided_rank.h"

namespace hzc::coll_rank {
namespace {

using onesided::Check;
using onesided::EnableWindow;
using onesided::HeldWhileQueued;
using onesided::kPieces;
using onesided::kWindow;
using onesided::Pattern;
using onesided::Pieces;
using onesided::Want;

int Run() {
  const uint32_t per = g_per_server;
  const uint32_t pair = g_rank < per ? g_rank + per : g_rank - per;
  std::vector<uint8_t> window(kWindow), source(kWindow), loose(64);
  for (size_t i = 0; i < kWindow; ++i) {
    window[i] = i < kWindow / 2 ? 0 : Pattern(g_rank, i);
    source[i] = Pattern(g_rank, i);
  }
  HcclMemDesc win{}, src{};
  if (!Want("HcclRegisterMem window",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_HOST, window.data(), kWindow, &win),
            HCCL_SUCCESS) ||
      !Want("HcclRegisterMem source",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_DEVICE, source.data(), kWindow, &src),
            HCCL_SUCCESS)) {
    return 63;
  }
  HcclMemDesc theirs[2]{};
  HcclMemDescs local{&win, 1}, remote{theirs, 2};
  uint32_t got = 0;
  if (!Want("HcclExchangeMemDesc", HcclExchangeMemDesc(g_comm, pair, &local, 0, &remote, &got),
            HCCL_SUCCESS)) {
    return 63;
  }
  if (got != 1) {
    std::fprintf(stderr, "rank %u: HcclExchangeMemDesc: %u descriptors, expected 1\n", g_rank, got);
    return 63;
  }
  uint8_t *const remote_window = EnableWindow(&theirs[0]);
  if (remote_window == nullptr) {
    return 63;
  }
  // Writes into the first half of the pair's window, now.
  std::vector<HcclOneSideOpDesc> put = Pieces(source.data(), remote_window);
  if (!Want("HcclBatchPut", HcclBatchPut(g_comm, pair, put.data(), kPieces, nullptr),
            HCCL_SUCCESS)) {
    return 63;
  }
  // Reads the second half of the pair's window into the second half of the source, on a stream.
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 63;
  }
  std::vector<uint8_t> back(kWindow, 0);
  HcclMemDesc back_desc{};
  if (!Want("HcclRegisterMem back",
            HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_HOST, back.data(), kWindow, &back_desc),
            HCCL_SUCCESS)) {
    return 63;
  }
  std::vector<HcclOneSideOpDesc> get =
      Pieces(back.data() + kWindow / 2, remote_window + kWindow / 2);
  if (!Want("HcclBatchGet", HcclBatchGet(g_comm, pair, get.data(), kPieces, stream),
            HCCL_SUCCESS) ||
      !Want("aclrtSynchronizeStream",
            static_cast<HcclResult>(aclrtSynchronizeStream(stream) == ACL_SUCCESS ? 0 : 4),
            HCCL_SUCCESS)) {
    return 63;
  }
  if (int rc = Check("HcclBatchGet's bytes", back.data(), kWindow / 2, kWindow, pair)) {
    return rc;
  }
  // Past the enabled window, from memory not registered.
  HcclOneSideOpDesc past{source.data(), remote_window + kWindow - 8, 16, HCCL_DATA_TYPE_INT8};
  HcclOneSideOpDesc unregistered{loose.data(), remote_window, 16, HCCL_DATA_TYPE_INT8};
  if (!Want("HcclBatchPut past the window", HcclBatchPut(g_comm, pair, &past, 1, nullptr),
            HCCL_E_PARA) ||
      !Want("HcclBatchPut from memory not registered",
            HcclBatchPut(g_comm, pair, &unregistered, 1, nullptr), HCCL_E_PARA)) {
    return 63;
  }
  // The neighbour on this server (through the RDMA device's loopback, or TCP): 64 KiB of the source
  // into its small window.
  constexpr size_t kNear = 64 << 10;
  const uint32_t neighbour = g_rank ^ 1;
  std::vector<uint8_t> near(kNear, 0);
  HcclMemDesc near_desc{}, near_theirs{};
  if (per > 1) {
    HcclMemDescs near_local{&near_desc, 1}, near_remote{&near_theirs, 1};
    HcclMem near_mem{};
    HcclOneSideOpDesc op{};
    if (!Want(
            "HcclRegisterMem for a rank of this server",
            HcclRegisterMem(g_comm, neighbour, HCCL_MEM_TYPE_HOST, near.data(), kNear, &near_desc),
            HCCL_SUCCESS) ||
        !Want("HcclExchangeMemDesc with a rank of this server",
              HcclExchangeMemDesc(g_comm, neighbour, &near_local, 0, &near_remote, &got),
              HCCL_SUCCESS) ||
        !Want("HcclEnableMemAccess of a rank of this server",
              HcclEnableMemAccess(g_comm, &near_theirs, &near_mem), HCCL_SUCCESS)) {
      return 63;
    }
    op = {source.data(), near_mem.addr, kNear, HCCL_DATA_TYPE_INT8};
    if (!Want("HcclBatchPut to a rank of this server",
              HcclBatchPut(g_comm, neighbour, &op, 1, nullptr), HCCL_SUCCESS)) {
      return 63;
    }
  }
  // Every pair has written: each window's first half is its pair's pattern.
  if (!Want("HcclBarrier", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS)) {
    return 63;
  }
  if (int rc = Check("the pair's HcclBatchPut", window.data(), 0, kWindow / 2, pair)) {
    return rc;
  }
  if (int rc = Check("this rank's own half", window.data(), kWindow / 2, kWindow, g_rank)) {
    return rc;
  }
  if (per > 1) {
    if (int rc = Check("the neighbour's HcclBatchPut", near.data(), 0, kNear, neighbour)) {
      return rc;
    }
    if (!Want("HcclDisableMemAccess of the neighbour's", HcclDisableMemAccess(g_comm, &near_theirs),
              HCCL_SUCCESS) ||
        !Want("HcclDeregisterMem near", HcclDeregisterMem(g_comm, &near_desc), HCCL_SUCCESS)) {
      return 63;
    }
  }
  if (int rc = HeldWhileQueued(g_rank < per, pair, &src, &theirs[0], put, remote_window,
                               back.data(), window.data())) {
    return rc;
  }
  if (!Want("HcclDisableMemAccess", HcclDisableMemAccess(g_comm, &theirs[0]), HCCL_SUCCESS) ||
      !Want("HcclBatchPut after HcclDisableMemAccess",
            HcclBatchPut(g_comm, pair, put.data(), 1, nullptr), HCCL_E_PARA) ||
      !Want("HcclDisableMemAccess again", HcclDisableMemAccess(g_comm, &theirs[0]),
            HCCL_E_NOT_FOUND) ||
      !Want("HcclDeregisterMem window", HcclDeregisterMem(g_comm, &win), HCCL_SUCCESS) ||
      !Want("HcclDeregisterMem window again", HcclDeregisterMem(g_comm, &win), HCCL_E_NOT_FOUND) ||
      !Want("HcclDeregisterMem source", HcclDeregisterMem(g_comm, &src), HCCL_SUCCESS) ||
      !Want("HcclDeregisterMem back", HcclDeregisterMem(g_comm, &back_desc), HCCL_SUCCESS)) {
    return 63;
  }
  (void)aclrtDestroyStream(stream);
  // No rank deregisters its window before its pair's transfers are done.
  return HcclBarrier(g_comm, nullptr) == HCCL_SUCCESS ? 0 : 63;
}

// Global memory (S servers of L >= 2 ranks): every rank binds a window of one 64 KiB slot per
// rank and prepares the communicator (HCCL_TOPO_FULLMESH); each writes its pattern into its slot
// of every window of the other servers, then reads its pair's own slot (the same index on the
// next server) into the slot of its neighbour of this server (which nobody writes).
int RunGlobal() {
  constexpr size_t kSlot = 64 << 10;
  const uint32_t per = g_per_server;
  const auto server = [per](uint32_t r) { return r / per; };
  const uint32_t pair = (g_rank + per) % g_n;
  std::vector<uint8_t> window(kSlot * g_n, 0);
  for (size_t i = 0; i < kSlot; ++i) {
    window[g_rank * kSlot + i] = Pattern(g_rank, i);
  }
  HcclMem mem{HCCL_MEM_TYPE_HOST, window.data(), window.size()};
  void *handle = nullptr, *late = nullptr;
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  if (!Want("HcclRegisterGlobalMem", HcclRegisterGlobalMem(&mem, &handle), HCCL_SUCCESS) ||
      !Want("HcclCommBindMem", HcclCommBindMem(g_comm, handle), HCCL_SUCCESS) ||
      !Want("HcclCommBindMem again", HcclCommBindMem(g_comm, handle), HCCL_E_PARA) ||
      !Want("HcclDeregisterGlobalMem while bound", HcclDeregisterGlobalMem(handle), HCCL_E_PARA) ||
      !Want("HcclCommPrepare", HcclCommPrepare(g_comm, &config, 0), HCCL_SUCCESS) ||
      !Want("HcclCommPrepare again", HcclCommPrepare(g_comm, &config, 0), HCCL_SUCCESS) ||
      !Want("HcclRegisterGlobalMem late", HcclRegisterGlobalMem(&mem, &late), HCCL_SUCCESS) ||
      !Want("HcclCommBindMem after HcclCommPrepare", HcclCommBindMem(g_comm, late), HCCL_E_PARA) ||
      !Want("HcclDeregisterGlobalMem late", HcclDeregisterGlobalMem(late), HCCL_SUCCESS)) {
    return 63;
  }
  // Where every rank's window is.
  std::vector<uint64_t> where(g_n);
  uint64_t mine = reinterpret_cast<uint64_t>(window.data());
  if (!Want("HcclAllGather of the windows",
            HcclAllGather(&mine, where.data(), 1, HCCL_DATA_TYPE_UINT64, g_comm, nullptr),
            HCCL_SUCCESS)) {
    return 63;
  }
  for (uint32_t p = 0; p < g_n; ++p) {
    if (server(p) == server(g_rank)) {
      continue;
    }
    HcclOneSideOpDesc op{window.data() + g_rank * kSlot,
                         reinterpret_cast<uint8_t *>(where[p]) + g_rank * kSlot, kSlot,
                         HCCL_DATA_TYPE_INT8};
    if (!Want("HcclBatchPut into a window of another server",
              HcclBatchPut(g_comm, p, &op, 1, nullptr), HCCL_SUCCESS)) {
      return 63;
    }
  }
  if (!Want("HcclBarrier", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS)) {
    return 63;
  }
  for (uint32_t q = 0; q < g_n; ++q) {
    const bool written = q == g_rank || server(q) != server(g_rank);
    for (size_t i = 0; i < kSlot; ++i) {
      const uint8_t want = written ? Pattern(q, i) : 0;
      if (window[q * kSlot + i] != want) {
        std::fprintf(stderr, "rank %u: slot %u byte %zu is %u, expected %u\n", g_rank, q, i,
                     window[q * kSlot + i], want);
        return 63;
      }
    }
  }
  const uint32_t neighbour = server(g_rank) * per + (g_rank + 1) % per;
  HcclOneSideOpDesc get{window.data() + neighbour * kSlot,
                        reinterpret_cast<uint8_t *>(where[pair]) + pair * kSlot, kSlot,
                        HCCL_DATA_TYPE_INT8};
  if (!Want("HcclBatchGet from the pair's window", HcclBatchGet(g_comm, pair, &get, 1, nullptr),
            HCCL_SUCCESS)) {
    return 63;
  }
  for (size_t i = 0; i < kSlot; ++i) {
    if (window[neighbour * kSlot + i] != Pattern(pair, i)) {
      std::fprintf(stderr, "rank %u: HcclBatchGet: byte %zu is wrong\n", g_rank, i);
      return 63;
    }
  }
  if (!Want("HcclBarrier", HcclBarrier(g_comm, nullptr), HCCL_SUCCESS) ||
      !Want("HcclCommUnbindMem", HcclCommUnbindMem(g_comm, handle), HCCL_SUCCESS) ||
      !Want("HcclCommUnbindMem again", HcclCommUnbindMem(g_comm, handle), HCCL_E_PARA) ||
      !Want("HcclDeregisterGlobalMem", HcclDeregisterGlobalMem(handle), HCCL_SUCCESS)) {
    return 63;
  }
  return HcclBarrier(g_comm, nullptr) == HCCL_SUCCESS ? 0 : 63;
}

// A cut link or a dead server during one-sided transfers: each rank writes to and reads from
// its pair on the other server (1 MiB each way per round) until a call fails (FailUntilCut):
// with HCCL_E_ROCE_TRANSFER (RDMA), HCCL_E_TCP_TRANSFER (TCP) or HCCL_E_REMOTE, and the link to
// the pair stays broken: the next transfer fails at once with the same code.
int RunCut() {
  constexpr size_t kBytes = 1 << 20;
  const uint32_t pair = (g_rank + g_per_server) % g_n;
  std::vector<uint8_t> mem(2 * kBytes, 1);
  HcclMemDesc mine{}, theirs{};
  HcclMemDescs local{&mine, 1}, remote{&theirs, 1};
  uint32_t got = 0;
  HcclMem peer{};
  if (HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_HOST, mem.data(), mem.size(), &mine) !=
          HCCL_SUCCESS ||
      HcclExchangeMemDesc(g_comm, pair, &local, 0, &remote, &got) != HCCL_SUCCESS ||
      HcclEnableMemAccess(g_comm, &theirs, &peer) != HCCL_SUCCESS) {
    return 53;
  }
  auto *const base = static_cast<uint8_t *>(peer.addr);
  HcclOneSideOpDesc put{mem.data(), base + kBytes, kBytes, HCCL_DATA_TYPE_INT8};
  HcclOneSideOpDesc get{mem.data() + kBytes, base, kBytes, HCCL_DATA_TYPE_INT8};
  auto call = [&] {
    HcclResult r = HcclBatchPut(g_comm, pair, &put, 1, nullptr);
    return r != HCCL_SUCCESS ? r : HcclBatchGet(g_comm, pair, &get, 1, nullptr);
  };
  HcclResult failed = HCCL_SUCCESS;
  // After the failure, the link to the pair is broken for good: later transfers fail at once.
  return FailUntilCut(
      call,
      [&failed](HcclResult r) {
        failed = r;
        return r == HCCL_E_ROCE_TRANSFER || r == HCCL_E_TCP_TRANSFER || r == HCCL_E_REMOTE;
      },
      [&] { return HcclBatchPut(g_comm, pair, &put, 1, nullptr) == failed ? 0 : 75; });
}

// A dead server among three or more, during one-sided transfers: every rank's window bound and
// prepared; each round writes 256 KiB into every rank of the other servers (FailUntilCut), so a
// server that dies fails every other rank. The bound memory is unbound before the destroy.
int RunCutGlobal() {
  constexpr size_t kBytes = 256 << 10;
  const uint32_t per = g_per_server;
  std::vector<uint8_t> window(kBytes * g_n, 1);
  HcclMem mem{HCCL_MEM_TYPE_HOST, window.data(), window.size()};
  void *handle = nullptr;
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  std::vector<uint64_t> where(g_n);
  uint64_t mine = reinterpret_cast<uint64_t>(window.data());
  if (HcclRegisterGlobalMem(&mem, &handle) != HCCL_SUCCESS ||
      HcclCommBindMem(g_comm, handle) != HCCL_SUCCESS ||
      HcclCommPrepare(g_comm, &config, 0) != HCCL_SUCCESS ||
      HcclAllGather(&mine, where.data(), 1, HCCL_DATA_TYPE_UINT64, g_comm, nullptr) !=
          HCCL_SUCCESS) {
    return 53;
  }
  auto call = [&] {
    for (uint32_t p = 0; p < g_n; ++p) {
      if (p / per == g_rank / per) {
        continue;
      }
      HcclOneSideOpDesc op{window.data() + g_rank * kBytes,
                           reinterpret_cast<uint8_t *>(where[p]) + g_rank * kBytes, kBytes,
                           HCCL_DATA_TYPE_INT8};
      if (HcclResult r = HcclBatchPut(g_comm, p, &op, 1, nullptr); r != HCCL_SUCCESS) {
        return r;
      }
    }
    return HCCL_SUCCESS;
  };
  return FailUntilCut(
      call,
      [](HcclResult r) {
        return r == HCCL_E_ROCE_TRANSFER || r == HCCL_E_TCP_TRANSFER || r == HCCL_E_REMOTE;
      },
      [&] {
        return HcclCommUnbindMem(g_comm, handle) == HCCL_SUCCESS &&
                       HcclDeregisterGlobalMem(handle) == HCCL_SUCCESS
                   ? 0
                   : 79;
      });
}

// HZC_NET=rdma on servers without an RDMA device: every one-sided call that would reach another
// server is HCCL_E_NOT_SUPPORT (the collectives between servers would be too).
int RunNone() {
  const uint32_t pair = (g_rank + g_per_server) % g_n;
  std::vector<uint8_t> mem(4096);
  HcclMemDesc desc{}, theirs{};
  HcclMemDescs local{&desc, 0}, remote{&theirs, 1};
  uint32_t got = 0;
  HcclMem window{HCCL_MEM_TYPE_HOST, mem.data(), mem.size()};
  void *handle = nullptr;
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  const bool ok =
      Want("HcclRegisterMem without RDMA",
           HcclRegisterMem(g_comm, pair, HCCL_MEM_TYPE_HOST, mem.data(), mem.size(), &desc),
           HCCL_E_NOT_SUPPORT) &&
      Want("HcclExchangeMemDesc without RDMA",
           HcclExchangeMemDesc(g_comm, pair, &local, 0, &remote, &got), HCCL_E_NOT_SUPPORT) &&
      Want("HcclRegisterGlobalMem", HcclRegisterGlobalMem(&window, &handle), HCCL_SUCCESS) &&
      Want("HcclCommBindMem without RDMA", HcclCommBindMem(g_comm, handle), HCCL_E_NOT_SUPPORT) &&
      Want("HcclCommPrepare without RDMA", HcclCommPrepare(g_comm, &config, 0),
           HCCL_E_NOT_SUPPORT) &&
      Want("HcclDeregisterGlobalMem", HcclDeregisterGlobalMem(handle), HCCL_SUCCESS);
  return ok ? 0 : 63;
}

}  // namespace

// Three servers whose ranks ask for RDMA, TCP and either (HZC_TEST_NET_BY_SERVER=rdma,socket,
// auto): every rank binds a window and prepares with no time limit. The first two servers have
// no kind of link in common (HCCL_E_PARA), so HcclCommPrepare fails there; their ranks then stay
// (5 s) without reading anything, and every rank of the third, linked with both, must learn that
// they gave up (HCCL_E_REMOTE) well before they leave (within 4 s) instead of waiting for their
// descriptors.
int RunMixed() {
  std::vector<uint8_t> window(64 << 10, 0);
  HcclMem mem{HCCL_MEM_TYPE_HOST, window.data(), window.size()};
  void *handle = nullptr;
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  const bool third = g_rank / g_per_server == 2;
  if (!Want("HcclRegisterGlobalMem", HcclRegisterGlobalMem(&mem, &handle), HCCL_SUCCESS) ||
      !Want("HcclCommBindMem", HcclCommBindMem(g_comm, handle), HCCL_SUCCESS)) {
    return 63;
  }
  const auto start = std::chrono::steady_clock::now();
  if (!Want("HcclCommPrepare", HcclCommPrepare(g_comm, &config, -1),
            third ? HCCL_E_REMOTE : HCCL_E_PARA)) {
    return 63;
  }
  if (!third) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
  } else if (std::chrono::steady_clock::now() - start > std::chrono::seconds(4)) {
    std::fprintf(stderr, "rank %u: HcclCommPrepare waited for the ranks that gave up\n", g_rank);
    return 63;
  }
  return Want("HcclCommUnbindMem", HcclCommUnbindMem(g_comm, handle), HCCL_SUCCESS) &&
                 Want("HcclDeregisterGlobalMem", HcclDeregisterGlobalMem(handle), HCCL_SUCCESS)
             ? 0
             : 63;
}

int OneSidedScenario(const std::string &scenario) {
  if (scenario != "onesided" && scenario != "onesidedglobal" && scenario != "cutonesided" &&
      scenario != "cutonesidedglobal" && scenario != "onesidednone" &&
      scenario != "onesidedmixed") {
    return -1;
  }
  if (g_per_server == 0 || g_n % g_per_server != 0 || g_n < 2 * g_per_server) {
    return 51;
  }
  if (scenario == "cutonesided") {
    return RunCut();
  }
  if (scenario == "cutonesidedglobal") {
    return g_n >= 3 * g_per_server ? RunCutGlobal() : 51;
  }
  if (scenario == "onesidednone") {
    return RunNone();
  }
  if (scenario == "onesidedmixed") {
    return g_n == 3 * g_per_server ? RunMixed() : 51;
  }
  if (scenario == "onesidedglobal") {
    return g_per_server >= 2 ? RunGlobal() : 51;
  }
  return g_n == 2 * g_per_server ? Run() : 51;  // two servers
}

}  // namespace hzc::coll_rank
