// SPDX-License-Identifier: Apache-2.0
#include "core/range_registry.h"

#include <memory>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "hzc_test.h"

namespace hzc {
namespace {

using ::testing::HasSubstr;

class RangeRegistryTest : public test::Test {
 protected:
  // Each change in its two steps, the transport agreeing.
  Status Set(uintptr_t base, size_t size, uint64_t comm = 1) {
    HZC_RETURN_IF_ERROR(reg.Add(base, size, comm));
    reg.Settle(base, true);
    return Status::Ok();
  }
  Status Unset(uintptr_t base) {
    HZC_RETURN_IF_ERROR(reg.Remove(base));
    reg.Settle(base, true);
    return Status::Ok();
  }
  Status Activate(uintptr_t va, size_t size, void *handle, std::weak_ptr<Communicator> comm = {}) {
    HZC_RETURN_IF_ERROR(reg.Activate(va, size, handle, std::move(comm)));
    reg.SettleActivation(va, true);
    return Status::Ok();
  }
  Status Deactivate(uintptr_t va, RangeRegistry::Activation *removed = nullptr) {
    HZC_RETURN_IF_ERROR(reg.Deactivate(va, removed));
    reg.SettleActivation(va, true);
    return Status::Ok();
  }

  RangeRegistry reg;
  static constexpr uintptr_t kBase = 0x100000;
  static constexpr size_t kSize = 0x10000;
};

TEST_F(RangeRegistryTest, AdjacentRangesAreAccepted) {
  ASSERT_TRUE(Set(kBase, kSize, 1).ok());
  EXPECT_TRUE(Set(kBase + kSize, kSize, 1).ok());  // right neighbour
  EXPECT_TRUE(Set(kBase - kSize, kSize, 2).ok());  // left neighbour, other comm
  EXPECT_EQ(reg.RangeCount(), 3U);
}

TEST_F(RangeRegistryTest, OverlapsAreRejectedAcrossCommunicators) {
  ASSERT_TRUE(Set(kBase, kSize, 1).ok());
  struct Case {
    uintptr_t base;
    size_t size;
    const char *what;
  };
  const Case cases[] = {
      {kBase, kSize, "equal"},
      {kBase + 0x1000, 0x1000, "contained"},
      {kBase - 0x1000, kSize + 0x2000, "containing"},
      {kBase - 0x1000, 0x2000, "partial left"},
      {kBase + kSize - 0x1000, 0x2000, "partial right"},
      {kBase, 0x1000, "same base, shorter"},
      {kBase - 0x1000, kSize + 0x1000, "same end, longer"},
  };
  for (const auto &c : cases) {
    for (uint64_t comm : {1, 2}) {
      Status st = Set(c.base, c.size, comm);
      EXPECT_EQ(st.code(), HCCL_E_PARA) << c.what << " via comm " << comm;
      EXPECT_THAT(st.message(), HasSubstr("already set")) << c.what;
    }
  }
  EXPECT_THAT(Set(kBase, kSize, 2).message(), HasSubstr("repeats"));
  EXPECT_EQ(reg.RangeCount(), 1U);  // nothing changed
}

TEST_F(RangeRegistryTest, RemoveNeedsExactBase) {
  ASSERT_TRUE(Set(kBase, kSize, 1).ok());
  EXPECT_EQ(Unset(kBase + 0x1000).code(), HCCL_E_PARA);
  EXPECT_EQ(Unset(kBase - 0x1000).code(), HCCL_E_PARA);
  EXPECT_TRUE(Unset(kBase).ok());
  EXPECT_EQ(Unset(kBase).code(), HCCL_E_PARA);
  EXPECT_EQ(reg.RangeCount(), 0U);
}

TEST_F(RangeRegistryTest, ActivationRules) {
  ASSERT_TRUE(Set(kBase, kSize, 1).ok());
  ASSERT_TRUE(Set(kBase + kSize, kSize, 1).ok());
  int h = 0;
  // Adjacent growth inside one range.
  EXPECT_TRUE(Activate(kBase, 0x2000, &h).ok());
  EXPECT_TRUE(Activate(kBase + 0x2000, 0x2000, &h).ok());
  // Overlaps with activated memory.
  EXPECT_EQ(Activate(kBase + 0x1000, 0x1000, &h).code(), HCCL_E_PARA);
  EXPECT_EQ(Activate(kBase + 0x3000, 0x2000, &h).code(), HCCL_E_PARA);
  // Across two adjacent ranges, or outside any.
  EXPECT_THAT(Activate(kBase + kSize - 0x1000, 0x2000, &h).message(),
              HasSubstr("not inside one set range"));
  EXPECT_EQ(Activate(kBase - 0x1000, 0x1000, &h).code(), HCCL_E_PARA);
  EXPECT_EQ(Activate(kBase + 2 * kSize, 0x1000, &h).code(), HCCL_E_PARA);
  EXPECT_EQ(reg.ActivationCount(), 2U);

  // Unset refused while activated memory remains.
  Status st = Unset(kBase);
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_THAT(st.message(), HasSubstr("2 activation(s) remain"));

  // Deactivate by exact start only.
  EXPECT_EQ(Deactivate(kBase + 0x1000).code(), HCCL_E_PARA);
  EXPECT_TRUE(Deactivate(kBase).ok());
  EXPECT_EQ(Deactivate(kBase).code(), HCCL_E_PARA);
  EXPECT_TRUE(Deactivate(kBase + 0x2000).ok());
  EXPECT_TRUE(Unset(kBase).ok());
  EXPECT_TRUE(Unset(kBase + kSize).ok());
}

// An activation remembers the communicator it was made through (which holds its RDMA
// registration) without keeping it alive.
TEST_F(RangeRegistryTest, ActivationKeepsItsCommunicatorWeakly) {
  auto comm = std::make_shared<Communicator>(bootstrap::UniqueId{}, 0,
                                             std::vector<bootstrap::RankIdentity>(1));
  ASSERT_TRUE(Set(kBase, kSize, comm->serial()).ok());
  int h = 0;
  ASSERT_TRUE(Activate(kBase, 0x1000, &h, comm).ok());
  ASSERT_TRUE(Activate(kBase + 0x1000, 0x1000, &h).ok());  // through no communicator
  EXPECT_EQ(comm.use_count(), 1);

  RangeRegistry::Activation removed;
  ASSERT_TRUE(reg.Deactivate(kBase, &removed).ok());
  EXPECT_EQ(removed.size, 0x1000U);
  EXPECT_EQ(removed.handle, &h);
  EXPECT_EQ(removed.comm.lock(), comm);
  reg.SettleActivation(kBase, false);  // a deactivation the kernel refused: back as it was
  comm.reset();
  ASSERT_TRUE(Deactivate(kBase, &removed).ok());
  EXPECT_TRUE(removed.comm.expired());  // destroyed meanwhile: nothing to drop
  ASSERT_TRUE(Deactivate(kBase + 0x1000, &removed).ok());
  EXPECT_TRUE(removed.comm.expired());
  EXPECT_TRUE(Unset(kBase).ok());
}

// An entry keeps its place until its change settles: what overlaps it is refused meanwhile, as
// is a second change of it, and an undone change leaves it as it was.
TEST_F(RangeRegistryTest, AnEntryInTheMiddleOfAChangeHoldsItsPlace) {
  ASSERT_TRUE(reg.Add(kBase, kSize, 1).ok());  // arriving
  EXPECT_THAT(reg.Add(kBase, 0x1000, 2).message(), HasSubstr("already set"));
  EXPECT_THAT(reg.Remove(kBase).message(), HasSubstr("being set by another call"));
  int h = 0;
  EXPECT_THAT(reg.Activate(kBase, 0x1000, &h).message(), HasSubstr("being set"));
  reg.Settle(kBase, false);  // the transport refused: gone
  EXPECT_EQ(reg.RangeCount(), 0U);

  ASSERT_TRUE(Set(kBase, kSize).ok());
  ASSERT_TRUE(reg.Remove(kBase).ok());  // leaving
  EXPECT_THAT(reg.Add(kBase + 0x1000, 0x1000, 1).message(), HasSubstr("already set"));
  EXPECT_THAT(reg.Remove(kBase).message(), HasSubstr("being unset by another call"));
  EXPECT_THAT(reg.Activate(kBase, 0x1000, &h).message(), HasSubstr("being unset"));
  reg.Settle(kBase, false);  // the transport kept it: set again
  ASSERT_EQ(reg.RangeCount(), 1U);

  ASSERT_TRUE(reg.Activate(kBase, 0x1000, &h).ok());  // arriving
  EXPECT_THAT(reg.Activate(kBase, 0x2000, &h).message(), HasSubstr("overlaps activated memory"));
  EXPECT_THAT(reg.Deactivate(kBase).message(), HasSubstr("being activated by another call"));
  EXPECT_THAT(reg.Remove(kBase).message(), HasSubstr("1 activation(s) remain"));
  reg.SettleActivation(kBase, true);
  ASSERT_TRUE(reg.Deactivate(kBase).ok());  // leaving
  EXPECT_THAT(reg.Deactivate(kBase).message(), HasSubstr("being deactivated by another call"));
  EXPECT_THAT(reg.Remove(kBase).message(), HasSubstr("1 activation(s) remain"));
  reg.SettleActivation(kBase, false);
  EXPECT_EQ(reg.ActivationCount(), 1U);
  ASSERT_TRUE(Deactivate(kBase).ok());
  ASSERT_TRUE(Unset(kBase).ok());
  EXPECT_EQ(reg.RangeCount(), 0U);
}

TEST_F(RangeRegistryTest, ManySetUnsetPairsStayBalanced) {
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(Set(kBase, kSize, 1).ok());
    ASSERT_TRUE(Unset(kBase).ok());
  }
  EXPECT_EQ(reg.RangeCount(), 0U);
}

// Holding finds the settled activation around a span: not one that is arriving or leaving, not
// across two activations, not outside one.
TEST_F(RangeRegistryTest, HoldingFindsTheSettledActivationAroundASpan) {
  ASSERT_TRUE(Set(kBase, kSize).ok());
  ASSERT_TRUE(Activate(kBase + 0x1000, 0x2000, nullptr).ok());
  ASSERT_TRUE(Activate(kBase + 0x3000, 0x1000, nullptr).ok());
  const auto held = reg.Holding(kBase + 0x1800, 0x1800);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->va, kBase + 0x1000);
  EXPECT_EQ(held->size, 0x2000U);
  EXPECT_TRUE(reg.Holding(kBase + 0x3000, 0x1000).has_value());
  EXPECT_FALSE(reg.Holding(kBase + 0x2800, 0x1000).has_value()) << "across two activations";
  EXPECT_FALSE(reg.Holding(kBase + 0x800, 0x1000).has_value()) << "starts before it";
  EXPECT_FALSE(reg.Holding(kBase + 0x4000, 1).has_value()) << "after the last";
  EXPECT_FALSE(reg.Holding(kBase + 0x1000, 0).has_value()) << "empty";
  EXPECT_FALSE(reg.Holding(kBase - 1, 1).has_value()) << "before every range";
  ASSERT_TRUE(reg.Deactivate(kBase + 0x3000).ok());  // leaving, not yet settled
  EXPECT_FALSE(reg.Holding(kBase + 0x3000, 1).has_value());
  reg.SettleActivation(kBase + 0x3000, false);  // the transport refused: set again
  EXPECT_TRUE(reg.Holding(kBase + 0x3000, 1).has_value());
  ASSERT_TRUE(reg.Activate(kBase + 0x8000, 0x1000, nullptr).ok());  // arriving
  EXPECT_FALSE(reg.Holding(kBase + 0x8000, 1).has_value());
}

// Deactivated reaches every watcher until it unwatches.
TEST_F(RangeRegistryTest, WatchersHearOfDeactivationsUntilTheyUnwatch) {
  std::vector<std::pair<uintptr_t, size_t>> a, b;
  const uint64_t wa = reg.Watch([&](uintptr_t va, size_t size) { a.emplace_back(va, size); });
  const uint64_t wb = reg.Watch([&](uintptr_t va, size_t size) { b.emplace_back(va, size); });
  EXPECT_NE(wa, wb);
  reg.Deactivated(kBase, 0x1000);
  reg.Unwatch(wa);
  reg.Deactivated(kBase + 0x1000, 0x2000);
  reg.Unwatch(wb);
  reg.Deactivated(kBase, 1);
  using V = std::vector<std::pair<uintptr_t, size_t>>;
  EXPECT_EQ(a, (V{{kBase, 0x1000}}));
  EXPECT_EQ(b, (V{{kBase, 0x1000}, {kBase + 0x1000, 0x2000}}));
}

}  // namespace
}  // namespace hzc
