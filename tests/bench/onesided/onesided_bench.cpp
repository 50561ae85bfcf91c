// SPDX-License-Identifier: Apache-2.0
// hzc-bench-onesided RANK_TABLE RANK [ITERS]: HcclBatchPut and HcclBatchGet between the two
// ranks of a rank table of two servers (one rank each). Rank 0 registers a 64 MiB window for
// rank 1 and waits; rank 1 registers a 64 MiB source, enables rank 0's window and times, after
// one warm-up each:
//   put SIZE / get SIZE   ITERS single transfers of SIZE (1, 4, 16 MiB), one batch of one
//                         transfer each, on the NULL stream (complete when the call returns)
//   blocks                1,000 blocks of 64 KiB (62.5 MiB) in batches of 256 on a stream, then
//                         one aclrtSynchronizeStream
//   whole                 one transfer of 64 MiB on the same stream, then the synchronize
// and prints one line per case: "case bytes seconds MB/s" (MB = 10^6 bytes, as perftest). Then
// the CPU each side spends moving 256 MiB (16 transfers of 16 MiB, rank 1 to rank 0; rank 0 waits
// in HcclBarrier meanwhile, or receives), both ranks printing
// "cpu-KIND ROLE bytes wall_seconds cpu_seconds" (the process's user and system time, every
// thread):
//   cpu-put, cpu-get      HcclBatchPut / HcclBatchGet on the NULL stream: no copy on either side
//   cpu-send              HcclSend / HcclRecv, which stage through the wire's slots on both sides
// Every put's and send's bytes are checked at rank 0 after the last case. Exit 0 when all went
// well.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kWindow = size_t{64} << 20;
constexpr size_t kBlock = size_t{64} << 10;
constexpr uint32_t kBlocks = 1000;
constexpr uint32_t kBatch = 256;

