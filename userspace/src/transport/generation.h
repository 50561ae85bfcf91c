// SPDX-License-Identifier: Apache-2.0
// The process's memory generation: a counter in a small sealed memfd that this process bumps
// after every HcclCommActivateCommMemory, HcclCommDeactivateCommMemory and
// HcclCommUnsetMemoryRange, and that peers map read-only (pidfd_getfd on the descriptor
// published at link establishment, bootstrap/peer_process.h). A peer whose cached view of our
// ranges was taken at the current generation needs no kernel call to trust it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "bootstrap/peer_process.h"

namespace hzc::transport {

class Generation {
 public:
  // The process's page, created on first use (and afresh in a forked child).
  static Expected<std::shared_ptr<Generation>> Process();
  // Bump the process's page if it exists (nobody can have cached anything otherwise).
  static void BumpProcess();

  Generation(const Generation &) = delete;
  Generation &operator=(const Generation &) = delete;

  int fd() const { return fd_.get(); }
  uint64_t Load() const;
  void Bump();

  // Name of the memfd (for tests that account for descriptors).
  static constexpr const char *kName = "hzc-generation";

 private:
  Generation(UniqueFd fd, UniqueMapping page) : fd_(std::move(fd)), page_(std::move(page)) {}
  UniqueFd fd_;
  UniqueMapping page_;
};

// A peer's generation page mapped read-only, and the peer's process (whether it lives).
class PeerGeneration {
 public:
  // Fetch descriptor @remote_fd of process @pid. HCCL_E_SYSCALL when that is not possible
  // (pidfd unsupported, ptrace restrictions) or the descriptor is not a generation page,
  // HCCL_E_REMOTE when the process has exited.
  static Expected<std::unique_ptr<PeerGeneration>> Attach(pid_t pid, int remote_fd);

  PeerGeneration(const PeerGeneration &) = delete;
  PeerGeneration &operator=(const PeerGeneration &) = delete;

  uint64_t Load() const;
  // False once the peer process has exited.
  bool Alive() const;

 private:
  PeerGeneration(bootstrap::PeerProcess process, UniqueMapping page)
      : process_(std::move(process)), page_(std::move(page)) {}
  bootstrap::PeerProcess process_;
  UniqueMapping page_;  // read-only
};

}  // namespace hzc::transport
