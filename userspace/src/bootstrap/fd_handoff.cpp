// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/fd_handoff.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;

// How long a connection may take to send its request (the server serves one at a time).
constexpr int kRequestMs = 1000;

// The names of the memfds given (memfd_create's, as /proc/self/fd shows them).
constexpr std::array<std::string_view, 4> kGiven = {"hzc-physical", "hzc-directory", "hzc-mailbox",
                                                    "hzc-generation"};

sockaddr_un Address(pid_t pid, socklen_t *len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = fmt::format("hzc-fd-{}-{}", getuid(), pid);
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // abstract: a leading NUL
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

struct Server {
  std::mutex mutex;
  pid_t pid = 0;  // the process whose thread serves (a forked child starts its own)
  std::set<pid_t> peers;
  UniqueFd listener;
};

Server &TheServer() {
  // The serving thread takes the mutex: a fork() meanwhile must not leave it held in the child
  // (whose first ServeFds would wait for it forever).
  static Server *const s = [] {
    auto *made = new Server();
    ::pthread_atfork([] { TheServer().mutex.lock(); }, [] { TheServer().mutex.unlock(); },
                     [] { TheServer().mutex.unlock(); });
    return made;
  }();
  return *s;
}

bool Allowed(pid_t pid) {
  Server &s = TheServer();
  std::lock_guard lock(s.mutex);
  return s.peers.count(pid) != 0;
}

std::string FdLink(int fd) {
  std::array<char, 256> buf{};
  const std::string path = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = readlink(path.c_str(), buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : std::string();
}

void Reply(int conn, int error, int fd) {
  FdReply r{kFdReplyMagic, error};
  iovec iov{&r, sizeof(r)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  if (error == 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(fd));
  }
  (void)sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

// One connection: its credentials, its request, the answer. A process of another user is not
// waited for (it cannot hold the thread up); one of this user is read before it is answered (a
// socket closed with a request unread resets the asker's instead of giving it the answer).
void Serve(int conn) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return;
  }
  if (cred.uid != getuid()) {
    LogDebug("fd hand-off: pid {} of uid {} refused", cred.pid, cred.uid);
    return;
  }
  pollfd p{conn, POLLIN, 0};
  if (poll(&p, 1, kRequestMs) != 1) {
    return;
  }
  std::array<std::byte, sizeof(FdRequest) + 1> buf{};
  const ssize_t n = recv(conn, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0) {
    return;
  }
  auto fd = ParseFdRequest(std::span(buf.data(), static_cast<size_t>(n)));
  if (!fd.ok()) {
    LogWarn("fd hand-off: pid {}: {}", cred.pid, fd.status().message());
    Reply(conn, EPROTO, -1);
    return;
  }
  if (!Allowed(cred.pid)) {
    // Debug only: a rank that links before this process was told of it asks again until then.
    LogDebug("fd hand-off: pid {} is not a rank of this process's communicators here (yet)",
             cred.pid);
    Reply(conn, EPERM, -1);
    return;
  }
  // A duplicate, checked and sent: the number may be closed and reused meanwhile, the duplicate
  // stays the file that was checked.
  const UniqueFd dup(fcntl(fd.value(), F_DUPFD_CLOEXEC, 0));
  if (!dup.valid() || !GivenMemfd(FdLink(dup.get()))) {
    Reply(conn, EBADF, -1);
    return;
  }
  Reply(conn, 0, dup.get());
}

void Loop(int listener) {
  for (;;) {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) {
      LogError("fd hand-off: poll of the socket failed: {}; no more descriptors handed",
               ErrnoString(errno));
      return;
    }
    UniqueFd conn(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.valid()) {
      Serve(conn.get());
    }
  }
}

}  // namespace

Expected<int> ParseFdRequest(std::span<const std::byte> message) {
  if (message.size() != sizeof(FdRequest)) {
    return Error(HCCL_E_REMOTE, "a request of {} bytes, not {}", message.size(), sizeof(FdRequest));
  }
  FdRequest r{};
  std::memcpy(&r, message.data(), sizeof(r));
  if (r.magic != kFdRequestMagic) {
    return Error(HCCL_E_REMOTE, "a request with magic {:#x}, not {:#x}", r.magic, kFdRequestMagic);
  }
  if (r.fd < 0) {
    return Error(HCCL_E_REMOTE, "a request for descriptor {}", r.fd);
  }
  return static_cast<int>(r.fd);
}

