// SPDX-License-Identifier: Apache-2.0
// hzc-coll-rank's scenario of the bytes between servers (HZC_TEST_PER_SERVER=L, a power of two
// of servers S):
//   traffic  each collective once below HZC_SPAN_RING_MIN and once above it, and a Barrier; around
//            each call, hzc_comm_net_stats: a rank that is not its server's first moves nothing
//            between servers, a first rank sends and receives over the wire what the schedule
//            of docs/architecture.md ("What the leaders move, against the bound") says it does,
//            to the byte, and agrees on the call over its TCP connections (control bytes). Exit
//            62 when a count differs (the rank logs which).
//   direct   (HZC_NET=rdma or socket) in-place AllReduces of 1 MiB (the leaders' ring) and 4 KiB
//            (recursive doubling), a Broadcast of 1 MiB, an AllGather of 1 MiB (the ring, in the
//            output) and a 1 MiB HcclSend from server 0's first rank to server 1's: in zerocopy
//            mode over RDMA every data byte leaves from the activated buffer
//            (hzc_comm_net_sends: direct, none staged) and every byte placed (gathered,
//            broadcast, received; the ring AllReduce's all-gather half) is written straight into
//            it (hzc_comm_net_receives: placed, the rest landed), in staging mode every byte is
//            copied first and lands, over TCP neither is counted. A ReduceScatter and a Reduce
//            of 1 MiB run in the leaders' registered scratch: sent without a copy in either
//            mode. Then (zerocopy) the memory is
//            deactivated, unmapped, other physical memory mapped at the same address and activated:
//            the next AllReduce and send carry the new bytes (a registration kept past the
//            deactivation would send the old pages) and leave directly again. Exit 62 for a wrong
//            count, 63 for a wrong result, 64 when hzc_comm_net_sends or hzc_comm_net_receives
//            fails.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "coll_rank.h"

