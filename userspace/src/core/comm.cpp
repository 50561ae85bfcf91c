// SPDX-License-Identifier: Apache-2.0
#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "base/config.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "bootstrap/auth.h"
#include "transport/activation_cookie.h"

namespace hzc {

namespace {

std::atomic<uint64_t> g_serial{0};

constexpr uintptr_t kHandleBase = uintptr_t{0x43} << 40;
constexpr uintptr_t kHandleStride = 0x40;

uint32_t CountServers(const std::vector<bootstrap::RankIdentity> &ranks) {
  std::set<std::string> hosts;
  for (const auto &p : ranks) {
    hosts.insert(p.host);
  }
  return static_cast<uint32_t>(hosts.size());
}

}  // namespace

Communicator::Communicator(bootstrap::UniqueId id, uint32_t rank,
                           std::vector<bootstrap::RankIdentity> ranks, CommOptions options)
    : serial_(++g_serial),
      id_(id),
      rank_(rank),
      ranks_(std::move(ranks)),
      servers_(CountServers(ranks_)),
      options_(std::move(options)) {
  // Only the memfd transport reaches peers through their processes; the kernel one holds none.
  auto kind = transport::Chosen();
  if (!kind.ok() || *kind != transport::Kind::kMemfd || rank_ >= ranks_.size()) {
    return;
  }
  processes_.resize(ranks_.size());
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (r != rank_ && ranks_[r].host == ranks_[rank_].host) {
      // One that has exited already is left to the link, which names it.
      if (auto p = bootstrap::PeerProcess::Open(static_cast<pid_t>(ranks_[r].pid)); p.ok()) {
        processes_[r] = std::move(*p);
      }
    }
  }
}

std::string Communicator::Name() const {
  return options_.name.empty() ? "hzc-" + bootstrap::PublicId(id_) : options_.name;
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
  coll_state_.reset();       // the collectives may hold pointers into peer windows
  p2p_state_.reset();        // and the point-to-point channels
  one_sided_state_.reset();  // its registrations and queue pairs, before the group goes
  memory_.clear();           // deregister before the links go (never waits for peers)
  links_.reset();
  link_.reset();  // unmaps peer windows, then leaves the kernel domain
}

std::array<uint64_t, 2> Communicator::DomainId() const {
  std::array<uint64_t, 2> id{};
  std::memcpy(id.data(), id_.data(), sizeof(id));
  return id;
}

bool Communicator::linked() const {
  std::lock_guard lock(mutex_);
  return link_ != nullptr;
}

transport::PeerMemory *Communicator::peer_memory() const {
  std::lock_guard lock(mutex_);
  return link_ ? &link_->peers() : nullptr;
}

verbs::Links *Communicator::links() const {
  std::lock_guard lock(mutex_);
  return links_.get();
}

uint32_t Communicator::CookieTag(uint32_t rank) const {
  return transport::ActivationCookie::Tag(DomainId(), rank);
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
  return transport::ActivationCookie::Encode(CookieTag(rank_), rkey);
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

Status Communicator::EstablishLinks(transport::Transport &transport, std::chrono::seconds timeout) {
  std::lock_guard lock(mutex_);
  if (link_) {
    return Status::Ok();
  }
  std::vector<uint32_t> pids;
  for (const auto &r : ranks_) {
    pids.push_back(r.pid);
  }
  auto link = transport.Connect({.id = DomainId(),
                                 .rank = rank_,
                                 .pids = std::move(pids),
                                 .processes = std::move(processes_),
                                 .timeout = timeout});
  if (!link.ok()) {
    return link.status();
  }
  // Every rank has arrived. The RDMA link setup that follows is work every rank does at once
  // (device, queue pairs, two board rounds); it gets a full timeout of its own, so that a rank
  // arriving just in time does not leave the ranks that waited for it without time for it.
  verbs::LinkOptions options = verbs::LinkOptions::FromEnvironment();
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  auto links = (*link)->Rdma(options);
  if (!links.ok()) {  // the link goes with its domain; Rdma released what it made
    const Status &failed = links.status();
    if (failed.code() == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "link establishment: {} (HCCL_CONNECT_TIMEOUT={}s after every rank had "
                   "called HcclCommSetMemoryRange)",
                   failed.message(), timeout.count());
    }
    return Error(failed.code(), "link establishment: {}", failed.message());
  }
  link_ = std::move(*link);
  links_ = std::move(*links);
  LogDebug("link establishment: rank {} of {} linked ({} transport, {})", rank_, size(),
           transport::KindName(transport.kind()),
           links_
               ? fmt::format("rdma on {} port {}", links_->port().device, links_->port().port_num)
               : std::string("no rdma links"));
  return Status::Ok();
}

