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
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

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
    uint64_t serial = 0;  // this activation's number: never another's in the process
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

  // The settled activation that holds [p, p + len) (len > 0), or nullopt.
  struct Held {
    uintptr_t va = 0;
    size_t size = 0;
    uint64_t serial = 0;  // Activation::serial
  };
  std::optional<Held> Holding(uintptr_t p, size_t len) const;

  // Those that keep something of activated memory (an RDMA registration of it) and must drop it
  // when the memory is deactivated: @on(va, size) runs after every deactivation that took effect
  // (Deactivated, from memory::Deactivate), before the call returns, on its thread. It must not
  // call Watch or Unwatch. Unwatch(@id) returns once no run of it is in progress.
  using Watcher = std::function<void(uintptr_t va, size_t size)>;
  uint64_t Watch(Watcher on);
  void Unwatch(uint64_t id);
  void Deactivated(uintptr_t va, size_t size);

 private:
  // The range containing [va, va+size), or end().
  std::map<uintptr_t, Range>::iterator Containing(uintptr_t va, size_t size);

  mutable std::mutex mutex_;
  std::map<uintptr_t, Range> ranges_;
  uint64_t activations_made_ = 0;

  std::mutex watch_mutex_;  // held while watchers run
  std::map<uint64_t, Watcher> watchers_;
  uint64_t watches_ = 0;
};

}  // namespace hzc
