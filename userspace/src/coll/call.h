// SPDX-License-Identifier: Apache-2.0
// The bottom of coll/: what a collective call is (Kind, Call), what its algorithms share
// (Blocks, an exchange's Plan) and what every entry point of the table of kinds (coll/kinds.h)
// runs with (Context). Includes no other coll/ header.
#pragma once

#include <hccl/hccl_types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/deadline.h"
#include "core/comm.h"

namespace hzc::coll {

enum class Kind : uint32_t {
  kAllGather = 1,
  kBroadcast = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
  kBarrier = 5,
  // The exchanges (coll/exchange.h). Values are only compared between ranks.
  kReduce = 16,
  kScatter = 17,
  kAllGatherV = 18,
  kReduceScatterV = 19,
  kAlltoAll = 20,
  kAlltoAllV = 21,
  kAlltoAllVC = 22,
};

struct Call {
  Kind kind = Kind::kBarrier;
  const void *send = nullptr;  // Broadcast: the buffer
  void *recv = nullptr;
  // AllGather(V), AlltoAll: sendCount; ReduceScatter(V), Scatter: recvCount; else count
  uint64_t count = 0;
  HcclDataType dtype = HCCL_DATA_TYPE_INT8;  // AlltoAll(V/VC): sendType
  HcclReduceOp op = HCCL_REDUCE_SUM;
  uint32_t root = 0;
  // The exchanges' other arguments, in elements (arrays of nranks entries): AlltoAllV all four,
  // AllGatherV recv_counts/recv_displs, ReduceScatterV send_counts/send_displs; AlltoAllVC
  // count_matrix (nranks x nranks, row = sender); AlltoAll recv_count.
  const uint64_t *send_counts = nullptr;
  const uint64_t *send_displs = nullptr;
  const uint64_t *recv_counts = nullptr;
  const uint64_t *recv_displs = nullptr;
  const uint64_t *count_matrix = nullptr;
  uint64_t recv_count = 0;
  HcclDataType recv_dtype = HCCL_DATA_TYPE_INT8;  // AlltoAll(V/VC): recvType
};

// Block @r of @n equal blocks of @count elements of @es bytes, as [first, last) elements;
// blocks start at 64-byte boundaries so that no two ranks write one cache line.
struct Blocks {
  Blocks(size_t count, size_t es, uint32_t n) : count_(count) {
    const size_t line = std::max<size_t>(1, 64 / es);
    per_ = ((count + n - 1) / n + line - 1) / line * line;
  }
  size_t first(uint32_t r) const { return std::min(count_, r * per_); }
  size_t last(uint32_t r) const { return std::min(count_, first(r) + per_); }
  size_t size(uint32_t r) const { return last(r) - first(r); }

 private:
  size_t count_;
  size_t per_ = 0;
};

// What one rank of an exchange sends to and receives from every rank, in bytes (entries by
// peer rank).
struct Plan {
  std::vector<uint64_t> send_off, send_len, recv_off, recv_len;

  // Bytes from the input (output) buffer's start to the end of its last non-empty block.
  uint64_t SendExtent() const { return Extent(send_off, send_len); }
  uint64_t RecvExtent() const { return Extent(recv_off, recv_len); }

 private:
  static uint64_t Extent(const std::vector<uint64_t> &off, const std::vector<uint64_t> &len) {
    uint64_t e = 0;
    for (size_t i = 0; i < off.size(); ++i) {
      if (len[i] != 0) {
        e = std::max(e, off[i] + len[i]);
      }
    }
    return e;
  }
};

class ControlArea;  // coll/control.h
struct SpanState;   // coll/span.cpp

// One call of one communicator, as its entry points (coll/kinds.h) run it: inside one server
// with the control area, or across servers with the communicator's SpanState.
struct Context {
  Communicator &comm;
  ControlArea *area = nullptr;  // inside one server
  SpanState *span = nullptr;    // across servers
  uint64_t seq = 0;             // the call's number
  Deadline deadline{std::chrono::steady_clock::time_point{}};
  // The exchanges' plans, by rank, checked: inside one server every rank's; across servers
  // this rank's and its server's ranks' lengths (coll/span.h).
  std::vector<Plan> plans = {};
};

}  // namespace hzc::coll
