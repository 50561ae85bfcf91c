// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <string_view>
#include <thread>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/log.h"
#include "bootstrap/wait_fd.h"

namespace hzc::bootstrap {

socklen_t AddrLen(const sockaddr_storage &addr) {
  return addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

Expected<sockaddr_storage> ParseAddress(const std::string &text) {
  sockaddr_storage ss{};
  auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
  auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return ss;
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return ss;
  }
  return Error(HCCL_E_PARA, "\"{}\" is not an IPv4 or IPv6 address", text);
}

Expected<sockaddr_storage> ParseEndpoint(const std::string &text) {
  const auto bad = [&] { return Error(HCCL_E_PARA, "\"{}\" is not an address:port", text); };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return bad();
  }
  std::string host = text.substr(0, colon);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) {
    host = host.substr(1, host.size() - 2);
  }
  auto addr = ParseAddress(host);
  uint16_t port = 0;
  const char *end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data() + colon + 1, end, port);
  if (!addr.ok() || ec != std::errc() || ptr != end || port == 0 ||
      (addr->ss_family == AF_INET6) != bracketed) {
    return bad();
  }
  if (addr->ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in *>(&*addr)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6 *>(&*addr)->sin6_port = htons(port);
  }
  return addr;
}

std::string EndpointString(const sockaddr_storage &addr) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto *a = reinterpret_cast<const sockaddr_in *>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    return fmt::format("{}:{}", buf, ntohs(a->sin_port));
  }
  const auto *a = reinterpret_cast<const sockaddr_in6 *>(&addr);
  inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
  return fmt::format("[{}]:{}", buf, ntohs(a->sin6_port));
}

std::string DefaultAddress() {
  ifaddrs *list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) {
    return found;
  }
  for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
        (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) {
      continue;
    }
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    found = buf;
    break;
  }
  freeifaddrs(list);
  return found;
}

std::string ChooseAddress(const std::string &address) {
  if (!address.empty()) {
    return address;
  }
  const std::string &if_ip = GetConfig().if_ip;
  return if_ip.empty() ? DefaultAddress() : if_ip;
}

Expected<UniqueFd> ListenOn(const sockaddr_storage &addr, bool reuse, sockaddr_storage *bound,
                            bool *in_use) {
  const std::string where = EndpointString(addr);
  UniqueFd fd(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Error(HCCL_E_TCP_CONNECT, "socket failed: {}", ErrnoString(errno));
  }
  const int one = 1;
  if (reuse && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "SO_REUSEADDR failed: {}", ErrnoString(errno));
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr *>(&addr), AddrLen(addr)) != 0) {
    if (in_use != nullptr) {
      *in_use = errno == EADDRINUSE;
    }
    return Error(HCCL_E_TCP_CONNECT, "cannot bind to {}: {}", where, ErrnoString(errno));
  }
  if (listen(fd.get(), 1024) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "listen on {} failed: {}", where, ErrnoString(errno));
  }
  socklen_t len = sizeof(*bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr *>(bound), &len) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "getsockname failed: {}", ErrnoString(errno));
  }
  return fd;
}

// The peer's listener exists, but a connection may fail while its network comes up: retried.
Expected<UniqueFd> Dial(const sockaddr_storage &addr,
                        std::chrono::steady_clock::time_point deadline, bool refused_ends,
                        bool *refused) {
  int last_err = ETIMEDOUT;
  do {
    UniqueFd fd(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      return Error(HCCL_E_TCP_CONNECT, "socket failed: {}", ErrnoString(errno));
    }
    int err = 0;
    if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&addr), AddrLen(addr)) != 0) {
      err = errno;
    }
    if (err == EINPROGRESS) {
      auto ready = WaitFd(fd.get(), POLLOUT, deadline);
      socklen_t len = sizeof(err);
      err = !ready.ok() || !*ready ? ETIMEDOUT : 0;
      if (err == 0 && getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
    if (err == 0) {
      return fd;
    }
    last_err = err;
    if (err == ECONNREFUSED && refused_ends) {
      break;
    }
    if (err != ETIMEDOUT) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } while (std::chrono::steady_clock::now() < deadline);
  if (refused != nullptr) {
    *refused = last_err == ECONNREFUSED;
  }
  return Error(HCCL_E_TCP_CONNECT, "{}", ErrnoString(last_err));
}

