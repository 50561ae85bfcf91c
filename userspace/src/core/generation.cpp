// SPDX-License-Identifier: Apache-2.0
#include "core/generation.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc {

namespace {

constexpr size_t kPageBytes = 4096;
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::mutex g_mutex;
std::shared_ptr<Generation> g_page;  // guarded by g_mutex
pid_t g_owner = 0;                   // guarded by g_mutex

}  // namespace

Expected<std::shared_ptr<Generation>> Generation::Process() {
  std::lock_guard lock(g_mutex);
  if (g_page && g_owner == ::getpid()) {
    return g_page;
  }
  if (g_page) {
    // A forked child: the inherited page is the parent's; leave it to the parent.
    g_page.reset();
  }
  UniqueFd fd(static_cast<int>(::memfd_create(kName, MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "memfd_create of the generation page: {}", ErrnoString(errno));
  }
  if (::ftruncate(fd.get(), kPageBytes) != 0 || ::fcntl(fd.get(), F_ADD_SEALS, kSeals) != 0) {
    return Error(HCCL_E_SYSCALL, "sizing the generation page: {}", ErrnoString(errno));
  }
  void *p = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    return Error(HCCL_E_MEMORY, "mapping the generation page: {}", ErrnoString(errno));
  }
  g_page.reset(new Generation(std::move(fd), static_cast<uint64_t *>(p)));
  g_owner = ::getpid();
  return g_page;
}

void Generation::BumpProcess() {
  std::lock_guard lock(g_mutex);
  if (g_page && g_owner == ::getpid()) {
    g_page->Bump();
  }
}

Generation::~Generation() {
  ::munmap(word_, kPageBytes);
}

uint64_t Generation::Load() const {
  return std::atomic_ref<uint64_t>(*word_).load(std::memory_order_acquire);
}

void Generation::Bump() {
  std::atomic_ref<uint64_t>(*word_).fetch_add(1, std::memory_order_acq_rel);
}

Expected<std::unique_ptr<PeerGeneration>> PeerGeneration::Attach(pid_t pid, int remote_fd) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    return Error(HCCL_E_SYSCALL, "pidfd_open of peer pid {}: {}", pid, ErrnoString(errno));
  }
  UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), remote_fd, 0)));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "pidfd_getfd of the generation page of pid {}: {}", pid,
                 ErrnoString(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size != static_cast<off_t>(kPageBytes) ||
      ::fcntl(fd.get(), F_GET_SEALS) != kSeals) {
    return Error(HCCL_E_SYSCALL, "descriptor {} of pid {} is not a generation page", remote_fd,
                 pid);
  }
  void *p = ::mmap(nullptr, kPageBytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    return Error(HCCL_E_MEMORY, "mapping the generation page of pid {}: {}", pid,
                 ErrnoString(errno));
  }
  return std::unique_ptr<PeerGeneration>(
      new PeerGeneration(std::move(pidfd), static_cast<const uint64_t *>(p)));
}

PeerGeneration::~PeerGeneration() {
  ::munmap(const_cast<uint64_t *>(word_), kPageBytes);
}

uint64_t PeerGeneration::Load() const {
  // Peers only read; atomic_ref needs a non-const object.
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t *>(word_)).load(std::memory_order_acquire);
}

bool PeerGeneration::Alive() const {
  pollfd p{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace hzc
