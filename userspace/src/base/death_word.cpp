// SPDX-License-Identifier: Apache-2.0
#include "base/death_word.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <thread>

#include "base/errno_string.h"
#include "base/futex.h"

namespace hzc {

namespace {

// The keeper's robust list: its head and its one entry, never freed (the keeper never returns).
struct Keeper {
  robust_list_head head{};
  robust_list entry{};
};

void Keep(uint32_t *word, std::promise<Status> armed) {
  auto *k = new Keeper;           // lives until the process exits
  k->entry.next = &k->head.list;  // a circular list of one entry
  k->head.list.next = &k->entry;
  k->head.futex_offset = reinterpret_cast<char *>(word) - reinterpret_cast<char *>(&k->entry);
  k->head.list_op_pending = nullptr;
  std::atomic_ref<uint32_t>(*word).store(static_cast<uint32_t>(::gettid()) & FUTEX_TID_MASK,
                                         std::memory_order_release);
  if (::syscall(SYS_set_robust_list, &k->head, sizeof(k->head)) != 0) {
    const int err = errno;
    std::atomic_ref<uint32_t>(*word).store(0, std::memory_order_release);
    armed.set_value(Error(HCCL_E_SYSCALL, "set_robust_list: {}", ErrnoString(err)));
    return;
  }
  armed.set_value(Status::Ok());
  std::atomic<uint32_t> never{0};
  for (;;) {
    FutexWait(&never, 0, std::chrono::hours(24));
  }
}

}  // namespace

Status ArmDeathWord(uint32_t *word) {
  std::promise<Status> armed;
  std::future<Status> done = armed.get_future();
  std::thread(Keep, word, std::move(armed)).detach();
  return done.get();
}

bool DeathWordSaysDead(uint32_t value) {
  return (value & FUTEX_OWNER_DIED) != 0;
}

}  // namespace hzc
