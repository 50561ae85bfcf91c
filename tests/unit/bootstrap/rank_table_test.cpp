// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rank_table.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

json V10() {
  return json::parse(R"({
    "status": "completed", "version": "1.0", "server_count": "2",
    "server_list": [
      {"server_id": "10.0.0.1", "device": [
        {"device_id": "0", "device_ip": "192.168.1.10", "rank_id": "0"},
        {"device_id": "1", "device_ip": "192.168.1.11", "rank_id": "1"}]},
      {"server_id": "10.0.0.2", "device": [
        {"device_id": "0", "device_ip": "192.168.1.20", "rank_id": "2"}]}
    ]})");
}

json V12() {
  json t = V10();
  t["version"] = "1.2";
  t["server_list"][0]["host_ip"] = "10.0.0.1";
  t["server_list"][1]["host_ip"] = "10.0.0.2";
  t["super_pod_list"] = json::parse(
      R"([{"super_pod_id": "0", "server_list": [{"server_id": "10.0.0.1"},
                                               {"server_id": "10.0.0.2"}]}])");
  return t;
}

class RankTableTest : public test::Test {
 protected:
  // Expect @t to be refused with a message naming @field.
  void ExpectBad(const json &t, const std::string &field) {
    auto r = ParseRankTable(t.dump());
    ASSERT_FALSE(r.ok()) << "accepted a table with a broken " << field;
    EXPECT_EQ(r.status().code(), HCCL_E_PARA);
    EXPECT_THAT(r.status().message(), HasSubstr(field));
  }
};

TEST_F(RankTableTest, Version10) {
  auto r = ParseRankTable(V10().dump());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, "1.0");
  EXPECT_EQ(r->nranks, 3U);
  ASSERT_EQ(r->servers.size(), 2U);
  EXPECT_EQ(r->servers[1].ranks[0].device_ip, "192.168.1.20");
  EXPECT_EQ(r->server_of_rank, (std::vector<uint32_t>{0, 0, 1}));
}

TEST_F(RankTableTest, Version12) {
  auto r = ParseRankTable(V12().dump());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, "1.2");
  EXPECT_EQ(r->servers[0].host_ip, "10.0.0.1");
}

