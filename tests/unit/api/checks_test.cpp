// SPDX-License-Identifier: Apache-2.0
// The argument checks of the C entry points (api/checks.h): codes and message texts.
#include "api/checks.h"

#include <acl/acl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "hzc_test.h"

namespace hzc::api {
namespace {

using ::testing::HasSubstr;
using ChecksTest = test::Test;

TEST_F(ChecksTest, NotNull) {
  int x = 0;
  EXPECT_TRUE(NotNull(&x, "comm").ok());
  Status st = NotNull(nullptr, "comm");
  EXPECT_EQ(st.code(), HCCL_E_PTR);
  EXPECT_EQ(st.message(), "comm is null");
  auto acl = NotNull<aclError>(nullptr, "virPtr");
  EXPECT_EQ(acl.code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(acl.message(), "virPtr is null");
  EXPECT_TRUE(NotNull<aclError>(&x, "virPtr").ok());
}

TEST_F(ChecksTest, ReservedAndNonZero) {
  EXPECT_TRUE(Reserved(0, "flags").ok());
  Status st = Reserved(64, "alignment");
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "alignment=0x40: reserved, must be 0");
  EXPECT_EQ(Reserved<aclError>(1, "flags").code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_TRUE(NonZero(1, "size").ok());
  st = NonZero(0, "size");
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "size=0: must not be 0");
  EXPECT_EQ(NonZero<aclError>(0, "size").code(), ACL_ERROR_RT_PARAM_INVALID);
}

TEST_F(ChecksTest, NoWrap) {
  const auto *last_page = reinterpret_cast<const void *>(UINTPTR_MAX - 0xfff);
  EXPECT_TRUE(NoWrap(last_page, 0xfff, "local", "wraps around").ok());  // up to the last byte
  Status st = NoWrap(last_page, 0x1000, "local", "wraps around");       // one past it is 0
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "local=0xfffffffffffff000 size=0x1000: wraps around");
  EXPECT_THAT(NoWrap(last_page, SIZE_MAX, "virPtr", "range wraps around").message(),
              HasSubstr("virPtr=0xfffffffffffff000 size=0xffffffffffffffff: range wraps around"));
}

TEST_F(ChecksTest, WithCommNeedsALiveHandle) {
  int foreign = 0;
  bool called = false;
  Status st = WithComm(&foreign, [&](const auto &) {
    called = true;
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_THAT(st.message(), HasSubstr("not a live communicator (destroyed or foreign)"));
  EXPECT_FALSE(called);
}

// The communicator stays alive during the call: a destroy meanwhile (from another thread)
// closes the handle at once and waits until the call has returned. The call's status is the
// result.
TEST_F(ChecksTest, WithCommHoldsTheCommunicatorDuringTheCall) {
  auto &registry = CommRegistry::Process();
  HcclComm handle = registry.Add(std::make_shared<Communicator>(
      bootstrap::UniqueId{}, 1, std::vector<bootstrap::RankIdentity>(2)));
  std::atomic<bool> removed{false};
  std::thread destroyer;
  Status st = WithComm(handle, [&](const std::shared_ptr<Communicator> &c) {
    EXPECT_EQ(c->rank(), 1U);
    destroyer = std::thread([&] {
      EXPECT_TRUE(registry.Remove(handle).ok());
      removed = true;
    });
    while (registry.Get(handle).ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(removed.load());  // waits for this call
    EXPECT_EQ(c->size(), 2U);
    return Error(HCCL_E_TIMEOUT, "from the call");
  });
  EXPECT_EQ(st.code(), HCCL_E_TIMEOUT);
  EXPECT_EQ(st.message(), "from the call");
  destroyer.join();
  EXPECT_TRUE(removed.load());
  EXPECT_EQ(registry.Get(handle).status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc::api
