// SPDX-License-Identifier: Apache-2.0
// One point-to-point item (HcclSend, HcclRecv, an item of HcclBatchSendRecv), shared by the
// transfers inside a server (coll/p2p.h) and across servers (coll/p2p_wire.h).
#pragma once

#include <hccl/hccl_types.h>

#include <cstdint>

namespace hzc::coll {

struct P2pItem {
  enum Dir : uint32_t { kSend = 0, kRecv = 1, kInvalid = 2 };
  Dir dir = kInvalid;
  void *buf = nullptr;
  uint64_t count = 0;
  HcclDataType dtype = HCCL_DATA_TYPE_INT8;
  uint32_t peer = 0;
  const char *peer_name = "remoteRank";  // the argument that named @peer, for messages
};

}  // namespace hzc::coll