void SetNoDelay(int fd) {
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

namespace {

// The IP address of @a as bytes (an IPv4-mapped IPv6 address as its IPv4 one).
std::string_view AddressBytes(const sockaddr_storage &a) {
  if (a.ss_family == AF_INET6) {
    const auto &in6 = reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr;
    const auto *b = reinterpret_cast<const char *>(in6.s6_addr);
    return IN6_IS_ADDR_V4MAPPED(&in6) ? std::string_view(b + 12, 4) : std::string_view(b, 16);
  }
  return {reinterpret_cast<const char *>(&reinterpret_cast<const sockaddr_in &>(a).sin_addr), 4};
}

}  // namespace

bool SameHost(const sockaddr_storage &a, std::span<const sockaddr_storage> hosts) {
  return std::any_of(hosts.begin(), hosts.end(),
                     [&](const sockaddr_storage &h) { return AddressBytes(h) == AddressBytes(a); });
}

void WatchPeer(int fd) {
  sockaddr_storage peer{}, self{};
  socklen_t peer_len = sizeof(peer), self_len = sizeof(self);
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&self), &self_len) != 0) {
    return;  // not connected: its first use fails anyway
  }
  const std::string_view ip = AddressBytes(peer);
  const bool loopback =
      ip.size() == 4
          ? ip[0] == 127
          : IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6 &>(peer).sin6_addr);
  if (loopback || ip == AddressBytes(self)) {
    return;  // this host's own address at both ends: no link between them to lose
  }
  const auto silence = static_cast<unsigned>(GetConfig().PeerSilence().count());
  const int on = 1;
  const int idle_s = 1;      // the first probe after a second of silence,
  const int interval_s = 1;  // one a second after it,
  const int count = 127;     // and at most this many (TCP_USER_TIMEOUT ends them first)
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &silence, sizeof(silence));
}

