// SPDX-License-Identifier: Apache-2.0
#include "runtime/stream.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace hzc::runtime {

namespace {

// Handles are opaque, never reused values that do not point at memory.
constexpr uintptr_t kBase = uintptr_t{0x53} << 40;

struct Item {
  std::string what;
  Task task;
  uint64_t seq = 0;
  bool always = false;  // runs even after a failure under ACL_STOP_ON_FAILURE (events)
};

struct Stream {
  std::mutex mu;
  std::condition_variable work;      // a task was queued, or stopping
  std::condition_variable progress;  // a task completed
  std::deque<Item> queue;
  uint64_t submitted = 0;  // sequence number of the last task queued
  uint64_t completed = 0;  // of the last task run or discarded
  bool stopping = false;
  bool stop_on_failure = false;
  std::optional<AclStatus> failure;  // the first failure since the last Synchronize
  std::thread worker;
};

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, std::shared_ptr<Stream>> streams;
  uint64_t made = 0;
};

Registry &Streams() {
  static auto *const registry = new Registry();  // outlives static destructors
  return *registry;
}

std::shared_ptr<Stream> Find(aclrtStream handle) {
  Registry &r = Streams();
  const std::lock_guard lock(r.mu);
  auto it = r.streams.find(reinterpret_cast<uintptr_t>(handle));
  return it == r.streams.end() ? nullptr : it->second;
}

AclStatus NotLive(aclrtStream handle) {
  return Error(ACL_ERROR_RT_INVALID_HANDLE, "stream={}: not a live stream (destroyed or foreign)",
               handle);
}

// Run @item's task, exceptions included in its status.
Status RunTask(Item &item) {
  try {
    return item.task();
  } catch (const std::exception &e) {
    return Status(static_cast<HcclResult>(ACL_ERROR_RT_INTERNAL_ERROR),
                  std::string("exception: ") + e.what());
  } catch (...) {
    return Status(static_cast<HcclResult>(ACL_ERROR_RT_INTERNAL_ERROR), "unknown exception");
  }
}

void Work(Stream *s) {
  pthread_setname_np(pthread_self(), "hzc-stream");
  std::unique_lock lock(s->mu);
  for (;;) {
    s->work.wait(lock, [s] { return !s->queue.empty() || s->stopping; });
    if (s->queue.empty()) {
      return;  // stopping, and everything queued has run
    }
    Item item = std::move(s->queue.front());
    s->queue.pop_front();
    const bool discard = !item.always && s->stop_on_failure && s->failure.has_value();
    lock.unlock();
    Status status = discard ? Status::Ok() : RunTask(item);
    item.task = nullptr;  // release what the task holds before reporting completion
    lock.lock();
    if (!status.ok() && !s->failure.has_value()) {
      s->failure = Error(TaskFailureCode(status.code()), "task {} failed (code {}): {}", item.what,
                         static_cast<int>(status.code()), status.message());
    }
    s->completed = item.seq;
    s->progress.notify_all();
  }
}

bool OnWorker(const Stream &s) {
  return s.worker.get_id() == std::this_thread::get_id();
}

// Stop @s's worker once it has run its queue; @s is no longer in the registry.
void Stop(Stream &s) {
  {
    const std::lock_guard lock(s.mu);
    s.stopping = true;
  }
  s.work.notify_all();
  s.worker.join();
}

}  // namespace

aclError TaskFailureCode(int code) {
  // aclError values start at 100000; HcclResult values are below 1100.
  return code >= ACL_ERROR_INVALID_PARAM ? code : ACL_ERROR_RT_INTERNAL_ERROR;
}

aclrtStream CreateStream() {
  auto s = std::make_shared<Stream>();
  s->worker = std::thread(Work, s.get());
  Registry &r = Streams();
  const std::lock_guard lock(r.mu);
  const uintptr_t h = kBase + (++r.made) * 0x40;
  r.streams.emplace(h, std::move(s));
  return reinterpret_cast<aclrtStream>(h);
}

