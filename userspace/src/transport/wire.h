// SPDX-License-Identifier: Apache-2.0
// The wire between the servers of a communicator that spans servers: one rank per server (the
// servers' leaders, or the two ends of a point-to-point pair across servers) moves messages to
// the others in chunks. Two implementations, chosen when a wire opens (Open):
//   RDMA   (transport/rdma_wire.h)    RDMA WRITE into registered landing slots, links set up over
//                                     the communicator's TCP connections;
//   socket (transport/socket_wire.h)  TCP connections of the wire's own between its members.
// HZC_NET picks one: rdma, socket, or auto (RDMA when every member has an RDMA device with an
// active port, else TCP, logged once at INFO). The members agree first: a wire whose members
// were told different HZC_NET values fails to open with HCCL_E_PARA naming them, at once.
//
// Use (coll/span.cpp, coll/p2p_wire.cpp):
//   auto w = Wire::Open(group, leaders, {.tags = T, .slots = 4}, deadline);
//   (*w)->Transfer(out, in, sink, deadline);  // out[p] to member p, in[p] bytes from it
//   (*w)->Close(deadline);                    // before it goes (a goodbye among the members)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "bootstrap/group.h"

namespace hzc::transport {

class Wire {
 public:
  using Clock = std::chrono::steady_clock;
  // A transfer moves each member's message in chunks of this size (the last one shorter): the
  // sink gets whole chunks.
  static constexpr size_t kChunk = size_t{1} << 20;
  static constexpr uint32_t kMaxSlots = 16;

  // Memory that stays mapped, and holds what it holds, until the wire is told otherwise
  // (Withdraw): activated memory. The RDMA wire registers it with its peers' protection domains
  // at its first use and sends from it directly; other messages go through its outbox (a copy).
  struct Region {
    uintptr_t base = 0;  // 0: none
    size_t len = 0;
    // The activation's number (never 0: a region without one is not used), naming exactly one
    // [base, base + len): another at the same place is another.
    uint64_t serial = 0;
  };
  struct Out {
    const uint8_t *data = nullptr;
    size_t len = 0;
    Region region{};  // holds [data, data + len), if any
  };
  // Where a member's message goes when the caller only places it (no sink work): the wire puts
  // its bytes at @dest itself. Over RDMA a message of kPlaceMin bytes or more whose @region
  // holds [dest, dest + len) is written there by the sending member's RDMA device, through a
  // memory window onto those bytes (on a device that checks a window's bounds; soft-RoCE checks
  // the region's), open during the transfer only (the region registered
  // for that member's windows at its first use, dropped by Withdraw; without windows on the
  // device, the landing slots); any other is copied there from the landing slot. Over TCP it is
  // received there.
  struct Place {
    uint8_t *dest = nullptr;  // nullptr: the sink gets the member's chunks
    Region region{};
  };
  // From this many bytes every message to a member (placed or not: both ends decide by its
  // length alone) waits, before its first chunk, for the receiver to say where it goes, into
  // its caller's buffer or through the landing slots: the sender cannot run ahead of a
  // receiver that has not reached the transfer.
  static constexpr size_t kPlaceMin = size_t{64} << 10;
  // A received chunk: bytes [offset, offset + len) of member @from's message.
  using Sink = std::function<void(uint32_t from, size_t offset, const uint8_t *data, size_t len)>;

  struct Options {
    // The wire's tags on the group's connections: tags to tags + 3 (the keys or addresses, the
    // goodbye, the members' choice) and tags + 0x100 + the link-setup board's keys. Wires that
    // may be open on one pair of ranks at once need ranges at least 0x1000 apart.
    uint32_t tags = 0;
    // Chunks a sender may have in flight to each peer before the peer consumed them (the RDMA
    // wire registers 2 * slots * kChunk bytes per peer for them; a message of kPlaceMin bytes
    // or more first waits for the peer to say where it goes). 1 to kMaxSlots, the same on every
    // member.
    uint32_t slots = 1;
    // The kind of wire (HZC_NET when unset).
    std::optional<NetChoice> net;
  };