namespace hzc::coll_rank {
namespace {

constexpr uint64_t kSmall = 4096;     // bytes: below HZC_SPAN_RING_MIN (256 KiB)
constexpr uint64_t kLarge = 1 << 20;  // bytes: above it

struct Expect {
  uint64_t sent = 0, received = 0;  // the first rank's data bytes, per call
};

uint32_t Log2(uint32_t s) {
  uint32_t k = 0;
  while ((1u << k) < s) {
    ++k;
  }
  return k;
}

hzc_net_stats Stats() {
  hzc_net_stats s{};
  if (hzc_comm_net_stats(g_comm, &s) != HCCL_SUCCESS) {
    std::memset(&s, 0xff, sizeof(s));
  }
  return s;
}

// Runs @call once and compares this rank's bytes with @want (a first rank) or with nothing.
int Measure(const std::string &what, const Expect &want, const std::function<HcclResult()> &call) {
  const hzc_net_stats before = Stats();
  if (HcclResult rc = call(); rc != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %u: %s: %d\n", g_rank, what.c_str(), rc);
    return rc;
  }
  const hzc_net_stats after = Stats();
  const uint64_t sent = after.data_sent - before.data_sent;
  const uint64_t received = after.data_received - before.data_received;
  const uint64_t control = after.control_sent - before.control_sent;
  const uint64_t control_in = after.control_received - before.control_received;
  const bool first = g_rank % g_per_server == 0;
  std::fprintf(stderr, "rank %u: %s: data %lu sent, %lu received; control %lu sent, %lu received\n",
               g_rank, what.c_str(), static_cast<unsigned long>(sent),
               static_cast<unsigned long>(received), static_cast<unsigned long>(control),
               static_cast<unsigned long>(control_in));
  const bool ok = first ? sent == want.sent && received == want.received && control > 0
                        : sent == 0 && received == 0 && control == 0 && control_in == 0;
  if (!ok) {
    std::fprintf(stderr, "rank %u: %s: expected data %lu sent, %lu received%s\n", g_rank,
                 what.c_str(), static_cast<unsigned long>(first ? want.sent : 0),
                 static_cast<unsigned long>(first ? want.received : 0),
                 first ? " and some control bytes" : " and no control bytes");
    return 62;
  }
  return 0;
}

struct Buffers {
  std::vector<uint8_t> send, recv;
  uint64_t count = 0;
  HcclDataType type = HCCL_DATA_TYPE_FP32;
};

constexpr int64_t kAll = -1;

// Bytes of the ring's segment @i of @count floats among @n servers (coll/call.h's Blocks).
uint64_t Segment(uint64_t count, uint32_t n, uint32_t i) {
  const uint64_t per = ((count + n - 1) / n + 15) / 16 * 16;
  const uint64_t first = std::min<uint64_t>(count, i * per);
  return (std::min<uint64_t>(count, first + per) - first) * 4;
}

// Runs @call and checks how this rank's data left for other servers and reached it from them:
// over RDMA @direct bytes (kAll: every byte) read from the caller's buffer and the rest copied
// first, @placed bytes (kAll: every byte) written straight into the caller's buffer and the
// rest through the landing slots; over TCP (@rdma false) none counted either way; nothing at
// all on a rank that is not its server's first.
int Leaves(const std::string &what, bool rdma, int64_t direct, int64_t placed,
           const std::function<HcclResult()> &call) {
  const hzc_net_stats before = Stats();
  hzc_net_sends sends_before{}, after{};
  hzc_net_receives receives_before{}, receives_after{};
  if (hzc_comm_net_sends(g_comm, &sends_before) != HCCL_SUCCESS ||
      hzc_comm_net_receives(g_comm, &receives_before) != HCCL_SUCCESS) {
    return 64;
  }
  if (HcclResult rc = call(); rc != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %u: %s: %d\n", g_rank, what.c_str(), rc);
    return rc;
  }
  const hzc_net_stats stats = Stats();
  const uint64_t sent = stats.data_sent - before.data_sent;
  const uint64_t received = stats.data_received - before.data_received;
  if (hzc_comm_net_sends(g_comm, &after) != HCCL_SUCCESS ||
      hzc_comm_net_receives(g_comm, &receives_after) != HCCL_SUCCESS) {
    return 64;
  }
  const uint64_t staged = after.staged - sends_before.staged;
  const uint64_t straight = after.direct - sends_before.direct;
  const uint64_t landed = receives_after.landed - receives_before.landed;
  const uint64_t in_place = receives_after.placed - receives_before.placed;
  std::fprintf(stderr,
               "rank %u: %s: %lu bytes to other servers, %lu staged, %lu direct; %lu bytes from "
               "them, %lu landed, %lu placed\n",
               g_rank, what.c_str(), static_cast<unsigned long>(sent),
               static_cast<unsigned long>(staged), static_cast<unsigned long>(straight),
               static_cast<unsigned long>(received), static_cast<unsigned long>(landed),
               static_cast<unsigned long>(in_place));
  const bool first = g_rank % g_per_server == 0;
  const uint64_t want = direct == kAll ? sent : static_cast<uint64_t>(direct);
  const uint64_t want_placed = placed == kAll ? received : static_cast<uint64_t>(placed);
  const bool none = staged == 0 && straight == 0 && landed == 0 && in_place == 0;
  const bool ok = !first  ? sent == 0 && received == 0 && none
                  : !rdma ? none
                          : straight == want && staged == sent - want && in_place == want_placed &&
                                landed == received - want_placed;
  if (!ok) {
    std::fprintf(stderr, "rank %u: %s: expected %s%lu direct, %lu placed\n", g_rank, what.c_str(),
                 !first  ? "nothing sent or received, "
                 : !rdma ? "nothing counted (TCP), "
                         : "the rest staged or landed, ",
                 static_cast<unsigned long>(first && rdma ? want : 0),
                 static_cast<unsigned long>(first && rdma ? want_placed : 0));
    return 62;
  }
  return 0;
}

// Whether @n bytes at @p are @want(i) each; logs the first that is not.
int ExpectBytes(const char *what, const uint8_t *p, uint64_t n,
                const std::function<uint8_t(uint64_t)> &want) {
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] != want(i)) {
      std::fprintf(stderr, "rank %u: %s byte %lu is %#x, not %#x\n", g_rank, what,
                   static_cast<unsigned long>(i), p[i], want(i));
      return 63;
    }
  }
  return 0;
}

