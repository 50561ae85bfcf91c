// SPDX-License-Identifier: Apache-2.0
#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "base/config.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "core/activation_cookie.h"

namespace hzc {

namespace {

std::atomic<uint64_t> g_serial{0};

constexpr uintptr_t kHandleBase = uintptr_t{0x43} << 40;
constexpr uintptr_t kHandleStride = 0x40;

}  // namespace

Communicator::Communicator(bootstrap::UniqueId id, uint32_t rank,
                           std::vector<bootstrap::RankIdentity> ranks, CommOptions options)
    : serial_(++g_serial),
      id_(id),
      rank_(rank),
      ranks_(std::move(ranks)),
      options_(std::move(options)) {}

std::string Communicator::Name() const {
  return options_.name.empty() ? "hzc-" + bootstrap::IdString(id_) : options_.name;
}

size_t Communicator::StagingBytes() const {
  return options_.buffer_mb.value_or(GetConfig().buff_size_mb) << 20;
}

std::chrono::seconds Communicator::ExecTimeout() const {
  return options_.exec_timeout.value_or(GetConfig().exec_timeout);
}

void Communicator::RecordAsyncError(HcclResult code) {
  HcclResult none = HCCL_SUCCESS;
  async_error_.compare_exchange_strong(none, code);
}

Communicator::~Communicator() {
  coll_state_.reset();   // the collectives may hold pointers into peer windows
  p2p_state_.reset();    // and the point-to-point channels
  peer_memory_.reset();  // unmap peer windows before leaving the domain
  memory_.clear();       // deregister before the links go (never waits for peers)
  links_.reset();
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
  return peer_memory_ != nullptr;
}

Status Communicator::EstablishMemfdLinks() {
  std::lock_guard lock(mutex_);
  if (peer_memory_) {
    return Status::Ok();
  }
  std::vector<uint32_t> pids;
  for (const auto &r : ranks_) {
    pids.push_back(r.pid);
  }
  peer_memory_ = std::make_unique<transport::PeerMemory>(rank_, pids);
  LogDebug("link establishment: rank {} of {} linked (memfd transport)", rank_, size());
  return Status::Ok();
}

transport::PeerMemory *Communicator::peer_memory() const {
  std::lock_guard lock(mutex_);
  return peer_memory_.get();
}

verbs::Links *Communicator::links() const {
  std::lock_guard lock(mutex_);
  return links_.get();
}

uint32_t Communicator::CookieTag(uint32_t rank) const {
  return ActivationCookie::Tag(DomainId(), rank);
}

Expected<uint64_t> Communicator::RegisterMemory(uintptr_t va, size_t len) {
  verbs::Links *links = this->links();
  if (links == nullptr) {
    return uint64_t{0};
  }
  {
    std::lock_guard lock(memory_mutex_);
    if (memory_.contains(va)) {
      return Error(HCCL_E_PARA, "[{:#x}, +{:#x}): a registration starts there already", va, len);
    }
  }
  auto mr = links->Register(reinterpret_cast<void *>(va), len);  // may take long: unlocked
  if (!mr.ok()) {
    return mr.status();
  }
  const uint32_t rkey = (*mr)->rkey();
  std::lock_guard lock(memory_mutex_);
  if (!memory_.emplace(va, std::move(*mr)).second) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}): a registration starts there already", va, len);
  }
  LogDebug("comm {}: registered [{:#x}, +{:#x}) with rkey {:#x}", serial_, va, len, rkey);
  return ActivationCookie::Encode(CookieTag(rank_), rkey);
}

bool Communicator::DropMemory(uintptr_t va) {
  std::shared_ptr<const verbs::MemoryRegion> mr;  // deregistered after the lock is released
  std::lock_guard lock(memory_mutex_);
  auto it = memory_.find(va);
  if (it == memory_.end()) {
    return false;
  }
  mr = std::move(it->second);
  memory_.erase(it);
  return true;
}

std::shared_ptr<const verbs::MemoryRegion> Communicator::FindMemory(const void *p,
                                                                    size_t len) const {
  std::lock_guard lock(memory_mutex_);
  auto it = memory_.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == memory_.begin()) {
    return nullptr;
  }
  --it;
  return it->second->Contains(p, len) ? it->second : nullptr;
}

