// SPDX-License-Identifier: Apache-2.0
#include "core/memory.h"

#include <functional>
#include <string>

#include "base/config.h"
#include "base/rollback.h"
#include "core/range_registry.h"
#include "device/device.h"
#include "runtime/vmm.h"
#include "transport/generation.h"
#include "transport/memfd_transport.h"

namespace hzc::memory {

namespace {

// Why a call that pinned nothing failed with HCCL_E_MEMORY while the activation also has an RDMA
// registration (@cookie != 0).
Status ExplainPinFailure(Status st, uint64_t cookie) {
  if (st.code() == HCCL_E_MEMORY && cookie != 0) {
    return Error(st.code(),
                 "{}; the RDMA registration of the activation pins it as well, so activated memory "
                 "counts twice against RLIMIT_MEMLOCK",
                 st.message());
  }
  return st;
}

// What UnsetRange and Deactivate share: take an entry out of the process's registry (@take),
// withdraw it from the transport (@kernel with the device, else @memfd), and put the entry back
// (@put_back) if that fails. On success the peers' cached views are stale, so the process's
// generation moves. A memfd withdrawal that timed out waiting for a peer has happened all the
// same (the directory no longer lists it): the entry stays out and the error is returned.
Status Withdraw(const std::function<Status(RangeRegistry &)> &take,
                const std::function<void(RangeRegistry &)> &put_back,
                const std::function<Status(Device &)> &kernel,
                const std::function<Status(transport::MemfdExport &)> &memfd) {
  auto transport = transport::ChosenTransport();
  if (!transport.ok()) {
    return transport.status();
  }
  Expected<std::shared_ptr<Device>> device = std::shared_ptr<Device>();
  Expected<transport::MemfdExport *> exported = static_cast<transport::MemfdExport *>(nullptr);
  if (*transport == transport::PeerTransport::kKernel) {
    device = Device::Process();
  } else {
    exported = transport::MemfdExport::Process();
  }
  if (!device.ok() || !exported.ok()) {
    return device.ok() ? exported.status() : device.status();
  }
  auto &ranges = RangeRegistry::Process();
  Rollback rollback;
  HZC_RETURN_IF_ERROR(take(ranges));
  rollback.Push([&] { put_back(ranges); });
  Status st = *device ? kernel(**device) : memfd(**exported);
  if (!st.ok() && (*device || st.code() != HCCL_E_TIMEOUT)) {
    return st;
  }
  rollback.Commit();
  transport::Generation::BumpProcess();
  return st;
}

// SetRange over the memfd transport.
Status SetMemfdRange(Communicator &comm, uintptr_t base, size_t size) {
  auto exported = transport::MemfdExport::Process();
  if (!exported.ok()) {
    return exported.status();
  }
  HZC_RETURN_IF_ERROR(comm.EstablishMemfdLinks());
  auto &ranges = RangeRegistry::Process();
  Rollback rollback;
  HZC_RETURN_IF_ERROR(ranges.Add(base, size, comm.serial()));
  rollback.Push([&] { (void)ranges.Remove(base); });
  HZC_RETURN_IF_ERROR((*exported)->AddRange(base, size));
  rollback.Commit();
  return Status::Ok();
}

// The transport's part of Activate: the kernel's activation (pinning) or the memfd directory's.
Status ActivateIn(transport::PeerTransport transport, uintptr_t va, size_t size, uint64_t cookie) {
  if (transport == transport::PeerTransport::kMemfd) {
    auto exported = transport::MemfdExport::Process();
    if (!exported.ok()) {
      return exported.status();
    }
    const int fd = runtime::PhysicalFdAt(reinterpret_cast<void *>(va));
    if (fd < 0) {
      return Error(HCCL_E_PARA, "virPtr={:#x}: no aclrtMapMem mapping starts there", va);
    }
    return (*exported)->Activate(va, size, fd, 0, cookie);
  }
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  return ExplainPinFailure((*device)->Activate(va, size, cookie), cookie);
}

}  // namespace

Status SetRange(HcclComm handle, Communicator &comm, uintptr_t base, size_t size) {
  if (const uint32_t servers = comm.ServerCount(); servers > 1) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "comm={}: its {} ranks span {} servers; only single-server communicators "
                 "support memory ranges",
                 handle, comm.size(), servers);
  }
  auto transport = transport::ChosenTransport();
  if (!transport.ok()) {
    return transport.status();
  }
  if (*transport == transport::PeerTransport::kMemfd) {
    return SetMemfdRange(comm, base, size);
  }
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  HZC_RETURN_IF_ERROR(comm.EstablishLinks(*device, GetConfig().connect_timeout));
  auto &ranges = RangeRegistry::Process();
  Rollback rollback;
  HZC_RETURN_IF_ERROR(ranges.Add(base, size, comm.serial()));
  rollback.Push([&] { (void)ranges.Remove(base); });
  auto ids = (*device)->RegisterRange(base, size);
  if (!ids.ok()) {
    return ids.status();
  }
  rollback.Commit();
  return Status::Ok();
}

