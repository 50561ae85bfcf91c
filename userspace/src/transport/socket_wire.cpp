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
#include <chrono>
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

constexpr uint32_t kHelloMagic = 0x487a5748;  // "HWzH": a data connection
constexpr uint32_t kNewsMagic = 0x487a574e;   // "NWzH": the news of an abort (code)
constexpr uint32_t kProbeMagic = 0x487a5750;  // "PWzH": is the listener there?
constexpr uint32_t kDataMagic = 0x487a5744;   // "DWzH"
constexpr uint32_t kAbortMagic = 0x487a5741;  // "AWzH"

// How many accepted connections may wait for their hello at once (each until the open's
// deadline: see socket_wire.h).
constexpr size_t kMaxPending = 64;
// A wait polls in slices of at most this long.
constexpr int kPollSliceMs = 1000;
// A member waiting for a lower one's connection checks that its listener is there after this
// long, then twice as long after each check, up to kProbeMax; each check waits up to kProbeMax
// for its connection.
constexpr std::chrono::milliseconds kProbeFirst{200};
constexpr std::chrono::milliseconds kProbeMax{2000};
// How long Abort spends on connecting to each member it had no connection with.
constexpr std::chrono::milliseconds kNewsTime{1000};

}  // namespace

// What a member tells the others over the group.
struct SocketWire::Card {
  uint16_t port;
  Token token;
};
static_assert(sizeof(SocketWire::Card) == 18);

namespace {

using Token = SocketWire::Token;

// What a member sends first on a connection it made: the lower member of a pair on their data
// connection, or any member with the news of its abort, or a probe.
struct Hello {
  uint32_t magic;
  uint32_t from;  // its index among the members
  Token token;    // the accepting member's
  uint32_t code;  // the news: the abort's code
  uint32_t zero;
};
static_assert(sizeof(Hello) == 32);

// Before each chunk of a message, and the abort.
struct Frame {
  uint32_t magic;
  uint32_t length;  // of the chunk that follows
  uint64_t word;    // the chunk's number in its direction; the abort's code
};
static_assert(sizeof(Frame) == 16);

}  // namespace

struct SocketWire::Peer {
  UniqueFd fd;          // none until a transfer first moves bytes with it
  std::string address;  // its listener's, then its connection's
  sockaddr_storage listener{};
  Token token{};      // its listener's
  uint32_t told = 0;  // the code of its abort, from its news
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

uint32_t SocketWire::links() const {
  return static_cast<uint32_t>(
      std::count_if(peers_.begin(), peers_.end(), [](const Peer &p) { return p.fd.valid(); }));
}

std::string SocketWire::Name(uint32_t p) const {
  return fmt::format("rank {} (another server, {})", members_[p], peers_[p].address);
}

Expected<std::unique_ptr<Wire>> SocketWire::Open(bootstrap::Group &group,
                                                 std::vector<uint32_t> members, uint32_t me,
                                                 const Options &options,
                                                 Clock::time_point deadline) {
  std::unique_ptr<SocketWire> w(new SocketWire(group, std::move(members), me, options));
  HZC_RETURN_IF_ERROR(w->Setup(deadline));
  LogDebug("wire: rank {} is member {} of {} (TCP)", group.rank(), me, w->size());
  return std::unique_ptr<Wire>(std::move(w));
}

Status SocketWire::Setup(Clock::time_point deadline) {
  const uint32_t n = size();
  for (uint32_t p = 0; p < n; ++p) {
    const std::string &a = group_.Address(members_[p]);
    auto addr = bootstrap::ParseEndpoint(a);
    if (!addr.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "wire: rank {}'s address: {}", members_[p],
                   addr.status().message());
    }
    peers_[p].listener = *addr;
    bootstrap::SetPort(&peers_[p].listener, 0);
    peers_[p].address = a;
  }
  // Listen where this rank's communicator connections arrive.
  sockaddr_storage bound{};
  auto listener = bootstrap::ListenOn(peers_[me_].listener, /*reuse=*/false, &bound);
  if (!listener.ok()) {
    return Error(listener.status().code(), "wire: {}", listener.status().message());
  }
  listener_ = std::move(*listener);
  std::vector<sockaddr_storage> hosts;  // the members' (another host's connection waits behind)
  for (uint32_t p = 0; p < n; ++p) {
    if (p != me_) {
      hosts.push_back(peers_[p].listener);
    }
  }
  auto reader = HelloReader::Open(
      listener_.get(),
      {.where = fmt::format("wire: rank {} {}", group_.rank(), bootstrap::EndpointString(bound)),
       .hello_time = std::max(Clock::duration::zero(), deadline - Clock::now()),
       .max_pending = kMaxPending,
       .header = sizeof(Hello),
       .size = [](std::span<const std::byte> head) -> Expected<size_t> {
         uint32_t magic = 0;
         std::memcpy(&magic, head.data(), sizeof(magic));
         if (magic != kHelloMagic && magic != kNewsMagic && magic != kProbeMagic) {
           return Error(HCCL_E_TCP_CONNECT, "not a hello of the wire between servers");
         }
         return sizeof(Hello);
       },
       .evicted = {},
       .known = std::move(hosts)});
  if (!reader.ok()) {
    return reader.status();
  }
  reader_.emplace(std::move(*reader));
  if (getrandom(token_.data(), token_.size(), 0) != static_cast<ssize_t>(token_.size())) {
    return Error(HCCL_E_SYSCALL, "wire: getrandom failed: {}", ErrnoString(errno));
  }
  const Card mine{.port = bootstrap::GetPort(bound), .token = token_};
  auto all =
      group_.AllGatherFixed(members_, options_.tags + kCardTag, std::as_bytes(std::span(&mine, 1)),
                            deadline, "the addresses of the wire's members");
  if (!all.ok()) {
    return all.status();
  }
  for (uint32_t p = 0; p < n; ++p) {
    if ((*all)[p].size() != sizeof(Card)) {
      return Error(HCCL_E_TCP_TRANSFER, "wire: rank {} sent {} bytes for its address", members_[p],
                   (*all)[p].size());
    }
    Card card{};
    std::memcpy(&card, (*all)[p].data(), sizeof(Card));
    bootstrap::SetPort(&peers_[p].listener, card.port);
    peers_[p].token = card.token;
    if (p != me_) {
      peers_[p].address = bootstrap::EndpointString(peers_[p].listener);
    }
  }
  return Status::Ok();
}

