// SPDX-License-Identifier: Apache-2.0
// HCCL communicator and zero-copy memory-range calls: argument checks, then core/.
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include <unistd.h>

#include <utility>

#include "api/boundary.h"
#include "api/checks.h"
#include "coll/one_sided.h"
#include "core/comm.h"
#include "core/comm_init.h"
#include "core/memory.h"
#include "core/sym_window.h"

namespace api = hzc::api;
using hzc::Error;
using hzc::Status;

namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// Store a new communicator's handle in *@out.
Status Publish(hzc::Expected<HcclComm> made, HcclComm *out) {
  if (!made.ok()) {
    return made.status();
  }
  *out = *made;
  return Status::Ok();
}

// HcclCommSetMemoryRange's checks of [base, base + size).
Status CheckRange(void *base, size_t size) {
  HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
  HZC_RETURN_IF_ERROR(api::NoWrap(base, size, "baseVirPtr", "range wraps around"));
  if (Addr(base) % PageSize() != 0) {
    return Error(HCCL_E_PARA, "baseVirPtr={}: not aligned to the page size {:#x}", base,
                 PageSize());
  }
  if (size % PageSize() != 0) {
    return Error(HCCL_E_PARA, "size={:#x}: not a multiple of the page size {:#x}", size,
                 PageSize());
  }
  return Status::Ok();
}

// The C function @name: *@out (argument @out_name) = (@comm's communicator.*@get)().
HcclResult RankQuery(const char *name, HcclComm comm, uint32_t *out, const char *out_name,
                     uint32_t (hzc::Communicator::*get)() const) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(out, out_name));
    return api::WithComm(comm, [&](const auto &c) {
      *out = ((*c).*get)();
      return Status::Ok();
    });
  });
}

}  // namespace

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
  return api::HcclGuard("HcclGetRootInfo", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(rootInfo, "rootInfo"));
    return hzc::NewRootInfo(rootInfo);
  });
}

namespace {

HcclResult InitRootInfo(const char *name, uint32_t nRanks, const HcclRootInfo *rootInfo,
                        uint32_t rank, const HcclCommConfig *config, HcclComm *comm) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(rootInfo, "rootInfo"));
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    if (nRanks == 0) {
      return Error(HCCL_E_PARA, "nRanks=0: must be at least 1");
    }
    if (rank >= nRanks) {
      return Error(HCCL_E_PARA, "rank={}: must be below nRanks={}", rank, nRanks);
    }
    auto options = hzc::CommOptions::FromConfig(config);
    if (!options.ok()) {
      return options.status();
    }
    return Publish(hzc::FromRootInfo(*rootInfo, nRanks, rank, std::move(*options)), comm);
  });
}

HcclResult InitClusterInfo(const char *name, const char *clusterInfo, uint32_t rank,
                           const HcclCommConfig *config, HcclComm *comm) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(clusterInfo, "clusterInfo"));
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    auto options = hzc::CommOptions::FromConfig(config);
    if (!options.ok()) {
      return options.status();
    }
    return Publish(hzc::FromRankTable(clusterInfo, rank, std::move(*options)), comm);
  });
}

}  // namespace

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm) {
  return InitRootInfo("HcclCommInitRootInfo", nRanks, rootInfo, rank, nullptr, comm);
}

HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm) {
  return InitRootInfo("HcclCommInitRootInfoConfig", nRanks, rootInfo, rank, config, comm);
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  return InitClusterInfo("HcclCommInitClusterInfo", clusterInfo, rank, nullptr, comm);
}

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm) {
  return InitClusterInfo("HcclCommInitClusterInfoConfig", clusterInfo, rank, config, comm);
}

HcclResult HcclCommDestroy(HcclComm comm) {
  return api::HcclGuard("HcclCommDestroy", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    // Bound global memory holds the communicator, as in HCCL (one closed by a destroy that gave
    // up waiting has passed this check).
    if (auto c = hzc::CommRegistry::Process().Get(comm); c.ok()) {
      HZC_RETURN_IF_ERROR(hzc::coll::NoneBound(**c));
    }
    // Refuses new calls on @comm at once, then waits for the calls in progress and those queued
    // on streams (core/comm.h, CommRegistry::Remove).
    uint64_t serial = 0;
    HZC_RETURN_IF_ERROR(hzc::CommRegistry::Process().Remove(comm, &serial));
    hzc::sym_window::Forget(serial);  // its windows go with it: deactivated, ranges unset
    return Status::Ok();
  });
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) {
  return RankQuery("HcclGetRankSize", comm, rankSize, "rankSize", &hzc::Communicator::size);
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) {
  return RankQuery("HcclGetRankId", comm, rank, "rank", &hzc::Communicator::rank);
}

HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                  uint64_t flags) {
  return api::HcclGuard("HcclCommSetMemoryRange", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(baseVirPtr, "baseVirPtr"));
    HZC_RETURN_IF_ERROR(api::Reserved(alignment, "alignment"));
    HZC_RETURN_IF_ERROR(api::Reserved(flags, "flags"));
    HZC_RETURN_IF_ERROR(CheckRange(baseVirPtr, size));
    return api::WithComm(comm, [&](const auto &c) {
      return hzc::memory::SetRange(comm, *c, Addr(baseVirPtr), size);
    });
  });
}

HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr) {
  return api::HcclGuard("HcclCommUnsetMemoryRange", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(baseVirPtr, "baseVirPtr"));
    HZC_RETURN_IF_ERROR(hzc::sym_window::NotInWindow(Addr(baseVirPtr), "baseVirPtr"));
    return api::WithComm(comm,
                         [&](const auto &) { return hzc::memory::UnsetRange(Addr(baseVirPtr)); });
  });
}

HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                      aclrtDrvMemHandle handle, uint64_t flags) {
  return api::HcclGuard("HcclCommActivateCommMemory", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(virPtr, "virPtr"));
    HZC_RETURN_IF_ERROR(api::NotNull(handle, "handle"));
    HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
    HZC_RETURN_IF_ERROR(api::Reserved(offset, "offset"));
    HZC_RETURN_IF_ERROR(api::Reserved(flags, "flags"));
    HZC_RETURN_IF_ERROR(api::NoWrap(virPtr, size, "virPtr", "range wraps around"));
    return api::WithComm(
        comm, [&](const auto &c) { return hzc::memory::Activate(c, Addr(virPtr), size, handle); });
  });
}

HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr) {
  return api::HcclGuard("HcclCommDeactivateCommMemory", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(virPtr, "virPtr"));
    HZC_RETURN_IF_ERROR(hzc::sym_window::NotInWindow(Addr(virPtr), "virPtr"));
    return api::WithComm(comm, [&](const auto &) { return hzc::memory::Deactivate(Addr(virPtr)); });
  });
}
