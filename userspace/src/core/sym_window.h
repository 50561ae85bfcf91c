// SPDX-License-Identifier: Apache-2.0
// Symmetric memory windows (HcclCommSymWinRegister): memory that every rank of a single-server
// communicator registers together, and that every rank reaches in every peer by window and
// offset (HcclSymWinGetPeerPointer).
//
// A window is the zero-copy flow done for the caller: registering [addr, addr + size) takes the
// aclrtMapMem mappings from @addr that cover it (the window is as long as they are, as in HCCL),
// sets a memory range on them and activates each (core/memory.h: registry, RDMA registration,
// the transport's publication), so collectives on buffers in windows run zero-copy like on any
// activated memory, and peers translate the window's bytes through the communicator's
// PeerMemory. aclrtUnmapMem of a window's mapping is refused until the window is deregistered.
//
// Registration and deregistration are collective: every rank calls them together, and they
// exchange what they did through @all_gather (one record per rank, an HcclAllGather of bytes on
// the communicator). A rank whose own checks fail still joins the exchange: it returns its
// error, the others fail with HCCL_E_PARA naming it; ranks that pass different sizes or flags
// (or whose mappings differ in size) all fail with HCCL_E_PARA. A failed call changes nothing.
#pragma once

#include <hccl/hccl_types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "base/status.h"
#include "core/comm.h"

namespace hzc::sym_window {

// Gather @bytes from every rank's @mine into @all (rank order), on the window's communicator.
using AllGather = std::function<Status(const void *mine, void *all, size_t bytes)>;

// HcclCommSymWinRegister's arguments.
struct Request {
  HcclComm handle = nullptr;  // the communicator's handle (messages, later lookups)
  uintptr_t addr = 0;
  uint64_t size = 0;
  uint32_t flag = 0;
};

// Register a window of @comm (every rank calls it together). @refused: this rank's own argument
// checks failed; it joins the exchange and returns it. HCCL_E_NOT_SUPPORT when @comm spans
// servers (every rank knows it, no exchange).
Expected<void *> Register(const std::shared_ptr<Communicator> &comm, const Request &req,
                          const Status &refused, const AllGather &all_gather);

// The communicator handle of window @handle: HCCL_E_PARA when @handle is no registered window.
Expected<HcclComm> CommOf(void *handle);

// Deregister window @handle of @comm (every rank calls it together, each with its own handle of
// the same window): HCCL_E_AGAIN while calls of @comm queued on streams have not run (the window
// may be in use; nothing is released); exchange errors as Register.
Status Deregister(Communicator &comm, void *handle, const AllGather &all_gather);

// HcclCommSymWinGet: the window of @comm holding [addr, addr + size), and addr's offset in it;
// HCCL_E_NOT_FOUND when none does.
Expected<void *> Find(const Communicator &comm, uintptr_t addr, size_t size, size_t *offset);

// HcclSymWinGetPeerPointer: where this process reaches byte @offset of rank @peer's part of
// window @handle of @comm (this rank: its own memory). HCCL_E_PARA for a bad handle, offset
// or rank.
Expected<void *> PeerPointer(Communicator &comm, void *handle, size_t offset, uint32_t peer);

// HCCL_E_PARA naming the window when [va, va + 1) lies in memory of a window: the memory calls
// (HcclCommDeactivateCommMemory, HcclCommUnsetMemoryRange) leave it to the window.
Status NotInWindow(uintptr_t va, const char *arg);

// Release the windows of the communicator whose serial is @comm_serial (it was destroyed),
// locally: their memory is deactivated, their range unset.
void Forget(uint64_t comm_serial);

// Windows registered and not deregistered.
size_t Count();

}  // namespace hzc::sym_window
