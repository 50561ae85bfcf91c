// SPDX-License-Identifier: Apache-2.0
// How the ranks of a communicator prove to each other that they belong to it (README "Threat
// model"): both ends of every bootstrap connection (the rendezvous, Group) send a fresh random
// nonce and prove they hold the communicator's 128-bit key with an HMAC-SHA256 over both nonces,
// their role and what they said, so that neither a stranger rank nor a stranger root is taken and
// a proof cannot be reflected back or replayed. The key: the root info's id
// (HcclCommInitRootInfo); for a rank table, one derived from the job secret (HZC_JOB_SECRET or
// HZC_JOB_SECRET_FILE) and the table, else the table's public id (then only the source address
// checks and the trust list keep strangers out). The trust list is HCCL's (HCCL_WHITELIST_DISABLE,
// HCCL_WHITELIST_FILE): when on, only connections from its host_ip addresses are taken.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "bootstrap/root_info.h"

namespace hzc::bootstrap {

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

// 16 random bytes (getrandom); HCCL_E_SYSCALL if the kernel gives none.
Expected<Nonce> RandomNonce();

// HMAC-SHA256 under @key of @label and each of @parts (each preceded by its length, so that no
// two lists of parts give the same input).
Mac Prove(const UniqueId &key, std::string_view label,
          std::initializer_list<std::span<const uint8_t>> parts);
// Whether @a and @b are equal, in a time that does not depend on where they differ.
bool SameMac(std::span<const uint8_t> a, std::span<const uint8_t> b);

// A 128-bit id that depends on @key and @label and tells nothing of @key: the first half of
// HMAC-SHA256(@key, @label).
UniqueId KeyedId(std::span<const uint8_t> key, std::string_view label);
// What names a communicator in the open (logs, HcclGetCommName, the rendezvous's matching of
// ranks to a root) without telling its key @id: hex of KeyedId(@id, "public").
std::string PublicId(const UniqueId &id);
// The secret part of the names of a communicator's abstract sockets and shared areas: hex of
// KeyedId(@id, "names"). Only processes that hold the key @id can know it.
std::string SecretName(const UniqueId &id);

// Hex of @bytes, and back (nullopt unless exactly @size bytes of hex).
std::string Hex(std::span<const uint8_t> bytes);
std::optional<std::string> Unhex(std::string_view text, size_t size);

// The job secret of this process (HZC_JOB_SECRET, else the contents of HZC_JOB_SECRET_FILE);
// nullopt when neither is set. HCCL_E_PARA naming the file when it cannot be read, is not a
// regular file owned by this user, can be read or written by others (mode beyond 0600), or is
// empty.
Expected<std::optional<std::string>> JobSecret();
// The secret in the file @path, checked as JobSecret says.
Expected<std::string> ReadSecretFile(const std::string &path);

// HCCL's trust list: when enabled, the IPv4/IPv6 addresses that may connect.
struct TrustList {
  bool enabled = false;
  std::set<std::string> host_ips;  // as inet_ntop writes them
  std::string file;                // where they came from

  // Why a connection from @ip may not be taken; "" if it may.
  std::string Why(const std::string &ip) const;
};
// The trust list of JSON @text ({"host_ip": ["ip", ...], "device_ip": [...]}; device_ip is
// reserved and ignored) read from @file; HCCL_E_PARA naming the file and the field otherwise.
Expected<TrustList> ParseTrustList(std::string_view text, const std::string &file);
// The process's trust list: disabled unless HCCL_WHITELIST_DISABLE=0, then read from
// HCCL_WHITELIST_FILE (HCCL_E_PARA when unset, unreadable or malformed).
Expected<TrustList> ProcessTrustList();

// The address part of "1.2.3.4:5678" or "[::1]:5678", as inet_ntop writes it.
std::string HostOf(const std::string &endpoint);
// Whether @ip is a loopback address or an address of one of this host's interfaces.
bool IsLocalAddress(const std::string &ip);

}  // namespace hzc::bootstrap
