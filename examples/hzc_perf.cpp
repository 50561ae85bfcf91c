// SPDX-License-Identifier: Apache-2.0
// hzc-perf: bandwidth of the hzc collectives, with the flags and the output of nccl-tests
// (all_reduce_perf and its siblings), so that the scripts that read nccl-tests read it too.
//
//   hzc-perf all_reduce -g 4 -b 1M -e 256M -f 2 -d float -o sum -n 20 -w 5 -c 1
//
// The collective is the positional argument (all_reduce, all_gather, broadcast, reduce_scatter,
// alltoall, as nccl-tests' binaries are named; memcpy measures one process copying, the bound;
// barrier and sendrecv, below). The ranks are -t x -g processes forked on this server, one
// communicator. Output (rank 0, stdout): the "# nThread ..." preamble and "# Using devices" list,
// three header lines, one row per size
//
//   size count type redop root | time algbw busbw #wrong (out-of-place) | the same (in-place)
//
// (size in bytes of the larger buffer, count in elements per call, time in us per call,
// algbw = size / time and busbw = algbw x nccl-tests' factor in GB/s: AllReduce 2(n-1)/n,
// AllGather, ReduceScatter and AlltoAll (n-1)/n, Broadcast and SendRecv 1; AlltoAll sends count/n
// elements to each rank, as nccl-tests' alltoall_perf), and the "# Out of bounds
// values" and "# Avg bus bandwidth" footer. Exit status 0; 1 if a call failed, a check found
// wrong elements or the average is below NCCL_TESTS_MIN_BW x 0.9; 2 on a usage error.
//
// barrier: HcclBarrier, one row of size 0 and count 0 (-b, -e, -i and -f are ignored; type is
// the first -d, redop none), time per call, algbw and busbw 0. The in-place columns are a
// second measurement of the same calls (a barrier has no buffers). -c N checks N barriers: every
// rank forked here stores the barrier's sequence number in a shared page before it and, after
// it, counts the ranks forked here whose number is behind (#wrong: the sum over the ranks).
//
// sendrecv: a ping-pong between ranks 0 and 1 (exactly 2 ranks): rank 0 HcclSend()s count
// elements to rank 1 and HcclRecv()s count elements from it, rank 1 receives and sends back.
// time is half the round trip (the one-way latency, as OSU's osu_latency reports it), algbw =
// size / time, busbw = algbw (nccl-tests' sendrecv_perf factor 1). Out-of-place sends from the
// send buffer and receives into the receive buffer; in-place (measured the same way) sends from
// and receives into the receive buffer, as nccl-tests' in-place sendrecv does. -c N checks N
// ping-pongs: each rank sends a pattern of its rank and the check's sequence number and
// compares what it receives with its peer's pattern (#wrong: wrong elements of both ranks).
//
// Across servers: with --rank-table FILE the communicator is the rank table's
// (HcclCommInitClusterInfo), and the -t x -g ranks forked here are its ranks R .. R+g-1 (R =
// --first-rank, default 0), this server's share; every server runs hzc-perf with the same table
// and options and its own R, e.g. with two servers of two ranks each
//
//   server 1: hzc-perf all_reduce -g 2 -b 4M -e 16M -f 4 --rank-table t.json --first-rank 0
//   server 2: hzc-perf all_reduce -g 2 -b 4M -e 16M -f 4 --rank-table t.json --first-rank 2
//
// Only the table's rank 0 prints (its "# Using devices" list names every rank's pid and host);
// the other ranks print nothing on stdout but time and check as well, and their exit status
// says whether their checks found wrong elements. busbw factors use the total number of ranks
// of the table. In zerocopy mode the buffers are activated through a communicator of this
// server's ranks (HcclCreateSubCommConfig of R .. R+g-1: HcclCommSetMemoryRange on a
// communicator that spans servers is HCCL_E_NOT_SUPPORT), so R .. R+g-1 must be ranks of one
// server of the table.
#include <acl/acl.h>
#include <dirent.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../tests/common/reference.h"
#include "tool_cli.h"

namespace {

enum class Coll {
  kAllReduce,
  kAllGather,
  kBroadcast,
  kReduceScatter,
  kAlltoAll,
  kMemcpy,
  kBarrier,
  kSendRecv
};

struct CollName {
  const char *name;
  Coll coll;
};
constexpr CollName kColls[] = {
    {"all_reduce", Coll::kAllReduce}, {"all_gather", Coll::kAllGather},
    {"broadcast", Coll::kBroadcast},  {"reduce_scatter", Coll::kReduceScatter},
    {"alltoall", Coll::kAlltoAll},    {"memcpy", Coll::kMemcpy},
    {"barrier", Coll::kBarrier},      {"sendrecv", Coll::kSendRecv}};

// nccl-tests' type names first (the ones it prints), then HCCL's names of the same types.
struct TypeName {
  const char *name;
  HcclDataType type;
  size_t size;
};
constexpr TypeName kTypes[] = {
    {"int8", HCCL_DATA_TYPE_INT8, 1},   {"uint8", HCCL_DATA_TYPE_UINT8, 1},
    {"int32", HCCL_DATA_TYPE_INT32, 4}, {"uint32", HCCL_DATA_TYPE_UINT32, 4},
    {"int64", HCCL_DATA_TYPE_INT64, 8}, {"uint64", HCCL_DATA_TYPE_UINT64, 8},
    {"half", HCCL_DATA_TYPE_FP16, 2},   {"float", HCCL_DATA_TYPE_FP32, 4},
    {"double", HCCL_DATA_TYPE_FP64, 8}, {"bfloat16", HCCL_DATA_TYPE_BFP16, 2},
    {"int16", HCCL_DATA_TYPE_INT16, 2}, {"uint16", HCCL_DATA_TYPE_UINT16, 2}};
struct TypeAlias {
  const char *alias;
  const char *name;
};
constexpr TypeAlias kTypeAliases[] = {
    {"char", "int8"},      {"int", "int32"},     {"fp16", "half"},   {"float16", "half"},
    {"fp32", "float"},     {"float32", "float"}, {"fp64", "double"}, {"float64", "double"},
    {"bfp16", "bfloat16"}, {"bf16", "bfloat16"}};

struct OpName {
  const char *name;
  HcclReduceOp op;
};
constexpr OpName kOps[] = {{"sum", HCCL_REDUCE_SUM},
                           {"prod", HCCL_REDUCE_PROD},
                           {"max", HCCL_REDUCE_MAX},
                           {"min", HCCL_REDUCE_MIN}};

struct Options {
  Coll coll = Coll::kAllReduce;
  uint32_t nthreads = 1, ngpus = 1;  // ranks = nthreads x ngpus, one process each
  size_t min_bytes = 32 << 20, max_bytes = 32 << 20, step_bytes = 1 << 20;
  uint64_t step_factor = 1;
  int iters = 20, agg_iters = 1, warmup = 5, check = 1;
  int parallel_init = 0, blocking = 0, stream_null = 0, timeout = 0, cputime = 0;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max of the ranks' times
  int bind = 0;     // 1: rank r runs on the r-th CPU of the allowed ones (as mpirun --bind-to core)
  uint32_t root = 0;
  std::vector<TypeName> types;
  std::vector<OpName> ops;
  std::string mode = "zerocopy";
  std::string rank_table;   // --rank-table: the ranks forked here are some of the table's
  uint32_t first_rank = 0;  // --first-rank: the table's rank of the first one forked here
  uint32_t servers = 0;     // --servers: simulated servers on this host (0: none)

