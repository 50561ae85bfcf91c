// SPDX-License-Identifier: Apache-2.0
// The control area of a communicator's collectives: one shared mapping that every rank maps.
//
// Rank 0 creates a memfd at the first collective call and hands it to the other ranks over an
// abstract Unix socket named after the communicator (bootstrap/local_exchange.h). Nobody keeps
// the descriptor: the kernel frees the memory when the last rank unmaps it, dead ranks
// included. The mapping holds a header, one slot per rank, the per-rank argument regions and the
// staging area (HCCL_BUFFSIZE MB) of the staging path.
//
// Argument region: per rank and call parity, kArgWords * nranks 64-bit words where a rank posts
// what the others need of its per-peer arguments (the vector collectives' byte offsets and
// lengths per peer, coll/exchange.h); like descriptors, valid between the call's arrival
// barrier and the next call.
//
// Inline region: per rank and call parity, inline_bytes() bytes where a rank writes the input
// of a small call before its arrival barrier (coll/inline.h); valid for the others, like the
// descriptor, between that barrier and the next call. Rank 0's size wins.
//
// Arrival: per rank, kLineDepth cache lines used in turn by call number, where a rank announces
// a call (Announce): the fields every rank must agree on (CallDesc's kind, dtype, op, root,
// count, args_hash), how it offers to take part (inline, zero-copy, refused), up to kLineData
// bytes of inline input, and last the call number, on which the others wait. Beside each line,
// kEagerData bytes used in turn with it (EagerData) hold inline input too long for the line, so
// that such a call's data too is reused only every kLineDepth calls. A call's first
// barrier is this announcement, so a small call costs each rank one line of each peer; the full
// descriptor is read only by the paths that need the peers' addresses.
//
// Reuse: the descriptors, argument and inline regions come in two, by call parity: a rank
// writes those of call n only once every rank announced call n-1 (so every reader of call n-2's
// is done). Lines come in kLineDepth: a rank writes the line of call n once every rank announced
// call n-kLineDepth+1. A call that writes only its line (a small Broadcast's root, which needs
// nobody's arrival: coll/inline.h) may so run up to kLineDepth-1 calls ahead of the others.
//
// Synchronisation within a call is by steps: each rank has a 32-bit step counter in its slot that
// it only increments; a barrier is "advance mine, wait until every rank's counter reached it". A
// wait spins (base/spin.h: up to 50 us; when the ranks outnumber the CPUs, or the rank waited
// for last wrote from this rank's CPU, a few turns, then it yields the CPU a few times), then
// sleeps on the counter with FUTEX_WAIT on the shared mapping (not _PRIVATE) in short slices; a
// rank that advances its counter calls FUTEX_WAKE only when a waiter announced itself, so a call
// where nobody sleeps makes no syscall. Each sleep slice checks the abort word, the peers'
// processes (bootstrap/peer_process.h) and the deadline (HCCL_EXEC_TIMEOUT).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/shared_memfd.h"
#include "base/spin.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "bootstrap/peer_process.h"

namespace hzc::coll {

// What a rank posts about its part of a call; every rank checks every other rank's.
struct CallDesc {
  uint64_t seq = 0;  // call number in this communicator, from 1
  uint32_t kind = 0;
  uint32_t dtype = 0;
  uint32_t op = 0;
  uint32_t root = 0;
  uint64_t count = 0;
  uint64_t send = 0;  // addresses in the poster's address space
  uint64_t recv = 0;
  // A hash of the array arguments CANN requires to be the same on every rank (AllGatherV's
  // recvCounts/recvDispls, ReduceScatterV's sendCounts/sendDispls, AlltoAllVC's matrix).
  uint64_t args_hash = 0;
};

class ControlArea {
 public:
  struct Options {
    std::string name;  // unique per communicator, the same in every rank
    uint32_t rank = 0;
    uint32_t nranks = 1;
    size_t staging_bytes = 0;  // rank 0's value wins
    size_t inline_bytes = 0;   // asked for; rank 0's value, capped (InlineSlotBytes), wins
    std::chrono::milliseconds connect_timeout{0};
  };
  // Create (rank 0) or receive (others) and map the area, then meet every rank in it.
  static Expected<std::unique_ptr<ControlArea>> Open(const Options &options);
  ~ControlArea();
  ControlArea(const ControlArea &) = delete;
  ControlArea &operator=(const ControlArea &) = delete;

