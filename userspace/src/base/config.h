// SPDX-License-Identifier: Apache-2.0
// Configuration from the environment, read once per process. Every variable the library reads
// is read here, and listed by Describe() (the INFO log) and in the README.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hzc {

enum class LogLevel { kError, kWarn, kInfo, kDebug };

// "ERROR", "WARN", "INFO", "DEBUG" (any case); nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view text);
std::string_view LogLevelName(LogLevel level);

// A whole decimal number in [min, max]; nullopt for anything else (sign, junk, overflow).
std::optional<uint64_t> ParseUnsigned(std::string_view text, uint64_t min, uint64_t max);

// HZC_TRANSPORT: how peers reach each other's activated memory (transport/memfd_directory.h).
enum class TransportChoice { kAuto, kKernel, kMemfd };
// HZC_FD_HANDOFF: how the memfd transport takes a peer's descriptors (bootstrap/fd_handoff.h).
enum class FdHandoffChoice { kAuto, kSocket, kOff };
// HZC_NET: how the servers of a communicator that spans servers reach each other
// (transport/wire.h).
enum class NetChoice { kAuto, kRdma, kSocket };

struct Config {
  static constexpr const char *kDefaultDevice = "/dev/hzc";
  static constexpr uint64_t kDefaultConnectTimeoutS = 120;
  static constexpr uint64_t kMaxConnectTimeoutS = 7200;
  static constexpr uint64_t kDefaultBuffSizeMb = 200;
  static constexpr uint64_t kDefaultExecTimeoutS = 1836;
  static constexpr uint64_t kMaxExecTimeoutS = 24 * 3600;

