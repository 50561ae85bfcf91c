// SPDX-License-Identifier: Apache-2.0
#include "transport/peer_memory.h"

#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "transport/memfd_transport.h"

namespace hzc::transport {

PeerMemory::PeerMemory(std::shared_ptr<Device> device, Device::DomainId domain, uint32_t rank,
                       std::vector<RankCard> cards)
    : device_(std::move(device)),
      domain_(domain),
      rank_(rank),
      cards_(std::move(cards)),
      peers_(cards_.size()) {}

namespace {

std::vector<RankCard> PidCards(const std::vector<uint32_t> &pids) {
  std::vector<RankCard> cards(pids.size());
  for (size_t r = 0; r < pids.size(); ++r) {
    cards[r].pid = pids[r];
  }
  return cards;
}

// A memfd transport error about rank @peer (pid @pid): an exit is named as the kernel transport
// names it.
Status Named(const Status &st, uint32_t peer, pid_t pid) {
  if (st.code() == HCCL_E_REMOTE) {
    return Error(HCCL_E_REMOTE, "rank {} (pid {}) has exited", peer, pid);
  }
  return st;
}

}  // namespace

PeerMemory::PeerMemory(uint32_t rank, const std::vector<uint32_t> &pids)
    : domain_{}, rank_(rank), cards_(PidCards(pids)), memfd_(true), peers_(cards_.size()) {}

PeerMemory::~PeerMemory() = default;

Expected<void *> PeerMemory::MemfdTranslate(uint32_t peer, uintptr_t va, size_t len) {
  const auto pid = SameProcess(peer) ? ::getpid() : static_cast<pid_t>(cards_[peer].pid);
  auto &imp = MemfdImport::Process();
  if (Status st = imp.AttachProcess(pid); !st.ok()) {
    return Named(st, peer, pid);
  }
  auto p = imp.Translate(pid, va, len);
  if (!p.ok() && p.status().code() == HCCL_E_PARA) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of rank {}", va, len, peer);
  }
  if (!p.ok()) {
    return Named(p.status(), peer, pid);
  }
  return p;
}

Expected<std::vector<PeerActivation>> PeerMemory::MemfdActivations(uint32_t peer) {
  const auto pid = SameProcess(peer) ? ::getpid() : static_cast<pid_t>(cards_[peer].pid);
  auto &imp = MemfdImport::Process();
  Status st = imp.AttachProcess(pid);
  auto listed = st.ok() ? imp.Activations(pid) : Expected<std::vector<MemfdActivation>>(st);
  if (!listed.ok()) {
    return Error(listed.status().code(), "cannot list the ranges of rank {}: {}", peer,
                 Named(listed.status(), peer, pid).message());
  }
  std::vector<PeerActivation> out;
  for (const MemfdActivation &a : *listed) {
    out.push_back(PeerActivation{.va = a.va, .size = a.size, .cookie = a.cookie});
  }
  return out;
}

bool PeerMemory::SameProcess(uint32_t peer) const {
  return peer == rank_ || cards_[peer].pid == static_cast<uint32_t>(::getpid());
}

void PeerMemory::Drop(PeerView &p) {
  p.ranges.clear();  // unmaps their windows
  p.listed = false;
}

