// SPDX-License-Identifier: Apache-2.0
#include "transport/socket_window.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"

namespace hzc::transport {

namespace {

constexpr uint32_t kHelloMagic = 0x687a6f68;    // "hzoh"
constexpr uint32_t kRequestMagic = 0x687a6f72;  // "hzor"
constexpr uint32_t kAnswerMagic = 0x687a6f61;   // "hzoa"
constexpr uint32_t kPut = 1;
constexpr uint32_t kGet = 2;
// How long an accepted connection may take to say who it is, and how many may be waiting to.
constexpr auto kHelloTime = std::chrono::seconds(10);
constexpr long kMaxPending = 16;
// Bytes the service thread moves on one connection before it looks at the others (and per
// system call: it checks for a withdrawal between them).
constexpr size_t kStep = size_t{1} << 20;

struct Hello {
  uint32_t magic;
  uint32_t rank;
  SocketWindows::Token token;
};
struct Request {
  uint32_t magic;
  uint32_t op;
  uint64_t addr;
  uint64_t len;
  uint64_t reserved;
};
struct Answer {
  uint32_t magic;
  uint32_t code;  // HcclResult
  uint64_t len;   // of a get's bytes that follow
};
static_assert(sizeof(Hello) == 24 && sizeof(Request) == 32 && sizeof(Answer) == 16);

int MsUntil(SocketWindows::Clock::time_point t) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(t - SocketWindows::Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

}  // namespace

struct SocketWindows::Impl {
  uint32_t rank = 0;
  uint32_t nranks = 0;
  std::string where;                         // "host:port" listened on, for logs
  std::vector<sockaddr_storage> peer_hosts;  // Open's @peers
  uint16_t port = 0;                         // its port, for the cards
  UniqueFd listener;
  UniqueFd wake;  // an eventfd: Withdraw and the destructor wake the thread with it
  std::atomic<bool> stop{false};
  std::thread thread;

  // What this rank exposes, and the tokens it made for its peers (under mutex).
  struct Exposed {
    uint32_t peer;
    uint64_t addr, size;
    uint32_t busy;  // requests under way on it
    bool withdrawn;
  };
  std::mutex mutex;
  std::condition_variable idle;
  std::map<uint64_t, Exposed> spans;
  // By peer: the token its one connection must bring (cleared once it came).
  std::vector<std::optional<Token>> tokens;
  bool dead = false;  // the thread ended: nothing is served, nobody waits for it

  // A connection of a peer to this rank (the thread's alone).
  struct Conn {
    UniqueFd fd;
    uint32_t peer = UINT32_MAX;  // until its hello
    bool known = false;          // from a peer's host (Impl::peer_hosts)
    Clock::time_point hello_by;
    std::array<std::byte, sizeof(Request)> head{};
    size_t got = 0;
    bool busy = false;  // a request on span @span is under way
    uint64_t span = 0;
    uint8_t *mem = nullptr;
    uint64_t left = 0;
    bool put = false;
    uint64_t discard = 0;  // bytes of a refused put still to read and drop
    Answer answer{};
    size_t answer_sent = sizeof(Answer);  // bytes of @answer sent (all: none pending)
    uint64_t refused = 0;  // requests refused on it (logged: the first, then every 1024th)
  };
  std::vector<Conn> conns;
  Clock::time_point accept_after{};  // accept failed (out of descriptors): not before then
  // Lines about closed connections (anyone who can reach the listener can make them): at most
  // 10 a second; MayLogClosed says whether the next may go (and logs how many did not).
  LineBudget closed_lines{10};
  bool MayLogClosed() {
    uint64_t skipped = 0;
    if (!closed_lines.Allow(&skipped)) {
      return false;
    }
    if (skipped != 0) {
      LogWarn(
          "one-sided: rank {} {}: closed {} more connection(s) without a line each (at most "
          "10 lines a second)",
          rank, where, skipped);
    }
    return true;
  }

  // This rank's connection to each peer, for its own requests.
  struct Out {
    std::mutex mutex;
    UniqueFd fd;
    Status broken = Status::Ok();
  };
  std::vector<std::unique_ptr<Out>> out;