bool GivenMemfd(const std::string &link) {
  constexpr std::string_view kPrefix = "/memfd:", kSuffix = " (deleted)";
  const std::string_view l(link);
  if (!l.starts_with(kPrefix) || !l.ends_with(kSuffix)) {
    return false;
  }
  const std::string_view name =
      l.substr(kPrefix.size(), l.size() - kPrefix.size() - kSuffix.size());
  return std::find(kGiven.begin(), kGiven.end(), name) != kGiven.end();
}

Status ServeFds(const std::vector<pid_t> &pids) {
  Server &s = TheServer();
  std::lock_guard lock(s.mutex);
  s.peers.insert(pids.begin(), pids.end());
  if (s.pid == getpid()) {
    return Status::Ok();
  }
  s.listener.reset();  // a forked child's copy of its parent's
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "fd hand-off: socket failed: {}", ErrnoString(errno));
  }
  socklen_t len = 0;
  const sockaddr_un a = Address(getpid(), &len);
  if (bind(fd.get(), reinterpret_cast<const sockaddr *>(&a), len) != 0 ||
      listen(fd.get(), 64) != 0) {
    const int err = errno;
    LogWarn(
        "fd hand-off: the socket @{} cannot be served ({}): peers that may not take this "
        "process's descriptors directly (ptrace_scope) fail to map its memory",
        std::string_view(a.sun_path + 1, len - offsetof(sockaddr_un, sun_path) - 1),
        ErrnoString(err));
    return Error(HCCL_E_SYSCALL, "fd hand-off: bind/listen failed: {}", ErrnoString(err));
  }
  s.listener = std::move(fd);
  s.pid = getpid();
  std::thread(Loop, s.listener.get()).detach();
  return Status::Ok();
}

Expected<UniqueFd> RequestFd(pid_t pid, int remote_fd, Clock::time_point deadline) {
  socklen_t len = 0;
  const sockaddr_un a = Address(pid, &len);
  std::string last = "no answer";
  bool refused = false;  // told "not told of you" at least once: a refusal, not a silence
  for (;;) {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      return Error(HCCL_E_SYSCALL, "fd hand-off: socket failed: {}", ErrnoString(errno));
    }
    const timeval tv{.tv_sec = kRequestMs / 1000, .tv_usec = 0};
    (void)setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int error = 0;
    if (connect(s.get(), reinterpret_cast<const sockaddr *>(&a), len) != 0) {
      last = fmt::format("connect: {}", ErrnoString(errno));  // not serving yet
    } else {
      ucred cred{};
      socklen_t clen = sizeof(cred);
      if (getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.pid != pid ||
          cred.uid != getuid()) {
        return Error(HCCL_E_REMOTE,
                     "fd hand-off: the socket of pid {} is served by pid {} (uid {}), not by it",
                     pid, cred.pid, cred.uid);
      }
      const FdRequest req{kFdRequestMagic, remote_fd};
      // A refusal may come (and the socket close) before the request is sent: read it anyway.
      const bool sent = send(s.get(), &req, sizeof(req), MSG_NOSIGNAL) == sizeof(req);
      const int send_err = sent ? 0 : errno;
      {
        FdReply rep{};
        iovec iov{&rep, sizeof(rep)};
        alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * 4)> control{};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        const ssize_t n = recvmsg(s.get(), &msg, MSG_CMSG_CLOEXEC);
        std::vector<UniqueFd> got;
        for (cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; ++i) {
              int f = -1;
              std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
              got.emplace_back(f);
            }
          }
        }
        if (n != sizeof(rep) || rep.magic != kFdReplyMagic || (rep.error == 0 && got.size() != 1) ||
            (msg.msg_flags & MSG_CTRUNC) != 0) {
          last = !sent ? fmt::format("send: {}", ErrnoString(send_err))
                 : n < 0
                     ? fmt::format("receive: {}", ErrnoString(errno))
                     : fmt::format("a malformed answer ({} bytes, {} descriptors)", n, got.size());
        } else if (rep.error == 0) {
          return std::move(got[0]);
        } else {
          error = rep.error;
          refused = true;
          last = fmt::format("refused: {}", ErrnoString(error));
        }
      }
    }
    // Refusals other than "not told of this process yet" are final.
    if ((error != 0 && error != EPERM) || Clock::now() >= deadline) {
      return Error(refused ? HCCL_E_REMOTE : HCCL_E_SYSCALL,
                   "fd hand-off of descriptor {} of pid {}: {}", remote_fd, pid, last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace hzc::bootstrap
