// SPDX-License-Identifier: Apache-2.0
// The sub-communicator scenario of hzc-coll-rank (coll_rank.cpp) across servers:
//   subcomm  (HZC_TEST_PER_SERVER=2, 4 ranks) sub-communicators of the spanning communicator
//            that span the servers too: {0,2} and {1,3} (one rank per server) and {0,1,2}
//            (two ranks on server 1, one on server 2); rank 3 calls HcclCreateSubCommConfig as
//            a rank outside {0,1,2}. First an AllReduce on the parent (so that it has its own
//            state on the connections), then:
//            1. on each sub-communicator (the one-per-server ones and {0,1,2} from two threads
//               of each rank at once, so that messages of three communicators share the
//               connections between ranks 0 and 2): AllReduce of several types and ops, sizes
//               from 1 element to 3 MiB + odd bytes (more than one 1 MiB chunk), AllGather,
//               Broadcast from each server;
//            2. HcclSend and HcclRecv of 3 MiB + 3 bytes each way on {0,2} and {1,3};
//            3. an AllReduce whose members disagree on the count on {0,2} and {1,3}:
//               HCCL_E_PARA on both members, then a matching one works;
//            4. the parent is destroyed, then an AllReduce and a transfer on the
//               sub-communicators still work.
//            Every byte is checked against a reference made here, and the guard bytes around
//            every buffer.
// Exit status as coll_rank.cpp's; 81 a sub-communicator could not be made, 83 the disagreeing
// call did not fail with HCCL_E_PARA, 84 or 85 a destroy failed. The parent is destroyed here
// (main does not).
#include <hccl/hccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "coll_rank.h"
#include "reference.h"

namespace hzc::coll_rank {
namespace {

// A sub-communicator: its members (ranks of g_comm) and this rank's handle.
struct Sub {
  const char *name;
  std::vector<uint32_t> members;
  HcclComm comm = nullptr;

