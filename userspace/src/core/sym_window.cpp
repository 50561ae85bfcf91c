// SPDX-License-Identifier: Apache-2.0
#include "core/sym_window.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/rank_list.h"
#include "base/rollback.h"
#include "core/memory.h"
#include "runtime/vmm.h"

namespace hzc::sym_window {

namespace {

struct Window {
  HcclComm comm_handle = nullptr;
  uint64_t comm_serial = 0;
  uint64_t seq = 0;  // its number among the communicator's windows: the same on every rank
  uintptr_t addr = 0;
  size_t size = 0;                           // the bytes mapped from addr
  std::vector<runtime::MappedBlock> blocks;  // the mappings, each activated
  std::vector<uintptr_t> bases;              // every rank's addr
  std::vector<void *> peers;                 // their bases translated here, once asked
};

// Handles are opaque values never reused, that do not point at memory.
constexpr uintptr_t kHandleBase = uintptr_t{0x57} << 40;

std::mutex g_mutex;
std::map<uintptr_t, Window> g_windows;
std::map<uint64_t, uint64_t> g_registered;  // windows registered so far, by communicator serial
uint64_t g_made = 0;

// One rank's record in the exchange of a registration or deregistration.
struct Word {
  uint32_t code = HCCL_SUCCESS;  // this rank's own verdict
  uint32_t flag = 0;
  uint64_t size = 0;    // the size argument
  uint64_t window = 0;  // the bytes mapped from addr
  uint64_t base = 0;    // addr
  uint64_t seq = 0;     // deregistration: the window's number
};

Expected<std::vector<Word>> Exchange(const Communicator &comm, const Word &mine,
                                     const AllGather &all_gather) {
  std::vector<Word> all(comm.size());
  HZC_RETURN_IF_ERROR(all_gather(&mine, all.data(), sizeof(Word)));
  return all;
}

// This rank's own error @own, else HCCL_E_PARA naming the ranks whose part of @what failed.
Status Verdict(const std::vector<Word> &all, const Status &own, const char *what) {
  HZC_RETURN_IF_ERROR(own);
  const auto n = static_cast<uint32_t>(all.size());
  const std::string failed = RanksWhere(n, [&](uint32_t r) { return all[r].code != 0; });
  if (failed.empty()) {
    return Status::Ok();
  }
  return Error(HCCL_E_PARA, "rank(s) {} failed their part of {} (see their log); nothing changed",
               failed, what);
}

// HCCL_E_PARA when the ranks' @field (@name) differ.
Status Agree(const std::vector<Word> &all, uint64_t Word::*field, const char *name) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].*field != all[0].*field) {
      return Error(HCCL_E_PARA, "{} differs between the ranks: {:#x} on rank 0, {:#x} on rank {}",
                   name, all[0].*field, all[r].*field, r);
    }
  }
  return Status::Ok();
}

Status AgreeOnFlag(const std::vector<Word> &all) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].flag != all[0].flag) {
      return Error(HCCL_E_PARA, "flag differs between the ranks: {} on rank 0, {} on rank {}",
                   all[0].flag, all[r].flag, r);
    }
  }
  return Status::Ok();
}

// Bytes of the live windows of the communicator with serial @serial (g_mutex held).
size_t BytesOf(uint64_t serial) {
  size_t n = 0;
  for (const auto &[h, w] : g_windows) {
    n += w.comm_serial == serial ? w.size : 0;
  }
  return n;
}

// This rank's local checks of @req: the mappings from addr (into @blocks) and the limit of
// hcclSymWinMaxMemSizePerRank; the window's size into @w.
Status Plan(const Communicator &comm, const Request &req, Word *w,
            std::vector<runtime::MappedBlock> *blocks) {
  const uint64_t limit = comm.options().sym_win_bytes;
  if (req.size > limit) {
    return Error(HCCL_E_PARA, "size={:#x}: above hcclSymWinMaxMemSizePerRank ({} GB)", req.size,
                 limit >> 30);
  }
  *blocks = runtime::MappingsFrom(reinterpret_cast<void *>(req.addr), req.size);
  if (blocks->empty()) {
    return Error(HCCL_E_PARA,
                 "addr={:#x} size={:#x}: not memory mapped with aclrtMapMem from addr on (reserve "
                 "it with aclrtReserveMemAddress, then aclrtMallocPhysical and aclrtMapMem)",
                 req.addr, req.size);
  }
  size_t window = 0;
  for (const runtime::MappedBlock &b : *blocks) {
    if (b.handle == nullptr) {
      return Error(HCCL_E_PARA,
                   "addr={:#x}: the allocation mapped at {:#x} was freed "
                   "(aclrtFreePhysical) before the registration",
                   req.addr, b.va);
    }
    window += b.size;
  }
  std::lock_guard lock(g_mutex);
  const size_t used = BytesOf(comm.serial());
  if (window > limit || used > limit - window) {
    return Error(HCCL_E_PARA,
                 "size={:#x}: the window's {:#x} mapped bytes and the {:#x} bytes of this rank's "
                 "other windows on the communicator exceed hcclSymWinMaxMemSizePerRank ({} GB)",
                 req.size, window, used, limit >> 30);
  }
  w->window = window;
  return Status::Ok();
}

