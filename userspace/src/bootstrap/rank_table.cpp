// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rank_table.h"

#include <arpa/inet.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/config.h"
#include "base/errno_string.h"
#include "bootstrap/auth.h"
#include "bootstrap/socket_io.h"

namespace hzc::bootstrap {

namespace {

using json = nlohmann::json;
constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxFile = 64U << 20;

Status Bad(const std::string &field, const std::string &why) {
  return Status(HCCL_E_PARA, "rank table: " + field + ": " + why);
}

// @v at @path ("a.b[1].") must be an object.
Status Object(const json &v, const std::string &path) {
  if (!v.is_object()) {
    return Bad(path.substr(0, path.size() - 1), "must be an object");
  }
  return Status::Ok();
}

// A required string member.
Expected<std::string> Str(const json &obj, const std::string &path, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return Bad(path + key, "missing");
  }
  if (!it->is_string()) {
    return Bad(path + key, "must be a string");
  }
  return it->get<std::string>();
}

// A required string member holding a decimal number.
Expected<uint32_t> Num(const json &obj, const std::string &path, const char *key) {
  auto s = Str(obj, path, key);
  if (!s.ok()) {
    return s.status();
  }
  auto v = ParseUnsigned(*s, 0, UINT32_MAX);
  if (!v) {
    return Bad(path + key, fmt::format("\"{}\" is not a decimal number", *s));
  }
  return static_cast<uint32_t>(*v);
}

// A required string member holding an IPv4 or IPv6 address.
Expected<std::string> Ip(const json &obj, const std::string &path, const char *key) {
  auto s = Str(obj, path, key);
  if (!s.ok()) {
    return s.status();
  }
  in6_addr buf{};
  if (inet_pton(AF_INET, s->c_str(), &buf) != 1 && inet_pton(AF_INET6, s->c_str(), &buf) != 1) {
    return Bad(path + key, fmt::format("\"{}\" is not an IP address", *s));
  }
  return s;
}

Expected<RankTable::Rank> ParseRank(const json &d, const std::string &path) {
  HZC_RETURN_IF_ERROR(Object(d, path));
  RankTable::Rank dev;
  auto id = Num(d, path, "device_id");
  if (!id.ok()) {
    return id.status();
  }
  dev.device_id = *id;
  auto rank = Num(d, path, "rank_id");
  if (!rank.ok()) {
    return rank.status();
  }
  dev.rank = *rank;
  auto ip = Ip(d, path, "device_ip");
  if (!ip.ok()) {
    return ip.status();
  }
  dev.device_ip = *ip;
  return dev;
}

// A required member that is a non-empty array.
Expected<const json *> NonEmptyArray(const json &obj, const std::string &path, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return Bad(path + key, "missing");
  }
  if (!it->is_array() || it->empty()) {
    return Bad(path + key, "must be a non-empty array");
  }
  return &*it;
}

// "version" and "status" of the top level.
Status ParseVersion(const json &root, RankTable &t) {
  auto version = Str(root, "", "version");
  if (!version.ok()) {
    return version.status();
  }
  t.version = *version;
  if (t.version != "1.0" && t.version != "1.2") {
    return Bad("version", fmt::format("\"{}\" is not supported (1.0 or 1.2)", t.version));
  }
  auto status = Str(root, "", "status");
  if (!status.ok()) {
    return status.status();
  }
  if (*status != "completed") {
    return Bad("status", fmt::format("\"{}\" is not \"completed\"", *status));
  }
  return Status::Ok();
}

// What the servers of a table must not repeat.
struct Seen {
  std::set<std::string> server_ids;
  std::set<uint32_t> ranks;
};

