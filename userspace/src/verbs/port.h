// SPDX-License-Identifier: Apache-2.0
// Choice of the RDMA device, port and GID that links use.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "verbs/ibv.h"

namespace hzc::verbs {

// HZC_RDMA_DEVICE: "" (first device with an active port), "name" (its first active port)
// or "name:port".
struct RdmaDeviceSpec {
  std::string name;  // empty: any device
  uint8_t port = 0;  // 0: first active port
};

// HCCL_E_PARA naming the variable and the problem for a malformed spec.
Expected<RdmaDeviceSpec> ParseRdmaDeviceSpec(std::string_view text);

// One entry of a port's GID table, as far as the choice is concerned.
struct GidEntry {
  uint32_t index = 0;
  ibv_gid gid{};
  uint32_t type = IBV_GID_TYPE_IB;  // enum ibv_gid_type
};

// True for ::ffff:a.b.c.d.
bool IsIpv4Mapped(const ibv_gid &gid);

// The GID index links use on a port: a RoCE v2 IPv4-mapped entry, else any RoCE v2 entry,
// else a RoCE v1 entry, else the first entry (InfiniBand). nullopt for an empty table.
std::optional<uint32_t> ChooseGidIndex(std::span<const GidEntry> table);

// "fe80::1" style text of a GID, for logs.
std::string GidString(const ibv_gid &gid);

// An open device port with the GID links use.
struct Port {
  std::shared_ptr<ibv_context> context;
  std::string device;
  uint8_t port_num = 0;
  ibv_device_attr device_attr{};
  ibv_port_attr port_attr{};
  uint32_t gid_index = 0;
  ibv_gid gid{};
  uint32_t gid_type = IBV_GID_TYPE_IB;
  // RoCE (Ethernet link layer) needs a global route header on every packet.
  bool global() const { return port_attr.link_layer == IBV_LINK_LAYER_ETHERNET; }
};

// Open the port @spec names (see RdmaDeviceSpec), with GID @gid_index (nullopt: ChooseGidIndex).
// A null Port when @spec names nothing and the host has no device with an active port.
// HCCL_E_NOT_FOUND when a named device or port does not exist or is not active, or the GID
// index is not in the table; HCCL_E_NOT_SUPPORT for a GID index above 255;
// HCCL_E_ROCE_CONNECT when a verbs query fails.
Expected<std::unique_ptr<Port>> OpenPort(const RdmaDeviceSpec &spec,
                                         std::optional<uint32_t> gid_index);

}  // namespace hzc::verbs
