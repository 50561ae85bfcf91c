// SPDX-License-Identifier: Apache-2.0
#include "base/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace hzc {

namespace {

std::string Upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

}  // namespace

std::optional<LogLevel> ParseLogLevel(std::string_view text) {
  const std::string up = Upper(text);
  if (up == "ERROR") {
    return LogLevel::kError;
  }
  if (up == "WARN" || up == "WARNING") {
    return LogLevel::kWarn;
  }
  if (up == "INFO") {
    return LogLevel::kInfo;
  }
  if (up == "DEBUG") {
    return LogLevel::kDebug;
  }
  return std::nullopt;
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kDebug:
      return "DEBUG";
  }
  return "?";
}

std::optional<uint64_t> ParseUnsigned(std::string_view text, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

namespace {

// The value of the choice @name among @choices (the first is the default, taken when unset);
// anything else is the default with a warning.
template <typename Choice>
Choice ParseChoice(const char *name, const char *v,
                   std::initializer_list<std::pair<std::string_view, Choice>> choices,
                   std::vector<std::string> *warnings) {
  const std::string_view t = v != nullptr ? v : choices.begin()->first;
  std::string names;
  for (const auto &[text, choice] : choices) {
    if (t == text) {
      return choice;
    }
    names += names.empty() ? std::string(text) : ", " + std::string(text);
  }
  warnings->push_back(
      fmt::format("{}=\"{}\": not one of {}; using {}", name, t, names, choices.begin()->first));
  return choices.begin()->second;
}

TransportChoice ParseTransport(const char *v, std::vector<std::string> *warnings) {
  return ParseChoice<TransportChoice>("HZC_TRANSPORT", v,
                                      {{"auto", TransportChoice::kAuto},
                                       {"kernel", TransportChoice::kKernel},
                                       {"memfd", TransportChoice::kMemfd}},
                                      warnings);
}

FdHandoffChoice ParseFdHandoff(const char *v, std::vector<std::string> *warnings) {
  return ParseChoice<FdHandoffChoice>("HZC_FD_HANDOFF", v,
                                      {{"auto", FdHandoffChoice::kAuto},
                                       {"socket", FdHandoffChoice::kSocket},
                                       {"off", FdHandoffChoice::kOff}},
                                      warnings);
}

NetChoice ParseNet(const char *v, std::vector<std::string> *warnings) {
  return ParseChoice<NetChoice>(
      "HZC_NET", v,
      {{"auto", NetChoice::kAuto}, {"rdma", NetChoice::kRdma}, {"socket", NetChoice::kSocket}},
      warnings);
}

// HCCL_IF_BASE_PORT's value (nullptr: unset, the default); anything else is the default with a
// warning.
uint16_t ParseIfBasePort(const char *v, std::vector<std::string> *warnings) {
  if (v == nullptr) {
    return Config::kDefaultIfBasePort;
  }
  if (auto port = ParseUnsigned(v, Config::kMinIfBasePort, Config::kMaxIfBasePort)) {
    return static_cast<uint16_t>(*port);
  }
  warnings->push_back(fmt::format("HCCL_IF_BASE_PORT=\"{}\": not a port in [{}, {}]; using {}", v,
                                  Config::kMinIfBasePort, Config::kMaxIfBasePort,
                                  Config::kDefaultIfBasePort));
  return Config::kDefaultIfBasePort;
}

// HZC_DEVICE_COUNT's value (nullptr: unset, nullopt); anything else is nullopt with a warning.
std::optional<uint32_t> ParseDeviceCount(const char *v, std::vector<std::string> *warnings) {
  if (v == nullptr) {
    return std::nullopt;
  }
  if (auto n = ParseUnsigned(v, 1, Config::kMaxDeviceCount)) {
    return static_cast<uint32_t>(*n);
  }
  warnings->push_back(
      fmt::format("HZC_DEVICE_COUNT=\"{}\": not a number of devices in [1, {}]; using max(CPUs, 8)",
                  v, Config::kMaxDeviceCount));
  return std::nullopt;
}

// A byte count @name's value @v in [0, @max] (nullptr: unset, @def); anything else is @def with
// a warning.
uint64_t ParseBytes(const char *name, const char *v, uint64_t def, uint64_t max,
                    std::vector<std::string> *warnings) {
  if (v == nullptr) {
    return def;
  }
  if (auto b = ParseUnsigned(v, 0, max)) {
    return *b;
  }
  warnings->push_back(
      fmt::format("{}=\"{}\": not a number of bytes in [0, {}]; using {}", name, v, max, def));
  return def;
}

// HCCL_RDMA_TIMEOUT and HCCL_RDMA_RETRY_CNT into @c; out of range: the default with a warning.
void ParseRdmaRetries(const std::function<const char *(const char *)> &getenv_fn, Config *c) {
  if (const char *v = getenv_fn("HCCL_RDMA_TIMEOUT"); v != nullptr) {
    if (auto t = ParseUnsigned(v, Config::kMinRdmaTimeout, Config::kMaxRdmaTimeout)) {
      c->rdma_timeout = static_cast<uint8_t>(*t);
    } else {
      c->warnings.push_back(fmt::format(
          "HCCL_RDMA_TIMEOUT=\"{}\": not an integer in [{}, {}]; using {}", v,
          Config::kMinRdmaTimeout, Config::kMaxRdmaTimeout, Config::kDefaultRdmaTimeout));
    }
  }
  if (const char *v = getenv_fn("HCCL_RDMA_RETRY_CNT"); v != nullptr) {
    if (auto n = ParseUnsigned(v, 1, Config::kMaxRdmaRetryCnt)) {
      c->rdma_retry_cnt = static_cast<uint8_t>(*n);
    } else {
      c->warnings.push_back(
          fmt::format("HCCL_RDMA_RETRY_CNT=\"{}\": not an integer in [1, {}]; using {}", v,
                      Config::kMaxRdmaRetryCnt, Config::kDefaultRdmaRetryCnt));
    }
  }
}

// HZC_INLINE_MAX, HZC_ZERO_COPY_MIN, HZC_P2P_ZERO_COPY_MIN, HZC_P2P_BUFFERED_MAX and
// HZC_SPAN_RING_MIN into @c.
void ParseSizes(const std::function<const char *(const char *)> &getenv_fn, Config *c) {
  c->inline_max = ParseBytes("HZC_INLINE_MAX", getenv_fn("HZC_INLINE_MAX"),
                             Config::kDefaultInlineMax, Config::kMaxInlineMax, &c->warnings);
  c->zero_copy_min = ParseBytes("HZC_ZERO_COPY_MIN", getenv_fn("HZC_ZERO_COPY_MIN"),
                                Config::kDefaultZeroCopyMin, Config::kMaxInlineMax, &c->warnings);
  c->p2p_zero_copy_min =
      ParseBytes("HZC_P2P_ZERO_COPY_MIN", getenv_fn("HZC_P2P_ZERO_COPY_MIN"),
                 Config::kDefaultP2pZeroCopyMin, Config::kMaxInlineMax, &c->warnings);
  c->p2p_buffered_max =
      ParseBytes("HZC_P2P_BUFFERED_MAX", getenv_fn("HZC_P2P_BUFFERED_MAX"),
                 Config::kDefaultP2pBufferedMax, Config::kMaxP2pBufferedMax, &c->warnings);
  c->span_ring_min = ParseBytes("HZC_SPAN_RING_MIN", getenv_fn("HZC_SPAN_RING_MIN"),
                                Config::kDefaultSpanRingMin, Config::kMaxSpanRingMin, &c->warnings);
}

// HZC_JOB_SECRET, HZC_JOB_SECRET_FILE, HCCL_WHITELIST_DISABLE and HCCL_WHITELIST_FILE into @c.
void ParseTrust(const std::function<const char *(const char *)> &getenv_fn, Config *c) {
  if (const char *v = getenv_fn("HZC_JOB_SECRET"); v != nullptr) {
    c->job_secret = v;
  }
  if (const char *v = getenv_fn("HZC_JOB_SECRET_FILE"); v != nullptr) {
    c->job_secret_file = v;
  }
  if (const char *v = getenv_fn("HCCL_WHITELIST_DISABLE"); v != nullptr) {
    if (std::string_view(v) == "0" || std::string_view(v) == "1") {
      c->whitelist_disable = *v == '1';
    } else {
      c->warnings.push_back(
          fmt::format("HCCL_WHITELIST_DISABLE=\"{}\": not 0 or 1; using 1 (no trust list)", v));
    }
  }
  if (const char *v = getenv_fn("HCCL_WHITELIST_FILE"); v != nullptr) {
    c->whitelist_file = v;
  }
}

}  // namespace

Config Config::FromLookup(const std::function<const char *(const char *)> &getenv_fn) {
  Config c;
  if (const char *v = getenv_fn("HZC_LOG"); v != nullptr) {
    if (auto level = ParseLogLevel(v)) {
      c.log_level = *level;
    } else {
      c.warnings.push_back(
          fmt::format("HZC_LOG=\"{}\": not one of ERROR, WARN, INFO, DEBUG; using WARN", v));
    }
  }
  if (const char *v = getenv_fn("HZC_LOG_FILE"); v != nullptr) {
    if (*v != '\0') {
      c.log_file = v;
    } else {
      c.warnings.push_back("HZC_LOG_FILE is empty; logging to stderr");
    }
  }
  if (const char *v = getenv_fn("HZC_DEVICE"); v != nullptr) {
    if (*v != '\0') {
      c.device_path = v;
    } else {
      c.warnings.push_back(fmt::format("HZC_DEVICE is empty; using {}", kDefaultDevice));
    }
  }
  if (const char *v = getenv_fn("HCCL_CONNECT_TIMEOUT"); v != nullptr) {
    if (auto s = ParseUnsigned(v, 1, kMaxConnectTimeoutS)) {
      c.connect_timeout = std::chrono::seconds(*s);
    } else {
      c.warnings.push_back(
          fmt::format("HCCL_CONNECT_TIMEOUT=\"{}\": not a number of seconds in [1, {}]; using {}",
                      v, kMaxConnectTimeoutS, kDefaultConnectTimeoutS));
    }
  }
  if (const char *v = getenv_fn("HCCL_BUFFSIZE"); v != nullptr) {
    if (auto mb = ParseUnsigned(v, 1, 1U << 20)) {
      c.buff_size_mb = *mb;
    } else {
      c.warnings.push_back(
          fmt::format("HCCL_BUFFSIZE=\"{}\": not a number of MB in [1, 1048576]; using {}", v,
                      kDefaultBuffSizeMb));
    }
  }
  if (const char *v = getenv_fn("HCCL_EXEC_TIMEOUT"); v != nullptr) {
    if (auto s = ParseUnsigned(v, 1, kMaxExecTimeoutS)) {
      c.exec_timeout = std::chrono::seconds(*s);
    } else {
      c.warnings.push_back(
          fmt::format("HCCL_EXEC_TIMEOUT=\"{}\": not a number of seconds in [1, {}]; using {}", v,
                      kMaxExecTimeoutS, kDefaultExecTimeoutS));
    }
  }
  if (const char *v = getenv_fn("HZC_RDMA_DEVICE"); v != nullptr) {
    c.rdma_device = v;
  }
  if (const char *v = getenv_fn("HZC_RDMA_GID_INDEX"); v != nullptr) {
    if (auto index = ParseUnsigned(v, 0, 65535)) {
      c.rdma_gid_index = static_cast<uint32_t>(*index);
    } else {
      c.warnings.push_back(fmt::format(
          "HZC_RDMA_GID_INDEX=\"{}\": not a GID index in [0, 65535]; choosing one per port", v));
    }
  }
  ParseRdmaRetries(getenv_fn, &c);
  if (const char *v = getenv_fn("HZC_HOST_ID"); v != nullptr) {
    c.host_id = v;
  }
  if (const char *v = getenv_fn("HCCL_IF_IP"); v != nullptr) {
    c.if_ip = v;
  }
  c.if_base_port = ParseIfBasePort(getenv_fn("HCCL_IF_BASE_PORT"), &c.warnings);
  c.device_count = ParseDeviceCount(getenv_fn("HZC_DEVICE_COUNT"), &c.warnings);
  c.transport = ParseTransport(getenv_fn("HZC_TRANSPORT"), &c.warnings);
  c.fd_handoff = ParseFdHandoff(getenv_fn("HZC_FD_HANDOFF"), &c.warnings);
  c.net = ParseNet(getenv_fn("HZC_NET"), &c.warnings);
  ParseSizes(getenv_fn, &c);
  ParseTrust(getenv_fn, &c);
  return c;
}

std::chrono::milliseconds Config::PeerSilence() const {
  const auto ack = std::chrono::nanoseconds(4096) * (uint64_t{1} << rdma_timeout);
  return std::chrono::ceil<std::chrono::milliseconds>(ack * (rdma_retry_cnt + 1));
}

std::vector<std::string> Config::Describe() const {
  return {
      fmt::format("HZC_LOG={}", LogLevelName(log_level)),
      fmt::format("HZC_LOG_FILE={}", log_file.empty() ? "(stderr)" : log_file),
      fmt::format("HZC_DEVICE={}", device_path),
      fmt::format("HCCL_CONNECT_TIMEOUT={}", connect_timeout.count()),
      fmt::format("HCCL_EXEC_TIMEOUT={}", exec_timeout.count()),
      fmt::format("HCCL_BUFFSIZE={}", buff_size_mb),
      fmt::format("HZC_RDMA_DEVICE={}", rdma_device.empty() ? "(first active port)" : rdma_device),
      fmt::format("HZC_RDMA_GID_INDEX={}",
                  rdma_gid_index ? std::to_string(*rdma_gid_index) : "(RoCE v2, IPv4 first)"),
      fmt::format("HCCL_RDMA_TIMEOUT={}", rdma_timeout),
      fmt::format("HCCL_RDMA_RETRY_CNT={}", rdma_retry_cnt),
      fmt::format("HZC_HOST_ID={}", host_id.empty() ? "(boot id + hostname)" : host_id),
      fmt::format("HCCL_IF_IP={}", if_ip.empty() ? "(first up interface)" : if_ip),
      fmt::format("HCCL_IF_BASE_PORT={}", if_base_port),
      fmt::format("HZC_DEVICE_COUNT={}",
                  device_count ? std::to_string(*device_count) : "(max(online CPUs, 8))"),
      fmt::format("HZC_TRANSPORT={}", transport == TransportChoice::kKernel  ? "kernel"
                                      : transport == TransportChoice::kMemfd ? "memfd"
                                                                             : "auto"),
      fmt::format("HZC_FD_HANDOFF={}", fd_handoff == FdHandoffChoice::kSocket ? "socket"
                                       : fd_handoff == FdHandoffChoice::kOff  ? "off"
                                                                              : "auto"),
      fmt::format("HZC_NET={}", net == NetChoice::kRdma     ? "rdma"
                                : net == NetChoice::kSocket ? "socket"
                                                            : "auto"),
      fmt::format("HZC_INLINE_MAX={}", inline_max),
      fmt::format("HZC_ZERO_COPY_MIN={}", zero_copy_min),
      fmt::format("HZC_P2P_ZERO_COPY_MIN={}", p2p_zero_copy_min),
      fmt::format("HZC_P2P_BUFFERED_MAX={}", p2p_buffered_max),
      fmt::format("HZC_SPAN_RING_MIN={}", span_ring_min),
      // Never the secret itself.
      fmt::format("HZC_JOB_SECRET={}", job_secret.empty() ? "(unset)" : "(set)"),
      fmt::format("HZC_JOB_SECRET_FILE={}", job_secret_file.empty() ? "(unset)" : job_secret_file),
      fmt::format("HCCL_WHITELIST_DISABLE={}", whitelist_disable ? 1 : 0),
      fmt::format("HCCL_WHITELIST_FILE={}", whitelist_file.empty() ? "(unset)" : whitelist_file),
  };
}

const Config &GetConfig() {
  static const Config config =
      Config::FromLookup([](const char *name) { return std::getenv(name); });
  return config;
}

}  // namespace hzc
