// SPDX-License-Identifier: Apache-2.0
// Communicators and the registry that validates their handles.
#pragma once

#include <hccl/hccl_types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/group.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_info.h"
#include "core/comm_options.h"
#include "transport/transport.h"
#include "verbs/links.h"

namespace hzc {

class Communicator {
 public:
  Communicator(bootstrap::UniqueId id, uint32_t rank, std::vector<bootstrap::RankIdentity> ranks,
               CommOptions options = {});
  ~Communicator();  // releases memory regions and links, leaves the kernel domain
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  uint64_t serial() const { return serial_; }
  const bootstrap::UniqueId &id() const { return id_; }
  uint32_t rank() const { return rank_; }
  uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }
  const std::vector<bootstrap::RankIdentity> &ranks() const { return ranks_; }
  // Number of distinct servers (host identities) among the ranks.
  uint32_t ServerCount() const;

  // The TCP connections to the other ranks (bootstrap/group.h; for a sub-communicator a view of
  // its parent's): set by the factories for a communicator that spans servers, before the
  // communicator is used; nullptr otherwise.
  void set_group(std::unique_ptr<bootstrap::Group> group) { group_ = std::move(group); }
  bootstrap::Group *group() const { return group_.get(); }

  const CommOptions &options() const { return options_; }
  // hcclCommName of the configuration, else "hzc-" and the unique id.
  std::string Name() const;
  // The staging buffer (hcclBufferSize, else HCCL_BUFFSIZE) in bytes.
  size_t StagingBytes() const;
  // How long a collective waits for the other ranks (hcclExecTimeOut, else HCCL_EXEC_TIMEOUT).
  std::chrono::seconds ExecTimeout() const;

  // The error of a collective that failed after its call returned or half-way
  // (HcclGetCommAsyncError); the first one recorded stays.
  void RecordAsyncError(HcclResult code);
  HcclResult AsyncError() const { return async_error_.load(); }

  // Calls of the communicator queued on streams that have not finished running (api/queued.h
  // counts them; a symmetric window is in use while there are any).
  void CountQueued(int delta) { queued_calls_ += delta; }
  int QueuedCalls() const { return queued_calls_.load(); }

  // Link establishment, done by the first HcclCommSetMemoryRange of the communicator (every
  // rank calls it together): connect the ranks over @transport (transport/transport.h; the
  // kernel transport joins the kernel domain and waits up to @timeout until every rank has
  // published its card), then set up the RDMA links the transport offers (verbs::Links) within
  // another @timeout. No RDMA device on some rank: kernel-only links. A failure releases
  // everything (which breaks the domain for the peers), so a later call starts afresh.
  // Idempotent.
  Status EstablishLinks(transport::Transport &transport, std::chrono::seconds timeout);
  bool linked() const;
  // The RDMA links; nullptr before link establishment or when the links are kernel-only.
  // Valid while the communicator lives (Links is thread-safe).
  verbs::Links *links() const;

  // RDMA registration of activated memory. RegisterMemory registers [va, va + len) with the
  // links and returns the activation cookie (transport/activation_cookie.h) to publish with it: 0
  // when the communicator has no RDMA links (nothing registered). Errors as
  // verbs::Links::Register; HCCL_E_PARA when a registration starts at @va already.
  Expected<uint64_t> RegisterMemory(uintptr_t va, size_t len);
  // Drop the registration made at @va; false when this communicator holds none there.
  bool DropMemory(uintptr_t va);
  // The registration containing [p, p + len), or nullptr. Stays usable after DropMemory
  // while the caller holds it.
  std::shared_ptr<const verbs::MemoryRegion> FindMemory(const void *p, size_t len) const;
  // Tag of rank @rank of this communicator in activation cookies.
  uint32_t CookieTag(uint32_t rank) const;

  // State of the collectives (coll/): made by their first call, destroyed with the
  // communicator. Access is serialised by the collectives layer.
  struct CollState {
    virtual ~CollState() = default;
  };
  std::unique_ptr<CollState> &coll_state() { return coll_state_; }
  // Guards coll_state() while the collectives make or look up their state.
  std::mutex &coll_state_mutex() { return coll_state_mutex_; }
  // coll_state() once made (stored under the mutex, with release): a call's lookup without it.
  std::atomic<CollState *> &coll_state_made() { return coll_state_made_; }
  // State of the point-to-point calls (coll/p2p.h), the same way.
  std::unique_ptr<CollState> &p2p_state() { return p2p_state_; }
  // p2p_state() once made (stored under the point-to-point calls' lock, with release).
  std::atomic<CollState *> &p2p_state_made() { return p2p_state_made_; }
  // State of the one-sided calls (coll/one_sided.h), made by the first of them under its
  // mutex, destroyed with the communicator.
  std::unique_ptr<CollState> &one_sided_state() { return one_sided_state_; }
  std::mutex &one_sided_mutex() { return one_sided_mutex_; }
  // Access to the peers' activated memory; nullptr until linked. Valid while the communicator
  // lives.
  transport::PeerMemory *peer_memory() const;

