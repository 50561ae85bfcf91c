// SPDX-License-Identifier: Apache-2.0
// The process's memory generation: a counter in a small sealed memfd that this process bumps
// after every HcclCommActivateCommMemory, HcclCommDeactivateCommMemory and
// HcclCommUnsetMemoryRange, and that peers map read-only (pidfd_getfd on the descriptor
// published at link establishment). A peer whose cached view of our ranges was taken at the
// current generation needs no kernel call to trust it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc {

class Generation {
 public:
  // The process's page, created on first use (and afresh in a forked child).
  static Expected<std::shared_ptr<Generation>> Process();
  // Bump the process's page if it exists (nobody can have cached anything otherwise).
  static void BumpProcess();

  ~Generation();
  Generation(const Generation &) = delete;
  Generation &operator=(const Generation &) = delete;

  int fd() const { return fd_.get(); }
  uint64_t Load() const;
  void Bump();

  // Name of the memfd (for tests that account for descriptors).
  static constexpr const char *kName = "hzc-generation";

 private:
  Generation(UniqueFd fd, uint64_t *word) : fd_(std::move(fd)), word_(word) {}
  UniqueFd fd_;
  uint64_t *word_;
};

// A peer's generation page mapped read-only, and a pidfd telling whether the peer lives.
class PeerGeneration {
 public:
  // Fetch descriptor @remote_fd of process @pid. HCCL_E_SYSCALL when that is not possible
  // (pidfd unsupported, ptrace restrictions) or the descriptor is not a generation page.
  static Expected<std::unique_ptr<PeerGeneration>> Attach(pid_t pid, int remote_fd);

  ~PeerGeneration();
  PeerGeneration(const PeerGeneration &) = delete;
  PeerGeneration &operator=(const PeerGeneration &) = delete;

  uint64_t Load() const;
  // False once the peer process has exited.
  bool Alive() const;

 private:
  PeerGeneration(UniqueFd pidfd, const uint64_t *word) : pidfd_(std::move(pidfd)), word_(word) {}
  UniqueFd pidfd_;
  const uint64_t *word_;
};

}  // namespace hzc
