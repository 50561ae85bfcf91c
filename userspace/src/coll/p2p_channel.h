// SPDX-License-Identifier: Apache-2.0
// The pair channel of point-to-point transfers inside a server (coll/p2p.h): the shared area of
// one unordered pair of ranks {lo, hi}, made by lo as a memfd and handed to hi over an abstract
// Unix socket, with its layout (a header with the two ranks' wake-up words and a "broken" word,
// one direction block per ordered pair, one staging slot per direction in two halves, a ring of
// boxes per direction for buffered messages).
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/futex.h"
#include "base/status.h"
#include "base/unique_mapping.h"
#include "bootstrap/peer_process.h"
#include "core/comm.h"

namespace hzc::coll::p2p {

using Clock = std::chrono::steady_clock;

constexpr size_t kPage = 4096;
constexpr size_t kAlign = 64;
// How long a waiter sleeps on a channel's wake-up word before it checks the channel, the peer
// and its deadline again: with one channel, and with several.
constexpr auto kSlice = std::chrono::milliseconds(10);
constexpr auto kShortSlice = std::chrono::milliseconds(1);

// The receiver's answer to a message.
enum Verdict : uint32_t {
  kNone = 0,
  kStaging = 1,
  kZeroCopy = 2,
  kMismatch = 3,
  // 4: no longer used (a refused receive marks the message done without an answer)
  kEager = 5,  // copied out of the post's staging half: the message is done
};

// Boxes per direction: buffered sends in flight before a sender waits for the receiver.
constexpr uint32_t kBoxes = 16;

// A buffered message (coll/p2p.h), written by the sender of a direction: @seq last, after the
// rest; the bytes follow it (the first 48 of them in its cache line).
struct Box {
  std::atomic<uint32_t> seq;  // number of the message it holds
  uint32_t dtype;
  uint64_t count;
};
constexpr size_t kBoxHead = sizeof(Box);
static_assert(kBoxHead == 16);

// Written by the sender of a direction.
struct alignas(64) SenderSide {
  std::atomic<uint32_t> posted;  // number of the last message posted
  uint32_t refused;              // 1: its sender refused it (nothing else is valid)
  uint32_t dtype;
  uint32_t zero_copy;  // 1: the sender's buffer lies in activated memory
  // 1: the message is small and sent eagerly: its bytes are in staging half 0 with the post
  uint32_t eager;
  uint64_t count;
  uint64_t addr;                 // in the sender's address space
  std::atomic<uint64_t> filled;  // staging chunks written for the posted message
};

// Written by the receiver of a direction.
struct alignas(64) ReceiverSide {
  std::atomic<uint32_t> answered;  // number of the last message answered
  uint32_t verdict;                // Verdict of @answered
  uint32_t dtype;                  // the receiver's, for the sender's message on a mismatch
  uint32_t done_code;              // HcclResult of message @done
  uint64_t count;
  std::atomic<uint64_t> drained;  // staging chunks copied out for the answered message
  // Number of the last message finished (or failed, or refused: then @answered stays below it).
  std::atomic<uint32_t> done;
  std::atomic<uint32_t> freed;  // boxes taken out so far (the sender's credits)
};

struct Direction {
  SenderSide s;
  ReceiverSide r;
};

// A side's wake-up word, bumped by the other side (its only writer) to wake it.
struct alignas(64) Bell {
  std::atomic<uint32_t> word;
  std::atomic<uint32_t> sleepers;  // the side's threads asleep on it (or about to be)
};

struct PairHeader {
  uint32_t magic;
  uint32_t lo;
  uint32_t hi;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t slot_bytes;
  uint64_t box_bytes;            // the largest buffered message (0: none), from lo's settings
  uint64_t box_stride;           // bytes from one box to the next
  std::atomic<uint32_t> broken;  // 0, or 1 + the rank that broke the channel
  Bell bell[2];                  // by side (0: lo, 1: hi)
  // By side: where it last wrote to the channel (sched_getcpu; -1: unknown), for its peer's waits.
  alignas(64) std::atomic<int32_t> cpu[2];
  alignas(64) Direction dir[2];  // 0: lo -> hi, 1: hi -> lo
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(PairHeader) <= kPage);

// Whether message number @value is at or past @target (the numbers wrap).
inline bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

// One pair's channel as this rank sees it.
class Channel {
 public:
  static Expected<std::unique_ptr<Channel>> Open(const Communicator &comm, uint32_t peer,
                                                 Clock::time_point deadline);

