// SPDX-License-Identifier: Apache-2.0
// RDMA WRITE bandwidth and latency between two ranks through hzc's links (verbs/links.h),
// printed as a markdown table. Ranks are forked processes sharing a fresh kernel domain.
//
// Bandwidth: rank 0 posts N writes of one size into rank 1's buffer through one
// Links::Execute (up to the queue depth in flight, like ib_write_bw) and divides the bytes by
// the time from the call to the last completion; then (not timed) it reads the peer's copy
// back and compares. Latency: ping-pong like ib_write_lat: each side writes the message into
// the other's buffer and spins on the last 8 bytes of its own buffer for the peer's sequence
// number; the table shows half the median round trip.
// For experiments: --repeat/--each (several bandwidth measurements per process),
// --no-bandwidth/--no-latency, --post-bytes (LinkOptions::post_bytes).
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/errno_string.h"
#include "base/unique_mapping.h"
#include "device/device.h"
#include "verbs/board.h"
#include "verbs/links.h"

namespace hzc::verbs {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kBufferKey = 3;
constexpr uint32_t kBandwidthDoneKey = 4;
constexpr uint32_t kDoneKey = 5;

struct Params {
  std::vector<size_t> sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  size_t max_size = 0;         // largest of sizes
  size_t bw_bytes = 32 << 20;  // bytes written per size for bandwidth
  size_t lat_bytes = 4 << 20;  // bytes per direction per size for latency
  unsigned min_iters = 5;
  unsigned repeat = 1;  // bandwidth measurements per size (each printed with --each)
  bool each = false;
  bool bandwidth = true;
  bool latency = true;
  std::string device;
  unsigned ack_timeout = LinkOptions{}.ack_timeout;
  unsigned retry_count = LinkOptions{}.retry_count;
  uint64_t post_bytes = LinkOptions{}.post_bytes;
};

struct Row {
  size_t size = 0;
  unsigned bw_iters = 0;
  double mib_s = 0;
  unsigned lat_iters = 0;
  double lat_us = 0;
};

unsigned Iterations(size_t total, size_t size, unsigned min_iters, unsigned max_iters) {
  return static_cast<unsigned>(std::clamp<size_t>(total / size, min_iters, max_iters));
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Spin until the 8 bytes at @p hold @want; false after 30 s.
bool AwaitSequence(const uint8_t *p, uint64_t want) {
  auto *word = reinterpret_cast<const uint64_t *>(p);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (unsigned i = 0;; ++i) {
    if (std::atomic_ref<const uint64_t>(*word).load(std::memory_order_acquire) == want) {
      return true;
    }
    if ((i & 4095) == 0 && Clock::now() > deadline) {
      return false;
    }
  }
}

// Both ranks publish @key and wait for each other; "" or the failure.
std::string Barrier(const Board &board, uint32_t key) {
  const uint32_t one = 1;
  if (Status st = board.Put(key, Bytes(one)); !st.ok()) {
    return st.message();
  }
  auto done = board.Wait(key, sizeof(one), Clock::now() + std::chrono::seconds(600), "barrier");
  return done.ok() ? "" : done.status().message();
}

// One rank; rank 0 fills @rows. Returns "" or the failure.
std::string RunRank(const Params &params, std::array<uint64_t, 2> id, uint32_t rank,
                    std::vector<Row> *rows) {
  auto device = Device::Open("/dev/hzc");
  if (!device.ok()) {
    return device.status().message();
  }
  if (Status st = (*device)->JoinDomain(id, rank, 2); !st.ok()) {
    return st.message();
  }
  const Board board(**device, id, rank, 2);
  LinkOptions options;
  options.device = params.device;
  options.timeout = std::chrono::seconds(60);
  options.progress_timeout = std::chrono::seconds(60);
  options.ack_timeout = static_cast<uint8_t>(params.ack_timeout);
  options.retry_count = static_cast<uint8_t>(params.retry_count);
  options.post_bytes = params.post_bytes;
  auto links = Links::Establish(**device, id, rank, 2, options);
  if (!links.ok()) {
    return "link setup: " + links.status().message();
  }
  if (!*links) {
    return "link setup: no RDMA device (kernel-only links)";
  }
  Links &l = **links;
  // [0, max): receive region, [max, 2 max): send region.
  const size_t len = 2 * params.max_size;
  auto mapping = UniqueMapping::Map(len, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1);
  if (!mapping.valid()) {
    return "mmap: " + ErrnoString(errno);
  }
  void *mem = mapping.get();
  auto *recv = static_cast<uint8_t *>(mem);
  uint8_t *send = recv + params.max_size;
  auto mr = l.Register(mem, len);
  if (!mr.ok()) {
    return "register: " + mr.status().message();
  }
  const RemoteBuffer mine = (*mr)->remote();
  if (Status st = board.Put(kBufferKey, Bytes(mine)); !st.ok()) {
    return st.message();
  }
  auto blobs = board.Wait(kBufferKey, sizeof(RemoteBuffer), Clock::now() + std::chrono::seconds(60),
                          "buffers");
  if (!blobs.ok()) {
    return blobs.status().message();
  }
  RemoteBuffer peer;
  std::memcpy(&peer, blobs->blob(1 - rank).data(), sizeof(peer));
  const uint32_t other = 1 - rank;

  const std::vector<size_t> &sizes = params.sizes;
  if (rank == 0) {
    for (size_t i = 0; i < params.max_size; ++i) {
      send[i] = static_cast<uint8_t>(i * 131 + 7);
    }
  }
  if (rank == 0) {
    for (size_t s : params.bandwidth ? sizes : std::vector<size_t>{}) {
      Row row{.size = s};
      row.bw_iters = Iterations(params.bw_bytes, s, params.min_iters, 4096);
      std::vector<WorkRequest> writes(row.bw_iters, {.op = WorkRequest::kWrite,
                                                     .peer = other,
                                                     .mr = mr->get(),
                                                     .local = send,
                                                     .length = s,
                                                     .remote_addr = peer.addr,
                                                     .rkey = peer.rkey});
      // Warm-up: a few messages, not timed.
      if (Status st = l.Execute(std::span(writes).first(std::min<size_t>(writes.size(), 2)));
          !st.ok()) {
        return st.message();
      }
      for (unsigned rep = 0; rep < params.repeat; ++rep) {
        const auto start = Clock::now();
        if (Status st = l.Execute(writes); !st.ok()) {
          return st.message();
        }
        const double mib_s =
            static_cast<double>(s) * row.bw_iters / Seconds(Clock::now() - start) / (1 << 20);
        if (params.each) {
          fprintf(stderr, "bw %zu %u %.2f\n", s, rep, mib_s);
        }
        row.mib_s = std::max(row.mib_s, mib_s);
      }
      // Not timed: read the peer's copy back and compare.
      std::memset(recv, 0, s);
      if (Status st = l.Read(other, **mr, recv, s, peer.addr, peer.rkey); !st.ok()) {
        return "read back: " + st.message();
      }
      if (std::memcmp(recv, send, s) != 0) {
        return fmt::format("size {}: the peer's buffer differs from what was written", s);
      }
      std::memset(recv, 0, s);  // no stale sequence numbers for the latency part
      rows->push_back(row);
    }
  }
  // Rank 1 sleeps in the kernel while rank 0 measures bandwidth.
  if (std::string err = Barrier(board, kBandwidthDoneKey); !err.empty()) {
    return err;
  }
  // Latency: sequence numbers grow across sizes, so nothing stale ever matches.
  uint64_t seq = 0;
  if (rank == 0 && !params.bandwidth) {
    for (size_t s : sizes) {
      rows->push_back({.size = s});
    }
  }
  for (size_t i = 0; i < (params.latency ? sizes.size() : 0); ++i) {
    const size_t s = sizes[i];
    const unsigned iters = Iterations(params.lat_bytes, s, params.min_iters, 100);
    const unsigned warmup = s >= (1U << 20) ? 1 : 2;
    std::vector<double> rtt;
    for (unsigned it = 0; it < iters + warmup; ++it) {
      ++seq;
      const auto start = Clock::now();
      if (rank == 1 && !AwaitSequence(recv + s - 8, seq)) {
        return "latency: rank 0's message never arrived";
      }
      std::memcpy(send + s - 8, &seq, 8);
      if (Status st = l.Write(other, **mr, send, s, peer.addr, peer.rkey); !st.ok()) {
        return st.message();
      }
      if (rank == 0) {
        if (!AwaitSequence(recv + s - 8, seq)) {
          return "latency: rank 1's reply never arrived";
        }
        if (it >= warmup) {
          rtt.push_back(Seconds(Clock::now() - start));
        }
      }
    }
    if (rank == 0) {
      std::sort(rtt.begin(), rtt.end());
      (*rows)[i].lat_iters = iters;
      (*rows)[i].lat_us = rtt[rtt.size() / 2] / 2 * 1e6;
    }
  }
  return Barrier(board, kDoneKey);
}

int Main(int argc, char **argv) {
  Params params;
  CLI::App app{"RDMA WRITE bandwidth and latency through hzc links between two ranks"};
  app.add_option("--size", params.sizes,
                 "message sizes in bytes (repeatable; default 4 KiB to "
                 "16 MiB in steps of 4x)");
  app.add_option("--bw-bytes", params.bw_bytes, "bytes written per size for bandwidth");
  app.add_option("--lat-bytes", params.lat_bytes, "bytes per direction per size for latency");
  app.add_option("--min-iters", params.min_iters, "fewest iterations per size");
  app.add_option("--repeat", params.repeat, "bandwidth measurements per size (the best is shown)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--each", params.each, "print every bandwidth measurement on stderr");
  app.add_flag("!--no-bandwidth", params.bandwidth, "skip the bandwidth measurement");
  app.add_flag("!--no-latency", params.latency, "skip the latency measurement");
  app.add_option("--device", params.device, "RDMA device[:port] (default: first active)");
  app.add_option("--ack-timeout", params.ack_timeout, "queue-pair local ACK timeout exponent")
      ->check(CLI::Range(1, 31));
  app.add_option("--retry-count", params.retry_count, "queue-pair retry count")
      ->check(CLI::Range(0, 7));
  app.add_option("--post-bytes", params.post_bytes,
                 "most bytes per post call and work request (LinkOptions::post_bytes; 0: "
                 "automatic)");
  CLI11_PARSE(app, argc, argv);
  for (size_t size : params.sizes) {
    if (size < 8) {
      fprintf(stderr, "hzc-bench-verbs: --size %zu: messages carry an 8-byte sequence number\n",
              size);
      return 2;
    }
    params.max_size = std::max(params.max_size, size);
  }
  std::array<uint64_t, 2> id{};
  if (getrandom(id.data(), sizeof(id), 0) != sizeof(id)) {
    id = {static_cast<uint64_t>(getpid()), static_cast<uint64_t>(time(nullptr))};
  }
  id[0] |= 1;
  fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    const std::string err = RunRank(params, id, 1, nullptr);
    if (!err.empty()) {
      fprintf(stderr, "hzc-bench-verbs: rank 1: %s\n", err.c_str());
    }
    _exit(err.empty() ? 0 : 1);
  }
  std::vector<Row> rows;
  const std::string err = RunRank(params, id, 0, &rows);
  int status = 0;
  waitpid(child, &status, 0);
  if (!err.empty()) {
    fprintf(stderr, "hzc-bench-verbs: rank 0: %s\n", err.c_str());
    return 1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return 1;
  }
  printf(
      "| size | write BW iters | hzc write BW (MiB/s) | latency iters | hzc write latency "
      "(us) |\n");
  printf("|---:|---:|---:|---:|---:|\n");
  for (const Row &r : rows) {
    printf("| %zu | %u | %.2f | %u | %.1f |\n", r.size, r.bw_iters, r.mib_s, r.lat_iters, r.lat_us);
  }
  return 0;
}

}  // namespace
}  // namespace hzc::verbs

int main(int argc, char **argv) {
  return hzc::verbs::Main(argc, argv);
}
