// SPDX-License-Identifier: Apache-2.0
// HCCL's one-sided calls on one rank: every argument check, with its code and log line. The
// transfers themselves run between simulated servers in the guest (tests/vm/span, hzc-coll-rank
// scenario "onesided") and between the ranks of one server (tests/vm/coll, "onesidedlocal").
#include <hccl/hccl_one_sided_services.h>

#include <cstring>
#include <vector>

#include "one_rank.h"

namespace {

class OneSidedApiTest : public hzc::test::OneRankTest {};

TEST_F(OneSidedApiTest, RegisterChecksItsArguments) {
  ExpectErrorLog("HcclRegisterMem: comm is null");
  ExpectErrorLog("HcclRegisterMem: addr is null");
  ExpectErrorLog("HcclRegisterMem: comm=");
  ExpectErrorLog("HcclRegisterMem: desc is null");
  ExpectErrorLog("HcclRegisterMem: type=7: not HCCL_MEM_TYPE_DEVICE (0) or HCCL_MEM_TYPE_HOST");
  ExpectErrorLog("HcclRegisterMem: size=0: not in 1 to");
  ExpectErrorLog("HcclRegisterMem: remoteRank=1: the communicator has 1 ranks");
  ExpectErrorLog("HcclRegisterMem: addr=");
  std::vector<char> buf(4096);
  HcclMemDesc desc;
  int x = 0;
  EXPECT_EQ(HcclRegisterMem(nullptr, 0, HCCL_MEM_TYPE_HOST, buf.data(), 4096, &desc), HCCL_E_PTR);
  EXPECT_EQ(HcclRegisterMem(comm_, 0, HCCL_MEM_TYPE_HOST, nullptr, 4096, &desc), HCCL_E_PTR);
  EXPECT_EQ(HcclRegisterMem(comm_, 0, HCCL_MEM_TYPE_HOST, buf.data(), 4096, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclRegisterMem(&x, 0, HCCL_MEM_TYPE_HOST, buf.data(), 4096, &desc), HCCL_E_PARA);
  EXPECT_EQ(HcclRegisterMem(comm_, 0, 7, buf.data(), 4096, &desc), HCCL_E_PARA);
  EXPECT_EQ(HcclRegisterMem(comm_, 0, HCCL_MEM_TYPE_HOST, buf.data(), 0, &desc), HCCL_E_PARA);
  EXPECT_EQ(HcclRegisterMem(comm_, 0, HCCL_MEM_TYPE_HOST, reinterpret_cast<void *>(~uintptr_t{0}),
                            4096, &desc),
            HCCL_E_PARA);
  EXPECT_EQ(HcclRegisterMem(comm_, 1, HCCL_MEM_TYPE_HOST, buf.data(), 4096, &desc), HCCL_E_PARA);
  // For the calling rank itself: nothing to register, as HCCL (a warning).
  std::memset(&desc, 0x5a, sizeof(desc));
  EXPECT_EQ(HcclRegisterMem(comm_, 0, HCCL_MEM_TYPE_DEVICE, buf.data(), 4096, &desc), HCCL_SUCCESS);
  EXPECT_EQ(desc.desc[0], 0);
}

TEST_F(OneSidedApiTest, DescriptorsNotMadeHereAreRefused) {
  ExpectErrorLog("HcclDeregisterMem: desc is null");
  ExpectErrorLog("HcclDeregisterMem: desc: not a descriptor of a registration of this rank");
  ExpectErrorLog("HcclEnableMemAccess: remoteMemDesc is null");
  ExpectErrorLog("HcclEnableMemAccess: remoteMem is null");
  ExpectErrorLog("HcclEnableMemAccess: remoteMemDesc: not a memory descriptor");
  ExpectErrorLog("HcclDisableMemAccess: remoteMemDesc: not a descriptor this rank enabled");
  HcclMemDesc desc;
  std::memset(&desc, 0x33, sizeof(desc));
  HcclMem mem{};
  EXPECT_EQ(HcclDeregisterMem(comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclDeregisterMem(comm_, &desc), HCCL_E_NOT_FOUND);
  EXPECT_EQ(HcclEnableMemAccess(comm_, nullptr, &mem), HCCL_E_PTR);
  EXPECT_EQ(HcclEnableMemAccess(comm_, &desc, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclEnableMemAccess(comm_, &desc, &mem), HCCL_E_PARA);
  EXPECT_EQ(HcclDisableMemAccess(comm_, &desc), HCCL_E_NOT_FOUND);
}

TEST_F(OneSidedApiTest, ExchangeChecksItsArguments) {
  ExpectErrorLog("HcclExchangeMemDesc: local is null");
  ExpectErrorLog("HcclExchangeMemDesc: remote is null");
  ExpectErrorLog("HcclExchangeMemDesc: actualNum is null");
  ExpectErrorLog("HcclExchangeMemDesc: local->array is null");
  ExpectErrorLog("HcclExchangeMemDesc: timeout=-2: not seconds");
  ExpectErrorLog("HcclExchangeMemDesc: remoteRank=0: the calling rank itself");
  ExpectErrorLog("HcclExchangeMemDesc: remoteRank=3: the communicator has 1 ranks");
  std::vector<HcclMemDesc> descs(2);
  HcclMemDescs local{descs.data(), 1}, remote{descs.data() + 1, 1}, none{nullptr, 1};
  uint32_t n = 0;
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, nullptr, 0, &remote, &n), HCCL_E_PTR);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, &local, 0, nullptr, &n), HCCL_E_PTR);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, &local, 0, &remote, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, &none, 0, &remote, &n), HCCL_E_PTR);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, &local, -2, &remote, &n), HCCL_E_PARA);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 0, &local, 0, &remote, &n), HCCL_E_PARA);
  EXPECT_EQ(HcclExchangeMemDesc(comm_, 3, &local, 0, &remote, &n), HCCL_E_PARA);
}

