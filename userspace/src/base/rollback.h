// SPDX-License-Identifier: Apache-2.0
// The scope guard of a call made of several steps that must all happen or none: each step
// that succeeded pushes its undo; leaving the scope without Commit() runs the undos, newest
// first, so a failed call changes nothing.
//
//   Rollback rollback;
//   HZC_RETURN_IF_ERROR(a.Add(x));
//   rollback.Push([&] { a.Remove(x); });
//   HZC_RETURN_IF_ERROR(b.Do(x));  // a failure here removes x from a again
//   rollback.Commit();
#pragma once

#include <functional>
#include <vector>

namespace hzc {

class Rollback {
 public:
  Rollback() = default;
  ~Rollback() {
    if (committed_) {
      return;
    }
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      (*it)();
    }
  }
  Rollback(const Rollback &) = delete;
  Rollback &operator=(const Rollback &) = delete;

  // Undo of the step that just succeeded. @undo must not throw. Should keeping it fail (out
  // of memory), it runs at once, before the exception leaves.
  template <typename Fn>
  void Push(Fn &&undo) {
    try {
      undo_.emplace_back(undo);
    } catch (...) {
      undo();
      throw;
    }
  }
  // Every step succeeded: keep them.
  void Commit() { committed_ = true; }

 private:
  std::vector<std::function<void()>> undo_;
  bool committed_ = false;
};

}  // namespace hzc