  uint32_t rank() const { return rank_; }
  uint32_t nranks() const { return nranks_; }

  // How a rank takes part in a call (Announce's @flags).
  static constexpr uint32_t kInlined = 1;      // its input is inline (coll/inline.h)
  static constexpr uint32_t kLineHolds = 2;    // ... in its arrival line, not its inline region
  static constexpr uint32_t kZeroCopy = 4;     // its buffers allow zero copy
  static constexpr uint32_t kRefused = 8;      // it refused the call (its own checks failed it)
  static constexpr uint32_t kEagerHolds = 16;  // its inline input is in its EagerData
  // Inline input bytes beside each arrival line (EagerData).
  static constexpr size_t kEagerData = 256;
  // Inline input bytes an arrival line holds.
  static constexpr size_t kLineData = 16;
  // Arrival lines per rank, used in turn (a power of two).
  static constexpr uint32_t kLineDepth = 8;
  // What rank @r announced for a call (valid between the call's arrival and the next call).
  struct Arrived {
    uint32_t seq;  // the call number's low bits (a later call's: the line was reused)
    uint32_t flags;
    uint32_t kind, dtype, op, root;
    uint64_t count, args_hash;
  };
  // This rank's arrival line's inline input for call @seq (kLineData bytes), written before
  // Announce.
  uint8_t *LineData(uint64_t seq) const;
  // This rank's kEagerData bytes beside its arrival line of call @seq, written before Announce.
  uint8_t *EagerData(uint64_t seq) const { return eager(rank_, seq); }
  // Arrive at call @d.seq: @d's fields every rank must agree on and @flags, then the call
  // number (the others' waits end).
  void Announce(const CallDesc &d, uint32_t flags);
  // Wait until every rank announced call @seq (or a later one; nothing for @seq 0), until
  // @deadline. HCCL_E_TIMEOUT naming the missing ranks, HCCL_E_REMOTE when a rank aborted or
  // died.
  Status AwaitArrivals(uint64_t seq, const Deadline &deadline, const char *what);
  // AwaitArrivals without fetching anything of the peers for later: for a rank that runs ahead
  // and waits only for the others to free its lines (what it would fetch, they are about to
  // write). @waited (if given) is set when it had to wait.
  Status AwaitAnnounced(uint64_t seq, const Deadline &deadline, const char *what,
                        bool *waited = nullptr);
  Arrived Arrival(uint32_t r, uint64_t seq) const;
  // Whether rank @r's line still shows call @seq, read after what was read of it before (a reader
  // of a line its writer may reuse: an Arrival read in between is whole only if this holds).
  bool StillAnnounced(uint32_t r, uint64_t seq) const;
  // Whether every rank has announced call @seq (or a later one) by now: one line per peer
  // read, no wait. @seq must be at most kLineDepth-1 calls past this rank's oldest unread line
  // (a line shows its latest call).
  bool AllAnnounced(uint64_t seq) const;
  // Rank @r's inline input of call @seq: its arrival line's data or its inline region, as its
  // flags say.
  std::span<const uint8_t> InlineInput(uint32_t r, uint64_t seq) const;

  // Post this rank's descriptor of call @d.seq (slots are double-buffered by call parity).
  void Post(const CallDesc &d);
  // Rank @r's descriptor of call @seq (valid between the arrival barrier and the next call).
  CallDesc Posted(uint32_t r, uint64_t seq) const;

  // Advance this rank's step without waiting for the others.
  void Arrive();
  // Wait until every rank reached this rank's step, without advancing it, until @deadline.
  // HCCL_E_TIMEOUT naming the missing ranks, HCCL_E_REMOTE when a rank aborted or died.
  Status Wait(const Deadline &deadline, const char *what);
  // Arrive, then Wait.
  Status Barrier(const Deadline &deadline, const char *what);

