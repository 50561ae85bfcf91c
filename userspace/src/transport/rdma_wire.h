// SPDX-License-Identifier: Apache-2.0
// The RDMA wire (transport/wire.h): RDMA links among the wire's members, set up over the
// communicator's TCP connections.
//
// Each member registers one area per linked peer: Options::slots landing slots of kChunk bytes,
// as many outbox slots and the flag lines. A transfer moves each peer's message in chunks,
// chunk k of the stream to a peer (counted over the wire's life) through slot k % slots: the
// sender may write chunk k once the peer has consumed chunk k - slots (the peer's credit
// flag), copies it into its outbox slot and RDMA-WRITEs it into the matching landing slot at
// the peer with immediate data; the receiver's completion queue says the chunk arrived (the
// network's word: no flag is polled), it hands the chunk to the caller and WRITEs its credit
// back. A message of Wire::kPlaceMin bytes or more waits, before its first chunk, for
// the receiver's word on where it goes (its "want", written into the sender's flag lines): an
// address in the caller's activated buffer and the key of a memory window the receiver opened
// onto the message's bytes for that peer's queue pair alone (a device that does not check a
// window's bounds, as soft-RoCE, lets it reach the whole registration), closed before the
// transfer returns,
// whether it succeeded or failed (the activation is registered for that peer for windows only,
// kept like the sends' registrations and dropped by Withdraw; its own key reaches nothing), or
// none; the sender then
// writes each chunk at its offset there instead of into a landing slot (the same news and
// credits), and the receiver finds it in place. Every write a member waits for (a chunk, a
// credit, a want's count, an abort) comes with immediate data, so a member with nothing to do
// sleeps on the completion channel until one arrives. One loop does both: each turn it consumes
// whatever has arrived from any peer, then posts the credits and every chunk the credits allow to
// every peer in one batch, and it waits only when it can do neither. Chunk sequence numbers count
// up for the communicator's life, so no flag is ever reset; a peer that reports more chunks than
// its credits allow breaks the transfer. A wait that sees nothing for a while
// probes the peer (an 8-byte RDMA READ of its flags, which fails once the queue pair's retries run
// out when the peer's server or its link is gone) and asks the TCP connection, so a dead peer fails
// the transfer with HCCL_E_ROCE_TRANSFER or HCCL_E_REMOTE naming it long before the deadline.
//
// Setup, when the wire opens: every member opens its RDMA port and sends the others its port's
// address (GID, LID, MTU, link layer) and slot count over the group (Bruck's all-gather); no
// queue pair is made then. A pair links when a transfer first moves bytes between its members
// (an algorithm's neighbours): each makes a queue pair and registers its area for the other
// (Options::slots landing and outbox slots and the flag lines: 2 * slots * kChunk bytes), they
// swap the queue pairs' numbers and the areas' keys over the group, connect, and tell each other
// they are ready (two messages each way). A member keeps the links its algorithms use. Abort
// writes the abort flag of every linked member and tells each other member over the group, where
// a member that links with it, now or later, learns it (HCCL_E_REMOTE naming this rank).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "transport/wire.h"
#include "verbs/links.h"

namespace hzc::transport {

class RdmaWire final : public Wire {
 public:
  // The wire, or nullptr when a member has no RDMA device with an active port (every member
  // learns so; nothing is left open).
  static Expected<std::unique_ptr<Wire>> Open(bootstrap::Group &group,
                                              std::vector<uint32_t> members, uint32_t me,
                                              const Options &options, Clock::time_point deadline);
  ~RdmaWire() override;

  const char *kind() const override { return "RDMA"; }
  bool uses_regions() const override { return true; }
  uint64_t registrations() const override { return registered_.load(std::memory_order_relaxed); }
  size_t registrations_kept() override;
  uint32_t windows_open() const override;
  uint32_t links() const override;
  void Withdraw(uintptr_t base, size_t len) override;

 private:
  struct Card;  // what members tell each other over the group (rdma_wire.cpp)
  struct Peer;  // a member this one links with

  RdmaWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
           const Options &options);

  // Open the port and swap ports with the members; false in *@none when a member has none.
  Status Setup(Clock::time_point deadline, bool *none);
  // Link with every member that @out or @in moves bytes with and this one has no link to yet.
  Status Link(const std::vector<Out> &out, const std::vector<size_t> &in,
              Clock::time_point deadline);
  // Member @p's next card on the link tag, of @kind: HCCL_E_REMOTE when it says @p aborted,
  // HCCL_E_ROCE_CONNECT when it is not a card of that kind.
  Expected<Card> Expect(uint32_t p, uint32_t kind, Clock::time_point deadline);

  struct Want;  // where a receiver wants a message (rdma_wire.cpp)
  struct Pass;  // one Move's state (rdma_wire.cpp)
  using Loaned = std::shared_ptr<const verbs::MemoryRegion>;

