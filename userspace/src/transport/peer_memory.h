// SPDX-License-Identifier: Apache-2.0
// Peer access to activated memory: a communicator's cache of its peers' ranges, their
// activations and the local mappings of their windows in /dev/hzc.
//
// For the collectives: once HcclCommSetMemoryRange has linked a communicator,
//   PeerMemory *pm = comm->peer_memory();
//   auto p = pm->Translate(peer, peer_va, len);     // local pointer to the peer's bytes
//   auto activations = pm->Activations(peer);       // what the peer has activated
// A pointer from Translate stays usable until the peer deactivates or unsets that memory or
// the communicator is destroyed; a later access then raises SIGBUS (revoked by the kernel)
// or SIGSEGV (window unmapped). Peer mappings are VM_PFNMAP: they cannot be used as buffers
// of process_vm_readv, ibv_reg_mr or O_DIRECT I/O.
//
// Over the memfd transport (HZC_TRANSPORT, transport/memfd_transport.h) the same calls map the
// peers' memfds instead of windows of /dev/hzc; a withdrawn mapping faults with SIGSEGV.
//
// Invalidation (kernel transport): each peer publishes its generation page (transport/generation.h)
// at link establishment. Translate trusts the cache while the peer's generation is the one the
// cache was listed at and the peer process lives; otherwise (and on every miss) it lists the peer's
// ranges and activations again, unmapping the windows of ranges that are gone. Without a generation
// page (pidfd_getfd refused) every Translate lists again.
#pragma once

#include <linux/hzc.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/status.h"
#include "base/unique_mapping.h"
#include "device/device.h"
#include "transport/generation.h"

namespace hzc::transport {

// What a rank publishes about itself at link establishment (board key 0).
struct RankCard {
  static constexpr uint32_t kMagic = 0x687a6372;  // "hzcr"
  uint32_t magic = kMagic;
  uint32_t pid = 0;
  int32_t generation_fd = -1;  // -1: no generation page
  uint32_t reserved = 0;
};
static_assert(sizeof(RankCard) == 16);

// A peer's activation: [va, va + size) in the peer's address space, with the cookie it
// was activated with (core/activation_cookie.h).
struct PeerActivation {
  uintptr_t va = 0;
  size_t size = 0;
  uint64_t cookie = 0;
};

class PeerMemory {
 public:
  PeerMemory(std::shared_ptr<Device> device, Device::DomainId domain, uint32_t rank,
             std::vector<RankCard> cards);
  // Over the memfd transport (transport/memfd_transport.h) instead: the ranks' processes @pids.
  // Mappings are the process's (MemfdImport), shared with its other communicators.
  PeerMemory(uint32_t rank, const std::vector<uint32_t> &pids);
  ~PeerMemory();  // unmaps every window
  PeerMemory(const PeerMemory &) = delete;
  PeerMemory &operator=(const PeerMemory &) = delete;

  // A local pointer to [peer_va, peer_va + len) of rank @peer, which must lie in activated
  // memory of the peer (adjacent activations count as one). For the caller's own rank (or a
  // peer in the same process) that is @peer_va itself. HCCL_E_PARA for a bad rank or memory
  // that is not activated, HCCL_E_REMOTE when the peer died or the domain broke.
  Expected<void *> Translate(uint32_t peer, uintptr_t peer_va, size_t len);

  // The one activation of rank @peer that contains [peer_va, peer_va + len) (adjacent
  // activations are not merged), from the cache when it is current, else listed afresh.
  // Errors as Translate.
  Expected<PeerActivation> Activation(uint32_t peer, uintptr_t peer_va, size_t len);

  // Every activation of rank @peer, sorted by address (always listed afresh).
  Expected<std::vector<PeerActivation>> Activations(uint32_t peer);

  // Number of peer windows mapped now (for tests).
  size_t MappedWindows() const;

 private:
  struct CachedRange {
    hzc_range_desc desc{};
    std::vector<hzc_activation_desc> activations;
    UniqueMapping window;  // mapped on first use
  };
  // What this process knows of one peer: its generation page and its cached listing.
  struct PeerView {
    bool attached = false;  // generation page looked for
    std::unique_ptr<PeerGeneration> generation;
    bool listed = false;                      // ranges hold a listing taken at @listed_at
    uint64_t listed_at = 0;                   // generation of that listing
    std::optional<uint64_t> now;              // generation read by the last Prepare
    std::map<uintptr_t, CachedRange> ranges;  // by base
  };

  bool SameProcess(uint32_t peer) const;
  // HCCL_E_PARA for a bad rank, length or wrapping range.
  Status CheckArgs(uint32_t peer, uintptr_t va, size_t len) const;
  // Under mutex_: attach the peer's generation page, read its generation into p.now and say
  // whether the cached listing is current (false: list again before trusting it).
  // HCCL_E_REMOTE when the peer process has exited.
  Expected<bool> Current(uint32_t peer, PeerView &p);
  // List @peer's ranges and activations again and remember at which generation.
  Status Relist(uint32_t peer, PeerView &p);
  Status Refresh(uint32_t peer, PeerView &p);
  // nullptr when [va, va + len) is not in activated memory of the cached ranges.
  Expected<void *> Lookup(uint32_t peer, PeerView &p, uintptr_t va, size_t len);
  // Under mutex_: @find(the peer's PeerView) on the cached listing when it is current and @find
  // finds something (a non-null T *), else on a fresh listing. Errors of Current, Relist and @find.
  template <typename T, typename Find>
  Expected<T *> Search(uint32_t peer, Find find);
  // The cached activation containing [va, va + len), or nullptr.
  static const hzc_activation_desc *FindActivation(const PeerView &p, uintptr_t va, size_t len);
  void Drop(PeerView &p);
  // The memfd transport's Translate and Activations.
  Expected<void *> MemfdTranslate(uint32_t peer, uintptr_t va, size_t len);
  Expected<std::vector<PeerActivation>> MemfdActivations(uint32_t peer);

  const std::shared_ptr<Device> device_;
  const Device::DomainId domain_;
  const uint32_t rank_;
  const std::vector<RankCard> cards_;
  const bool memfd_ = false;

  mutable std::mutex mutex_;
  std::vector<PeerView> peers_;
};

}  // namespace hzc::transport
