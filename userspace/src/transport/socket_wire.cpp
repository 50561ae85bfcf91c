// SPDX-License-Identifier: Apache-2.0
#include "transport/socket_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "base/errno_string.h"
#include "base/fd_limit.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wait_fd.h"

namespace hzc::transport {

namespace {

using bootstrap::HelloReader;

// Tag on the group's connections, from Options::tags: the members' cards.
constexpr uint32_t kCardTag = 3;

constexpr uint32_t kHelloMagic = 0x487a5748;  // "HWzH"
constexpr uint32_t kDataMagic = 0x487a5744;   // "DWzH"
constexpr uint32_t kAbortMagic = 0x487a5741;  // "AWzH"

// How many accepted connections may wait for their hello at once (each until the open's
// deadline: see socket_wire.h).
constexpr size_t kMaxPending = 64;
// A wait polls in slices of at most this long.
constexpr int kPollSliceMs = 1000;

}  // namespace

// What a member tells the others over the group.
struct SocketWire::Card {
  uint16_t port;
  Token token;
};
static_assert(sizeof(SocketWire::Card) == 18);

namespace {

using Token = SocketWire::Token;

// What the lower member of a pair sends first on its connection.
struct Hello {
  uint32_t magic;
  uint32_t from;  // its index among the members
  Token token;    // the accepting member's
};
static_assert(sizeof(Hello) == 24);

// Before each chunk of a message, and the abort.
struct Frame {
  uint32_t magic;
  uint32_t length;  // of the chunk that follows
  uint64_t word;    // the chunk's number in its direction; the abort's code
};
static_assert(sizeof(Frame) == 16);

bool SameToken(const Token &a, const Token &b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= a[i] ^ b[i];
  }
  return diff == 0;
}

void SetPort(sockaddr_storage *addr, uint16_t port) {
  if (addr->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6 *>(addr)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in *>(addr)->sin_port = htons(port);
  }
}

uint16_t GetPort(const sockaddr_storage &addr) {
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 &>(addr).sin6_port
                                          : reinterpret_cast<const sockaddr_in &>(addr).sin_port);
}

// No Nagle; a peer that acknowledges nothing (its server gone, the link cut) fails the
// connection (bootstrap::WatchPeer).
void Tune(int fd) {
  bootstrap::SetNoDelay(fd);
  bootstrap::WatchPeer(fd);
}

}  // namespace

struct SocketWire::Peer {
  UniqueFd fd;
  std::string address;  // its listener's
  // The frame being sent: its header, then its chunk (the message's bytes from the transfer's
  // count of bytes sent on). out_len 0: none under way.
  Frame out_head{};
  size_t out_len = 0;
  size_t out_done = 0;  // bytes of header and chunk sent
  // The frame being received.
  Frame in_head{};
  size_t in_done = 0;                // bytes of header and chunk received
  std::unique_ptr<uint8_t[]> chunk;  // kChunk bytes, made on the first chunk from the peer
};

SocketWire::SocketWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
                       const Options &options)
    : Wire(group, std::move(members), me, options), peers_(members_.size()) {}

SocketWire::~SocketWire() = default;

std::string SocketWire::Name(uint32_t p) const {
  return fmt::format("rank {} (another server, {})", members_[p], peers_[p].address);
}

Expected<std::unique_ptr<Wire>> SocketWire::Open(bootstrap::Group &group,
                                                 std::vector<uint32_t> members, uint32_t me,
                                                 const Options &options,
                                                 Clock::time_point deadline) {
  std::unique_ptr<SocketWire> w(new SocketWire(group, std::move(members), me, options));
  HZC_RETURN_IF_ERROR(w->Connect(deadline));
  LogDebug("wire: rank {} is member {} of {} (TCP)", group.rank(), me, w->size());
  return std::unique_ptr<Wire>(std::move(w));
}