  Status Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
              const std::vector<Place> &places, Clock::time_point deadline) override;
  // Per member p, the registration @out[p] is sent from directly (Lent), or nullptr: through
  // the outbox.
  std::vector<Loaned> Sources(const std::vector<Out> &out);
  // Tell each member that sends this one kPlaceMin bytes or more where they go (@pass's
  // places: into the caller's buffer where a region holds it, registered for the member, else
  // the landing slots).
  Status Ask(Pass *pass, Clock::time_point deadline);
  // The registration of @region for member @p (@writes: the member may RDMA-WRITE the parts
  // a window opens onto, else only this member sends from it): made at its first use and kept
  // until Withdraw or until another activation (Region::serial) overlaps it; nullptr when it
  // cannot be made (logged once per activation, member and kind).
  Loaned Lent(uint32_t p, const Region &region, bool writes);
  // Whether member @p has a window to write placed messages through (opened at the first
  // call; false, logged once, when the device has none).
  bool Windowed(uint32_t p);
  // Close the windows this transfer opened (Ask), before it returns.
  void CloseWindows();
  // Drop the registrations for member @p (UINT32_MAX: every member) that overlap
  // [base, base + len), but those of activation @keep (0: none kept); lent_mutex_ held.
  void DropLoans(uint32_t p, uintptr_t base, size_t len, uint64_t keep);
  void Tell(HcclResult code) override;

  // Move's work once linked: the wants, then turns until every chunk moved.
  Status Pump(Pass *pass, Clock::time_point deadline);
  // Take the news that arrived (Links::Arrivals): count the chunks; HCCL_E_ROCE_TRANSFER when
  // a member reports more than its credits allow.
  Status Listen();
  // One turn of @pass: hand every chunk that has arrived to the sink (or find it in place),
  // then post the credits for them and every chunk the peers' credits allow (a message that
  // waits for its receiver's want only once that has come). *@moved: whether anything was
  // consumed or posted; the pass's progress[p] is set to now for each member something moved
  // with.
  Status Turn(Pass *pass, bool *moved, Clock::time_point deadline);
  // Member @p's want for the message @pass sends it, once it has come: false while it has not.
  Expected<bool> Wanted(Pass *pass, uint32_t p);
  // Post chunk sent_[p] (and count it) to member @p: @len bytes at @data, read from @direct or
  // copied into the outbox slot first (moved_direct_ or moved_staged_), to @at in the peer's
  // buffer (its key @rkey) or else to the landing slot, with the news of a chunk.
  void PostChunk(uint32_t p, const uint8_t *data, size_t len, const verbs::MemoryRegion *direct,
                 uint64_t at, uint32_t rkey, std::vector<verbs::WorkRequest> *wrs);
  // Nothing could move: check for aborts and @deadline, probe the members that have been
  // quiet for a while and have chunks to go to or from them.
  Status Idle(Pass *pass, Clock::time_point deadline);
  Status Probe(uint32_t p, Clock::time_point deadline);
  // A linked member that aborted (Abort), as an error.
  Status CheckAborts() const;
  // links_->Execute (given up at @deadline), its errors naming the members' ranks.
  Status Execute(std::span<const verbs::WorkRequest> wrs,
                 Clock::time_point deadline = Clock::time_point::max());

  // An RDMA WRITE of this member's out flag @line for @p into @p's flag @line for this member.
  verbs::WorkRequest FlagWrite(uint32_t line, uint32_t p) const;

  // The lines and slots of the area for member @p (the same layout on both sides).
  uint64_t *Flag(uint32_t line, uint32_t p) const;
  uint64_t *OutFlag(uint32_t line, uint32_t p) const;
  uint8_t *Landing(uint32_t p, uint32_t slot) const;
  uint8_t *Outbox(uint32_t p, uint32_t slot) const;
  static uint64_t FlagOffset(uint32_t line);
  uint64_t LandingOffset(uint32_t slot) const;
  size_t FlagBytes() const;
  size_t AreaBytes() const;

  std::unique_ptr<verbs::Links> links_;
  std::vector<verbs::EndpointHeader> ports_;  // [member]
  std::vector<std::unique_ptr<Peer>> peers_;  // [member]: null until a transfer links it

  // Chunks whose news arrived from each member ([member], over the wire's life).
  std::vector<uint64_t> arrived_;
  // Wants this member wrote to each member, and took from each ([member], over the wire's life).
  std::vector<uint64_t> wants_sent_, wants_taken_;
  // Registrations of activated memory by (member, base, whether the member may write it):
  // Lent, dropped by Withdraw (a write one reaches nothing but through a window of a transfer).
  struct Loan {
    size_t len = 0;
    uint64_t serial = 0;
    Loaned mr;  // null: refused, not tried again
  };
  // Bytes of the transfer in progress posted so far (PostChunk): copied into the outbox first,
  // or not; and received: found in place, or through a landing slot. Counted in the group's
  // traffic once the transfer completed.
  uint64_t moved_staged_ = 0, moved_direct_ = 0, moved_landed_ = 0, moved_placed_ = 0;
  std::atomic<uint64_t> registered_{0};  // Loans made
  std::mutex lent_mutex_;
  std::map<std::tuple<uint32_t, uintptr_t, bool>, Loan> lent_;
};

}  // namespace hzc::transport
