// SPDX-License-Identifier: Apache-2.0
// A word in shared memory that the kernel marks when this process dies: peers learn of the
// death with a load, without a system call (a pidfd poll costs microseconds, too much on a
// path that runs once per call and peer).
//
// The mechanism is the kernel's robust futex list (Documentation/locking/robust-futex-ABI): a
// thread registers a list of futex words it "owns"; when the thread exits, however it exits
// (SIGKILL included, and exec), the kernel sets FUTEX_OWNER_DIED in each word that still holds
// its thread id. ArmDeathWord starts a keeper thread that lives as long as the process: it
// writes its thread id into the word, registers the word as its only robust entry (its own
// list: the keeper holds no pthread mutex, so replacing glibc's registration for this one
// thread changes nothing else) and sleeps for good. A forked child has no keeper (threads do
// not survive fork): it arms a word of its own.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace hzc {

// Start the keeper of @word (in memory shared with the peers, mapped until exit); returns once
// the word holds its thread id. HCCL_E_SYSCALL when the kernel refuses the registration (then
// the word stays 0 and peers fall back to other means).
Status ArmDeathWord(uint32_t *word);

// Whether the process that armed @value (a load of its word) has died: false for a word that
// was never armed (0).
bool DeathWordSaysDead(uint32_t value);

}  // namespace hzc