  // A wire among @members (ascending ranks of @group, this rank among them), until @deadline.
  // HCCL_E_PARA for a slot count outside 1..kMaxSlots or one that differs between members, or
  // members whose HZC_NET differ; HCCL_E_NOT_SUPPORT with HZC_NET=rdma when a member has no
  // RDMA device; the errors of the implementation and the group otherwise.
  static Expected<std::unique_ptr<Wire>> Open(bootstrap::Group &group,
                                              std::vector<uint32_t> members, const Options &options,
                                              Clock::time_point deadline);
  virtual ~Wire();
  Wire(const Wire &) = delete;
  Wire &operator=(const Wire &) = delete;

  // Before the wire goes: wait until @deadline for every member to have finished its
  // transfers (each says goodbye once its last one completed), so that no member tears down
  // a connection whose peer still waits for it. Skipped once the wire failed; a member that is
  // gone or late only costs the wait.
  void Close(Clock::time_point deadline);

  // "RDMA" or "TCP", for logs and tests.
  virtual const char *kind() const = 0;
  // Whether Regions spare the wire a copy (RDMA: registered, sent from and written into).
  virtual bool uses_regions() const { return false; }
  // Registrations of Regions made since the wire opened (one per region, member and direction
  // while they stay), and those kept now, for tests.
  virtual uint64_t registrations() const { return 0; }
  virtual size_t registrations_kept() { return 0; }
  // Windows onto a caller's buffer open to members now (RDMA: only during the transfer that
  // placed a message there), for tests.
  virtual uint32_t windows_open() const { return 0; }
  // The members this one has a connection with (RDMA: every other from the open on; TCP: those
  // a transfer moved bytes with), for logs and tests.
  virtual uint32_t links() const = 0;
  uint32_t index() const { return me_; }  // this rank's position in the members
  uint32_t size() const { return static_cast<uint32_t>(members_.size()); }
  uint32_t member(uint32_t i) const { return members_[i]; }

  // Send @out[p] to member p and receive @in[p] bytes from member p, for every other member
  // p (entries for this member are ignored; zero lengths are fine), chunk by chunk: @sink gets
  // every received chunk, each member's in the order of their offsets, the members' chunks
  // interleaved as they arrive; a member with @places[p].dest set gets its bytes put there
  // instead (Place), and the sink none of them (@places empty: none placed). The sender's and
  // the receiver's lengths must agree (the caller checked the call's arguments across servers).
  // Errors name the member's rank: HCCL_E_ROCE_TRANSFER (an RDMA transfer failed, or a member
  // broke the RDMA wire's protocol), HCCL_E_TCP_TRANSFER (a TCP connection failed, or a member
  // broke the TCP wire's protocol),
  // HCCL_E_REMOTE (the member aborted, or its connection ended), HCCL_E_TIMEOUT at @deadline.
  // HCCL_E_INTERNAL (the wire still usable) when a vector is not one entry per member.
  // After any other error the wire is unusable. A transfer that completed adds its bytes to the
  // group's traffic (Group::Traffic's wire_sent and wire_received).
  Status Transfer(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                  Clock::time_point deadline, const std::vector<Place> &places = {});

  // [base, base + len) is no longer activated: every registration of a Region inside it is
  // dropped before this returns (a transfer in progress keeps its own until it ends). Any
  // thread.
  virtual void Withdraw(uintptr_t base, size_t len) {
    (void)base;
    (void)len;
  }

  // Tell every other member that this member failed the call with @code (best effort): their
  // waits on this member end with HCCL_E_REMOTE naming it. The wire is unusable afterwards.
  void Abort(HcclResult code);

  // Chunks moved since the wire was opened (sent, received), for logs and tests.
  uint64_t chunks_sent() const;
  uint64_t chunks_received() const;

 protected:
  Wire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me, const Options &options);

  // Transfer on a wire that works; an error breaks it.
  // @places: one per member, or empty.
  virtual Status Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      const std::vector<Place> &places, Clock::time_point deadline) = 0;
  // Abort: tell the members @code (not HCCL_SUCCESS).
  virtual void Tell(HcclResult code) = 0;

  bootstrap::Group &group_;
  const std::vector<uint32_t> members_;
  const uint32_t me_;
  const Options options_;
  std::vector<uint64_t> sent_;      // [member]: chunks sent to it over the wire's life
  std::vector<uint64_t> received_;  // [member]: chunks consumed from it
  Status broken_;
};

}  // namespace hzc::transport
