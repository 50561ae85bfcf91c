// SPDX-License-Identifier: Apache-2.0
// The memfd transport: peer access to activated memory without /dev/hzc. Each activation is a
// physical allocation of aclrtMallocPhysical (a memfd, runtime/vmm.h); this process publishes
// its ranges and activations in its directory (transport/memfd_directory.h: the memfds, the
// generation protocol that revokes them, and what this transport gives up against the kernel
// one), and peers map the memfds they find in each other's directories.
//
// Linking a communicator needs no rendezvous: it takes a pidfd of every rank's process (so a
// process that takes a pid later is never mistaken for the rank), and peers find each other's
// directories through them when they first look up their memory. There are no RDMA links over
// this transport.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "bootstrap/peer_process.h"
#include "transport/transport.h"

namespace hzc::transport {

class MemfdTransport final : public Transport {
 public:
  Kind kind() const override { return Kind::kMemfd; }
  Status AddRange(uintptr_t base, size_t size) override;
  Status RemoveRange(uintptr_t base) override;
  // @va must start an aclrtMapMem mapping (its memfd is what peers map).
  Status Activate(uintptr_t va, size_t size, uint64_t cookie) override;
  Status Deactivate(uintptr_t va) override;
  // A withdrawal that timed out waiting for a peer's acknowledgement has happened all the same:
  // the directory no longer lists the memory.
  bool Withdrawn(const Status &st) const override;
  Expected<std::unique_ptr<Link>> Connect(LinkRequest request) override;

 private:
  // @st, after moving the process's generation when the change took effect.
  Status Changed(Status st) const;
};

// The peers' memory through their directories; the mappings are the process's (MemfdImport),
// shared with its other communicators.
class MemfdPeerMemory final : public PeerMemory {
 public:
  // @cards: a pidfd of each rank's process (invalid for this one), taken when the ranks
  // arrived; without them (none given) each peer is whichever process holds its pid.
  MemfdPeerMemory(uint32_t rank, std::vector<uint32_t> pids,
                  std::vector<bootstrap::PeerProcess> cards = {});

  Expected<void *> Translate(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<PeerActivation> Activation(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<std::vector<PeerActivation>> Activations(uint32_t peer) override;
  // The process's mapped windows, of every communicator.
  size_t MappedWindows() const override;

 private:
  pid_t PidOf(uint32_t peer) const;
  // Attach the directory of rank @peer (pid @pid).
  Status Attach(uint32_t peer, pid_t pid);

  const uint32_t rank_;
  const std::vector<uint32_t> pids_;
  const std::vector<bootstrap::PeerProcess> cards_;
  // Per rank, the attachment last checked against its card (MemfdImport::AttachCard).
  std::unique_ptr<std::atomic<uint64_t>[]> checked_;
};

}  // namespace hzc::transport
