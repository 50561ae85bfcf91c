// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "base/unique_fd.h"
#include "bootstrap/wait_fd.h"

namespace hzc::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr uint32_t kMaxMessage = 1U << 20;

// Send (@out) or receive @len bytes at @p, waiting for the socket until @deadline.
Status Stream(int fd, char *p, size_t len, Clock::time_point deadline, bool out) {
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

Status SendAll(int fd, const void *data, size_t len, Clock::time_point deadline) {
  return Stream(fd, const_cast<char *>(static_cast<const char *>(data)), len, deadline, true);
}

Status RecvAll(int fd, void *data, size_t len, Clock::time_point deadline) {
  return Stream(fd, static_cast<char *>(data), len, deadline, false);
}

Status SendJson(int fd, const json &msg, Clock::time_point deadline) {
  const std::string body = msg.dump();
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  HZC_RETURN_IF_ERROR(SendAll(fd, &len, sizeof(len), deadline));
  return SendAll(fd, body.data(), body.size(), deadline);
}

Expected<json> RecvJson(int fd, Clock::time_point deadline) {
  uint32_t len = 0;
  HZC_RETURN_IF_ERROR(RecvAll(fd, &len, sizeof(len), deadline));
  len = ntohl(len);
  if (len == 0 || len > kMaxMessage) {
    return Error(HCCL_E_TCP_TRANSFER, "bad message length {}", len);
  }
  std::string body(len, '\0');
  HZC_RETURN_IF_ERROR(RecvAll(fd, body.data(), len, deadline));
  json msg = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !msg.is_object()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed message");
  }
  return msg;
}

socklen_t AddrLen(const sockaddr_storage &a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
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

struct Joined {
  UniqueFd fd;
  RankIdentity peer;
};

void RefuseRank(int fd, HcclResult code, const std::string &why) {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  (void)SendJson(fd, json{{"code", code}, {"error", why}}, deadline);
}

// The root thread: one rendezvous, then exit.
void ServeRootOnce(UniqueFd listener, RootInfo info, std::chrono::seconds timeout) {
  const std::string uid = IdString(info.id);
  const std::string where = info.AddressString();
  std::map<uint32_t, Joined> joined;
  uint32_t nranks = 0;
  // Before anyone arrives, wait long; from the first hello on, the connect timeout.
  auto deadline =
      Clock::now() + std::max<std::chrono::seconds>(timeout * 10, std::chrono::seconds(600));
  while (nranks == 0 || joined.size() < nranks) {
    auto ready = WaitFd(listener.get(), POLLIN, deadline);
    if (!ready.ok() || !*ready) {
      break;
    }
    UniqueFd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) {
      continue;
    }
    auto hello = RecvJson(conn.get(), std::min(deadline, Clock::now() + std::chrono::seconds(5)));
    if (!hello.ok()) {
      LogWarn("bootstrap: root {}: dropped a connection: {}", where, hello.status().message());
      continue;
    }
    const json &h = *hello;
    if (h.value("uid", "") != uid) {
      RefuseRank(conn.get(), HCCL_E_PARA, "rootInfo is from another HcclGetRootInfo");
      continue;
    }
    const uint32_t n = h.value("nranks", 0U);
    const uint32_t r = h.value("rank", UINT32_MAX);
    if (nranks == 0) {
      nranks = n;
      deadline = Clock::now() + timeout;
    }
    if (n != nranks) {
      RefuseRank(conn.get(), HCCL_E_PARA,
                 fmt::format("nRanks={} differs from nRanks={} of the other ranks", n, nranks));
      continue;
    }
    if (r >= nranks || joined.contains(r)) {
      RefuseRank(conn.get(), HCCL_E_PARA,
                 fmt::format("rank={} is out of range or already joined", r));
      continue;
    }
    joined[r] = Joined{std::move(conn), RankIdentity{h.value("host", ""), h.value("pid", 0U)}};
  }
  const auto send_deadline = Clock::now() + std::chrono::seconds(5);
  if (nranks != 0 && joined.size() == nranks) {
    json table = json::array();
    for (const auto &[r, j] : joined) {
      table.push_back({{"host", j.peer.host}, {"pid", j.peer.pid}});
    }
    for (auto &[r, j] : joined) {
      (void)SendJson(j.fd.get(), json{{"code", 0}, {"ranks", table}}, send_deadline);
    }
    LogDebug("bootstrap: root {}: {} ranks joined", where, nranks);
    return;
  }
  const std::string missing = RanksWhere(nranks, [&](uint32_t r) { return !joined.contains(r); });
  const std::string why = nranks == 0 ? std::string("no rank arrived")
                                      : fmt::format("rank(s) {} of {} did not arrive within {}s",
                                                    missing, nranks, timeout.count());
  LogError("bootstrap: root {}: rendezvous failed: {}", where, why);
  for (auto &[r, j] : joined) {
    RefuseRank(j.fd.get(), HCCL_E_TIMEOUT, why);
  }
}

