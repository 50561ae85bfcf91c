// SPDX-License-Identifier: Apache-2.0
#include "verbs/port.h"

#include <arpa/inet.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc::verbs {

Expected<RdmaDeviceSpec> ParseRdmaDeviceSpec(std::string_view text) {
  RdmaDeviceSpec spec;
  const size_t colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  if (colon == std::string_view::npos) {
    return spec;
  }
  if (spec.name.empty()) {
    return Error(HCCL_E_PARA, "HZC_RDMA_DEVICE=\"{}\": no device name before ':'", text);
  }
  const std::string_view port = text.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value == 0 ||
      value > 255) {
    return Error(HCCL_E_PARA, "HZC_RDMA_DEVICE=\"{}\": port \"{}\" is not a number in [1, 255]",
                 text, port);
  }
  spec.port = static_cast<uint8_t>(value);
  return spec;
}

bool IsIpv4Mapped(const ibv_gid &gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof(kPrefix)) == 0;
}

std::optional<uint32_t> ChooseGidIndex(std::span<const GidEntry> table) {
  // Lower rank wins; within a rank, the lowest index.
  auto rank_of = [](const GidEntry &e) {
    if (e.type == IBV_GID_TYPE_ROCE_V2) {
      return IsIpv4Mapped(e.gid) ? 0 : 1;
    }
    return e.type == IBV_GID_TYPE_ROCE_V1 ? 2 : 3;
  };
  std::optional<uint32_t> best;
  int best_rank = 4;
  for (const GidEntry &e : table) {
    const int r = rank_of(e);
    if (r < best_rank || (r == best_rank && best && e.index < *best)) {
      best = e.index;
      best_rank = r;
    }
  }
  return best;
}

std::string GidString(const ibv_gid &gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, text, sizeof(text)) == nullptr) {
    return "?";
  }
  return text;
}

namespace {

const char *GidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "ib";
    case IBV_GID_TYPE_ROCE_V1:
      return "roce-v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "roce-v2";
    default:
      return "?";
  }
}

// The non-empty entries of a port's GID table.
Expected<std::vector<GidEntry>> ReadGidTable(ibv_context *ctx, const std::string &device,
                                             uint8_t port, int length) {
  std::vector<GidEntry> table;
  for (int i = 0; i < length; ++i) {
    ibv_gid_entry entry{};
    const int ret = ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &entry, 0);
    if (ret == ENODATA) {
      continue;  // empty slot
    }
    if (ret != 0) {
      return ConnectError("ibv_query_gid_ex", ret,
                          fmt::format("{} port {} index {}", device, port, i));
    }
    static constexpr ibv_gid kZero{};
    if (std::memcmp(entry.gid.raw, kZero.raw, sizeof(kZero.raw)) == 0) {
      continue;
    }
    table.push_back({.index = static_cast<uint32_t>(i), .gid = entry.gid, .type = entry.gid_type});
  }
  return table;
}

const char *PortStateName(ibv_port_state state) {
  return ibv_port_state_str(state);
}

// The entry of @table with index @index, or null.
const GidEntry *FindGid(const std::vector<GidEntry> &table, uint32_t index) {
  for (const GidEntry &e : table) {
    if (e.index == index) {
      return &e;
    }
  }
  return nullptr;
}

// Fill @port's number and attributes with the first active port of device @name that @spec
// allows. Port 0 when there is none; @states then says which states the ports are in.
Status FindActivePort(ibv_context *ctx, const std::string &name, const RdmaDeviceSpec &spec,
                      Port *port, std::string *states) {
  const int nports = port->device_attr.phys_port_cnt;
  if (spec.port > nports) {
    return Error(HCCL_E_NOT_FOUND, "HZC_RDMA_DEVICE={}:{}: {} has no port {} (ports 1-{})", name,
                 spec.port, name, spec.port, nports);
  }
  for (int p = 1; p <= nports; ++p) {
    if (spec.port != 0 && p != spec.port) {
      continue;
    }
    ibv_port_attr attr{};
    if (int ret = ibv_query_port(ctx, static_cast<uint8_t>(p), &attr); ret != 0) {
      return ConnectError("ibv_query_port", ret, fmt::format("{} port {}", name, p));
    }
    if (attr.state != IBV_PORT_ACTIVE) {
      *states +=
          fmt::format("{}port {} {}", states->empty() ? "" : ", ", p, PortStateName(attr.state));
      continue;
    }
    port->port_num = static_cast<uint8_t>(p);
    port->port_attr = attr;
    break;
  }
  return Status::Ok();
}

