// SPDX-License-Identifier: Apache-2.0
// HcclRootInfo contents: where the root listens and the communicator's unique id.
#pragma once

#include <hccl/hccl_types.h>
#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hzc::bootstrap {

using UniqueId = std::array<uint8_t, 16>;

struct RootInfo {
  static constexpr uint32_t kMagic = 0x315a4348;  // "HCZ1" little endian
  static constexpr uint32_t kVersion = 1;

  sockaddr_storage addr{};  // AF_INET or AF_INET6, port set
  UniqueId id{};
  // The address ranks connect to the root from (not encoded): a rank table's rank connects from
  // its server's address in the table, which the root checks. Family 0: the kernel's choice.
  sockaddr_storage source{};

  std::string AddressString() const;  // "1.2.3.4:5678" / "[::1]:5678"
};

void Encode(const RootInfo &info, HcclRootInfo *out);
// HCCL_E_PARA naming what is wrong (magic, version, family, port, id, trailing bytes).
Expected<RootInfo> Decode(const HcclRootInfo &in);

// 16 random bytes (getrandom).
Expected<UniqueId> RandomId();
std::string IdString(const UniqueId &id);
// An id that depends on @text alone (the first half of its HMAC-SHA256 under a fixed label), so
// that processes holding the same text make the same id without talking (rank tables,
// sub-communicators), and one that holds a secret (a parent's id) makes an id as secret.
UniqueId DerivedId(std::string_view text);

}  // namespace hzc::bootstrap
