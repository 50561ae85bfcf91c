// SPDX-License-Identifier: Apache-2.0
#include "core/sym_window.h"

#include <map>
#include <mutex>

namespace hzc::sym_window {

namespace {

struct Window {
  uint64_t comm_serial;
  uintptr_t addr;
  size_t size;
};

// Handles are opaque values never reused, that do not point at memory.
constexpr uintptr_t kHandleBase = uintptr_t{0x57} << 40;

std::mutex g_mutex;
std::map<uintptr_t, Window> g_windows;
uint64_t g_made = 0;

}  // namespace

Expected<void *> Register(const Communicator &comm, uintptr_t addr, size_t size) {
  transport::PeerMemory *pm = comm.peer_memory();
  if (pm == nullptr || !pm->Translate(comm.rank(), addr, size).ok()) {
    return Error(HCCL_E_PARA,
                 "addr={:#x} size={:#x}: not inside memory activated with "
                 "HcclCommActivateCommMemory that this communicator sees (set a memory range on "
                 "it and activate the memory first)",
                 addr, size);
  }
  std::lock_guard lock(g_mutex);
  const uintptr_t h = kHandleBase + (++g_made) * 0x40;
  g_windows.emplace(h, Window{comm.serial(), addr, size});
  return reinterpret_cast<void *>(h);
}

Status Deregister(void *handle) {
  std::lock_guard lock(g_mutex);
  if (g_windows.erase(reinterpret_cast<uintptr_t>(handle)) != 1) {
    return Error(HCCL_E_PARA, "winHandle={}: not a registered window (deregistered or foreign)",
                 handle);
  }
  return Status::Ok();
}

Expected<void *> Find(const Communicator &comm, uintptr_t addr, size_t size, size_t *offset) {
  std::lock_guard lock(g_mutex);
  for (const auto &[h, w] : g_windows) {
    if (w.comm_serial == comm.serial() && addr >= w.addr && addr - w.addr <= w.size &&
        size <= w.size - (addr - w.addr)) {
      *offset = addr - w.addr;
      return reinterpret_cast<void *>(h);
    }
  }
  return Error(HCCL_E_NOT_FOUND,
               "ptr={:#x} size={:#x}: in no window registered on this communicator", addr, size);
}

void Forget(uint64_t comm_serial) {
  std::lock_guard lock(g_mutex);
  std::erase_if(g_windows, [&](const auto &w) { return w.second.comm_serial == comm_serial; });
}

size_t Count() {
  std::lock_guard lock(g_mutex);
  return g_windows.size();
}

}  // namespace hzc::sym_window
