// SPDX-License-Identifier: Apache-2.0
#include "core/comm_init.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "core/comm.h"
#include "hzc_test.h"

namespace hzc {
namespace {

using ::testing::HasSubstr;

class CommInitTest : public test::Test {
 protected:
  void TearDown() override {
    for (HcclComm h : made_) {
      EXPECT_TRUE(CommRegistry::Process().Remove(h).ok());
    }
    std::remove(path_.c_str());
    test::Test::TearDown();
  }
  // Write a one-server table of two ranks on @server.
  const char *Table(const std::string &server) {
    std::ofstream(path_) << R"({"status": "completed", "version": "1.0", "server_count": "1",
      "server_list": [{"server_id": ")"
                         << server << R"(", "device": [
        {"device_id": "0", "device_ip": "192.168.1.10", "rank_id": "0"},
        {"device_id": "1", "device_ip": "192.168.1.11", "rank_id": "1"}]}]})";
    return path_.c_str();
  }
  std::shared_ptr<Communicator> Made(Expected<HcclComm> handle) {
    EXPECT_TRUE(handle.ok()) << handle.status().message();
    if (!handle.ok()) {
      return nullptr;
    }
    made_.push_back(*handle);
    return CommRegistry::Process().Get(*handle).value();
  }

  std::string path_ = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") +
                      "/hzc-comm-init-" + std::to_string(getpid()) + ".json";
  std::vector<HcclComm> made_;
};

// Every rank that reads the same table joins the same communicator; another table is another.
TEST_F(CommInitTest, RankTableRanksShareTheTablesId) {
  auto r0 = Made(FromRankTable(Table("node-a"), 0));
  auto r1 = Made(FromRankTable(Table("node-a"), 1));
  auto other = Made(FromRankTable(Table("node-b"), 0));
  ASSERT_TRUE(r0 && r1 && other);
  EXPECT_EQ(r0->id(), r1->id());
  EXPECT_NE(r0->id(), other->id());
  EXPECT_EQ(r0->size(), 2U);
  EXPECT_EQ(r1->rank(), 1U);
  EXPECT_EQ(r0->ServerCount(), 1U);
  EXPECT_EQ(r0->ranks()[1].host, "node-a");
}

TEST_F(CommInitTest, RankTableWithoutTheRank) {
  auto st = FromRankTable(Table("node-a"), 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), HCCL_E_PARA);
  EXPECT_EQ(st.status().message(), "rank=2: no such rank_id in " + path_ + " (ranks 0..1)");
  EXPECT_EQ(FromRankTable("/nonexistent.json", 0).status().code(), HCCL_E_OPEN_FILE_FAILURE);
}

TEST_F(CommInitTest, RootInfoOfOneRank) {
  HcclRootInfo root{};
  ASSERT_TRUE(NewRootInfo(&root).ok());
  auto c = Made(FromRootInfo(root, 1, 0));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->size(), 1U);
  EXPECT_EQ(c->rank(), 0U);
  HcclRootInfo garbage{};
  EXPECT_EQ(FromRootInfo(garbage, 1, 0).status().code(), HCCL_E_PARA);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
}

}  // namespace
}  // namespace hzc