// Set @port's GID: index @gid_index of its table, or the one ChooseGidIndex picks.
Status ChooseGid(ibv_context *ctx, std::optional<uint32_t> gid_index, Port *port) {
  const std::string &name = port->device;
  auto table = ReadGidTable(ctx, name, port->port_num, port->port_attr.gid_tbl_len);
  if (!table.ok()) {
    return table.status();
  }
  const GidEntry *chosen = nullptr;
  if (gid_index) {
    chosen = FindGid(*table, *gid_index);
    if (chosen == nullptr) {
      std::string valid;
      for (const GidEntry &e : *table) {
        valid += fmt::format("{}{}", valid.empty() ? "" : ",", e.index);
      }
      return Error(HCCL_E_NOT_FOUND,
                   "HZC_RDMA_GID_INDEX={}: {} port {} has no GID at that index (valid: {})",
                   *gid_index, name, port->port_num, valid.empty() ? "none" : valid);
    }
  } else if (auto index = ChooseGidIndex(*table)) {
    chosen = FindGid(*table, *index);
  } else {
    return Error(HCCL_E_NOT_FOUND, "verbs: {} port {} has an empty GID table", name,
                 port->port_num);
  }
  if (chosen->index > UINT8_MAX) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "verbs: {} port {} gid index {} is above 255, which address handles cannot "
                 "name; choose another with HZC_RDMA_GID_INDEX",
                 name, port->port_num, chosen->index);
  }
  port->gid_index = chosen->index;
  port->gid = chosen->gid;
  port->gid_type = chosen->type;
  return Status::Ok();
}

// Open device @dev as @spec asks. A null Port when @spec names no device and this one is to
// be skipped (it cannot be opened or has no active port).
Expected<std::unique_ptr<Port>> OpenDevicePort(ibv_device *dev, const RdmaDeviceSpec &spec,
                                               std::optional<uint32_t> gid_index) {
  const bool named = !spec.name.empty();
  const std::string name = ibv_get_device_name(dev);
  ContextPtr ctx(ibv_open_device(dev));
  if (!ctx) {
    const int err = errno;
    if (named) {
      return ConnectError("ibv_open_device", err, name);
    }
    LogDebug("verbs: skipping {}: ibv_open_device: {}", name, ErrnoString(err));
    return std::unique_ptr<Port>();
  }
  auto port = std::make_unique<Port>();
  if (int ret = ibv_query_device(ctx.get(), &port->device_attr); ret != 0) {
    return ConnectError("ibv_query_device", ret, name);
  }
  std::string states;
  HZC_RETURN_IF_ERROR(FindActivePort(ctx.get(), name, spec, port.get(), &states));
  if (port->port_num == 0) {
    if (named) {
      return Error(HCCL_E_NOT_FOUND, "HZC_RDMA_DEVICE={}: {} has no active port ({})",
                   spec.port ? fmt::format("{}:{}", name, spec.port) : name, name, states);
    }
    LogDebug("verbs: skipping {}: no active port ({})", name, states);
    return std::unique_ptr<Port>();
  }
  port->device = name;
  HZC_RETURN_IF_ERROR(ChooseGid(ctx.get(), gid_index, port.get()));
  port->context = std::shared_ptr<ibv_context>(std::move(ctx));
  LogInfo("verbs: using {} port {} gid index {} ({} {}), active mtu {}", name, port->port_num,
          port->gid_index, GidTypeName(port->gid_type), GidString(port->gid),
          128 << port->port_attr.active_mtu);
  return port;
}

}  // namespace

Expected<std::unique_ptr<Port>> OpenPort(const RdmaDeviceSpec &spec,
                                         std::optional<uint32_t> gid_index) {
  const bool named = !spec.name.empty();
  int num = 0;
  DeviceListPtr list(ibv_get_device_list(&num));
  if (!list) {
    const int err = errno;
    if (!named) {
      LogDebug("verbs: ibv_get_device_list: {}", ErrnoString(err));
      return std::unique_ptr<Port>();
    }
    return Error(HCCL_E_NOT_FOUND,
                 "HZC_RDMA_DEVICE={}: no RDMA device available (ibv_get_device_list: {})",
                 spec.name, ErrnoString(err));
  }
  std::string names;
  for (int i = 0; i < num; ++i) {
    ibv_device *dev = list.get()[i];
    const std::string name = ibv_get_device_name(dev);
    names += (names.empty() ? "" : ", ") + name;
    if (named && name != spec.name) {
      continue;
    }
    auto port = OpenDevicePort(dev, spec, gid_index);
    if (!port.ok() || *port) {
      return port;
    }
  }
  if (named) {
    return Error(HCCL_E_NOT_FOUND, "HZC_RDMA_DEVICE={}: no such RDMA device (devices: {})",
                 spec.name, names.empty() ? "none" : names);
  }
  return std::unique_ptr<Port>();
}

}  // namespace hzc::verbs
