// SPDX-License-Identifier: Apache-2.0
// The communicator calls beyond root info and rank tables, on the host: configurations,
// HcclCommInitAll (ranks as threads of this process), sub-communicators, names, asynchronous
// errors and symmetric windows, with their argument checks.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_sym_win.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "rank_launch.h"

namespace {

class CommApiTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    for (HcclComm c : comms_) {
      EXPECT_EQ(HcclCommDestroy(c), HCCL_SUCCESS);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
    hzc::test::Test::TearDown();
  }

  // A one-rank communicator made with @config.
  HcclResult InitOne(const HcclCommConfig *config, HcclComm *comm) {
    HcclRootInfo root;
    EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    const HcclResult r = HcclCommInitRootInfoConfig(1, &root, 0, config, comm);
    if (r == HCCL_SUCCESS) {
      comms_.push_back(*comm);
    }
    return r;
  }

  std::vector<HcclComm> comms_;
};

TEST_F(CommApiTest, CapabilityCoversEveryItem) {
  EXPECT_EQ(HcclGetCommConfigCapability(), static_cast<uint32_t>(HCCL_COMM_CONFIG_RESERVED));
}

TEST_F(CommApiTest, ConfigNameAndDefaultName) {
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  std::strcpy(config.hcclCommName, "comm_1");
  config.hcclBufferSize = 1;
  HcclComm named = nullptr, plain = nullptr;
  ASSERT_EQ(InitOne(&config, &named), HCCL_SUCCESS);
  ASSERT_EQ(InitOne(nullptr, &plain), HCCL_SUCCESS);
  char name[COMM_NAME_MAX_LENGTH];
  ASSERT_EQ(HcclGetCommName(named, name), HCCL_SUCCESS);
  EXPECT_STREQ(name, "comm_1");
  ASSERT_EQ(HcclGetCommName(plain, name), HCCL_SUCCESS);
  EXPECT_EQ(std::string(name).rfind("hzc-", 0), 0U) << name;
  ExpectErrorLog("HcclGetCommName: commName");
  EXPECT_EQ(HcclGetCommName(plain, nullptr), HCCL_E_PTR);
}

TEST_F(CommApiTest, BadConfigIsRefusedBeforeJoining) {
  HcclCommConfig config;
  std::memset(&config, 0, sizeof(config));
  HcclComm comm = nullptr;
  HcclRootInfo root{};  // never decoded: the configuration is checked first
  ExpectErrorLog("HcclCommInitRootInfoConfig: config: magic word");
  EXPECT_EQ(HcclCommInitRootInfoConfig(1, &root, 0, &config, &comm), HCCL_E_PARA);
  HcclCommConfigInit(&config);
  config.hcclRdmaServiceLevel = 9;
  ExpectErrorLog("HcclCommInitRootInfoConfig: config->hcclRdmaServiceLevel=9");
  EXPECT_EQ(HcclCommInitRootInfoConfig(1, &root, 0, &config, &comm), HCCL_E_PARA);
  EXPECT_EQ(comm, nullptr);
  ExpectErrorLog("HcclCommInitClusterInfoConfig: config: magic word");
  std::memset(&config, 0, sizeof(config));
  EXPECT_EQ(HcclCommInitClusterInfoConfig("/nonexistent", 0, &config, &comm), HCCL_E_PARA);
}

TEST_F(CommApiTest, AsyncErrorOfAHealthyCommunicatorIsSuccess) {
  HcclComm comm = nullptr;
  ASSERT_EQ(InitOne(nullptr, &comm), HCCL_SUCCESS);
  HcclResult err = HCCL_E_INTERNAL;
  ASSERT_EQ(HcclGetCommAsyncError(comm, &err), HCCL_SUCCESS);
  EXPECT_EQ(err, HCCL_SUCCESS);
  ExpectErrorLog("HcclGetCommAsyncError: asyncError");
  EXPECT_EQ(HcclGetCommAsyncError(comm, nullptr), HCCL_E_PTR);
  ExpectErrorLog("HcclGetCommAsyncError: comm");
  EXPECT_EQ(HcclGetCommAsyncError(nullptr, &err), HCCL_E_PTR);
}

