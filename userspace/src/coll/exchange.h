// SPDX-License-Identifier: Apache-2.0
// The exchanges: Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll, AlltoAllV, AlltoAllVC.
//
// Each is one pattern: rank p sends rank q the bytes [send_off[q], + send_len[q]) of its
// input, and rank q puts what it receives from p at [recv_off[p], + recv_len[p]) of its output
// (a Plan, made from the call's own arguments by MakePlan). Reduce and ReduceScatterV reduce
// instead: rank q combines the blocks every rank sends it, in rank order, into [0, recv_len)
// of its output (Reduce: every rank sends its whole input to the root; ReduceScatterV: rank p
// sends sendCounts[q] elements at sendDispls[q] to rank q).
//
// Each rank posts its plan in its argument region of the control area (coll/control.h) with
// its descriptor; after the arrival barrier every rank checks every pair (p sends q as many
// bytes as q expects from p), so a disagreement fails on every rank with HCCL_E_PARA before
// any byte moves. Then:
// - zero-copy (every rank's buffers in activated memory): each rank copies (or reduces) its
//   blocks straight from the peers' inputs through the peer mappings, inside guarded regions,
//   one copy per byte; a barrier ends the call (peers may still read this rank's input);
// - staging: rounds of at most one block per (sender, receiver) pair: block (p, q) of half
//   (round % 2) of the staging area holds the round's chunk of what p sends q; one barrier per
//   round; a rank's block to itself is copied directly (after the rounds) or reduced from its
//   own input.
// The blocks a rank sends or receives must not overlap the other blocks it receives (in-place
// forms where a rank's own input block is its own output block are fine).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "coll/collectives.h"
#include "coll/control.h"
#include "coll/guard.h"
#include "core/comm.h"

namespace hzc::coll {

// What one rank sends to and receives from every rank, in bytes (entries by peer rank).
struct Plan {
  std::vector<uint64_t> send_off, send_len, recv_off, recv_len;

  // Bytes from the input (output) buffer's start to the end of its last non-empty block.
  uint64_t SendExtent() const;
  uint64_t RecvExtent() const;
};

bool IsExchange(Kind kind);
// Whether the arguments of @kind differ between ranks legitimately (per-rank counts), so that
// the descriptor's count is not compared.
bool IsVector(Kind kind);

// A hash of @c's array arguments that must be the same on every rank of @nranks (0 when it has
// none); the arrays are read, so @c must have passed the null checks.
uint64_t SharedArgsHash(const Call &c, uint32_t nranks);

// This rank's plan of @c: HCCL_E_PARA naming the argument when a count or displacement
// overflows, the buffers wrap around the address space, or what this rank sends itself is not
// what it expects from itself.
Expected<Plan> MakePlan(const Call &c, uint32_t nranks, uint32_t rank);

// HCCL_E_PARA on the first pair (p, q), in order, where rank p sends rank q a different number
// of bytes than q expects from p; @seq names the call.
Status CheckPlans(const std::vector<Plan> &plans, uint64_t seq);

class Exchange {
 public:
  // Post this rank's plan of the validated call @c (call @seq) in its argument region; whether
  // its buffers lie in activated memory (zero-copy eligible).
  static bool Post(Communicator &comm, ControlArea &area, const Call &c, uint64_t seq);

  Exchange(Communicator &comm, ControlArea &area, const Call &c, uint64_t seq,
           std::chrono::steady_clock::time_point deadline)
      : comm_(comm), area_(area), c_(c), seq_(seq), deadline_(deadline) {}

  // After the arrival barrier: read every rank's plan and check the pairs (CheckPlans).
  Status Check();
  // Move the bytes (after Check).
  Status Run(bool zero_copy);

 private:
  Status ZeroCopy();
  Status Staging();
  Status MapPeers(std::vector<const uint8_t *> *send, std::vector<Span> *spans) const;
  const uint8_t *Send() const { return static_cast<const uint8_t *>(c_.send); }
  uint8_t *Recv() const { return static_cast<uint8_t *>(c_.recv); }

  Communicator &comm_;
  ControlArea &area_;
  const Call &c_;
  const uint64_t seq_;
  const std::chrono::steady_clock::time_point deadline_;
  std::vector<Plan> plans_;  // by rank
};

}  // namespace hzc::coll
