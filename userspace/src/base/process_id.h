// SPDX-License-Identifier: Apache-2.0
// This process's id without a system call (glibc's getpid() makes one each time): read once,
// and again in a child made by fork().
#pragma once

#include <sys/types.h>

namespace hzc {

pid_t ProcessId();

}  // namespace hzc