Status Communicator::WaitForCards(const Device &device, const Device::DomainId &domain,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::chrono::seconds timeout,
                                  std::vector<transport::RankCard> *cards) const {
  // Wait in slices, so that the ranks still missing are known if the domain breaks: a rank
  // whose timeout ran out a little earlier gives up waiting for them and leaves, which breaks
  // the domain for the others; they report the same timeout, not a failed peer.
  using std::chrono::milliseconds;
  constexpr milliseconds kSlice{200};
  std::vector<uint32_t> missing, missing_now;
  Status st;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto wait = std::clamp(left, milliseconds(0), kSlice);
    st = device.BoardWait(domain, rank_, size(), 0, static_cast<uint32_t>(wait.count()),
                          &missing_now, cards->data(), sizeof(transport::RankCard));
    if (st.code() != HCCL_E_TIMEOUT) {
      break;
    }
    missing = missing_now;
    if (left <= kSlice) {
      break;
    }
  }
  if (!st.ok()) {
    const std::string list = RankList(missing);
    if (st.code() == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "link establishment: rank(s) {} of {} did not call HcclCommSetMemoryRange "
                   "within HCCL_CONNECT_TIMEOUT={}s",
                   list, size(), timeout.count());
    }
    if (st.code() == HCCL_E_REMOTE && !missing.empty()) {
      return Error(HCCL_E_TIMEOUT,
                   "link establishment: rank(s) {} of {} did not call HcclCommSetMemoryRange "
                   "within HCCL_CONNECT_TIMEOUT={}s (another rank gave up waiting and left)",
                   list, size(), timeout.count());
    }
    if (st.code() == HCCL_E_REMOTE) {
      return Error(HCCL_E_REMOTE, "link establishment: a peer left or died ({})", st.message());
    }
    return st;
  }
  for (uint32_t r = 0; r < size(); ++r) {
    if ((*cards)[r].magic != transport::RankCard::kMagic) {
      return Error(HCCL_E_INTERNAL, "link establishment: rank {} published no valid card", r);
    }
  }
  return Status::Ok();
}

Status Communicator::EstablishLinks(const std::shared_ptr<Device> &device,
                                    std::chrono::seconds timeout) {
  std::lock_guard lock(mutex_);
  if (device_) {
    return Status::Ok();
  }
  const auto start = std::chrono::steady_clock::now();
  const Device::DomainId domain = DomainId();
  HZC_RETURN_IF_ERROR(device->JoinDomain(domain, rank_, size()));
  auto leave = [&] {
    if (Status st = device->LeaveDomain(domain, rank_); !st.ok()) {
      LogWarn("link establishment: {}", st.message());
    }
  };
  // Key 0 carries each rank's card (pid, generation page); verbs endpoints use further keys.
  transport::RankCard card;
  card.pid = static_cast<uint32_t>(getpid());
  if (auto generation = transport::Generation::Process(); generation.ok()) {
    card.generation_fd = (*generation)->fd();
  } else {
    LogInfo("link establishment: {}; peers will list our ranges on every lookup",
            generation.status().message());
  }
  if (Status st = device->BoardPut(domain, rank_, 0, &card, sizeof(card)); !st.ok()) {
    leave();
    return st;
  }
  using std::chrono::milliseconds;
  std::vector<transport::RankCard> cards(size());
  if (Status st = WaitForCards(*device, domain, start + timeout, timeout, &cards); !st.ok()) {
    leave();
    return st;
  }
  // Every rank has arrived. The RDMA link setup that follows is work every rank does at once
  // (device, queue pairs, two board rounds); it gets a full timeout of its own, so that a rank
  // arriving just in time does not leave the ranks that waited for it without time for it.
  verbs::LinkOptions options = verbs::LinkOptions::FromEnvironment();
  options.timeout = std::chrono::duration_cast<milliseconds>(timeout);
  auto links = verbs::Links::Establish(*device, domain, rank_, size(), options);
  if (!links.ok()) {
    leave();  // Establish released what it made
    const Status &failed = links.status();
    if (failed.code() == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "link establishment: {} (HCCL_CONNECT_TIMEOUT={}s after every rank had "
                   "called HcclCommSetMemoryRange)",
                   failed.message(), timeout.count());
    }
    return Error(failed.code(), "link establishment: {}", failed.message());
  }
  device_ = device;
  peer_memory_ = std::make_unique<transport::PeerMemory>(device, domain, rank_, std::move(cards));
  links_ = std::move(*links);
  LogDebug("link establishment: rank {} of {} linked ({})", rank_, size(),
           links_
               ? fmt::format("rdma on {} port {}", links_->port().device, links_->port().port_num)
               : std::string("kernel-only"));
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
  NoteProcessRank(comm->rank());
  comms_.emplace(key, std::move(comm));
  return reinterpret_cast<HcclComm>(key);
}

Expected<std::shared_ptr<Communicator>> CommRegistry::Get(HcclComm handle) const {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  SetLogRank(it->second->rank());  // the calling thread's log lines name this rank
  return it->second;
}

Status CommRegistry::Remove(HcclComm handle) {
  // Destroyed after the lock is released: tearing down links, memory regions and the domain
  // must not stall every other call of the process.
  std::shared_ptr<Communicator> doomed;
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  SetLogRank(it->second->rank());
  if (it->second.use_count() > 1) {
    return Error(HCCL_E_AGAIN, "comm={}: a call on it is in progress", handle);
  }
  doomed = std::move(it->second);
  comms_.erase(it);
  return Status::Ok();
}

size_t CommRegistry::Count() const {
  std::lock_guard lock(mutex_);
  return comms_.size();
}

}  // namespace hzc
