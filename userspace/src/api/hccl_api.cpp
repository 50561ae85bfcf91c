// SPDX-License-Identifier: Apache-2.0
// HCCL communicator and zero-copy memory-range calls: argument checks, then core/.
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include <unistd.h>

#include <cstring>
#include <functional>

#include "api/boundary.h"
#include "bootstrap/host_id.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_info.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/memory.h"

using hzc::Error;
using hzc::Status;
using hzc::api::HcclGuard;

namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// A 128-bit id derived from a rank table's text, the same in every rank that reads it.
hzc::bootstrap::UniqueId IdFromText(const std::string &text) {
  hzc::bootstrap::UniqueId id{};
  const size_t a = std::hash<std::string>{}("hzc-a:" + text);
  const size_t b = std::hash<std::string>{}("hzc-b:" + text);
  std::memcpy(id.data(), &a, sizeof(a));
  std::memcpy(id.data() + sizeof(a), &b, sizeof(b));
  return id;
}

}  // namespace

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
  return HcclGuard("HcclGetRootInfo", [&]() -> Status {
    if (rootInfo == nullptr) {
      return Error(HCCL_E_PTR, "rootInfo is null");
    }
    const hzc::Config &config = hzc::GetConfig();
    auto root = hzc::bootstrap::StartRoot(config.if_ip, config.connect_timeout);
    if (!root.ok()) {
      return root.status();
    }
    hzc::bootstrap::Encode(*root, rootInfo);
    return Status::Ok();
  });
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm) {
  return HcclGuard("HcclCommInitRootInfo", [&]() -> Status {
    if (rootInfo == nullptr) {
      return Error(HCCL_E_PTR, "rootInfo is null");
    }
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (nRanks == 0) {
      return Error(HCCL_E_PARA, "nRanks=0: must be at least 1");
    }
    if (rank >= nRanks) {
      return Error(HCCL_E_PARA, "rank={}: must be below nRanks={}", rank, nRanks);
    }
    hzc::SetLogRank(rank);
    auto root = hzc::bootstrap::Decode(*rootInfo);
    if (!root.ok()) {
      return root.status();
    }
    const hzc::bootstrap::Peer self{hzc::bootstrap::HostIdentity(),
                                    static_cast<uint32_t>(getpid())};
    auto peers = hzc::bootstrap::Join(*root, nRanks, rank, self, hzc::GetConfig().connect_timeout);
    if (!peers.ok()) {
      return Error(peers.status().code(), "rank {} of {}: {}", rank, nRanks,
                   peers.status().message());
    }
    auto c = std::make_shared<hzc::Communicator>(root->id, rank, std::move(*peers));
    hzc::LogInfo("HcclCommInitRootInfo: rank {} of {} in communicator {} ({} server(s))", rank,
                 nRanks, hzc::bootstrap::IdString(c->id()), c->ServerCount());
    *comm = hzc::CommRegistry::Process().Add(std::move(c));
    return Status::Ok();
  });
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  return HcclGuard("HcclCommInitClusterInfo", [&]() -> Status {
    if (clusterInfo == nullptr) {
      return Error(HCCL_E_PTR, "clusterInfo is null");
    }
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    auto table = hzc::bootstrap::LoadRankTable(clusterInfo);
    if (!table.ok()) {
      return table.status();
    }
    if (rank >= table->nranks) {
      return Error(HCCL_E_PARA, "rank={}: no such rank_id in {} (ranks 0..{})", rank, clusterInfo,
                   table->nranks - 1);
    }
    hzc::SetLogRank(rank);
    std::vector<hzc::bootstrap::Peer> peers(table->nranks);
    std::string canonical = table->version;
    for (uint32_t r = 0; r < table->nranks; ++r) {
      const auto &server = table->servers[table->server_of_rank[r]];
      peers[r].host = server.server_id;
      canonical += "|" + server.server_id;
    }
    auto c = std::make_shared<hzc::Communicator>(IdFromText(canonical), rank, std::move(peers));
    hzc::LogInfo("HcclCommInitClusterInfo: rank {} of {} from {} ({} server(s))", rank,
                 table->nranks, clusterInfo, c->ServerCount());
    *comm = hzc::CommRegistry::Process().Add(std::move(c));
    return Status::Ok();
  });
}

