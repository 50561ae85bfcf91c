// SPDX-License-Identifier: Apache-2.0
// The batches of point-to-point transfers inside a server (coll/p2p.h): the items of one call
// (HcclSend, HcclRecv, HcclBatchSendRecv) run as matching state machines (coll/p2p_match.h)
// polled together until every one is done, so a ring exchange in one batch on every rank
// progresses; a call opens each pair channel it lacks (coll/p2p_channel.h) in a thread of its
// own while its other items progress.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/spin.h"
#include "base/status.h"
#include "coll/p2p_channel.h"
#include "coll/p2p_match.h"
#include "core/comm.h"

namespace hzc::coll::p2p {

// The open channels of a communicator, by peer rank.
using Channels = std::map<uint32_t, std::unique_ptr<Channel>>;

// A channel being opened in a thread of its own while the call's other items progress: a
// hand-off waits for the peer to come, and the peer may come only after this rank's other
// items moved.
struct Opening {
  uint32_t peer = 0;
  std::thread thread;
  std::atomic<bool> done{false};
  std::optional<Expected<std::unique_ptr<Channel>>> result;
};

// The items of one call in progress, on @channels (which the caller holds).
class Batch {
 public:
  // @spin: the communicator's spinning budget (base/spin.h); @deadline: the call's, or
  // Clock::time_point{}: the communicator's timeout from the batch's first wait on (a batch that
  // never waits reads no clock).
  Batch(Communicator &comm, Channels &channels, std::vector<Op> &ops, Clock::time_point deadline,
        SpinBudget *spin)
      : comm_(comm), channels_(channels), ops_(ops), deadline_(deadline), budget_(spin) {}
  // Joins the openings still running (they end by the deadline too); a channel opened for
  // items that never ran is broken, since its peer's numbering moved on.
  ~Batch();
  Batch(const Batch &) = delete;
  Batch &operator=(const Batch &) = delete;

  // Every op finished (then the first op's error, if any), or a failure to wait (then the
  // channels of the unfinished ops are broken).
  Status Run();

 private:
  // Start an opening for every peer without a channel; give the ops of the others theirs.
  void Start();
  // Give the ops of @peer its channel @ch: numbers in list order, sizes, eligibility.
  void Assign(uint32_t peer, Channel *ch);
  // Install the channels of finished openings (or fail their ops); whether any finished.
  bool Collect();
  // One pass over the ops; the first unfinished op with a channel and its bell before it.
  bool PollAll(Op **waiting, uint32_t *bell, bool *unfinished);
  // The deadline (set now if it was not).
  Clock::time_point Deadline();

  Communicator &comm_;
  Channels &channels_;
  std::vector<Op> &ops_;
  Clock::time_point deadline_;
  SpinBudget *budget_;
  std::vector<std::unique_ptr<Opening>> openings_;
  Status failed_;
};

}  // namespace hzc::coll::p2p