uint32_t Communicator::ServerCount() const {
  return servers_;
}

// The holds of one communicator (CommRegistry::Entry::handed): Release runs when the last one
// ends, which no later Get can undo (the registry gave up its own before waiting).
struct CommRegistry::Holds {
  std::mutex mutex;
  std::condition_variable ended;
  bool released = false;

  void Release() {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    ended.notify_all();
  }
  // Whether the holds ended within @timeout.
  bool WaitReleased(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex);
    return ended.wait_for(lock, timeout, [this] { return released; });
  }
};

CommRegistry &CommRegistry::Process() {
  static CommRegistry *const registry = new CommRegistry();
  return *registry;
}

HcclComm CommRegistry::Add(std::shared_ptr<Communicator> comm) {
  auto holds = std::make_shared<Holds>();
  // Owns nothing: @comm stays with the entry until every copy of this one is gone.
  std::shared_ptr<Communicator> handed(comm.get(), [holds](Communicator *) { holds->Release(); });
  std::lock_guard lock(mutex_);
  const uintptr_t key = kHandleBase + (++made_) * kHandleStride;
  NoteProcessRank(comm->rank());
  std::weak_ptr<Communicator> watch = handed;
  comms_.emplace(key, Entry{.comm = std::move(comm),
                            .handed = std::move(handed),
                            .watch = std::move(watch),
                            .holds = std::move(holds)});
  return reinterpret_cast<HcclComm>(key);
}

Expected<std::shared_ptr<Communicator>> CommRegistry::Get(HcclComm handle) const {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  SetLogRank(it->second.comm->rank());  // the calling thread's log lines name this rank
  if (!it->second.handed) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (HcclCommDestroy has begun on it)",
                 handle);
  }
  return it->second.handed;
}

Expected<CommRegistry::Closing> CommRegistry::Close(HcclComm handle) {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comms_.end()) {
    return Error(HCCL_E_PARA, "comm={}: not a live communicator (destroyed or foreign)", handle);
  }
  Entry &e = it->second;
  SetLogRank(e.comm->rank());
  if (e.destroying) {
    return Error(HCCL_E_PARA, "comm={}: another thread is destroying it (HcclCommDestroy)", handle);
  }
  e.destroying = true;
  return Closing{.holds = e.holds,
                 .watch = e.watch,
                 .timeout = e.comm->ExecTimeout(),
                 .own = std::move(e.handed)};  // from here on Get refuses the handle
}

Status CommRegistry::Remove(HcclComm handle, uint64_t *serial) {
  auto closing = Close(handle);
  if (!closing.ok()) {
    return closing.status();
  }
  closing->own.reset();  // the registry's own hold: when no call holds it, the wait ends at once
  const uintptr_t key = reinterpret_cast<uintptr_t>(handle);
  if (!closing->holds->WaitReleased(closing->timeout)) {
    const long held = closing->watch.use_count();
    {
      std::lock_guard lock(mutex_);
      comms_.at(key).destroying = false;  // a later destroy waits again
    }
    // HCCL_E_AGAIN rather than HCCL_E_TIMEOUT: CANN documents two outcomes of HcclCommDestroy,
    // HCCL_SUCCESS and, while a call of another thread occupies the communicator, HCCL_E_AGAIN
    // ("comm is in use, please try again later"). A destroy that gave up waiting is that case:
    // nothing was released and trying again later is the remedy, so programs that handle
    // CANN's code handle this one. HCCL_E_TIMEOUT is what a call returns when peers do not
    // come, and would say that the destroy failed towards the peers, which it does not.
    return Error(HCCL_E_AGAIN,
                 "comm={}: {} call(s) on it still running or queued on a stream after waiting {} s "
                 "(hcclExecTimeOut, else HCCL_EXEC_TIMEOUT); nothing was released and the handle "
                 "takes no new calls: call HcclCommDestroy again",
                 handle, held, closing->timeout.count());
  }
  // Destroyed after the lock is released: tearing down links, memory regions and the domain
  // must not stall every other call of the process.
  std::shared_ptr<Communicator> doomed;
  {
    std::lock_guard lock(mutex_);
    auto it = comms_.find(key);
    doomed = std::move(it->second.comm);
    comms_.erase(it);
  }
  if (serial != nullptr) {
    *serial = doomed->serial();
  }
  return Status::Ok();
}

size_t CommRegistry::Count() const {
  std::lock_guard lock(mutex_);
  return comms_.size();
}

}  // namespace hzc
