// SPDX-License-Identifier: Apache-2.0
// A call's deadline that reads the clock only when a wait first asks for it.
//
// A small call whose peers are already there never sleeps, so it never needs its deadline; a
// clock read per call (about 20-40 ns through the vDSO in a VM) is a tenth of such a call. A
// Deadline made with After(timeout) is fixed the first time at() is asked, which the waits do
// only once they stop spinning: the timeout then counts from there, at most a spin (tens of
// microseconds) later than the call's start. One made from a time point is that time point.
// Not thread-safe (one call, one thread); it converts to the time point, so functions that take
// one take a Deadline too.
#pragma once

#include <chrono>

namespace hzc {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // @timeout after the first at().
  static Deadline After(Clock::duration timeout) {
    Deadline d(Clock::time_point{});
    d.timeout_ = timeout;
    d.fixed_ = false;
    return d;
  }
  // At @at.
  Deadline(Clock::time_point at) : at_(at) {}  // NOLINT(google-explicit-constructor)

  Clock::time_point at() const {
    if (!fixed_) {
      at_ = Clock::now() + timeout_;
      fixed_ = true;
    }
    return at_;
  }
  operator Clock::time_point() const { return at(); }  // NOLINT(google-explicit-constructor)

 private:
  mutable Clock::time_point at_;
  mutable bool fixed_ = true;
  Clock::duration timeout_{};
};

}  // namespace hzc
