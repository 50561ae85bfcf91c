// SPDX-License-Identifier: Apache-2.0
#include "core/comm_init.h"

#include <unistd.h>

#include <memory>
#include <mutex>
#include <set>
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

Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank,
                                CommOptions options) {
  SetLogRank(rank);
  auto root = bootstrap::Decode(root_info);
  if (!root.ok()) {
    return root.status();
  }
  const bootstrap::RankIdentity self{bootstrap::HostIdentity(), static_cast<uint32_t>(getpid()), {}};
  auto peers = bootstrap::Join(*root, nranks, rank, self, GetConfig().connect_timeout);
  if (!peers.ok()) {
    return Error(peers.status().code(), "rank {} of {}: {}", rank, nranks,
                 peers.status().message());
  }
  auto c = std::make_shared<Communicator>(root->id, rank, std::move(*peers), std::move(options));
  LogInfo("HcclCommInitRootInfo: rank {} of {} in communicator {} ({} server(s))", rank, nranks,
          bootstrap::IdString(c->id()), c->ServerCount());
  return CommRegistry::Process().Add(std::move(c));
}

Expected<HcclComm> FromRankTable(const char *path, uint32_t rank, CommOptions options) {
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
  auto c = std::make_shared<Communicator>(bootstrap::RankTableId(*table), rank, std::move(peers),
                                          std::move(options));
  LogInfo("HcclCommInitClusterInfo: rank {} of {} from {} ({} server(s))", rank, table->nranks,
          path, c->ServerCount());
  return CommRegistry::Process().Add(std::move(c));
}

Expected<std::vector<HcclComm>> AllInProcess(uint32_t n) {
  auto id = bootstrap::RandomId();
  if (!id.ok()) {
    return id.status();
  }
  const bootstrap::RankIdentity self{bootstrap::HostIdentity(), static_cast<uint32_t>(getpid()), {}};
  const std::vector<bootstrap::RankIdentity> ranks(n, self);
  std::vector<HcclComm> out;
  for (uint32_t r = 0; r < n; ++r) {
    out.push_back(CommRegistry::Process().Add(std::make_shared<Communicator>(*id, r, ranks)));
  }
  LogInfo("HcclCommInitAll: {} ranks in this process, communicator {}", n,
          bootstrap::IdString(*id));
  return out;
}

Expected<HcclComm> SubCommunicator(HcclComm parent, const std::vector<uint32_t> &members,
                                   uint64_t sub_id, uint32_t position, CommOptions options) {
  auto p = CommRegistry::Process().Get(parent);
  if (!p.ok()) {
    return p.status();
  }
  const Communicator &pc = **p;
  {
    static std::mutex mutex;
    static std::set<std::pair<uint64_t, uint64_t>> used;  // (parent serial, sub_id)
    const std::lock_guard lock(mutex);
    if (!used.emplace(pc.serial(), sub_id).second) {
      return Error(HCCL_E_PARA, "subCommId={}: already used with this parent communicator", sub_id);
    }
  }
  std::string text = bootstrap::IdString(pc.id()) + "|sub|" + std::to_string(sub_id);
  std::vector<bootstrap::RankIdentity> ranks;
  for (uint32_t m : members) {
    text += "|" + std::to_string(m);
    ranks.push_back(pc.ranks()[m]);
  }
  auto c = std::make_shared<Communicator>(bootstrap::DerivedId(text), position, std::move(ranks),
                                          std::move(options));
  LogInfo("HcclCreateSubCommConfig: rank {} of {} in communicator {} (sub-communicator {} of {})",
          position, members.size(), bootstrap::IdString(c->id()), sub_id,
          bootstrap::IdString(pc.id()));
  return CommRegistry::Process().Add(std::move(c));
}

}  // namespace hzc
