// SPDX-License-Identifier: Apache-2.0
#include "core/comm_init.h"

#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/host_id.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_info.h"
#include "core/comm.h"

namespace hzc {

Status NewRootInfo(HcclRootInfo *out) {
  const Config &config = GetConfig();
  auto root = bootstrap::StartRoot(config.if_ip, config.connect_timeout);
  if (!root.ok()) {
    return root.status();
  }
  bootstrap::Encode(*root, out);
  return Status::Ok();
}

Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank) {
  SetLogRank(rank);
  auto root = bootstrap::Decode(root_info);
  if (!root.ok()) {
    return root.status();
  }
  const bootstrap::RankIdentity self{bootstrap::HostIdentity(), static_cast<uint32_t>(getpid())};
  auto peers = bootstrap::Join(*root, nranks, rank, self, GetConfig().connect_timeout);
  if (!peers.ok()) {
    return Error(peers.status().code(), "rank {} of {}: {}", rank, nranks,
                 peers.status().message());
  }
  auto c = std::make_shared<Communicator>(root->id, rank, std::move(*peers));
  LogInfo("HcclCommInitRootInfo: rank {} of {} in communicator {} ({} server(s))", rank, nranks,
          bootstrap::IdString(c->id()), c->ServerCount());
  return CommRegistry::Process().Add(std::move(c));
}

Expected<HcclComm> FromRankTable(const char *path, uint32_t rank) {
  auto table = bootstrap::LoadRankTable(path);
  if (!table.ok()) {
    return table.status();
  }
  if (rank >= table->nranks) {
    return Error(HCCL_E_PARA, "rank={}: no such rank_id in {} (ranks 0..{})", rank, path,
                 table->nranks - 1);
  }
  SetLogRank(rank);
  std::vector<bootstrap::RankIdentity> peers(table->nranks);
  for (uint32_t r = 0; r < table->nranks; ++r) {
    peers[r].host = table->servers[table->server_of_rank[r]].server_id;
  }
  auto c = std::make_shared<Communicator>(bootstrap::RankTableId(*table), rank, std::move(peers));
  LogInfo("HcclCommInitClusterInfo: rank {} of {} from {} ({} server(s))", rank, table->nranks,
          path, c->ServerCount());
  return CommRegistry::Process().Add(std::move(c));
}

}  // namespace hzc