  void Run();
  void Accept();
  // Move at most kStep bytes or a few headers on @c, what its socket takes or gives now; false
  // to close the connection.
  bool Progress(Conn &c);
  // A whole hello or request header arrived on @c; false to close the connection.
  bool OnHeader(Conn &c);
  void Take(Conn &c, const Request &r);
  void Finish(Conn &c);
  bool Withdrawn(uint64_t id);
  void Queue(Conn &c, HcclResult code, uint64_t len) {
    c.answer = {.magic = kAnswerMagic, .code = static_cast<uint32_t>(code), .len = len};
    c.answer_sent = 0;
  }
};

void SocketWindows::Impl::Run() {
  std::vector<pollfd> fds;
  while (!stop.load(std::memory_order_acquire)) {
    fds.clear();
    const bool accepting = Clock::now() >= accept_after;
    fds.push_back({.fd = wake.get(), .events = POLLIN, .revents = 0});
    fds.push_back({.fd = accepting ? listener.get() : -1, .events = POLLIN, .revents = 0});
    Clock::time_point until = accepting ? Clock::time_point::max() : accept_after;
    for (const Conn &c : conns) {
      const bool sending = c.answer_sent < sizeof(Answer) || (c.busy && !c.put);
      fds.push_back({.fd = c.fd.get(),
                     .events = static_cast<short>(sending ? POLLOUT : POLLIN),
                     .revents = 0});
      if (c.peer == UINT32_MAX) {
        until = std::min(until, c.hello_by);
      }
    }
    const int timeout = until == Clock::time_point::max() ? -1 : MsUntil(until);
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      LogError("one-sided: rank {}'s service thread: poll failed: {}; it serves nothing more", rank,
               ErrnoString(errno));
      break;
    }
    if (fds[0].revents != 0) {
      uint64_t n = 0;
      (void)!::read(wake.get(), &n, sizeof(n));
    }
    if (stop.load(std::memory_order_acquire)) {
      break;
    }
    std::vector<bool> drop(conns.size(), false);
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn &c = conns[i];
      if (c.busy && Withdrawn(c.span)) {
        drop[i] = true;  // its span went: the request ends here
      } else if (fds[i + 2].revents != 0) {
        drop[i] = !Progress(c);
      } else if (c.peer == UINT32_MAX && Clock::now() >= c.hello_by) {
        if (MayLogClosed()) {
          LogWarn("one-sided: rank {} {}: a connection said nothing in {} s: closed", rank, where,
                  kHelloTime.count());
        }
        drop[i] = true;
      }
    }
    for (size_t i = conns.size(); i-- > 0;) {
      if (drop[i]) {
        if (conns[i].busy) {
          Finish(conns[i]);
        }
        conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (fds[1].revents != 0) {
      Accept();
    }
  }
  // Nothing is served from now on: release what was under way, so no Withdraw waits.
  for (Conn &c : conns) {
    if (c.busy) {
      Finish(c);
    }
  }
  std::lock_guard lock(mutex);
  dead = true;
  idle.notify_all();
}

void SocketWindows::Impl::Accept() {
  for (int i = 0; i < 16; ++i) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof(from);
    UniqueFd fd(::accept4(listener.get(), reinterpret_cast<sockaddr *>(&from), &from_len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        LogWarn("one-sided: rank {} {}: accept failed: {}; new connections wait 100 ms", rank,
                where, ErrnoString(errno));
        accept_after = Clock::now() + std::chrono::milliseconds(100);
      }
      return;
    }
    // Each peer has one connection to this rank (its token works once); of the connections that
    // have not said who they are, the oldest from a host that is not a peer's makes room for a
    // new one, else the oldest.
    const auto pending = [](const Conn &c) { return c.peer == UINT32_MAX && !c.busy; };
    const bool known = bootstrap::SameHost(from, peer_hosts);
    if (std::count_if(conns.begin(), conns.end(), pending) >= kMaxPending) {
      auto oldest = std::find_if(conns.begin(), conns.end(),
                                 [&](const Conn &c) { return pending(c) && !c.known; });
      if (oldest == conns.end() && !peer_hosts.empty() && !known) {
        if (MayLogClosed()) {
          LogWarn(
              "one-sided: rank {} {}: {} connections from the peers' hosts wait for their "
              "hello: a new one from {} is closed",
              rank, where, kMaxPending, bootstrap::EndpointString(from));
        }
        continue;
      }
      if (oldest == conns.end()) {
        oldest = std::find_if(conns.begin(), conns.end(), pending);
      }
      if (MayLogClosed()) {
        LogWarn(
            "one-sided: rank {} {}: {} connections wait for their hello: the oldest{} is closed",
            rank, where, kMaxPending, oldest->known ? "" : " from a host that is not a peer's");
      }
      conns.erase(oldest);
    }
    bootstrap::TuneLink(fd.get());
    Conn c;
    c.fd = std::move(fd);
    c.known = known;
    c.hello_by = Clock::now() + kHelloTime;
    conns.push_back(std::move(c));
  }
}

bool SocketWindows::Impl::Withdrawn(uint64_t id) {
  std::lock_guard lock(mutex);
  auto it = spans.find(id);
  return it == spans.end() || it->second.withdrawn;
}

void SocketWindows::Impl::Finish(Conn &c) {
  std::lock_guard lock(mutex);
  if (auto it = spans.find(c.span); it != spans.end() && --it->second.busy == 0) {
    idle.notify_all();
  }
  c.busy = false;
}

// Take request @r of @c's peer, when it lies in a span exposed to it; else answer it with a
// refusal (a put's bytes are read and dropped first, so the connection stays usable).
void SocketWindows::Impl::Take(Conn &c, const Request &r) {
  {
    std::lock_guard lock(mutex);
    for (auto &[id, s] : spans) {
      if (!s.withdrawn && (s.peer == c.peer || s.peer == kAnyPeer) && r.addr >= s.addr &&
          r.len <= s.size && r.addr - s.addr <= s.size - r.len) {
        ++s.busy;
        c.busy = true;
        c.span = id;
        c.mem = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(r.addr));
        c.left = r.len;
        c.put = r.op == kPut;
        if (!c.put) {
          Queue(c, HCCL_SUCCESS, r.len);  // the answer, then the bytes
        }
        return;
      }
    }
  }
  if (c.refused++ % 1024 == 0) {  // a peer sending nothing else does not fill the log
    LogWarn(
        "one-sided: rank {}: rank {} asked for {} bytes at {:#x}, not memory exposed to it: "
        "refused ({} refused on its connection so far)",
        rank, c.peer, r.len, r.addr, c.refused);
  }
  if (r.op == kPut) {
    c.discard = r.len;
  } else {
    Queue(c, HCCL_E_PARA, 0);
  }
}

