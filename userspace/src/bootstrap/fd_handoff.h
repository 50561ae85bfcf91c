// SPDX-License-Identifier: Apache-2.0
// Descriptors handed between the ranks of one host over a Unix socket (SCM_RIGHTS), for where
// pidfd_getfd is refused: it needs the rights of ptrace over the owner, which Yama's
// kernel.yama.ptrace_scope=1 (Ubuntu's default) denies between sibling processes.
//
// Each process that may be asked (a rank of the memfd transport: ServeFds) listens on the
// abstract socket "hzc-fd-<uid>-<pid>" in a thread of its own. A request names one of its
// descriptor numbers (FdRequest); it answers with that descriptor, or a refusal, and closes the
// connection. It gives only to a process of its own uid whose pid it was told of (the ranks of its
// communicators on this host: ServeFds) and only the memfds that the memfd transport publishes
// (its activations' physical memory, its directory and mailbox, its generation page: by their
// names, checked when asked, so a descriptor number reused for anything else is never given).
// The asking side checks that the socket's owner is the process it asked for (SO_PEERCRED), so a
// squatter of the name gets no request answered as if it were the rank; it can only deny the
// hand-off (the take fails with HCCL_E_SYSCALL naming the socket).
//
// PeerProcess::TakeFd uses this when pidfd_getfd is refused with EPERM (HZC_FD_HANDOFF: socket
// always, off never).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc::bootstrap {

// The wire: a request is exactly an FdRequest; a reply an FdReply, with the descriptor attached
// when @error is 0. Host byte order (the same host).
struct FdRequest {
  uint32_t magic;
  int32_t fd;
};
struct FdReply {
  uint32_t magic;
  int32_t error;  // 0, or an errno value: EPERM (not given to this process), EBADF (not one of
                  // the memfds given), EPROTO (a malformed request)
};
inline constexpr uint32_t kFdRequestMagic = 0x485a4651;  // "HZFQ"
inline constexpr uint32_t kFdReplyMagic = 0x485a4652;    // "HZFR"

// The descriptor number a request asks for; HCCL_E_REMOTE naming what is wrong with it.
Expected<int> ParseFdRequest(std::span<const std::byte> message);
// Whether @link (the target of /proc/self/fd/N) is a memfd that is given to peers.
bool GivenMemfd(const std::string &link);

// Serve this process's memfds to the processes @pids (added to those told of before), starting
// the serving thread if it is not running in this process. HCCL_E_SYSCALL when the socket cannot
// be made (the name is taken: logged; the peers' takes fail then).
Status ServeFds(const std::vector<pid_t> &pids);

// Descriptor @remote_fd of process @pid, through its serving thread, waiting for it (not serving
// yet, this process not yet told of) until @deadline. HCCL_E_REMOTE when the process refused it or
// is not who answered; HCCL_E_SYSCALL when there was no answer.
Expected<UniqueFd> RequestFd(pid_t pid, int remote_fd,
                             std::chrono::steady_clock::time_point deadline);

}  // namespace hzc::bootstrap
