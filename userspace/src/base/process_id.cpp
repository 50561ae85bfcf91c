// SPDX-License-Identifier: Apache-2.0
#include "base/process_id.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace hzc {

namespace {

std::atomic<pid_t> g_pid{0};

void ForgetInChild() {
  g_pid.store(0, std::memory_order_relaxed);
}

}  // namespace

pid_t ProcessId() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    // Registered before the first value is kept, so no child can inherit a kept value.
    static std::once_flag registered;
    std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, ForgetInChild); });
    pid = ::getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace hzc
