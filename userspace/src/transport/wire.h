// SPDX-License-Identifier: Apache-2.0
// The wire between the servers of a communicator that spans servers: RDMA links among one
// rank per server (the servers' leaders), set up over the communicator's TCP connections.
//
// Each member registers one area: per peer, Options::slots landing slots of kChunk bytes,
// as many outbox slots and the flag lines. A transfer moves each peer's message in chunks,
// chunk k of the stream to a peer (counted over the wire's life) through slot k % slots: the
// sender may write chunk k once the peer has consumed chunk k - slots (the peer's credit
// flag), copies it into its outbox slot, RDMA-WRITEs it into the matching landing slot at the
// peer and then WRITEs k + 1 into the peer's ready flag (writes of one queue pair land in
// order); the receiver sees the ready flag, hands the chunk to the caller and WRITEs its
// credit back. One loop does both: each turn it consumes whatever has arrived from any peer,
// then posts the credits and every chunk the credits allow to every peer in one batch, and it
// waits only when it can do neither. Chunk sequence numbers count up for the communicator's
// life, so no flag is ever reset. A wait that sees nothing for a while probes the peer (an
// 8-byte RDMA READ of its flags, which fails once the queue pair's retries run out when the
// peer's server or its link is gone) and asks the TCP connection, so a dead peer fails the
// transfer with HCCL_E_ROCE_TRANSFER or HCCL_E_REMOTE naming it long before the deadline.
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

namespace hzc::transport {

class Wire {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kChunk = size_t{1} << 20;
  static constexpr uint32_t kMaxSlots = 16;

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
    // per peer): chunks a sender may write ahead of the receiver. 1 to kMaxSlots, the same on
    // every member.
    uint32_t slots = 1;
  };

  // Links among @members (ascending ranks of @group, this rank among them), the areas
  // registered and their keys exchanged, until @deadline. HCCL_E_PARA for a slot count outside
  // 1..kMaxSlots or one that differs between members; HCCL_E_NOT_SUPPORT when a member has no
  // RDMA device; the errors of verbs::Links::Establish and the group otherwise.
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
  // every received chunk, each member's in the order of their offsets, the members' chunks
  // interleaved as they arrive. The sender's and the receiver's lengths must agree (the caller
  // checked the call's arguments across servers).
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
  // One turn of Transfer on the chunks still to go (@sent, @received: bytes per member):
  // hand every chunk that has arrived to @sink, then post the credits for them and every chunk
  // the peers' credits allow. *@moved: whether anything was consumed or posted; @progress[p]
  // is set to now for each member something moved with.
  Status Turn(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
              std::vector<size_t> *sent, std::vector<size_t> *received, bool *moved,
              std::vector<Clock::time_point> *progress);
  // Nothing could move: check for aborts and @deadline, probe the members that have been
  // quiet for a while (@progress) and have chunks to go to or from them.
  Status Idle(const std::vector<Out> &out, const std::vector<size_t> &in,
              const std::vector<size_t> &sent, const std::vector<size_t> &received,
              std::vector<Clock::time_point> *progress, Clock::time_point deadline);
  Status Probe(uint32_t p);
  // A member that aborted (Abort), as an error.
  Status CheckAborts() const;
  // links_->Execute, its errors naming the members' ranks.
  Status Execute(std::span<const verbs::WorkRequest> wrs);

  // An RDMA WRITE of this member's out flag @line for @p into @p's flag @line for this member.
  verbs::WorkRequest FlagWrite(uint32_t line, uint32_t p) const;

  uint64_t *Flag(uint32_t line, uint32_t p) const;
  uint64_t *OutFlag(uint32_t line, uint32_t p) const;
  // Where the ready flag of chunk slot @slot to @p is written from (one per slot: a batch
  // carries several chunks' ready values to one peer).
  uint64_t *ReadySource(uint32_t p, uint32_t slot) const;
  uint8_t *Landing(uint32_t p, uint32_t slot) const;
  uint8_t *Outbox(uint32_t p, uint32_t slot) const;
  uint64_t FlagOffset(uint32_t line, uint32_t p) const;
  uint64_t LandingOffset(uint32_t p, uint32_t slot) const;
  size_t FlagBytes() const;
  size_t AreaBytes() const;

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

}  // namespace hzc::transport
