// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/local_exchange.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "bootstrap/wait_fd.h"

namespace hzc::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;

// The longest pause between a rank's tries to reach rank 0's socket.
constexpr auto kMaxPause = std::chrono::milliseconds(32);

// The abstract address of @name (sun_path[0] = 0: no file to clean up, gone with the socket).
struct Address {
  explicit Address(const std::string &name) {
    addr.sun_family = AF_UNIX;
    const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
    std::memcpy(addr.sun_path + 1, name.data(), n);
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  }
  const sockaddr *get() const { return reinterpret_cast<const sockaddr *>(&addr); }
  sockaddr_un addr{};
  socklen_t len = 0;
};

Expected<UniqueFd> Socket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "socket: {}", ErrnoString(errno));
  }
  return fd;
}

Status CheckPeerUid(int fd, const char *who) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Error(HCCL_E_SYSCALL, "SO_PEERCRED of {}: {}", who, ErrnoString(errno));
  }
  if (cred.uid != ::geteuid()) {
    return Error(HCCL_E_REMOTE, "{} (pid {}) runs as uid {}, not {}", who, cred.pid, cred.uid,
                 ::geteuid());
  }
  return Status::Ok();
}

// A message of one word with room for one descriptor; @word must outlive it.
struct WordMessage {
  explicit WordMessage(uint64_t *word) : iov{.iov_base = word, .iov_len = sizeof(*word)} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  WordMessage(const WordMessage &) = delete;
  WordMessage &operator=(const WordMessage &) = delete;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov;
  msghdr msg{};
};

Status SendDescriptor(int conn, int fd, uint64_t word, uint32_t rank) {
  WordMessage m(&word);
  cmsghdr *cm = CMSG_FIRSTHDR(&m.msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
  if (::sendmsg(conn, &m.msg, MSG_NOSIGNAL) != sizeof(word)) {
    return Error(HCCL_E_SYSCALL, "sending the descriptor to rank {}: {}", rank, ErrnoString(errno));
  }
  return Status::Ok();
}

Expected<HandedDescriptor> ReceiveDescriptor(int conn) {
  HandedDescriptor out;
  WordMessage m(&out.word);
  const ssize_t got = ::recvmsg(conn, &m.msg, MSG_CMSG_CLOEXEC);
  const cmsghdr *cm = CMSG_FIRSTHDR(&m.msg);
  if (got != sizeof(out.word) || cm == nullptr || cm->cmsg_type != SCM_RIGHTS) {
    return Error(HCCL_E_REMOTE, "rank 0 closed the connection before handing over the descriptor");
  }
  int raw = -1;
  std::memcpy(&raw, CMSG_DATA(cm), sizeof(raw));
  out.fd.reset(raw);
  return out;
}

Expected<UniqueFd> Listen(const LocalExchange &x) {
  auto listener = Socket();
  if (!listener.ok()) {
    return listener.status();
  }
  const Address addr(x.name);
  if (::bind(listener->get(), addr.get(), addr.len) != 0 ||
      ::listen(listener->get(), static_cast<int>(x.nranks)) != 0) {
    return Error(HCCL_E_SYSCALL, "bind/listen on an abstract socket: {}", ErrnoString(errno));
  }
  return listener;
}

std::string Missing(const std::vector<bool> &served) {
  return RanksWhere(static_cast<uint32_t>(served.size()), [&](uint32_t r) { return !served[r]; });
}

// Accept one connection and read the rank it says it is: nothing when it is refused (another
// uid, a bad or repeated rank; logged).
std::optional<std::pair<UniqueFd, uint32_t>> Accept(const LocalExchange &x, int listener,
                                                    const std::vector<bool> &served) {
  UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn.valid()) {
    return std::nullopt;
  }
  // Another user's connection is dropped before anything is read from it, so it cannot hold
  // rank 0; one of this user's that never says its rank holds it at most until the deadline.
  if (Status st = CheckPeerUid(conn.get(), "a connecting process"); !st.ok()) {
    LogWarn("local exchange: refused a connection on @{}: {}", x.name, st.message());
    return std::nullopt;
  }
  uint32_t peer = UINT32_MAX;
  auto said = WaitFd(conn.get(), POLLIN, x.deadline);
  if (!said.ok() || !*said ||
      ::recv(conn.get(), &peer, sizeof(peer), MSG_DONTWAIT) != sizeof(peer) || peer >= x.nranks ||
      served[peer]) {
    LogWarn("local exchange: refused a connection on @{} (rank {})", x.name, peer);
    return std::nullopt;
  }
  return std::make_pair(std::move(conn), peer);
}

// Connect to rank 0's socket, retrying while it does not listen yet: soon at first, then less
// often (rank 0 may be busy for seconds, and a thousand ranks polling every few milliseconds
// would take the CPUs it needs).
Expected<UniqueFd> Connect(const LocalExchange &x) {
  const Address addr(x.name);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto conn = Socket();
    if (!conn.ok() || ::connect(conn->get(), addr.get(), addr.len) == 0) {
      return conn;
    }
    if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "connect to rank 0: {}", ErrnoString(errno));
    }
    if (Clock::now() >= x.deadline) {
      return Error(HCCL_E_TIMEOUT, "rank 0 did not {}", x.arrival);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, kMaxPause);
  }
}

}  // namespace

Status GiveDescriptor(const LocalExchange &x, int fd, uint64_t word) {
  if (x.nranks <= 1) {
    return Status::Ok();
  }
  auto listener = Listen(x);
  if (!listener.ok()) {
    return listener.status();
  }
  if (x.rank >= x.nranks) {
    return Error(HCCL_E_PARA, "rank {} of {}: no such rank", x.rank, x.nranks);
  }
  LogDebug("local exchange: rank {} of {} hands a descriptor over @{}", x.rank, x.nranks, x.name);
  std::vector<bool> served(x.nranks, false);
  served[x.rank] = true;
  for (uint32_t n = 1; n < x.nranks;) {
    auto ready = WaitFd(listener->get(), POLLIN, x.deadline);
    if (!ready.ok()) {
      return ready.status();
    }
    if (!*ready) {
      return Error(HCCL_E_TIMEOUT, "rank(s) {} of {} did not {}", Missing(served), x.nranks,
                   x.arrival);
    }
    auto accepted = Accept(x, listener->get(), served);
    if (!accepted) {
      continue;
    }
    HZC_RETURN_IF_ERROR(SendDescriptor(accepted->first.get(), fd, word, accepted->second));
    served[accepted->second] = true;
    ++n;
  }
  return Status::Ok();
}

Expected<HandedDescriptor> TakeDescriptor(const LocalExchange &x) {
  auto conn = Connect(x);
  if (!conn.ok()) {
    return conn.status();
  }
  HZC_RETURN_IF_ERROR(CheckPeerUid(conn->get(), "rank 0"));
  if (::send(conn->get(), &x.rank, sizeof(x.rank), MSG_NOSIGNAL) != sizeof(x.rank)) {
    return Error(HCCL_E_SYSCALL, "sending to rank 0: {}", ErrnoString(errno));
  }
  auto ready = WaitFd(conn->get(), POLLIN, x.deadline);
  if (!ready.ok() || !*ready) {
    return Error(HCCL_E_TIMEOUT, "no answer from rank 0 in time");
  }
  return ReceiveDescriptor(conn->get());
}

}  // namespace hzc::bootstrap