  uint32_t nranks() const { return nthreads * ngpus; }  // ranks forked here
  bool zero_copy() const { return mode == "zerocopy"; }
};

// "1024", "1.5M", "64k", "1G" (nccl-tests' sizes); nullopt for anything else.
std::optional<size_t> ParseSize(const std::string &s) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  double unit = 1;
  if (*end != '\0') {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
    unit = u == 'K' ? 1024.0 : u == 'M' ? 1048576.0 : u == 'G' ? 1073741824.0 : 0;
    if (unit == 0 || end[1] != '\0') {
      return std::nullopt;
    }
  }
  if (v * unit >= 9.0e18) {
    return std::nullopt;
  }
  return static_cast<size_t>(v * unit);
}

CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string &s) -> std::string {
        return ParseSize(s) ? ""
                            : s + ": not a size in bytes (a number, or with a K, M or G suffix)";
      },
      "SIZE");
}

// Element counts of one call for a size of @bytes (nccl-tests' getCollByteCount): the count
// passed to the call, the elements of the send and receive buffers, and the offsets (in elements,
// times the rank) of the in-place send and receive buffers inside the receive buffer.
struct Counts {
  size_t param, send, recv, send_inplace, recv_inplace;
};
Counts CountsFor(Coll coll, size_t bytes, size_t es, uint32_t n) {
  const size_t count = bytes / es, base = count / n;
  switch (coll) {
    case Coll::kAllGather:
      return {base, base, base * n, base, 0};
    case Coll::kReduceScatter:
      return {base, base * n, base, 0, base};
    case Coll::kAlltoAll:
      return {base, base * n, base * n, 0, 0};
    default:
      return {count, count, count, 0, 0};
  }
}

