// SPDX-License-Identifier: Apache-2.0
// Rank-table files for HcclCommInitClusterInfo (versions "1.0" and "1.2").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/root_info.h"

namespace hzc::bootstrap {

struct RankTable {
  struct Rank {  // one "device" entry of the file: the rank on one device of the server
    uint32_t device_id = 0;
    std::string device_ip;
    uint32_t rank = 0;
  };
  struct Server {
    std::string server_id;
    std::string host_ip;  // 1.2 only
    std::vector<Rank> ranks;
  };

  std::string version;
  std::vector<Server> servers;
  uint32_t nranks = 0;
  std::vector<uint32_t> server_of_rank;  // index into servers, per rank
};

// Parse and check a rank table. Every problem is HCCL_E_PARA naming the field
// ("server_list[1].device[0].rank_id: ...").
Expected<RankTable> ParseRankTable(const std::string &text);
// Read @path (at most 4096 bytes long) and parse it; HCCL_E_OPEN_FILE_FAILURE if unreadable.
Expected<RankTable> LoadRankTable(const std::string &path);

// The communicator id of @table: derived from its version and the server of each rank, so
// every rank that reads the same table gets the same id.
UniqueId RankTableId(const RankTable &table);
// The key the ranks of @table prove at its rendezvous (bootstrap/auth.h): derived from the job
// @secret and the table's id; without a secret, the table's id, which anyone who reads the table
// knows (the source address checks and the trust list are all that hold then).
UniqueId RankTableKey(const RankTable &table, const std::optional<std::string> &secret);
// The IP addresses of the server of @rank in @table (its server_id and host_ip that are ones).
std::vector<std::string> ServerAddresses(const RankTable &table, uint32_t rank);
// Why a connection from @ip may not be rank @rank of @table at its rendezvous; "" if it may: @ip
// is an address of the rank's server in the table, or the rank is on the server of rank 0 (which
// serves the rendezvous) and @ip is local.
std::string WhyNotFrom(const RankTable &table, uint32_t rank, const std::string &ip);

}  // namespace hzc::bootstrap
