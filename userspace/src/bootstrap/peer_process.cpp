// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/peer_process.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_string.h"

namespace hzc::bootstrap {

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
  UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd_.get(), remote_fd, 0)));
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