// Set a memory range on the window's mappings and activate each; their undos go to @rollback.
// Memory inside a range the caller set (HcclCommSetMemoryRange) is HCCL_E_PARA: the window's
// range would overlap it.
Status Setup(const std::shared_ptr<Communicator> &comm, const Request &req,
             const std::vector<runtime::MappedBlock> &blocks, size_t window, Rollback &rollback) {
  if (Status st = memory::SetRange(req.handle, *comm, req.addr, window); !st.ok()) {
    if (st.code() != HCCL_E_PARA) {
      return st;
    }
    return Error(HCCL_E_PARA,
                 "addr={:#x}: the window's memory {} (HcclCommSetMemoryRange); a window sets a "
                 "range of its own: register memory outside the ranges, or unset the range first",
                 req.addr, st.message());
  }
  rollback.Push([addr = req.addr] { (void)memory::UnsetRange(addr); });
  for (const runtime::MappedBlock &b : blocks) {
    HZC_RETURN_IF_ERROR(memory::Activate(comm, b.va, b.size, b.handle));
    rollback.Push([va = b.va] { (void)memory::Deactivate(va); });
  }
  return Status::Ok();
}

// Keep @w as a new window; its handle.
void *Record(Window w) {
  std::lock_guard lock(g_mutex);
  w.seq = ++g_registered[w.comm_serial];
  const uintptr_t h = kHandleBase + (++g_made) * 0x40;
  for (const runtime::MappedBlock &b : w.blocks) {
    (void)runtime::HoldMapping(reinterpret_cast<void *>(b.va),
                               fmt::format("the mapping is in symmetric window {:#x} "
                                           "(HcclCommSymWinRegister); deregister it first",
                                           h));
  }
  g_windows.emplace(h, std::move(w));
  return reinterpret_cast<void *>(h);
}

// Undo what a registration of @w did, locally: the first error.
Status Release(const Window &w) {
  Status first = Status::Ok();
  for (const runtime::MappedBlock &b : w.blocks) {
    runtime::ReleaseMapping(reinterpret_cast<void *>(b.va));
    if (Status st = memory::Deactivate(b.va); !st.ok() && first.ok()) {
      first = st;
    }
  }
  if (Status st = memory::UnsetRange(w.addr); !st.ok() && first.ok()) {
    first = st;
  }
  return first;
}

}  // namespace

Expected<void *> Register(const std::shared_ptr<Communicator> &comm, const Request &req,
                          const Status &refused, const AllGather &all_gather) {
  if (const uint32_t servers = comm->ServerCount(); servers > 1) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "comm={}: its {} ranks span {} servers; symmetric windows need every rank on one "
                 "server (peers reach them by load and store)",
                 req.handle, comm->size(), servers);
  }
  Word mine;
  mine.flag = req.flag;
  mine.size = req.size;
  mine.base = req.addr;
  std::vector<runtime::MappedBlock> blocks;
  const Status own = refused.ok() ? Plan(*comm, req, &mine, &blocks) : refused;
  mine.code = own.code();
  auto all = Exchange(*comm, mine, all_gather);
  if (!all.ok()) {
    return all.status();
  }
  HZC_RETURN_IF_ERROR(Verdict(*all, own, "the registration"));
  HZC_RETURN_IF_ERROR(Agree(*all, &Word::size, "size"));
  HZC_RETURN_IF_ERROR(AgreeOnFlag(*all));
  HZC_RETURN_IF_ERROR(Agree(*all, &Word::window, "the bytes mapped from addr (the window)"));
  Rollback rollback;
  const Status set = Setup(comm, req, blocks, mine.window, rollback);
  Word setup;
  setup.code = set.code();
  auto done = Exchange(*comm, setup, all_gather);
  if (!done.ok()) {
    return done.status();
  }
  HZC_RETURN_IF_ERROR(Verdict(*done, set, "the registration's activation"));
  rollback.Commit();
  Window w;
  w.comm_handle = req.handle;
  w.comm_serial = comm->serial();
  w.addr = req.addr;
  w.size = mine.window;
  w.blocks = std::move(blocks);
  for (const Word &word : *all) {
    w.bases.push_back(word.base);
  }
  w.peers.resize(comm->size());
  return Record(std::move(w));
}