 private:
  const uint64_t serial_;
  const bootstrap::UniqueId id_;
  const uint32_t rank_;
  const std::vector<bootstrap::RankIdentity> ranks_;
  const uint32_t servers_;  // distinct hosts among ranks_ (every call asks)
  // Over the memfd transport, the processes of the other ranks of this host, taken when the
  // communicator was made (transport::LinkRequest::processes); the link takes them.
  std::vector<bootstrap::PeerProcess> processes_;
  const CommOptions options_;
  std::atomic<HcclResult> async_error_{HCCL_SUCCESS};
  std::atomic<int> queued_calls_{0};
  std::unique_ptr<bootstrap::Group> group_;
  // The communicator's 128-bit id as the transport's (the kernel domain's) id.
  std::array<uint64_t, 2> DomainId() const;

  std::mutex coll_state_mutex_;
  std::unique_ptr<CollState> coll_state_;
  std::atomic<CollState *> coll_state_made_{nullptr};
  std::unique_ptr<CollState> p2p_state_;
  std::atomic<CollState *> p2p_state_made_{nullptr};
  std::mutex one_sided_mutex_;
  std::unique_ptr<CollState> one_sided_state_;

  mutable std::mutex mutex_;
  std::unique_ptr<transport::Link> link_;  // set once linked
  std::unique_ptr<verbs::Links> links_;    // set once linked, unless kernel-only

  // Registrations of activated memory by start address. Shared so that a transfer in progress
  // keeps its registration alive when the memory is deactivated meanwhile. A lock of its own:
  // DropMemory (on a deactivation, which may name another communicator) never waits for a
  // link establishment in progress.
  mutable std::mutex memory_mutex_;
  std::map<uintptr_t, std::shared_ptr<const verbs::MemoryRegion>> memory_;
};

// Live communicators by handle. Handles are opaque values never reused, so a destroyed or
// foreign handle is an error and never another communicator.
//
// Every call on a communicator holds it (Get) from its checks until it returns, and a call
// queued on a stream holds it until the stream has run it (api/queued.h). HcclCommDestroy
// (Remove) first closes the handle, so that calls which start from then on are refused, then
// waits for the holds to end, and only then releases the communicator: a call in progress, in
// another thread or queued on a stream, never sees it freed.
class CommRegistry {
 public:
  static CommRegistry &Process();

  HcclComm Add(std::shared_ptr<Communicator> comm);
  // The communicator behind @handle, held until the returned pointer (and every copy of it)
  // is gone. HCCL_E_PARA for a handle that is not a live communicator: never made here,
  // destroyed, or being destroyed.
  Expected<std::shared_ptr<Communicator>> Get(HcclComm handle) const;
  // HcclCommDestroy: close @handle (Get refuses it from now on), wait until no call holds the
  // communicator any more, at most its ExecTimeout() (hcclExecTimeOut, else
  // HCCL_EXEC_TIMEOUT), then release it and everything it holds, and store its serial in
  // *@serial (if not null). HCCL_E_PARA for a handle that is not a live communicator or that
  // another thread is destroying at the moment. HCCL_E_AGAIN when calls still hold it after
  // that wait: the handle stays closed, nothing is released, and a later Remove waits again.
  Status Remove(HcclComm handle, uint64_t *serial = nullptr);
  // Communicators in the registry: live ones and closed ones whose destroy gave up waiting.
  size_t Count() const;

 private:
  struct Holds;
  struct Entry {
    std::shared_ptr<Communicator> comm;  // owns the communicator
    // What Get hands out: the same communicator under a count of its own, whose end
    // Holds::Release signals (the registry keeps one until a destroy begins). Empty once closed.
    std::shared_ptr<Communicator> handed;
    std::weak_ptr<Communicator> watch;  // @handed's count, for the log of a destroy that gives up
    std::shared_ptr<Holds> holds;
    bool destroying = false;  // a Remove is waiting for the holds to end
  };

  // Close the entry of @handle for a Remove: its holds, its wait limit, the registry's own hold.
  struct Closing {
    std::shared_ptr<Holds> holds;
    std::weak_ptr<Communicator> watch;
    std::chrono::seconds timeout{};
    std::shared_ptr<Communicator> own;  // dropped by the caller, outside the lock
  };
  Expected<Closing> Close(HcclComm handle);

  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> comms_;
  uint64_t made_ = 0;
};

}  // namespace hzc
