// SPDX-License-Identifier: Apache-2.0
// What the scenarios of hzc-coll-rank share (coll_rank.cpp, exchange_rank.cpp,
// p2p_span_rank.cpp, subcomm_span_rank.cpp, traffic_span_rank.cpp, onesided_span_rank.cpp,
// onesided_local_rank.cpp): the rank's communicator and the arena its buffers live in.
#pragma once

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "arena.h"

namespace hzc::coll_rank {

inline uint32_t g_rank = 0, g_n = 0;
inline HcclComm g_comm = nullptr;
inline bool g_zero_copy = false;
// Across servers (HZC_TEST_PER_SERVER=L: ranks sL .. sL+L-1 run on server s): L, else 0; and
// the sub-communicator of this server's ranks that sets and activates the arena's memory
// (g_comm, which spans servers, cannot).
inline uint32_t g_per_server = 0;
inline HcclComm g_server_comm = nullptr;

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;

// One arena for all buffers: activated memory (zerocopy) or plain memory (staging).
struct Arena : test::Arena {
  Arena(size_t bytes, bool zero_copy)
      : test::Arena(g_server_comm != nullptr ? g_server_comm : g_comm, bytes, zero_copy) {}
};

// The reduction of @in (one input per rank, @count elements) as the collectives make it: rank
// order, or across servers each server's ranks first and then the servers' partial results in
// server order.
void Reference(HcclDataType type, HcclReduceOp op, const std::vector<const void *> &in, void *out,
               size_t count);

// Whether the matrices run type @t with op @op: inside one server every pair; across servers,
// where each call costs the guests' network round trips, every type with sum and every op with
// fp32 and int8 (the reductions are the ones tested inside a server; what differs across
// servers is how the partial results travel).
inline bool AcrossServersCase(HcclDataType t, HcclReduceOp op) {
  return g_per_server == 0 || op == HCCL_REDUCE_SUM || t == HCCL_DATA_TYPE_FP32 ||
         t == HCCL_DATA_TYPE_INT8;
}

// The exchange scenarios (exchange_rank.cpp): the exit status of @scenario, or -1 when it is
// not one of them.
int ExchangeScenario(const std::string &scenario);

// The one-sided scenario inside a server (onesided_local_rank.cpp): the same.
int OneSidedLocalScenario(const std::string &scenario);

// The point-to-point scenario across servers (p2p_span_rank.cpp): the same.
int P2pScenario(const std::string &scenario);

// The sub-communicator scenario across servers (subcomm_span_rank.cpp): the same.
int SubcommScenario(const std::string &scenario);

// The scenario of the bytes between servers (traffic_span_rank.cpp): the same.
int TrafficScenario(const std::string &scenario);

// The scenario of the one-sided calls across servers (onesided_span_rank.cpp): the same.
int OneSidedScenario(const std::string &scenario);

// The end of the fault scenarios (cut, cutp2p, cutonesided): after @call succeeded once, mark
// this rank ready ($TMPDIR/hzc-span-ready-RANK: the test cuts the link or kills a server then)
// and call it until it fails, 180 s at most; the failure must be one @allowed takes and come
// within HCCL_EXEC_TIMEOUT; then @after (its non-zero status is the scenario's), then both
// communicators are destroyed within 10 s, leaving no RDMA queue pair or memory region of this
// process. 53 when the first call fails; 74, 76, 77, 78 or the failure's code otherwise.
int FailUntilCut(const std::function<HcclResult()> &call,
                 const std::function<bool(HcclResult)> &allowed, const std::function<int()> &after);

}  // namespace hzc::coll_rank
