// SPDX-License-Identifier: Apache-2.0
#include "core/comm_init.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/group.h"
#include "bootstrap/host_id.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_info.h"
#include "core/comm.h"
#include "core/memory.h"

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

namespace {

uint32_t HostCount(const std::vector<bootstrap::RankIdentity> &ranks) {
  std::set<std::string> hosts;
  for (const auto &r : ranks) {
    hosts.insert(r.host);
  }
  return static_cast<uint32_t>(hosts.size());
}

// This rank's identity in the rendezvous, with the address of its @listener (none if it could
// not listen: only a communicator that spans servers needs one).
bootstrap::RankIdentity Self(const Expected<bootstrap::Listener> &listener) {
  return bootstrap::RankIdentity{bootstrap::HostIdentity(), static_cast<uint32_t>(getpid()),
                                 listener.ok() ? listener->address() : ""};
}

// Rank @rank of communicator @id, whose ranks the rendezvous gave as @peers. When they span
// servers, its Group serves @listener (connections are made when first needed); else @listener
// is dropped.
Expected<std::shared_ptr<Communicator>> Connected(const bootstrap::UniqueId &id, uint32_t rank,
                                                  std::vector<bootstrap::RankIdentity> peers,
                                                  Expected<bootstrap::Listener> listener,
                                                  CommOptions options) {
  const auto n = static_cast<uint32_t>(peers.size());
  std::unique_ptr<bootstrap::Group> group;
  if (const uint32_t servers = HostCount(peers); servers > 1) {
    if (!listener.ok()) {
      return Error(listener.status().code(),
                   "rank {} of {}: the ranks run on {} servers, but this rank cannot listen for "
                   "their connections: {}",
                   rank, n, servers, listener.status().message());
    }
    std::vector<std::string> addresses;
    for (const auto &p : peers) {
      addresses.push_back(p.address);
    }
    auto g =
        bootstrap::Group::Connect(std::move(*listener), id, rank, addresses,
                                  bootstrap::Group::Clock::now() + GetConfig().connect_timeout);
    if (!g.ok()) {
      return Error(g.status().code(), "rank {} of {}: {}", rank, n, g.status().message());
    }
    group = std::move(*g);
  }
  auto c = std::make_shared<Communicator>(id, rank, std::move(peers), std::move(options));
  if (group != nullptr) {
    c->set_group(std::move(group));
  }
  return c;
}

// Where rank 0 of @table serves its rendezvous: its server's server_id, else its host_ip, if an
// IP address; 127.0.0.1 for a table of one server without one.
Expected<std::string> TableRootAddress(const bootstrap::RankTable &table, const char *path) {
  const uint32_t s = table.server_of_rank[0];
  const auto &server = table.servers[s];
  for (const std::string *address : {&server.server_id, &server.host_ip}) {
    if (bootstrap::RootAt(*address, 0, {}).ok()) {
      return *address;
    }
  }
  if (table.servers.size() == 1) {
    return std::string("127.0.0.1");
  }
  return Error(HCCL_E_PARA,
               "{}: server_list[{}].server_id \"{}\" (the server of rank 0, which serves the "
               "rendezvous) is not an IP address, and neither is its host_ip \"{}\"",
               path, s, server.server_id, server.host_ip);
}

// The ranks of @table as the rendezvous on @port (rank 0 serves it) found them; *@session: the
// communicator's id the root chose. The ranks prove the table's key (the job secret's, if any:
// bootstrap::RankTableKey); the root takes each rank only from its server's address in the table
// (a rank connects from it when it is an address of this host).
Expected<std::vector<bootstrap::RankIdentity>> TableRendezvous(
    const bootstrap::RankTable &table, const char *path, uint32_t rank, uint16_t port,
    const Expected<bootstrap::Listener> &listener, bootstrap::UniqueId *session) {
  auto address = TableRootAddress(table, path);
  auto secret = bootstrap::JobSecret();
  if (!address.ok() || !secret.ok()) {
    return !address.ok() ? address.status() : secret.status();
  }
  const std::chrono::seconds timeout = GetConfig().connect_timeout;
  const bootstrap::UniqueId key = bootstrap::RankTableKey(table, *secret);
  bootstrap::Admission admission;
  admission.check = [table](uint32_t r, const std::string &ip) {
    return bootstrap::WhyNotFrom(table, r, ip);
  };
  auto root = rank == 0 ? bootstrap::StartRootAt(*address, port, key, timeout, admission)
                        : bootstrap::RootAt(*address, port, key);
  if (!root.ok()) {
    return Error(root.status().code(), "rank {} of {}: the rendezvous at {} port {}: {}", rank,
                 table.nranks, *address, port, root.status().message());
  }
  for (const std::string &mine : bootstrap::ServerAddresses(table, rank)) {
    auto source = bootstrap::RootAt(mine, 0, {});
    if (source.ok() && source->addr.ss_family == root->addr.ss_family &&
        bootstrap::IsLocalAddress(mine)) {
      root->source = source->addr;
      break;
    }
  }
  auto peers = bootstrap::Join(*root, table.nranks, rank, Self(listener), timeout,
                               /*shared_port=*/true, session);
  if (!peers.ok()) {
    return Error(peers.status().code(), "rank {} of {}: {}", rank, table.nranks,
                 peers.status().message());
  }
  const uint32_t hosts = HostCount(*peers);
  if (hosts != table.servers.size()) {
    return Error(HCCL_E_PARA, "{}: the rank table lists {} server(s) but the ranks run on {}", path,
                 table.servers.size(), hosts);
  }
  return peers;
}

// The space of a sub-communicator's messages on its parent's connections (Group::Subgroup): the
// same on every member, as it derives from the sub-communicator's id alone, and distinct from
// every other sub-communicator's of those connections, nested ones included, as their ids differ
// (each names its parent's id, sub_id and members). Two of them meet only if the 64 bits their
// ids fold to collide, about one chance in 2^64 per pair; 0 is the connections' own.
uint64_t SpaceOf(const bootstrap::UniqueId &id) {
  uint64_t a = 0, b = 0;
  std::memcpy(&a, id.data(), sizeof(a));
  std::memcpy(&b, id.data() + sizeof(a), sizeof(b));
  const uint64_t space = a ^ (b * 0x9e3779b97f4a7c15ULL);
  return space != 0 ? space : 1;
}

}  // namespace

Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank,
                                CommOptions options) {
  SetLogRank(rank);
  auto root = bootstrap::Decode(root_info);
  if (!root.ok()) {
    return root.status();
  }
  auto listener = bootstrap::Listener::Open("");
  auto peers = bootstrap::Join(*root, nranks, rank, Self(listener), GetConfig().connect_timeout);
  if (!peers.ok()) {
    return Error(peers.status().code(), "rank {} of {}: {}", rank, nranks,
                 peers.status().message());
  }
  auto c = Connected(root->id, rank, std::move(*peers), std::move(listener), std::move(options));
  if (!c.ok()) {
    return c.status();
  }
  LogInfo("HcclCommInitRootInfo: rank {} of {} in communicator {} ({} server(s))", rank, nranks,
          bootstrap::PublicId((*c)->id()), (*c)->ServerCount());
  return CommRegistry::Process().Add(std::move(*c));
}

