// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/peer_process.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/config.h"
#include "base/errno_string.h"
#include "bootstrap/fd_handoff.h"

namespace hzc::bootstrap {

namespace {
// How long a take through the peer's socket waits for it to serve (it may link later).
constexpr std::chrono::seconds kHandoffTime{5};
}  // namespace

Expected<PeerProcess> PeerProcess::Open(pid_t pid) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    const int err = errno;
    return Error(err == ESRCH ? HCCL_E_REMOTE : HCCL_E_SYSCALL, "pidfd_open of pid {}: {}", pid,
                 ErrnoString(err));
  }
  return PeerProcess(pid, std::move(pidfd));
}

bool PeerProcess::Exited() const {
  if (!valid()) {
    return false;
  }
  pollfd p{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) > 0 && p.revents != 0;
}

std::optional<size_t> PeerProcess::FirstExited(const std::vector<PeerProcess> &peers) {
  std::vector<pollfd> fds;
  std::vector<size_t> index;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].valid()) {
      fds.push_back({.fd = peers[i].pidfd(), .events = POLLIN, .revents = 0});
      index.push_back(i);
    }
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) {
    return std::nullopt;
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) {
      return index[i];
    }
  }
  return std::nullopt;
}

Expected<UniqueFd> PeerProcess::TakeFd(int remote_fd) const {
  const FdHandoffChoice mode = GetConfig().fd_handoff;
  const bool forced = mode == FdHandoffChoice::kSocket;
  UniqueFd fd(forced ? -1
                     : static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd_.get(), remote_fd, 0)));
  if (forced || (!fd.valid() && errno == EPERM && mode == FdHandoffChoice::kAuto)) {
    // No ptrace rights over the peer (Yama's ptrace_scope): its serving thread hands it over.
    auto handed = RequestFd(pid_, remote_fd, std::chrono::steady_clock::now() + kHandoffTime);
    if (handed.ok() && Exited()) {  // answered by the process this pidfd names, still there
      return Error(HCCL_E_REMOTE, "descriptor {} of pid {}: the peer has exited", remote_fd, pid_);
    }
    return handed;
  }
  if (!fd.valid()) {
    const int err = errno;
    if (err == EBADF || err == ESRCH) {  // what the peer said it holds, it does not (or it exited)
      return Error(HCCL_E_REMOTE, "pidfd_getfd of descriptor {} of pid {}: {}", remote_fd, pid_,
                   err == EBADF ? "the peer holds no such descriptor" : "the peer has exited");
    }
    return Error(HCCL_E_SYSCALL, "pidfd_getfd of descriptor {} of pid {}: {}{}", remote_fd, pid_,
                 ErrnoString(err),
                 err == EPERM ? " (taking a peer's descriptor needs ptrace rights over it: see "
                                "kernel.yama.ptrace_scope)"
                              : "");
  }
  return fd;
}

}  // namespace hzc::bootstrap
