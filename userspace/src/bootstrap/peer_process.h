// SPDX-License-Identifier: Apache-2.0
// The process of a peer rank on this host, held by a pidfd: whether it has exited, and
// descriptors taken from it (pidfd_getfd, which needs the rights of ptrace over it).
//
// This is the library's one way to learn in userspace that a peer process died: the
// collectives' control area (coll/control) polls the pidfds of its ranks while it waits, and
// a peer's generation page (core/generation) tells with it whether its counter can still
// move. It complements the kernel domain of /dev/hzc: when a member's file is released
// (the process exited or closed it) hzc.ko breaks the domain, and everything that goes
// through the domain (the board waits of the link set-up, the listings of a peer's ranges
// and activations, peer mappings) fails from then on with ECONNRESET (HCCL_E_REMOTE).
// A pidfd sees an exit outside the domain too (memory the kernel does not arbitrate, like a
// control area shared between the ranks), and it fires once the process is gone, not when
// it merely leaves a communicator.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc::bootstrap {

class PeerProcess {
 public:
  PeerProcess() = default;  // none: valid() is false, Exited() never true
  // A pidfd of process @pid: HCCL_E_REMOTE when it has exited already, HCCL_E_SYSCALL when
  // pidfd_open fails otherwise (a kernel without pidfds, no such process visible).
  static Expected<PeerProcess> Open(pid_t pid);

  bool valid() const { return pidfd_.valid(); }
  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }

  // Whether the process has exited (a poll of the pidfd without waiting).
  bool Exited() const;
  // Of @peers, the index of the first that has exited (one poll for all; invalid ones are
  // skipped), or nothing.
  static std::optional<size_t> FirstExited(const std::vector<PeerProcess> &peers);

  // A duplicate of the process's descriptor @remote_fd (close-on-exec): with pidfd_getfd, or
  // where that needs ptrace rights this process lacks (Yama's ptrace_scope), handed over by the
  // process itself (bootstrap/fd_handoff.h). HCCL_E_REMOTE when it holds no such descriptor or
  // refuses it; HCCL_E_SYSCALL when neither way answers.
  Expected<UniqueFd> TakeFd(int remote_fd) const;

 private:
  PeerProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  pid_t pid_ = 0;
  UniqueFd pidfd_;
};

}  // namespace hzc::bootstrap