TEST_F(CommApiTest, InitAllRanksAreThreadsThatRunCollectives) {
  int32_t devices[] = {3, 1};
  HcclComm all[2] = {};
  ASSERT_EQ(HcclCommInitAll(2, devices, all), HCCL_SUCCESS);
  comms_.assign(all, all + 2);
  std::vector<std::vector<float>> in(2, std::vector<float>(1000)), out(2, std::vector<float>(1000));
  std::vector<HcclResult> rc(2, HCCL_E_INTERNAL);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    for (size_t i = 0; i < 1000; ++i) {
      in[r][i] = static_cast<float>(i * (r + 1));
    }
    threads.emplace_back([&, r] {
      uint32_t id = 99;
      HcclGetRankId(all[r], &id);
      rc[r] = id == r ? HcclAllReduce(in[r].data(), out[r].data(), 1000, HCCL_DATA_TYPE_FP32,
                                      HCCL_REDUCE_SUM, all[r], nullptr)
                      : HCCL_E_INTERNAL;
    });
  }
  for (auto &t : threads) {
    t.join();
  }
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(rc[r], HCCL_SUCCESS) << "rank " << r;
    for (size_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(out[r][i], static_cast<float>(3 * i)) << "rank " << r << " element " << i;
    }
  }
}

TEST_F(CommApiTest, InitAllArgumentChecks) {
  int32_t devices[] = {0, 0};
  HcclComm all[2] = {};
  ExpectErrorLog("HcclCommInitAll: devices[1]=0: listed twice");
  EXPECT_EQ(HcclCommInitAll(2, devices, all), HCCL_E_PARA);
  devices[1] = -1;
  ExpectErrorLog("HcclCommInitAll: devices[1]=-1");
  EXPECT_EQ(HcclCommInitAll(2, devices, all), HCCL_E_PARA);
  ExpectErrorLog("HcclCommInitAll: ndev=0");
  EXPECT_EQ(HcclCommInitAll(0, devices, all), HCCL_E_PARA);
  ExpectErrorLog("HcclCommInitAll: devices");
  EXPECT_EQ(HcclCommInitAll(2, nullptr, all), HCCL_E_PTR);
  ExpectErrorLog("HcclCommInitAll: comms");
  EXPECT_EQ(HcclCommInitAll(2, devices, nullptr), HCCL_E_PTR);
  EXPECT_EQ(all[0], nullptr);
}

TEST_F(CommApiTest, SubCommunicatorOfOneRankRunsACollective) {
  HcclComm parent = nullptr, sub = nullptr;
  ASSERT_EQ(InitOne(nullptr, &parent), HCCL_SUCCESS);
  uint32_t ids[] = {0};
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  std::strcpy(config.hcclCommName, "sub");
  ASSERT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 7, 0, &config, &sub), HCCL_SUCCESS);
  comms_.push_back(sub);
  uint32_t n = 0;
  ASSERT_EQ(HcclGetRankSize(sub, &n), HCCL_SUCCESS);
  EXPECT_EQ(n, 1U);
  char name[COMM_NAME_MAX_LENGTH];
  ASSERT_EQ(HcclGetCommName(sub, name), HCCL_SUCCESS);
  EXPECT_STREQ(name, "sub");
  int32_t a = 5, b = 0;
  ASSERT_EQ(HcclAllReduce(&a, &b, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, sub, nullptr),
            HCCL_SUCCESS);
  EXPECT_EQ(b, 5);
}

