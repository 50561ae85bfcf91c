// SPDX-License-Identifier: Apache-2.0
#include "runtime/event.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/stream.h"

namespace hzc::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// Handles are opaque, never reused values that do not point at memory.
constexpr uintptr_t kBase = uintptr_t{0x45} << 40;

struct Event {
  std::mutex mu;
  std::condition_variable cv;  // a record completed, or a wait passed
  uint32_t flags = 0;
  uint64_t recorded = 0;     // sequence number of the last record queued
  uint64_t reached = 0;      // of the last record its stream reached
  bool is_recorded = false;  // recorded since creation or the last reset
  Clock::time_point stamp;   // when the last record was reached
  uint64_t pending_waits = 0;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, std::shared_ptr<Event>> events;
  uint64_t made = 0;
};

Registry &Events() {
  static auto *const registry = new Registry();  // outlives static destructors
  return *registry;
}

Expected<std::shared_ptr<Event>, aclError> Find(aclrtEvent handle, const char *name = "event") {
  if (handle != nullptr) {
    Registry &r = Events();
    const std::lock_guard lock(r.mu);
    auto it = r.events.find(reinterpret_cast<uintptr_t>(handle));
    if (it != r.events.end()) {
      return it->second;
    }
  }
  return Error(ACL_ERROR_RT_INVALID_HANDLE, "{}={}: not a live event (destroyed or foreign)", name,
               handle);
}

// A failed Submit's status as an ACL status (its code is an aclError).
AclStatus AsAcl(const Status &st) {
  return AclStatus(static_cast<aclError>(st.code()), st.message());
}

}  // namespace

AclStatus CreateEvent(uint32_t flags, aclrtEvent *out) {
  if ((flags & ACL_EVENT_IPC) != 0) {
    return Error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                 "flag={:#x}: ACL_EVENT_IPC is not supported (events stay in their process)",
                 flags);
  }
  if ((flags & ~kEventFlags) != 0) {
    return Error(ACL_ERROR_INVALID_PARAM, "flag={:#x}: unknown bits {:#x}", flags,
                 flags & ~kEventFlags);
  }
  auto e = std::make_shared<Event>();
  e->flags = flags;
  Registry &r = Events();
  const std::lock_guard lock(r.mu);
  const uintptr_t h = kBase + (++r.made) * 0x40;
  r.events.emplace(h, std::move(e));
  *out = reinterpret_cast<aclrtEvent>(h);
  return AclStatus::Ok();
}

AclStatus DestroyEvent(aclrtEvent event) {
  Registry &r = Events();
  const std::lock_guard lock(r.mu);
  if (event == nullptr || r.events.erase(reinterpret_cast<uintptr_t>(event)) == 0) {
    return Error(ACL_ERROR_RT_INVALID_HANDLE, "event={}: not a live event (destroyed or foreign)",
                 event);
  }
  return AclStatus::Ok();
}

bool IsEvent(aclrtEvent event) {
  return Find(event).ok();
}

AclStatus RecordEvent(aclrtEvent event, aclrtStream stream) {
  auto found = Find(event);
  if (!found.ok()) {
    return found.status();
  }
  std::shared_ptr<Event> e = std::move(found.value());
  std::unique_lock lock(e->mu);
  const uint64_t seq = ++e->recorded;
  const bool was_recorded = e->is_recorded;
  e->is_recorded = true;
  lock.unlock();
  Status st = Submit(
      stream, "aclrtRecordEvent",
      [e, seq]() {
        const auto now = Clock::now();
        const std::lock_guard l(e->mu);
        if (seq > e->reached) {
          e->reached = seq;
          e->stamp = now;
        }
        e->cv.notify_all();
        return Status::Ok();
      },
      /*always=*/true);
  if (!st.ok()) {
    // Not queued: count this record as reached (a waiter may already wait for @seq) without
    // a time, and restore whether the event holds one.
    lock.lock();
    if (seq > e->reached) {
      e->reached = seq;
    }
    if (e->recorded == seq) {
      e->is_recorded = was_recorded;
    }
    e->cv.notify_all();
    return AsAcl(st);
  }
  return AclStatus::Ok();
}

