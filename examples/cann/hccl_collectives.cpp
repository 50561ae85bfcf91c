// SPDX-License-Identifier: Apache-2.0
// An HCCL program written against the CANN API: one process per device, started by mpirun.
// Rank 0 makes the root info and MPI broadcasts it; every rank selects its device by local
// rank, makes a stream and two events for timing, moves data with aclrtMalloc/aclrtMemcpy,
// runs every collective and point-to-point call with a check of every element, then the
// zero-copy flow (reserve, physical memory, map, set the range, activate, collectives,
// tear down). Exit status 0 when every check passed on every rank.
//
//   mpirun -np 4 ./hccl_collectives [count]
#include <acl/acl.h>
#include <acl/acl_prof.h>
#include <hccl/hccl.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

int g_rank = 0;

#define ACLCHECK(cmd)                                                                        \
  do {                                                                                       \
    aclError e_ = (cmd);                                                                     \
    if (e_ != ACL_SUCCESS) {                                                                 \
      const char *m_ = aclGetRecentErrMsg();                                                 \
      std::fprintf(stderr, "rank %d: %s failed: %d (%s)\n", g_rank, #cmd, e_, m_ ? m_ : ""); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                        \
  } while (0)

#define HCCLCHECK(cmd)                                                        \
  do {                                                                        \
    HcclResult r_ = (cmd);                                                    \
    if (r_ != HCCL_SUCCESS) {                                                 \
      std::fprintf(stderr, "rank %d: %s failed: %d (%s)\n", g_rank, #cmd, r_, \
                   HcclGetErrorString(r_));                                   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                           \
    }                                                                         \
  } while (0)

struct Context {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  HcclComm comm = nullptr;
  aclrtStream stream = nullptr;
  aclrtEvent start = nullptr;
  aclrtEvent stop = nullptr;
  int failures = 0;
};

// Element i of rank r's input: small integers, exact in float and in every sum below.
float Value(int r, uint64_t i) {
  return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997));
}

void *DeviceAlloc(size_t bytes) {
  void *p = nullptr;
  ACLCHECK(aclrtMalloc(&p, bytes == 0 ? 1 : bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  return p;
}

template <typename T>
void *ToDevice(const std::vector<T> &host) {
  const size_t bytes = host.size() * sizeof(T);
  void *dev = DeviceAlloc(bytes);
  if (bytes != 0) {
    ACLCHECK(aclrtMemcpy(dev, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  }
  return dev;
}

template <typename T>
std::vector<T> FromDevice(const void *dev, size_t n) {
  std::vector<T> host(n);
  if (n != 0) {
    ACLCHECK(
        aclrtMemcpy(host.data(), n * sizeof(T), dev, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST));
  }
  return host;
}

// Run @op on the stream between the two events; wait for it; report and count the check.
void Run(Context &c, const char *name, const std::function<void()> &op,
         const std::function<bool()> &check) {
  ACLCHECK(aclrtRecordEvent(c.start, c.stream));
  op();
  ACLCHECK(aclrtRecordEvent(c.stop, c.stream));
  ACLCHECK(aclrtSynchronizeStream(c.stream));
  float ms = 0;
  ACLCHECK(aclrtEventElapsedTime(&ms, c.start, c.stop));
  HcclResult async = HCCL_SUCCESS;
  HCCLCHECK(HcclGetCommAsyncError(c.comm, &async));
  const bool ok = async == HCCL_SUCCESS && check();
  c.failures += ok ? 0 : 1;
  std::printf("rank %d: %-16s %s %8.3f ms\n", c.rank, name, ok ? "ok  " : "FAIL", ms);
}

template <typename T>
bool Same(const std::vector<T> &got, const std::vector<T> &want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      std::fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", g_rank, i,
                   static_cast<double>(got[i]), static_cast<double>(want[i]));
      return false;
    }
  }
  return true;
}

std::vector<float> Input(int r, uint64_t n, uint64_t first = 0) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    v[i] = Value(r, first + i);
  }
  return v;
}

