// SPDX-License-Identifier: Apache-2.0
// The plans of the exchanges (coll/exchange.h): what each kind sends and receives per peer,
// the refusals of its own arguments, the pairwise check across ranks and the hash of the arrays
// that must be the same everywhere.
#include "coll/exchange.h"
#include "coll/kinds.h"

#include <cstdint>
#include <vector>

#include "hzc_test.h"

namespace hzc::coll {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using V = std::vector<uint64_t>;

class ExchangeTest : public test::Test {
 protected:
  // A buffer address far from the ends of the address space.
  void *const buf_ = reinterpret_cast<void *>(uintptr_t{1} << 40);
};

TEST_F(ExchangeTest, AlltoAllSendsBlockQToRankQ) {
  const Call c{.kind = Kind::kAlltoAll,
               .send = buf_,
               .recv = buf_,
               .count = 3,
               .dtype = HCCL_DATA_TYPE_FP32,
               .recv_count = 3,
               .recv_dtype = HCCL_DATA_TYPE_FP32};
  auto p = MakePlan(c, 3, 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_THAT(p->send_off, ElementsAre(0, 12, 24));
  EXPECT_THAT(p->send_len, ElementsAre(12, 12, 12));
  EXPECT_THAT(p->recv_off, ElementsAre(0, 12, 24));
  EXPECT_THAT(p->recv_len, ElementsAre(12, 12, 12));
  EXPECT_EQ(p->SendExtent(), 36U);
  EXPECT_EQ(p->RecvExtent(), 36U);
}

TEST_F(ExchangeTest, AlltoAllVUsesTheArraysInBytes) {
  const V sc{1, 0, 5}, sd{10, 0, 2}, rc{4, 0, 2}, rd{0, 9, 6};
  const Call c{.kind = Kind::kAlltoAllV,
               .send = buf_,
               .recv = buf_,
               .dtype = HCCL_DATA_TYPE_INT16,
               .send_counts = sc.data(),
               .send_displs = sd.data(),
               .recv_counts = rc.data(),
               .recv_displs = rd.data(),
               .recv_dtype = HCCL_DATA_TYPE_INT16};
  auto p = MakePlan(c, 3, 1);  // rank 1 sends itself 0 and expects 0 from itself
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_THAT(p->send_off, ElementsAre(20, 0, 4));
  EXPECT_THAT(p->send_len, ElementsAre(2, 0, 10));
  EXPECT_THAT(p->recv_off, ElementsAre(0, 18, 12));
  EXPECT_THAT(p->recv_len, ElementsAre(8, 0, 4));
  EXPECT_EQ(p->SendExtent(), 22U);  // the empty block at 0 does not count
  EXPECT_EQ(p->RecvExtent(), 16U);
  // Rank 2 would send itself 5 elements but expect 2: its own arguments are refused.
  auto bad = MakePlan(c, 3, 2);
  EXPECT_EQ(bad.status().code(), HCCL_E_PARA);
  EXPECT_THAT(bad.status().message(), HasSubstr("sends itself 5 elements but expects 2"));
}

TEST_F(ExchangeTest, AlltoAllVCPacksRowAndColumn) {
  const V m{1, 2, 3,  //
            4, 5, 6,  //
            7, 8, 9};
  const Call c{.kind = Kind::kAlltoAllVC,
               .send = buf_,
               .recv = buf_,
               .dtype = HCCL_DATA_TYPE_INT8,
               .count_matrix = m.data(),
               .recv_dtype = HCCL_DATA_TYPE_INT8};
  auto p = MakePlan(c, 3, 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_THAT(p->send_off, ElementsAre(0, 4, 9));
  EXPECT_THAT(p->send_len, ElementsAre(4, 5, 6));
  EXPECT_THAT(p->recv_off, ElementsAre(0, 2, 7));
  EXPECT_THAT(p->recv_len, ElementsAre(2, 5, 8));
}

TEST_F(ExchangeTest, RootedAndVectorKinds) {
  const Call reduce{
      .kind = Kind::kReduce, .send = buf_, .count = 4, .dtype = HCCL_DATA_TYPE_FP64, .root = 2};
  auto root = MakePlan(reduce, 3, 2), other = MakePlan(reduce, 3, 0);
  ASSERT_TRUE(root.ok() && other.ok());
  EXPECT_THAT(root->recv_len, ElementsAre(32, 32, 32));
  EXPECT_THAT(other->send_len, ElementsAre(0, 0, 32));
  EXPECT_EQ(other->RecvExtent(), 0U);  // recvBuf does not matter off the root

  const Call scatter{.kind = Kind::kScatter,
                     .send = buf_,
                     .recv = buf_,
                     .count = 2,
                     .dtype = HCCL_DATA_TYPE_INT128,
                     .root = 0};
  auto from = MakePlan(scatter, 3, 0), to = MakePlan(scatter, 3, 1);
  ASSERT_TRUE(from.ok() && to.ok());
  EXPECT_THAT(from->send_off, ElementsAre(0, 32, 64));
  EXPECT_THAT(to->send_len, ElementsAre(0, 0, 0));
  EXPECT_THAT(to->recv_len, ElementsAre(32, 0, 0));

  const V rc{2, 0, 3}, rd{5, 0, 0};
  const Call agv{.kind = Kind::kAllGatherV,
                 .send = buf_,
                 .recv = buf_,
                 .count = 3,
                 .dtype = HCCL_DATA_TYPE_INT8,
                 .recv_counts = rc.data(),
                 .recv_displs = rd.data()};
  auto g = MakePlan(agv, 3, 2);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_THAT(g->send_len, ElementsAre(3, 3, 3));
  EXPECT_THAT(g->recv_off, ElementsAre(5, 0, 0));

  const V sc{1, 2, 3}, sd{0, 1, 3};
  const Call rsv{.kind = Kind::kReduceScatterV,
                 .send = buf_,
                 .recv = buf_,
                 .count = 2,
                 .dtype = HCCL_DATA_TYPE_INT32,
                 .send_counts = sc.data(),
                 .send_displs = sd.data()};
  auto r = MakePlan(rsv, 3, 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_THAT(r->send_off, ElementsAre(0, 4, 12));
  EXPECT_THAT(r->recv_len, ElementsAre(8, 8, 8));
  EXPECT_EQ(MakePlan(rsv, 3, 0).status().code(), HCCL_E_PARA);  // recvCount 2, sendCounts[0] 1
}

TEST_F(ExchangeTest, OverflowsAndTypesAreRefused) {
  Call c{.kind = Kind::kAlltoAll,
         .send = buf_,
         .recv = buf_,
         .count = UINT64_MAX / 3,
         .dtype = HCCL_DATA_TYPE_INT16,
         .recv_count = UINT64_MAX / 3,
         .recv_dtype = HCCL_DATA_TYPE_INT16};
  auto p = MakePlan(c, 2, 0);
  EXPECT_EQ(p.status().code(), HCCL_E_PARA);
  EXPECT_THAT(p.status().message(), HasSubstr("sendCount="));
  c.count = c.recv_count = 1;
  c.recv_dtype = HCCL_DATA_TYPE_UINT16;
  EXPECT_THAT(MakePlan(c, 2, 0).status().message(), HasSubstr("recvType=8: must be sendType"));

  const V sc{1, 1}, sd{UINT64_MAX / 2, 0};
  const Call v{.kind = Kind::kReduceScatterV,
               .send = buf_,
               .recv = buf_,
               .count = 1,
               .dtype = HCCL_DATA_TYPE_FP32,
               .send_counts = sc.data(),
               .send_displs = sd.data()};
  auto o = MakePlan(v, 2, 1);
  EXPECT_EQ(o.status().code(), HCCL_E_PARA);
  EXPECT_THAT(o.status().message(), HasSubstr("sendCounts/sendDispls, entry 0"));

  const V small{1, 1}, zero{0, 0};
  const Call wrap{.kind = Kind::kAllGatherV,
                  .send = buf_,
                  .recv = reinterpret_cast<void *>(UINTPTR_MAX - 1),
                  .count = 1,
                  .dtype = HCCL_DATA_TYPE_INT64,
                  .recv_counts = small.data(),
                  .recv_displs = zero.data()};
  auto w = MakePlan(wrap, 2, 0);
  EXPECT_EQ(w.status().code(), HCCL_E_PARA);
  EXPECT_THAT(w.status().message(), HasSubstr("wrap around"));
}

TEST_F(ExchangeTest, CheckPlansNamesTheFirstPairThatDisagrees) {
  Plan a{.send_off = {0, 0}, .send_len = {4, 8}, .recv_off = {0, 4}, .recv_len = {4, 8}};
  Plan b{.send_off = {0, 0}, .send_len = {8, 2}, .recv_off = {0, 8}, .recv_len = {8, 2}};
  EXPECT_TRUE(CheckPlans({a, b}, 7).ok());
  b.recv_len[0] = 9;  // rank 1 expects 9 bytes from rank 0, which sends 8
  const Status st = CheckPlans({a, b}, 7);
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_THAT(st.message(), HasSubstr("ranks disagree on call 7: rank 0 sends rank 1 8 bytes, "
                                      "rank 1 expects 9 bytes from rank 0"));
}

TEST_F(ExchangeTest, SharedArgsHashCoversTheArraysCannRequiresEverywhere) {
  V m{1, 2, 3, 4};
  const Call c{.kind = Kind::kAlltoAllVC, .count_matrix = m.data()};
  const uint64_t h = SharedArgsHash(c, 2);
  EXPECT_NE(h, 0U);
  m[1] = 5;
  EXPECT_NE(SharedArgsHash(c, 2), h);
  const V counts{1, 2}, d1{0, 1}, d2{0, 2};
  Call g{.kind = Kind::kAllGatherV, .recv_counts = counts.data(), .recv_displs = d1.data()};
  const uint64_t hg = SharedArgsHash(g, 2);
  g.recv_displs = d2.data();
  EXPECT_NE(SharedArgsHash(g, 2), hg);
  EXPECT_EQ(SharedArgsHash(Call{.kind = Kind::kAlltoAllV}, 2), 0U);  // per-rank arrays
}

TEST_F(ExchangeTest, KindsAreClassified) {
  EXPECT_TRUE(IsExchange(Kind::kReduce));
  EXPECT_TRUE(IsExchange(Kind::kAlltoAllVC));
  EXPECT_FALSE(IsExchange(Kind::kAllReduce));
  EXPECT_TRUE(IsVector(Kind::kAllGatherV));
  EXPECT_FALSE(IsVector(Kind::kAlltoAll));
  EXPECT_TRUE(Reduces(Kind::kReduceScatterV));
  EXPECT_FALSE(Reduces(Kind::kScatter));
  EXPECT_STREQ(KindName(Kind::kAlltoAllV), "AlltoAllV");
}

}  // namespace
}  // namespace hzc::coll