TEST_F(OneSidedApiTest, BatchesCheckTheirArguments) {
  ExpectErrorLog("HcclBatchPut: desc is null");
  ExpectErrorLog("HcclBatchPut: remoteRank=0: the calling rank itself");
  ExpectErrorLog("HcclBatchGet: remoteRank=2: the communicator has 1 ranks");
  ExpectErrorLog("HcclBatchGet: descNum=257: more than 256");
  ExpectErrorLog("HcclBatchPut: stream=");
  std::vector<char> buf(64);
  std::vector<HcclOneSideOpDesc> ops(257, {buf.data(), buf.data(), 8, HCCL_DATA_TYPE_INT8});
  int x = 0;
  // None: nothing to do, as HCCL (a warning).
  EXPECT_EQ(HcclBatchPut(comm_, 0, nullptr, 0, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(HcclBatchPut(comm_, 1, nullptr, 1, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclBatchPut(comm_, 0, ops.data(), 1, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclBatchGet(comm_, 2, ops.data(), 1, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclBatchGet(comm_, 0, ops.data(), 257, nullptr), HCCL_E_PARA);
  EXPECT_EQ(HcclBatchPut(comm_, 0, ops.data(), 1, &x), HCCL_E_PARA);
}

TEST_F(OneSidedApiTest, GlobalMemoryChecksItsArguments) {
  ExpectErrorLog("HcclRegisterGlobalMem: mem is null");
  ExpectErrorLog("HcclRegisterGlobalMem: memHandle is null");
  ExpectErrorLog("HcclRegisterGlobalMem: type=5: not HCCL_MEM_TYPE_DEVICE");
  ExpectErrorLog("HcclRegisterGlobalMem: mem->addr is null");
  ExpectErrorLog("HcclDeregisterGlobalMem: memHandle=");
  ExpectErrorLog("HcclCommUnbindMem: memHandle=");
  ExpectErrorLog("HcclCommPrepare: prepareConfig is null");
  ExpectErrorLog("HcclCommPrepare: prepareConfig->topoType=1: not HCCL_TOPO_FULLMESH");
  ExpectErrorLog("HcclCommPrepare: timeout=-2");
  ExpectErrorLog("HcclCommDestroy: comm: 1 global memory handle(s) bound to it");
  std::vector<char> buf(4096);
  HcclMem mem{HCCL_MEM_TYPE_HOST, buf.data(), buf.size()};
  void *handle = nullptr;
  EXPECT_EQ(HcclRegisterGlobalMem(nullptr, &handle), HCCL_E_PTR);
  EXPECT_EQ(HcclRegisterGlobalMem(&mem, nullptr), HCCL_E_PTR);
  HcclMem bad{static_cast<HcclMemType>(5), buf.data(), buf.size()};
  EXPECT_EQ(HcclRegisterGlobalMem(&bad, &handle), HCCL_E_PARA);
  HcclMem null{HCCL_MEM_TYPE_HOST, nullptr, buf.size()};
  EXPECT_EQ(HcclRegisterGlobalMem(&null, &handle), HCCL_E_PTR);
  ASSERT_EQ(HcclRegisterGlobalMem(&mem, &handle), HCCL_SUCCESS);
  EXPECT_NE(handle, nullptr);
  EXPECT_EQ(HcclCommUnbindMem(comm_, handle), HCCL_E_PARA);  // not bound
  EXPECT_EQ(HcclCommBindMem(comm_, handle), HCCL_SUCCESS);
  HcclPrepareConfig config{HCCL_TOPO_FULLMESH, 0, 0, 0};
  EXPECT_EQ(HcclCommPrepare(comm_, nullptr, 0), HCCL_E_PTR);
  HcclPrepareConfig ring{static_cast<HcclTopoType>(1), 0, 0, 0};
  EXPECT_EQ(HcclCommPrepare(comm_, &ring, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommPrepare(comm_, &config, -2), HCCL_E_PARA);
  // One rank: nobody to prepare for (its memory need not be activated then).
  EXPECT_EQ(HcclCommPrepare(comm_, &config, 0), HCCL_SUCCESS);
  // Bound memory holds the handle and the communicator, as HCCL.
  EXPECT_EQ(HcclDeregisterGlobalMem(handle), HCCL_E_PARA);
  EXPECT_EQ(HcclCommDestroy(comm_), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnbindMem(comm_, handle), HCCL_SUCCESS);
  EXPECT_EQ(HcclDeregisterGlobalMem(handle), HCCL_SUCCESS);
  EXPECT_EQ(HcclDeregisterGlobalMem(handle), HCCL_E_PARA);  // handles are never reused
}

}  // namespace