Status SocketWire::Link(const std::vector<Out> &out, const std::vector<size_t> &in,
                        Clock::time_point deadline) {
  std::vector<uint32_t> dial, wait;
  for (uint32_t p = 0; p < size(); ++p) {
    if (p != me_ && !peers_[p].fd.valid() && (out[p].len != 0 || in[p] != 0)) {
      (p > me_ ? dial : wait).push_back(p);
    }
  }
  if (dial.empty() && wait.empty()) {
    return Status::Ok();
  }
  HZC_RETURN_IF_ERROR(ReserveDescriptors(
      dial.size() + wait.size(),
      fmt::format("the wire's connections to {} more members", dial.size() + wait.size())));
  // The higher members first: a dial does not wait for its member to take the connection.
  for (uint32_t p : dial) {
    HZC_RETURN_IF_ERROR(Dial(p, HCCL_SUCCESS, deadline));
  }
  auto pause = kProbeFirst;
  auto probe = Clock::now() + pause;
  for (;;) {
    std::erase_if(wait, [&](uint32_t p) { return peers_[p].fd.valid(); });
    if (wait.empty()) {
      return Status::Ok();
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<uint32_t> late;
      for (uint32_t p : wait) {
        late.push_back(members_[p]);
      }
      return Error(HCCL_E_TIMEOUT,
                   "wire: rank(s) {} (other servers) did not connect within HCCL_EXEC_TIMEOUT",
                   fmt::join(late, ","));
    }
    if (now >= probe) {
      for (uint32_t p : wait) {
        if (Gone(p, deadline)) {
          return Error(HCCL_E_REMOTE,
                       "{} is gone: its wire's listener refuses connections (its process ended)",
                       Name(p));
        }
      }
      pause = std::min(2 * pause, kProbeMax);
      probe = Clock::now() + pause;
    }
    auto took = Take(std::min(deadline, probe));
    if (!took.ok()) {
      return took.status();
    }
  }
}

Expected<UniqueFd> SocketWire::Greet(uint32_t p, uint32_t magic, uint32_t code,
                                     Clock::time_point deadline) {
  Peer &peer = peers_[p];
  bool refused = false;
  auto fd = bootstrap::Dial(peer.listener, deadline, /*refused_ends=*/true, &refused);
  if (!fd.ok()) {
    return Error(refused ? HCCL_E_REMOTE : HCCL_E_TCP_CONNECT, "wire: cannot connect to {}: {}",
                 Name(p), refused ? "refused (its process ended)" : fd.status().message());
  }
  const Hello hello{.magic = magic, .from = me_, .token = peer.token, .code = code, .zero = 0};
  if (Status st = bootstrap::SendAll(fd->get(), &hello, sizeof(hello), deadline); !st.ok()) {
    return Error(st.code(), "wire: hello to {}: {}", Name(p), st.message());
  }
  return fd;
}

Status SocketWire::Dial(uint32_t p, HcclResult abort, Clock::time_point deadline) {
  auto fd = Greet(p, abort == HCCL_SUCCESS ? kHelloMagic : kNewsMagic, static_cast<uint32_t>(abort),
                  deadline);
  if (!fd.ok()) {
    return fd.status();
  }
  bootstrap::TuneLink(fd->get());
  peers_[p].fd = std::move(*fd);
  return Status::Ok();
}