Expected<HcclComm> CommOf(void *handle) {
  std::lock_guard lock(g_mutex);
  auto it = g_windows.find(reinterpret_cast<uintptr_t>(handle));
  if (it == g_windows.end()) {
    return Error(HCCL_E_PARA,
                 "winHandle={}: not a registered window (deregistered, or its communicator was "
                 "destroyed)",
                 handle);
  }
  return it->second.comm_handle;
}

Status Deregister(Communicator &comm, void *handle, const AllGather &all_gather) {
  Word mine;
  Status own = CommOf(handle).status();
  {
    std::lock_guard lock(g_mutex);
    if (auto it = g_windows.find(reinterpret_cast<uintptr_t>(handle)); it != g_windows.end()) {
      mine.seq = it->second.seq;
    }
  }
  if (const int queued = comm.QueuedCalls(); own.ok() && queued > 0) {
    own = Error(HCCL_E_AGAIN,
                "winHandle={}: {} call(s) of its communicator queued on streams have not run yet "
                "and may use the window; synchronize the streams, then call again",
                handle, queued);
  }
  mine.code = own.code();
  auto all = Exchange(comm, mine, all_gather);
  if (!all.ok()) {
    return all.status();
  }
  HZC_RETURN_IF_ERROR(Verdict(*all, own, "the deregistration"));
  HZC_RETURN_IF_ERROR(Agree(*all, &Word::seq, "the window (its number on the communicator)"));
  Window w;
  {
    std::lock_guard lock(g_mutex);
    auto it = g_windows.find(reinterpret_cast<uintptr_t>(handle));
    if (it == g_windows.end()) {  // another thread deregistered it meanwhile
      return Error(HCCL_E_PARA, "winHandle={}: deregistered meanwhile by another thread", handle);
    }
    w = std::move(it->second);
    g_windows.erase(it);
  }
  return Release(w);
}

Expected<void *> Find(const Communicator &comm, uintptr_t addr, size_t size, size_t *offset) {
  std::lock_guard lock(g_mutex);
  for (const auto &[h, w] : g_windows) {
    if (w.comm_serial == comm.serial() && addr >= w.addr && addr - w.addr < w.size &&
        size <= w.size - (addr - w.addr)) {
      *offset = addr - w.addr;
      return reinterpret_cast<void *>(h);
    }
  }
  return Error(HCCL_E_NOT_FOUND,
               "ptr={:#x} size={:#x}: in no window registered on this communicator", addr, size);
}

Expected<void *> PeerPointer(Communicator &comm, void *handle, size_t offset, uint32_t peer) {
  std::lock_guard lock(g_mutex);
  auto it = g_windows.find(reinterpret_cast<uintptr_t>(handle));
  if (it == g_windows.end() || it->second.comm_serial != comm.serial()) {
    return Error(HCCL_E_PARA, "winHandle={}: not a registered window", handle);
  }
  Window &w = it->second;
  if (peer >= comm.size()) {
    return Error(HCCL_E_PARA, "peerRank={}: not below the communicator's rank count {}", peer,
                 comm.size());
  }
  if (offset >= w.size) {
    return Error(HCCL_E_PARA, "offset={:#x}: not inside the window's {:#x} bytes", offset, w.size);
  }
  if (w.peers[peer] == nullptr) {
    transport::PeerMemory *pm = comm.peer_memory();
    if (pm == nullptr) {
      return Error(HCCL_E_INTERNAL, "winHandle={}: the communicator is not linked", handle);
    }
    auto p = pm->Translate(peer, w.bases[peer], w.size);
    if (!p.ok()) {
      return p.status();
    }
    w.peers[peer] = *p;
  }
  return static_cast<void *>(static_cast<char *>(w.peers[peer]) + offset);
}

Status NotInWindow(uintptr_t va, const char *arg) {
  std::lock_guard lock(g_mutex);
  for (const auto &[h, w] : g_windows) {
    if (va >= w.addr && va - w.addr < w.size) {
      return Error(HCCL_E_PARA,
                   "{}={:#x}: memory of symmetric window {:#x} (HcclCommSymWinRegister), which "
                   "HcclCommSymWinDeregister releases",
                   arg, va, h);
    }
  }
  return Status::Ok();
}

void Forget(uint64_t comm_serial) {
  std::vector<Window> gone;
  {
    std::lock_guard lock(g_mutex);
    for (auto it = g_windows.begin(); it != g_windows.end();) {
      if (it->second.comm_serial == comm_serial) {
        gone.push_back(std::move(it->second));
        it = g_windows.erase(it);
      } else {
        ++it;
      }
    }
    g_registered.erase(comm_serial);
  }
  for (const Window &w : gone) {
    if (Status st = Release(w); !st.ok()) {
      LogWarn("symmetric window at {:#x}: release with its communicator: {}", w.addr, st.message());
    }
  }
}

size_t Count() {
  std::lock_guard lock(g_mutex);
  return g_windows.size();
}

}  // namespace hzc::sym_window