double BusFactor(Coll coll, uint32_t n) {
  switch (coll) {
    case Coll::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAlltoAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

// nccl-tests' time column: 7 wide, fewer decimals for longer times.
std::string TimeString(double us) {
  char s[32];
  std::snprintf(s, sizeof(s), us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return s;
}

void PrintHeader(const Options &o) {
  const char *time = o.cputime ? "cputime" : "time";
  std::printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
      "          \n",
      "", "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
              "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
              "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
}

// One line of the "# Using devices" list.
struct Device {
  pid_t pid = 0;
  std::string host;
  uint32_t index = 0;  // the rank's device on its server
};

std::string HostName() {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

void PrintPreamble(const Options &o, const std::vector<Device> &devices, const char *device) {
  const bool by_factor = o.step_factor > 1;
  std::printf(
      "# nThread %u nGpus %u minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
      "iters: %d agg iters: %d validation: %d graph: 0\n",
      o.nthreads, o.ngpus, o.min_bytes, o.max_bytes,
      by_factor ? static_cast<size_t>(o.step_factor) : o.step_bytes, by_factor ? "factor" : "bytes",
      o.warmup, o.iters, o.agg_iters, o.check);
  if (o.blocking) {
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  }
  std::printf("#\n# Using devices\n");
  for (size_t r = 0; r < devices.size(); ++r) {
    std::printf("#  Rank %2zu Group  0 Pid %6d on %10s device %2u [0x%02x] %s\n", r,
                static_cast<int>(devices[r].pid), devices[r].host.c_str(), devices[r].index, 0,
                device);
  }
  std::printf("#\n");
}

// Totals printed in the footer.
struct Totals {
  double busbw_sum = 0;
  int measurements = 0;
  int errors = 0;  // measurements that found wrong elements
};

int PrintFooter(const Totals &t) {
  const double avg = t.measurements > 0 ? t.busbw_sum / t.measurements : 0;
  const char *min_env = std::getenv("NCCL_TESTS_MIN_BW");
  const double min_bw = min_env != nullptr ? std::atof(min_env) : -1;
  const bool low = min_env != nullptr && avg < min_bw * 0.9;
  std::printf("# Out of bounds values : %d %s\n", t.errors, t.errors ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g %s\n", avg,
              min_env == nullptr ? "" : (low ? "FAILED" : "OK"));
  std::printf("#\n\n");
  std::fflush(stdout);
  return t.errors != 0 || low ? 1 : 0;
}

// The size loop of nccl-tests: multiply by -f when it is above 1 (0 becomes 1), else add -i.
template <typename Fn>
bool ForEachSize(const Options &o, Fn &&fn) {
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;
       bytes = o.step_factor > 1 ? std::max<size_t>(bytes * o.step_factor, 1)
                                 : bytes + o.step_bytes) {
    if (!fn(bytes)) {
      return false;
    }
    if (o.step_factor <= 1 && o.step_bytes == 0) {
      break;
    }
  }
  return true;
}

double UsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// One process copying: out-of-place memcpy, in-place an overlapping memmove.
int MemcpyRows(const Options &o) {
  PrintPreamble(o, {{getpid(), HostName(), 0}}, "memcpy (one process)");
  PrintHeader(o);
  std::vector<uint8_t> a(o.max_bytes + 64, 1), b(o.max_bytes + 64, 2);
  Totals totals;
  auto measure = [&](size_t bytes, bool in_place) {
    auto copy = [&] {
      if (in_place) {
        std::memmove(a.data(), a.data() + 64, bytes);
      } else {
        std::memcpy(b.data(), a.data(), bytes);
      }
    };
    for (int i = 0; i < o.warmup; ++i) {
      copy();
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters * o.agg_iters; ++i) {
      copy();
    }
    const double us = UsSince(t0) / (o.iters * o.agg_iters);
    const double algbw = static_cast<double>(bytes) / 1.0e3 / us;
    totals.busbw_sum += algbw;
    ++totals.measurements;
    std::printf("  %7s  %6.2f  %6.2f  %5d", TimeString(us).c_str(), algbw, algbw, 0);
  };
  ForEachSize(o, [&](size_t bytes) {
    std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, bytes, "int8", "none", -1);
    measure(bytes, false);
    measure(bytes, true);
    std::printf("\n");
    std::fflush(stdout);
    return true;
  });
  return PrintFooter(totals);
}

// The buffers of one rank: send and receive, each of the largest size, in activated memory
// (zerocopy) or in plain memory (staging).
struct Buffers {
  uint8_t *send = nullptr, *recv = nullptr;
  uint8_t *base = nullptr;
  size_t size = 0;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  HcclComm comm = nullptr;

  bool Init(HcclComm c, size_t each, bool zero_copy) {
    comm = c;
    const size_t bytes = 2 * each + 4096;
    if (!zero_copy) {
      size = bytes;
      void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      base = static_cast<uint8_t *>(p == MAP_FAILED ? nullptr : p);
    } else {
      aclrtPhysicalMemProp prop{};
      prop.memAttr = ACL_HBM_MEM_NORMAL;
      prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
      size_t gran = 0;
      if (aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran) !=
          ACL_SUCCESS) {
        return false;
      }
      size = (bytes + gran - 1) / gran * gran;
      const bool ok = aclrtReserveMemAddress(&va, size, 0, nullptr, 0) == ACL_SUCCESS &&
                      HcclCommSetMemoryRange(comm, va, size, 0, 0) == HCCL_SUCCESS &&
                      aclrtMallocPhysical(&handle, size, &prop, 0) == ACL_SUCCESS &&
                      aclrtMapMem(va, size, 0, handle, 0) == ACL_SUCCESS &&
                      HcclCommActivateCommMemory(comm, va, size, 0, handle, 0) == HCCL_SUCCESS;
      if (!ok) {
        return false;
      }
      base = static_cast<uint8_t *>(va);
    }
    if (base == nullptr) {
      return false;
    }
    // The receive buffer starts an odd number of pages after the send buffer: buffers a
    // power of two apart alias in the caches and TLBs (and in the emulator's software TLB).
    std::memset(base, 0, 2 * each + 4096);
    send = base;
    recv = base + each + 4096;
    return true;
  }
  ~Buffers() {
    if (va == nullptr) {
      if (base != nullptr) {
        munmap(base, size);
      }
      return;
    }
    HcclCommDeactivateCommMemory(comm, va);
    aclrtUnmapMem(va);
    aclrtFreePhysical(handle);
    HcclCommUnsetMemoryRange(comm, va);
    aclrtReleaseMemAddress(va);
  }
};

// Shared by the ranks forked here (a MAP_SHARED page made before the fork): their pids, for
// rank 0's device list, and the sequence number of the last checked barrier each one entered.
constexpr uint32_t kMaxRanks = 4096;
struct Shared {
  std::atomic<int32_t> pid[kMaxRanks];
  std::atomic<uint64_t> arrived[kMaxRanks];
  // --servers: each rank's init time and the descriptors it has open after the init and at the
  // end of its calls.
  std::atomic<uint64_t> init_us[kMaxRanks];
  std::atomic<uint32_t> fds_init[kMaxRanks], fds_end[kMaxRanks];
  // --servers: the root info, made after the fork (a process reads its configuration, such as
  // its server's identity, once: the ranks' must not be the parent's).
  HcclRootInfo root;
  std::atomic<int> root_ready;  // 1 made, -1 failed
};

// Descriptors this process has open.
uint32_t OpenDescriptors() {
  uint32_t n = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (const dirent *e = readdir(d)) {
      n += e->d_name[0] != '.';
    }
    closedir(d);
    --n;  // the directory's own
  }
  return n;
}

// The communicators of one rank: the one measured and the one its buffers are activated through
// (the same one on a single server; this server's ranks across servers).
struct Comms {
  HcclComm comm = nullptr, memory = nullptr;
  uint32_t rank = 0, n = 0;  // the rank in comm and comm's ranks
  uint32_t local = 0;        // which of the ranks forked here
};

class Rank {
 public:
  Rank(const Options &o, const Comms &c, Shared *shared)
      : o_(o),
        comm_(c.comm),
        memory_(c.memory),
        rank_(c.rank),
        n_(c.n),
        local_(c.local),
        shared_(shared) {}

  int Run() {
    if (o_.coll == Coll::kSendRecv && n_ != 2) {
      const std::string why = "sendrecv is a ping-pong between ranks 0 and 1: it needs 2 ranks, " +
                              std::to_string(n_) + " in the communicator";
      return Fail(why.c_str());
    }
    if (!buf_.Init(memory_, o_.max_bytes, o_.zero_copy())) {
      return Fail("cannot set up the buffers");
    }
    // Reductions of the ranks' times and error counts go through plain memory.
    small_ = static_cast<uint8_t *>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (small_ == MAP_FAILED) {
      return Fail("mmap");
    }
    std::vector<Device> devices;
    if (!Devices(&devices)) {
      return 1;
    }
    if (rank_ == 0) {
      PrintPreamble(o_, devices, o_.zero_copy() ? "hzc zero-copy" : "hzc staging");
      PrintHeader(o_);
      std::fflush(stdout);
    }
    const bool reduces = o_.coll == Coll::kAllReduce || o_.coll == Coll::kReduceScatter;
    std::vector<OpName> ops = reduces ? o_.ops : std::vector<OpName>{{"none", HCCL_REDUCE_SUM}};
    // A barrier moves no data: one row, of the first type.
    std::vector<TypeName> types =
        o_.coll == Coll::kBarrier ? std::vector<TypeName>{o_.types.front()} : o_.types;
    for (const TypeName &type : types) {
      for (const OpName &op : ops) {
        if (!TimeTest(type, op)) {
          return 1;
        }
      }
    }
    munmap(small_, 4096);
    if (rank_ == 0) {
      return PrintFooter(totals_);
    }
    return totals_.errors != 0 ? 1 : 0;
  }