Status PeerMemory::Refresh(uint32_t peer, PeerView &p) {
  auto listed = device_->ListRanges(domain_, rank_, peer);
  if (!listed.ok()) {
    Drop(p);
    return listed.status();
  }
  std::map<uintptr_t, CachedRange> next;
  for (const hzc_range_desc &d : *listed) {
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

Expected<void *> PeerMemory::Lookup(uint32_t peer, PeerView &p, uintptr_t va, size_t len) {
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
  for (const hzc_activation_desc &a : r.activations) {
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

Status PeerMemory::CheckArgs(uint32_t peer, uintptr_t va, size_t len) const {
  if (peer >= cards_.size()) {
    return Error(HCCL_E_PARA, "rank={}: the communicator has {} ranks", peer, cards_.size());
  }
  if (len == 0) {
    return Error(HCCL_E_PARA, "size=0: must not be 0");
  }
  if (va > UINTPTR_MAX - len) {
    return Error(HCCL_E_PARA, "peer address {:#x} size {:#x}: wraps around", va, len);
  }
  return Status::Ok();
}

Expected<bool> PeerMemory::Current(uint32_t peer, PeerView &p) {
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

Status PeerMemory::Relist(uint32_t peer, PeerView &p) {
  HZC_RETURN_IF_ERROR(Refresh(peer, p));
  p.listed_at = p.now.value_or(0);
  if (!p.now) {
    p.listed = false;  // nothing tells when this listing goes stale
  }
  return Status::Ok();
}

template <typename T, typename Find>
Expected<T *> PeerMemory::Search(uint32_t peer, Find find) {
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

Expected<void *> PeerMemory::Translate(uint32_t peer, uintptr_t peer_va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckArgs(peer, peer_va, len));
  if (memfd_) {
    return MemfdTranslate(peer, peer_va, len);
  }
  std::lock_guard lock(mutex_);
  auto hit = Search<void>(peer, [&](PeerView &p) { return Lookup(peer, p, peer_va, len); });
  if (hit.ok() && *hit == nullptr) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of rank {}", peer_va, len,
                 peer);
  }
  return hit;
}

const hzc_activation_desc *PeerMemory::FindActivation(const PeerView &p, uintptr_t va, size_t len) {
  auto it = p.ranges.upper_bound(va);
  if (it == p.ranges.begin()) {
    return nullptr;
  }
  --it;
  // Activations are sorted by va and do not overlap: the last one starting at or below va is
  // the only candidate.
  const auto &acts = it->second.activations;
  auto a = std::upper_bound(acts.begin(), acts.end(), va,
                            [](uintptr_t v, const hzc_activation_desc &d) { return v < d.va; });
  if (a == acts.begin()) {
    return nullptr;
  }
  --a;
  if (va - a->va >= a->length || len > a->length - (va - a->va)) {
    return nullptr;
  }
  return &*a;
}

Expected<PeerActivation> PeerMemory::Activation(uint32_t peer, uintptr_t peer_va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckArgs(peer, peer_va, len));
  if (memfd_) {
    auto all = MemfdActivations(peer);
    if (!all.ok()) {
      return all.status();
    }
    for (const PeerActivation &a : *all) {
      if (peer_va >= a.va && peer_va - a.va < a.size && len <= a.size - (peer_va - a.va)) {
        return a;
      }
    }
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not inside one activation of rank {}", peer_va,
                 len, peer);
  }
  std::lock_guard lock(mutex_);
  auto a = Search<const hzc_activation_desc>(
      peer, [&](const PeerView &p) -> Expected<const hzc_activation_desc *> {
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

Expected<std::vector<PeerActivation>> PeerMemory::Activations(uint32_t peer) {
  if (peer >= cards_.size()) {
    return Error(HCCL_E_PARA, "rank={}: the communicator has {} ranks", peer, cards_.size());
  }
  if (memfd_) {
    return MemfdActivations(peer);
  }
  std::lock_guard lock(mutex_);
  PeerView &p = peers_[peer];
  // A listing taken now is not tied to a generation: the next Translate lists again.
  HZC_RETURN_IF_ERROR(Refresh(peer, p));
  p.listed = false;
  std::vector<PeerActivation> out;
  for (const auto &[base, r] : p.ranges) {
    for (const hzc_activation_desc &a : r.activations) {
      out.push_back(PeerActivation{.va = a.va, .size = a.length, .cookie = a.cookie});
    }
  }
  return out;
}

size_t PeerMemory::MappedWindows() const {
  if (memfd_) {
    return MemfdImport::Process().MappedWindows();
  }
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const PeerView &p : peers_) {
    for (const auto &[base, r] : p.ranges) {
      n += r.window.valid() ? 1 : 0;
    }
  }
  return n;
}

}  // namespace hzc::transport