// The "device" array of server @server at @path.
Status ParseRanks(const json &s, const std::string &path, RankTable::Server &server, Seen &seen) {
  auto devs = NonEmptyArray(s, path, "device");
  if (!devs.ok()) {
    return devs.status();
  }
  std::set<uint32_t> device_ids;
  for (size_t j = 0; j < (*devs)->size(); ++j) {
    const std::string dpath = fmt::format("{}device[{}].", path, j);
    auto dev = ParseRank((**devs)[j], dpath);
    if (!dev.ok()) {
      return dev.status();
    }
    if (!device_ids.insert(dev->device_id).second) {
      return Bad(dpath + "device_id", fmt::format("{} appears twice on server \"{}\"",
                                                  dev->device_id, server.server_id));
    }
    if (!seen.ranks.insert(dev->rank).second) {
      return Bad(dpath + "rank_id", fmt::format("{} appears twice", dev->rank));
    }
    server.ranks.push_back(*dev);
  }
  return Status::Ok();
}

Expected<RankTable::Server> ParseServer(const json &s, const std::string &path,
                                        const std::string &version, Seen &seen) {
  HZC_RETURN_IF_ERROR(Object(s, path));
  RankTable::Server server;
  auto sid = Str(s, path, "server_id");
  if (!sid.ok()) {
    return sid.status();
  }
  if (sid->empty()) {
    return Bad(path + "server_id", "is empty");
  }
  if (!seen.server_ids.insert(*sid).second) {
    return Bad(path + "server_id", fmt::format("\"{}\" appears twice", *sid));
  }
  server.server_id = *sid;
  if (version == "1.2") {
    auto host_ip = Ip(s, path, "host_ip");
    if (!host_ip.ok()) {
      return host_ip.status();
    }
    server.host_ip = *host_ip;
  }
  HZC_RETURN_IF_ERROR(ParseRanks(s, path, server, seen));
  return server;
}

// "server_count" and "server_list"; then the ranks must be 0..nranks-1.
Status ParseServers(const json &root, RankTable &t, Seen &seen) {
  auto count = Num(root, "", "server_count");
  if (!count.ok()) {
    return count.status();
  }
  auto list = NonEmptyArray(root, "", "server_list");
  if (!list.ok()) {
    return list.status();
  }
  if ((*list)->size() != *count) {
    return Bad("server_count",
               fmt::format("says {} but server_list has {} entries", *count, (*list)->size()));
  }
  for (size_t i = 0; i < (*list)->size(); ++i) {
    auto server = ParseServer((**list)[i], fmt::format("server_list[{}].", i), t.version, seen);
    if (!server.ok()) {
      return server.status();
    }
    t.servers.push_back(std::move(*server));
  }
  t.nranks = static_cast<uint32_t>(seen.ranks.size());
  if (*seen.ranks.rbegin() != t.nranks - 1) {
    return Bad("rank_id", fmt::format("ranks must be 0..{} without gaps, but {} is used",
                                      t.nranks - 1, *seen.ranks.rbegin()));
  }
  t.server_of_rank.assign(t.nranks, 0);
  for (uint32_t si = 0; si < t.servers.size(); ++si) {
    for (const auto &d : t.servers[si].ranks) {
      t.server_of_rank[d.rank] = si;
    }
  }
  return Status::Ok();
}

// Super pod @pod at @path: every server it names must be in server_list.
Status CheckSuperPod(const json &pod, const std::string &path, const Seen &seen) {
  HZC_RETURN_IF_ERROR(Object(pod, path));
  auto pod_id = Str(pod, path, "super_pod_id");
  if (!pod_id.ok()) {
    return pod_id.status();
  }
  auto members = pod.find("server_list");
  if (members == pod.end() || !members->is_array()) {
    return Bad(path + "server_list", "must be an array");
  }
  for (size_t j = 0; j < members->size(); ++j) {
    const std::string mpath = fmt::format("{}server_list[{}].", path, j);
    HZC_RETURN_IF_ERROR(Object((*members)[j], mpath));
    auto sid = Str((*members)[j], mpath, "server_id");
    if (!sid.ok()) {
      return sid.status();
    }
    if (!seen.server_ids.contains(*sid)) {
      return Bad(mpath + "server_id", fmt::format("\"{}\" is not in server_list", *sid));
    }
  }
  return Status::Ok();
}