Status SocketWire::Connect(Clock::time_point deadline) {
  const uint32_t n = size();
  // Its connections and the bootstrap's to the same members (made when first needed).
  HZC_RETURN_IF_ERROR(ReserveDescriptors(
      2 * size_t{n - 1},
      fmt::format("the wire's and the bootstrap's connections to the other {} members", n - 1)));
  std::vector<sockaddr_storage> hosts(n);
  for (uint32_t p = 0; p < n; ++p) {
    const std::string &a = group_.Address(members_[p]);
    auto addr = bootstrap::ParseEndpoint(a);
    if (!addr.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "wire: rank {}'s address: {}", members_[p],
                   addr.status().message());
    }
    hosts[p] = *addr;
    SetPort(&hosts[p], 0);
    peers_[p].address = a;
  }
  // Listen where this rank's communicator connections arrive.
  sockaddr_storage bound{};
  auto listener = bootstrap::ListenOn(hosts[me_], /*reuse=*/false, &bound);
  if (!listener.ok()) {
    return Error(listener.status().code(), "wire: {}", listener.status().message());
  }
  Card mine{.port = GetPort(bound), .token = {}};
  if (getrandom(mine.token.data(), mine.token.size(), 0) !=
      static_cast<ssize_t>(mine.token.size())) {
    return Error(HCCL_E_SYSCALL, "wire: getrandom failed: {}", ErrnoString(errno));
  }
  auto all =
      group_.AllGatherFixed(members_, options_.tags + kCardTag, std::as_bytes(std::span(&mine, 1)),
                            deadline, "the addresses of the wire's members");
  if (!all.ok()) {
    return all.status();
  }
  std::vector<Card> cards(n);
  for (uint32_t p = 0; p < n; ++p) {
    if ((*all)[p].size() != sizeof(Card)) {
      return Error(HCCL_E_TCP_TRANSFER, "wire: rank {} sent {} bytes for its address", members_[p],
                   (*all)[p].size());
    }
    std::memcpy(&cards[p], (*all)[p].data(), sizeof(Card));
  }
  HZC_RETURN_IF_ERROR(DialHigher(hosts, cards, deadline));
  return AcceptLower(listener->get(), bound, mine.token, deadline);
}

Status SocketWire::DialHigher(const std::vector<sockaddr_storage> &hosts,
                              const std::vector<Card> &cards, Clock::time_point deadline) {
  for (uint32_t p = me_ + 1; p < size(); ++p) {
    sockaddr_storage to = hosts[p];
    SetPort(&to, cards[p].port);
    peers_[p].address = bootstrap::EndpointString(to);
    auto fd = bootstrap::Dial(to, deadline);
    if (!fd.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "wire: cannot connect to {}: {}", Name(p),
                   fd.status().message());
    }
    const Hello hello{.magic = kHelloMagic, .from = me_, .token = cards[p].token};
    if (Status st = bootstrap::SendAll(fd->get(), &hello, sizeof(hello), deadline); !st.ok()) {
      return Error(st.code(), "wire: hello to {}: {}", Name(p), st.message());
    }
    Tune(fd->get());
    peers_[p].fd = std::move(*fd);
  }
  return Status::Ok();
}

Status SocketWire::AcceptLower(int listener, const sockaddr_storage &bound, const Token &token,
                               Clock::time_point deadline) {
  if (me_ == 0) {
    return Status::Ok();
  }
  auto reader = HelloReader::Open(
      listener,
      {.where = fmt::format("wire: rank {} {}", group_.rank(), bootstrap::EndpointString(bound)),
       .hello_time = std::max(Clock::duration::zero(), deadline - Clock::now()),
       .max_pending = kMaxPending,
       .header = sizeof(Hello),
       .size = [](std::span<const std::byte> head) -> Expected<size_t> {
         uint32_t magic = 0;
         std::memcpy(&magic, head.data(), sizeof(magic));
         if (magic != kHelloMagic) {
           return Error(HCCL_E_TCP_CONNECT, "not a hello of the wire between servers");
         }
         return sizeof(Hello);
       },
       .evicted = {}});
  if (!reader.ok()) {
    return reader.status();
  }
  for (uint32_t waiting = me_; waiting > 0;) {
    auto next = reader->Next(deadline);
    if (!next.ok()) {
      return next.status();
    }
    if (!*next) {
      std::vector<uint32_t> missing;
      for (uint32_t p = 0; p < me_; ++p) {
        if (!peers_[p].fd.valid()) {
          missing.push_back(members_[p]);
        }
      }
      return Error(HCCL_E_TIMEOUT, "wire: rank(s) {} (other servers) did not connect in time",
                   fmt::join(missing, ","));
    }
    HelloReader::Hello &h = **next;
    Hello hello{};
    std::memcpy(&hello, h.data.data(), sizeof(hello));
    if (hello.from >= me_ || peers_[hello.from].fd.valid() || !SameToken(hello.token, token)) {
      reader->LogDropped(h.peer, "not a member of this wire (member number or token)");
      continue;
    }
    Tune(h.fd.get());
    peers_[hello.from].fd = std::move(h.fd);
    peers_[hello.from].address = h.peer;
    --waiting;
  }
  return Status::Ok();
}