 private:
  // The "# Using devices" list: the pids of the shared page on a single server; across servers
  // every rank's pid, host and device, gathered from the ranks (on every rank: a collective).
  bool Devices(std::vector<Device> *out) {
    if (o_.rank_table.empty()) {
      for (uint32_t r = 0; r < n_; ++r) {
        out->push_back({shared_->pid[r].load(), HostName(), r});
      }
      return true;
    }
    struct Record {
      int32_t pid;
      uint32_t index;
      char host[56];
    };
    Record mine{getpid(), local_, {}};
    std::snprintf(mine.host, sizeof(mine.host), "%s", HostName().c_str());
    std::vector<Record> all(n_);
    if (!Check(
            HcclAllGather(&mine, all.data(), sizeof(Record), HCCL_DATA_TYPE_INT8, comm_, nullptr),
            "HcclAllGather of the ranks' pids")) {
      return false;
    }
    for (const Record &r : all) {
      out->push_back({r.pid, std::string(r.host, strnlen(r.host, sizeof(r.host))), r.index});
    }
    return true;
  }

  int Fail(const char *what) const {
    std::fprintf(stderr, "hzc-perf: rank %u: %s\n", rank_, what);
    return 1;
  }
  bool Check(HcclResult rc, const char *call) {
    if (rc != HCCL_SUCCESS) {
      std::fprintf(stderr, "hzc-perf: rank %u: %s: %s (%d)\n", rank_, call, HcclGetErrorString(rc),
                   static_cast<int>(rc));
      return false;
    }
    return true;
  }

  // One call of the collective on the out-of-place or in-place buffers.
  HcclResult Call(const TypeName &type, const OpName &op, size_t bytes, bool in_place) {
    const Counts c = CountsFor(o_.coll, bytes, type.size, n_);
    uint8_t *send = in_place ? buf_.recv + c.send_inplace * type.size * rank_ : buf_.send;
    uint8_t *recv = in_place ? buf_.recv + c.recv_inplace * type.size * rank_ : buf_.recv;
    switch (o_.coll) {
      case Coll::kAllReduce:
        return HcclAllReduce(send, recv, c.param, type.type, op.op, comm_, nullptr);
      case Coll::kAllGather:
        return HcclAllGather(send, recv, c.param, type.type, comm_, nullptr);
      case Coll::kReduceScatter:
        return HcclReduceScatter(send, recv, c.param, type.type, op.op, comm_, nullptr);
      case Coll::kAlltoAll:
        return HcclAlltoAll(send, c.param, type.type, recv, c.param, type.type, comm_, nullptr);
      case Coll::kBroadcast:
        // HcclBroadcast has one buffer: out-of-place runs on the send buffer, in-place on the
        // receive buffer.
        return HcclBroadcast(in_place ? recv : send, c.param, type.type, o_.root, comm_, nullptr);
      case Coll::kBarrier:
        return HcclBarrier(comm_, nullptr);
      case Coll::kSendRecv:
        return PingPong(send, recv, c.param, type.type);
      case Coll::kMemcpy:
        break;
    }
    return HCCL_E_NOT_SUPPORT;
  }

  // One round trip between ranks 0 and 1: rank 0 sends @send and receives into @recv, rank 1
  // receives into @recv and sends @send back.
  HcclResult PingPong(uint8_t *send, uint8_t *recv, size_t count, HcclDataType type) {
    const uint32_t peer = 1 - rank_;
    if (rank_ == 0) {
      const HcclResult rc = HcclSend(send, count, type, peer, comm_, nullptr);
      return rc != HCCL_SUCCESS ? rc : HcclRecv(recv, count, type, peer, comm_, nullptr);
    }
    const HcclResult rc = HcclRecv(recv, count, type, peer, comm_, nullptr);
    return rc != HCCL_SUCCESS ? rc : HcclSend(send, count, type, peer, comm_, nullptr);
  }

  // One checked barrier (sequence number @seed): the ranks forked here that had not entered it
  // when this rank left it, summed over the ranks.
  bool CheckBarrier(uint64_t seed, int64_t *wrong) {
    shared_->arrived[local_].store(seed);
    if (!Check(HcclBarrier(comm_, nullptr), "the checked call")) {
      return false;
    }
    int64_t mine = 0;
    for (uint32_t r = 0; r < o_.nranks(); ++r) {
      mine += shared_->arrived[r].load() < seed;
    }
    double total = static_cast<double>(mine);
    if (!AllReduce(&total, HCCL_REDUCE_SUM)) {
      return false;
    }
    *wrong = static_cast<int64_t>(total);
    return true;
  }

  // One checked ping-pong: each rank sends its pattern for @seed and compares what it receives
  // with its peer's (the receive buffer is first filled with the complement of the expected
  // bytes, so an element never written is wrong); the wrong elements of both ranks.
  bool CheckPingPong(const TypeName &type, size_t bytes, bool in_place, uint64_t seed,
                     int64_t *wrong) {
    const size_t es = type.size, count = bytes / es;
    const uint32_t peer = 1 - rank_;
    std::vector<uint8_t> mine(count * es), want(count * es);
    hzc::test::FillInput(type.type, es, rank_, seed, mine.data(), count);
    hzc::test::FillInput(type.type, es, peer, seed, want.data(), count);
    uint8_t *recv = buf_.recv, *send = in_place ? buf_.recv : buf_.send;
    int64_t bad = 0;
    auto send_mine = [&] {
      std::memcpy(send, mine.data(), mine.size());
      return Check(HcclSend(send, count, type.type, peer, comm_, nullptr), "the checked HcclSend");
    };
    auto receive = [&] {
      for (size_t i = 0; i < want.size(); ++i) {
        recv[i] = static_cast<uint8_t>(~want[i]);
      }
      if (!Check(HcclRecv(recv, count, type.type, peer, comm_, nullptr), "the checked HcclRecv")) {
        return false;
      }
      for (size_t i = 0; i < want.size(); i += es) {
        bad += std::memcmp(recv + i, want.data() + i, es) != 0;
      }
      return true;
    };
    if (!(rank_ == 0 ? send_mine() && receive() : receive() && send_mine())) {
      return false;
    }
    double total = static_cast<double>(bad);
    if (!AllReduce(&total, HCCL_REDUCE_SUM)) {
      return false;
    }
    *wrong = static_cast<int64_t>(total);
    return true;
  }

