// SPDX-License-Identifier: Apache-2.0
// The zero-copy memory calls of core/memory.h that fail before hzc.ko is involved, or without
// it; the guest tests cover the rest.
#include "core/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "core/range_registry.h"
#include "hzc_test.h"
#include "transport/transport.h"

namespace hzc::memory {
namespace {

using ::testing::HasSubstr;

const size_t kPage = static_cast<size_t>(getpagesize());

std::shared_ptr<Communicator> MakeComm(std::vector<std::string> hosts) {
  std::vector<bootstrap::RankIdentity> ranks;
  for (auto &host : hosts) {
    ranks.push_back(bootstrap::RankIdentity{.host = std::move(host), .pid = 0, .address = ""});
  }
  return std::make_shared<Communicator>(bootstrap::UniqueId{}, 0, std::move(ranks));
}

class MemoryTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    va_ = mmap(nullptr, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(va_, MAP_FAILED);
  }
  void TearDown() override {
    munmap(va_, kPage);
    EXPECT_EQ(RangeRegistry::Process().RangeCount(), 0U);  // nothing changed
    EXPECT_EQ(RangeRegistry::Process().ActivationCount(), 0U);
    test::Test::TearDown();
  }
  static bool HaveModule() { return access(GetConfig().device_path.c_str(), F_OK) == 0; }
  uintptr_t va() const { return reinterpret_cast<uintptr_t>(va_); }

  void *va_ = nullptr;
  HcclComm handle_ = reinterpret_cast<HcclComm>(uintptr_t{0x1234});
};

TEST_F(MemoryTest, RangesNeedASingleServer) {
  auto comm = MakeComm({"server-a", "server-b", "server-a"});
  Status st = SetRange(handle_, *comm, va(), kPage);
  EXPECT_EQ(st.code(), HCCL_E_NOT_SUPPORT);
  EXPECT_EQ(st.message(),
            "comm=0x1234: its 3 ranks span 2 servers; only single-server communicators support "
            "memory ranges");
}

// Whether the memory is mapped with the handle is checked before the device is opened.
TEST_F(MemoryTest, ActivateNeedsMemoryMappedWithTheHandle) {
  auto comm = MakeComm({"server-a"});
  int not_a_handle = 0;
  Status st = Activate(comm, va(), kPage, &not_a_handle);
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_FALSE(st.message().empty());
  EXPECT_EQ(comm.use_count(), 1);  // not kept by a failed call
}

// Without the module (HZC_TRANSPORT unset: auto) the memory calls go over the memfd transport.
TEST_F(MemoryTest, WithoutModuleTheMemfdTransportIsChosen) {
  if (HaveModule()) {
    GTEST_SKIP() << GetConfig().device_path << " exists: the guest tests cover this path";
  }
  if (GetConfig().transport == TransportChoice::kKernel) {
    GTEST_SKIP() << "HZC_TRANSPORT=kernel: the calls fail, tested by the API tests";
  }
  auto transport = transport::Chosen();
  ASSERT_TRUE(transport.ok());
  EXPECT_EQ(*transport, transport::Kind::kMemfd);
  auto comm = MakeComm({"server-a"});
  EXPECT_EQ(UnsetRange(va()).code(), HCCL_E_PARA);  // not set: changes nothing
  EXPECT_EQ(Deactivate(va()).code(), HCCL_E_PARA);
  ASSERT_TRUE(SetRange(handle_, *comm, va(), kPage).ok());
  EXPECT_TRUE(comm->linked());
  EXPECT_EQ(RangeRegistry::Process().RangeCount(), 1U);
  auto own = comm->peer_memory()->Translate(0, va(), kPage);
  EXPECT_EQ(own.status().code(), HCCL_E_PARA);  // a range, but nothing activated
  EXPECT_TRUE(UnsetRange(va()).ok());
}

}  // namespace
}  // namespace hzc::memory