Status SocketWire::Send(uint32_t p, const Out &out, size_t *sent, bool *moved) {
  Peer &peer = peers_[p];
  while (*sent < out.len) {
    if (peer.out_len == 0) {
      peer.out_len = std::min(kChunk, out.len - *sent);
      peer.out_head = {
          .magic = kDataMagic, .length = static_cast<uint32_t>(peer.out_len), .word = sent_[p]};
      peer.out_done = 0;
    }
    std::array<iovec, 2> iov{};
    size_t k = 0;
    if (peer.out_done < sizeof(Frame)) {
      iov[k++] = {reinterpret_cast<uint8_t *>(&peer.out_head) + peer.out_done,
                  sizeof(Frame) - peer.out_done};
    }
    const size_t body = peer.out_done > sizeof(Frame) ? peer.out_done - sizeof(Frame) : 0;
    iov[k++] = {const_cast<uint8_t *>(out.data + *sent + body), peer.out_len - body};
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = k;
    const ssize_t n = sendmsg(peer.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Status::Ok();
      }
      return Error(errno == EPIPE || errno == ECONNRESET ? HCCL_E_REMOTE : HCCL_E_TCP_TRANSFER,
                   "{}: the connection failed: {}", Name(p), ErrnoString(errno));
    }
    *moved = true;
    peer.out_done += static_cast<size_t>(n);
    if (peer.out_done == sizeof(Frame) + peer.out_len) {
      *sent += peer.out_len;
      ++sent_[p];
      peer.out_len = 0;
    }
  }
  return Status::Ok();
}

Status SocketWire::Receive(uint32_t p, size_t len, const Sink &sink, size_t *received,
                           bool *moved) {
  Peer &peer = peers_[p];
  while (*received < len) {
    const bool head = peer.in_done < sizeof(Frame);
    uint8_t *to = head ? reinterpret_cast<uint8_t *>(&peer.in_head) + peer.in_done
                       : peer.chunk.get() + (peer.in_done - sizeof(Frame));
    const size_t want =
        head ? sizeof(Frame) - peer.in_done : sizeof(Frame) + peer.in_head.length - peer.in_done;
    const ssize_t n = recv(peer.fd.get(), to, want, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Status::Ok();
      }
      return Error(errno == ECONNRESET ? HCCL_E_REMOTE : HCCL_E_TCP_TRANSFER,
                   "{}: the connection failed: {}", Name(p), ErrnoString(errno));
    }
    if (n == 0) {
      return Error(HCCL_E_REMOTE,
                   "{} closed the connection with {} of its {} bytes to come (its process ended "
                   "or it left the communicator)",
                   Name(p), len - *received, len);
    }
    *moved = true;
    peer.in_done += static_cast<size_t>(n);
    if (head && peer.in_done == sizeof(Frame)) {
      const Frame &f = peer.in_head;
      if (f.magic == kAbortMagic) {
        return Error(HCCL_E_REMOTE, "{} failed the call with code {}", Name(p), f.word);
      }
      const size_t due = std::min(kChunk, len - *received);
      if (f.magic != kDataMagic || f.length != due || f.word != received_[p]) {
        return Error(HCCL_E_TCP_TRANSFER,
                     "{} broke the wire's protocol: a frame of kind {:#x}, {} bytes, chunk {} "
                     "where chunk {} of {} bytes was due",
                     Name(p), f.magic, f.length, f.word, received_[p], due);
      }
      if (!peer.chunk) {
        peer.chunk = std::make_unique<uint8_t[]>(kChunk);
      }
    } else if (!head && peer.in_done == sizeof(Frame) + peer.in_head.length) {
      sink(p, *received, peer.chunk.get(), peer.in_head.length);
      *received += peer.in_head.length;
      ++received_[p];
      peer.in_done = 0;
    }
  }
  return Status::Ok();
}

