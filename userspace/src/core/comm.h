// SPDX-License-Identifier: Apache-2.0
// Communicators and the registry that validates their handles.
#pragma once

#include <hccl/hccl_types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "bootstrap/root_info.h"
#include "core/peer_memory.h"
#include "core/status.h"
#include "device/device.h"

namespace hzc {

class Communicator {
 public:
  Communicator(bootstrap::UniqueId id, uint32_t rank, std::vector<bootstrap::Peer> ranks);
  ~Communicator();  // leaves the kernel domain
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  uint64_t serial() const { return serial_; }
  const bootstrap::UniqueId &id() const { return id_; }
  uint32_t rank() const { return rank_; }
  uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }
  const std::vector<bootstrap::Peer> &ranks() const { return ranks_; }
  // Number of distinct servers (host identities) among the ranks.
  uint32_t ServerCount() const;

  // Link establishment, done by the first HcclCommSetMemoryRange of the communicator: join
  // the kernel domain, publish on its board and wait (up to @timeout) until every rank has.
  // A failure leaves the domain again, so a later call starts afresh. Idempotent.
  Status EstablishLinks(const std::shared_ptr<Device> &device, std::chrono::seconds timeout);
  bool linked() const;

  // State of the collectives (coll/): made by their first call, destroyed with the
  // communicator. Access is serialised by the collectives layer.
  struct CollState {
    virtual ~CollState() = default;
  };
  std::unique_ptr<CollState> &coll_state() { return coll_state_; }
  // Access to the peers' activated memory; nullptr until linked. Valid while the communicator
  // lives.
  PeerMemory *peer_memory() const;

 private:
  const uint64_t serial_;
  const bootstrap::UniqueId id_;
  const uint32_t rank_;
  const std::vector<bootstrap::Peer> ranks_;
  Device::DomainId DomainId() const;

  std::unique_ptr<CollState> coll_state_;

  mutable std::mutex mutex_;
  std::shared_ptr<Device> device_;           // set once linked: the context holding our domain rank
  std::unique_ptr<PeerMemory> peer_memory_;  // set once linked
};

// Live communicators by handle. Handles are opaque values never reused, so a destroyed or
// foreign handle is an error and never another communicator.
class CommRegistry {
 public:
  static CommRegistry &Process();

  HcclComm Add(std::shared_ptr<Communicator> comm);
  // HCCL_E_PARA for a handle that is not a live communicator.
  Expected<std::shared_ptr<Communicator>> Get(HcclComm handle) const;
  // HCCL_E_AGAIN while another call holds the communicator.
  Status Remove(HcclComm handle);
  size_t Count() const;

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, std::shared_ptr<Communicator>> comms_;
  uint64_t made_ = 0;
};

}  // namespace hzc
