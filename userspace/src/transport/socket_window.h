// SPDX-License-Identifier: Apache-2.0
// One-sided transfers over TCP (coll/one_sided.h), for servers without RDMA: what a rank exposes
// of its memory to its peers, served by a thread of its own, and its requests into theirs.
//
// Each rank that uses them listens on an ephemeral port of the address its communicator
// connections use, and a service thread (one per communicator) takes the peers' connections and
// serves their requests, so the rank whose memory is reached makes no call (as with RDMA). A
// peer learns where to connect from a card that reaches it over the communicator's authenticated
// connections (coll/one_sided.cpp), holding a random 16-byte token made for that peer alone and
// good for one connection: a connection is taken for rank r only when its hello carries the token
// this rank made for r, and is answered then (Connect waits for that answer); a stranger's, or a
// peer posing as another rank, is closed and logged. At most kMaxPending connections wait for
// their hello (kHelloTime each); the oldest from a host that is not a peer's (Open's @peers)
// makes room for a new one, else the oldest, except that a new one from elsewhere is closed when
// every waiting one is from a peer's host. A pair has two connections, one per direction of
// requests.
//
// Requests, in order on a connection: put {addr, len} and len bytes, which the thread receives
// straight into the memory and acknowledges once all arrived; get {addr, len}, answered with len
// bytes straight from the memory. The thread takes a request only when [addr, addr + len) lies in
// one span this rank exposed to that peer (or to every peer); anything else is answered with a
// refusal (a put's bytes are read and dropped first) and touches nothing; a header that is not a
// request closes the connection. The thread moves at most 1 MiB on one connection before it turns
// to the others. Withdraw takes a span away: a request on it that is under way has its connection
// closed, and when Withdraw returns no request touches the span any more.
//
// The initiator's side (Execute) sends a batch's requests (and a put's bytes) and then reads the
// answers (and a get's bytes straight into the local buffers); a batch is complete when it returns.
// Errors name the peer and the transfer: HCCL_E_REMOTE for a request the peer refused (its span
// withdrawn; the connection stays usable), HCCL_E_TCP_TRANSFER when the connection fails (the
// peer's process ended and its kernel closed it, or TCP gave up on the link: keepalive,
// bootstrap::WatchPeer: Config::PeerSilence, 34 s by default), HCCL_E_TIMEOUT at the deadline.
// A failed connection leaves the pair unusable: later batches to that peer fail at once.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace hzc::transport {

class SocketWindows {
 public:
  using Clock = std::chrono::steady_clock;
  using Token = std::array<uint8_t, 16>;
  static constexpr uint32_t kAnyPeer = UINT32_MAX;

  // What a peer needs to reach this rank's memory.
  struct Card {
    static constexpr uint32_t kMagic = 0x687a6f63;  // "hzoc"
    uint32_t magic = kMagic;
    uint16_t port = 0;
    uint16_t reserved = 0;
    Token token{};
  };

  // Listen where this rank's communicator connections arrive (@address, "host:port" of
  // @rank of @nranks) and start the service thread. HCCL_E_TCP_CONNECT when it cannot listen.
  // @peers: the other ranks' addresses ("host:port"); a connection from one of their hosts waits
  // behind every other host's for its hello (another host cannot keep the peers out).
  static Expected<std::unique_ptr<SocketWindows>> Open(uint32_t rank, uint32_t nranks,
                                                       const std::string &address,
                                                       const std::vector<std::string> &peers = {});
  // Stops the thread and closes every connection.
  ~SocketWindows();
  SocketWindows(const SocketWindows &) = delete;
  SocketWindows &operator=(const SocketWindows &) = delete;

  // The card for @peer: a fresh token (the only one a connection for @peer is taken with).
  Expected<Card> CardFor(uint32_t peer);
  // Connect to rank @peer at @address ("host:port" of its communicator connections) with the
  // card it sent this rank (untrusted: a bad one costs the connection).
  Status Connect(uint32_t peer, const std::string &address, const Card &card,
                 Clock::time_point deadline);

  // Expose [addr, addr + size) as span @id to @peer (kAnyPeer: to every peer).
  void Expose(uint64_t id, uint32_t peer, uint64_t addr, uint64_t size);
  // Take span @id away: no request touches it once this returns.
  void Withdraw(uint64_t id);

  struct Op {
    void *local = nullptr;
    uint64_t remote = 0;
    uint64_t bytes = 0;
  };
  // Run @ops with @peer (put: local into its memory; else its memory into local), until
  // @deadline. Batches to one peer run one at a time.
  Status Execute(uint32_t peer, std::span<const Op> ops, bool put, Clock::time_point deadline);

  struct Impl;

 private:
  explicit SocketWindows(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hzc::transport