// "super_pod_list" (1.2, optional).
Status CheckSuperPods(const json &root, const RankTable &t, const Seen &seen) {
  if (t.version != "1.2" || !root.contains("super_pod_list")) {
    return Status::Ok();
  }
  const json &pods = root["super_pod_list"];
  if (!pods.is_array()) {
    return Bad("super_pod_list", "must be an array");
  }
  for (size_t i = 0; i < pods.size(); ++i) {
    HZC_RETURN_IF_ERROR(CheckSuperPod(pods[i], fmt::format("super_pod_list[{}].", i), seen));
  }
  return Status::Ok();
}

}  // namespace

Expected<RankTable> ParseRankTable(const std::string &text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Bad("file", "not valid JSON");
  }
  if (!root.is_object()) {
    return Bad("file", "top level must be an object");
  }
  RankTable t;
  Seen seen;
  HZC_RETURN_IF_ERROR(ParseVersion(root, t));
  HZC_RETURN_IF_ERROR(ParseServers(root, t, seen));
  HZC_RETURN_IF_ERROR(CheckSuperPods(root, t, seen));
  return t;
}

Expected<RankTable> LoadRankTable(const std::string &path) {
  if (path.empty()) {
    return Error(HCCL_E_PARA, "clusterInfo is empty");
  }
  if (path.size() > kMaxPath) {
    return Error(HCCL_E_PARA, "clusterInfo: path is {} bytes, at most {}", path.size(), kMaxPath);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error(HCCL_E_OPEN_FILE_FAILURE, "clusterInfo={}: cannot open: {}", path,
                 ErrnoString(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxFile) {
    return Error(HCCL_E_PARA, "clusterInfo={}: larger than {} bytes", path, kMaxFile);
  }
  auto table = ParseRankTable(text.str());
  if (!table.ok()) {
    return Error(HCCL_E_PARA, "clusterInfo={}: {}", path, table.status().message());
  }
  return table;
}

UniqueId RankTableId(const RankTable &table) {
  std::string text = table.version;
  for (uint32_t r = 0; r < table.nranks; ++r) {
    text += "|" + table.servers[table.server_of_rank[r]].server_id;
  }
  return DerivedId(text);
}

UniqueId RankTableKey(const RankTable &table, const std::optional<std::string> &secret) {
  const UniqueId id = RankTableId(table);
  if (!secret) {
    return id;
  }
  const auto *bytes = reinterpret_cast<const uint8_t *>(secret->data());
  return KeyedId(std::span(bytes, secret->size()), "hzc-job-secret|" + IdString(id));
}

std::vector<std::string> ServerAddresses(const RankTable &table, uint32_t rank) {
  const RankTable::Server &server = table.servers[table.server_of_rank[rank]];
  std::vector<std::string> out;
  for (const std::string &a : {server.server_id, server.host_ip}) {
    if (auto addr = ParseAddress(a); addr.ok()) {
      out.push_back(HostOf(EndpointString(*addr)));
    }
  }
  return out;
}

std::string WhyNotFrom(const RankTable &table, uint32_t rank, const std::string &ip) {
  if (rank >= table.nranks) {
    return fmt::format("rank {}: the table has ranks 0..{}", rank, table.nranks - 1);
  }
  const std::vector<std::string> addresses = ServerAddresses(table, rank);
  if (std::find(addresses.begin(), addresses.end(), ip) != addresses.end()) {
    return "";
  }
  const uint32_t s = table.server_of_rank[rank];
  if (s == table.server_of_rank[0] && IsLocalAddress(ip)) {
    return "";  // a rank of the root's own server, by loopback or another local address
  }
  return fmt::format(
      "rank {} connects from {}, not from its server's address in the table "
      "(server_list[{}]: {})",
      rank, ip, s,
      addresses.empty() ? std::string("none") : fmt::format("{}", fmt::join(addresses, ", ")));
}

}  // namespace hzc::bootstrap