// The in-place AllReduce of @count floats at @buf, rank r's input r + 1 + (i % 5) * @salt,
// checked; its bytes left as Leaves says (@direct: every byte leaves directly).
int SumInPlace(float *buf, uint64_t count, float salt, bool rdma, bool direct) {
  for (uint64_t i = 0; i < count; ++i) {
    buf[i] = static_cast<float>(g_rank + 1) + static_cast<float>(i % 5) * salt;
  }
  // By the ring (from 256 KiB), the all-gather half's segments (every one but this server's)
  // are placed; by recursive doubling nothing is (each round reduces what it received).
  const uint32_t servers = g_n / g_per_server, server = g_rank / g_per_server;
  const int64_t placed = direct && count * 4 >= (256 << 10)
                             ? static_cast<int64_t>(count * 4 - Segment(count, servers, server))
                             : 0;
  if (int rc = Leaves("AllReduce of " + std::to_string(count * 4) + " B", rdma, direct ? kAll : 0,
                      placed, [&] {
                        return HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                                             g_comm, nullptr);
                      })) {
    return rc;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(g_n * (g_n + 1) / 2) +
                       static_cast<float>(g_n) * static_cast<float>(i % 5) * salt;
    if (buf[i] != want) {
      std::fprintf(stderr, "rank %u: AllReduce element %lu is %g, not %g\n", g_rank,
                   static_cast<unsigned long>(i), static_cast<double>(buf[i]),
                   static_cast<double>(want));
      return 63;
    }
  }
  return 0;
}

// @bytes from the first rank of server 0 to that of server 1, @salt in every byte, checked.
int SendAcross(uint8_t *buf, uint64_t bytes, uint8_t salt, bool rdma, bool direct) {
  const uint32_t server = g_rank / g_per_server;
  if (g_rank % g_per_server != 0 || server > 1) {
    return 0;
  }
  const uint32_t peer = server == 0 ? g_per_server : 0;
  std::memset(buf, server == 0 ? salt : 0, bytes);
  // The receiver sends only its answer to the header (copied), the sender the header (copied)
  // and the data, which the receiver finds in place; the headers land.
  const int64_t straight = server == 0 && direct ? static_cast<int64_t>(bytes) : 0;
  const int64_t placed = server == 1 && direct ? static_cast<int64_t>(bytes) : 0;
  if (int rc = Leaves(server == 0 ? "HcclSend" : "HcclRecv", rdma, straight, placed, [&] {
        return server == 0 ? HcclSend(buf, bytes, HCCL_DATA_TYPE_INT8, peer, g_comm, nullptr)
                           : HcclRecv(buf, bytes, HCCL_DATA_TYPE_INT8, peer, g_comm, nullptr);
      })) {
    return rc;
  }
  return ExpectBytes("received", buf, bytes, [salt](uint64_t) { return salt; });
}

// A ReduceScatter of about 1 MiB of input and a Reduce of 1 MiB at @base (2 MiB): the leaders
// run both in their registered scratch, so in either mode every byte leaves from there without
// a copy (the ReduceScatter's received chunks are reduced as they land; the Reduce's AllReduce
// places its all-gather half there). Results checked.
int Temporaries(uint8_t *base, bool rdma) {
  const uint64_t count = (1 << 20) / 4 / g_n;  // ReduceScatter: elements per rank
  auto *in = reinterpret_cast<float *>(base);
  auto *out = reinterpret_cast<float *>(base + (1 << 20));
  auto value = [](uint32_t rank, uint64_t i) {
    return static_cast<float>(rank + 1) + static_cast<float>(i % 7);
  };
  auto sum = [](uint64_t i) {
    return static_cast<float>(g_n * (g_n + 1) / 2) +
           static_cast<float>(g_n) * static_cast<float>(i % 7);
  };
  for (uint64_t i = 0; i < count * g_n; ++i) {
    in[i] = value(g_rank, i);
  }
  if (int rc =
          Leaves("ReduceScatter of " + std::to_string(count * g_n * 4) + " B", rdma, kAll, 0, [&] {
            return HcclReduceScatter(in, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_comm,
                                     nullptr);
          })) {
    return rc;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (out[i] != sum(g_rank * count + i)) {
      std::fprintf(stderr, "rank %u: ReduceScatter element %lu is %g, not %g\n", g_rank,
                   static_cast<unsigned long>(i), static_cast<double>(out[i]),
                   static_cast<double>(sum(g_rank * count + i)));
      return 63;
    }
  }
  const uint64_t n = (1 << 20) / 4;
  const uint32_t servers = g_n / g_per_server, server = g_rank / g_per_server;
  for (uint64_t i = 0; i < n; ++i) {
    in[i] = value(g_rank, i);
  }
  if (int rc = Leaves("Reduce of 1 MiB", rdma, kAll,
                      static_cast<int64_t>(n * 4 - Segment(n, servers, server)), [&] {
                        return HcclReduce(in, out, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0,
                                          g_comm, nullptr);
                      })) {
    return rc;
  }
  for (uint64_t i = 0; i < n && g_rank == 0; ++i) {
    if (out[i] != sum(i)) {
      std::fprintf(stderr, "rank 0: Reduce element %lu is %g, not %g\n",
                   static_cast<unsigned long>(i), static_cast<double>(out[i]),
                   static_cast<double>(sum(i)));
      return 63;
    }
  }
  return 0;
}

