// SPDX-License-Identifier: Apache-2.0
// HCCL point-to-point calls: argument checks, then coll/p2p.h, now (NULL stream) or queued on
// the stream (api/queued.h).
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

#include <memory>
#include <string>
#include <vector>

#include "api/boundary.h"
#include "api/checks.h"
#include "api/queued.h"
#include "coll/p2p.h"
#include "core/comm.h"
#include "runtime/stream.h"

namespace api = hzc::api;
using hzc::Status;
using hzc::coll::P2pItem;

namespace {

// The names of a call's arguments, for messages.
struct Names {
  const char *buf;
  const char *peer;
};

P2pItem ToItem(const HcclSendRecvItem &in, const char *peer_name) {
  P2pItem out;
  out.dir = in.sendRecvType == HCCL_SEND   ? P2pItem::kSend
            : in.sendRecvType == HCCL_RECV ? P2pItem::kRecv
                                           : P2pItem::kInvalid;
  out.buf = in.buf;
  out.count = in.count;
  out.dtype = in.dataType;
  out.peer = in.remoteRank;
  out.peer_name = peer_name;
  return out;
}

// The buffers of @items and @stream.
Status CheckBuffers(aclrtStream stream, const std::vector<P2pItem> &items, const char *buf_name) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].buf == nullptr && items[i].count != 0) {
      return items.size() == 1
                 ? hzc::Error(HCCL_E_PTR, "{} is null", buf_name)
                 : hzc::Error(HCCL_E_PTR, "sendRecvInfo[{}]: {} is null", i, buf_name);
    }
  }
  if (stream != nullptr && !hzc::runtime::IsStream(stream)) {
    return hzc::Error(HCCL_E_PARA, "stream={}: not NULL nor a live stream from aclrtCreateStream",
                      stream);
  }
  return Status::Ok();
}

// The own arguments of @items (coll::ValidateP2p of the ones that move data).
Status Validate(const hzc::Communicator &comm, const std::vector<P2pItem> &items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].count == 0) {
      continue;
    }
    if (Status st = hzc::coll::ValidateP2p(comm, items[i]); !st.ok()) {
      return items.size() == 1 ? st
                               : hzc::Error(st.code(), "sendRecvInfo[{}]: {}", i, st.message());
    }
  }
  return Status::Ok();
}

// The C function @name: check @comm, the @n items at @info and @stream, then run the items
// together now (NULL stream) or queue them on @stream (api/queued.h; the items are copied,
// the buffers are the caller's until the stream ran the call). Own-argument failures on a live
// communicator are refused (coll/p2p.h: the peers with an open channel fail their matching
// calls too), on a stream behind the stream's earlier calls. HcclSend and HcclRecv are batches
// of one item.
HcclResult PointToPoint(const char *name, HcclComm comm, aclrtStream stream,
                        const HcclSendRecvItem *info, uint32_t n, Names names) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    if (n != 0) {
      HZC_RETURN_IF_ERROR(api::NotNull(info, "sendRecvInfo"));
    }
    return api::WithComm(comm, [&](const std::shared_ptr<hzc::Communicator> &c) -> Status {
      // Reused call after call: a call allocates nothing once the thread made one this long.
      thread_local std::vector<P2pItem> items;
      items.clear();
      for (uint32_t i = 0; i < n; ++i) {
        items.push_back(ToItem(info[i], names.peer));
      }
      Status st = CheckBuffers(stream, items, names.buf);
      if (st.ok() && stream != nullptr) {
        st = Validate(*c, items);  // the caller gets its own errors from the call
      }
      if (!st.ok()) {
        if (stream == nullptr || !hzc::runtime::IsStream(stream)) {
          return hzc::coll::RefuseP2p(*c, items, st);
        }
        HZC_RETURN_IF_ERROR(api::OnStream(name, c, stream, [c, items = items, st] {
          (void)hzc::coll::RefuseP2p(*c, items, st);  // the caller got @st already
          return Status::Ok();
        }));
        return st;
      }
      if (stream == nullptr) {
        return hzc::coll::RunP2p(*c, items);
      }
      return api::OnStream(name, c, stream,
                           [c, items = items] { return hzc::coll::RunP2p(*c, items); });
    });
  });
}

}  // namespace

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, aclrtStream stream) {
  const HcclSendRecvItem item{HCCL_SEND, sendBuf, count, dataType, destRank};
  return PointToPoint("HcclSend", comm, stream, &item, 1, {"sendBuf", "destRank"});
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, aclrtStream stream) {
  const HcclSendRecvItem item{HCCL_RECV, recvBuf, count, dataType, srcRank};
  return PointToPoint("HcclRecv", comm, stream, &item, 1, {"recvBuf", "srcRank"});
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                             aclrtStream stream) {
  return PointToPoint("HcclBatchSendRecv", comm, stream, sendRecvInfo, itemNum,
                      {"buf", "remoteRank"});
}
