// SPDX-License-Identifier: Apache-2.0
// HCCL collectives: argument checks, then coll/, now (NULL stream) or queued on the stream
// (api/queued.h).
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "api/queued.h"
#include "coll/collectives.h"
#include "core/comm.h"
#include "runtime/stream.h"

#include <initializer_list>
#include <memory>
#include <vector>

namespace api = hzc::api;
using hzc::Status;
using hzc::coll::Call;
using hzc::coll::Kind;

namespace {

// An array argument of a call and its name.
struct Array {
  const void *p;
  const char *name;
};

// @call's buffers, as rank @rank makes it: Scatter's sendBuf and Reduce's recvBuf matter only
// on the root (the others may pass NULL).
Status CheckBuffers(const Call &call, uint32_t rank) {
  switch (call.kind) {
    case Kind::kBarrier:
      return Status::Ok();
    case Kind::kBroadcast:
      return api::NotNull(call.send, "buf");
    case Kind::kScatter:
      if (rank == call.root) {
        HZC_RETURN_IF_ERROR(api::NotNull(call.send, "sendBuf"));
      }
      return api::NotNull(call.recv, "recvBuf");
    case Kind::kReduce:
      HZC_RETURN_IF_ERROR(api::NotNull(call.send, "sendBuf"));
      return rank == call.root ? api::NotNull(call.recv, "recvBuf") : Status::Ok();
    default:
      HZC_RETURN_IF_ERROR(api::NotNull(call.send, "sendBuf"));
      return api::NotNull(call.recv, "recvBuf");
  }
}

// @call's buffers and @arrays (of rank @rank) and @stream.
Status CheckCall(aclrtStream stream, const Call &call, uint32_t rank,
                 std::initializer_list<Array> arrays) {
  HZC_RETURN_IF_ERROR(CheckBuffers(call, rank));
  for (const Array &a : arrays) {
    HZC_RETURN_IF_ERROR(api::NotNull(a.p, a.name));
  }
  if (stream != nullptr && !hzc::runtime::IsStream(stream)) {
    return hzc::Error(HCCL_E_PARA, "stream={}: not NULL nor a live stream from aclrtCreateStream",
                      stream);
  }
  return Status::Ok();
}

// A copy of @call (on a communicator of @n ranks) whose arrays are copies in @store, for a
// call that runs after its caller's arrays may be gone.
Call WithOwnArrays(const Call &call, uint32_t n, std::vector<uint64_t> *store) {
  const uint64_t *Call::*const fields[] = {&Call::send_counts, &Call::send_displs,
                                           &Call::recv_counts, &Call::recv_displs,
                                           &Call::count_matrix};
  store->reserve(size_t{n} * (4 + n));  // no reallocation below: the pointers stay valid
  Call own = call;
  for (auto field : fields) {
    if (call.*field != nullptr) {
      const size_t len = field == &Call::count_matrix ? size_t{n} * n : n;
      own.*field = store->data() + store->size();
      store->insert(store->end(), call.*field, call.*field + len);
    }
  }
  return own;
}

// The C function @name: check @comm, @call's buffers, @arrays and @stream, then run @call now
// (NULL stream) or queue it on @stream (api/queued.h). A bad buffer or stream on a live
// communicator is refused as coll::Run refuses its own checks (coll/collectives.h: the other
// ranks fail the call too); on a stream the refusal is queued behind the stream's earlier
// calls. The calls below list Call's first fields in order: kind, send, recv, count, dtype,
// op, root.
HcclResult Collective(const char *name, HcclComm comm, aclrtStream stream, const Call &call,
                      std::initializer_list<Array> arrays = {}) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    return api::WithComm(comm, [&](const std::shared_ptr<hzc::Communicator> &c) -> Status {
      Status st = CheckCall(stream, call, c->rank(), arrays);
      if (st.ok() && stream != nullptr) {
        st = hzc::coll::Validate(*c, call);  // the caller gets its own errors from the call
      }
      if (!st.ok()) {
        if (stream == nullptr || !hzc::runtime::IsStream(stream)) {
          return hzc::coll::Refuse(*c, st);
        }
        HZC_RETURN_IF_ERROR(api::OnStream(name, c, stream, [c, st] {
          (void)hzc::coll::Refuse(*c, st);  // the caller got @st already
          return Status::Ok();
        }));
        return st;
      }
      if (stream == nullptr) {
        return hzc::coll::Run(*c, call);
      }
      auto store = std::make_shared<std::vector<uint64_t>>();
      const Call own = WithOwnArrays(call, c->size(), store.get());
      return api::OnStream(name, c, stream, [c, own, store] { return hzc::coll::Run(*c, own); });
    });
  });
}

