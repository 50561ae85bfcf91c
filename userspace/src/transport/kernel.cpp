// SPDX-License-Identifier: Apache-2.0
#include "transport/kernel.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "base/log.h"
#include "base/process_id.h"
#include "base/rank_list.h"

namespace hzc::transport {

KernelPeerMemory::KernelPeerMemory(std::shared_ptr<Device> device, Device::DomainId domain,
                                   uint32_t rank, std::vector<RankCard> cards)
    : device_(std::move(device)),
      domain_(domain),
      rank_(rank),
      cards_(std::move(cards)),
      peers_(cards_.size()) {}

KernelPeerMemory::~KernelPeerMemory() = default;

bool KernelPeerMemory::SameProcess(uint32_t peer) const {
  return peer == rank_ || cards_[peer].pid == static_cast<uint32_t>(ProcessId());
}

void KernelPeerMemory::Drop(PeerView &p) {
  p.ranges.clear();  // unmaps their windows
  p.listed = false;
}

Status KernelPeerMemory::Refresh(uint32_t peer, PeerView &p) {
  auto listed = device_->ListRanges(domain_, rank_, peer);
  if (!listed.ok()) {
    Drop(p);
    return listed.status();
  }
  std::map<uintptr_t, CachedRange> next;
  for (const Device::RangeDesc &d : *listed) {
    CachedRange r{.desc = d, .activations = {}, .window = {}};
    auto old = p.ranges.find(d.base);
    if (old != p.ranges.end() && old->second.desc.id == d.id) {
      r.window = std::move(old->second.window);  // the same range: keep its window
    }
    if (d.nr_activations > 0) {
      auto acts = device_->ListActivations(domain_, rank_, peer, d.id);
      if (!acts.ok() && acts.status().code() != HCCL_E_NOT_FOUND) {
        Drop(p);  // the windows of r and next go with them
        return acts.status();
      }
      if (acts.ok()) {
        r.activations = std::move(*acts);
      }  // else the range went away after the listing: keep it without activations
    }
    next.emplace(d.base, std::move(r));
  }
  Drop(p);  // ranges the peer no longer has (and windows not carried over)
  p.ranges = std::move(next);
  p.listed = true;
  return Status::Ok();
}

Expected<void *> KernelPeerMemory::Lookup(uint32_t peer, PeerView &p, uintptr_t va, size_t len) {
  auto it = p.ranges.upper_bound(va);
  if (it == p.ranges.begin()) {
    return static_cast<void *>(nullptr);
  }
  --it;
  CachedRange &r = it->second;
  const uintptr_t base = r.desc.base;
  if (va - base >= r.desc.length || len > r.desc.length - (va - base)) {
    return static_cast<void *>(nullptr);
  }
  // Walk the activations from the one containing va through adjacent ones.
  uintptr_t covered = va;
  const uintptr_t end = va + len;
  for (const Device::ActivationDesc &a : r.activations) {
    if (a.va > covered) {
      break;
    }
    if (a.va + a.length > covered) {
      covered = a.va + a.length;
      if (covered >= end) {
        break;
      }
    }
  }
  if (covered < end) {
    return static_cast<void *>(nullptr);
  }
  if (SameProcess(peer)) {
    return reinterpret_cast<void *>(va);
  }
  if (!r.window.valid()) {
    auto mapped = device_->MapPeerWindow(r.desc.mmap_offset, r.desc.length);
    if (!mapped.ok()) {
      return mapped.status();
    }
    r.window = UniqueMapping(*mapped, r.desc.length);
    LogDebug("peer memory: mapped range {:#x} (+{:#x}) of rank {} at {}", base, r.desc.length, peer,
             r.window.get());
  }
  return static_cast<void *>(r.window.as<char>() + (va - base));
}

Expected<bool> KernelPeerMemory::Current(uint32_t peer, PeerView &p) {
  const bool same = SameProcess(peer);
  std::shared_ptr<Generation> own;
  if (same) {
    if (auto g = Generation::Process(); g.ok()) {
      own = *g;
    }
  } else if (!p.attached) {
    p.attached = true;
    const RankCard &card = cards_[peer];
    if (card.generation_fd >= 0) {
      auto g = PeerGeneration::Attach(static_cast<pid_t>(card.pid), card.generation_fd);
      if (g.ok()) {
        p.generation = std::move(*g);
      } else {
        LogInfo("peer memory: rank {}: {}; its ranges are listed on every lookup", peer,
                g.status().message());
      }
    }
  }
  // The generation is read before listing, so a change during the listing is seen next time.
  p.now.reset();
  if (own) {
    p.now = own->Load();
  } else if (p.generation) {
    if (!p.generation->Alive()) {
      Drop(p);
      return Error(HCCL_E_REMOTE, "rank {} (pid {}) has exited", peer, cards_[peer].pid);
    }
    p.now = p.generation->Load();
  }
  return p.now && p.listed && p.listed_at == *p.now;
}

Status KernelPeerMemory::Relist(uint32_t peer, PeerView &p) {
  HZC_RETURN_IF_ERROR(Refresh(peer, p));
  p.listed_at = p.now.value_or(0);
  if (!p.now) {
    p.listed = false;  // nothing tells when this listing goes stale
  }
  return Status::Ok();
}

template <typename T, typename Find>
Expected<T *> KernelPeerMemory::Search(uint32_t peer, Find find) {
  PeerView &p = peers_[peer];
  auto current = Current(peer, p);
  if (!current.ok()) {
    return current.status();
  }
  if (*current) {
    Expected<T *> hit = find(p);
    if (!hit.ok() || *hit != nullptr) {
      return hit;
    }
  }
  HZC_RETURN_IF_ERROR(Relist(peer, p));
  return find(p);
}

Expected<void *> KernelPeerMemory::Translate(uint32_t peer, uintptr_t peer_va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckPeerArgs(peer, cards_.size(), peer_va, len));
  std::lock_guard lock(mutex_);
  auto hit = Search<void>(peer, [&](PeerView &p) { return Lookup(peer, p, peer_va, len); });
  if (hit.ok() && *hit == nullptr) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of rank {}", peer_va, len,
                 peer);
  }
  return hit;
}

