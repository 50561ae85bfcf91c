// SPDX-License-Identifier: Apache-2.0
#include "transport/generation.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/process_id.h"

namespace hzc::transport {

namespace {

constexpr size_t kPageBytes = 4096;
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::mutex g_mutex;
std::shared_ptr<Generation> g_page;  // guarded by g_mutex
pid_t g_owner = 0;                   // guarded by g_mutex

}  // namespace

Expected<std::shared_ptr<Generation>> Generation::Process() {
  std::lock_guard lock(g_mutex);
  if (g_page && g_owner == ProcessId()) {
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
  auto page = UniqueMapping::Map(kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get());
  if (!page.valid()) {
    return Error(HCCL_E_MEMORY, "mapping the generation page: {}", ErrnoString(errno));
  }
  g_page.reset(new Generation(std::move(fd), std::move(page)));
  g_owner = ProcessId();
  return g_page;
}

void Generation::BumpProcess() {
  std::lock_guard lock(g_mutex);
  if (g_page && g_owner == ProcessId()) {
    g_page->Bump();
  }
}

uint64_t Generation::Load() const {
  return std::atomic_ref<uint64_t>(*page_.as<uint64_t>()).load(std::memory_order_acquire);
}

void Generation::Bump() {
  std::atomic_ref<uint64_t>(*page_.as<uint64_t>()).fetch_add(1, std::memory_order_acq_rel);
}

Expected<std::unique_ptr<PeerGeneration>> PeerGeneration::Attach(pid_t pid, int remote_fd) {
  auto process = bootstrap::PeerProcess::Open(pid);
  if (!process.ok()) {
    return process.status();
  }
  auto fd = process->TakeFd(remote_fd);
  if (!fd.ok()) {
    return Error(HCCL_E_SYSCALL, "generation page: {}", fd.status().message());
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || st.st_size != static_cast<off_t>(kPageBytes) ||
      ::fcntl(fd->get(), F_GET_SEALS) != kSeals) {
    return Error(HCCL_E_SYSCALL, "descriptor {} of pid {} is not a generation page", remote_fd,
                 pid);
  }
  auto page = UniqueMapping::Map(kPageBytes, PROT_READ, MAP_SHARED, fd->get());
  if (!page.valid()) {
    return Error(HCCL_E_MEMORY, "mapping the generation page of pid {}: {}", pid,
                 ErrnoString(errno));
  }
  return std::unique_ptr<PeerGeneration>(new PeerGeneration(std::move(*process), std::move(page)));
}

uint64_t PeerGeneration::Load() const {
  // Peers only read; the mapping is read-only, atomic_ref only loads from it.
  return std::atomic_ref<uint64_t>(*page_.as<uint64_t>()).load(std::memory_order_acquire);
}

bool PeerGeneration::Alive() const {
  return !process_.Exited();
}

}  // namespace hzc::transport
