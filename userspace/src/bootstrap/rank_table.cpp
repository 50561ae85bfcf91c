// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rank_table.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/config.h"
#include "base/errno_string.h"

namespace hzc::bootstrap {

namespace {

using json = nlohmann::json;
constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxFile = 64U << 20;

Status Bad(const std::string &field, const std::string &why) {
  return Status(HCCL_E_PARA, "rank table: " + field + ": " + why);
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

bool IsIp(const std::string &s) {
  in6_addr buf{};
  return inet_pton(AF_INET, s.c_str(), &buf) == 1 || inet_pton(AF_INET6, s.c_str(), &buf) == 1;
}

Expected<RankTable::Device> ParseDevice(const json &d, const std::string &path) {
  if (!d.is_object()) {
    return Bad(path.substr(0, path.size() - 1), "must be an object");
  }
  RankTable::Device dev;
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
  if (d.contains("device_ip")) {
    auto ip = Str(d, path, "device_ip");
    if (!ip.ok()) {
      return ip.status();
    }
    if (!IsIp(*ip)) {
      return Bad(path + "device_ip", fmt::format("\"{}\" is not an IP address", *ip));
    }
    dev.device_ip = *ip;
  } else {
    return Bad(path + "device_ip", "missing");
  }
  return dev;
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
  auto count = Num(root, "", "server_count");
  if (!count.ok()) {
    return count.status();
  }
  auto list = root.find("server_list");
  if (list == root.end()) {
    return Bad("server_list", "missing");
  }
  if (!list->is_array() || list->empty()) {
    return Bad("server_list", "must be a non-empty array");
  }
  if (list->size() != *count) {
    return Bad("server_count",
               fmt::format("says {} but server_list has {} entries", *count, list->size()));
  }
  std::set<std::string> server_ids;
  std::set<uint32_t> ranks;
  for (size_t i = 0; i < list->size(); ++i) {
    const json &s = (*list)[i];
    const std::string path = fmt::format("server_list[{}].", i);
    if (!s.is_object()) {
      return Bad(path.substr(0, path.size() - 1), "must be an object");
    }
    RankTable::Server server;
    auto sid = Str(s, path, "server_id");
    if (!sid.ok()) {
      return sid.status();
    }
    if (sid->empty()) {
      return Bad(path + "server_id", "is empty");
    }
    if (!server_ids.insert(*sid).second) {
      return Bad(path + "server_id", fmt::format("\"{}\" appears twice", *sid));
    }
    server.server_id = *sid;
    if (t.version == "1.2") {
      auto host_ip = Str(s, path, "host_ip");
      if (!host_ip.ok()) {
        return host_ip.status();
      }
      if (!IsIp(*host_ip)) {
        return Bad(path + "host_ip", fmt::format("\"{}\" is not an IP address", *host_ip));
      }
      server.host_ip = *host_ip;
    }
    auto devs = s.find("device");
    if (devs == s.end()) {
      return Bad(path + "device", "missing");
    }
    if (!devs->is_array() || devs->empty()) {
      return Bad(path + "device", "must be a non-empty array");
    }
    std::set<uint32_t> device_ids;
    for (size_t j = 0; j < devs->size(); ++j) {
      const std::string dpath = fmt::format("{}device[{}].", path, j);
      auto dev = ParseDevice((*devs)[j], dpath);
      if (!dev.ok()) {
        return dev.status();
      }
      if (!device_ids.insert(dev->device_id).second) {
        return Bad(dpath + "device_id", fmt::format("{} appears twice on server \"{}\"",
                                                    dev->device_id, server.server_id));
      }
      if (!ranks.insert(dev->rank).second) {
        return Bad(dpath + "rank_id", fmt::format("{} appears twice", dev->rank));
      }
      server.devices.push_back(*dev);
    }
    t.servers.push_back(std::move(server));
  }
  t.nranks = static_cast<uint32_t>(ranks.size());
  if (*ranks.rbegin() != t.nranks - 1) {
    return Bad("rank_id", fmt::format("ranks must be 0..{} without gaps, but {} is used",
                                      t.nranks - 1, *ranks.rbegin()));
  }
  t.server_of_rank.assign(t.nranks, 0);
  for (uint32_t si = 0; si < t.servers.size(); ++si) {
    for (const auto &d : t.servers[si].devices) {
      t.server_of_rank[d.rank] = si;
    }
  }
  if (t.version == "1.2" && root.contains("super_pod_list")) {
    const json &pods = root["super_pod_list"];
    if (!pods.is_array()) {
      return Bad("super_pod_list", "must be an array");
    }
    for (size_t i = 0; i < pods.size(); ++i) {
      const std::string path = fmt::format("super_pod_list[{}].", i);
      if (!pods[i].is_object()) {
        return Bad(path.substr(0, path.size() - 1), "must be an object");
      }
      auto pod_id = Str(pods[i], path, "super_pod_id");
      if (!pod_id.ok()) {
        return pod_id.status();
      }
      auto members = pods[i].find("server_list");
      if (members == pods[i].end() || !members->is_array()) {
        return Bad(path + "server_list", "must be an array");
      }
      for (size_t j = 0; j < members->size(); ++j) {
        const std::string mpath = fmt::format("{}server_list[{}].", path, j);
        if (!(*members)[j].is_object()) {
          return Bad(mpath.substr(0, mpath.size() - 1), "must be an object");
        }
        auto sid = Str((*members)[j], mpath, "server_id");
        if (!sid.ok()) {
          return sid.status();
        }
        if (!server_ids.contains(*sid)) {
          return Bad(mpath + "server_id", fmt::format("\"{}\" is not in server_list", *sid));
        }
      }
    }
  }
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
  UniqueId id{};
  const size_t a = std::hash<std::string>{}("hzc-a:" + text);
  const size_t b = std::hash<std::string>{}("hzc-b:" + text);
  std::memcpy(id.data(), &a, sizeof(a));
  std::memcpy(id.data() + sizeof(a), &b, sizeof(b));
  return id;
}

}  // namespace hzc::bootstrap