const Device::ActivationDesc *KernelPeerMemory::FindActivation(const PeerView &p, uintptr_t va,
                                                               size_t len) {
  auto it = p.ranges.upper_bound(va);
  if (it == p.ranges.begin()) {
    return nullptr;
  }
  --it;
  // Activations are sorted by va and do not overlap: the last one starting at or below va is
  // the only candidate.
  const auto &acts = it->second.activations;
  auto a = std::upper_bound(acts.begin(), acts.end(), va,
                            [](uintptr_t v, const Device::ActivationDesc &d) { return v < d.va; });
  if (a == acts.begin()) {
    return nullptr;
  }
  --a;
  if (va - a->va >= a->length || len > a->length - (va - a->va)) {
    return nullptr;
  }
  return &*a;
}

Expected<PeerActivation> KernelPeerMemory::Activation(uint32_t peer, uintptr_t peer_va,
                                                      size_t len) {
  HZC_RETURN_IF_ERROR(CheckPeerArgs(peer, cards_.size(), peer_va, len));
  std::lock_guard lock(mutex_);
  auto a = Search<const Device::ActivationDesc>(
      peer, [&](const PeerView &p) -> Expected<const Device::ActivationDesc *> {
        return FindActivation(p, peer_va, len);
      });
  if (!a.ok()) {
    return a.status();
  }
  if (*a == nullptr) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not inside one activation of rank {}", peer_va,
                 len, peer);
  }
  return PeerActivation{.va = (*a)->va, .size = (*a)->length, .cookie = (*a)->cookie};
}

