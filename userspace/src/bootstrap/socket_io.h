// SPDX-License-Identifier: Apache-2.0
// The TCP sockets of the bootstrap (the rendezvous, Group): addresses, listening sockets and
// whole-buffer transfers until a deadline. Used by the bootstrap and by the socket wire between
// servers (transport/socket_wire.h).
#pragma once

#include <hccl/hccl_types.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc::bootstrap {

socklen_t AddrLen(const sockaddr_storage &addr);

// An IPv4 or IPv6 literal, port 0; HCCL_E_PARA naming @text otherwise.
Expected<sockaddr_storage> ParseAddress(const std::string &text);
// "1.2.3.4:5678" or "[::1]:5678" (as EndpointString writes them); HCCL_E_PARA otherwise.
Expected<sockaddr_storage> ParseEndpoint(const std::string &text);
// "1.2.3.4:5678" or "[::1]:5678".
std::string EndpointString(const sockaddr_storage &addr);

// The first up non-loopback IPv4 interface's address, else "127.0.0.1".
std::string DefaultAddress();
// @address if not empty, else HCCL_IF_IP if set, else DefaultAddress().
std::string ChooseAddress(const std::string &address);

// The port of @addr (IPv4 or IPv6), and setting it.
uint16_t GetPort(const sockaddr_storage &addr);
void SetPort(sockaddr_storage *addr, uint16_t port);

// Whether @a and @b hold the same bytes, in a time that does not depend on where they differ
// (for tokens a peer must prove it holds).
bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b);

// A close-on-exec socket listening on @addr (port 0: an ephemeral one; @reuse: SO_REUSEADDR, for
// a fixed port that recent connections may still hold); *@bound: the address it is bound to.
// HCCL_E_TCP_CONNECT naming @addr when it cannot be made; *@in_use tells EADDRINUSE apart.
Expected<UniqueFd> ListenOn(const sockaddr_storage &addr, bool reuse, sockaddr_storage *bound,
                            bool *in_use = nullptr);

// A non-blocking, close-on-exec TCP connection to @addr, retried until @deadline while it is
// refused (unless @refused_ends: a refusal is then the answer) or unreachable.
// HCCL_E_TCP_CONNECT with the last error otherwise; *@refused (if not null): the connection was
// refused.
Expected<UniqueFd> Dial(const sockaddr_storage &addr,
                        std::chrono::steady_clock::time_point deadline, bool refused_ends = false,
                        bool *refused = nullptr);

// Turn Nagle's algorithm off on TCP socket @fd: a small message leaves at once instead of
// waiting for the peer's (delayed, up to 40 ms) acknowledgement of the one before it.
void SetNoDelay(int fd);

// Make TCP socket @fd fail (ETIMEDOUT) once its peer acknowledges nothing for
// GetConfig().PeerSilence() (HCCL_RDMA_TIMEOUT and HCCL_RDMA_RETRY_CNT: 34 s by default, the
// stall an RDMA link between servers outlasts), whether data or only keepalive probes go
// unanswered: a cut link or a server that is gone ends a connection that is only waiting to
// read. Not on a connection within this host (loopback, or this host's address at both ends: no
// link to lose; a peer that dies has its kernel reset the connection), where the probes of many
// idle connections (a thousand ranks simulating servers on one host) would only cost time.
void WatchPeer(int fd);

// Whether @a's IP address is one of @hosts' (ports ignored; an IPv4-mapped IPv6 address is its
// IPv4 one).
bool SameHost(const sockaddr_storage &a, std::span<const sockaddr_storage> hosts);

// Both, for a connection between ranks: no Nagle (SetNoDelay), and a peer that acknowledges
// nothing fails it (WatchPeer).
void TuneLink(int fd);

// Send or receive @len bytes at @data, waiting for the socket until @deadline (HCCL_E_TIMEOUT);
// HCCL_E_TCP_TRANSFER when the peer closed the connection or another socket error. Blocking and
// non-blocking sockets alike.
Status SendAll(int fd, const void *data, size_t len,
               std::chrono::steady_clock::time_point deadline);
Status RecvAll(int fd, void *data, size_t len, std::chrono::steady_clock::time_point deadline);

// Send @data to every connection of @fds at once, each as its socket takes it (one slow or silent
// peer delays no other), until @deadline: each connection's outcome, as SendAll's.
std::vector<Status> SendToEach(std::span<const int> fds, std::span<const std::byte> data,
                               std::chrono::steady_clock::time_point deadline);

