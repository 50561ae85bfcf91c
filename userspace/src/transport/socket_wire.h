// SPDX-License-Identifier: Apache-2.0
// The socket wire (transport/wire.h): TCP connections of the wire's own between its members, for
// servers without RDMA (or HZC_NET=socket).
//
// Setup, when the wire opens: every member listens on an ephemeral port of the address its
// communicator connections use and sends the port and a random 16-byte token over the group (whose
// connections are authenticated; Bruck's all-gather, ceil(log2 M) connections). No connection is
// made then: a pair connects when a transfer first moves bytes between its two members (an
// algorithm's neighbours: a ring's two, recursive doubling's ceil(log2 M)), the lower member
// dialing the higher and proving itself with the higher's token. A member keeps its listener
// (one descriptor) and one connection per member it exchanged bytes with. Hellos are read all at
// once: a stranger's or a garbled connection is dropped, logged, and delays nothing else; a silent
// one waits, at most until the open's deadline and among at most kMaxPending, the oldest pushed
// out first (a member whose process did not run for a few seconds between connecting and its
// hello, as on a host with far more ranks than CPUs, is not lost; no member dials again). A member
// waiting for a lower one to connect checks, from 200 ms on and then less often, that the lower
// one's listener is still there: refused, its process has ended (HCCL_E_REMOTE naming it).
//
// Transfer: each member's message goes in frames of at most kChunk bytes (a 16-byte header: kind,
// length, the chunk's number in that direction over the wire's life), written as the socket
// takes them and read as they come, every peer at once on non-blocking sockets (one poll when
// nothing moves): the kernel's socket buffers are the slots. A header that is not the frame the
// receiver expects (kind, length, number) breaks the wire with HCCL_E_TCP_TRANSFER naming the
// member; nothing it sent reaches the caller. Abort sends an abort frame (the code) to each
// member between frames and shuts the connection down for writing, and connects to each member
// it had no connection with to say so in its hello: the members fail with HCCL_E_REMOTE naming
// this rank, whether they wait for its bytes or for another member's. A dead peer process closes
// its connections (HCCL_E_REMOTE); a server that goes away or a cut link fails the connection once
// TCP gives up (keepalive probes every second, Config::PeerSilence without an acknowledgement,
// 34 s by default: HCCL_E_TCP_TRANSFER), long before HCCL_EXEC_TIMEOUT.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"
#include "transport/wire.h"

namespace hzc::transport {

class SocketWire final : public Wire {
 public:
  using Token = std::array<uint8_t, 16>;
  struct Card;  // what a member tells the others over the group (socket_wire.cpp)

  static Expected<std::unique_ptr<Wire>> Open(bootstrap::Group &group,
                                              std::vector<uint32_t> members, uint32_t me,
                                              const Options &options, Clock::time_point deadline);
  ~SocketWire() override;

  const char *kind() const override { return "TCP"; }
  uint32_t links() const override;

 private:
  struct Peer;
  SocketWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
             const Options &options);

  // Listen, and exchange the listeners' ports and tokens over the group.
  Status Setup(Clock::time_point deadline);
  // Connect to every member that @out or @in moves bytes with and this one has no connection to
  // yet: dial the higher ones, then take the lower ones' connections.
  Status Link(const std::vector<Out> &out, const std::vector<size_t> &in,
              Clock::time_point deadline);
  // A connection to member @p's listener that has sent it a hello of kind @magic (with @code);
  // HCCL_E_REMOTE when the listener refuses it (the member's process ended).
  Expected<UniqueFd> Greet(uint32_t p, uint32_t magic, uint32_t code, Clock::time_point deadline);
  // Connect to member @p (higher than this one, or any member for @abort) and send its hello:
  // a data connection's, or the news that this member failed with @abort.
  Status Dial(uint32_t p, HcclResult abort, Clock::time_point deadline);
  // Take the next connection that reached the listener, waiting until @until for one (false
  // when none came): keep a lower member's data connection, drop a probe or a stranger's
  // (logged); a member's news of its abort is the error (HCCL_E_REMOTE naming it).
  Expected<bool> Take(Clock::time_point until);
  // Take the connections that are there now (at most kMaxPending + 1 of them); the first news
  // of a member's abort among them is the error.
  Status TakeWaiting();
  // Whether lower member @p's listener refuses connections (its process ended); a connection
  // that is taken says nothing and is closed after a probe's hello.
  bool Gone(uint32_t p, Clock::time_point deadline);
  Status Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
              const std::vector<Place> &places, Clock::time_point deadline) override;
  void Tell(HcclResult code) override;
  // Send what member @p's socket takes of @out, from *@sent bytes on. *@moved when anything went.
  Status Send(uint32_t p, const Out &out, size_t *sent, bool *moved);
  // Receive what has arrived of @len bytes from member @p, from *@received bytes on: straight
  // into @dest when set, else whole chunks to @sink. *@moved when anything came.
  Status Receive(uint32_t p, size_t len, const Sink &sink, uint8_t *dest, size_t *received,
                 bool *moved);
  // The error to report for @st, a transfer's failure: a member's abort that is waiting to be
  // read explains more than the connection another member closed after it learnt of it (an
  // abort for a reason of its own before one that relays HCCL_E_REMOTE); else @st.
  Status FirstCause(Status st);
  // "rank 3 (another server, 10.0.0.2:41234)".
  std::string Name(uint32_t p) const;

  std::vector<Peer> peers_;  // [member]; none for this member
  UniqueFd listener_;
  std::optional<bootstrap::HelloReader> reader_;  // on listener_
  Token token_{};                                 // the lower members prove they hold it
};

}  // namespace hzc::transport