TEST_F(CommApiTest, SubCommunicatorArgumentChecks) {
  HcclComm parent = nullptr, sub = nullptr;
  ASSERT_EQ(InitOne(nullptr, &parent), HCCL_SUCCESS);
  uint32_t ids[] = {0, 1};
  ExpectErrorLog("HcclCreateSubCommConfig: rankNum=2");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 2, ids, 0, 0, nullptr, &sub), HCCL_E_PARA);
  ExpectErrorLog("HcclCreateSubCommConfig: rankNum=0");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 0, ids, 0, 0, nullptr, &sub), HCCL_E_PARA);
  ExpectErrorLog("HcclCreateSubCommConfig: subCommRankId=1");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 0, 1, nullptr, &sub), HCCL_E_PARA);
  ids[0] = 1;
  ExpectErrorLog("HcclCreateSubCommConfig: rankIds[0]=1");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 0, 0, nullptr, &sub), HCCL_E_PARA);
  ExpectErrorLog("HcclCreateSubCommConfig: rankIds=0x0 subCommId=0x0: a member passes both");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 1, nullptr, 0, 0, nullptr, &sub), HCCL_E_PARA);
  ids[0] = 0;
  ExpectErrorLog("HcclCreateSubCommConfig: rankIds=0x");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 0xFFFFFFFF, 0, nullptr, &sub), HCCL_E_PARA);
  // A rank outside the sub-communicator: success, nothing made.
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 0, nullptr, 0xFFFFFFFF, 0, nullptr, &sub),
            HCCL_SUCCESS);
  EXPECT_EQ(sub, nullptr);
  // An id is used once per parent.
  ASSERT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 5, 0, nullptr, &sub), HCCL_SUCCESS);
  comms_.push_back(sub);
  HcclComm again = nullptr;
  ExpectErrorLog("HcclCreateSubCommConfig: subCommId=5: already used");
  EXPECT_EQ(HcclCreateSubCommConfig(&parent, 1, ids, 5, 0, nullptr, &again), HCCL_E_PARA);
  EXPECT_EQ(again, nullptr);
  sub = nullptr;
  ExpectErrorLog("HcclCreateSubCommConfig: comm");
  EXPECT_EQ(HcclCreateSubCommConfig(nullptr, 1, ids, 0, 0, nullptr, &sub), HCCL_E_PTR);
}

