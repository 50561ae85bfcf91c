// SPDX-License-Identifier: Apache-2.0
// Point-to-point transfers (HcclSend, HcclRecv, HcclBatchSendRecv items) between ranks of
// different servers of a communicator that spans servers.
//
// Links. Each ordered pair of ranks (sender s, receiver r) on different servers has its own
// two-member wire (transport/wire.h: RDMA WRITEs of chunks into registered landing slots, set up
// over the pair's TCP connection), opened by the first send of s to r and the first receive of
// r from s, which meet in Wire::Open until the call's deadline. A pair moving data both ways
// has two wires, so a send and a receive between the same ranks never wait for each other,
// and the n-th send of s to r meets the n-th receive of r from s, as inside a server.
//
// Per message, on the wire of (s, r): s writes a header (number, count, dataType, or
// "refused"); r answers it (match, mismatch with its own count and dataType, or "refused");
// only after a match does s write the data, which r copies into its buffer chunk by chunk.
// Every message has exactly one header and one answer: a rank that refuses its own call
// (its arguments failed its own checks) writes its half at once and reads the other half
// at its next message on that wire, so a refusal never waits for the peer and both sides stay
// in step. A mismatch or a refusal moves nothing and leaves the wire usable (HCCL_E_PARA on
// both sides, naming the other rank); a refusal before the pair's wire exists reaches nobody
// (the peer times out), as inside a server.
//
// A batch runs the items of each (peer, direction) in list order in a thread of their own,
// all at once, so a ring exchange in one batch on every rank progresses. A failure half-way
// (a transfer that fails, the peer's abort, HCCL_EXEC_TIMEOUT) breaks that wire: the peer's
// wait ends at once with HCCL_E_REMOTE naming this rank, and both sides' later transfers on
// it fail with HCCL_E_REMOTE; other pairs and the collectives are unaffected. Destroying the
// communicator says goodbye on every open wire (at most 10 s in all).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "coll/p2p_item.h"
#include "core/comm.h"
#include "transport/wire.h"

namespace hzc::coll {

// Whether rank @peer of @comm runs on another server than this rank.
bool OnOtherServer(const Communicator &comm, uint32_t peer);

class RemoteP2p {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RemoteP2p(Communicator &comm);
  ~RemoteP2p();  // the goodbyes
  RemoteP2p(const RemoteP2p &) = delete;
  RemoteP2p &operator=(const RemoteP2p &) = delete;

  // Run @items (validated, count > 0, every peer on another server) until @deadline; the
  // result of items[i] in (*results)[i]. One call at a time.
  void Run(const std::vector<P2pItem> &items, std::vector<Status> *results,
           Clock::time_point deadline);

  // This rank refuses @items (peers on other servers): every item whose wire is open is
  // posted as refused. The ranks told.
  std::vector<uint32_t> Refuse(const std::vector<P2pItem> &items, Clock::time_point deadline);

 private:
  struct Link;
  using Key = std::pair<uint32_t, P2pItem::Dir>;  // (peer, this rank's direction)

  Link &Get(const Key &key);
  Status Open(Link &link, Clock::time_point deadline);
  Status Send(Link &link, const P2pItem &item, Clock::time_point deadline);
  Status Recv(Link &link, const P2pItem &item, Clock::time_point deadline);
  Status RunOne(Link &link, const P2pItem &item, Clock::time_point deadline);

  Communicator &comm_;
  std::map<Key, std::unique_ptr<Link>> links_;
};

}  // namespace hzc::coll