// Other physical memory mapped and activated at @arena's address.
int Replace(Arena &arena) {
  aclrtPhysicalMemProp prop{};
  prop.memAttr = ACL_HBM_MEM_NORMAL;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  aclrtDrvMemHandle fresh = nullptr;
  if (HcclCommDeactivateCommMemory(arena.comm, arena.va) != HCCL_SUCCESS ||
      aclrtUnmapMem(arena.va) != ACL_SUCCESS || aclrtFreePhysical(arena.handle) != ACL_SUCCESS ||
      aclrtMallocPhysical(&fresh, arena.size, &prop, 0) != ACL_SUCCESS) {
    return 52;
  }
  arena.handle = fresh;
  if (aclrtMapMem(arena.va, arena.size, 0, fresh, 0) != ACL_SUCCESS ||
      HcclCommActivateCommMemory(arena.comm, arena.va, arena.size, 0, fresh, 0) != HCCL_SUCCESS) {
    return 52;
  }
  return 0;
}

int Direct() {
  const char *net = std::getenv("HZC_NET");
  if (g_per_server == 0 || g_n % g_per_server != 0 || g_n / g_per_server < 2 || net == nullptr ||
      (std::string(net) != "rdma" && std::string(net) != "socket")) {
    return 51;
  }
  const bool rdma = std::string(net) == "rdma";
  const bool zc = g_zero_copy;
  constexpr uint64_t kBytes = 1 << 20;
  Arena arena(2 * kBytes, zc);
  if (!arena.ok) {
    return 52;
  }
  uint8_t *base = arena.base;
  auto *buf = reinterpret_cast<float *>(base);
  // AllReduce by the ring (1 MiB) and by recursive doubling (4 KiB), in place.
  if (int rc = SumInPlace(buf, kBytes / 4, 1.0f, rdma, zc)) {
    return rc;
  }
  if (int rc = SumInPlace(buf, 1024, 2.0f, rdma, zc)) {
    return rc;
  }
  // Broadcast of 1 MiB from rank 0 (the tree, or scattered and all-gathered), in the buffer.
  auto pattern = [](uint64_t i) { return static_cast<uint8_t>(i * 7 + 3); };
  for (uint64_t i = 0; i < kBytes; ++i) {
    base[i] = g_rank == 0 ? pattern(i) : 0;
  }
  if (int rc = Leaves("Broadcast of 1 MiB", rdma, zc ? kAll : 0, zc ? kAll : 0, [&] {
        return HcclBroadcast(base, kBytes, HCCL_DATA_TYPE_INT8, 0, g_comm, nullptr);
      })) {
    return rc;
  }
  if (int rc = ExpectBytes("broadcast", base, kBytes, pattern)) {
    return rc;
  }
  // AllGather of 1 MiB of output by the ring (consecutive ranks: in the output itself).
  const uint64_t block = kBytes / g_n;
  std::memset(base + kBytes, static_cast<int>(g_rank + 1), block);
  if (int rc = Leaves("AllGather of 1 MiB", rdma, zc ? kAll : 0, zc ? kAll : 0, [&] {
        return HcclAllGather(base + kBytes, base, block, HCCL_DATA_TYPE_INT8, g_comm, nullptr);
      })) {
    return rc;
  }
  if (int rc = ExpectBytes("gathered", base, block * g_n,
                           [block](uint64_t i) { return static_cast<uint8_t>(i / block + 1); })) {
    return rc;
  }
  if (int rc = Temporaries(base, rdma)) {
    return rc;
  }
  if (int rc = SendAcross(base, kBytes, 0x5a, rdma, zc)) {
    return rc;
  }
  if (!zc) {
    return 0;
  }
  // The same address, other memory: sent afresh by the leaders' wire and the pair's link.
  if (int rc = Replace(arena)) {
    return rc;
  }
  if (int rc = SumInPlace(buf, kBytes / 4, 3.0f, rdma, true)) {
    return rc;
  }
  return SendAcross(base, kBytes, 0xa5, rdma, true);
}

}  // namespace