AclStatus ResetEvent(aclrtEvent event, aclrtStream stream) {
  auto found = Find(event);
  if (!found.ok()) {
    return found.status();
  }
  std::shared_ptr<Event> e = std::move(found.value());
  return AsAcl(Submit(
      stream, "aclrtResetEvent",
      [e]() {
        const std::lock_guard l(e->mu);
        e->is_recorded = false;
        return Status::Ok();
      },
      /*always=*/true));
}

AclStatus SynchronizeEvent(aclrtEvent event, int32_t timeout_ms) {
  auto found = Find(event);
  if (!found.ok()) {
    return found.status();
  }
  Event &e = *found.value();
  std::unique_lock lock(e.mu);
  const uint64_t target = e.recorded;
  auto done = [&] { return e.reached >= target; };
  if (timeout_ms < 0) {
    e.cv.wait(lock, done);
  } else if (!e.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    return Error(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "event={}: not complete after {} ms", event,
                 timeout_ms);
  }
  return AclStatus::Ok();
}

AclStatus StreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  auto found = Find(event);
  if (!found.ok()) {
    return found.status();
  }
  std::shared_ptr<Event> e = std::move(found.value());
  if (stream != nullptr && !IsStream(stream)) {
    return Error(ACL_ERROR_RT_INVALID_HANDLE, "stream={}: not a live stream (destroyed or foreign)",
                 stream);
  }
  uint64_t target = 0;
  {
    const std::lock_guard lock(e->mu);
    target = e->recorded;
    ++e->pending_waits;
  }
  Status st = Submit(
      stream, "aclrtStreamWaitEvent",
      [e, target]() {
        std::unique_lock l(e->mu);
        e->cv.wait(l, [&] { return e->reached >= target; });
        --e->pending_waits;
        e->cv.notify_all();
        return Status::Ok();
      },
      /*always=*/true);
  if (!st.ok()) {
    const std::lock_guard lock(e->mu);
    --e->pending_waits;
    return AsAcl(st);
  }
  return AclStatus::Ok();
}

namespace {

// *@out = @read(the event behind @event), under its lock.
template <typename Read>
AclStatus Query(aclrtEvent event, bool *out, Read read) {
  auto found = Find(event);
  if (!found.ok()) {
    return found.status();
  }
  Event &e = *found.value();
  const std::lock_guard lock(e.mu);
  *out = read(e);
  return AclStatus::Ok();
}

}  // namespace

AclStatus QueryEvent(aclrtEvent event, bool *complete) {
  return Query(event, complete,
               [](const Event &e) { return e.is_recorded && e.reached >= e.recorded; });
}

AclStatus QueryEventWait(aclrtEvent event, bool *complete) {
  return Query(event, complete, [](const Event &e) { return e.pending_waits == 0; });
}

namespace {

// The completion time of @handle (named @name) for ElapsedTime.
Expected<Clock::time_point, aclError> Stamp(aclrtEvent handle, const char *name) {
  auto found = Find(handle, name);
  if (!found.ok()) {
    return found.status();
  }
  Event &e = *found.value();
  const std::lock_guard lock(e.mu);
  if ((e.flags & ACL_EVENT_TIME_LINE) == 0) {
    return Error(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                 "{}={}: created without ACL_EVENT_TIME_LINE (flags {:#x})", name, handle, e.flags);
  }
  if (!e.is_recorded) {
    return Error(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "{}={}: not recorded", name, handle);
  }
  if (e.reached < e.recorded) {
    return Error(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "{}={}: recorded but not complete", name, handle);
  }
  return e.stamp;
}

}  // namespace

AclStatus ElapsedTime(float *ms, aclrtEvent start, aclrtEvent end) {
  auto t0 = Stamp(start, "startEvent");
  if (!t0.ok()) {
    return t0.status();
  }
  auto t1 = Stamp(end, "endEvent");
  if (!t1.ok()) {
    return t1.status();
  }
  if (*t1 < *t0) {
    return Error(ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                 "endEvent={} completed before startEvent={}", end, start);
  }
  *ms = std::chrono::duration<float, std::milli>(*t1 - *t0).count();
  return AclStatus::Ok();
}

void DestroyAllEvents() {
  Registry &r = Events();
  const std::lock_guard lock(r.mu);
  r.events.clear();
}

size_t EventCount() {
  Registry &r = Events();
  const std::lock_guard lock(r.mu);
  return r.events.size();
}

}  // namespace hzc::runtime