void ServeRoot(UniqueFd listener, RootInfo info, std::chrono::seconds timeout) {
  try {
    ServeRootOnce(std::move(listener), info, timeout);
  } catch (const std::exception &e) {
    LogError("bootstrap: root {}: internal error: {}", info.AddressString(), e.what());
  }
}

}  // namespace

Expected<RootInfo> StartRoot(const std::string &address, std::chrono::seconds timeout) {
  auto addr = ParseAddress(address.empty() ? DefaultAddress() : address);
  if (!addr.ok()) {
    return addr.status();
  }
  UniqueFd fd(socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Error(HCCL_E_TCP_CONNECT, "socket failed: {}", ErrnoString(errno));
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr *>(&*addr), AddrLen(*addr)) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "cannot bind to {}: {}", address, ErrnoString(errno));
  }
  if (listen(fd.get(), 1024) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "listen failed: {}", ErrnoString(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr *>(&bound), &len) != 0) {
    return Error(HCCL_E_TCP_CONNECT, "getsockname failed: {}", ErrnoString(errno));
  }
  auto id = RandomId();
  if (!id.ok()) {
    return id.status();
  }
  RootInfo info;
  info.addr = bound;
  info.id = *id;
  std::thread(ServeRoot, std::move(fd), info, timeout).detach();
  LogInfo("bootstrap: root listening on {} for communicator {}", info.AddressString(),
          IdString(info.id));
  return info;
}

Expected<std::vector<RankIdentity>> Join(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                         const RankIdentity &self, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout + std::chrono::seconds(2);
  const std::string where = root.AddressString();
  UniqueFd fd;
  int last_err = 0;
  while (Clock::now() < deadline) {
    fd.reset(socket(root.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      return Error(HCCL_E_TCP_CONNECT, "socket failed: {}", ErrnoString(errno));
    }
    if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&root.addr), AddrLen(root.addr)) ==
        0) {
      break;
    }
    last_err = errno;
    fd.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!fd.valid()) {
    return Error(HCCL_E_TCP_CONNECT, "cannot reach the root at {} within {}s: {}", where,
                 timeout.count(), ErrnoString(last_err));
  }
  const json hello = {{"uid", IdString(root.id)},
                      {"nranks", nranks},
                      {"rank", rank},
                      {"host", self.host},
                      {"pid", self.pid}};
  if (Status st = SendJson(fd.get(), hello, deadline); !st.ok()) {
    return Error(st.code(), "root {}: {}", where, st.message());
  }
  auto reply = RecvJson(fd.get(), deadline);
  if (!reply.ok()) {
    return Error(reply.status().code(), "root {}: {}", where, reply.status().message());
  }
  const json &r = *reply;
  const int code = r.value("code", static_cast<int>(HCCL_E_INTERNAL));
  if (code != 0) {
    return Error(static_cast<HcclResult>(code), "root {}: {}", where,
                 r.value("error", std::string("refused")));
  }
  const json ranks = r.value("ranks", json::array());
  if (!ranks.is_array() || ranks.size() != nranks) {
    return Error(HCCL_E_TCP_TRANSFER, "root {}: malformed rank table", where);
  }
  std::vector<RankIdentity> peers;
  for (const auto &p : ranks) {
    peers.push_back(RankIdentity{p.value("host", ""), p.value("pid", 0U)});
  }
  return peers;
}

}  // namespace hzc::bootstrap