  // Reduce @value over the ranks with @op (through HcclAllReduce).
  bool AllReduce(double *value, HcclReduceOp op) {
    std::memcpy(small_, value, sizeof(*value));
    if (!Check(HcclAllReduce(small_, small_ + 64, 1, HCCL_DATA_TYPE_FP64, op, comm_, nullptr),
               "HcclAllReduce of the times")) {
      return false;
    }
    std::memcpy(value, small_ + 64, sizeof(*value));
    return true;
  }

  // Fill this rank's input for seed @seed and return the number of wrong elements of the
  // result of one call.
  bool CheckOnce(const TypeName &type, const OpName &op, size_t bytes, bool in_place, uint64_t seed,
                 int64_t *wrong) {
    if (o_.coll == Coll::kBarrier) {
      return CheckBarrier(seed, wrong);
    }
    if (o_.coll == Coll::kSendRecv) {
      return CheckPingPong(type, bytes, in_place, seed, wrong);
    }
    const Counts c = CountsFor(o_.coll, bytes, type.size, n_);
    const size_t es = type.size;
    std::vector<std::vector<uint8_t>> in(n_, std::vector<uint8_t>(c.send * es));
    for (uint32_t p = 0; p < n_; ++p) {
      hzc::test::FillInput(type.type, es, p, seed, in[p].data(), c.send);
    }
    uint8_t *send = in_place ? buf_.recv + c.send_inplace * es * rank_ : buf_.send;
    uint8_t *recv = in_place ? buf_.recv + c.recv_inplace * es * rank_ : buf_.recv;
    uint8_t *result = recv;
    if (o_.coll == Coll::kBroadcast) {
      result = in_place ? recv : send;
      std::memset(result, 0, c.param * es);
      if (rank_ == o_.root) {
        std::memcpy(result, in[rank_].data(), c.param * es);
      }
    } else {
      std::memcpy(send, in[rank_].data(), c.send * es);
    }
    if (!Check(Call(type, op, bytes, in_place), "the checked call")) {
      return false;
    }
    std::vector<uint8_t> want(c.recv * es);
    std::vector<const void *> ptrs(n_);
    switch (o_.coll) {
      case Coll::kAllGather:
        for (uint32_t p = 0; p < n_; ++p) {
          std::memcpy(want.data() + p * c.param * es, in[p].data(), c.param * es);
        }
        break;
      case Coll::kBroadcast:
        std::memcpy(want.data(), in[o_.root].data(), c.param * es);
        break;
      case Coll::kReduceScatter:
      case Coll::kAllReduce:
        for (uint32_t p = 0; p < n_; ++p) {
          ptrs[p] = in[p].data() + (o_.coll == Coll::kReduceScatter ? rank_ * c.param * es : 0);
        }
        hzc::test::RefReduce(type.type, op.op, ptrs, want.data(), c.param);
        break;
      case Coll::kAlltoAll:  // block p from rank p's block for this rank
        for (uint32_t p = 0; p < n_; ++p) {
          std::memcpy(want.data() + p * c.param * es, in[p].data() + rank_ * c.param * es,
                      c.param * es);
        }
        break;
      case Coll::kMemcpy:
      case Coll::kBarrier:
      case Coll::kSendRecv:
        break;
    }
    int64_t mine = 0;
    for (size_t i = 0; i < want.size(); i += es) {
      mine += std::memcmp(result + i, want.data() + i, es) != 0;
    }
    double total = static_cast<double>(mine);
    if (!AllReduce(&total, HCCL_REDUCE_SUM)) {
      return false;
    }
    *wrong = static_cast<int64_t>(total);
    return true;
  }