#define CHECK(call)                                                            \
  do {                                                                         \
    int rc_ = static_cast<int>(call);                                          \
    if (rc_ != 0) {                                                            \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #call, rc_, __LINE__); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

void Report(const std::string &name, size_t bytes, double seconds) {
  std::printf("%s %zu %.6f %.2f\n", name.c_str(), bytes, seconds, bytes / seconds / 1e6);
  std::fflush(stdout);
}

// CPU seconds of this process so far (user and system, every thread).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval &t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// Time @fn on this rank (wall and CPU) between two barriers, and print it as @name of @role.
template <typename Fn>
void Cpu(HcclComm comm, const std::string &name, const char *role, size_t bytes, Fn &&fn) {
  CHECK(HcclBarrier(comm, nullptr));
  const auto t0 = Clock::now();
  const double c0 = CpuSeconds();
  fn();
  CHECK(HcclBarrier(comm, nullptr));
  const double cpu = CpuSeconds() - c0;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s %s %zu %.6f %.6f\n", name.c_str(), role, bytes, wall, cpu);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RANK_TABLE RANK [ITERS]\n", argv[0]);
    return 2;
  }
  const uint32_t rank = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const int iters = argc > 3 ? std::atoi(argv[3]) : 5;
  HcclComm comm = nullptr;
  CHECK(aclInit(nullptr));
  CHECK(HcclCommInitClusterInfo(argv[1], rank, &comm));
  const uint32_t peer = 1 - rank;
  // Rank 1's source holds the pattern, rank 0's window zeros until rank 1 writes it.
  std::vector<uint8_t> mem(kWindow, 0);
  for (size_t i = 0; rank == 1 && i < kWindow; ++i) {
    mem[i] = static_cast<uint8_t>(i * 7 + (i >> 16));
  }
  HcclMemDesc mine, theirs;
  CHECK(HcclRegisterMem(comm, peer, HCCL_MEM_TYPE_HOST, mem.data(), kWindow, &mine));
  HcclMemDescs local = {&mine, 1}, remote = {&theirs, 1};
  uint32_t got = 0;
  CHECK(HcclExchangeMemDesc(comm, peer, &local, 0, &remote, &got));
  HcclMem window;
  CHECK(HcclEnableMemAccess(comm, &theirs, &window));
  auto *const base = static_cast<uint8_t *>(window.addr);
  if (rank == 1) {
    aclrtStream stream = nullptr;
    CHECK(aclrtCreateStream(&stream));
    for (bool put : {true, false}) {
      for (size_t size : {size_t{1} << 20, size_t{4} << 20, size_t{16} << 20}) {
        HcclOneSideOpDesc op{mem.data(), base, size, HCCL_DATA_TYPE_INT8};
        auto once = [&] {
          CHECK(put ? HcclBatchPut(comm, peer, &op, 1, nullptr)
                    : HcclBatchGet(comm, peer, &op, 1, nullptr));
        };
        once();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) {
          once();
        }
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        Report(std::string(put ? "put" : "get") + "-" + std::to_string(size), size * iters, s);
      }
    }
    std::vector<HcclOneSideOpDesc> blocks(kBlocks);
    for (uint32_t b = 0; b < kBlocks; ++b) {
      blocks[b] = {mem.data() + b * kBlock, base + b * kBlock, kBlock, HCCL_DATA_TYPE_INT8};
    }
    HcclOneSideOpDesc whole{mem.data(), base, kWindow, HCCL_DATA_TYPE_INT8};
    for (int round = 0; round < 2; ++round) {  // the first is the warm-up
      auto t0 = Clock::now();
      for (uint32_t b = 0; b < kBlocks; b += kBatch) {
        CHECK(HcclBatchPut(comm, peer, blocks.data() + b, std::min(kBatch, kBlocks - b), stream));
      }
      CHECK(aclrtSynchronizeStream(stream));
      const double blocks_s = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
      CHECK(HcclBatchPut(comm, peer, &whole, 1, stream));
      CHECK(aclrtSynchronizeStream(stream));
      const double whole_s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (round == 1) {
        Report("blocks-65536x1000", kBlock * kBlocks, blocks_s);
        Report("whole-67108864", kWindow, whole_s);
      }
    }
    CHECK(aclrtDestroyStream(stream));
  }
  // The CPU each side spends: rank 1 moves 16 x 16 MiB, rank 0 waits (one-sided) or receives.
  constexpr size_t kCpuSize = size_t{16} << 20;
  constexpr int kCpuCount = 16;
  for (const char *kind : {"put", "get"}) {
    const bool put = kind[0] == 'p';
    Cpu(comm, std::string("cpu-") + kind, rank == 1 ? "initiator" : "target", kCpuSize * kCpuCount,
        [&] {
          for (int i = 0; rank == 1 && i < kCpuCount; ++i) {
            HcclOneSideOpDesc op{mem.data(), base, kCpuSize, HCCL_DATA_TYPE_INT8};
            CHECK(put ? HcclBatchPut(comm, peer, &op, 1, nullptr)
                      : HcclBatchGet(comm, peer, &op, 1, nullptr));
          }
        });
  }
  Cpu(comm, "cpu-send", rank == 1 ? "sender" : "receiver", kCpuSize * kCpuCount, [&] {
    for (int i = 0; i < kCpuCount; ++i) {
      CHECK(rank == 1 ? HcclSend(mem.data(), kCpuSize, HCCL_DATA_TYPE_INT8, peer, comm, nullptr)
                      : HcclRecv(mem.data(), kCpuSize, HCCL_DATA_TYPE_INT8, peer, comm, nullptr));
    }
  });
  CHECK(HcclBarrier(comm, nullptr));
  int bad = 0;
  if (rank == 0) {  // rank 1's bytes, the same pattern, landed over the whole window
    for (size_t i = 0; i < kWindow; ++i) {
      if (mem[i] != static_cast<uint8_t>(i * 7 + (i >> 16))) {
        std::fprintf(stderr, "byte %zu is wrong\n", i);
        bad = 1;
        break;
      }
    }
  }
  CHECK(HcclDisableMemAccess(comm, &theirs));
  CHECK(HcclDeregisterMem(comm, &mine));
  CHECK(HcclCommDestroy(comm));
  CHECK(aclFinalize());
  return bad;
}
