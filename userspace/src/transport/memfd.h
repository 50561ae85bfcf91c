// SPDX-License-Identifier: Apache-2.0
// The memfd transport: peer access to activated memory without /dev/hzc. Each activation is a
// physical allocation of aclrtMallocPhysical (a memfd, runtime/vmm.h); this process publishes
// its ranges and activations in its directory (transport/memfd_directory.h: the memfds, the
// generation protocol that revokes them, and what this transport gives up against the kernel
// one), and peers map the memfds they find in each other's directories.
//
// Linking a communicator needs no rendezvous: peers find each other's directories through the
// ranks' pids when they first look up their memory. There are no RDMA links over this transport.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
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
  Expected<std::unique_ptr<Link>> Connect(const LinkRequest &request) override;

 private:
  // @st, after moving the process's generation when the change took effect.
  Status Changed(Status st) const;
};

// The peers' memory through their directories; the mappings are the process's (MemfdImport),
// shared with its other communicators.
class MemfdPeerMemory final : public PeerMemory {
 public:
  MemfdPeerMemory(uint32_t rank, std::vector<uint32_t> pids);

  Expected<void *> Translate(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<PeerActivation> Activation(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<std::vector<PeerActivation>> Activations(uint32_t peer) override;
  // The process's mapped windows, of every communicator.
  size_t MappedWindows() const override;

 private:
  pid_t PidOf(uint32_t peer) const;

  const uint32_t rank_;
  const std::vector<uint32_t> pids_;
};

}  // namespace hzc::transport