TEST_F(RankTableTest, NotJson) {
  auto r = ParseRankTable("{\"version\": ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_PARA);
  EXPECT_THAT(r.status().message(), HasSubstr("not valid JSON"));
  ExpectBad(json::array(), "top level must be an object");
}

TEST_F(RankTableTest, BrokenFields) {
  json t;
  t = V10();
  t.erase("version");
  ExpectBad(t, "version: missing");
  t = V10();
  t["version"] = "2.0";
  ExpectBad(t, "version: \"2.0\" is not supported");
  t = V10();
  t["version"] = 1.0;
  ExpectBad(t, "version: must be a string");
  t = V10();
  t["status"] = "initializing";
  ExpectBad(t, "status");
  t = V10();
  t.erase("status");
  ExpectBad(t, "status: missing");
  t = V10();
  t["server_count"] = "3";
  ExpectBad(t, "server_count: says 3");
  t = V10();
  t["server_count"] = 2;
  ExpectBad(t, "server_count: must be a string");
  t = V10();
  t["server_count"] = "two";
  ExpectBad(t, "server_count: \"two\" is not");
  t = V10();
  t.erase("server_list");
  ExpectBad(t, "server_list: missing");
  t = V10();
  t["server_list"] = json::array();
  ExpectBad(t, "server_list: must be a non-empty");
  t = V10();
  t["server_list"][1] = 5;
  ExpectBad(t, "server_list[1]: must be an object");
  t = V10();
  t["server_list"][1].erase("server_id");
  ExpectBad(t, "server_list[1].server_id: missing");
  t = V10();
  t["server_list"][1]["server_id"] = "10.0.0.1";
  ExpectBad(t, "server_list[1].server_id: \"10.0.0.1\" appears twice");
  t = V10();
  t["server_list"][0]["device"] = json::array();
  ExpectBad(t, "server_list[0].device: must be a non-empty array");
  t = V10();
  t["server_list"][0]["device"][1]["device_id"] = "0";
  ExpectBad(t, "server_list[0].device[1].device_id: 0 appears twice");
  t = V10();
  t["server_list"][0]["device"][1]["rank_id"] = "2";
  ExpectBad(t, "server_list[1].device[0].rank_id: 2 appears twice");
  t = V10();
  t["server_list"][1]["device"][0]["rank_id"] = "5";
  ExpectBad(t, "rank_id: ranks must be 0..2 without gaps");
  t = V10();
  t["server_list"][1]["device"][0]["rank_id"] = "-1";
  ExpectBad(t, "server_list[1].device[0].rank_id: \"-1\" is not a decimal number");
  t = V10();
  t["server_list"][1]["device"][0]["device_ip"] = "300.1.1.1";
  ExpectBad(t, "server_list[1].device[0].device_ip: \"300.1.1.1\" is not an IP");
  t = V10();
  t["server_list"][1]["device"][0].erase("device_ip");
  ExpectBad(t, "server_list[1].device[0].device_ip: missing");
  t = V12();
  t["server_list"][0].erase("host_ip");
  ExpectBad(t, "server_list[0].host_ip: missing");
  t = V12();
  t["super_pod_list"][0]["server_list"][1]["server_id"] = "10.9.9.9";
  ExpectBad(t, "super_pod_list[0].server_list[1].server_id: \"10.9.9.9\" is not in");
  t = V12();
  t["super_pod_list"] = "x";
  ExpectBad(t, "super_pod_list: must be an array");
}

TEST_F(RankTableTest, LoadFromFile) {
  char path[] = "/tmp/hzc-rank-table-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << V10().dump(2);
  auto r = LoadRankTable(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::ofstream(path) << "{";
  r = LoadRankTable(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_PARA);
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  unlink(path);
  r = LoadRankTable(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_OPEN_FILE_FAILURE);
  EXPECT_EQ(LoadRankTable(std::string(5000, 'a')).status().code(), HCCL_E_PARA);
  EXPECT_EQ(LoadRankTable("").status().code(), HCCL_E_PARA);
}

// The id depends on the version and on each rank's server, the same in every reader.
TEST_F(RankTableTest, IdOfATable) {
  auto a = ParseRankTable(V10().dump());
  auto again = ParseRankTable(V10().dump(2));
  auto v12 = ParseRankTable(V12().dump());
  json moved = V10();
  moved["server_list"][1]["server_id"] = "10.0.0.3";
  auto other = ParseRankTable(moved.dump());
  ASSERT_TRUE(a.ok() && again.ok() && v12.ok() && other.ok());
  EXPECT_EQ(RankTableId(*a), RankTableId(*again));
  EXPECT_NE(RankTableId(*a), RankTableId(*v12));
  EXPECT_NE(RankTableId(*a), RankTableId(*other));
  EXPECT_NE(RankTableId(*a), UniqueId{});
}

// Issue 27: a rank of a table is taken at its rendezvous only from its server's address (ranks on
// rank 0's server, which serves it, also from local addresses).
TEST_F(RankTableTest, ARankComesFromItsServersAddress) {
  auto t = ParseRankTable(V12().dump());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(ServerAddresses(*t, 2), (std::vector<std::string>{"10.0.0.2", "10.0.0.2"}));
  EXPECT_EQ(WhyNotFrom(*t, 2, "10.0.0.2"), "");
  EXPECT_EQ(WhyNotFrom(*t, 1, "10.0.0.1"), "");
  EXPECT_EQ(WhyNotFrom(*t, 1, "127.0.0.1"), "");  // rank 0's server, by loopback
  EXPECT_EQ(WhyNotFrom(*t, 2, "127.0.0.1"),
            "rank 2 connects from 127.0.0.1, not from its server's address in the table "
            "(server_list[1]: 10.0.0.2, 10.0.0.2)");
  EXPECT_THAT(WhyNotFrom(*t, 2, "10.0.0.9"), HasSubstr("rank 2 connects from 10.0.0.9"));
  EXPECT_THAT(WhyNotFrom(*t, 3, "10.0.0.2"), HasSubstr("the table has ranks 0..2"));
}

}  // namespace
}  // namespace hzc::bootstrap