// One rank: a window on reserved and mapped memory (as large as its mapping), its peer pointer
// (its own memory), and the checks of every argument.
TEST_F(CommApiTest, SymmetricWindowOnMappedMemory) {
  HcclComm comm = nullptr;
  ASSERT_EQ(InitOne(nullptr, &comm), HCCL_SUCCESS);
  aclrtPhysicalMemProp prop{};
  prop.memAttr = ACL_HBM_MEM_NORMAL;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  const size_t len = 64 << 10;
  void *va = nullptr;
  aclrtDrvMemHandle h = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, len, 0, nullptr, 0), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocPhysical(&h, len, &prop, 0), ACL_SUCCESS);
  std::vector<char> plain(4096);
  HcclCommSymWindow win = nullptr;
  ExpectErrorLog("HcclCommSymWinRegister: addr=");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, 4096, &win, 1), HCCL_E_PARA);  // not mapped yet
  EXPECT_EQ(HcclCommSymWinRegister(comm, plain.data(), plain.size(), &win, 1), HCCL_E_PARA);
  ExpectErrorLog("HcclCommSymWinRegister: flag=0 (HCCL_WIN_DEFAULT)");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, 4096, &win, HCCL_WIN_DEFAULT), HCCL_E_NOT_SUPPORT);
  ExpectErrorLog("HcclCommSymWinRegister: flag=2");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, 4096, &win, 2), HCCL_E_PARA);
  ExpectErrorLog("HcclCommSymWinRegister: size=0");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, 0, &win, 1), HCCL_E_PARA);
  ExpectErrorLog("HcclCommSymWinRegister: size=0x440000000: above hcclSymWinMaxMemSizePerRank");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, uint64_t{17} << 30, &win, 1), HCCL_E_PARA);
  ExpectErrorLog("HcclCommSymWinRegister: winHandle is null");
  EXPECT_EQ(HcclCommSymWinRegister(comm, va, 4096, nullptr, 1), HCCL_E_PTR);
  ExpectErrorLog("HcclCommSymWinRegister: comm is null");
  EXPECT_EQ(HcclCommSymWinRegister(nullptr, va, 4096, &win, 1), HCCL_E_PTR);
  EXPECT_EQ(win, nullptr);
  ASSERT_EQ(aclrtMapMem(va, len, 0, h, 0), ACL_SUCCESS);
  ASSERT_EQ(HcclCommSymWinRegister(comm, va, 4096, &win, HCCL_WIN_COLL_SYMMETRIC), HCCL_SUCCESS);
  HcclCommSymWindow found = nullptr;
  size_t offset = 0;
  char *p = static_cast<char *>(va);
  ASSERT_EQ(HcclCommSymWinGet(comm, p + len - 16, 16, &found, &offset), HCCL_SUCCESS);
  EXPECT_EQ(found, win);
  EXPECT_EQ(offset, len - 16);
  ExpectErrorLog("HcclCommSymWinGet: ptr=");
  EXPECT_EQ(HcclCommSymWinGet(comm, p + len - 16, 17, &found, &offset), HCCL_E_NOT_FOUND);
  EXPECT_EQ(HcclCommSymWinGet(comm, plain.data(), 16, &found, &offset), HCCL_E_NOT_FOUND);
  void *at = nullptr;
  ASSERT_EQ(HcclSymWinGetPeerPointer(win, 100, 0, &at), HCCL_SUCCESS);
  EXPECT_EQ(at, p + 100);
  ExpectErrorLog("HcclSymWinGetPeerPointer: peerRank=1");
  EXPECT_EQ(HcclSymWinGetPeerPointer(win, 0, 1, &at), HCCL_E_PARA);
  ExpectErrorLog("HcclSymWinGetPeerPointer: offset=0x10000");
  EXPECT_EQ(HcclSymWinGetPeerPointer(win, len, 0, &at), HCCL_E_PARA);
  ExpectErrorLog("aclrtUnmapMem: ");
  EXPECT_EQ(aclrtUnmapMem(va), ACL_ERROR_RT_PARAM_INVALID);
  ExpectErrorLog("HcclCommDeactivateCommMemory: virPtr=");
  EXPECT_EQ(HcclCommDeactivateCommMemory(comm, va), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
  ExpectErrorLog("HcclCommSymWinDeregister: winHandle=");
  EXPECT_EQ(HcclCommSymWinDeregister(win), HCCL_E_PARA);
  int not_a_window = 0;
  EXPECT_EQ(HcclCommSymWinDeregister(&not_a_window), HCCL_E_PARA);
  EXPECT_EQ(aclrtUnmapMem(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(CommApiTest, CallsOnStreamsAreQueuedAndTheirErrorsAreAsync) {
  int32_t devices[] = {0, 1};
  HcclComm all[2] = {};
  ASSERT_EQ(HcclCommInitAll(2, devices, all), HCCL_SUCCESS);
  comms_.assign(all, all + 2);
  std::vector<int32_t> in[2], out[2];
  std::vector<aclError> sync_ok(2, -1), sync_bad(2, -1);
  std::vector<HcclResult> queued(2, HCCL_E_INTERNAL), async(2, HCCL_E_INTERNAL);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    in[r].assign(4096, static_cast<int32_t>(r + 1));
    out[r].assign(4096, 0);
    threads.emplace_back([&, r] {
      aclrtStream stream = nullptr;
      if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
        return;
      }
      // Queued, then the buffers are read back only after the stream is synchronised.
      queued[r] = HcclAllReduce(in[r].data(), out[r].data(), 4096, HCCL_DATA_TYPE_INT32,
                                HCCL_REDUCE_SUM, all[r], stream);
      sync_ok[r] = aclrtSynchronizeStream(stream);
      // The ranks disagree on the count: found when the call runs, after it returned.
      HcclResult second = HcclAllReduce(in[r].data(), out[r].data(), 100 + r, HCCL_DATA_TYPE_INT32,
                                        HCCL_REDUCE_SUM, all[r], stream);
      sync_bad[r] = second == HCCL_SUCCESS ? aclrtSynchronizeStream(stream) : -2;
      HcclGetCommAsyncError(all[r], &async[r]);
      aclrtDestroyStream(stream);
    });
  }
  for (auto &t : threads) {
    t.join();
  }
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(queued[r], HCCL_SUCCESS) << "rank " << r;
    EXPECT_EQ(sync_ok[r], ACL_SUCCESS) << "rank " << r;
    EXPECT_EQ(out[r], std::vector<int32_t>(4096, 3)) << "rank " << r;
    EXPECT_NE(sync_bad[r], ACL_SUCCESS) << "rank " << r;
    EXPECT_NE(sync_bad[r], -2) << "rank " << r;
    EXPECT_EQ(async[r], HCCL_E_PARA) << "rank " << r;
  }
  ExpectErrorLog("HcclAllReduce (queued on a stream): ranks disagree");
  ExpectErrorLog("aclrtSynchronizeStream");
}

