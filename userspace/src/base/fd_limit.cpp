// SPDX-License-Identifier: Apache-2.0
#include "base/fd_limit.h"

#include <dirent.h>

#include <cerrno>
#include <string>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc {

namespace {

// Descriptors open in this process (/proc/self/fd, less the one reading it).
size_t OpenDescriptors() {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return 0;
  }
  size_t n = 0;
  while (const dirent *e = readdir(dir)) {
    n += e->d_name[0] != '.';
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;
}

std::string LimitText(rlim_t v) {
  return v == RLIM_INFINITY ? "unlimited" : std::to_string(v);
}

}  // namespace

Expected<std::optional<rlim_t>> SoftLimitFor(size_t open, size_t more, const rlimit &limit) {
  const rlim_t needed = open + more, wanted = needed + kSpareDescriptors;
  if (limit.rlim_cur == RLIM_INFINITY || wanted <= limit.rlim_cur) {
    return std::optional<rlim_t>();
  }
  if (limit.rlim_max != RLIM_INFINITY && needed > limit.rlim_max) {
    return Error(
        HCCL_E_UNAVAIL,
        "{} descriptors are needed ({} open and {} more) but RLIMIT_NOFILE's hard limit is "
        "{}: raise it (ulimit -Hn, LimitNOFILE= of a systemd unit, limits.conf)",
        needed, open, more, LimitText(limit.rlim_max));
  }
  return std::optional<rlim_t>(limit.rlim_max == RLIM_INFINITY ? wanted
                                                               : std::min(wanted, limit.rlim_max));
}

Status ReserveDescriptors(size_t more, std::string_view what) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Error(HCCL_E_SYSCALL, "{}: getrlimit(RLIMIT_NOFILE) failed: {}", what,
                 ErrnoString(errno));
  }
  const size_t open = OpenDescriptors();
  auto soft = SoftLimitFor(open, more, limit);
  if (!soft.ok()) {
    return Error(soft.status().code(), "{}: {}", what, soft.status().message());
  }
  if (!*soft) {
    return Status::Ok();
  }
  const rlimit raised{.rlim_cur = **soft, .rlim_max = limit.rlim_max};
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    return Error(HCCL_E_SYSCALL, "{}: setrlimit(RLIMIT_NOFILE, {}) failed: {}", what, **soft,
                 ErrnoString(errno));
  }
  LogInfo(
      "{}: {} more descriptors beside the {} open: RLIMIT_NOFILE's soft limit raised from {} to "
      "{} (hard limit {})",
      what, more, open, LimitText(limit.rlim_cur), **soft, LimitText(limit.rlim_max));
  return Status::Ok();
}

}  // namespace hzc
