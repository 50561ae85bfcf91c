// SPDX-License-Identifier: Apache-2.0
// The process-wide registry of memory ranges (HcclCommSetMemoryRange) and of the
// activations inside them. Ranges are visible to every communicator of the process: a range that
// equals, contains, is contained in or partly overlaps a registered one is refused (adjacent
// ranges are fine). A failed call changes nothing.
//
// Every change takes two steps, so that an entry keeps its place while the transport follows
// it: Add and Activate put in an entry that is arriving, Remove and Deactivate mark one leaving,
// and Settle/SettleActivation then make the change (@done) or undo it. Meanwhile the entry
// still refuses what overlaps it, and a second change of it is refused: two threads racing for
// one place see one winner, and an entry is never lost to a rollback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "base/status.h"

namespace hzc {

class Communicator;

class RangeRegistry {
 public:
  enum class State : uint8_t { kArriving, kSet, kLeaving };
  struct Activation {
    State state = State::kArriving;
    size_t size = 0;
    void *handle = nullptr;
    // The communicator it was activated through, which holds its RDMA registration if any.
    std::weak_ptr<Communicator> comm;
  };
  struct Range {
    State state = State::kArriving;
    size_t size = 0;
    uint64_t comm_id = 0;  // the communicator that set it
    std::map<uintptr_t, Activation> activations;
  };

  static RangeRegistry &Process();

  Status Add(uintptr_t base, size_t size, uint64_t comm_id);
  // Exact base of a set range; refused while activations remain.
  Status Remove(uintptr_t base);
  // After Add or Remove of @base: keep the change (@done) or undo it.
  void Settle(uintptr_t base, bool done);

  // [va, va+size) inside one set range, no overlap with its activations.
  Status Activate(uintptr_t va, size_t size, void *handle, std::weak_ptr<Communicator> comm = {});
  // Exact start of a settled activation. @removed (optional) receives it.
  Status Deactivate(uintptr_t va, Activation *removed = nullptr);
  // After Activate or Deactivate of @va: keep the change (@done) or undo it.
  void SettleActivation(uintptr_t va, bool done);

  size_t RangeCount() const;
  size_t ActivationCount() const;

 private:
  // The range containing [va, va+size), or end().
  std::map<uintptr_t, Range>::iterator Containing(uintptr_t va, size_t size);

  mutable std::mutex mutex_;
  std::map<uintptr_t, Range> ranges_;
};

}  // namespace hzc