void AllReduce(Context &c, uint64_t n) {
  void *in = ToDevice(Input(c.rank, n));
  void *out = DeviceAlloc(n * sizeof(float));
  Run(
      c, "AllReduce",
      [&] {
        HCCLCHECK(
            HcclAllReduce(in, out, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c.comm, c.stream));
      },
      [&] {
        std::vector<float> want(n, 0);
        for (int r = 0; r < c.size; ++r) {
          for (uint64_t i = 0; i < n; ++i) {
            want[i] += Value(r, i);
          }
        }
        return Same(FromDevice<float>(out, n), want);
      });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void AllGather(Context &c, uint64_t n) {
  void *in = ToDevice(Input(c.rank, n));
  void *out = DeviceAlloc(n * c.size * sizeof(float));
  Run(
      c, "AllGather",
      [&] { HCCLCHECK(HcclAllGather(in, out, n, HCCL_DATA_TYPE_FP32, c.comm, c.stream)); },
      [&] {
        std::vector<float> want;
        for (int r = 0; r < c.size; ++r) {
          const auto part = Input(r, n);
          want.insert(want.end(), part.begin(), part.end());
        }
        return Same(FromDevice<float>(out, n * c.size), want);
      });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void Broadcast(Context &c, uint64_t n) {
  const int root = c.size - 1;
  void *buf = ToDevice(c.rank == root ? Input(root, n) : std::vector<float>(n, -1));
  Run(
      c, "Broadcast",
      [&] { HCCLCHECK(HcclBroadcast(buf, n, HCCL_DATA_TYPE_FP32, root, c.comm, c.stream)); },
      [&] { return Same(FromDevice<float>(buf, n), Input(root, n)); });
  ACLCHECK(aclrtFree(buf));
}

void ReduceScatter(Context &c, uint64_t n) {
  void *in = ToDevice(Input(c.rank, n * c.size));
  void *out = DeviceAlloc(n * sizeof(float));
  Run(
      c, "ReduceScatter",
      [&] {
        HCCLCHECK(
            HcclReduceScatter(in, out, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c.comm, c.stream));
      },
      [&] {
        std::vector<float> want(n, 0);
        for (int r = 0; r < c.size; ++r) {
          const auto part = Input(r, n, c.rank * n);
          for (uint64_t i = 0; i < n; ++i) {
            want[i] += part[i];
          }
        }
        return Same(FromDevice<float>(out, n), want);
      });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void Reduce(Context &c, uint64_t n) {
  void *in = ToDevice(Input(c.rank, n));
  void *out = DeviceAlloc(n * sizeof(float));
  Run(
      c, "Reduce",
      [&] {
        HCCLCHECK(
            HcclReduce(in, out, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, 0, c.comm, c.stream));
      },
      [&] { return c.rank != 0 || Same(FromDevice<float>(out, n), Input(c.size - 1, n)); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void Scatter(Context &c, uint64_t n) {
  void *in = ToDevice(c.rank == 0 ? Input(0, n * c.size) : std::vector<float>(1));
  void *out = DeviceAlloc(n * sizeof(float));
  Run(
      c, "Scatter",
      [&] { HCCLCHECK(HcclScatter(in, out, n, HCCL_DATA_TYPE_FP32, 0, c.comm, c.stream)); },
      [&] { return Same(FromDevice<float>(out, n), Input(0, n, c.rank * n)); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

// Element i of what rank s sends to rank d in the all-to-all calls.
int32_t Word(int s, int d, uint64_t i) {
  return s * 1000000 + d * 10000 + static_cast<int32_t>(i % 10000);
}

void AlltoAll(Context &c, uint64_t n) {
  std::vector<int32_t> send(n * c.size), want(n * c.size);
  for (int p = 0; p < c.size; ++p) {
    for (uint64_t i = 0; i < n; ++i) {
      send[p * n + i] = Word(c.rank, p, i);
      want[p * n + i] = Word(p, c.rank, i);
    }
  }
  void *in = ToDevice(send);
  void *out = DeviceAlloc(send.size() * sizeof(int32_t));
  Run(
      c, "AlltoAll",
      [&] {
        HCCLCHECK(HcclAlltoAll(in, n, HCCL_DATA_TYPE_INT32, out, n, HCCL_DATA_TYPE_INT32, c.comm,
                               c.stream));
      },
      [&] { return Same(FromDevice<int32_t>(out, want.size()), want); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

// How many elements rank s sends rank d in AlltoAllV: different for every pair.
uint64_t Pair(int s, int d, uint64_t n) {
  return n / 2 + static_cast<uint64_t>((s * 3 + d) % 5);
}

void AlltoAllV(Context &c, uint64_t n) {
  std::vector<uint64_t> sc(c.size), sd(c.size), rc(c.size), rd(c.size);
  uint64_t stotal = 0, rtotal = 0;
  for (int p = 0; p < c.size; ++p) {
    sc[p] = Pair(c.rank, p, n), sd[p] = stotal, stotal += sc[p];
    rc[p] = Pair(p, c.rank, n), rd[p] = rtotal, rtotal += rc[p];
  }
  std::vector<int32_t> send(stotal), want(rtotal);
  for (int p = 0; p < c.size; ++p) {
    for (uint64_t i = 0; i < sc[p]; ++i) {
      send[sd[p] + i] = Word(c.rank, p, i);
    }
    for (uint64_t i = 0; i < rc[p]; ++i) {
      want[rd[p] + i] = Word(p, c.rank, i);
    }
  }
  void *in = ToDevice(send);
  void *out = DeviceAlloc(rtotal * sizeof(int32_t));
  Run(
      c, "AlltoAllV",
      [&] {
        HCCLCHECK(HcclAlltoAllV(in, sc.data(), sd.data(), HCCL_DATA_TYPE_INT32, out, rc.data(),
                                rd.data(), HCCL_DATA_TYPE_INT32, c.comm, c.stream));
      },
      [&] { return Same(FromDevice<int32_t>(out, rtotal), want); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void AlltoAllVC(Context &c, uint64_t n) {
  std::vector<uint64_t> matrix(c.size * c.size);
  for (int s = 0; s < c.size; ++s) {
    for (int d = 0; d < c.size; ++d) {
      matrix[s * c.size + d] = Pair(s, d, n);
    }
  }
  std::vector<int32_t> send, want;
  for (int p = 0; p < c.size; ++p) {
    for (uint64_t i = 0; i < Pair(c.rank, p, n); ++i) {
      send.push_back(Word(c.rank, p, i));
    }
    for (uint64_t i = 0; i < Pair(p, c.rank, n); ++i) {
      want.push_back(Word(p, c.rank, i));
    }
  }
  void *in = ToDevice(send);
  void *out = DeviceAlloc(want.size() * sizeof(int32_t));
  Run(
      c, "AlltoAllVC",
      [&] {
        HCCLCHECK(HcclAlltoAllVC(in, matrix.data(), HCCL_DATA_TYPE_INT32, out, HCCL_DATA_TYPE_INT32,
                                 c.comm, c.stream));
      },
      [&] { return Same(FromDevice<int32_t>(out, want.size()), want); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void AllGatherV(Context &c, uint64_t n) {
  std::vector<uint64_t> counts(c.size), displs(c.size);
  uint64_t total = 0;
  for (int p = 0; p < c.size; ++p) {
    counts[p] = n / 2 + p, displs[p] = total, total += counts[p];
  }
  void *in = ToDevice(Input(c.rank, counts[c.rank]));
  void *out = DeviceAlloc(total * sizeof(float));
  Run(
      c, "AllGatherV",
      [&] {
        HCCLCHECK(HcclAllGatherV(in, counts[c.rank], out, counts.data(), displs.data(),
                                 HCCL_DATA_TYPE_FP32, c.comm, c.stream));
      },
      [&] {
        std::vector<float> want;
        for (int p = 0; p < c.size; ++p) {
          const auto part = Input(p, counts[p]);
          want.insert(want.end(), part.begin(), part.end());
        }
        return Same(FromDevice<float>(out, total), want);
      });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void ReduceScatterV(Context &c, uint64_t n) {
  std::vector<uint64_t> counts(c.size), displs(c.size);
  uint64_t total = 0;
  for (int p = 0; p < c.size; ++p) {
    counts[p] = n / 2 + p, displs[p] = total, total += counts[p];
  }
  void *in = ToDevice(Input(c.rank, total));
  void *out = DeviceAlloc(counts[c.rank] * sizeof(float));
  Run(
      c, "ReduceScatterV",
      [&] {
        HCCLCHECK(HcclReduceScatterV(in, counts.data(), displs.data(), out, counts[c.rank],
                                     HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c.comm, c.stream));
      },
      [&] {
        std::vector<float> want(counts[c.rank], 0);
        for (int r = 0; r < c.size; ++r) {
          const auto part = Input(r, counts[c.rank], displs[c.rank]);
          for (uint64_t i = 0; i < want.size(); ++i) {
            want[i] += part[i];
          }
        }
        return Same(FromDevice<float>(out, want.size()), want);
      });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

// A ring: every rank sends to the next and receives from the one before, even ranks sending
// first so that the pairs match.
void SendRecv(Context &c, uint64_t n) {
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  void *in = ToDevice(Input(c.rank, n));
  void *out = DeviceAlloc(n * sizeof(float));
  Run(
      c, "Send/Recv",
      [&] {
        if (c.rank % 2 == 0) {
          HCCLCHECK(HcclSend(in, n, HCCL_DATA_TYPE_FP32, next, c.comm, c.stream));
          HCCLCHECK(HcclRecv(out, n, HCCL_DATA_TYPE_FP32, prev, c.comm, c.stream));
        } else {
          HCCLCHECK(HcclRecv(out, n, HCCL_DATA_TYPE_FP32, prev, c.comm, c.stream));
          HCCLCHECK(HcclSend(in, n, HCCL_DATA_TYPE_FP32, next, c.comm, c.stream));
        }
      },
      [&] { return Same(FromDevice<float>(out, n), Input(prev, n)); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

void BatchSendRecv(Context &c, uint64_t n) {
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  void *in = ToDevice(Input(c.rank, n));
  void *out = DeviceAlloc(n * sizeof(float));
  HcclSendRecvItem items[2] = {
      {HCCL_SEND, in, n, HCCL_DATA_TYPE_FP32, static_cast<uint32_t>(next)},
      {HCCL_RECV, out, n, HCCL_DATA_TYPE_FP32, static_cast<uint32_t>(prev)},
  };
  Run(
      c, "BatchSendRecv", [&] { HCCLCHECK(HcclBatchSendRecv(items, 2, c.comm, c.stream)); },
      [&] { return Same(FromDevice<float>(out, n), Input(prev, n)); });
  ACLCHECK(aclrtFree(in));
  ACLCHECK(aclrtFree(out));
}

// The zero-copy flow: the collectives read and write the ranks' own activated memory.
void ZeroCopy(Context &c, uint64_t n) {
  aclrtPhysicalMemProp prop = {};
  prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<uint32_t>(c.local_rank);
  size_t granularity = 0;
  ACLCHECK(
      aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity));
  const size_t need = n * sizeof(float) * (1 + 2 * c.size);
  const size_t size = (need + granularity - 1) / granularity * granularity;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  ACLCHECK(aclrtReserveMemAddress(&va, size, 0, nullptr, 0));
  ACLCHECK(aclrtMallocPhysical(&handle, size, &prop, 0));
  ACLCHECK(aclrtMapMem(va, size, 0, handle, 0));
  HCCLCHECK(HcclCommSetMemoryRange(c.comm, va, size, 0, 0));
  HCCLCHECK(HcclCommActivateCommMemory(c.comm, va, size, 0, handle, 0));

  float *in = static_cast<float *>(va);
  float *sum = in + n, *all = sum + n;
  const auto mine = Input(c.rank, n);
  ACLCHECK(aclrtMemcpy(in, n * sizeof(float), mine.data(), n * sizeof(float),
                       ACL_MEMCPY_HOST_TO_DEVICE));
  Run(
      c, "AllReduce (zc)",
      [&] {
        HCCLCHECK(
            HcclAllReduce(in, sum, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c.comm, c.stream));
      },
      [&] {
        std::vector<float> want(n, 0);
        for (int r = 0; r < c.size; ++r) {
          for (uint64_t i = 0; i < n; ++i) {
            want[i] += Value(r, i);
          }
        }
        return Same(FromDevice<float>(sum, n), want);
      });
  ACLCHECK(aclrtMemcpy(in, n * sizeof(float), mine.data(), n * sizeof(float),
                       ACL_MEMCPY_HOST_TO_DEVICE));
  Run(
      c, "AllGather (zc)",
      [&] { HCCLCHECK(HcclAllGather(in, all, n, HCCL_DATA_TYPE_FP32, c.comm, c.stream)); },
      [&] {
        std::vector<float> want;
        for (int r = 0; r < c.size; ++r) {
          const auto part = Input(r, n);
          want.insert(want.end(), part.begin(), part.end());
        }
        return Same(FromDevice<float>(all, n * c.size), want);
      });
  HCCLCHECK(HcclBarrier(c.comm, c.stream));
  ACLCHECK(aclrtSynchronizeStream(c.stream));
  HCCLCHECK(HcclCommDeactivateCommMemory(c.comm, va));
  HCCLCHECK(HcclCommUnsetMemoryRange(c.comm, va));
  ACLCHECK(aclrtUnmapMem(va));
  ACLCHECK(aclrtFreePhysical(handle));
  ACLCHECK(aclrtReleaseMemAddress(va));
}

int LocalRank() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  Context c;
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.size);
  g_rank = c.rank;
  c.local_rank = LocalRank();
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;

  ACLCHECK(aclInit(nullptr));
  uint32_t devices = 0;
  ACLCHECK(aclrtGetDeviceCount(&devices));
  ACLCHECK(aclrtSetDevice(c.local_rank));
  ACLCHECK(aclrtCreateStream(&c.stream));
  ACLCHECK(aclrtCreateEvent(&c.start));
  ACLCHECK(aclrtCreateEvent(&c.stop));
  if (c.rank == 0) {
    std::printf("%d ranks, %u devices (%s), %llu elements\n", c.size, devices, aclrtGetSocName(),
                static_cast<unsigned long long>(n));
  }

  // Profiling, as tools switch it on around their measurements.
  const std::string prof_dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  ACLCHECK(aclprofInit(prof_dir.c_str(), prof_dir.size()));
  uint32_t prof_devices[] = {static_cast<uint32_t>(c.local_rank)};
  aclprofConfig *prof = aclprofCreateConfig(prof_devices, 1, ACL_AICORE_NONE, nullptr,
                                            ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE);
  if (prof == nullptr) {
    std::fprintf(stderr, "rank %d: aclprofCreateConfig failed\n", c.rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ACLCHECK(aclprofStart(prof));

  HcclRootInfo root;
  if (c.rank == 0) {
    HCCLCHECK(HcclGetRootInfo(&root));
  }
  MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  config.hcclBufferSize = 4;
  std::strcpy(config.hcclCommName, "example");
  HCCLCHECK(HcclCommInitRootInfoConfig(c.size, &root, c.rank, &config, &c.comm));
  char name[COMM_NAME_MAX_LENGTH] = {};
  HCCLCHECK(HcclGetCommName(c.comm, name));
  c.failures += std::strcmp(name, "example") == 0 ? 0 : 1;

  for (auto test :
       {AllReduce, AllGather, Broadcast, ReduceScatter, Reduce, Scatter, AlltoAll, AlltoAllV,
        AlltoAllVC, AllGatherV, ReduceScatterV, SendRecv, BatchSendRecv, ZeroCopy}) {
    test(c, n);
  }
  Run(
      c, "Barrier", [&] { HCCLCHECK(HcclBarrier(c.comm, c.stream)); }, [] { return true; });

  ACLCHECK(aclprofStop(prof));
  ACLCHECK(aclprofDestroyConfig(prof));
  ACLCHECK(aclprofFinalize());
  HCCLCHECK(HcclCommDestroy(c.comm));
  ACLCHECK(aclrtDestroyEvent(c.start));
  ACLCHECK(aclrtDestroyEvent(c.stop));
  ACLCHECK(aclrtDestroyStream(c.stream));
  ACLCHECK(aclrtResetDevice(c.local_rank));
  ACLCHECK(aclFinalize());

  int failures = 0;
  MPI_Allreduce(&c.failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (c.rank == 0) {
    std::printf("%s: %d failed check(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
