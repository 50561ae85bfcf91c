// SPDX-License-Identifier: Apache-2.0
// The socket wire (transport/wire.h): TCP connections of the wire's own between its members, for
// servers without RDMA (or HZC_NET=socket).
//
// Setup: every member listens on an ephemeral port of the address its communicator connections
// use and sends the port and a random 16-byte token over the group (whose connections are
// authenticated); the lower member of each pair connects to the higher and proves itself with
// the higher's token (hellos read all at once: a stranger's or a garbled connection is dropped,
// logged, and delays nothing else; a silent one waits, at most until the open's deadline and
// among at most kMaxPending, the oldest pushed out first: a member whose process did not run for
// a few seconds between connecting and its hello, as on a host with far more ranks than CPUs, is
// not lost, and no member dials again). The listener closes once every lower member is connected:
// a wire of M members keeps M - 1 descriptors.
//
// Transfer: each member's message goes in frames of at most kChunk bytes (a 16-byte header: kind,
// length, the chunk's number in that direction over the wire's life), written as the socket
// takes them and read as they come, every peer at once on non-blocking sockets (one poll when
// nothing moves): the kernel's socket buffers are the slots. A header that is not the frame the
// receiver expects (kind, length, number) breaks the wire with HCCL_E_TCP_TRANSFER naming the
// member; nothing it sent reaches the caller. Abort sends an abort frame (the code) to each
// member between frames and shuts the connection down for writing: the members fail with
// HCCL_E_REMOTE naming this rank. A dead peer process closes its connections (HCCL_E_REMOTE);
// a server that goes away or a cut link fails the connection once TCP gives up (keepalive
// probes every second, 8 s without an acknowledgement: HCCL_E_TCP_TRANSFER), long before
// HCCL_EXEC_TIMEOUT.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

 private:
  struct Peer;
  SocketWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
             const Options &options);

  // The connections: addresses and tokens exchanged over the group, then DialHigher and
  // AcceptLower.
  Status Connect(Clock::time_point deadline);
  // Connect to every higher member (@hosts: their addresses, @cards: their ports and tokens)
  // and send each its hello.
  Status DialHigher(const std::vector<sockaddr_storage> &hosts, const std::vector<Card> &cards,
                    Clock::time_point deadline);
  // Take the lower members' connections on @listener (bound to @bound), each proving it holds
  // @token; others are dropped and logged.
  Status AcceptLower(int listener, const sockaddr_storage &bound, const Token &token,
                     Clock::time_point deadline);
  Status Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
              Clock::time_point deadline) override;
  void Tell(HcclResult code) override;
  // Send what member @p's socket takes of @out, from *@sent bytes on. *@moved when anything went.
  Status Send(uint32_t p, const Out &out, size_t *sent, bool *moved);
  // Receive what has arrived of @len bytes from member @p, from *@received bytes on, whole
  // chunks to @sink. *@moved when anything came.
  Status Receive(uint32_t p, size_t len, const Sink &sink, size_t *received, bool *moved);
  // The error to report for @st, a transfer's failure: a member's abort that is waiting to be
  // read explains more than the connection another member closed after it learnt of it (an
  // abort for a reason of its own before one that relays HCCL_E_REMOTE); else @st.
  Status FirstCause(Status st);
  // "rank 3 (another server, 10.0.0.2:41234)".
  std::string Name(uint32_t p) const;

  std::vector<Peer> peers_;  // [member]; none for this member
};

}  // namespace hzc::transport