// The connections that reach a listening socket, served all at once until each has sent its first
// message (its hello): a slow, silent or malformed connection costs only itself. Each connection
// has its own deadline (Options::hello_time after it was accepted); one that passes it, closes,
// or sends a hello that Options::size rejects is closed and logged at WARN ("<where>: dropped a
// connection from <peer>: <why>"). Bytes after the hello stay unread in the socket. A connection
// is judged by what it sent, not by when the reader ran: a hello that waits in the socket when
// its deadline has passed (the reader's thread did not run: a loaded host) is still taken.
//
// At most Options::max_pending connections wait for their hello at once. Beyond that the oldest
// one is dropped to make room (Options::evicted may tell it why first) rather than new ones
// refused: a real peer sends its hello right after connecting, so the connection that has waited
// longest is the one least likely to be real, while refusing new ones would let a few silent
// connections keep every real peer out until their deadlines pass, again and again. New
// connections are taken a few at a time and waiting ones are read first, so a real peer whose
// hello has arrived is read before a flood of connections can push it out. Where the peers'
// hosts are known (Options::known), a connection from one of them is pushed out only when every
// waiting connection is from one: another host on the network, however many connections it
// opens, cannot keep a peer out (a peer that dials from another address of its host is only
// treated like a stranger here, not refused).
class HelloReader {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string where;  // starts every log line: "bootstrap: root 10.0.0.1:5000"
    Clock::duration hello_time{};
    size_t max_pending = 0;
    size_t header = 0;  // the bytes of a hello that tell its size (its length word, say)
    // The size of the whole hello from its first @header bytes (at least @header); an error whose
    // message says why for a header no peer of the protocol sends (a length out of bounds).
    std::function<Expected<size_t>(std::span<const std::byte> header)> size;
    // Called with a connection about to be dropped for a newer one; may be empty.
    std::function<void(int fd)> evicted;
    // The addresses the protocol's peers dial from (their own listeners'; the port is ignored);
    // empty: every connection alike.
    std::vector<sockaddr_storage> known;
  };
  struct Hello {
    UniqueFd fd;                  // non-blocking, close-on-exec
    std::string peer;             // the peer's address, "1.2.3.4:5678"
    std::vector<std::byte> data;  // the whole hello, header included
    std::string state;            // what the caller kept with it (Again); empty at first
    bool known = false;           // from one of Options::known
  };

  // Serves @listener (made non-blocking; it stays the caller's). HCCL_E_SYSCALL naming the
  // failure when it cannot be made non-blocking.
  static Expected<HelloReader> Open(int listener, Options options);

  // The next whole hello, waiting at most until @deadline (nullopt then; a @deadline that has
  // passed takes what is there without waiting), or until the listener is shut down (nullopt at
  // once: how its owner stops a thread that waits here); HCCL_E_SYSCALL when poll fails.
  Expected<std::optional<Hello>> Next(Clock::time_point deadline);

  // Append to @fds what Next waits on (the listener, the connections whose hello is not in yet),
  // for a caller that waits on them among its own: when any is ready, Next(a passed deadline).
  void Watch(std::vector<pollfd> *fds) const;

  // Serve @hello's connection again for its next message (a handshake's next step), within a new
  // Options::hello_time; Next returns it with @hello.state as given here.
  void Again(Hello hello);

  // Log that the connection of @peer was dropped because of @why, as this reader does: at most
  // kDroppedLines lines a second (a host that floods the listener does not flood the log); the
  // next line after a second in which more were dropped says how many went unlogged.
  static constexpr int kDroppedLines = 10;
  void LogDropped(const std::string &peer, const std::string &why) const;

 private:
  struct Pending {
    UniqueFd fd;
    std::string peer;
    Clock::time_point deadline;
    std::vector<std::byte> data;  // the header, then the whole hello once its size is known
    size_t got = 0;               // of data
    bool sized = false;           // data has the whole hello's size
    std::string state;            // Hello::state
    bool known = false;           // Hello::known
  };
  HelloReader(int listener, Options options) : listener_(listener), options_(std::move(options)) {}
  // Read what @p has sent; false when it is done with (a whole hello, or dropped).
  bool Read(Pending &p);
  void Accept();
  void Expire(Clock::time_point now);

  int listener_;
  Options options_;
  std::deque<Pending> pending_;  // oldest first
  std::deque<Hello> ready_;      // whole hellos not yet returned
  Clock::time_point accept_paused_until_{};
  int last_accept_error_ = 0;
  mutable LineBudget dropped_lines_{kDroppedLines};  // LogDropped's
};

}  // namespace hzc::bootstrap