Expected<HcclComm> FromRankTable(const char *path, uint32_t rank, CommOptions options,
                                 std::optional<uint16_t> port) {
  auto table = bootstrap::LoadRankTable(path);
  if (!table.ok()) {
    return table.status();
  }
  if (rank >= table->nranks) {
    return Error(HCCL_E_PARA, "rank={}: no such rank_id in {} (ranks 0..{})", rank, path,
                 table->nranks - 1);
  }
  SetLogRank(rank);
  auto listener = bootstrap::Listener::Open("");
  bootstrap::UniqueId session{};
  auto peers = TableRendezvous(*table, path, rank, port.value_or(GetConfig().if_base_port),
                               listener, &session);
  if (!peers.ok()) {
    return peers.status();
  }
  auto c = Connected(session, rank, std::move(*peers), std::move(listener), std::move(options));
  if (!c.ok()) {
    return c.status();
  }
  LogInfo("HcclCommInitClusterInfo: rank {} of {} from {} ({} server(s))", rank, table->nranks,
          path, (*c)->ServerCount());
  return CommRegistry::Process().Add(std::move(*c));
}

Expected<std::vector<HcclComm>> AllInProcess(uint32_t n) {
  auto id = bootstrap::RandomId();
  if (!id.ok()) {
    return id.status();
  }
  const bootstrap::RankIdentity self{bootstrap::HostIdentity(), static_cast<uint32_t>(getpid()),
                                     ""};
  const std::vector<bootstrap::RankIdentity> ranks(n, self);
  std::vector<HcclComm> out;
  for (uint32_t r = 0; r < n; ++r) {
    out.push_back(CommRegistry::Process().Add(std::make_shared<Communicator>(*id, r, ranks)));
  }
  LogInfo("HcclCommInitAll: {} ranks in this process, communicator {}", n,
          bootstrap::PublicId(*id));
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
  if (pc.group() != nullptr && c->ServerCount() > 1) {
    auto view = bootstrap::Group::Subgroup(*pc.group(), members, SpaceOf(c->id()));
    if (!view.ok()) {
      return Error(view.status().code(), "subCommId={}: {}", sub_id, view.status().message());
    }
    c->set_group(std::move(*view));
  }
  LogInfo("HcclCreateSubCommConfig: rank {} of {} in communicator {} (sub-communicator {} of {})",
          position, members.size(), bootstrap::PublicId(c->id()), sub_id,
          bootstrap::PublicId(pc.id()));
  return CommRegistry::Process().Add(std::move(c));
}

uint32_t ServerLayout::pos(uint32_t rank) const {
  const auto &r = servers[server_of[rank]];
  return static_cast<uint32_t>(std::find(r.begin(), r.end(), rank) - r.begin());
}

ServerLayout LayOutServers(const std::vector<bootstrap::RankIdentity> &ranks, uint32_t rank) {
  ServerLayout l;
  std::map<std::string, uint32_t> index;
  l.server_of.resize(ranks.size());
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    auto [it, made] = index.emplace(ranks[r].host, static_cast<uint32_t>(l.servers.size()));
    if (made) {
      l.servers.emplace_back();
    }
    l.servers[it->second].push_back(r);
    l.server_of[r] = it->second;
  }
  for (const auto &server : l.servers) {
    l.leaders.push_back(server.front());
  }
  l.server = l.server_of[rank];
  return l;
}

std::shared_ptr<Communicator> MakeServerLocal(const Communicator &comm,
                                              const ServerLayout &layout) {
  const std::string text =
      bootstrap::IdString(comm.id()) + "|server|" + std::to_string(layout.server);
  std::vector<bootstrap::RankIdentity> ids;
  for (uint32_t r : layout.servers[layout.server]) {
    ids.push_back(comm.ranks()[r]);
  }
  auto local = std::make_shared<Communicator>(bootstrap::DerivedId(text), layout.pos(comm.rank()),
                                              std::move(ids), comm.options());
  if (local->size() > 1) {
    if (Status st = memory::LinkPeers(*local); !st.ok()) {
      LogWarn(
          "collectives across servers: this server's ranks are not linked ({}); they meet "
          "through the staging path",
          st.message());
    }
  }
  return local;
}

}  // namespace hzc
