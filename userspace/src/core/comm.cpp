// SPDX-License-Identifier: Apache-2.0
#include "core/comm.h"

#include "core/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
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

Communicator::~Communicator() {
  coll_state_.reset();   // the collectives may hold pointers into peer windows
  peer_memory_.reset();  // unmap peer windows before leaving the domain
  if (device_) {
    if (Status st = device_->LeaveDomain(DomainId(), rank_); !st.ok()) {
      LogWarn("HcclCommDestroy: {}", st.message());
    }
  }
}

Device::DomainId Communicator::DomainId() const {
  Device::DomainId id{};
  std::memcpy(id.data(), id_.data(), sizeof(id));
  return id;
}

bool Communicator::linked() const {
  std::lock_guard lock(mutex_);
  return device_ != nullptr;
}

PeerMemory *Communicator::peer_memory() const {
  std::lock_guard lock(mutex_);
  return peer_memory_.get();
}

Status Communicator::EstablishLinks(const std::shared_ptr<Device> &device,
                                    std::chrono::seconds timeout) {
  std::lock_guard lock(mutex_);
  if (device_) {
    return Status::Ok();
  }
  const Device::DomainId domain = DomainId();
  HZC_RETURN_IF_ERROR(device->JoinDomain(domain, rank_, size()));
  auto leave = [&] {
    if (Status st = device->LeaveDomain(domain, rank_); !st.ok()) {
      LogWarn("link establishment: {}", st.message());
    }
  };
  // Key 0 carries each rank's card (pid, generation page); verbs endpoints use further keys.
  RankCard card;
  card.pid = static_cast<uint32_t>(getpid());
  if (auto generation = Generation::Process(); generation.ok()) {
    card.generation_fd = (*generation)->fd();
  } else {
    LogInfo("link establishment: {}; peers will list our ranges on every lookup",
            generation.status().message());
  }
  if (Status st = device->BoardPut(domain, rank_, 0, &card, sizeof(card)); !st.ok()) {
    leave();
    return st;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  std::vector<uint32_t> missing;
  std::vector<RankCard> cards(size());
  Status st = device->BoardWait(domain, rank_, size(), 0,
                                static_cast<uint32_t>(std::min<int64_t>(ms, UINT32_MAX)), &missing,
                                cards.data(), sizeof(RankCard));
  if (!st.ok()) {
    leave();
    if (st.code() == HCCL_E_TIMEOUT) {
      std::string list;
      for (uint32_t r : missing) {
        list += (list.empty() ? "" : ",") + std::to_string(r);
      }
      return Error(HCCL_E_TIMEOUT,
                   "link establishment: rank(s) {} of {} did not call HcclCommSetMemoryRange "
                   "within HCCL_CONNECT_TIMEOUT={}s",
                   list, size(), timeout.count());
    }
    if (st.code() == HCCL_E_REMOTE) {
      return Error(HCCL_E_REMOTE, "link establishment: a peer left or died ({})", st.message());
    }
    return st;
  }
  for (uint32_t r = 0; r < size(); ++r) {
    if (cards[r].magic != RankCard::kMagic) {
      leave();
      return Error(HCCL_E_INTERNAL, "link establishment: rank {} published no valid card", r);
    }
  }
  device_ = device;
  peer_memory_ = std::make_unique<PeerMemory>(device, domain, rank_, std::move(cards));
  LogDebug("link establishment: rank {} of {} linked", rank_, size());
  return Status::Ok();
}

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