  // One measurement (nccl-tests' BenchTime): time, bandwidth and the check of one layout.
  bool BenchTime(const TypeName &type, const OpName &op, size_t bytes, bool in_place) {
    if (!Check(Call(type, op, bytes, in_place), "the first call") ||
        !Check(HcclBarrier(comm_, nullptr), "HcclBarrier")) {
      return false;
    }
    const hzc_net_stats net0 = NetStats();
    const hzc_net_sends sends0 = NetSends();
    const hzc_net_receives receives0 = NetReceives();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      for (int a = 0; a < o_.agg_iters; ++a) {
        if (!Check(Call(type, op, bytes, in_place), "a timed call")) {
          return false;
        }
        if (o_.blocking && !Check(HcclBarrier(comm_, nullptr), "HcclBarrier")) {
          return false;
        }
      }
    }
    double us = UsSince(t0) / (o_.iters * o_.agg_iters);
    if (spans_) {
      // The busiest rank's bytes between servers per call (a server's first rank).
      const hzc_net_stats net1 = NetStats();
      const double calls = o_.iters * o_.agg_iters;
      double data = static_cast<double>(net1.data_sent - net0.data_sent) / calls;
      double control = static_cast<double>(net1.control_sent - net0.control_sent) / calls;
      double staged = static_cast<double>(NetSends().staged - sends0.staged) / calls;
      double landed = static_cast<double>(NetReceives().landed - receives0.landed) / calls;
      if (!AllReduce(&data, HCCL_REDUCE_MAX) || !AllReduce(&control, HCCL_REDUCE_MAX) ||
          !AllReduce(&staged, HCCL_REDUCE_MAX) || !AllReduce(&landed, HCCL_REDUCE_MAX)) {
        return false;
      }
      net_[in_place ? 1 : 0] = {data, control, staged, landed};
    }
    if (o_.coll == Coll::kSendRecv) {
      us /= 2;  // a call is a round trip; the one-way time is half of it
    }
    if (o_.average != 0 && !AllReduce(&us, o_.average == 1   ? HCCL_REDUCE_SUM
                                           : o_.average == 2 ? HCCL_REDUCE_MIN
                                                             : HCCL_REDUCE_MAX)) {
      return false;
    }
    if (o_.average == 1) {
      us /= n_;
    }
    const Counts c = CountsFor(o_.coll, bytes, type.size, n_);
    const double base_bytes =
        static_cast<double>((o_.coll == Coll::kAllGather || o_.coll == Coll::kReduceScatter ||
                                     o_.coll == Coll::kAlltoAll
                                 ? c.param * n_
                                 : c.param) *
                            type.size);
    const double algbw = us > 0 ? base_bytes / 1.0e3 / us : 0;
    const double busbw = algbw * BusFactor(o_.coll, n_);
    int64_t wrong = 0;
    for (int i = 0; i < o_.check; ++i) {
      if (!CheckOnce(type, op, bytes, in_place, ++seed_, &wrong)) {
        return false;
      }
      if (wrong != 0) {
        break;
      }
    }
    totals_.busbw_sum += busbw;
    ++totals_.measurements;
    totals_.errors += wrong != 0 ? 1 : 0;
    if (rank_ == 0) {
      if (o_.check > 0) {
        std::printf("  %7s  %6.2f  %6.2f  %5lld", TimeString(us).c_str(), algbw, busbw,
                    static_cast<long long>(wrong));
      } else {
        std::printf("  %7s  %6.2f  %6.2f  %5s", TimeString(us).c_str(), algbw, busbw, "N/A");
      }
    }
    return true;
  }

  // nccl-tests' TimeTest: warm up at the largest and the smallest size, then one row per size.
  bool TimeTest(const TypeName &type, const OpName &op) {
    for (size_t bytes : {o_.max_bytes, o_.min_bytes}) {
      for (int i = 0; i < o_.warmup; ++i) {
        if (!Check(Call(type, op, bytes, false), "a warm-up call")) {
          return false;
        }
      }
    }
    const bool rooted = o_.coll == Coll::kBroadcast;
    return ForEachSize(o_, [&](size_t bytes) {
      const Counts c = CountsFor(o_.coll, bytes, type.size, n_);
      if (rank_ == 0) {
        std::printf("%12zu  %12zu  %8s  %6s  %6d", std::max(c.send, c.recv) * type.size, c.param,
                    type.name, op.name, rooted ? static_cast<int>(o_.root) : -1);
      }
      const bool ok = BenchTime(type, op, bytes, false) && BenchTime(type, op, bytes, true);
      if (rank_ == 0) {
        std::printf("\n");
        if (ok && spans_) {
          std::printf(
              "# bytes between servers per call, the busiest rank: data %.0f / %.0f, control "
              "%.0f / %.0f, data copied before RDMA %.0f / %.0f, after RDMA %.0f / %.0f (out of "
              "place / in place)\n",
              net_[0].data, net_[1].data, net_[0].control, net_[1].control, net_[0].staged,
              net_[1].staged, net_[0].landed, net_[1].landed);
        }
        std::fflush(stdout);
      }
      return ok;
    });
  }

  // This rank's bytes between servers so far (zeros on one server).
  hzc_net_stats NetStats() const {
    hzc_net_stats s{};
    if (spans_ && hzc_comm_net_stats(comm_, &s) != HCCL_SUCCESS) {
      s = {};
    }
    return s;
  }

  // How this rank's data left (over RDMA: copied first, or straight from activated memory).
  hzc_net_sends NetSends() const {
    hzc_net_sends s{};
    if (spans_ && hzc_comm_net_sends(comm_, &s) != HCCL_SUCCESS) {
      s = {};
    }
    return s;
  }

  // How this rank's data arrived (over RDMA: copied or reduced from the landing slots, or
  // written in place).
  hzc_net_receives NetReceives() const {
    hzc_net_receives r{};
    if (spans_ && hzc_comm_net_receives(comm_, &r) != HCCL_SUCCESS) {
      r = {};
    }
    return r;
  }

  struct NetPerCall {
    double data = 0, control = 0, staged = 0, landed = 0;
  };

  const Options &o_;
  const bool spans_ = o_.servers != 0 || !o_.rank_table.empty();  // the comm spans servers
  NetPerCall net_[2];                                             // out of place, in place
  HcclComm comm_, memory_;
  const uint32_t rank_, n_, local_;
  Shared *shared_;
  Buffers buf_;
  uint8_t *small_ = nullptr;
  uint64_t seed_ = 0;
  Totals totals_;
};

bool Succeeded(HcclResult rc, uint32_t rank, const char *call) {
  if (rc != HCCL_SUCCESS) {
    std::fprintf(stderr, "hzc-perf: rank %u: %s: %s (%d)\n", rank, call, HcclGetErrorString(rc),
                 static_cast<int>(rc));
  }
  return rc == HCCL_SUCCESS;
}

// Across servers (--rank-table): the table's size, checked against -r, and in zerocopy mode the
// communicator of this server's ranks (first_rank .. first_rank + nranks - 1) that the buffers
// are activated through. False after printing why.
bool JoinServer(const Options &o, Comms *c) {
  if (!Succeeded(HcclGetRankSize(c->comm, &c->n), c->rank, "HcclGetRankSize")) {
    return false;
  }
  if (o.root >= c->n) {
    std::fprintf(stderr, "hzc-perf: rank %u: -r,--root: %u: not below the %u ranks of %s\n",
                 c->rank, o.root, c->n, o.rank_table.c_str());
    return false;
  }
  if (!o.zero_copy()) {
    return true;
  }
  std::vector<uint32_t> ranks(o.nranks());
  for (uint32_t j = 0; j < o.nranks(); ++j) {
    ranks[j] = o.first_rank + j;
  }
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  const std::string call = "HcclCreateSubCommConfig of ranks " + std::to_string(o.first_rank) +
                           ".." + std::to_string(o.first_rank + o.nranks() - 1) +
                           " (this server's; they must be ranks of one server of the table)";
  return Succeeded(
      HcclCreateSubCommConfig(&c->comm, o.nranks(), ranks.data(), 1, c->local, &config, &c->memory),
      c->rank, call.c_str());
}

// Rank @local of the ranks forked here: rank @local of the root info's communicator, or rank
// first_rank + @local of the rank table's.
int RunRank(const Options &o, const HcclRootInfo &root, uint32_t local, Shared *shared) {
  shared->pid[local].store(getpid());
  if (o.servers != 0) {
    const uint64_t server = uint64_t{local} * o.servers / o.nranks();
    setenv("HZC_HOST_ID", ("hzc-perf-server-" + std::to_string(server)).c_str(), 1);
    setenv("HZC_NET", "socket", 1);
  }
  const auto init_start = std::chrono::steady_clock::now();
  Comms c;
  c.local = local;
  c.rank = o.first_rank + local;
  c.n = o.nranks();
  const bool joined =
      o.rank_table.empty()
          ? Succeeded(HcclCommInitRootInfo(o.nranks(), &root, local, &c.comm), c.rank,
                      "HcclCommInitRootInfo")
          : Succeeded(HcclCommInitClusterInfo(o.rank_table.c_str(), c.rank, &c.comm), c.rank,
                      "HcclCommInitClusterInfo");
  if (!joined) {
    return 1;
  }
  shared->init_us[local].store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - init_start)
                                .count()));
  shared->fds_init[local].store(OpenDescriptors());
  c.memory = c.comm;
  int status = 1;
  if (o.rank_table.empty() || JoinServer(o, &c)) {
    Rank r(o, c, shared);
    status = r.Run();
  }
  shared->fds_end[local].store(OpenDescriptors());
  if (c.memory != c.comm && c.memory != nullptr) {
    HcclCommDestroy(c.memory);
  }
  HcclCommDestroy(c.comm);
  return status;
}

