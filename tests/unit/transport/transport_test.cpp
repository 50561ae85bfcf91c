// SPDX-License-Identifier: Apache-2.0
// The transports behind one interface, on the host: the memfd transport end to end in this
// process (publish, link, translate, withdraw), the kernel transport's refusals without the
// module, and the factory's choice.
#include "transport/transport.h"

#include <unistd.h>

#include <memory>

#include "acl_prop.h"
#include "base/config.h"
#include "hzc_test.h"
#include "runtime/vmm.h"
#include "transport/kernel.h"
#include "transport/memfd.h"

namespace hzc::transport {
namespace {

const size_t kPage = static_cast<size_t>(getpagesize());

bool HaveModule() {
  return ::access(GetConfig().device_path.c_str(), F_OK) == 0;
}

// A reservation of @pages pages with a physical allocation mapped at its start (aclrtMapMem).
class Mapped {
 public:
  explicit Mapped(size_t pages) : size_(pages * kPage) {
    ok_ = runtime::Reserve(&base_, size_, nullptr, 0).ok() &&
          runtime::MallocPhysical(&handle_, kPage, test::Prop()).ok() &&
          runtime::Map(base_, kPage, handle_).ok();
  }
  ~Mapped() {
    (void)runtime::Unmap(base_);
    (void)runtime::FreePhysical(handle_);
    (void)runtime::Release(base_);
  }
  bool ok() const { return ok_; }
  uintptr_t va() const { return reinterpret_cast<uintptr_t>(base_); }
  size_t size() const { return size_; }

 private:
  size_t size_;
  void *base_ = nullptr;
  aclrtDrvMemHandle handle_ = nullptr;
  bool ok_ = false;
};

using TransportTest = test::Test;

TEST_F(TransportTest, KindsHaveNames) {
  EXPECT_STREQ(KindName(Kind::kKernel), "kernel");
  EXPECT_STREQ(KindName(Kind::kMemfd), "memfd");
}

// The factory follows Chosen and hands out one object per kind for the process's life.
TEST_F(TransportTest, ProcessFollowsTheChoice) {
  auto kind = Chosen();
  if (!kind.ok()) {
    EXPECT_EQ(GetConfig().transport, TransportChoice::kKernel);
    EXPECT_EQ(kind.status().code(), HCCL_E_NOT_FOUND);
    EXPECT_EQ(Process().status().code(), HCCL_E_NOT_FOUND);
    return;
  }
  auto a = Process();
  auto b = Process();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*a)->kind(), *kind);
  if (GetConfig().transport == TransportChoice::kAuto) {
    EXPECT_EQ(*kind, HaveModule() ? Kind::kKernel : Kind::kMemfd);
  }
}

// Publish, link, translate, withdraw: after Deactivate the peer side no longer reaches the
// memory, after RemoveRange the range can be published again.
TEST_F(TransportTest, MemfdPublishesLinksAndWithdraws) {
  MemfdTransport t;
  Mapped m(2);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(t.AddRange(m.va(), m.size()).ok());
  EXPECT_EQ(t.AddRange(m.va(), m.size()).code(), HCCL_E_PARA);  // overlaps
  ASSERT_TRUE(t.Activate(m.va(), kPage, 0x1234).ok());
  // Only the start of an aclrtMapMem mapping can be activated (its memfd is what peers map).
  EXPECT_EQ(t.Activate(m.va() + kPage, kPage, 0).code(), HCCL_E_PARA);

  const auto self = static_cast<uint32_t>(getpid());
  auto link = t.Connect({.id = {1, 2}, .rank = 0, .pids = {self, self}, .timeout = {}});
  ASSERT_TRUE(link.ok()) << link.status().message();
  auto rdma = (*link)->Rdma(verbs::LinkOptions{});
  ASSERT_TRUE(rdma.ok());
  EXPECT_EQ(*rdma, nullptr);  // no RDMA over memfds
  PeerMemory &peers = (*link)->peers();
  auto p = peers.Translate(1, m.va() + 8, 16);  // rank 1 is this process too
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, reinterpret_cast<void *>(m.va() + 8));
  auto a = peers.Activation(1, m.va(), kPage);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->cookie, 0x1234U);
  EXPECT_EQ(a->size, kPage);
  EXPECT_EQ(peers.Translate(1, m.va() + kPage, 8).status().code(), HCCL_E_PARA);

  EXPECT_EQ(t.RemoveRange(m.va()).code(), HCCL_E_PARA);  // still has an activation
  ASSERT_TRUE(t.Deactivate(m.va()).ok());
  EXPECT_TRUE(t.Withdrawn(Status::Ok()));
  EXPECT_EQ(peers.Translate(1, m.va(), 8).status().code(), HCCL_E_PARA);
  EXPECT_EQ(peers.Activations(1)->size(), 0U);
  ASSERT_TRUE(t.RemoveRange(m.va()).ok());
  ASSERT_TRUE(t.AddRange(m.va(), m.size()).ok());
  ASSERT_TRUE(t.RemoveRange(m.va()).ok());
}

// A withdrawal the memfd transport could not confirm with every peer has happened all the same;
// the kernel's has not.
TEST_F(TransportTest, WhatCountsAsWithdrawn) {
  MemfdTransport memfd;
  KernelTransport kernel;
  const Status timeout = Error(HCCL_E_TIMEOUT, "a peer did not acknowledge");
  const Status para = Error(HCCL_E_PARA, "no activation starts there");
  EXPECT_TRUE(memfd.Withdrawn(timeout));
  EXPECT_FALSE(memfd.Withdrawn(para));
  EXPECT_FALSE(kernel.Withdrawn(timeout));
  EXPECT_TRUE(kernel.Withdrawn(Status::Ok()));
}

// Without the module every kernel transport call fails with the device's error, naming it.
TEST_F(TransportTest, KernelWithoutTheModuleFails) {
  if (HaveModule()) {
    GTEST_SKIP() << GetConfig().device_path << " exists: the guest tests cover this transport";
  }
  KernelTransport t;
  EXPECT_EQ(t.AddRange(0x10000, kPage).code(), HCCL_E_DRV);
  EXPECT_EQ(t.Activate(0x10000, kPage, 0).code(), HCCL_E_DRV);
  EXPECT_EQ(t.Deactivate(0x10000).code(), HCCL_E_DRV);
  EXPECT_EQ(t.RemoveRange(0x10000).code(), HCCL_E_DRV);
  auto link = t.Connect({.id = {1, 2}, .rank = 0, .pids = {1}, .timeout = {}});
  EXPECT_EQ(link.status().code(), HCCL_E_DRV);
}

}  // namespace
}  // namespace hzc::transport
