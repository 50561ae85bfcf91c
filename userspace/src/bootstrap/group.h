// SPDX-License-Identifier: Apache-2.0
// The TCP connections between the ranks of a communicator that spans servers.
//
// Every rank listens (Listener, made before the rendezvous, so that its address travels in
// the rank's hello) and, once the rendezvous gave every rank's address, Group::Connect starts a
// thread that serves the listener; no connection is made then. A rank connects to another when it
// first sends it a message (Send, AllGather): it dials, and a handshake names the communicator
// by a tag derived from its id and both ranks, and both ends prove they hold the id, the
// communicator's key (bootstrap/auth.h), so a stray, foreign or stranger's connection is refused;
// so is one from an address off the trust list, HCCL_WHITELIST_FILE. The listener's thread reads
// the handshakes of all the connections that reach it at once, each step within its own 2 s
// (bootstrap/socket_io.h, HelloReader): a silent, garbled or unproven connection is dropped,
// logged at WARN naming its address, and delays no other. Two ranks that dial each other at once
// keep both connections: each sends on the first it had and reads both, so each direction keeps
// to one connection and its messages arrive in order. A receive from a rank with no connection
// yet waits for it to connect, and after 200 ms dials it itself. So a rank keeps a connection
// only with the ranks it exchanged messages with: the descriptors per rank follow the
// algorithms, not the rank count. A rank that refuses a connection has closed its group (it is
// gone): HCCL_E_REMOTE at once.
// Over them ranks send small tagged messages: link-setup blobs (queue pairs, GIDs), memory
// keys, and the errors a rank reports before it gives up. A connection that ends (the peer
// process died, its server went away and the kernel reset the connection) fails every later
// send to and receive from that peer with HCCL_E_REMOTE naming the peer, once every connection
// with it has ended and was read to its end, and none is still in its handshake here (its last
// message may wait on the other one, or behind that one's handshake, for at most 2 s).
//
// Messages are framed (space, tag, length, payload; at most 1 MiB); a receive of tag T from peer
// p keeps frames of other spaces and tags that arrive first for their own receive, within bounds:
// a peer that sends more than 256 messages of one space and tag, or 32 MiB of messages in all,
// that no receive took, or a message longer than 1 MiB, breaks the protocol: its connection fails
// with HCCL_E_TCP_TRANSFER saying so (it is shut down, and what it sent is dropped). While a send
// waits for its socket, the group reads what every peer sends (so ranks sending each other large
// messages do not wait for each other). Sockets are close-on-exec, non-blocking, TCP_NODELAY; sends
// use MSG_NOSIGNAL. Threads may use one Group at once (the collectives and point-to-point transfers
// of a communicator run on different streams): frames to one peer go whole, one after the other,
// and each receive takes only frames of its own space and tag.
//
// A sub-communicator whose ranks span servers uses its parent's connections through a view
// (Group::Subgroup): its own rank numbers, translated to the parent's, and a space of its own,
// so that its messages never meet those of the parent or of another view on the same
// connections, whatever their tags. A view keeps the connections open after the Group it was
// made from is destroyed; they close with the last of them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "bootstrap/auth.h"
#include "bootstrap/root_info.h"

namespace hzc::bootstrap {

class Listener {
 public:
  // Listen on an ephemeral port of @address (IPv4/IPv6 literal; empty: HCCL_IF_IP, else the
  // first up non-loopback IPv4 interface, else 127.0.0.1, as StartRoot).
  // HCCL_E_TCP_CONNECT naming the address when the socket cannot be made or bound.
  static Expected<Listener> Open(const std::string &address);

  // "1.2.3.4:5678" or "[::1]:5678": what the other ranks connect to.
  const std::string &address() const { return address_; }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  std::string address_;
};

class Group {
 public:
  using Clock = std::chrono::steady_clock;
  using Blob = std::vector<std::byte>;

  // Rank @rank of the ranks at @addresses (rank r's listener address at [r], as the rendezvous
  // returned them) for communicator @id: serves @listener (consumed) from now on; connections
  // are made when first needed (@deadline is not used: each call has its own). A connection whose
  // handshake is not of this communicator is refused (logged at WARN). HCCL_E_TCP_CONNECT for a
  // malformed address (naming the rank), HCCL_E_PARA for @rank out of range; @trust: the trust
  // list (nullopt: the process's; HCCL_E_PARA or HCCL_E_OPEN_FILE_FAILURE when that cannot be
  // read). A send to a rank that is not reached by its deadline is HCCL_E_TCP_CONNECT (its
  // address does not answer) or HCCL_E_TIMEOUT (it does not serve its group) naming it.
  static Expected<std::unique_ptr<Group>> Connect(Listener listener, const UniqueId &id,
                                                  uint32_t rank,
                                                  const std::vector<std::string> &addresses,
                                                  Clock::time_point deadline,
                                                  std::optional<TrustList> trust = std::nullopt);
  // A view of @parent's connections for its ranks @members (ascending, distinct, ranks of
  // @parent that include @parent's own rank): rank i of the view is @parent's rank @members[i],
  // and the view's messages travel in @space, which must differ from @parent's and from every
  // other view's of the same connections (the members of one view pass the same @space; a
  // Group from Connect has space 0). A view of a view translates to the connections' ranks in
  // turn. Errors of the view name peers by its own rank numbers. HCCL_E_PARA for a bad member
  // list or space.
  static Expected<std::unique_ptr<Group>> Subgroup(const Group &parent,
                                                   std::vector<uint32_t> members, uint64_t space);
  ~Group();
  Group(const Group &) = delete;
  Group &operator=(const Group &) = delete;

