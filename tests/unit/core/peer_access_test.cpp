// SPDX-License-Identifier: Apache-2.0
// Peer access before the links are made, and the checks of Transfer's rank.
#include "core/peer_access.h"

#include <memory>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

class PeerAccessTest : public test::Test {
 protected:
  Communicator comm_{bootstrap::UniqueId{}, 0, std::vector<bootstrap::RankIdentity>(2)};
  HcclComm handle_ = reinterpret_cast<HcclComm>(uintptr_t{0x40});
  char buf_[64] = {};
};

TEST_F(PeerAccessTest, TransferRank) {
  Status st = Transfer(handle_, comm_, 2, buf_, 0x1000, sizeof(buf_), true);
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "rank=2: comm=0x40 has 2 ranks");
  st = Transfer(handle_, comm_, 0, buf_, 0x1000, sizeof(buf_), false);
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "rank=0: the caller's own rank; RDMA needs another rank");
}

TEST_F(PeerAccessTest, NothingBeforeTheLinks) {
  const std::string no_links =
      "comm=0x40: no links yet (the first HcclCommSetMemoryRange makes them)";
  Status st = Transfer(handle_, comm_, 1, buf_, 0x1000, sizeof(buf_), true);
  EXPECT_EQ(st.code(), HCCL_E_UNAVAIL);
  EXPECT_EQ(st.message(), no_links);
  auto p = PeerPointer(handle_, comm_, 1, 0x1000, 8);
  EXPECT_EQ(p.status().code(), HCCL_E_UNAVAIL);
  EXPECT_EQ(p.status().message(), no_links);
  auto activations = PeerActivations(handle_, comm_, 1);
  EXPECT_EQ(activations.status().code(), HCCL_E_UNAVAIL);
}

}  // namespace
}  // namespace hzc