int TrafficScenario(const std::string &scenario) {
  if (scenario == "direct") {
    return Direct();
  }
  if (scenario != "traffic") {
    return -1;
  }
  if (g_per_server == 0 || g_n % g_per_server != 0) {
    return 51;
  }
  const uint32_t s = g_n / g_per_server, server = g_rank / g_per_server, k = Log2(s);
  if ((1u << k) != s || s < 2) {
    return 51;  // the expectations below are for a power of two of servers
  }
  Buffers b;
  b.send.assign(kLarge, 1);
  b.recv.assign(kLarge, 0);
  for (uint64_t m : {kSmall, kLarge}) {
    const std::string size = " of " + std::to_string(m) + " B";
    // AllReduce: recursive doubling (log2 S rounds, the whole buffer each) or the ring
    // (2 (S-1)/S M each way).
    b.count = m / 4;
    const uint64_t ring = 2 * (s - 1) * (m / s);
    const Expect all_reduce = m < (256 << 10) ? Expect{k * m, k * m} : Expect{ring, ring};
    if (int rc = Measure("AllReduce" + size, all_reduce, [&] {
          return HcclAllReduce(b.send.data(), b.recv.data(), b.count, HCCL_DATA_TYPE_FP32,
                               HCCL_REDUCE_SUM, g_comm, nullptr);
        })) {
      return rc;
    }
    // AllGather (M: the output): Bruck or the ring, (S-1)/S M each way.
    b.count = m / g_n;
    const Expect gather{(s - 1) * (m / s), (s - 1) * (m / s)};
    if (int rc = Measure("AllGather" + size, gather, [&] {
          return HcclAllGather(b.send.data(), b.recv.data(), b.count, HCCL_DATA_TYPE_INT8, g_comm,
                               nullptr);
        })) {
      return rc;
    }
    // ReduceScatter (M: the input): recursive halving or the ring, (S-1)/S M each way.
    b.count = m / 4 / g_n;
    if (int rc = Measure("ReduceScatter" + size, gather, [&] {
          return HcclReduceScatter(b.send.data(), b.recv.data(), b.count, HCCL_DATA_TYPE_FP32,
                                   HCCL_REDUCE_SUM, g_comm, nullptr);
        })) {
      return rc;
    }
    // Broadcast from rank 0: the binomial tree (the root's first rank sends M to each of its
    // log2 S children, the first ranks of the others receive M once and pass it on to theirs);
    // from 256 KiB and 3 servers on, scattered and all-gathered.
    b.count = m;
    Expect bcast{};
    if (m < (256 << 10) || s == 2) {
      // The tree (servers numbered from the root's): server v's children are v + 2^j for every
      // 2^j below v's lowest set bit (below S for the root), largest first.
      const uint32_t low = server == 0 ? s : server & (~server + 1);
      uint32_t children = 0;
      for (uint32_t j = 1; j < low; j <<= 1) {
        children += server + j < s;
      }
      bcast = {children * m, server == 0 ? 0 : m};
    } else {
      // The root's first rank sends each other its block, then each the others' (it needs
      // none back); every other sends its block to the S - 2 others.
      bcast = server == 0 ? Expect{2 * (s - 1) * (m / s), 0} : Expect{(s - 2) * (m / s), m};
    }
    if (int rc = Measure("Broadcast" + size, bcast, [&] {
          return HcclBroadcast(b.send.data(), b.count, HCCL_DATA_TYPE_INT8, 0, g_comm, nullptr);
        })) {
      return rc;
    }
  }
  // Barrier: dissemination, log2 S messages of 8 bytes each way.
  return Measure("Barrier", Expect{8 * k, 8 * k}, [] { return HcclBarrier(g_comm, nullptr); });
}

}  // namespace hzc::coll_rank
