// SPDX-License-Identifier: Apache-2.0
#include "core/comm.h"

#include <atomic>
#include <set>

namespace hzc {

namespace {

std::atomic<uint64_t> g_serial{0};

constexpr uintptr_t kHandleBase = uintptr_t{0x43} << 40;
constexpr uintptr_t kHandleStride = 0x40;

}  // namespace

Communicator::Communicator(bootstrap::UniqueId id, uint32_t rank,
                           std::vector<bootstrap::Peer> ranks)
    : serial_(++g_serial), id_(id), rank_(rank), ranks_(std::move(ranks)) {}

uint32_t Communicator::ServerCount() const {
  std::set<std::string> hosts;
  for (const auto &p : ranks_) {
    hosts.insert(p.host);
  }
  return static_cast<uint32_t>(hosts.size());
}

CommRegistry &CommRegistry::Process() {
  static CommRegistry *const registry = new CommRegistry();
  return *registry;
}

HcclComm CommRegistry::Add(std::shared_ptr<Communicator> comm) {
  std::lock_guard lock(mutex_);
  const uintptr_t key = kHandleBase + (++made_) * kHandleStride;
  comms_.emplace(key, std::move(comm));
  return reinterpret_cast<HcclComm>(key);
}

Expected<std::shared_ptr<Communicator>> CommRegistry::Get(HcclComm handle) const {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  return it->second;
}

Status CommRegistry::Remove(HcclComm handle) {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  if (it->second.use_count() > 1) {
    return Error(HCCL_E_AGAIN, "comm={}: a call on it is in progress", handle);
  }
  comms_.erase(it);
  return Status::Ok();
}

size_t CommRegistry::Count() const {
  std::lock_guard lock(mutex_);
  return comms_.size();
}

}  // namespace hzc
