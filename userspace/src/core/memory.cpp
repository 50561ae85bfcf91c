// SPDX-License-Identifier: Apache-2.0
#include "core/memory.h"

#include <functional>
#include <string>

#include "base/config.h"
#include "base/rollback.h"
#include "core/range_registry.h"
#include "runtime/vmm.h"
#include "transport/transport.h"

namespace hzc::memory {

namespace {

// What UnsetRange and Deactivate share: mark an entry of the process's registry leaving
// (@take), withdraw it from the transport (@withdraw), and settle the entry (@settle): gone, or
// back as it was if that failed. A withdrawal that failed but happened all the same
// (transport::Transport::Withdrawn) leaves the entry out and returns the error.
Status Withdraw(const std::function<Status(RangeRegistry &)> &take,
                const std::function<void(RangeRegistry &, bool)> &settle,
                const std::function<Status(transport::Transport &)> &withdraw) {
  auto transport = transport::Process();
  if (!transport.ok()) {
    return transport.status();
  }
  auto &ranges = RangeRegistry::Process();
  HZC_RETURN_IF_ERROR(take(ranges));
  Status st = withdraw(**transport);
  settle(ranges, (*transport)->Withdrawn(st));
  return st;
}

// The process's transport, with @comm linked over it.
Expected<transport::Transport *> Linked(Communicator &comm) {
  auto transport = transport::Process();
  if (!transport.ok()) {
    return transport.status();
  }
  HZC_RETURN_IF_ERROR(comm.EstablishLinks(**transport, GetConfig().connect_timeout));
  return *transport;
}

}  // namespace

Status SetRange(HcclComm handle, Communicator &comm, uintptr_t base, size_t size) {
  if (const uint32_t servers = comm.ServerCount(); servers > 1) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "comm={}: its {} ranks span {} servers; only single-server communicators "
                 "support memory ranges",
                 handle, comm.size(), servers);
  }
  auto transport = Linked(comm);
  if (!transport.ok()) {
    return transport.status();
  }
  auto &ranges = RangeRegistry::Process();
  HZC_RETURN_IF_ERROR(ranges.Add(base, size, comm.serial()));
  Status st = (*transport)->AddRange(base, size);
  ranges.Settle(base, st.ok());
  return st;
}

Status LinkPeers(Communicator &comm) {
  return Linked(comm).status();
}

Status UnsetRange(uintptr_t base) {
  return Withdraw([&](RangeRegistry &ranges) { return ranges.Remove(base); },
                  [&](RangeRegistry &ranges, bool done) { ranges.Settle(base, done); },
                  [&](transport::Transport &transport) { return transport.RemoveRange(base); });
}

Status Activate(const std::shared_ptr<Communicator> &comm, uintptr_t va, size_t size,
                void *handle) {
  if (std::string why = runtime::CheckMapped(reinterpret_cast<void *>(va), size, handle);
      !why.empty()) {
    return Error(HCCL_E_PARA, "{}", why);
  }
  auto transport = transport::Process();
  if (!transport.ok()) {
    return transport.status();
  }
  auto &ranges = RangeRegistry::Process();
  Rollback rollback;
  HZC_RETURN_IF_ERROR(ranges.Activate(va, size, handle, comm));
  rollback.Push([&] { ranges.SettleActivation(va, false); });
  // With RDMA links the activated memory becomes a memory region whose rkey travels with the
  // activation.
  auto cookie = comm->RegisterMemory(va, size);
  if (!cookie.ok()) {
    return cookie.status();
  }
  rollback.Push([&] { comm->DropMemory(va); });
  HZC_RETURN_IF_ERROR((*transport)->Activate(va, size, *cookie));
  rollback.Commit();
  ranges.SettleActivation(va, true);
  return Status::Ok();
}

Status Deactivate(uintptr_t va) {
  RangeRegistry::Activation removed;
  bool gone = false;
  const Status st =
      Withdraw([&](RangeRegistry &ranges) { return ranges.Deactivate(va, &removed); },
               [&](RangeRegistry &ranges, bool done) {
                 ranges.SettleActivation(va, done);
                 gone = done;
               },
               [&](transport::Transport &transport) { return transport.Deactivate(va); });
  // Gone also when the withdrawal failed after it took effect (a peer late to acknowledge):
  // what was kept of the memory goes with it. A communicator destroyed meanwhile dropped its
  // registrations already.
  if (gone) {
    if (const std::shared_ptr<Communicator> comm = removed.comm.lock()) {
      comm->DropMemory(va);
    }
    // The registrations of the wires between servers (coll/span.cpp, coll/p2p_wire.cpp).
    RangeRegistry::Process().Deactivated(va, removed.size);
  }
  return st;
}

}  // namespace hzc::memory
