// SPDX-License-Identifier: Apache-2.0
#include "core/range_registry.h"

namespace hzc {

namespace {

// [a, a+as) and [b, b+bs) share a byte (sizes non-zero, no wrap: checked by callers).
bool Overlap(uintptr_t a, size_t as, uintptr_t b, size_t bs) {
  return a < b + bs && b < a + as;
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
  ranges_.emplace(base, Range{.size = size, .comm_id = comm_id, .activations = {}});
  return Status::Ok();
}

Status RangeRegistry::Remove(uintptr_t base, Range *removed) {
  std::lock_guard lock(mutex_);
  auto it = ranges_.find(base);
  if (it == ranges_.end()) {
    return Error(HCCL_E_PARA, "baseVirPtr={:#x}: not the base of a set range", base);
  }
  if (!it->second.activations.empty()) {
    return Error(HCCL_E_PARA, "baseVirPtr={:#x}: {} activation(s) remain; deactivate them first",
                 base, it->second.activations.size());
  }
  if (removed != nullptr) {
    *removed = it->second;
  }
  ranges_.erase(it);
  return Status::Ok();
}

Status RangeRegistry::Activate(uintptr_t va, size_t size, void *handle,
                               std::weak_ptr<Communicator> comm) {
  std::lock_guard lock(mutex_);
  auto it = Containing(va, size);
  if (it == ranges_.end()) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not inside one set range", va, size);
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
  acts.emplace(va, Activation{.size = size, .handle = handle, .comm = std::move(comm)});
  return Status::Ok();
}

Status RangeRegistry::Deactivate(uintptr_t va, Activation *removed) {
  std::lock_guard lock(mutex_);
  auto it = Containing(va, 1);
  if (it != ranges_.end()) {
    auto act = it->second.activations.find(va);
    if (act != it->second.activations.end()) {
      if (removed != nullptr) {
        *removed = act->second;
      }
      it->second.activations.erase(act);
      return Status::Ok();
    }
  }
  return Error(HCCL_E_PARA, "virPtr={:#x}: not the start of an activation", va);
}

size_t RangeRegistry::RangeCount() const {
  std::lock_guard lock(mutex_);
  return ranges_.size();
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
