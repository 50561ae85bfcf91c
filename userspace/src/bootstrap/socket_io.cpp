// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/socket_io.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>

#include <cerrno>
#include <charconv>

#include "base/config.h"
#include "base/errno_string.h"
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

Status SendAll(int fd, const void *data, size_t len,
               std::chrono::steady_clock::time_point deadline) {
  return Stream(fd, const_cast<char *>(static_cast<const char *>(data)), len, deadline, true);
}

Status RecvAll(int fd, void *data, size_t len, std::chrono::steady_clock::time_point deadline) {
  return Stream(fd, static_cast<char *>(data), len, deadline, false);
}

}  // namespace hzc::bootstrap
