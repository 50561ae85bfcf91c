// SPDX-License-Identifier: Apache-2.0
#include "core/range_registry.h"

namespace hzc {

namespace {

// [a, a+as) and [b, b+bs) share a byte (sizes non-zero, no wrap: checked by callers).
bool Overlap(uintptr_t a, size_t as, uintptr_t b, size_t bs) {
  return a < b + bs && b < a + as;
}

// What Settle does to an entry of @map at @key: an arriving entry becomes set (@done) or goes,
// a leaving one goes (@done) or is set again.
template <typename Entries>
void SettleEntry(Entries &map, uintptr_t key, bool done) {
  auto it = map.find(key);
  if (it == map.end() || it->second.state == RangeRegistry::State::kSet) {
    return;  // not in the middle of a change: nothing to settle
  }
  if (done == (it->second.state == RangeRegistry::State::kLeaving)) {
    map.erase(it);
  } else {
    it->second.state = RangeRegistry::State::kSet;
  }
}

const char *Changing(RangeRegistry::State state) {
  return state == RangeRegistry::State::kArriving ? "being set" : "being unset";
}

}  // namespace

RangeRegistry &RangeRegistry::Process() {
  static RangeRegistry *const registry = new RangeRegistry();
  return *registry;
}

std::map<uintptr_t, RangeRegistry::Range>::iterator RangeRegistry::Containing(uintptr_t va,
                                                                              size_t size) {
  auto it = ranges_.upper_bound(va);
  if (it == ranges_.begin()) {
    return ranges_.end();
  }
  --it;
  if (va - it->first >= it->second.size || size > it->second.size - (va - it->first)) {
    return ranges_.end();
  }
  return it;
}

Status RangeRegistry::Add(uintptr_t base, size_t size, uint64_t comm_id) {
  std::lock_guard lock(mutex_);
  // Only the neighbours by base can overlap: the last range starting at or before base, and
  // the first starting after it.
  auto next = ranges_.upper_bound(base);
  if (next != ranges_.end() && Overlap(base, size, next->first, next->second.size)) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) overlaps the range [{:#x}, +{:#x}) already set",
                 base, size, next->first, next->second.size);
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (Overlap(base, size, prev->first, prev->second.size)) {
      return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) {} the range [{:#x}, +{:#x}) already set", base,
                   size, prev->first == base && prev->second.size == size ? "repeats" : "overlaps",
                   prev->first, prev->second.size);
    }
  }
  ranges_.emplace(
      base, Range{.state = State::kArriving, .size = size, .comm_id = comm_id, .activations = {}});
  return Status::Ok();
}

Status RangeRegistry::Remove(uintptr_t base) {
  std::lock_guard lock(mutex_);
  auto it = ranges_.find(base);
  if (it == ranges_.end()) {
    return Error(HCCL_E_PARA, "baseVirPtr={:#x}: not the base of a set range", base);
  }
  if (it->second.state != State::kSet) {
    return Error(HCCL_E_PARA, "baseVirPtr={:#x}: the range is {} by another call", base,
                 Changing(it->second.state));
  }
  if (!it->second.activations.empty()) {
    return Error(HCCL_E_PARA, "baseVirPtr={:#x}: {} activation(s) remain; deactivate them first",
                 base, it->second.activations.size());
  }
  it->second.state = State::kLeaving;
  return Status::Ok();
}

void RangeRegistry::Settle(uintptr_t base, bool done) {
  std::lock_guard lock(mutex_);
  SettleEntry(ranges_, base, done);
}

Status RangeRegistry::Activate(uintptr_t va, size_t size, void *handle,
                               std::weak_ptr<Communicator> comm) {
  std::lock_guard lock(mutex_);
  auto it = Containing(va, size);
  if (it == ranges_.end()) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not inside one set range", va, size);
  }
  if (it->second.state != State::kSet) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is inside a range {} by another call", va, size,
                 Changing(it->second.state));
  }
  auto &acts = it->second.activations;
  auto next = acts.upper_bound(va);
  if (next != acts.end() && Overlap(va, size, next->first, next->second.size)) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) overlaps activated memory at [{:#x}, +{:#x})", va,
                 size, next->first, next->second.size);
  }
  if (next != acts.begin()) {
    auto prev = std::prev(next);
    if (Overlap(va, size, prev->first, prev->second.size)) {
      return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) overlaps activated memory at [{:#x}, +{:#x})", va,
                   size, prev->first, prev->second.size);
    }
  }
  acts.emplace(va, Activation{.state = State::kArriving,
                              .size = size,
                              .handle = handle,
                              .comm = std::move(comm),
                              .serial = ++activations_made_});
  return Status::Ok();
}

Status RangeRegistry::Deactivate(uintptr_t va, Activation *removed) {
  std::lock_guard lock(mutex_);
  auto it = Containing(va, 1);
  if (it != ranges_.end()) {
    auto act = it->second.activations.find(va);
    if (act != it->second.activations.end()) {
      if (act->second.state != State::kSet) {
        return Error(HCCL_E_PARA, "virPtr={:#x}: the memory is being {} by another call", va,
                     act->second.state == State::kArriving ? "activated" : "deactivated");
      }
      if (removed != nullptr) {
        *removed = act->second;
      }
      act->second.state = State::kLeaving;
      return Status::Ok();
    }
  }
  return Error(HCCL_E_PARA, "virPtr={:#x}: not the start of an activation", va);
}

void RangeRegistry::SettleActivation(uintptr_t va, bool done) {
  std::lock_guard lock(mutex_);
  auto it = Containing(va, 1);
  if (it != ranges_.end()) {
    SettleEntry(it->second.activations, va, done);
  }
}

size_t RangeRegistry::RangeCount() const {
  std::lock_guard lock(mutex_);
  return ranges_.size();
}

std::optional<RangeRegistry::Held> RangeRegistry::Holding(uintptr_t p, size_t len) const {
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin() || len == 0) {
    return std::nullopt;
  }
  const auto &acts = std::prev(it)->second.activations;
  auto act = acts.upper_bound(p);
  if (act == acts.begin()) {
    return std::nullopt;
  }
  --act;
  const Activation &a = act->second;
  if (a.state != State::kSet || p - act->first >= a.size || len > a.size - (p - act->first)) {
    return std::nullopt;
  }
  return Held{.va = act->first, .size = a.size, .serial = a.serial};
}

uint64_t RangeRegistry::Watch(Watcher on) {
  std::lock_guard lock(watch_mutex_);
  watchers_.emplace(++watches_, std::move(on));
  return watches_;
}

void RangeRegistry::Unwatch(uint64_t id) {
  std::lock_guard lock(watch_mutex_);
  watchers_.erase(id);
}

void RangeRegistry::Deactivated(uintptr_t va, size_t size) {
  std::lock_guard lock(watch_mutex_);
  for (const auto &[id, on] : watchers_) {
    on(va, size);
  }
}

size_t RangeRegistry::ActivationCount() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto &[base, r] : ranges_) {
    n += r.activations.size();
  }
  return n;
}

}  // namespace hzc
