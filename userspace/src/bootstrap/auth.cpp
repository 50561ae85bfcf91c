// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"

namespace hzc::bootstrap {

namespace {

// The longest job secret or trust list file read.
constexpr size_t kMaxFile = 64U << 10;

// The whole of the file at @fd (at most kMaxFile bytes); HCCL_E_OPEN_FILE_FAILURE naming @path.
Expected<std::string> ReadAll(int fd, const std::string &path, std::string_view what) {
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return Error(HCCL_E_OPEN_FILE_FAILURE, "{} {}: {}", what, path, ErrnoString(errno));
    }
    if (n == 0) {
      return text;
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFile) {
      return Error(HCCL_E_PARA, "{} {}: longer than {} bytes", what, path, kMaxFile);
    }
  }
}

// The canonical text of the address @ip (inet_pton then inet_ntop); nullopt if it is none.
std::optional<std::string> CanonicalIp(const std::string &ip) {
  auto addr = ParseAddress(ip);
  if (!addr.ok()) {
    return std::nullopt;
  }
  return HostOf(EndpointString(*addr));
}

}  // namespace

Expected<Nonce> RandomNonce() {
  Nonce n{};
  size_t got = 0;
  while (got < n.size()) {
    const ssize_t k = getrandom(n.data() + got, n.size() - got, 0);
    if (k < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Error(HCCL_E_SYSCALL, "getrandom failed: {}", ErrnoString(errno));
    }
    got += static_cast<size_t>(k);
  }
  return n;
}

Mac Prove(const UniqueId &key, std::string_view label,
          std::initializer_list<std::span<const uint8_t>> parts) {
  std::vector<uint8_t> msg(label.begin(), label.end());
  for (const auto &part : parts) {
    const uint32_t len = htonl(static_cast<uint32_t>(part.size()));
    const auto *l = reinterpret_cast<const uint8_t *>(&len);
    msg.insert(msg.end(), l, l + sizeof(len));
    msg.insert(msg.end(), part.begin(), part.end());
  }
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), mac.data(),
       &len);
  return mac;
}

bool SameMac(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

UniqueId KeyedId(std::span<const uint8_t> key, std::string_view label) {
  Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const uint8_t *>(label.data()), label.size(), mac.data(), &len);
  UniqueId id{};
  std::memcpy(id.data(), mac.data(), id.size());
  return id;
}

std::string PublicId(const UniqueId &id) {
  return IdString(KeyedId(id, "hzc-public-id"));
}

std::string SecretName(const UniqueId &id) {
  return IdString(KeyedId(id, "hzc-names"));
}

std::string Hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::optional<std::string> Unhex(std::string_view text, size_t size) {
  if (text.size() != 2 * size) {
    return std::nullopt;
  }
  const auto digit = [](char c) -> int {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

Expected<std::string> ReadSecretFile(const std::string &path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return Error(HCCL_E_OPEN_FILE_FAILURE, "HZC_JOB_SECRET_FILE {}: {}", path, ErrnoString(errno));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return Error(HCCL_E_OPEN_FILE_FAILURE, "HZC_JOB_SECRET_FILE {}: {}", path, ErrnoString(errno));
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return Error(HCCL_E_PARA,
                 "HZC_JOB_SECRET_FILE {}: refused: {} (a job secret is a regular file of this "
                 "user, mode 0600 or stricter)",
                 path,
                 !S_ISREG(st.st_mode) ? std::string("not a regular file")
                 : st.st_uid != geteuid()
                     ? fmt::format("owned by uid {}", st.st_uid)
                     : fmt::format("mode {:04o} lets others in", st.st_mode & 07777));
  }
  auto text = ReadAll(fd.get(), path, "HZC_JOB_SECRET_FILE");
  if (!text.ok()) {
    return text.status();
  }
  while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) {
    text->pop_back();
  }
  if (text->empty()) {
    return Error(HCCL_E_PARA, "HZC_JOB_SECRET_FILE {}: empty", path);
  }
  return text;
}

Expected<std::optional<std::string>> JobSecret() {
  const Config &config = GetConfig();
  if (!config.job_secret.empty()) {
    return std::optional<std::string>(config.job_secret);
  }
  if (config.job_secret_file.empty()) {
    return std::optional<std::string>();
  }
  auto secret = ReadSecretFile(config.job_secret_file);
  if (!secret.ok()) {
    return secret.status();
  }
  return std::optional<std::string>(std::move(*secret));
}

std::string TrustList::Why(const std::string &ip) const {
  if (!enabled) {
    return "";
  }
  const auto canonical = CanonicalIp(ip);
  if (canonical && host_ips.contains(*canonical)) {
    return "";
  }
  return fmt::format("{} is not on the trust list (HCCL_WHITELIST_FILE {})", ip, file);
}

Expected<TrustList> ParseTrustList(std::string_view text, const std::string &file) {
  using json = nlohmann::json;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string &why) {
    return Error(HCCL_E_PARA, "HCCL_WHITELIST_FILE {}: {}", file, why);
  };
  if (doc.is_discarded() || !doc.is_object()) {
    return bad("not a JSON object");
  }
  const auto it = doc.find("host_ip");
  if (it == doc.end() || !it->is_array()) {
    return bad("no \"host_ip\" array");
  }
  TrustList list;
  list.enabled = true;
  list.file = file;
  for (size_t i = 0; i < it->size(); ++i) {
    const json &ip = (*it)[i];
    const auto canonical = ip.is_string() ? CanonicalIp(ip.get<std::string>()) : std::nullopt;
    if (!canonical) {
      return bad(fmt::format("host_ip[{}] is {}, not an IP address", i, ip.dump()));
    }
    list.host_ips.insert(*canonical);
  }
  return list;
}

Expected<TrustList> ProcessTrustList() {
  const Config &config = GetConfig();
  if (config.whitelist_disable) {
    return TrustList{};
  }
  if (config.whitelist_file.empty()) {
    return Error(HCCL_E_PARA,
                 "HCCL_WHITELIST_DISABLE=0 but HCCL_WHITELIST_FILE is unset: no trust list");
  }
  UniqueFd fd(open(config.whitelist_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return Error(HCCL_E_OPEN_FILE_FAILURE, "HCCL_WHITELIST_FILE {}: {}", config.whitelist_file,
                 ErrnoString(errno));
  }
  auto text = ReadAll(fd.get(), config.whitelist_file, "HCCL_WHITELIST_FILE");
  if (!text.ok()) {
    return text.status();
  }
  return ParseTrustList(*text, config.whitelist_file);
}

std::string HostOf(const std::string &endpoint) {
  const size_t colon = endpoint.rfind(':');
  std::string host = colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

bool IsLocalAddress(const std::string &ip) {
  auto addr = ParseAddress(ip);
  if (!addr.ok()) {
    return false;
  }
  if (addr->ss_family == AF_INET) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in *>(&*addr)->sin_addr.s_addr);
    if ((a >> 24) == 127) {
      return true;
    }
  } else if (IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6 *>(&*addr)->sin6_addr)) {
    return true;
  }
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0) {
    return false;
  }
  bool found = false;
  for (ifaddrs *i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr ||
        (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
      continue;
    }
    sockaddr_storage ss{};
    std::memcpy(&ss, i->ifa_addr,
                i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found = HostOf(EndpointString(ss)) == HostOf(EndpointString(*addr));
  }
  freeifaddrs(list);
  return found;
}

}  // namespace hzc::bootstrap