// The element counts and displacements of the vector collectives (uint64_t arrays).
const uint64_t *U64(const void *p) {
  return static_cast<const uint64_t *>(p);
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

HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream) {
  return Collective("HcclReduce", comm, stream,
                    {Kind::kReduce, sendBuf, recvBuf, count, dataType, op, root});
}

HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                       uint32_t root, HcclComm comm, aclrtStream stream) {
  return Collective("HcclScatter", comm, stream,
                    {Kind::kScatter, sendBuf, recvBuf, recvCount, dataType, HCCL_REDUCE_SUM, root});
}

HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                          const void *recvDispls, HcclDataType dataType, HcclComm comm,
                          aclrtStream stream) {
  return Collective("HcclAllGatherV", comm, stream,
                    {.kind = Kind::kAllGatherV,
                     .send = sendBuf,
                     .recv = recvBuf,
                     .count = sendCount,
                     .dtype = dataType,
                     .recv_counts = U64(recvCounts),
                     .recv_displs = U64(recvDispls)},
                    {{recvCounts, "recvCounts"}, {recvDispls, "recvDispls"}});
}

HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                              void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                              HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  return Collective("HcclReduceScatterV", comm, stream,
                    {.kind = Kind::kReduceScatterV,
                     .send = sendBuf,
                     .recv = recvBuf,
                     .count = recvCount,
                     .dtype = dataType,
                     .op = op,
                     .send_counts = U64(sendCounts),
                     .send_displs = U64(sendDispls)},
                    {{sendCounts, "sendCounts"}, {sendDispls, "sendDispls"}});
}

HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, aclrtStream stream) {
  return Collective("HcclAlltoAll", comm, stream,
                    {.kind = Kind::kAlltoAll,
                     .send = sendBuf,
                     .recv = const_cast<void *>(recvBuf),
                     .count = sendCount,
                     .dtype = sendType,
                     .recv_count = recvCount,
                     .recv_dtype = recvType});
}

HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                         HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                         const void *rdispls, HcclDataType recvType, HcclComm comm,
                         aclrtStream stream) {
  return Collective("HcclAlltoAllV", comm, stream,
                    {.kind = Kind::kAlltoAllV,
                     .send = sendBuf,
                     .recv = const_cast<void *>(recvBuf),
                     .dtype = sendType,
                     .send_counts = U64(sendCounts),
                     .send_displs = U64(sdispls),
                     .recv_counts = U64(recvCounts),
                     .recv_displs = U64(rdispls),
                     .recv_dtype = recvType},
                    {{sendCounts, "sendCounts"},
                     {sdispls, "sdispls"},
                     {recvCounts, "recvCounts"},
                     {rdispls, "rdispls"}});
}

HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                          const void *recvBuf, HcclDataType recvType, HcclComm comm,
                          aclrtStream stream) {
  return Collective("HcclAlltoAllVC", comm, stream,
                    {.kind = Kind::kAlltoAllVC,
                     .send = sendBuf,
                     .recv = const_cast<void *>(recvBuf),
                     .dtype = sendType,
                     .count_matrix = U64(sendCountMatrix),
                     .recv_dtype = recvType},
                    {{sendCountMatrix, "sendCountMatrix"}});
}