HcclResult HcclCommDestroy(HcclComm comm) {
  return HcclGuard("HcclCommDestroy", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    return hzc::CommRegistry::Process().Remove(comm);
  });
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) {
  return HcclGuard("HcclGetRankSize", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (rankSize == nullptr) {
      return Error(HCCL_E_PTR, "rankSize is null");
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    *rankSize = (*c)->size();
    return Status::Ok();
  });
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) {
  return HcclGuard("HcclGetRankId", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (rank == nullptr) {
      return Error(HCCL_E_PTR, "rank is null");
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    *rank = (*c)->rank();
    return Status::Ok();
  });
}

HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                  uint64_t flags) {
  return HcclGuard("HcclCommSetMemoryRange", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (baseVirPtr == nullptr) {
      return Error(HCCL_E_PTR, "baseVirPtr is null");
    }
    if (alignment != 0) {
      return Error(HCCL_E_PARA, "alignment={:#x}: reserved, must be 0", alignment);
    }
    if (flags != 0) {
      return Error(HCCL_E_PARA, "flags={:#x}: reserved, must be 0", flags);
    }
    if (size == 0) {
      return Error(HCCL_E_PARA, "size=0: must not be 0");
    }
    if (Addr(baseVirPtr) > UINTPTR_MAX - size) {
      return Error(HCCL_E_PARA, "baseVirPtr={} size={:#x}: range wraps around", baseVirPtr, size);
    }
    if (Addr(baseVirPtr) % PageSize() != 0) {
      return Error(HCCL_E_PARA, "baseVirPtr={}: not aligned to the page size {:#x}", baseVirPtr,
                   PageSize());
    }
    if (size % PageSize() != 0) {
      return Error(HCCL_E_PARA, "size={:#x}: not a multiple of the page size {:#x}", size,
                   PageSize());
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    return hzc::memory::SetRange(comm, **c, Addr(baseVirPtr), size);
  });
}

HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr) {
  return HcclGuard("HcclCommUnsetMemoryRange", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (baseVirPtr == nullptr) {
      return Error(HCCL_E_PTR, "baseVirPtr is null");
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    return hzc::memory::UnsetRange(Addr(baseVirPtr));
  });
}

HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                      aclrtDrvMemHandle handle, uint64_t flags) {
  return HcclGuard("HcclCommActivateCommMemory", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (virPtr == nullptr) {
      return Error(HCCL_E_PTR, "virPtr is null");
    }
    if (handle == nullptr) {
      return Error(HCCL_E_PTR, "handle is null");
    }
    if (size == 0) {
      return Error(HCCL_E_PARA, "size=0: must not be 0");
    }
    if (offset != 0) {
      return Error(HCCL_E_PARA, "offset={:#x}: reserved, must be 0", offset);
    }
    if (flags != 0) {
      return Error(HCCL_E_PARA, "flags={:#x}: reserved, must be 0", flags);
    }
    if (Addr(virPtr) > UINTPTR_MAX - size) {
      return Error(HCCL_E_PARA, "virPtr={} size={:#x}: range wraps around", virPtr, size);
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    return hzc::memory::Activate(*c, Addr(virPtr), size, handle);
  });
}

HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr) {
  return HcclGuard("HcclCommDeactivateCommMemory", [&]() -> Status {
    if (comm == nullptr) {
      return Error(HCCL_E_PTR, "comm is null");
    }
    if (virPtr == nullptr) {
      return Error(HCCL_E_PTR, "virPtr is null");
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    return hzc::memory::Deactivate(Addr(virPtr));
  });
}
