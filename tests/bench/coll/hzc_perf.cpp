// SPDX-License-Identifier: Apache-2.0
// hzc-perf: bandwidth of the hzc collectives, in the style of nccl-tests.
//
//   hzc-perf -g 4 -t allreduce -b 1M -e 256M -f 2 -d fp32 -o sum -n 10 -w 2 -c 1 --mode zerocopy
//
// Forks -g ranks on this server (one communicator); rank 0 prints one row per size:
// size (bytes), count (elements), type, redop, time (us, mean per call on rank 0),
// algbw and busbw (GB/s, nccl-tests' factors: AllReduce 2(n-1)/n, AllGather and ReduceScatter
// (n-1)/n, Broadcast 1), errors (wrong elements of the checked call on any rank; -c 1).
// --mode zerocopy puts the buffers in activated memory, staging in plain memory.
// --memcpy prints the same rows for a single-process memcpy of each size (the bound).
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../../unit/coll/reference.h"

namespace {

const std::map<std::string, HcclDataType> kTypes = {
    {"int8", HCCL_DATA_TYPE_INT8},     {"int16", HCCL_DATA_TYPE_INT16},
    {"int32", HCCL_DATA_TYPE_INT32},   {"int64", HCCL_DATA_TYPE_INT64},
    {"uint8", HCCL_DATA_TYPE_UINT8},   {"uint16", HCCL_DATA_TYPE_UINT16},
    {"uint32", HCCL_DATA_TYPE_UINT32}, {"uint64", HCCL_DATA_TYPE_UINT64},
    {"fp16", HCCL_DATA_TYPE_FP16},     {"bfp16", HCCL_DATA_TYPE_BFP16},
    {"fp32", HCCL_DATA_TYPE_FP32},     {"fp64", HCCL_DATA_TYPE_FP64}};
const std::map<std::string, HcclReduceOp> kOps = {{"sum", HCCL_REDUCE_SUM},
                                                  {"prod", HCCL_REDUCE_PROD},
                                                  {"max", HCCL_REDUCE_MAX},
                                                  {"min", HCCL_REDUCE_MIN}};

size_t TypeSize(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
      return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16:
      return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32:
      return 4;
    default:
      return 8;
  }
}

struct Options {
  uint32_t nranks = 2;
  std::string coll = "allreduce";
  size_t min_bytes = 1 << 20, max_bytes = 64 << 20;
  double factor = 2;
  std::string type = "fp32", op = "sum", mode = "zerocopy";
  int iters = 10, warmup = 2, check = 1;
  bool memcpy_only = false;
};

size_t ParseSize(const std::string &s) {
  size_t end = 0;
  double v = std::stod(s, &end);
  const char unit = end < s.size() ? static_cast<char>(std::toupper(s[end])) : 0;
  v *= unit == 'K' ? 1024.0 : unit == 'M' ? 1048576.0 : unit == 'G' ? 1073741824.0 : 1.0;
  return static_cast<size_t>(v);
}

double BusFactor(const std::string &coll, uint32_t n) {
  if (coll == "allreduce") {
    return 2.0 * (n - 1) / n;
  }
  if (coll == "allgather" || coll == "reducescatter") {
    return static_cast<double>(n - 1) / n;
  }
  return 1.0;
}

void Row(size_t bytes, size_t count, const std::string &type, const std::string &op, double us,
         double factor, long errors) {
  const double algbw = static_cast<double>(bytes) / us / 1e3;
  std::printf("%12zu %12zu %8s %6s %12.1f %8.3f %8.3f %8ld\n", bytes, count, type.c_str(),
              op.c_str(), us, algbw, algbw * factor, errors);
  std::fflush(stdout);
}

void Header(const Options &o, const char *what) {
  if (o.memcpy_only) {
    std::printf("# %s: one process, the bound of one copy per byte\n", what);
  } else {
    std::printf("# %s: %s, %u ranks, mode %s\n", what, o.coll.c_str(), o.nranks, o.mode.c_str());
  }
  std::printf("# %10s %12s %8s %6s %12s %8s %8s %8s\n", "size", "count", "type", "redop",
              "time(us)", "algbw", "busbw", "errors");
}

int MemcpyRows(const Options &o) {
  Header(o, "memcpy");
  std::vector<uint8_t> a(o.max_bytes, 1), b(o.max_bytes, 2);
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;
       bytes = static_cast<size_t>(static_cast<double>(bytes) * o.factor)) {
    for (int i = 0; i < o.warmup; ++i) {
      std::memcpy(b.data(), a.data(), bytes);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) {
      std::memcpy(b.data(), a.data(), bytes);
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        o.iters;
    Row(bytes, bytes, "int8", "none", us, 1.0, 0);
  }
  return 0;
}

// Buffers of one rank: activated memory or plain memory.
struct Buffers {
  uint8_t *base = nullptr;
  size_t size = 0;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  HcclComm comm = nullptr;