  uint32_t size() const { return static_cast<uint32_t>(members.size()); }
  uint32_t Position(uint32_t parent_rank) const {
    for (uint32_t i = 0; i < size(); ++i) {
      if (members[i] == parent_rank) {
        return i;
      }
    }
    return size();
  }
  uint32_t me() const { return Position(g_rank); }
};

// A heap buffer with guard bytes on both sides.
struct Buf {
  explicit Buf(size_t n) : bytes(n), v(n + 2 * kGuard, kGuardByte) {}
  uint8_t *data() { return v.data() + kGuard; }
  bool Guarded() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (v[i] != kGuardByte || v[kGuard + bytes + i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }
  size_t bytes;
  std::vector<uint8_t> v;
};

// Member @m's input (@count elements of @type) of call @seed.
std::vector<uint8_t> Input(const Sub &s, uint32_t m, HcclDataType type, uint64_t count,
                           uint64_t seed) {
  const size_t es = test::RefTypeSize(type);
  std::vector<uint8_t> v(count * es);
  test::FillInput(type, es, s.members[m], seed, v.data(), count);
  return v;
}

// The reduction of @in (one input per member of @s) as the collectives make it: the members of
// each server first (members ascend, so a server's are consecutive), then the servers'
// partial results in server order.
void SubReference(const Sub &s, HcclDataType type, HcclReduceOp op,
                  const std::vector<std::vector<uint8_t>> &in, void *out, uint64_t count) {
  std::vector<std::vector<uint8_t>> partial;
  std::vector<const void *> server;
  for (uint32_t m = 0; m < s.size(); ++m) {
    server.push_back(in[m].data());
    if (m + 1 == s.size() || s.members[m + 1] / g_per_server != s.members[m] / g_per_server) {
      partial.emplace_back(in[m].size());
      test::RefReduce(type, op, server, partial.back().data(), count);
      server.clear();
    }
  }
  std::vector<const void *> parts;
  for (const auto &p : partial) {
    parts.push_back(p.data());
  }
  test::RefReduce(type, op, parts, out, count);
}

// 0, or 60 (the bytes differ from @want) / 61 (a guard byte changed), with a line on stderr.
int Compare(const Sub &s, const char *what, Buf &got, const std::vector<uint8_t> &want) {
  if (std::memcmp(got.data(), want.data(), want.size()) != 0) {
    size_t i = 0;
    while (got.data()[i] == want[i]) {
      ++i;
    }
    std::fprintf(stderr, "rank %u: %s on %s: byte %zu of %zu is wrong\n", g_rank, what, s.name, i,
                 want.size());
    return 60;
  }
  if (!got.Guarded()) {
    std::fprintf(stderr, "rank %u: %s on %s: a guard byte changed\n", g_rank, what, s.name);
    return 61;
  }
  return 0;
}

int Failed(const Sub &s, const char *what, HcclResult r) {
  std::fprintf(stderr, "rank %u: %s on %s: %s\n", g_rank, what, s.name, HcclGetErrorString(r));
  return r;
}

int AllReduce(const Sub &s, HcclDataType type, HcclReduceOp op, uint64_t count, uint64_t seed) {
  const size_t bytes = count * test::RefTypeSize(type);
  std::vector<std::vector<uint8_t>> in;
  for (uint32_t m = 0; m < s.size(); ++m) {
    in.push_back(Input(s, m, type, count, seed));
  }
  Buf send(bytes), recv(bytes);
  std::memcpy(send.data(), in[s.me()].data(), bytes);
  if (HcclResult r = HcclAllReduce(send.data(), recv.data(), count, type, op, s.comm, nullptr);
      r != HCCL_SUCCESS) {
    return Failed(s, "AllReduce", r);
  }
  std::vector<uint8_t> want(bytes);
  SubReference(s, type, op, in, want.data(), count);
  return Compare(s, "AllReduce", recv, want);
}

int AllGather(const Sub &s, uint64_t count, uint64_t seed) {
  const auto type = HCCL_DATA_TYPE_FP32;
  const size_t bytes = count * 4;
  Buf send(bytes), recv(bytes * s.size());
  std::vector<uint8_t> want;
  for (uint32_t m = 0; m < s.size(); ++m) {
    const auto in = Input(s, m, type, count, seed);
    want.insert(want.end(), in.begin(), in.end());
    if (m == s.me()) {
      std::memcpy(send.data(), in.data(), bytes);
    }
  }
  if (HcclResult r = HcclAllGather(send.data(), recv.data(), count, type, s.comm, nullptr);
      r != HCCL_SUCCESS) {
    return Failed(s, "AllGather", r);
  }
  return Compare(s, "AllGather", recv, want);
}

int Broadcast(const Sub &s, uint32_t root, uint64_t count, uint64_t seed) {
  const auto type = HCCL_DATA_TYPE_INT8;
  const auto want = Input(s, root, type, count, seed);
  Buf buf(count);
  if (s.me() == root) {
    std::memcpy(buf.data(), want.data(), count);
  }
  if (HcclResult r = HcclBroadcast(buf.data(), count, type, root, s.comm, nullptr);
      r != HCCL_SUCCESS) {
    return Failed(s, "Broadcast", r);
  }
  return Compare(s, "Broadcast", buf, want);
}

// Step 1 on @s: the collectives.
int Collectives(const Sub &s, uint64_t seed) {
  const struct {
    HcclDataType type;
    HcclReduceOp op;
    uint64_t count;
  } reductions[] = {
      {HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1},
      {HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, 1001},
      {HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, (1 << 20) / 2 + 3},
      {HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, (3 << 20) / 4 + 7},
      {HCCL_DATA_TYPE_INT8, HCCL_REDUCE_MIN, (3 << 20) + 5},
      {HCCL_DATA_TYPE_FP32, HCCL_REDUCE_PROD, 777},
  };
  for (const auto &c : reductions) {
    if (int rc = AllReduce(s, c.type, c.op, c.count, ++seed); rc != 0) {
      return rc;
    }
  }
  for (uint64_t count : {uint64_t{3}, uint64_t{(1 << 20) / 4 + 5}}) {
    if (int rc = AllGather(s, count, ++seed); rc != 0) {
      return rc;
    }
  }
  // From the first member (server 1) and from the last (server 2).
  for (uint32_t root : {0U, s.size() - 1}) {
    if (int rc = Broadcast(s, root, (3 << 20) + 5, ++seed); rc != 0) {
      return rc;
    }
  }
  return 0;
}

// Step 2 on a sub-communicator of two members: a transfer each way, the lower member sending
// first.
int SendRecv(const Sub &s, uint64_t count, uint64_t seed) {
  const auto type = HCCL_DATA_TYPE_UINT8;
  const uint32_t me = s.me(), peer = 1 - me;
  const auto mine = Input(s, me, type, count, seed);
  Buf out(count), in(count);
  std::memcpy(out.data(), mine.data(), count);
  auto send = [&] { return HcclSend(out.data(), count, type, peer, s.comm, nullptr); };
  auto recv = [&] { return HcclRecv(in.data(), count, type, peer, s.comm, nullptr); };
  HcclResult r = me == 0 ? send() : recv();
  if (r == HCCL_SUCCESS) {
    r = me == 0 ? recv() : send();
  }
  if (r != HCCL_SUCCESS) {
    return Failed(s, "Send/Recv", r);
  }
  return Compare(s, "Send/Recv", in, Input(s, peer, type, count, seed));
}

// Step 3 on a sub-communicator of two members: member 0 reduces 5 elements, member 1 6.
int Disagree(const Sub &s) {
  Buf buf(6 * 4);
  const HcclResult r = HcclAllReduce(buf.data(), buf.data(), s.me() == 0 ? 5 : 6,
                                     HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, s.comm, nullptr);
  if (r != HCCL_E_PARA) {
    std::fprintf(stderr, "rank %u: a disagreeing AllReduce on %s: %d\n", g_rank, s.name, r);
    return 83;
  }
  return AllReduce(s, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 4099, 300);
}

int Make(Sub &s, uint64_t id) {
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  if (s.me() == s.size()) {
    // Not a member: the call that says so.
    return HcclCreateSubCommConfig(&g_comm, 0, nullptr, 0xFFFFFFFF, 0, &config, &s.comm) ==
                   HCCL_SUCCESS
               ? 0
               : 81;
  }
  return HcclCreateSubCommConfig(&g_comm, s.size(), s.members.data(), id, s.me(), &config,
                                 &s.comm) == HCCL_SUCCESS
             ? 0
             : 81;
}

int Subcomm() {
  Sub pair{g_rank % 2 == 0 ? "{0,2}" : "{1,3}", {g_rank % 2, g_rank % 2 + 2}};
  Sub trio{"{0,1,2}", {0, 1, 2}};
  if (int rc = Make(pair, 10 + g_rank % 2); rc != 0) {
    return rc;
  }
  if (int rc = Make(trio, 12); rc != 0) {
    return rc;
  }
  Sub parent{"the parent", {0, 1, 2, 3}, g_comm};
  if (int rc = AllReduce(parent, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 4097, 1); rc != 0) {
    return rc;
  }
  // Step 1: the pair's collectives in a thread of their own, the trio's meanwhile.
  auto pair_done = std::async(std::launch::async, [&] { return Collectives(pair, 100); });
  int rc = trio.comm != nullptr ? Collectives(trio, 200) : 0;
  if (int p = pair_done.get(); rc == 0) {
    rc = p;
  }
  if (rc != 0) {
    return rc;
  }
  if (int r = SendRecv(pair, (3 << 20) + 3, 400); r != 0) {
    return r;
  }
  if (int r = Disagree(pair); r != 0) {
    return r;
  }
  // Step 4.
  if (HcclCommDestroy(g_comm) != HCCL_SUCCESS) {
    return 84;
  }
  if (int r = AllReduce(pair, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, (1 << 20) / 4 + 9, 500);
      r != 0) {
    return r;
  }
  if (trio.comm != nullptr) {
    if (int r = AllReduce(trio, HCCL_DATA_TYPE_INT16, HCCL_REDUCE_SUM, 70001, 501); r != 0) {
      return r;
    }
  }
  if (int r = SendRecv(pair, 12345, 502); r != 0) {
    return r;
  }
  for (Sub *s : {&pair, &trio}) {
    if (s->comm != nullptr && HcclCommDestroy(s->comm) != HCCL_SUCCESS) {
      return 85;
    }
  }
  return 0;
}

}  // namespace

int SubcommScenario(const std::string &scenario) {
  if (scenario != "subcomm") {
    return -1;
  }
  if (g_per_server != 2 || g_n != 4) {
    return 51;
  }
  return Subcomm();
}

}  // namespace hzc::coll_rank