  uint32_t peer() const { return peer_; }
  Direction &out() const { return h_->dir[side_]; }  // this rank -> peer
  Direction &in() const { return h_->dir[1 - side_]; }
  uint8_t *half(bool out, uint64_t chunk) const {
    return slots_ + (out ? side_ : 1 - side_) * slot_bytes_ + (chunk % 2) * half_bytes();
  }
  size_t half_bytes() const { return slot_bytes_ / 2 / kAlign * kAlign; }
  std::atomic<uint32_t> &bell() const { return h_->bell[side_].word; }
  // Box @index (counted from 0 since the channel opened) of the outgoing direction, or of the
  // incoming one; its bytes.
  Box *box(bool out, uint32_t index) const {
    return reinterpret_cast<Box *>(boxes_[out ? side_ : 1 - side_] +
                                   (index % kBoxes) * box_stride_);
  }
  static uint8_t *box_data(Box *b) { return reinterpret_cast<uint8_t *>(b) + kBoxHead; }
  // The largest message sent buffered on this channel (0: none).
  size_t box_bytes() const { return box_bytes_; }
  // Where the peer last wrote to the channel (sched_getcpu; -1: unknown).
  int peer_cpu() const { return h_->cpu[1 - side_].load(std::memory_order_relaxed); }
  // Note where this rank writes from (a store only when it moved).
  void NoteCpu() const {
    const int here = sched_getcpu();
    if (h_->cpu[side_].load(std::memory_order_relaxed) != here) {
      h_->cpu[side_].store(here, std::memory_order_relaxed);
    }
  }

  // Wake the peer after a change: its bell moves, and FUTEX_WAKE is called only when it sleeps
  // (or is about to: Sleep), so a transfer where nobody sleeps makes no system call. A release
  // store, not a locked increment (this rank is the bell's only writer, one call at a time): a
  // sleeper that counted itself in @sleepers just as this load read the count before it (the
  // store still in this CPU's store buffer) finds the new number when its FUTEX_WAIT compares
  // (a system call later, long after the buffer drained); at worst it sleeps one slice.
  void Ring() const {
    Bell &b = h_->bell[1 - side_];
    b.word.store(b.word.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    if (b.sleepers.load(std::memory_order_relaxed) != 0) {
      FutexWake(&b.word);
    }
  }
  // Sleep until this rank's bell moves from @seen (read before the checks that found nothing to
  // do), at most @slice.
  void Sleep(uint32_t seen, std::chrono::nanoseconds slice) const {
    Bell &b = h_->bell[side_];
    b.sleepers.fetch_add(1, std::memory_order_seq_cst);
    FutexWait(&b.word, seen, slice);
    b.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
  // An error when the channel is broken or the peer died (a system call: for waits that
  // sleep).
  Status Check() const;
  // An error when the channel is broken (no system call: for the start of a call).
  Status CheckBroken() const;
  // The largest message sent eagerly on this channel (with its post, coll/p2p_match.h).
  size_t eager_bytes() const;
  // Mark the channel broken for both sides after @why.
  void Break(const Status &why);

  uint32_t send_seq = 0;  // number of the last message sent / received on this channel
  uint32_t recv_seq = 0;
  uint32_t boxes_sent = 0;   // boxes filled so far
  uint32_t boxes_freed = 0;  // the receiver's count of boxes taken, as last read
  uint32_t boxes_taken = 0;  // boxes of the incoming direction taken out so far
  uint32_t box_seq = 0;      // number of the last message taken out of a box

 private:
  Channel(UniqueMapping map, uint32_t me, uint32_t peer);
  UniqueMapping map_;
  PairHeader *h_ = nullptr;
  uint8_t *slots_ = nullptr;
  uint8_t *boxes_[2] = {};  // by direction
  size_t box_bytes_ = 0;
  size_t box_stride_ = 0;
  size_t slot_bytes_ = 0;
  uint32_t me_ = 0;
  uint32_t peer_ = 0;
  uint32_t side_ = 0;
  bootstrap::PeerProcess process_;
  Status broken_;
};

}  // namespace hzc::coll::p2p
