// SPDX-License-Identifier: Apache-2.0
// HCCL collectives: argument checks, then coll/. Every call is complete when it returns;
// @stream may be NULL or a stream from aclrtCreateStream.
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "coll/collectives.h"
#include "coll/stream.h"
#include "core/comm.h"

using hzc::Error;
using hzc::Status;
using hzc::api::HcclGuard;
using hzc::coll::Call;
using hzc::coll::Kind;

namespace {

Status RunChecked(HcclComm comm, aclrtStream stream, const Call &call) {
  if (comm == nullptr) {
    return Error(HCCL_E_PTR, "comm is null");
  }
  if (stream != nullptr && !hzc::coll::IsStream(stream)) {
    return Error(HCCL_E_PARA, "stream={}: not NULL nor a live stream from aclrtCreateStream",
                 stream);
  }
  auto c = hzc::CommRegistry::Process().Get(comm);
  if (!c.ok()) {
    return c.status();
  }
  return hzc::coll::Run(**c, call);
}

}  // namespace

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  return HcclGuard("HcclAllReduce", [&]() -> Status {
    if (sendBuf == nullptr) {
      return Error(HCCL_E_PTR, "sendBuf is null");
    }
    if (recvBuf == nullptr) {
      return Error(HCCL_E_PTR, "recvBuf is null");
    }
    return RunChecked(comm, stream,
                      Call{.kind = Kind::kAllReduce,
                           .send = sendBuf,
                           .recv = recvBuf,
                           .count = count,
                           .dtype = dataType,
                           .op = op,
                           .root = 0});
  });
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream) {
  return HcclGuard("HcclBroadcast", [&]() -> Status {
    if (buf == nullptr) {
      return Error(HCCL_E_PTR, "buf is null");
    }
    return RunChecked(comm, stream,
                      Call{.kind = Kind::kBroadcast,
                           .send = buf,
                           .recv = buf,
                           .count = count,
                           .dtype = dataType,
                           .op = HCCL_REDUCE_SUM,
                           .root = root});
  });
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream) {
  return HcclGuard("HcclReduceScatter", [&]() -> Status {
    if (sendBuf == nullptr) {
      return Error(HCCL_E_PTR, "sendBuf is null");
    }
    if (recvBuf == nullptr) {
      return Error(HCCL_E_PTR, "recvBuf is null");
    }
    return RunChecked(comm, stream,
                      Call{.kind = Kind::kReduceScatter,
                           .send = sendBuf,
                           .recv = recvBuf,
                           .count = recvCount,
                           .dtype = dataType,
                           .op = op,
                           .root = 0});
  });
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream) {
  return HcclGuard("HcclAllGather", [&]() -> Status {
    if (sendBuf == nullptr) {
      return Error(HCCL_E_PTR, "sendBuf is null");
    }
    if (recvBuf == nullptr) {
      return Error(HCCL_E_PTR, "recvBuf is null");
    }
    return RunChecked(comm, stream,
                      Call{.kind = Kind::kAllGather,
                           .send = sendBuf,
                           .recv = recvBuf,
                           .count = sendCount,
                           .dtype = dataType,
                           .op = HCCL_REDUCE_SUM,
                           .root = 0});
  });
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  return HcclGuard("HcclBarrier", [&]() -> Status {
    return RunChecked(comm, stream, Call{.kind = Kind::kBarrier});
  });
}