  bool Init(HcclComm c, size_t bytes, bool zero_copy) {
    comm = c;
    if (!zero_copy) {
      size = bytes;
      void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      base = static_cast<uint8_t *>(p == MAP_FAILED ? nullptr : p);
      return base != nullptr;
    }
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
    base = static_cast<uint8_t *>(va);
    return ok;
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

int Rank(const Options &o, const HcclRootInfo &root, uint32_t rank) {
  HcclComm comm = nullptr;
  if (HcclCommInitRootInfo(o.nranks, &root, rank, &comm) != HCCL_SUCCESS) {
    return 10;
  }
  const uint32_t n = o.nranks;
  const HcclDataType type = kTypes.at(o.type);
  const HcclReduceOp op = kOps.at(o.op);
  const size_t es = TypeSize(type);
  const bool gather = o.coll == "allgather", scatter = o.coll == "reducescatter";
  // size = bytes of the larger buffer (nccl-tests): the output of AllGather, the input of
  // ReduceScatter, the buffer of AllReduce and Broadcast.
  int rc = 0;
  {
    Buffers buf;
    if (!buf.Init(comm, 2 * o.max_bytes + 4096, o.mode == "zerocopy")) {
      return 11;
    }
    uint8_t *send = buf.base, *recv = buf.base + o.max_bytes;
    std::memset(buf.base, 0, 2 * o.max_bytes);
    if (rank == 0) {
      Header(o, "hzc");
    }
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes && rc == 0;
         bytes = static_cast<size_t>(static_cast<double>(bytes) * o.factor)) {
      const size_t count = (gather || scatter) ? bytes / es / n : bytes / es;
      auto call = [&]() {
        if (o.coll == "allreduce") {
          return HcclAllReduce(send, recv, count, type, op, comm, nullptr);
        }
        if (gather) {
          return HcclAllGather(send, recv, count, type, comm, nullptr);
        }
        if (scatter) {
          return HcclReduceScatter(send, recv, count, type, op, comm, nullptr);
        }
        return HcclBroadcast(send, count, type, 0, comm, nullptr);
      };
      for (int i = 0; i < o.warmup && rc == 0; ++i) {
        rc = call();
      }
      rc = rc ? rc : HcclBarrier(comm, nullptr);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters && rc == 0; ++i) {
        rc = call();
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          o.iters;
      long errors = 0;
      if (o.check && rc == 0) {
        const size_t in_elems = scatter ? count * n : count;
        std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(in_elems * es));
        for (uint32_t p = 0; p < n; ++p) {
          hzc::test::FillInput(type, es, p, bytes, in[p].data(), in_elems);
        }
        std::memcpy(send, in[rank].data(), in_elems * es);
        if (o.coll == "broadcast" && rank == 0) {
          std::memcpy(send, in[0].data(), count * es);
        }
        rc = call();
        std::vector<uint8_t> want(gather ? count * n * es : count * es);
        std::vector<const void *> ptrs(n);
        for (uint32_t p = 0; p < n; ++p) {
          ptrs[p] = in[p].data() + (scatter ? rank * count * es : 0);
          if (gather) {
            std::memcpy(want.data() + p * count * es, in[p].data(), count * es);
          }
        }
        if (o.coll == "broadcast") {
          std::memcpy(want.data(), in[0].data(), count * es);
        } else if (!gather) {
          hzc::test::RefReduce(type, op, ptrs, want.data(), count);
        }
        const uint8_t *got = o.coll == "broadcast" ? send : recv;
        for (size_t i = 0; i < want.size(); i += es) {
          errors += std::memcmp(got + i, want.data() + i, es) != 0;
        }
      }
      // Rank 0 prints; the errors of the other ranks go to their exit status.
      if (rank == 0 && rc == 0) {
        Row(bytes, count, o.type, (gather || o.coll == "broadcast") ? "none" : o.op, us,
            BusFactor(o.coll, n), errors);
      }
      if (errors != 0 && rc == 0) {
        rc = 20;
      }
    }
  }
  if (rc != 0) {
    std::fprintf(stderr, "hzc-perf: rank %u: failed (%d)\n", rank, rc);
  }
  HcclCommDestroy(comm);
  return rc;
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  std::string b = "1M", e = "64M";
  CLI::App app{"hzc-perf: bandwidth of the hzc collectives (nccl-tests style)"};
  app.add_option("-g,--nranks", o.nranks, "ranks (processes) on this server")
      ->check(CLI::Range(1, 64));
  app.add_option("-t,--coll", o.coll, "collective")
      ->check(CLI::IsMember({"allreduce", "allgather", "reducescatter", "broadcast"}));
  app.add_option("-b,--minbytes", b, "smallest size (K, M, G suffixes)");
  app.add_option("-e,--maxbytes", e, "largest size");
  app.add_option("-f,--stepfactor", o.factor, "size multiplier")->check(CLI::Range(1.01, 1e6));
  app.add_option("-d,--datatype", o.type, "data type")
      ->check(CLI::IsMember({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                             "uint64", "fp16", "bfp16", "fp32", "fp64"}));
  app.add_option("-o,--op", o.op, "reduction")->check(CLI::IsMember({"sum", "prod", "max", "min"}));
  app.add_option("-n,--iters", o.iters, "timed iterations")->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations")->check(CLI::Range(0, 1000));
  app.add_option("-c,--check", o.check, "check the result of one call (0/1)");
  app.add_option("--mode", o.mode, "buffers")->check(CLI::IsMember({"zerocopy", "staging"}));
  app.add_flag("--memcpy", o.memcpy_only, "print memcpy bandwidth rows instead");
  CLI11_PARSE(app, argc, argv);
  o.min_bytes = ParseSize(b);
  o.max_bytes = ParseSize(e);
  if (o.min_bytes == 0 || o.max_bytes < o.min_bytes) {
    std::fprintf(stderr, "hzc-perf: need 0 < -b <= -e\n");
    return 2;
  }
  if (o.memcpy_only) {
    return MemcpyRows(o);
  }
  HcclRootInfo root;
  if (HcclGetRootInfo(&root) != HCCL_SUCCESS) {
    return 3;
  }
  std::vector<pid_t> pids;
  for (uint32_t r = 0; r < o.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      _exit(Rank(o, root, r));
    }
    pids.push_back(pid);
  }
  int status = 0;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      status = 1;
    }
  }
  return status;
}
