// SPDX-License-Identifier: Apache-2.0
// The wire between the servers of a communicator that spans servers: RDMA links among one
// rank per server (the servers' leaders), set up over the communicator's TCP connections.
//
// Each member registers one area: a landing slot of kChunk bytes per peer, an outbox slot
// per peer and two flag lines per peer. A transfer moves each peer's message in chunks: the
// sender waits until the peer has consumed its previous chunk (the peer's credit flag), copies
// the chunk into its outbox, RDMA-WRITEs it into its landing slot at the peer and then WRITEs
// the chunk's sequence number into the peer's ready flag (writes of one queue pair land in
// order); the receiver waits for the ready flag, hands the chunk to the caller and WRITEs its
// credit back. Chunk sequence numbers count up for the communicator's life, so no flag is ever
// reset. A wait that sees nothing for a while probes the peer (an 8-byte RDMA READ of its
// flags, which fails once the queue pair's retries run out when the peer's server or its link
// is gone) and asks the TCP connection, so a dead peer fails the transfer with
// HCCL_E_ROCE_TRANSFER or HCCL_E_REMOTE naming it long before the deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/unique_mapping.h"
#include "bootstrap/group.h"
#include "verbs/links.h"

namespace hzc::coll {

class Wire {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kChunk = size_t{1} << 20;

  struct Out {
    const uint8_t *data = nullptr;
    size_t len = 0;
  };
  // A received chunk: bytes [offset, offset + len) of member @from's message.
  using Sink = std::function<void(uint32_t from, size_t offset, const uint8_t *data, size_t len)>;

  struct Options {
    // The wire's tags on the group's connections: tags (the keys), tags + 1 (the goodbye)
    // and tags + 0x100 + the link-setup board's keys. Wires that may be open on one pair of
    // ranks at once need ranges at least 0x1000 apart.
    uint32_t tags = 0;
    // Landing slots of kChunk bytes per peer (each member registers 2 * slots * kChunk bytes
    // per peer): chunks a sender may write ahead of the receiver.
    uint32_t slots = 1;
  };

  // Links among @members (ascending ranks of @group, this rank among them), the areas
  // registered and their keys exchanged, until @deadline. HCCL_E_NOT_SUPPORT when a member has
  // no RDMA device; the errors of verbs::Links::Establish and the group otherwise.
  static Expected<std::unique_ptr<Wire>> Open(bootstrap::Group &group,
                                              std::vector<uint32_t> members, const Options &options,
                                              Clock::time_point deadline);
  ~Wire();
  Wire(const Wire &) = delete;

  // Before the queue pairs go: wait until @deadline for every member to have finished its
  // transfers (each says goodbye once its last one completed), so that no member tears down
  // a queue pair whose peer still waits for an acknowledgement to be resent. Skipped once the
  // wire failed; a member that is gone or late only costs the wait.
  void Close(Clock::time_point deadline);
  Wire &operator=(const Wire &) = delete;

  uint32_t index() const { return me_; }  // this rank's position in the members
  uint32_t size() const { return static_cast<uint32_t>(members_.size()); }
  uint32_t member(uint32_t i) const { return members_[i]; }

  // Send @out[p] to member p and receive @in[p] bytes from member p, for every other member
  // p (entries for this member are ignored; zero lengths are fine), chunk by chunk: @sink gets
  // every received chunk, members in ascending order within each round. The sender's and the
  // receiver's lengths must agree (the caller checked the call's arguments across servers).
  // Errors name the member's rank: HCCL_E_ROCE_TRANSFER (a transfer failed), HCCL_E_REMOTE
  // (its TCP connection ended), HCCL_E_TIMEOUT at @deadline. After an error the wire is
  // unusable.
  Status Transfer(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                  Clock::time_point deadline);

  // Tell every other member that this member failed the call with @code (best effort): their
  // waits on this member end with HCCL_E_REMOTE naming it. The wire is unusable afterwards.
  void Abort(HcclResult code);

  // Chunks moved since the wire was opened (sent, received), for logs and tests.
  uint64_t chunks_sent() const;
  uint64_t chunks_received() const;

 private:
  Wire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me, const Options &options);

  Status Register();
  Status ExchangeKeys(Clock::time_point deadline);
  Status Send(const std::vector<Out> &out, std::vector<size_t> *done, Clock::time_point deadline);
  Status Receive(const std::vector<size_t> &in, std::vector<size_t> *done, const Sink &sink,
                 Clock::time_point deadline);
  // Wait until flag @line of member @p reaches @value.
  Status WaitFlag(uint32_t line, uint32_t p, uint64_t value, const char *what,
                  Clock::time_point deadline);
  Status Probe(uint32_t p);
  // A member that aborted (Abort), as an error.
  Status CheckAborts() const;
  // links_->Execute, its errors naming the members' ranks.
  Status Execute(std::span<const verbs::WorkRequest> wrs);

  uint64_t *Flag(uint32_t line, uint32_t p) const;
  uint64_t *OutFlag(uint32_t line, uint32_t p) const;
  uint8_t *Landing(uint32_t p) const;
  uint8_t *Outbox(uint32_t p) const;
  uint64_t FlagOffset(uint32_t line, uint32_t p) const;
  uint64_t LandingOffset(uint32_t p) const;

  bootstrap::Group &group_;
  const std::vector<uint32_t> members_;
  const uint32_t me_;
  const Options options_;
  std::unique_ptr<verbs::Links> links_;
  UniqueMapping area_;
  std::unique_ptr<verbs::MemoryRegion> mr_;
  std::vector<verbs::RemoteBuffer> remote_;  // [member]
  std::vector<uint64_t> sent_;               // [member]: chunks sent to it
  std::vector<uint64_t> received_;           // [member]: chunks consumed from it
  Status broken_;
};

}  // namespace hzc::coll