  uint32_t rank() const { return rank_; }
  uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }
  uint64_t space() const { return space_; }

  // Bytes this view moved for its communicator since it was made, for hzc_comm_net_stats:
  // its own messages that went out or were received whole (headers included), and the payload
  // that wires opened on it moved (Wire::Transfer adds it). Any thread may read them.
  struct Traffic {
    std::atomic<uint64_t> sent{0}, received{0};            // the group's messages
    std::atomic<uint64_t> wire_sent{0}, wire_received{0};  // the wires' payload
    // Of wire_sent over RDMA: copied into the wire's outbox first, or read by the RDMA device
    // from the caller's buffer (Wire::Region). Over TCP neither (the kernel copies).
    std::atomic<uint64_t> wire_staged{0}, wire_direct{0};
    // Of wire_received over RDMA: copied or reduced from the wire's landing slots, or written
    // by the sending server's RDMA device straight into the caller's buffer (Wire::Place).
    std::atomic<uint64_t> wire_landed{0}, wire_placed{0};
  };
  Traffic &traffic() { return traffic_; }
  const Traffic &traffic() const { return traffic_; }

  // Send @data (at most 1 MiB) to @peer under @tag. HCCL_E_REMOTE when the connection to
  // @peer ended ("rank 3 (10.77.0.2:41234) closed the connection"), HCCL_E_TCP_TRANSFER for
  // another socket error, HCCL_E_TIMEOUT at @deadline (the connection is unusable after a
  // message cut off so), HCCL_E_PARA for a bad peer (this rank, out of range) or an oversized
  // message. Errors name the peer.
  Status Send(uint32_t peer, uint32_t tag, std::span<const std::byte> data,
              Clock::time_point deadline);
  // The next message of @tag from @peer; messages that arrived before the connection ended are
  // still received. Errors as Send.
  Expected<Blob> Recv(uint32_t peer, uint32_t tag, Clock::time_point deadline);

  // Every member's @mine under @tag, in the order of @members (ascending ranks that include
  // this rank; the others pass the same list): sends to every other member, then receives
  // from each. @what prefixes errors ("link setup: rank 3 (10.77.0.2:41234) closed the
  // connection"); HCCL_E_PARA when @members is not such a list.
  Expected<std::vector<Blob>> AllGather(std::span<const uint32_t> members, uint32_t tag,
                                        std::span<const std::byte> mine, Clock::time_point deadline,
                                        std::string_view what);

  // As AllGather, for messages of one size on every member (at most 1 MiB / members): in
  // ceil(log2 n) rounds (Bruck's all-gather), in each of which a member sends what it has so far
  // to one other and receives from one other, so a member connects to and exchanges with
  // ceil(log2 n) others instead of n - 1. HCCL_E_REMOTE naming a member whose message is not of
  // that size.
  Expected<std::vector<Blob>> AllGatherFixed(std::span<const uint32_t> members, uint32_t tag,
                                             std::span<const std::byte> mine,
                                             Clock::time_point deadline, std::string_view what);

  // Non-blocking: why the connection to @peer is unusable (it ended or failed), empty while it
  // works. Reads what has arrived into the queue of later receives; takes no message. For a
  // @peer that is not another rank: why not.
  std::string Broken(uint32_t peer);

  // Rank @r's listener address ("1.2.3.4:5678", this rank's own too): its host is where the
  // rank can be reached.
  const std::string &Address(uint32_t r) const;

 private:
  struct Impl;
  Group(std::shared_ptr<Impl> impl, uint64_t space, std::vector<uint32_t> ranks, uint32_t rank);
  // "rank 3 (10.77.0.2:41234)", 3 being @peer, a rank of this group.
  std::string Name(uint32_t peer) const;
  Status CheckPeer(uint32_t peer, std::string_view call) const;

  std::shared_ptr<Impl> impl_;  // the connections, shared by the views of them
  uint64_t space_ = 0;
  std::vector<uint32_t> ranks_;  // [rank of this group]: the rank of the connections
  uint32_t rank_ = 0;            // this rank, in this group's numbers
  Traffic traffic_;
};

}  // namespace hzc::bootstrap
