// SPDX-License-Identifier: Apache-2.0
// HcclSend, HcclRecv and HcclBatchSendRecv on the host: argument checks, and transfers between
// two ranks of this process (threads; staging path, no module needed).
#include <acl/acl.h>
#include <hccl/hccl.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "one_rank.h"

namespace {

class P2pApiTest : public hzc::test::OneRankTest {};

TEST_F(P2pApiTest, OwnArgumentsAreCheckedBeforeAnyPeer) {
  ExpectErrorLog("HcclSend: ");
  ExpectErrorLog("HcclRecv: ");
  ExpectErrorLog("HcclBatchSendRecv: ");
  ExpectErrorLog("HcclSend: count=9223372036854775807: the buffer wraps around");
  ExpectErrorLog("HcclSend: destRank=0: this rank itself");
  ExpectErrorLog("HcclRecv: srcRank=1: must be below the rank count 1");
  ExpectErrorLog("HcclBatchSendRecv: sendRecvType=2: not HCCL_SEND");
  float x[4] = {};
  EXPECT_EQ(HcclSend(x, 1, HCCL_DATA_TYPE_FP32, 0, nullptr, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclSend(nullptr, 1, HCCL_DATA_TYPE_FP32, 0, comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclRecv(nullptr, 1, HCCL_DATA_TYPE_FP32, 0, comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclSend(x, 1, HCCL_DATA_TYPE_FP32, 0, comm_, nullptr), HCCL_E_NOT_SUPPORT);  // itself
  EXPECT_EQ(HcclRecv(x, 1, HCCL_DATA_TYPE_FP32, 1, comm_, nullptr), HCCL_E_PARA);  // no rank 1
  EXPECT_EQ(HcclSend(x, 1, static_cast<HcclDataType>(13), 0, comm_, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclSend(x, UINT64_MAX / 2, HCCL_DATA_TYPE_FP32, 0, comm_, nullptr), HCCL_E_PARA);
  int not_a_stream = 0;
  EXPECT_EQ(HcclRecv(x, 1, HCCL_DATA_TYPE_FP32, 0, comm_, &not_a_stream), HCCL_E_PARA);

  EXPECT_EQ(HcclBatchSendRecv(nullptr, 0, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(HcclBatchSendRecv(nullptr, 0, nullptr, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclBatchSendRecv(nullptr, 1, comm_, nullptr), HCCL_E_PTR);
  HcclSendRecvItem bad_type{static_cast<HcclSendRecvType>(2), x, 1, HCCL_DATA_TYPE_FP32, 0};
  EXPECT_EQ(HcclBatchSendRecv(&bad_type, 1, comm_, nullptr), HCCL_E_PARA);
  HcclSendRecvItem self{HCCL_RECV, x, 1, HCCL_DATA_TYPE_FP32, 0};
  EXPECT_EQ(HcclBatchSendRecv(&self, 1, comm_, nullptr), HCCL_E_NOT_SUPPORT);
  // Count 0 is no transfer and nothing else of the call is looked at (as in CANN), except the
  // communicator and the stream.
  EXPECT_EQ(HcclSend(nullptr, 0, static_cast<HcclDataType>(99), 0, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(HcclRecv(nullptr, 0, HCCL_DATA_TYPE_FP32, 5, comm_, nullptr), HCCL_SUCCESS);
  HcclSendRecvItem empty[2] = {{HCCL_SEND, nullptr, 0, HCCL_DATA_TYPE_FP32, 0},
                               {HCCL_RECV, x, 0, HCCL_DATA_TYPE_INT8, 3}};
  EXPECT_EQ(HcclBatchSendRecv(empty, 2, comm_, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(HcclSend(nullptr, 0, HCCL_DATA_TYPE_FP32, 0, nullptr, nullptr), HCCL_E_PTR);
}

class P2pTwoRanksTest : public hzc::test::Test {};

// Two ranks in threads of this process: @body(rank, comm) on each; its results.
std::vector<int> TwoRanks(const std::function<int(uint32_t, HcclComm)> &body) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  std::vector<int> out(2, -1);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      HcclComm comm = nullptr;
      if (HcclCommInitRootInfo(2, &root, r, &comm) != HCCL_SUCCESS) {
        out[r] = 54;
        return;
      }
      out[r] = body(r, comm);
      if (HcclCommDestroy(comm) != HCCL_SUCCESS && out[r] == 0) {
        out[r] = 56;
      }
    });
  }
  for (auto &t : threads) {
    t.join();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
  return out;
}

std::vector<uint32_t> Pattern(size_t n, uint32_t rank) {
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint32_t>(i * 2654435761u) ^ (rank << 28);
  }
  return v;
}

// Above the 4 MiB slot of the default HCCL_BUFFSIZE: several chunks each way, both APIs.
TEST_F(P2pTwoRanksTest, LargeTransfersBothWaysAndABatchExchange) {
  constexpr size_t kCount = (10 << 20) / 4 + 3;
  const auto results = TwoRanks([&](uint32_t me, HcclComm comm) {
    const uint32_t peer = 1 - me;
    std::vector<uint32_t> send = Pattern(kCount, me), recv(kCount, 0);
    HcclResult r1 = me == 0
                        ? HcclSend(send.data(), kCount, HCCL_DATA_TYPE_UINT32, 1, comm, nullptr)
                        : HcclRecv(recv.data(), kCount, HCCL_DATA_TYPE_UINT32, 0, comm, nullptr);
    HcclResult r2 = me == 1
                        ? HcclSend(send.data(), kCount, HCCL_DATA_TYPE_UINT32, 0, comm, nullptr)
                        : HcclRecv(recv.data(), kCount, HCCL_DATA_TYPE_UINT32, 1, comm, nullptr);
    if (r1 != HCCL_SUCCESS || r2 != HCCL_SUCCESS) {
      return r1 != HCCL_SUCCESS ? static_cast<int>(r1) : static_cast<int>(r2);
    }
    if (recv != Pattern(kCount, peer)) {
      return 60;
    }
    // Both send first in one batch: it must not deadlock.
    std::fill(recv.begin(), recv.end(), 0);
    HcclSendRecvItem items[2] = {{HCCL_SEND, send.data(), kCount, HCCL_DATA_TYPE_UINT32, peer},
                                 {HCCL_RECV, recv.data(), kCount, HCCL_DATA_TYPE_UINT32, peer}};
    if (HcclResult r = HcclBatchSendRecv(items, 2, comm, nullptr); r != HCCL_SUCCESS) {
      return static_cast<int>(r);
    }
    return recv == Pattern(kCount, peer) ? 0 : 61;
  });
  EXPECT_EQ(results, std::vector<int>(2, 0));
}

// A message above HZC_P2P_BUFFERED_MAX (2 KiB by default), so the sender waits for the answer
// (a buffered send is never told of a mismatch: tests/vm/p2p).
TEST_F(P2pTwoRanksTest, MismatchFailsBothSidesAndMovesNothing) {
  ExpectErrorLog("HcclSend: send 1 to rank 1: it receives count=1000 dataType=2");
  ExpectErrorLog("HcclRecv: receive 1 from rank 0: it sends count=1000 dataType=9");
  const auto results = TwoRanks([&](uint32_t me, HcclComm comm) {
    std::vector<uint32_t> buf(1000, me == 0 ? 7 : 9);
    const HcclResult r = me == 0
                             ? HcclSend(buf.data(), 1000, HCCL_DATA_TYPE_UINT32, 1, comm, nullptr)
                             : HcclRecv(buf.data(), 1000, HCCL_DATA_TYPE_INT32, 0, comm, nullptr);
    if (r != HCCL_E_PARA) {
      return r == HCCL_SUCCESS ? 70 : static_cast<int>(r);
    }
    return buf == std::vector<uint32_t>(1000, me == 0 ? 7 : 9) ? 0 : 61;
  });
  EXPECT_EQ(results, std::vector<int>(2, 0));
}

// On a stream the call is queued and returns at once; the transfer happens on the stream's
// worker; a failure there is the stream's error and the communicator's async error (a send
// above HZC_P2P_BUFFERED_MAX, told of the mismatch).
TEST_F(P2pTwoRanksTest, OnAStreamTheCallIsQueued) {
  ExpectErrorLog("HcclSend (queued on a stream): send 2 to rank 1: it receives count=1000");
  ExpectErrorLog("HcclRecv: receive 2 from rank 0: it sends count=1001");
  ExpectErrorLog("aclrtSynchronizeStream: task HcclSend failed");
  constexpr size_t kCount = (5 << 20) / 4 + 1;
  const auto results = TwoRanks([&](uint32_t me, HcclComm comm) {
    std::vector<uint32_t> buf = me == 0 ? Pattern(kCount, 0) : std::vector<uint32_t>(kCount, 0);
    if (me == 1) {
      if (HcclRecv(buf.data(), kCount, HCCL_DATA_TYPE_UINT32, 0, comm, nullptr) != HCCL_SUCCESS) {
        return 71;
      }
      if (buf != Pattern(kCount, 0)) {
        return 60;
      }
      return HcclRecv(buf.data(), 1000, HCCL_DATA_TYPE_UINT32, 0, comm, nullptr) == HCCL_E_PARA
                 ? 0
                 : 72;
    }
    aclrtStream stream = nullptr;
    if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
      return 73;
    }
    int rc = 0;
    if (HcclSend(buf.data(), kCount, HCCL_DATA_TYPE_UINT32, 1, comm, stream) != HCCL_SUCCESS ||
        aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
      rc = 74;
    } else if (HcclSend(buf.data(), 1001, HCCL_DATA_TYPE_UINT32, 1, comm, stream) != HCCL_SUCCESS ||
               aclrtSynchronizeStream(stream) == ACL_SUCCESS) {
      rc = 75;  // queued, then failed on the stream
    } else {
      HcclResult async = HCCL_SUCCESS;
      rc = HcclGetCommAsyncError(comm, &async) == HCCL_SUCCESS && async == HCCL_E_PARA ? 0 : 76;
    }
    aclrtDestroyStream(stream);
    return rc;
  });
  EXPECT_EQ(results, std::vector<int>(2, 0));
}

}  // namespace
