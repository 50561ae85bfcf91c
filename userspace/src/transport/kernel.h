// SPDX-License-Identifier: Apache-2.0
// The kernel transport: hzc.ko publishes, pins and revokes; peers map windows of /dev/hzc.
//
// A communicator's ranks join a kernel domain (the communicator's id) and publish their card
// on its board (key 0: pid and generation page); RDMA link setup uses further keys. A peer's
// memory is reached through the window of each of its ranges (mapped on first use).
//
// Invalidation: each peer publishes its generation page (transport/generation.h) on its card.
// Translate trusts the cache while the peer's generation is the one the cache was listed at and
// the peer process lives; otherwise (and on every miss) it lists the peer's ranges and
// activations again, unmapping the windows of ranges that are gone. Without a generation page
// (pidfd_getfd refused) every Translate lists again.
#pragma once

#include <sys/types.h>

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
#include "transport/transport.h"

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

class KernelTransport final : public Transport {
 public:
  Kind kind() const override { return Kind::kKernel; }
  Status AddRange(uintptr_t base, size_t size) override;
  Status RemoveRange(uintptr_t base) override;
  Status Activate(uintptr_t va, size_t size, uint64_t cookie) override;
  Status Deactivate(uintptr_t va) override;
  bool Withdrawn(const Status &st) const override { return st.ok(); }
  // Join the domain, publish this rank's card and wait for every rank's. A failure leaves the
  // domain again (which breaks it for the peers), so a later call starts afresh.
  Expected<std::unique_ptr<Link>> Connect(LinkRequest request) override;
};

// The peers' memory through a kernel domain: a cache of each peer's ranges, their activations
// and the local mappings of their windows.
class KernelPeerMemory final : public PeerMemory {
 public:
  KernelPeerMemory(std::shared_ptr<Device> device, Device::DomainId domain, uint32_t rank,
                   std::vector<RankCard> cards);
  ~KernelPeerMemory() override;  // unmaps every window

  Expected<void *> Translate(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<PeerActivation> Activation(uint32_t peer, uintptr_t peer_va, size_t len) override;
  Expected<std::vector<PeerActivation>> Activations(uint32_t peer) override;
  size_t MappedWindows() const override;

 private:
  struct CachedRange {
    Device::RangeDesc desc{};
    std::vector<Device::ActivationDesc> activations;
    UniqueMapping window;  // mapped on first use
  };
  // What this process knows of one peer: its generation page and its cached listing.
  struct PeerView {
    bool attached = false;  // generation page looked for
    std::unique_ptr<PeerGeneration> generation;
    bool listed = false;                      // ranges hold a listing taken at @listed_at
    uint64_t listed_at = 0;                   // generation of that listing
    std::optional<uint64_t> now;              // generation read by the last Current
    std::map<uintptr_t, CachedRange> ranges;  // by base
  };

  bool SameProcess(uint32_t peer) const;
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
  static const Device::ActivationDesc *FindActivation(const PeerView &p, uintptr_t va, size_t len);
  void Drop(PeerView &p);

  const std::shared_ptr<Device> device_;
  const Device::DomainId domain_;
  const uint32_t rank_;
  const std::vector<RankCard> cards_;

  mutable std::mutex mutex_;
  std::vector<PeerView> peers_;
};

}  // namespace hzc::transport