namespace {

// Send (@out) or receive @len bytes at @p, waiting for the socket until @deadline.
Status Stream(int fd, char *p, size_t len, std::chrono::steady_clock::time_point deadline,
              bool out) {
  while (len > 0) {
    auto ready = WaitFd(fd, out ? POLLOUT : POLLIN, deadline);
    if (!ready.ok()) {
      return ready.status();
    }
    if (!*ready) {
      return Error(HCCL_E_TIMEOUT, "timed out {}", out ? "sending to peer" : "waiting for peer");
    }
    const ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
    if (n == 0 && !out) {
      return Error(HCCL_E_TCP_TRANSFER, "peer closed the connection");
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return Error(HCCL_E_TCP_TRANSFER, "{} failed: {}", out ? "send" : "recv", ErrnoString(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

void TuneLink(int fd) {
  SetNoDelay(fd);
  WatchPeer(fd);
}

uint16_t GetPort(const sockaddr_storage &addr) {
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 &>(addr).sin6_port
                                          : reinterpret_cast<const sockaddr_in &>(addr).sin_port);
}

void SetPort(sockaddr_storage *addr, uint16_t port) {
  if (addr->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6 *>(addr)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in *>(addr)->sin_port = htons(port);
  }
}

bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) {
    return false;
  }
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

Status SendAll(int fd, const void *data, size_t len,
               std::chrono::steady_clock::time_point deadline) {
  return Stream(fd, const_cast<char *>(static_cast<const char *>(data)), len, deadline, true);
}

Status RecvAll(int fd, void *data, size_t len, std::chrono::steady_clock::time_point deadline) {
  return Stream(fd, static_cast<char *>(data), len, deadline, false);
}

namespace {

// New connections a HelloReader takes at once before it reads the waiting ones again.
constexpr int kAcceptBatch = 16;
// How long a HelloReader leaves new connections in the listener's backlog after accept failed
// (out of descriptors, say), rather than spin on a listener that stays ready.
constexpr std::chrono::milliseconds kAcceptPause{100};

// Milliseconds until @t, rounded up (a poll timeout that does not wake just before @t).
int CeilMs(std::chrono::steady_clock::time_point t) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(t - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
}

}  // namespace

std::vector<Status> SendToEach(std::span<const int> fds, std::span<const std::byte> data,
                               std::chrono::steady_clock::time_point deadline) {
  std::vector<Status> result(fds.size());
  std::vector<size_t> sent(fds.size());
  std::vector<size_t> open;  // the connections still sending
  for (size_t i = 0; i < fds.size() && !data.empty(); ++i) {
    open.push_back(i);
  }
  std::vector<pollfd> polled;
  while (!open.empty()) {
    polled.clear();
    for (size_t i : open) {
      polled.push_back({fds[i], POLLOUT, 0});
    }
    const int ready = poll(polled.data(), polled.size(), CeilMs(deadline));
    if ((ready < 0 && errno == EINTR) ||
        (ready == 0 && std::chrono::steady_clock::now() < deadline)) {
      continue;
    }
    if (ready <= 0) {
      const Status st = ready < 0 ? Error(HCCL_E_SYSCALL, "poll failed: {}", ErrnoString(errno))
                                  : Error(HCCL_E_TIMEOUT, "timed out sending to peer");
      for (size_t i : open) {
        result[i] = st;
      }
      break;
    }
    std::vector<size_t> still;
    for (size_t k = 0; k < open.size(); ++k) {
      const size_t i = open[k];
      if (polled[k].revents != 0) {
        const ssize_t n =
            send(fds[i], data.data() + sent[i], data.size() - sent[i], MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          sent[i] += static_cast<size_t>(n);
        } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
          result[i] = Error(HCCL_E_TCP_TRANSFER, "send failed: {}", ErrnoString(errno));
          continue;
        }
      }
      if (sent[i] < data.size()) {
        still.push_back(i);
      }
    }
    open.swap(still);
  }
  return result;
}

Expected<HelloReader> HelloReader::Open(int listener, Options options) {
  const int flags = fcntl(listener, F_GETFL);
  if (flags < 0 || fcntl(listener, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Error(HCCL_E_SYSCALL, "{}: cannot make the listening socket non-blocking: {}",
                 options.where, ErrnoString(errno));
  }
  return HelloReader(listener, std::move(options));
}

void HelloReader::LogDropped(const std::string &peer, const std::string &why) const {
  uint64_t skipped = 0;
  if (!dropped_lines_.Allow(&skipped)) {
    return;
  }
  if (skipped != 0) {
    LogWarn("{}: dropped {} more connection(s) without a line each (at most {} lines a second)",
            options_.where, skipped, kDroppedLines);
  }
  LogWarn("{}: dropped a connection from {}: {}", options_.where, peer, why);
}

Expected<std::optional<HelloReader::Hello>> HelloReader::Next(Clock::time_point deadline) {
  std::vector<pollfd> fds;
  for (bool last = false;;) {
    if (!ready_.empty()) {
      std::optional<Hello> hello(std::move(ready_.front()));
      ready_.pop_front();
      return hello;
    }
    const auto now = Clock::now();
    Expire(now);
    if (last) {
      return std::optional<Hello>();
    }
    // Past the deadline: one look at what is there already, without waiting.
    last = now >= deadline;
    // The oldest connection has the earliest deadline: they all have the same hello_time.
    auto wake = pending_.empty() ? deadline : std::min(deadline, pending_.front().deadline);
    if (now < accept_paused_until_) {
      wake = std::min(wake, accept_paused_until_);
    }
    fds.clear();
    Watch(&fds);
    if (poll(fds.data(), fds.size(), last ? 0 : CeilMs(wake)) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Error(HCCL_E_SYSCALL, "{}: poll failed: {}", options_.where, ErrnoString(errno));
    }
    // The waiting connections first, then the new ones (see the class comment).
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (fds[i + 1].revents == 0 || Read(pending_[i])) {
        if (kept != i) {
          pending_[kept] = std::move(pending_[i]);
        }
        ++kept;
      }
    }
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(kept), pending_.end());
    if ((fds[0].revents & (POLLHUP | POLLERR)) != 0) {
      return std::optional<Hello>();  // shut down: its owner stops
    }
    if ((fds[0].revents & POLLIN) != 0) {
      Accept();
    }
  }
}

void HelloReader::Watch(std::vector<pollfd> *fds) const {
  // While accept is paused, poll skips the listener (a negative descriptor).
  fds->push_back({Clock::now() >= accept_paused_until_ ? listener_ : -1, POLLIN, 0});
  for (const Pending &p : pending_) {
    fds->push_back({p.fd.get(), POLLIN, 0});
  }
}

bool HelloReader::Read(Pending &p) {
  for (;;) {
    if (p.got == p.data.size()) {
      if (p.sized) {
        ready_.push_back(Hello{std::move(p.fd), std::move(p.peer), std::move(p.data),
                               std::move(p.state), p.known});
        return false;
      }
      auto size = options_.size(p.data);
      if (!size.ok()) {
        LogDropped(p.peer, size.status().message());
        return false;
      }
      p.sized = true;
      p.data.resize(std::max(*size, p.data.size()));
      continue;
    }
    const ssize_t n = recv(p.fd.get(), p.data.data() + p.got, p.data.size() - p.got, 0);
    if (n > 0) {
      p.got += static_cast<size_t>(n);
    } else if (n == 0) {
      LogDropped(p.peer, p.got == 0 ? std::string("it closed the connection without a hello")
                                    : fmt::format("it closed the connection after {} bytes of "
                                                  "its hello",
                                                  p.got));
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return true;
    } else if (errno != EINTR) {
      LogDropped(p.peer, fmt::format("recv failed: {}", ErrnoString(errno)));
      return false;
    }
  }
}

void HelloReader::Accept() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    UniqueFd fd(accept4(listener_, reinterpret_cast<sockaddr *>(&addr), &len,
                        SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) {
        continue;
      }
      if (err != EAGAIN && err != EWOULDBLOCK) {
        if (err != last_accept_error_) {  // one line per cause, not ten a second
          LogWarn("{}: accept failed: {}; new connections wait in the backlog", options_.where,
                  ErrnoString(err));
        }
        last_accept_error_ = err;
        accept_paused_until_ = Clock::now() + kAcceptPause;
      }
      return;
    }
    last_accept_error_ = 0;
    SetNoDelay(fd.get());
    const bool known = SameHost(addr, options_.known);
    if (pending_.size() >= options_.max_pending && !pending_.empty()) {
      // The oldest from a host that is not a peer's, else the oldest.
      auto victim =
          std::find_if(pending_.begin(), pending_.end(), [](const Pending &w) { return !w.known; });
      if (victim == pending_.end() && !options_.known.empty() && !known) {
        // Every waiting one is a peer's: the newcomer from elsewhere is the one turned away.
        LogDropped(EndpointString(addr),
                   fmt::format("more than {} connections wait for their hello, each from a "
                               "peer's host, and it is not",
                               options_.max_pending));
        continue;
      }
      if (victim == pending_.end()) {
        victim = pending_.begin();
      }
      if (options_.evicted) {
        options_.evicted(victim->fd.get());
      }
      LogDropped(victim->peer,
                 fmt::format("more than {} connections wait for their hello and it waited "
                             "longest{}",
                             options_.max_pending,
                             victim->known ? "" : " of those from hosts that are not a peer's"));
      pending_.erase(victim);
    }
    Pending p;
    p.fd = std::move(fd);
    p.known = known;
    p.peer = EndpointString(addr);
    p.deadline = Clock::now() + options_.hello_time;
    p.data.resize(options_.header);
    pending_.push_back(std::move(p));
  }
}

void HelloReader::Again(Hello hello) {
  Pending p;
  p.fd = std::move(hello.fd);
  p.peer = std::move(hello.peer);
  p.deadline = Clock::now() + options_.hello_time;
  p.data.resize(options_.header);
  p.state = std::move(hello.state);
  p.known = hello.known;
  pending_.push_back(std::move(p));  // the latest deadline: pending_ stays in deadline order
}

void HelloReader::Expire(Clock::time_point now) {
  while (!pending_.empty() && pending_.front().deadline <= now) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    // A hello waiting in the socket is taken: this thread may not have run in time (a loaded
    // host), and the peer is judged by what it sent.
    if (!Read(p)) {
      continue;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.hello_time);
    LogDropped(p.peer, p.got == 0 ? fmt::format("it sent no hello within {} ms", ms.count())
                                  : fmt::format("it sent {} bytes, not a whole hello, within {} ms",
                                                p.got, ms.count()));
  }
}

}  // namespace hzc::bootstrap