Status LinkPeers(Communicator &comm) {
  auto transport = transport::ChosenTransport();
  if (!transport.ok()) {
    return transport.status();
  }
  if (*transport == transport::PeerTransport::kMemfd) {
    return comm.EstablishMemfdLinks();
  }
  auto device = Device::Process();
  if (!device.ok()) {
    return device.status();
  }
  return comm.EstablishLinks(*device, GetConfig().connect_timeout);
}

Status UnsetRange(uintptr_t base) {
  RangeRegistry::Range removed;
  return Withdraw(
      [&](RangeRegistry &ranges) { return ranges.Remove(base, &removed); },
      [&](RangeRegistry &ranges) { (void)ranges.Add(base, removed.size, removed.comm_id); },
      [&](Device &device) { return device.UnregisterRange(base); },
      [&](transport::MemfdExport &exported) { return exported.RemoveRange(base); });
}

Status Activate(const std::shared_ptr<Communicator> &comm, uintptr_t va, size_t size,
                void *handle) {
  if (std::string why = runtime::CheckMapped(reinterpret_cast<void *>(va), size, handle);
      !why.empty()) {
    return Error(HCCL_E_PARA, "{}", why);
  }
  auto transport = transport::ChosenTransport();
  if (!transport.ok()) {
    return transport.status();
  }
  auto &ranges = RangeRegistry::Process();
  Rollback rollback;
  HZC_RETURN_IF_ERROR(ranges.Activate(va, size, handle, comm));
  rollback.Push([&] { (void)ranges.Deactivate(va); });
  // With RDMA links the activated memory becomes a memory region whose rkey travels with the
  // activation.
  auto cookie = comm->RegisterMemory(va, size);
  if (!cookie.ok()) {
    return cookie.status();
  }
  rollback.Push([&] { comm->DropMemory(va); });
  HZC_RETURN_IF_ERROR(ActivateIn(*transport, va, size, *cookie));
  rollback.Commit();
  transport::Generation::BumpProcess();
  return Status::Ok();
}

Status Deactivate(uintptr_t va) {
  RangeRegistry::Activation removed;
  HZC_RETURN_IF_ERROR(
      Withdraw([&](RangeRegistry &ranges) { return ranges.Deactivate(va, &removed); },
               [&](RangeRegistry &ranges) {
                 (void)ranges.Activate(va, removed.size, removed.handle, removed.comm);
               },
               [&](Device &device) { return device.Deactivate(va); },
               [&](transport::MemfdExport &exported) { return exported.Deactivate(va); }));
  // A communicator destroyed meanwhile dropped its registrations already.
  if (const std::shared_ptr<Communicator> comm = removed.comm.lock()) {
    comm->DropMemory(va);
  }
  return Status::Ok();
}

}  // namespace hzc::memory
