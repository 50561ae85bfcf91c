// SPDX-License-Identifier: Apache-2.0
// HCCL collectives: argument checks, then coll/. Every call is complete when it returns;
// @stream may be NULL or a stream from aclrtCreateStream.
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "coll/collectives.h"
#include "core/comm.h"
#include "runtime/stream.h"

namespace api = hzc::api;
using hzc::Status;
using hzc::coll::Call;
using hzc::coll::Kind;

namespace {

// @call's buffers and @stream.
Status CheckCall(aclrtStream stream, const Call &call) {
  if (call.kind == Kind::kBroadcast) {
    HZC_RETURN_IF_ERROR(api::NotNull(call.send, "buf"));
  } else if (call.kind != Kind::kBarrier) {
    HZC_RETURN_IF_ERROR(api::NotNull(call.send, "sendBuf"));
    HZC_RETURN_IF_ERROR(api::NotNull(call.recv, "recvBuf"));
  }
  if (stream != nullptr && !hzc::runtime::IsStream(stream)) {
    return hzc::Error(HCCL_E_PARA, "stream={}: not NULL nor a live stream from aclrtCreateStream",
                      stream);
  }
  return Status::Ok();
}

// The C function @name: check @comm, @call's buffers and @stream, then run @call. A bad
// buffer or stream on a live communicator is refused as coll::Run refuses its own checks
// (coll/collectives.h: the other ranks fail the call too). The calls below list Call's fields
// in order: kind, send, recv, count, dtype, op, root.
HcclResult Collective(const char *name, HcclComm comm, aclrtStream stream, const Call &call) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    return api::WithComm(comm, [&](const auto &c) {
      if (Status st = CheckCall(stream, call); !st.ok()) {
        return hzc::coll::Refuse(*c, st);
      }
      return hzc::coll::Run(*c, call);
    });
  });
}

}  // namespace

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  return Collective("HcclAllReduce", comm, stream,
                    {Kind::kAllReduce, sendBuf, recvBuf, count, dataType, op, 0});
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream) {
  return Collective("HcclBroadcast", comm, stream,
                    {Kind::kBroadcast, buf, buf, count, dataType, HCCL_REDUCE_SUM, root});
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream) {
  return Collective("HcclReduceScatter", comm, stream,
                    {Kind::kReduceScatter, sendBuf, recvBuf, recvCount, dataType, op, 0});
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream) {
  return Collective("HcclAllGather", comm, stream,
                    {Kind::kAllGather, sendBuf, recvBuf, sendCount, dataType, HCCL_REDUCE_SUM, 0});
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  return Collective("HcclBarrier", comm, stream, Call{.kind = Kind::kBarrier});
}