Expected<std::vector<PeerActivation>> KernelPeerMemory::Activations(uint32_t peer) {
  HZC_RETURN_IF_ERROR(CheckPeerRank(peer, cards_.size()));
  std::lock_guard lock(mutex_);
  PeerView &p = peers_[peer];
  // A listing taken now is not tied to a generation: the next Translate lists again.
  HZC_RETURN_IF_ERROR(Refresh(peer, p));
  p.listed = false;
  std::vector<PeerActivation> out;
  for (const auto &[base, r] : p.ranges) {
    for (const Device::ActivationDesc &a : r.activations) {
      out.push_back(PeerActivation{.va = a.va, .size = a.length, .cookie = a.cookie});
    }
  }
  return out;
}

size_t KernelPeerMemory::MappedWindows() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const PeerView &p : peers_) {
    for (const auto &[base, r] : p.ranges) {
      n += r.window.valid() ? 1 : 0;
    }
  }
  return n;
}

namespace {

// Why a call that pinned nothing failed with HCCL_E_MEMORY while the activation also has an RDMA
// registration (@cookie != 0).
Status ExplainPinFailure(Status st, uint64_t cookie) {
  if (st.code() == HCCL_E_MEMORY && cookie != 0) {
    return Error(st.code(),
                 "{}; the RDMA registration of the activation pins it as well, so activated memory "
                 "counts twice against RLIMIT_MEMLOCK",
                 st.message());
  }
  return st;
}

// @st, after moving the process's generation when it succeeded: the peers' cached views of
// this process's activations are stale.
Status Changed(Status st) {
  if (st.ok()) {
    Generation::BumpProcess();
  }
  return st;
}

// Rank @rank's membership of kernel domain @domain: the board, the peers' memory, and leaving
// the domain when destroyed (after the peers' windows are unmapped).
class KernelLink final : public Link {
 public:
  KernelLink(std::shared_ptr<Device> device, Device::DomainId domain, uint32_t rank,
             std::vector<RankCard> cards)
      : device_(std::move(device)),
        domain_(domain),
        rank_(rank),
        nranks_(static_cast<uint32_t>(cards.size())),
        peers_(std::make_unique<KernelPeerMemory>(device_, domain_, rank_, std::move(cards))) {}
  ~KernelLink() override {
    peers_.reset();
    if (Status st = device_->LeaveDomain(domain_, rank_); !st.ok()) {
      LogWarn("leaving the communicator's kernel domain: {}", st.message());
    }
  }
  KernelLink(const KernelLink &) = delete;
  KernelLink &operator=(const KernelLink &) = delete;

  PeerMemory &peers() override { return *peers_; }
  Expected<std::unique_ptr<verbs::Links>> Rdma(const verbs::LinkOptions &options) override {
    return verbs::Links::Establish(*device_, domain_, rank_, nranks_, options);
  }