Status SocketWire::Move(const std::vector<Out> &out, const std::vector<size_t> &in,
                        const Sink &sink, Clock::time_point deadline) {
  const uint32_t n = size();
  std::vector<size_t> sent(n), received(n);
  std::vector<pollfd> fds;
  std::vector<uint32_t> who;
  for (;;) {
    bool moved = false;
    fds.clear();
    who.clear();
    for (uint32_t p = 0; p < n; ++p) {
      if (p == me_) {
        continue;
      }
      Status st = Receive(p, in[p], sink, &received[p], &moved);
      if (st.ok()) {
        st = Send(p, out[p], &sent[p], &moved);
      }
      if (!st.ok()) {
        return FirstCause(std::move(st));
      }
      const short events = static_cast<short>((received[p] < in[p] ? POLLIN : 0) |
                                              (sent[p] < out[p].len ? POLLOUT : 0));
      if (events != 0) {
        fds.push_back({.fd = peers_[p].fd.get(), .events = events, .revents = 0});
        who.push_back(p);
      }
    }
    if (fds.empty()) {
      return Status::Ok();
    }
    if (moved) {
      continue;
    }
    const int ms = std::min(bootstrap::RemainingMs(deadline), kPollSliceMs);
    if (ms <= 0) {
      std::string late;
      for (uint32_t p : who) {
        late += fmt::format("{}{}: {}", late.empty() ? "" : "; ", Name(p),
                            received[p] < in[p] ? "no data" : "no room for the next chunk");
      }
      return Error(HCCL_E_TIMEOUT, "wire: {} within HCCL_EXEC_TIMEOUT", late);
    }
    if (poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "wire: poll failed: {}", ErrnoString(errno));
    }
  }
}

Status SocketWire::FirstCause(Status st) {
  Status relayed;
  for (uint32_t p = 0; p < size(); ++p) {
    Peer &peer = peers_[p];
    if (p == me_ || !peer.fd.valid() || peer.in_done != 0) {
      continue;
    }
    Frame f{};
    if (recv(peer.fd.get(), &f, sizeof(f), MSG_PEEK | MSG_DONTWAIT) !=
            static_cast<ssize_t>(sizeof(f)) ||
        f.magic != kAbortMagic) {
      continue;
    }
    Status abort = Error(HCCL_E_REMOTE, "{} failed the call with code {}", Name(p), f.word);
    if (f.word != static_cast<uint64_t>(HCCL_E_REMOTE)) {
      return abort;
    }
    if (relayed.ok()) {
      relayed = std::move(abort);
    }
  }
  return st.code() == HCCL_E_REMOTE && !relayed.ok() ? relayed : st;
}

void SocketWire::Tell(HcclResult code) {
  for (uint32_t p = 0; p < size(); ++p) {
    Peer &peer = peers_[p];
    if (p == me_ || !peer.fd.valid()) {
      continue;
    }
    if (peer.out_len == 0) {  // between frames: the abort frame is the next one
      const Frame f{.magic = kAbortMagic, .length = 0, .word = static_cast<uint64_t>(code)};
      if (send(peer.fd.get(), &f, sizeof(f), MSG_NOSIGNAL | MSG_DONTWAIT) !=
          static_cast<ssize_t>(sizeof(f))) {
        LogDebug("wire: cannot tell {} of the abort: {}", Name(p), ErrnoString(errno));
      }
    }
    shutdown(peer.fd.get(), SHUT_WR);
  }
}

}  // namespace hzc::transport