TEST_F(CommApiTest, OwnErrorsOnAStreamAreReturnedByTheCall) {
  HcclComm comm = nullptr;
  ASSERT_EQ(InitOne(nullptr, &comm), HCCL_SUCCESS);
  aclrtStream stream = nullptr;
  ASSERT_EQ(aclrtCreateStream(&stream), ACL_SUCCESS);
  int32_t a = 1, b = 0;
  ExpectErrorLog("HcclAllReduce: dataType=");
  EXPECT_EQ(HcclAllReduce(&a, &b, 1, static_cast<HcclDataType>(99), HCCL_REDUCE_SUM, comm, stream),
            HCCL_E_PARA);
  ExpectErrorLog("HcclAllReduce: recvBuf");
  EXPECT_EQ(HcclAllReduce(&a, nullptr, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, stream),
            HCCL_E_PTR);
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  // The communicator is still usable, on the stream and without one.
  EXPECT_EQ(HcclAllReduce(&a, &b, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, stream),
            HCCL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(stream), ACL_SUCCESS);
  EXPECT_EQ(b, 1);
  HcclResult async = HCCL_E_INTERNAL;
  EXPECT_EQ(HcclGetCommAsyncError(comm, &async), HCCL_SUCCESS);
  EXPECT_EQ(async, HCCL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(stream), ACL_SUCCESS);
}

// Processes: every rank makes the sub-communicator of its parity without talking to the
// others, and the members meet on it (and still on the parent).
TEST_F(CommApiTest, SubCommunicatorsOfRankProcesses) {
  for (uint32_t n : {3U, 4U}) {
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    const std::string hex = hzc::test::RootInfoToHex(root);
    const auto pids = hzc::test::StartRanks(n, [&](uint32_t r) {
      return std::vector<std::string>{HZC_SUBCOMM_RANK, hex, std::to_string(n), std::to_string(r)};
    });
    for (int status : hzc::test::WaitRanks(pids)) {
      EXPECT_EQ(status, 0) << n << " ranks";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // root thread exit
  }
}

TEST_F(CommApiTest, DeterministicSettingIsKept) {
  HcclConfigValue v{1};
  ASSERT_EQ(HcclSetConfig(HCCL_DETERMINISTIC, v), HCCL_SUCCESS);
  HcclConfigValue got{-1};
  ASSERT_EQ(HcclGetConfig(HCCL_DETERMINISTIC, &got), HCCL_SUCCESS);
  EXPECT_EQ(got.value, 1);
  v.value = 3;
  ExpectErrorLog("HcclSetConfig: configValue.value=3");
  EXPECT_EQ(HcclSetConfig(HCCL_DETERMINISTIC, v), HCCL_E_PARA);
  ExpectErrorLog("HcclGetConfig: config=1");
  EXPECT_EQ(HcclGetConfig(HCCL_CONFIG_RESERVED, &got), HCCL_E_PARA);
  ExpectErrorLog("HcclGetConfig: configValue");
  EXPECT_EQ(HcclGetConfig(HCCL_DETERMINISTIC, nullptr), HCCL_E_PTR);
  v.value = 0;
  EXPECT_EQ(HcclSetConfig(HCCL_DETERMINISTIC, v), HCCL_SUCCESS);
}

// A rank that refuses two calls in a row (its own arguments are bad): the other fails both
// with HCCL_E_PARA at once, and the next call works on both (ranks as threads, staging).
TEST_F(CommApiTest, TwoRefusalsInARowThenACallThatWorks) {
  int32_t devices[] = {0, 1};
  HcclComm all[2] = {};
  ASSERT_EQ(HcclCommInitAll(2, devices, all), HCCL_SUCCESS);
  comms_.assign(all, all + 2);
  std::vector<std::vector<HcclResult>> rc(2);
  std::vector<int64_t> sums(2, 0);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      int64_t in = r + 1, out = 0;
      auto call = [&](bool bad) {
        return HcclAllReduce(&in, bad ? nullptr : &out, 1, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM,
                             all[r], nullptr);
      };
      rc[r].push_back(call(false));   // opens the control area
      rc[r].push_back(call(r == 1));  // rank 1 refuses
      rc[r].push_back(call(r == 1));  // and again
      rc[r].push_back(call(false));
      sums[r] = out;
    });
  }
  for (auto &t : threads) {
    t.join();
  }
  EXPECT_EQ(rc[0], (std::vector<HcclResult>{HCCL_SUCCESS, HCCL_E_PARA, HCCL_E_PARA, HCCL_SUCCESS}));
  EXPECT_EQ(rc[1], (std::vector<HcclResult>{HCCL_SUCCESS, HCCL_E_PTR, HCCL_E_PTR, HCCL_SUCCESS}));
  EXPECT_EQ(sums, (std::vector<int64_t>{3, 3}));
  ExpectErrorLog("HcclAllReduce: recvBuf is null");
  ExpectErrorLog("HcclAllReduce: rank 1 refused call");
}

}  // namespace