 private:
  const std::shared_ptr<Device> device_;
  const Device::DomainId domain_;
  const uint32_t rank_;
  const uint32_t nranks_;
  std::unique_ptr<KernelPeerMemory> peers_;
};

// The error of a wait for the cards that failed with @st while ranks @missing were missing.
Status CardsError(const Status &st, const std::vector<uint32_t> &missing, size_t nranks,
                  std::chrono::seconds timeout) {
  const std::string list = RankList(missing);
  if (st.code() == HCCL_E_TIMEOUT) {
    return Error(HCCL_E_TIMEOUT,
                 "link establishment: rank(s) {} of {} did not call HcclCommSetMemoryRange "
                 "within HCCL_CONNECT_TIMEOUT={}s",
                 list, nranks, timeout.count());
  }
  if (st.code() == HCCL_E_REMOTE && !missing.empty()) {
    return Error(HCCL_E_TIMEOUT,
                 "link establishment: rank(s) {} of {} did not call HcclCommSetMemoryRange "
                 "within HCCL_CONNECT_TIMEOUT={}s (another rank gave up waiting and left)",
                 list, nranks, timeout.count());
  }
  if (st.code() == HCCL_E_REMOTE) {
    return Error(HCCL_E_REMOTE, "link establishment: a peer left or died ({})", st.message());
  }
  return st;
}

// Every rank's card of @domain (board key 0), waited for until @deadline.
Expected<std::vector<RankCard>> WaitForCards(const Device &device, const Device::DomainId &domain,
                                             const LinkRequest &request,
                                             std::chrono::steady_clock::time_point deadline) {
  // Wait in slices, so that the ranks still missing are known if the domain breaks: a rank
  // whose timeout ran out a little earlier gives up waiting for them and leaves, which breaks
  // the domain for the others; they report the same timeout, not a failed peer.
  using std::chrono::milliseconds;
  constexpr milliseconds kSlice{200};
  const auto nranks = static_cast<uint32_t>(request.pids.size());
  std::vector<RankCard> cards(nranks);
  std::vector<uint32_t> missing, missing_now;
  Status st;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto wait = std::clamp(left, milliseconds(0), kSlice);
    st = device.BoardWait(domain, request.rank, nranks, 0, static_cast<uint32_t>(wait.count()),
                          &missing_now, cards.data(), sizeof(RankCard));
    if (st.code() != HCCL_E_TIMEOUT) {
      break;
    }
    missing = missing_now;
    if (left <= kSlice) {
      break;
    }
  }
  if (!st.ok()) {
    return CardsError(st, missing, nranks, request.timeout);
  }
  for (uint32_t r = 0; r < nranks; ++r) {
    if (cards[r].magic != RankCard::kMagic) {
      return Error(HCCL_E_INTERNAL, "link establishment: rank {} published no valid card", r);
    }
  }
  return cards;
}

// This process's card: its pid and, when it has one, its generation page.
RankCard OwnCard() {
  RankCard card;
  card.pid = static_cast<uint32_t>(ProcessId());
  if (auto generation = Generation::Process(); generation.ok()) {
    card.generation_fd = (*generation)->fd();
  } else {
    LogInfo("link establishment: {}; peers will list our ranges on every lookup",
            generation.status().message());
  }
  return card;
}

}  // namespace

Status KernelTransport::AddRange(uintptr_t base, size_t size) {
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  return (*device)->RegisterRange(base, size).status();
}

Status KernelTransport::RemoveRange(uintptr_t base) {
  auto device = Device::Process();
  return Changed(device.ok() ? (*device)->UnregisterRange(base) : device.status());
}

Status KernelTransport::Activate(uintptr_t va, size_t size, uint64_t cookie) {
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  return Changed(ExplainPinFailure((*device)->Activate(va, size, cookie), cookie));
}

Status KernelTransport::Deactivate(uintptr_t va) {
  auto device = Device::Process();
  return Changed(device.ok() ? (*device)->Deactivate(va) : device.status());
}

Expected<std::unique_ptr<Link>> KernelTransport::Connect(LinkRequest request) {
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  const auto deadline = std::chrono::steady_clock::now() + request.timeout;
  const Device::DomainId domain = request.id;
  const auto nranks = static_cast<uint32_t>(request.pids.size());
  HZC_RETURN_IF_ERROR((*device)->JoinDomain(domain, request.rank, nranks));
  const RankCard card = OwnCard();
  Status st = (*device)->BoardPut(domain, request.rank, 0, &card, sizeof(card));
  auto cards = st.ok() ? WaitForCards(**device, domain, request, deadline)
                       : Expected<std::vector<RankCard>>(st);
  if (!cards.ok()) {
    if (Status left = (*device)->LeaveDomain(domain, request.rank); !left.ok()) {
      LogWarn("link establishment: {}", left.message());
    }
    return cards.status();
  }
  return std::unique_ptr<Link>(
      std::make_unique<KernelLink>(*device, domain, request.rank, std::move(*cards)));
}

}  // namespace hzc::transport