  LogLevel log_level = LogLevel::kWarn;
  std::string log_file;  // HZC_LOG_FILE pattern (%h host, %p pid); empty: stderr
  std::string device_path = kDefaultDevice;
  std::chrono::seconds connect_timeout{kDefaultConnectTimeoutS};
  uint64_t buff_size_mb = kDefaultBuffSizeMb;
  std::string rdma_device;                 // empty: first active port
  std::optional<uint32_t> rdma_gid_index;  // HZC_RDMA_GID_INDEX; nullopt: chosen per port
  // HCCL_RDMA_TIMEOUT and HCCL_RDMA_RETRY_CNT: the local ACK timeout (4.096 us * 2^value) and
  // the retry count of the RDMA queue pairs between servers, HCCL's ranges and defaults: a
  // peer may stall for about (retry count + 1) * timeout (34 s) before a transfer fails.
  static constexpr uint64_t kMinRdmaTimeout = 5;
  static constexpr uint64_t kMaxRdmaTimeout = 24;
  static constexpr uint64_t kDefaultRdmaTimeout = 20;
  static constexpr uint64_t kMaxRdmaRetryCnt = 7;
  static constexpr uint64_t kDefaultRdmaRetryCnt = 7;
  uint8_t rdma_timeout = kDefaultRdmaTimeout;
  uint8_t rdma_retry_cnt = kDefaultRdmaRetryCnt;
  // How long a peer on another server may acknowledge nothing before it is taken for dead, over
  // RDMA (the queue pairs' retries) and TCP (TCP_USER_TIMEOUT) alike: (HCCL_RDMA_RETRY_CNT + 1)
  // * 4.096 us * 2^HCCL_RDMA_TIMEOUT, rounded up to a millisecond (34,360 ms by default).
  std::chrono::milliseconds PeerSilence() const;
  std::string host_id;  // empty: boot id + hostname
  // HCCL_IF_IP: the address the root and every rank (for the connections of a communicator that
  // spans servers) listen on; empty: automatic.
  std::string if_ip;
  // HCCL_IF_BASE_PORT: the port of a rank table's rendezvous (HcclCommInitClusterInfo), served by
  // its rank 0 at its server's address.
  static constexpr uint64_t kDefaultIfBasePort = 60000;
  static constexpr uint64_t kMinIfBasePort = 1024;
  static constexpr uint64_t kMaxIfBasePort = 65520;
  uint16_t if_base_port = kDefaultIfBasePort;
  // HCCL_EXEC_TIMEOUT: how long a collective waits for the other ranks.
  std::chrono::seconds exec_timeout{kDefaultExecTimeoutS};
  // HZC_DEVICE_COUNT: how many ACL devices (slots of this host) there are; nullopt: the default
  // of the runtime (max(online CPUs, 8)).
  static constexpr uint64_t kMaxDeviceCount = 1024;
  std::optional<uint32_t> device_count;
  // HZC_TRANSPORT: auto (the kernel transport when the device exists, else memfd), kernel or
  // memfd.
  TransportChoice transport = TransportChoice::kAuto;
  // HZC_FD_HANDOFF: auto (pidfd_getfd, the peer's socket where that is refused), socket or off.
  FdHandoffChoice fd_handoff = FdHandoffChoice::kAuto;
  // HZC_NET: auto (RDMA when every server of a communicator has an RDMA device, else TCP), rdma
  // or socket.
  NetChoice net = NetChoice::kAuto;
  // HZC_INLINE_MAX: the largest input, in bytes per rank, that a collective inside one server
  // carries inline in its control area (coll/inline.h) instead of zero-copy or staging; 0: never.
  static constexpr uint64_t kDefaultInlineMax = 16384;
  static constexpr uint64_t kMaxInlineMax = uint64_t{1} << 20;
  uint64_t inline_max = kDefaultInlineMax;
  // HZC_ZERO_COPY_MIN: the smallest input, in bytes per rank, with which a collective inside one
  // server goes zero-copy rather than inline where the buffers allow it (activated memory): from
  // about here on one copy between the ranks' buffers beats a copy in and a copy out. 0: never
  // (inline whenever it fits HZC_INLINE_MAX).
  static constexpr uint64_t kDefaultZeroCopyMin = 8192;
  uint64_t zero_copy_min = kDefaultZeroCopyMin;
  // HZC_P2P_ZERO_COPY_MIN: the same for a point-to-point message (sent eagerly below it).
  static constexpr uint64_t kDefaultP2pZeroCopyMin = 4096;
  uint64_t p2p_zero_copy_min = kDefaultP2pZeroCopyMin;
  // HZC_P2P_BUFFERED_MAX: the largest point-to-point message, in bytes, that a send inside one
  // server copies into one of its pair channel's slots and returns without waiting for the
  // receiver (coll/p2p.h); 0: never.
  static constexpr uint64_t kDefaultP2pBufferedMax = 2048;
  static constexpr uint64_t kMaxP2pBufferedMax = uint64_t{1} << 16;
  uint64_t p2p_buffered_max = kDefaultP2pBufferedMax;
  // HZC_SPAN_RING_MIN: the smallest AllReduce, AllGather (output) or ReduceScatter (input), in
  // bytes, that the leaders of a communicator spanning servers move in a ring; smaller ones by
  // recursive doubling, Bruck's algorithm or directly (coll/span.h). 0: always the ring. The
  // first server's leader's value holds for a communicator.
  static constexpr uint64_t kDefaultSpanRingMin = uint64_t{256} << 10;
  static constexpr uint64_t kMaxSpanRingMin = uint64_t{16} << 20;
  uint64_t span_ring_min = kDefaultSpanRingMin;
  // HZC_JOB_SECRET, HZC_JOB_SECRET_FILE: the secret a rank table's ranks prove they share
  // (bootstrap/auth.h); empty: none. The file is read (and its owner and mode checked) when a
  // communicator needs it, not here.
  std::string job_secret;
  std::string job_secret_file;
  // HCCL_WHITELIST_DISABLE (0: the trust list of HCCL_WHITELIST_FILE decides which addresses may
  // connect; 1, the default: any) and HCCL_WHITELIST_FILE.
  bool whitelist_disable = true;
  std::string whitelist_file;

  // Values that were set but invalid, one message each ("HZC_LOG=\"loud\": ..."), for the
  // logger to report once it exists.
  std::vector<std::string> warnings;

  // Parse from a getenv-like lookup (nullptr = unset).
  static Config FromLookup(const std::function<const char *(const char *)> &getenv_fn);
  // One line per variable, NAME=value, in the order of the README, for the INFO log.
  std::vector<std::string> Describe() const;
};

// The process's configuration, read from the environment on first use.
const Config &GetConfig();

}  // namespace hzc
