// SPDX-License-Identifier: Apache-2.0
// HCCL communicator calls beyond making one from root info or a rank table: communicators of
// one process (HcclCommInitAll) and sub-communicators, names, asynchronous errors, the
// configuration capability, and symmetric memory windows. Argument checks, then core/ (the
// window calls exchange through an AllGather of coll/).
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/boundary.h"
#include "api/checks.h"
#include "coll/call.h"
#include "coll/collectives.h"
#include "core/comm.h"
#include "core/comm_init.h"
#include "core/sym_window.h"
#include "runtime/device.h"

namespace api = hzc::api;
using hzc::Error;
using hzc::Status;
using hzc::coll::Call;
using hzc::coll::Kind;

namespace {

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// HcclCommInitAll's @devices: distinct device ids.
Status CheckDevices(uint32_t ndev, const int32_t *devices) {
  std::set<int32_t> seen;
  for (uint32_t i = 0; i < ndev; ++i) {
    if (devices[i] < 0 || static_cast<uint32_t>(devices[i]) >= hzc::runtime::DeviceCount()) {
      return Error(HCCL_E_PARA, "devices[{}]={}: not a device id (aclrtGetDeviceCount: {})", i,
                   devices[i], hzc::runtime::DeviceCount());
    }
    if (!seen.insert(devices[i]).second) {
      return Error(HCCL_E_PARA, "devices[{}]={}: listed twice", i, devices[i]);
    }
  }
  return Status::Ok();
}

// HcclCreateSubCommConfig's members: ascending ranks of @parent, the caller at @position.
Status CheckMembers(const hzc::Communicator &parent, uint32_t rankNum, const uint32_t *rankIds,
                    uint32_t position) {
  if (rankNum == 0 || rankNum > parent.size()) {
    return Error(HCCL_E_PARA, "rankNum={}: not in [1, {}] (the parent's rank count)", rankNum,
                 parent.size());
  }
  for (uint32_t i = 0; i < rankNum; ++i) {
    if (rankIds[i] >= parent.size()) {
      return Error(HCCL_E_PARA, "rankIds[{}]={}: not a rank of the parent (it has {})", i,
                   rankIds[i], parent.size());
    }
    if (i > 0 && rankIds[i] <= rankIds[i - 1]) {
      return Error(HCCL_E_PARA, "rankIds[{}]={}: the list must ascend without repeats", i,
                   rankIds[i]);
    }
  }
  if (position >= rankNum) {
    return Error(HCCL_E_PARA, "subCommRankId={}: must be below rankNum={}", position, rankNum);
  }
  if (rankIds[position] != parent.rank()) {
    return Error(HCCL_E_PARA, "rankIds[subCommRankId={}]={}: not this rank ({} of the parent)",
                 position, rankIds[position], parent.rank());
  }
  return Status::Ok();
}

}  // namespace

namespace {

std::atomic<int32_t> g_deterministic{0};

Status CheckConfig(HcclConfig config) {
  if (config != HCCL_DETERMINISTIC) {
    return Error(HCCL_E_PARA, "config={}: not HCCL_DETERMINISTIC", static_cast<int>(config));
  }
  return Status::Ok();
}

}  // namespace

HcclResult HcclSetConfig(HcclConfig config, union HcclConfigValue configValue) {
  return api::HcclGuard("HcclSetConfig", [&]() -> Status {
    HZC_RETURN_IF_ERROR(CheckConfig(config));
    if (configValue.value < 0 || configValue.value > 2) {
      return Error(HCCL_E_PARA, "configValue.value={}: HCCL_DETERMINISTIC is 0, 1 or 2",
                   configValue.value);
    }
    g_deterministic = configValue.value;
    return Status::Ok();
  });
}

HcclResult HcclGetConfig(HcclConfig config, union HcclConfigValue *configValue) {
  return api::HcclGuard("HcclGetConfig", [&]() -> Status {
    HZC_RETURN_IF_ERROR(CheckConfig(config));
    HZC_RETURN_IF_ERROR(api::NotNull(configValue, "configValue"));
    configValue->value = g_deterministic;
    return Status::Ok();
  });
}

uint32_t HcclGetCommConfigCapability(void) {
  return HCCL_COMM_CONFIG_RESERVED;
}

HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) {
  return api::HcclGuard("HcclCommInitAll", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(devices, "devices"));
    HZC_RETURN_IF_ERROR(api::NotNull(comms, "comms"));
    if (ndev == 0) {
      return Error(HCCL_E_PARA, "ndev=0: must be at least 1");
    }
    HZC_RETURN_IF_ERROR(CheckDevices(ndev, devices));
    auto made = hzc::AllInProcess(ndev);
    if (!made.ok()) {
      return made.status();
    }
    for (uint32_t i = 0; i < ndev; ++i) {
      comms[i] = (*made)[i];
    }
    return Status::Ok();
  });
}

HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                   uint64_t subCommId, uint32_t subCommRankId,
                                   HcclCommConfig *config, HcclComm *subComm) {
  return api::HcclGuard("HcclCreateSubCommConfig", [&]() -> Status {
    // A rank outside the sub-communicator passes neither a list nor an id, and gets nothing.
    constexpr uint64_t kNotMember = 0xFFFFFFFF;
    if ((rankIds == nullptr) != (subCommId == kNotMember)) {
      return Error(HCCL_E_PARA,
                   "rankIds={} subCommId={:#x}: a member passes both, a rank outside the "
                   "sub-communicator passes rankIds NULL and subCommId 0xFFFFFFFF",
                   static_cast<const void *>(rankIds), subCommId);
    }
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(*comm, "*comm"));
    if (rankIds == nullptr) {
      return api::WithComm(*comm, [](const auto &) { return Status::Ok(); });
    }
    HZC_RETURN_IF_ERROR(api::NotNull(subComm, "subComm"));
    return api::WithComm(*comm, [&](const auto &parent) -> Status {
      HZC_RETURN_IF_ERROR(CheckMembers(*parent, rankNum, rankIds, subCommRankId));
      auto options = hzc::CommOptions::FromConfig(config);
      if (!options.ok()) {
        return options.status();
      }
      auto made = hzc::SubCommunicator(*comm, std::vector<uint32_t>(rankIds, rankIds + rankNum),
                                       subCommId, subCommRankId, std::move(*options));
      if (!made.ok()) {
        return made.status();
      }
      *subComm = *made;
      return Status::Ok();
    });
  });
}

HcclResult HcclGetCommName(HcclComm comm, char *commName) {
  return api::HcclGuard("HcclGetCommName", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(commName, "commName"));
    return api::WithComm(comm, [&](const auto &c) {
      const std::string name = c->Name();
      const size_t n = std::min(name.size(), size_t{COMM_NAME_MAX_LENGTH - 1});
      name.copy(commName, n);
      commName[n] = '\0';
      return Status::Ok();
    });
  });
}

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError) {
  return api::HcclGuard("HcclGetCommAsyncError", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(asyncError, "asyncError"));
    return api::WithComm(comm, [&](const auto &c) {
      *asyncError = c->AsyncError();
      return Status::Ok();
    });
  });
}

namespace {

// The exchange of the window calls: an AllGather of bytes on @c (coll/collectives.h).
hzc::sym_window::AllGather GatherOn(hzc::Communicator &c) {
  return [&c](const void *mine, void *all, size_t bytes) {
    Call call;
    call.kind = Kind::kAllGather;
    call.send = mine;
    call.recv = all;
    call.count = bytes;
    call.dtype = HCCL_DATA_TYPE_UINT8;
    return hzc::coll::Run(c, call);
  };
}

// HcclCommSymWinRegister's own checks of its arguments (the others but @comm).
Status CheckRegister(const void *addr, uint64_t size, const HcclCommSymWindow *winHandle,
                     uint32_t flag) {
  HZC_RETURN_IF_ERROR(api::NotNull(addr, "addr"));
  HZC_RETURN_IF_ERROR(api::NotNull(winHandle, "winHandle"));
  HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
  HZC_RETURN_IF_ERROR(api::NoWrap(addr, size, "addr", "window wraps around"));
  if (flag == HCCL_WIN_DEFAULT) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "flag=0 (HCCL_WIN_DEFAULT): not supported, pass HCCL_WIN_COLL_SYMMETRIC (1)");
  }
  if (flag != HCCL_WIN_COLL_SYMMETRIC) {
    return Error(HCCL_E_PARA, "flag={}: not HCCL_WIN_COLL_SYMMETRIC (1)", flag);
  }
  return Status::Ok();
}

}  // namespace

HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                  HcclCommSymWindow *winHandle, uint32_t flag) {
  return api::HcclGuard("HcclCommSymWinRegister", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    return api::WithComm(comm, [&](const auto &c) -> Status {
      // A rank whose arguments are bad still joins the exchange, so the others fail at once.
      const Status own = CheckRegister(addr, size, winHandle, flag);
      const hzc::sym_window::Request req{
          .handle = comm, .addr = Addr(addr), .size = size, .flag = flag};
      auto h = hzc::sym_window::Register(c, req, own, GatherOn(*c));
      if (!h.ok()) {
        return h.status();
      }
      *winHandle = *h;
      return Status::Ok();
    });
  });
}

HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle) {
  return api::HcclGuard("HcclCommSymWinDeregister", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(winHandle, "winHandle"));
    auto comm = hzc::sym_window::CommOf(winHandle);
    if (!comm.ok()) {
      return comm.status();
    }
    return api::WithComm(*comm, [&](const auto &c) {
      return hzc::sym_window::Deregister(*c, winHandle, GatherOn(*c));
    });
  });
}

HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size, HcclCommSymWindow *winHandle,
                             size_t *offset) {
  return api::HcclGuard("HcclCommSymWinGet", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(ptr, "ptr"));
    HZC_RETURN_IF_ERROR(api::NotNull(winHandle, "winHandle"));
    HZC_RETURN_IF_ERROR(api::NotNull(offset, "offset"));
    HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
    HZC_RETURN_IF_ERROR(api::NoWrap(ptr, size, "ptr", "range wraps around"));
    return api::WithComm(comm, [&](const auto &c) -> Status {
      auto h = hzc::sym_window::Find(*c, Addr(ptr), size, offset);
      if (!h.ok()) {
        return h.status();
      }
      *winHandle = *h;
      return Status::Ok();
    });
  });
}

HcclResult HcclSymWinGetPeerPointer(HcclCommSymWindow winHandle, size_t offset, uint32_t peerRank,
                                    void **ptr) {
  return api::HcclGuard("HcclSymWinGetPeerPointer", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(winHandle, "winHandle"));
    HZC_RETURN_IF_ERROR(api::NotNull(ptr, "ptr"));
    auto comm = hzc::sym_window::CommOf(winHandle);
    if (!comm.ok()) {
      return comm.status();
    }
    return api::WithComm(*comm, [&](const auto &c) -> Status {
      auto p = hzc::sym_window::PeerPointer(*c, winHandle, offset, peerRank);
      if (!p.ok()) {
        return p.status();
      }
      *ptr = *p;
      return Status::Ok();
    });
  });
}
