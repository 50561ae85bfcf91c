// SPDX-License-Identifier: Apache-2.0
// The matching of point-to-point messages on a pair channel (coll/p2p_channel.h): the n-th send
// of a to b meets the n-th receive of b from a. A small message goes buffered: the sender copies
// it into the next free box of the direction and is done, the receiver copies it out. Any other
// message: the sender posts a header, the receiver answers it (mismatch, zero-copy or staging)
// and moves the bytes; the sender's buffer is reusable once the receiver marked the message done.
// Each item runs as a small state machine (Op) that a batch (coll/p2p_batch.h) polls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "coll/p2p_channel.h"
#include "coll/p2p_item.h"
#include "core/comm.h"

namespace hzc::coll::p2p {

// One item in progress.
struct Op {
  P2pItem item;
  size_t index = 0;  // in the caller's list
  Channel *ch = nullptr;
  uint32_t seq = 0;
  enum Phase { kStart, kAnswer, kFill, kDrain, kDone, kFinished } phase = kStart;
  bool zero_copy = false;  // this rank's buffer lies in activated memory
  bool box = false;        // a send that goes buffered (at most the channel's box_bytes)
  size_t bytes = 0;
  const Op *prev = nullptr;  // the op before it in the same direction of the same channel
  uint64_t chunk = 0;
  uint64_t chunks = 0;
  Status result;
};

// Number of staging chunks of @bytes in halves of @half bytes.
uint64_t Chunks(size_t bytes, size_t half);
// Whether [p, p + bytes) lies in activated memory (zero-copy eligible).
bool Activated(Communicator &comm, const void *p, size_t bytes);
// Finish @op with @st; true.
bool Finish(Op &op, Status st);
// The sender's side of @op: one step if it can make one; whether it did.
bool PollSend(Op &op);
// The receiver's side of @op: one step if it can make one; whether it did.
bool PollRecv(Communicator &comm, Op &op);
// What the peer of @op has not done yet, for the timeout message.
std::string Awaited(const Op &op);

// Take the next message number of @dir on @ch and post it as refused by this rank. A sender
// first waits for the receiver to be done with the message before, so that nothing it still
// reads is overwritten; a receiver marks the message done unanswered at once (its box, if it
// comes buffered, is dropped by this rank's next receive on the direction).
Status PostRefusal(Channel &ch, P2pItem::Dir dir, Clock::time_point deadline);

}  // namespace hzc::coll::p2p
