// SPDX-License-Identifier: Apache-2.0
// HCCL's one-sided calls: argument checks, then coll/one_sided.h; the batches now (NULL stream)
// or queued on the stream (api/queued.h).
#pragma GCC visibility push(default)
#include <hccl/hccl_one_sided_services.h>
#pragma GCC visibility pop

#include <memory>
#include <span>

#include "api/boundary.h"
#include "api/checks.h"
#include "api/queued.h"
#include "base/log.h"
#include "coll/one_sided.h"
#include "core/comm.h"
#include "runtime/stream.h"

namespace api = hzc::api;
using hzc::Status;

namespace {

using CommPtr = std::shared_ptr<hzc::Communicator>;

HcclResult Batch(const char *name, HcclComm comm, uint32_t remoteRank, HcclOneSideOpDesc *desc,
                 uint32_t descNum, aclrtStream stream, bool put) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    if (descNum == 0) {
      hzc::LogWarn("{}: descNum=0: nothing to transfer", name);
      return Status::Ok();
    }
    HZC_RETURN_IF_ERROR(api::NotNull(desc, "desc"));
    if (stream != nullptr && !hzc::runtime::IsStream(stream)) {
      return hzc::Error(HCCL_E_PARA, "stream={}: not NULL nor a live stream from aclrtCreateStream",
                        stream);
    }
    return api::WithComm(comm, [&](const CommPtr &c) -> Status {
      auto work = hzc::coll::PrepareBatch(*c, remoteRank, std::span(desc, descNum), put);
      HZC_RETURN_IF_ERROR(work.status());
      return api::OnStream(name, c, stream, std::move(*work));
    });
  });
}

}  // namespace

HcclResult HcclRegisterMem(HcclComm comm, uint32_t remoteRank, int type, void *addr, uint64_t size,
                           HcclMemDesc *desc) {
  return api::HcclGuard("HcclRegisterMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(addr, "addr"));
    HZC_RETURN_IF_ERROR(api::NotNull(desc, "desc"));
    return api::WithComm(comm, [&](const CommPtr &c) {
      return hzc::coll::RegisterMem(*c, remoteRank, type, addr, size, desc);
    });
  });
}

HcclResult HcclDeregisterMem(HcclComm comm, HcclMemDesc *desc) {
  return api::HcclGuard("HcclDeregisterMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(desc, "desc"));
    return api::WithComm(comm,
                         [&](const CommPtr &c) { return hzc::coll::DeregisterMem(*c, *desc); });
  });
}

HcclResult HcclExchangeMemDesc(HcclComm comm, uint32_t remoteRank, HcclMemDescs *local, int timeout,
                               HcclMemDescs *remote, uint32_t *actualNum) {
  return api::HcclGuard("HcclExchangeMemDesc", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(local, "local"));
    HZC_RETURN_IF_ERROR(api::NotNull(remote, "remote"));
    HZC_RETURN_IF_ERROR(api::NotNull(actualNum, "actualNum"));
    if (local->arrayLength != 0) {
      HZC_RETURN_IF_ERROR(api::NotNull(local->array, "local->array"));
    }
    if (remote->arrayLength != 0) {
      HZC_RETURN_IF_ERROR(api::NotNull(remote->array, "remote->array"));
    }
    if (timeout < -1) {
      return hzc::Error(HCCL_E_PARA,
                        "timeout={}: not seconds, 0 (HCCL_CONNECT_TIMEOUT) or -1 (no limit)",
                        timeout);
    }
    return api::WithComm(comm, [&](const CommPtr &c) {
      return hzc::coll::ExchangeMemDesc(*c, remoteRank, std::span(local->array, local->arrayLength),
                                        timeout, std::span(remote->array, remote->arrayLength),
                                        actualNum);
    });
  });
}

HcclResult HcclEnableMemAccess(HcclComm comm, HcclMemDesc *remoteMemDesc, HcclMem *remoteMem) {
  return api::HcclGuard("HcclEnableMemAccess", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(remoteMemDesc, "remoteMemDesc"));
    HZC_RETURN_IF_ERROR(api::NotNull(remoteMem, "remoteMem"));
    return api::WithComm(comm, [&](const CommPtr &c) {
      return hzc::coll::EnableMemAccess(*c, *remoteMemDesc, remoteMem);
    });
  });
}

HcclResult HcclDisableMemAccess(HcclComm comm, HcclMemDesc *remoteMemDesc) {
  return api::HcclGuard("HcclDisableMemAccess", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(remoteMemDesc, "remoteMemDesc"));
    return api::WithComm(
        comm, [&](const CommPtr &c) { return hzc::coll::DisableMemAccess(*c, *remoteMemDesc); });
  });
}

HcclResult HcclBatchPut(HcclComm comm, uint32_t remoteRank, HcclOneSideOpDesc *desc,
                        uint32_t descNum, aclrtStream stream) {
  return Batch("HcclBatchPut", comm, remoteRank, desc, descNum, stream, true);
}

HcclResult HcclBatchGet(HcclComm comm, uint32_t remoteRank, HcclOneSideOpDesc *desc,
                        uint32_t descNum, aclrtStream stream) {
  return Batch("HcclBatchGet", comm, remoteRank, desc, descNum, stream, false);
}

HcclResult HcclRegisterGlobalMem(const HcclMem *mem, void **memHandle) {
  return api::HcclGuard("HcclRegisterGlobalMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(mem, "mem"));
    HZC_RETURN_IF_ERROR(api::NotNull(memHandle, "memHandle"));
    auto handle = hzc::coll::RegisterGlobalMem(*mem);
    HZC_RETURN_IF_ERROR(handle.status());
    *memHandle = *handle;
    return Status::Ok();
  });
}

HcclResult HcclDeregisterGlobalMem(void *memHandle) {
  return api::HcclGuard("HcclDeregisterGlobalMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(memHandle, "memHandle"));
    return hzc::coll::DeregisterGlobalMem(memHandle);
  });
}

HcclResult HcclCommBindMem(HcclComm comm, void *memHandle) {
  return api::HcclGuard("HcclCommBindMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(memHandle, "memHandle"));
    return api::WithComm(comm, [&](const CommPtr &c) { return hzc::coll::BindMem(*c, memHandle); });
  });
}

HcclResult HcclCommUnbindMem(HcclComm comm, void *memHandle) {
  return api::HcclGuard("HcclCommUnbindMem", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(memHandle, "memHandle"));
    return api::WithComm(comm,
                         [&](const CommPtr &c) { return hzc::coll::UnbindMem(*c, memHandle); });
  });
}

HcclResult HcclCommPrepare(HcclComm comm, const HcclPrepareConfig *prepareConfig,
                           const int timeout) {
  return api::HcclGuard("HcclCommPrepare", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(prepareConfig, "prepareConfig"));
    if (prepareConfig->topoType != HCCL_TOPO_FULLMESH) {
      return hzc::Error(HCCL_E_PARA, "prepareConfig->topoType={}: not HCCL_TOPO_FULLMESH (0)",
                        static_cast<int>(prepareConfig->topoType));
    }
    if (timeout < -1) {
      return hzc::Error(HCCL_E_PARA,
                        "timeout={}: not seconds, 0 (HCCL_CONNECT_TIMEOUT) or -1 (no limit)",
                        timeout);
    }
    return api::WithComm(comm, [&](const CommPtr &c) { return hzc::coll::Prepare(*c, timeout); });
  });
}