AclStatus DestroyStream(aclrtStream stream) {
  std::shared_ptr<Stream> s = Find(stream);
  if (s == nullptr) {
    return NotLive(stream);
  }
  if (OnWorker(*s)) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "stream={}: called from a task of that stream",
                 stream);
  }
  {
    Registry &r = Streams();
    const std::lock_guard lock(r.mu);
    if (r.streams.erase(reinterpret_cast<uintptr_t>(stream)) == 0) {
      return NotLive(stream);  // destroyed meanwhile by another thread
    }
  }
  Stop(*s);
  return AclStatus::Ok();
}

bool IsStream(aclrtStream stream) {
  return stream != nullptr && Find(stream) != nullptr;
}

Status Submit(aclrtStream stream, const char *what, Task task, bool always) {
  if (stream == nullptr) {
    return task();
  }
  std::shared_ptr<Stream> s = Find(stream);
  {
    if (s == nullptr) {
      const AclStatus st = NotLive(stream);
      return Status(static_cast<HcclResult>(st.code()), st.message());
    }
    const std::lock_guard lock(s->mu);
    if (s->stopping) {
      const AclStatus st = NotLive(stream);
      return Status(static_cast<HcclResult>(st.code()), st.message());
    }
    s->queue.push_back(
        Item{.what = what, .task = std::move(task), .seq = ++s->submitted, .always = always});
  }
  s->work.notify_one();
  return Status::Ok();
}

AclStatus Synchronize(aclrtStream stream, int32_t timeout_ms) {
  if (stream == nullptr) {
    return AclStatus::Ok();  // the default stream's tasks ran when they were submitted
  }
  std::shared_ptr<Stream> s = Find(stream);
  if (s == nullptr) {
    return NotLive(stream);
  }
  if (OnWorker(*s)) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "stream={}: called from a task of that stream",
                 stream);
  }
  std::unique_lock lock(s->mu);
  const uint64_t target = s->submitted;
  auto done = [&] { return s->completed >= target; };
  if (timeout_ms < 0) {
    s->progress.wait(lock, done);
  } else if (!s->progress.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    return Error(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "stream={}: work not done after {} ms", stream,
                 timeout_ms);
  }
  if (s->failure.has_value()) {
    AclStatus failure = std::move(*s->failure);
    s->failure.reset();
    return failure;
  }
  return AclStatus::Ok();
}

AclStatus SetFailureMode(aclrtStream stream, uint64_t mode) {
  if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE) {
    return Error(ACL_ERROR_INVALID_PARAM,
                 "mode={:#x}: not ACL_CONTINUE_ON_FAILURE (0) nor ACL_STOP_ON_FAILURE (1)", mode);
  }
  if (stream == nullptr) {
    return AclStatus::Ok();  // the default stream's tasks fail in the call that submits them
  }
  std::shared_ptr<Stream> s = Find(stream);
  if (s == nullptr) {
    return NotLive(stream);
  }
  const std::lock_guard lock(s->mu);
  s->stop_on_failure = mode == ACL_STOP_ON_FAILURE;
  return AclStatus::Ok();
}

void WaitAllStreams() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    Registry &r = Streams();
    const std::lock_guard lock(r.mu);
    for (const auto &[handle, s] : r.streams) {
      all.push_back(s);
    }
  }
  for (const auto &s : all) {
    if (OnWorker(*s)) {
      continue;  // a task of this stream: its own later tasks cannot run before it returns
    }
    std::unique_lock lock(s->mu);
    const uint64_t target = s->submitted;
    s->progress.wait(lock, [&] { return s->completed >= target; });
  }
}

void DestroyAllStreams() {
  std::map<uintptr_t, std::shared_ptr<Stream>> all;
  {
    Registry &r = Streams();
    const std::lock_guard lock(r.mu);
    all.swap(r.streams);
  }
  for (auto &[handle, s] : all) {
    Stop(*s);
  }
}

size_t StreamCount() {
  Registry &r = Streams();
  const std::lock_guard lock(r.mu);
  return r.streams.size();
}

}  // namespace hzc::runtime