Expected<bool> SocketWire::Take(Clock::time_point until) {
  auto next = reader_->Next(until);
  if (!next.ok()) {
    return next.status();
  }
  if (!*next) {
    return false;
  }
  HelloReader::Hello &h = **next;
  Hello hello{};
  std::memcpy(&hello, h.data.data(), sizeof(hello));
  const bool data = hello.magic == kHelloMagic;
  if (hello.from >= size() || hello.from == me_ || !bootstrap::SameBytes(hello.token, token_) ||
      (data && (hello.from > me_ || peers_[hello.from].fd.valid()))) {
    reader_->LogDropped(h.peer, "not a member of this wire (member number or token)");
    return true;
  }
  if (hello.magic == kProbeMagic) {
    return true;  // it is there: closed
  }
  Peer &peer = peers_[hello.from];
  if (!data) {  // the news
    peer.told = hello.code == 0 ? static_cast<uint32_t>(HCCL_E_INTERNAL) : hello.code;
    return Error(HCCL_E_REMOTE, "{} failed the call with code {}", Name(hello.from), peer.told);
  }
  bootstrap::TuneLink(h.fd.get());
  peer.fd = std::move(h.fd);
  peer.address = h.peer;
  return true;
}

Status SocketWire::TakeWaiting() {
  Status first;
  for (size_t i = 0; i <= kMaxPending; ++i) {  // bounded: the connections there now
    auto took = Take(Clock::now());
    if (took.ok() && !*took) {
      break;
    }
    if (!took.ok() && first.ok()) {
      first = took.status();
    }
  }
  return first;
}

bool SocketWire::Gone(uint32_t p, Clock::time_point deadline) {
  // A probe taken is closed at once; only a refusal (HCCL_E_REMOTE) says anything.
  return Greet(p, kProbeMagic, 0, std::min(deadline, Clock::now() + kProbeMax)).status().code() ==
         HCCL_E_REMOTE;
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

Status SocketWire::Receive(uint32_t p, size_t len, const Sink &sink, uint8_t *dest,
                           size_t *received, bool *moved) {
  Peer &peer = peers_[p];
  while (*received < len) {
    const bool head = peer.in_done < sizeof(Frame);
    uint8_t *body = dest != nullptr ? dest + *received : peer.chunk.get();
    uint8_t *to = head ? reinterpret_cast<uint8_t *>(&peer.in_head) + peer.in_done
                       : body + (peer.in_done - sizeof(Frame));
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
      if (!peer.chunk && dest == nullptr) {
        peer.chunk = std::make_unique<uint8_t[]>(kChunk);
      }
    } else if (!head && peer.in_done == sizeof(Frame) + peer.in_head.length) {
      if (dest == nullptr) {
        sink(p, *received, peer.chunk.get(), peer.in_head.length);
      }
      *received += peer.in_head.length;
      ++received_[p];
      peer.in_done = 0;
    }
  }
  return Status::Ok();
}

Status SocketWire::Move(const std::vector<Out> &out, const std::vector<size_t> &in,
                        const Sink &sink, const std::vector<Place> &places,
                        Clock::time_point deadline) {
  const uint32_t n = size();
  if (Status st = Link(out, in, deadline); !st.ok()) {
    return FirstCause(std::move(st));
  }
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
      Status st =
          Receive(p, in[p], sink, places.empty() ? nullptr : places[p].dest, &received[p], &moved);
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
    // And the listener: a member's news of its abort, a member connecting ahead of its need.
    const size_t data = fds.size();
    reader_->Watch(&fds);
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
    if (std::any_of(fds.begin() + static_cast<ptrdiff_t>(data), fds.end(),
                    [](const pollfd &f) { return f.revents != 0; })) {
      if (Status st = TakeWaiting(); !st.ok()) {
        return FirstCause(std::move(st));
      }
    }
  }
}

Status SocketWire::FirstCause(Status st) {
  (void)TakeWaiting();  // the news that reached the listener
  Status relayed;
  for (uint32_t p = 0; p < size(); ++p) {
    Peer &peer = peers_[p];
    if (p == me_) {
      continue;
    }
    Frame f{};
    if (peer.told != 0) {
      f.word = peer.told;
    } else if (!peer.fd.valid() || peer.in_done != 0 ||
               recv(peer.fd.get(), &f, sizeof(f), MSG_PEEK | MSG_DONTWAIT) !=
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
  (void)TakeWaiting();  // the connections that reached the listener hear it on their own
  for (uint32_t p = 0; p < size(); ++p) {
    Peer &peer = peers_[p];
    if (p == me_) {
      continue;
    }
    if (!peer.fd.valid()) {
      // The news in a hello.
      if (Status st = Dial(p, code, Clock::now() + kNewsTime); !st.ok()) {
        LogDebug("wire: cannot tell {} of the abort: {}", Name(p), st.message());
        continue;
      }
      shutdown(peer.fd.get(), SHUT_WR);
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