bool SocketWindows::Impl::Progress(Conn &c) {
  static thread_local std::array<std::byte, 64 << 10> sink;
  size_t moved = 0;
  for (int headers = 0; moved < kStep && headers < 16;) {
    ssize_t n = 0;
    if (c.answer_sent < sizeof(Answer)) {
      n = ::send(c.fd.get(), reinterpret_cast<const std::byte *>(&c.answer) + c.answer_sent,
                 sizeof(Answer) - c.answer_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      c.answer_sent += static_cast<size_t>(n);
      continue;
    }
    if (c.discard != 0) {
      n = ::recv(c.fd.get(), sink.data(), std::min<uint64_t>(c.discard, sink.size()), MSG_DONTWAIT);
      if (n == 0) {
        return false;
      }
      if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      c.discard -= static_cast<uint64_t>(n);
      moved += static_cast<size_t>(n);
      if (c.discard == 0) {
        Queue(c, HCCL_E_PARA, 0);
      }
      continue;
    }
    if (c.busy) {
      if (Withdrawn(c.span)) {
        return false;
      }
      const size_t step = static_cast<size_t>(std::min<uint64_t>(c.left, kStep - moved));
      n = c.put ? ::recv(c.fd.get(), c.mem, step, MSG_DONTWAIT)
                : ::send(c.fd.get(), c.mem, step, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == 0 && c.put) {
        return false;  // the peer closed
      }
      if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      c.mem += n;
      c.left -= static_cast<uint64_t>(n);
      moved += static_cast<size_t>(n);
      if (c.left == 0) {
        Finish(c);
        if (c.put) {
          Queue(c, HCCL_SUCCESS, 0);
        }
      }
      continue;
    }
    const size_t want = c.peer == UINT32_MAX ? sizeof(Hello) : sizeof(Request);
    n = ::recv(c.fd.get(), c.head.data() + c.got, want - c.got, MSG_DONTWAIT);
    if (n == 0) {
      return false;
    }
    if (n < 0) {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    c.got += static_cast<size_t>(n);
    if (c.got < want) {
      continue;
    }
    c.got = 0;
    ++headers;
    if (!OnHeader(c)) {
      return false;
    }
  }
  return true;
}

bool SocketWindows::Impl::OnHeader(Conn &c) {
  if (c.peer == UINT32_MAX) {
    Hello h{};
    std::memcpy(&h, c.head.data(), sizeof(h));
    bool known = false;
    if (h.magic == kHelloMagic && h.rank < nranks && h.rank != rank) {
      std::lock_guard lock(mutex);
      known = tokens[h.rank].has_value() && bootstrap::SameBytes(*tokens[h.rank], h.token);
      if (known) {
        tokens[h.rank].reset();  // one connection per peer
      }
    }
    if (!known) {
      if (MayLogClosed()) {
        LogWarn("one-sided: rank {} {}: a connection without a hello of a peer: closed", rank,
                where);
      }
      return false;
    }
    c.peer = h.rank;
    Queue(c, HCCL_SUCCESS, 0);  // the peer's Connect waits for it
    return true;
  }
  Request r{};
  std::memcpy(&r, c.head.data(), sizeof(r));
  if (r.magic != kRequestMagic || (r.op != kPut && r.op != kGet) || r.len == 0) {
    LogWarn("one-sided: rank {} {}: rank {} sent a header that is not a request: closed", rank,
            where, c.peer);
    return false;
  }
  Take(c, r);
  return true;
}

SocketWindows::SocketWindows(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SocketWindows::~SocketWindows() {
  impl_->stop.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(impl_->wake.get(), &one, sizeof(one));
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

Expected<std::unique_ptr<SocketWindows>> SocketWindows::Open(
    uint32_t rank, uint32_t nranks, const std::string &address,
    const std::vector<std::string> &peers) {
  auto addr = bootstrap::ParseEndpoint(address);
  if (!addr.ok()) {
    return Error(HCCL_E_TCP_CONNECT, "one-sided: this rank's address: {}", addr.status().message());
  }
  bootstrap::SetPort(&*addr, 0);
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->nranks = nranks;
  for (const std::string &p : peers) {
    if (auto a = bootstrap::ParseEndpoint(p); a.ok()) {
      impl->peer_hosts.push_back(*a);
    }
  }
  sockaddr_storage bound{};
  auto listener = bootstrap::ListenOn(*addr, /*reuse=*/false, &bound);
  if (!listener.ok()) {
    return Error(listener.status().code(), "one-sided: {}", listener.status().message());
  }
  impl->listener = std::move(*listener);
  // Accept takes what is waiting and must not block the thread once nothing is.
  if (::fcntl(impl->listener.get(), F_SETFL, ::fcntl(impl->listener.get(), F_GETFL) | O_NONBLOCK) !=
      0) {
    return Error(HCCL_E_SYSCALL, "one-sided: fcntl: {}", ErrnoString(errno));
  }
  impl->where = bootstrap::EndpointString(bound);
  impl->port = bootstrap::GetPort(bound);
  impl->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->wake.valid()) {
    return Error(HCCL_E_SYSCALL, "one-sided: eventfd: {}", ErrnoString(errno));
  }
  impl->tokens.resize(nranks);
  for (uint32_t p = 0; p < nranks; ++p) {
    impl->out.push_back(std::make_unique<Impl::Out>());
  }
  Impl *raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  LogDebug("one-sided: rank {} serves its peers' requests at {} (TCP)", rank, impl->where);
  return std::unique_ptr<SocketWindows>(new SocketWindows(std::move(impl)));
}

Expected<SocketWindows::Card> SocketWindows::CardFor(uint32_t peer) {
  Card card;
  if (::getrandom(card.token.data(), card.token.size(), 0) !=
      static_cast<ssize_t>(card.token.size())) {
    return Error(HCCL_E_SYSCALL, "one-sided: getrandom failed: {}", ErrnoString(errno));
  }
  card.port = impl_->port;
  std::lock_guard lock(impl_->mutex);
  impl_->tokens[peer] = card.token;
  return card;
}

Status SocketWindows::Connect(uint32_t peer, const std::string &address, const Card &card,
                              Clock::time_point deadline) {
  auto addr = bootstrap::ParseEndpoint(address);
  if (!addr.ok()) {
    return Error(HCCL_E_TCP_CONNECT, "rank {}'s address: {}", peer, addr.status().message());
  }
  bootstrap::SetPort(&*addr, card.port);
  auto fd = bootstrap::Dial(*addr, deadline);
  if (!fd.ok()) {
    return Error(fd.status().code(), "rank {} ({}): {}", peer, bootstrap::EndpointString(*addr),
                 fd.status().message());
  }
  bootstrap::TuneLink(fd->get());
  const Hello hello{.magic = kHelloMagic, .rank = impl_->rank, .token = card.token};
  Answer a{};
  Status st = bootstrap::SendAll(fd->get(), &hello, sizeof(hello), deadline);
  if (st.ok()) {
    st = bootstrap::RecvAll(fd->get(), &a, sizeof(a), deadline);
  }
  if (!st.ok() || a.magic != kAnswerMagic || a.code != HCCL_SUCCESS) {
    return Error(st.ok() ? HCCL_E_TCP_CONNECT : st.code(),
                 "rank {} ({}) did not take this rank's connection: {}", peer,
                 bootstrap::EndpointString(*addr), st.ok() ? "a wrong answer" : st.message());
  }
  Impl::Out &o = *impl_->out[peer];
  std::lock_guard lock(o.mutex);
  o.fd = std::move(*fd);
  o.broken = Status::Ok();
  return Status::Ok();
}

void SocketWindows::Expose(uint64_t id, uint32_t peer, uint64_t addr, uint64_t size) {
  std::lock_guard lock(impl_->mutex);
  impl_->spans[id] = {.peer = peer, .addr = addr, .size = size, .busy = 0, .withdrawn = false};
}

void SocketWindows::Withdraw(uint64_t id) {
  std::unique_lock lock(impl_->mutex);
  auto it = impl_->spans.find(id);
  if (it == impl_->spans.end()) {
    return;
  }
  it->second.withdrawn = true;
  if (it->second.busy != 0 && !impl_->dead) {
    const uint64_t one = 1;
    (void)!::write(impl_->wake.get(), &one, sizeof(one));
    impl_->idle.wait(lock, [&] { return it->second.busy == 0 || impl_->dead; });
  }
  impl_->spans.erase(it);
}

Status SocketWindows::Execute(uint32_t peer, std::span<const Op> ops, bool put,
                              Clock::time_point deadline) {
  Impl::Out &o = *impl_->out[peer];
  std::lock_guard lock(o.mutex);
  if (!o.broken.ok()) {
    return o.broken;
  }
  if (!o.fd.valid()) {
    return Error(HCCL_E_INTERNAL, "rank {}: no connection", peer);
  }
  auto fail = [&](size_t i, const Status &st) {
    o.broken = Error(st.code(), "rank {}, desc[{}]: {}", peer, i, st.message());
    o.fd.reset();
    return o.broken;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Request r{.magic = kRequestMagic,
                    .op = put ? kPut : kGet,
                    .addr = ops[i].remote,
                    .len = ops[i].bytes,
                    .reserved = 0};
    Status st = bootstrap::SendAll(o.fd.get(), &r, sizeof(r), deadline);
    if (st.ok() && put) {
      st = bootstrap::SendAll(o.fd.get(), ops[i].local, ops[i].bytes, deadline);
    }
    if (!st.ok()) {
      return fail(i, st);
    }
  }
  // Every answer is read (a refusal leaves the connection usable); the first refusal is the
  // batch's error.
  Status refused = Status::Ok();
  for (size_t i = 0; i < ops.size(); ++i) {
    Answer a{};
    Status st = bootstrap::RecvAll(o.fd.get(), &a, sizeof(a), deadline);
    if (!st.ok()) {
      return fail(i, st);
    }
    if (a.magic != kAnswerMagic || (a.code == HCCL_SUCCESS && a.len != (put ? 0 : ops[i].bytes)) ||
        (a.code != HCCL_SUCCESS && (a.code != HCCL_E_PARA || a.len != 0))) {
      return fail(i, Error(HCCL_E_TCP_TRANSFER, "an answer that is not one to the request"));
    }
    if (a.code != HCCL_SUCCESS) {
      if (refused.ok()) {
        refused = Error(HCCL_E_REMOTE,
                        "rank {}, desc[{}]: it refused the transfer: not memory it exposes to "
                        "this rank (it deregistered or unbound it)",
                        peer, i);
      }
      continue;
    }
    if (!put) {
      st = bootstrap::RecvAll(o.fd.get(), ops[i].local, ops[i].bytes, deadline);
      if (!st.ok()) {
        return fail(i, st);
      }
    }
  }
  return refused;
}

}  // namespace hzc::transport
