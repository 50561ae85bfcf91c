// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/root_info.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/errno_string.h"
#include "bootstrap/auth.h"
#include "bootstrap/socket_io.h"

namespace hzc::bootstrap {

namespace {

// Wire layout inside HcclRootInfo::internal (host byte order; both ends run on one kind of
// machine). Everything after it is zero.
struct Wire {
  uint32_t magic;
  uint32_t version;
  uint16_t family;
  uint16_t port;  // host order
  uint32_t reserved;
  uint8_t addr[16];
  uint8_t id[16];
};
static_assert(sizeof(Wire) == 48);
static_assert(sizeof(Wire) <= HCCL_ROOT_INFO_BYTES);

}  // namespace

std::string RootInfo::AddressString() const {
  return EndpointString(addr);
}

void Encode(const RootInfo &info, HcclRootInfo *out) {
  std::memset(out, 0, sizeof(*out));
  Wire w{};
  w.magic = RootInfo::kMagic;
  w.version = RootInfo::kVersion;
  w.family = info.addr.ss_family;
  if (info.addr.ss_family == AF_INET) {
    const auto *a = reinterpret_cast<const sockaddr_in *>(&info.addr);
    w.port = ntohs(a->sin_port);
    std::memcpy(w.addr, &a->sin_addr, sizeof(a->sin_addr));
  } else {
    const auto *a = reinterpret_cast<const sockaddr_in6 *>(&info.addr);
    w.port = ntohs(a->sin6_port);
    std::memcpy(w.addr, &a->sin6_addr, sizeof(a->sin6_addr));
  }
  std::memcpy(w.id, info.id.data(), sizeof(w.id));
  std::memcpy(out->internal, &w, sizeof(w));
}

Expected<RootInfo> Decode(const HcclRootInfo &in) {
  Wire w{};
  std::memcpy(&w, in.internal, sizeof(w));
  if (w.magic != RootInfo::kMagic) {
    return Error(HCCL_E_PARA, "rootInfo: not made by HcclGetRootInfo (magic {:#x})", w.magic);
  }
  if (w.version != RootInfo::kVersion) {
    return Error(HCCL_E_PARA, "rootInfo: format version {}, this library reads {}", w.version,
                 RootInfo::kVersion);
  }
  if (w.family != AF_INET && w.family != AF_INET6) {
    return Error(HCCL_E_PARA, "rootInfo: address family {} is not IPv4 or IPv6", w.family);
  }
  if (w.port == 0 || w.reserved != 0) {
    return Error(HCCL_E_PARA, "rootInfo: corrupt (port {}, reserved {:#x})", w.port, w.reserved);
  }
  UniqueId zero{};
  if (std::memcmp(w.id, zero.data(), zero.size()) == 0) {
    return Error(HCCL_E_PARA, "rootInfo: unique id is zero");
  }
  for (size_t i = sizeof(w); i < sizeof(in.internal); ++i) {
    if (in.internal[i] != 0) {
      return Error(HCCL_E_PARA, "rootInfo: corrupt (byte {} is not zero)", i);
    }
  }
  RootInfo info;
  if (w.family == AF_INET) {
    auto *a = reinterpret_cast<sockaddr_in *>(&info.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(w.port);
    std::memcpy(&a->sin_addr, w.addr, sizeof(a->sin_addr));
  } else {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&info.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(w.port);
    std::memcpy(&a->sin6_addr, w.addr, sizeof(a->sin6_addr));
  }
  std::memcpy(info.id.data(), w.id, sizeof(w.id));
  return info;
}

Expected<UniqueId> RandomId() {
  UniqueId id{};
  size_t got = 0;
  while (got < id.size()) {
    const ssize_t n = getrandom(id.data() + got, id.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Error(HCCL_E_SYSCALL, "getrandom failed: {}", ErrnoString(errno));
    }
    got += static_cast<size_t>(n);
  }
  return id;
}

std::string IdString(const UniqueId &id) {
  std::string s;
  for (uint8_t b : id) {
    s += fmt::format("{:02x}", b);
  }
  return s;
}

UniqueId DerivedId(std::string_view text) {
  static constexpr std::string_view kLabel = "hzc-derived-id";
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), kLabel.data(), static_cast<int>(kLabel.size()),
       reinterpret_cast<const uint8_t *>(text.data()), text.size(), mac.data(), &len);
  UniqueId id{};
  std::memcpy(id.data(), mac.data(), id.size());
  return id;
}

}  // namespace hzc::bootstrap