  // Tell every rank that this rank failed a call with @code: their waits fail from now on and
  // the communicator's collectives stay unusable.
  void Abort(HcclResult code);
  // An error if a rank aborted (naming it): HCCL_E_TIMEOUT if it gave up waiting for a rank,
  // else HCCL_E_REMOTE.
  Status CheckAbort() const;

  // Words per peer in a rank's argument region.
  static constexpr size_t kArgWords = 4;
  // Rank @r's argument region of call @seq: kArgWords * nranks() words (this rank writes its
  // own before the call's arrival barrier, the others read it after).
  uint64_t *Args(uint32_t r, uint64_t seq) const;

  // The inline region of one rank and call parity for @requested bytes and @nranks ranks:
  // @requested rounded up to 64, at most what keeps the area's inline regions within 32 MiB
  // (but 4 KiB at least, when asked for at all).
  static size_t InlineSlotBytes(size_t requested, uint32_t nranks);
  // Rank @r's inline region of call @seq (inline_bytes() bytes).
  uint8_t *Inline(uint32_t r, uint64_t seq) const {
    return inline_ + (size_t{r} * 2 + (seq & 1)) * inline_bytes_;
  }
  size_t inline_bytes() const { return inline_bytes_; }

  uint8_t *staging() const { return staging_; }
  size_t staging_bytes() const { return staging_bytes_; }

 private:
  struct Header;
  struct Slot;
  ControlArea(UniqueMapping map, uint32_t rank, uint32_t nranks);
  // Rank 0: create the area and hand it to the other ranks.
  static Expected<UniqueMapping> Create(const Options &o,
                                        std::chrono::steady_clock::time_point deadline);
  // The other ranks: receive rank 0's area and map it.
  static Expected<UniqueMapping> Receive(const Options &o,
                                         std::chrono::steady_clock::time_point deadline);
  Slot &slot(uint32_t r) const;
  // Bytes of the slots and the arrival lines of @nranks ranks (page aligned).
  static size_t SlotBytes(uint32_t nranks);
  Status Meet(std::chrono::steady_clock::time_point deadline);
  struct Line;
  Line &line(uint32_t r, uint64_t seq) const;
  struct Sleepers;
  Sleepers &sleepers(uint32_t r) const;
  uint8_t *eager(uint32_t r, uint64_t seq) const;
  // A futex word the others wait on and its count of sleepers: rank @r's step (@seq 0) or its
  // arrival line of call @seq.
  struct Word {
    std::atomic<uint32_t> &value;
    std::atomic<uint32_t> &waiters;
    const std::atomic<int32_t> &cpu;  // where its writer last wrote it
  };
  Word word(uint32_t r, uint64_t seq) const;
  // Wait until word(@r, @seq) reached @target.
  Status WaitWord(uint32_t r, uint64_t seq, uint32_t target, const Deadline &deadline,
                  const char *what);
  // HCCL_E_REMOTE when a peer's process is gone.
  Status CheckPeers() const;

  // The lines of at most this many ranks are prefetched for the next call (AwaitArrivals).
  static constexpr uint32_t kPrefetchPeers = 16;

  UniqueMapping map_;
  uint32_t rank_ = 0;
  uint32_t nranks_ = 0;
  Header *header_ = nullptr;
  uint64_t *args_ = nullptr;
  uint8_t *inline_ = nullptr;
  size_t inline_bytes_ = 0;
  uint8_t *staging_ = nullptr;
  size_t staging_bytes_ = 0;
  uint32_t step_ = 0;  // this rank's step counter (mirrors its slot)
  // More ranks than this process may run on CPUs at once (its affinity): waits spin less.
  bool oversubscribed_ = false;
  SpinBudget spin_;                            // how long its waits spin (base/spin.h)
  std::vector<bootstrap::PeerProcess> peers_;  // by rank; none for ranks of this process
};

}  // namespace hzc::coll