// The -d and -o values: one name or "all".
bool Resolve(const std::string &type, const std::string &op, Options *o, std::string *error) {
  std::string t = type;
  for (const TypeAlias &a : kTypeAliases) {
    t = t == a.alias ? a.name : t;
  }
  for (const TypeName &n : kTypes) {
    if (t == "all" || t == n.name) {
      o->types.push_back(n);
    }
  }
  if (o->types.empty()) {
    *error = "-d,--datatype: " + type + ": not a type (int8 uint8 int32 uint32 int64 uint64 " +
             "half float double bfloat16 int16 uint16, or all)";
    return false;
  }
  for (const OpName &n : kOps) {
    if (op == "all" || op == n.name) {
      o->ops.push_back(n);
    }
  }
  if (o->ops.empty()) {
    *error = "-o,--op: " + op + ": not a reduction (sum prod max min, or all)";
    return false;
  }
  return true;
}

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) {
        out.push_back(c);
      }
    }
  }
  return out;
}

// --servers: the ranks' init times and open descriptors (min, median, max).
void PrintScale(const Options &o, const Shared &shared) {
  auto summary = [&](auto get) {
    std::vector<uint64_t> v;
    for (uint32_t r = 0; r < o.nranks(); ++r) {
      v.push_back(get(r));
    }
    std::sort(v.begin(), v.end());
    return std::array<uint64_t, 3>{v.front(), v[v.size() / 2], v.back()};
  };
  const auto init = summary([&](uint32_t r) { return shared.init_us[r].load(); });
  const auto at_init = summary([&](uint32_t r) { return uint64_t{shared.fds_init[r].load()}; });
  const auto at_end = summary([&](uint32_t r) { return uint64_t{shared.fds_end[r].load()}; });
  std::printf(
      "# %u ranks over %u simulated servers: init %.2f / %.2f / %.2f s (min / median / "
      "max); descriptors open per rank after init %lu / %lu / %lu, after the calls "
      "%lu / %lu / %lu\n",
      o.nranks(), o.servers, static_cast<double>(init[0]) / 1e6, static_cast<double>(init[1]) / 1e6,
      static_cast<double>(init[2]) / 1e6, static_cast<unsigned long>(at_init[0]),
      static_cast<unsigned long>(at_init[1]), static_cast<unsigned long>(at_init[2]),
      static_cast<unsigned long>(at_end[0]), static_cast<unsigned long>(at_end[1]),
      static_cast<unsigned long>(at_end[2]));
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  std::string coll = "all_reduce", b = "32M", e = "32M", i = "1M", type = "float", op = "sum";
  CLI::App app{"Bandwidth of the hzc collectives, measured and printed as nccl-tests does.",
               "hzc-perf"};
  app.footer(
      "COLL is all_reduce (default), all_gather, broadcast, reduce_scatter or alltoall "
      "(nccl-tests' all_reduce_perf and so on), memcpy (one process copying: the bound), barrier "
      "(HcclBarrier: one row of size 0; -b, -e, -i, -f ignored) or sendrecv (a HcclSend/HcclRecv "
      "ping-pong between ranks 0 and 1, exactly 2 ranks; time is half the round trip). The ranks "
      "are -t x -g processes on this server: the whole communicator, or with --rank-table this "
      "server's ranks of the table's communicator (every server runs hzc-perf with the same "
      "options and its own --first-rank; only the table's rank 0 prints; busbw factors count all "
      "the table's ranks). Sizes take K, M and G suffixes. -p, -y: accepted for "
      "nccl-tests' command lines; hzc calls are synchronous and ranks always start in parallel.\n"
      "Exit status: 0; 1 if a call failed, a check found wrong elements or the average bus "
      "bandwidth is below NCCL_TESTS_MIN_BW x 0.9; 2 on a usage error.");
  hzc::tool::AddStandardFlags(app);
  app.add_option("COLL", coll, "the collective")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "broadcast", "reduce_scatter", "alltoall",
                             "memcpy", "barrier", "sendrecv"}));
  app.add_option("-t,--nthreads", o.nthreads,
                 "ranks per process in nccl-tests; here a factor of "
                 "the number of ranks (processes)")
      ->check(CLI::Range(1u, kMaxRanks));
  app.add_option("-g,--ngpus", o.ngpus, "devices per thread in nccl-tests; here ranks (processes)")
      ->check(CLI::Range(1u, kMaxRanks));
  app.add_option("-b,--minbytes", b, "smallest size (default 32M)")->check(SizeValidator());
  app.add_option("-e,--maxbytes", e, "largest size (default 32M)")->check(SizeValidator());
  app.add_option("-i,--stepbytes", i, "size increment when -f is 1 (default 1M)")
      ->check(SizeValidator());
  app.add_option("-f,--stepfactor", o.step_factor, "size multiplier (default 1: add -i)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("-n,--iters", o.iters, "timed iterations (default 20)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-m,--agg_iters", o.agg_iters, "calls per timed iteration (default 1)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", o.warmup,
                 "warm-up calls at the largest and smallest size "
                 "(default 5)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-p,--parallel_init", o.parallel_init, "0/1 (no effect)")->check(CLI::Range(0, 1));
  app.add_option("-c,--check", o.check,
                 "checked calls per measurement (default 1; 0: #wrong is "
                 "N/A)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-o,--op", op, "sum, prod, max, min or all (default sum)");
  app.add_option("-d,--datatype", type,
                 "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 int16 uint16 "
                 "or all; HCCL's names (fp32 ...) too (default float)");
  app.add_option("-r,--root", o.root, "root of broadcast (default 0)");
  app.add_option("-z,--blocking", o.blocking, "0/1: a barrier after every call")
      ->check(CLI::Range(0, 1));
  app.add_option("-y,--stream_null", o.stream_null, "0/1 (no effect: calls use a NULL stream)")
      ->check(CLI::Range(0, 1));
  app.add_option("-T,--timeout", o.timeout,
                 "seconds a call may wait for the others (sets "
                 "HCCL_EXEC_TIMEOUT; 0: its default)")
      ->check(CLI::Range(0, 86400));
  app.add_option("-C,--report_cputime", o.cputime,
                 "0/1: label the time column cputime (calls "
                 "are synchronous: the same time)")
      ->check(CLI::Range(0, 1));
  app.add_option("-a,--average", o.average,
                 "time reported: 0 rank 0, 1 mean, 2 min, 3 max of "
                 "the ranks (default 1)")
      ->check(CLI::Range(0, 3));
  app.add_option("--bind", o.bind,
                 "0/1: bind rank r to the r-th allowed CPU, as mpirun --bind-to core (default 0; "
                 "ignored when the ranks outnumber the CPUs)")
      ->check(CLI::Range(0, 1));
  app.add_option("--mode", o.mode,
                 "zerocopy: buffers in activated memory (default); staging: "
                 "plain memory")
      ->check(CLI::IsMember({"zerocopy", "staging"}));
  auto *table = app.add_option("--rank-table", o.rank_table,
                               "rank table (JSON) of a communicator that spans servers: the ranks "
                               "forked here are its ranks R .. R+g-1 (HcclCommInitClusterInfo); "
                               "zerocopy buffers are activated through a communicator of these "
                               "ranks, which must be one server's")
                    ->check(CLI::ExistingFile);
  app.add_option("--servers", o.servers,
                 "S: simulate S servers on this host (rank r runs as server r*S/ranks: its own "
                 "HZC_HOST_ID; TCP between them, HZC_NET=socket); with --mode staging; prints "
                 "the ranks' init times and open descriptors at the end")
      ->check(CLI::Range(2u, kMaxRanks));
  app.add_option("--first-rank", o.first_rank,
                 "R: the table's rank of the first rank forked here (default 0)")
      ->check(CLI::Range(0u, 1u << 20))
      ->needs(table);
  if (auto status = hzc::tool::Parse(app, argc, argv)) {
    return *status;
  }
  auto usage = [](const std::string &message) {
    std::fprintf(stderr, "hzc-perf: %s (see hzc-perf --help)\n", message.c_str());
    return hzc::tool::kUsageError;
  };
  for (const CollName &c : kColls) {
    o.coll = coll == c.name ? c.coll : o.coll;
  }
  o.min_bytes = *ParseSize(b);
  o.max_bytes = *ParseSize(e);
  o.step_bytes = *ParseSize(i);
  if (o.coll == Coll::kBarrier) {  // one row of size 0
    o.min_bytes = o.max_bytes = o.step_bytes = 0;
    o.step_factor = 1;
  }
  std::string error;
  if (!Resolve(type, op, &o, &error)) {
    return usage(error);
  }
  if (o.min_bytes > o.max_bytes) {
    return usage("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(o.min_bytes) +
                 " > " + std::to_string(o.max_bytes));
  }
  if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes) {
    return usage("-i,--stepbytes: 0 with -f 1 never reaches -e");
  }
  if (o.nranks() > kMaxRanks) {
    return usage("-t x -g: " + std::to_string(o.nranks()) + " ranks; at most " +
                 std::to_string(kMaxRanks));
  }
  if (o.servers != 0 &&
      (o.servers < 2 || o.servers > o.nranks() || !o.rank_table.empty() || o.zero_copy())) {
    return usage("--servers " + std::to_string(o.servers) +
                 ": 2 .. the rank count, with root info (no --rank-table) and --mode staging");
  }
  if (o.rank_table.empty() && o.root >= o.nranks()) {
    return usage("-r,--root: " + std::to_string(o.root) + ": not below the " +
                 std::to_string(o.nranks()) + " ranks");
  }
  if (o.coll == Coll::kSendRecv && o.rank_table.empty() && o.nranks() != 2) {
    return usage("sendrecv is a ping-pong between ranks 0 and 1: -t x -g must be 2 ranks, not " +
                 std::to_string(o.nranks()));
  }
  if (o.coll == Coll::kMemcpy && !o.rank_table.empty()) {
    return usage("--rank-table: memcpy is one process on this server, not a communicator");
  }
  setlinebuf(stdout);
  if (o.coll == Coll::kMemcpy) {
    o.nthreads = o.ngpus = 1;
    return MemcpyRows(o);
  }
  if (o.timeout > 0) {
    setenv("HCCL_EXEC_TIMEOUT", std::to_string(o.timeout).c_str(), 1);
  }
  auto *shared = static_cast<Shared *>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    std::perror("hzc-perf: mmap");
    return 1;
  }
  // With --servers the root info is made after the fork (Shared::root).
  auto make_root = [&] {
    if (o.rank_table.empty() && HcclGetRootInfo(&shared->root) != HCCL_SUCCESS) {
      std::fprintf(stderr, "hzc-perf: HcclGetRootInfo failed\n");
      shared->root_ready.store(-1);
      return false;
    }
    shared->root_ready.store(1);
    return true;
  };
  if (o.servers == 0 && !make_root()) {
    return 1;
  }
  std::fflush(stdout);
  std::vector<pid_t> pids;
  const std::vector<int> cpus = o.bind != 0 ? AllowedCpus() : std::vector<int>{};
  for (uint32_t r = 0; r < o.nranks(); ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (o.nranks() <= cpus.size()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[r], &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
          std::perror("hzc-perf: sched_setaffinity");
        }
      }
      while (shared->root_ready.load() == 0) {
        usleep(1000);
      }
      _exit(shared->root_ready.load() == 1 ? RunRank(o, shared->root, r, shared) : 1);
    }
    if (pid < 0) {
      std::perror("hzc-perf: fork");
      break;
    }
    pids.push_back(pid);
  }
  if (o.servers != 0) {
    (void)make_root();  // on failure the children see it and exit
  }
  int status = pids.size() == o.nranks() ? 0 : 1;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      status = 1;
    }
  }
  if (o.servers != 0 && status == 0) {
    PrintScale(o, *shared);
  }
  return status;
}
