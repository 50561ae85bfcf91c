// SPDX-License-Identifier: Apache-2.0
#include "base/shared_memfd.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_string.h"

namespace hzc {

Expected<SharedMemfd> MakeSharedMemfd(const char *name, size_t len) {
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "memfd_create: {}", ErrnoString(errno));
  }
  if (ftruncate(fd.get(), static_cast<off_t>(len)) != 0) {
    return Error(HCCL_E_MEMORY, "ftruncate to {} bytes: {}", len, ErrnoString(errno));
  }
  auto map = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get());
  if (!map.valid()) {
    return Error(HCCL_E_MEMORY, "mmap of {} bytes: {}", len, ErrnoString(errno));
  }
  return SharedMemfd{std::move(fd), std::move(map)};
}

}  // namespace hzc
