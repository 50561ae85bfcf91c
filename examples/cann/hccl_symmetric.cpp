// SPDX-License-Identifier: Apache-2.0
// HCCL's symmetric memory, as a CANN program uses it: one process per device, started by mpirun.
// Every rank reserves virtual memory, maps physical memory into it and registers it as a
// symmetric window (no memory range, no activation), runs AllGather, ReduceScatter, AllReduce
// and AlltoAll on buffers in the window, writes into every peer's window through
// HcclSymWinGetPeerPointer, and deregisters. Exit status 0 when every check passed on every
// rank.
//
//   mpirun -np 4 ./hccl_symmetric [count]
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_sym_win.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int g_rank = 0;
uint64_t g_count = 0;  // elements per rank of each collective

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

// Element i of rank r's input: exact in float and in every sum below.
float Value(int r, uint64_t i) {
  return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997));
}

// Count the elements of @got that differ from @want (i) and print the first.
int Check(const char *what, const float *got, uint64_t n, float (*want)(int, int, uint64_t),
          int size) {
  int bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (got[i] != want(g_rank, size, i) && bad++ == 0) {
      std::fprintf(stderr, "rank %d: %s: element %llu is %g, want %g\n", g_rank, what,
                   static_cast<unsigned long long>(i), got[i], want(g_rank, size, i));
    }
  }
  std::printf("rank %d: %s on the window: %s\n", g_rank, what, bad == 0 ? "ok" : "FAILED");
  return bad == 0 ? 0 : 1;
}

float Sum(int, int size, uint64_t i) {
  float s = 0;
  for (int r = 0; r < size; ++r) {
    s += Value(r, i);
  }
  return s;
}

int LocalRank() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  return r;
}

// The collectives HCCL runs on windows, on @in and @out (g_count elements per rank) in the
// window.
int Collectives(HcclComm comm, aclrtStream stream, float *in, float *out, int size) {
  const uint64_t count = g_count;
  const uint64_t all = count * static_cast<uint64_t>(size);
  auto fill = [&] {
    for (uint64_t i = 0; i < all; ++i) {
      in[i] = Value(g_rank, i);
    }
  };
  int failures = 0;
  fill();
  HCCLCHECK(HcclAllGather(in, out, count, HCCL_DATA_TYPE_FP32, comm, stream));
  ACLCHECK(aclrtSynchronizeStream(stream));
  failures += Check(
      "AllGather", out, all,
      [](int, int, uint64_t i) { return Value(static_cast<int>(i / g_count), i % g_count); }, size);
  fill();
  HCCLCHECK(HcclAllReduce(in, out, all, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
  ACLCHECK(aclrtSynchronizeStream(stream));
  failures += Check("AllReduce", out, all, Sum, size);
  fill();
  HCCLCHECK(HcclReduceScatter(in, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
  ACLCHECK(aclrtSynchronizeStream(stream));
  failures += Check(
      "ReduceScatter", out, count,
      [](int rank, int n, uint64_t i) { return Sum(rank, n, rank * g_count + i); }, size);
  fill();
  HCCLCHECK(
      HcclAlltoAll(in, count, HCCL_DATA_TYPE_FP32, out, count, HCCL_DATA_TYPE_FP32, comm, stream));
  ACLCHECK(aclrtSynchronizeStream(stream));
  failures += Check(
      "AlltoAll", out, all,
      [](int rank, int, uint64_t i) {
        return Value(static_cast<int>(i / g_count), rank * g_count + i % g_count);
      },
      size);
  return failures;
}

// Every rank writes its mark into slot [its rank] of every peer's window through the peer's
// pointer, then checks the marks the peers wrote into its own.
int PeerPointers(HcclCommSymWindow win, size_t offset, int64_t *own, int size) {
  for (int p = 0; p < size; ++p) {
    void *at = nullptr;
    HCCLCHECK(HcclSymWinGetPeerPointer(win, offset, static_cast<uint32_t>(p), &at));
    static_cast<int64_t *>(at)[g_rank] = 1000 * g_rank + p;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int bad = 0;
  for (int w = 0; w < size; ++w) {
    bad += own[w] == 1000 * w + g_rank ? 0 : 1;
  }
  std::printf("rank %d: stores through HcclSymWinGetPeerPointer: %s\n", g_rank,
              bad == 0 ? "ok" : "FAILED");
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int local_rank = LocalRank();
  g_count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  ACLCHECK(aclInit(nullptr));
  ACLCHECK(aclrtSetDevice(local_rank));
  aclrtStream stream = nullptr;
  ACLCHECK(aclrtCreateStream(&stream));

  HcclRootInfo root;
  if (g_rank == 0) {
    HCCLCHECK(HcclGetRootInfo(&root));
  }
  MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  config.hcclSymWinMaxMemSizePerRank = 1;  // GB of windows per rank
  HcclComm comm = nullptr;
  HCCLCHECK(HcclCommInitRootInfoConfig(size, &root, g_rank, &config, &comm));

  // Reserve, allocate and map: the memory of the window.
  aclrtPhysicalMemProp prop = {};
  prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<uint32_t>(local_rank);
  size_t granularity = 0;
  ACLCHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                                            &granularity));
  const size_t bytes = g_count * sizeof(float) * 2 * static_cast<size_t>(size);  // in and out
  const size_t slots = static_cast<size_t>(size) * sizeof(int64_t);
  const size_t alloc = (bytes + slots + granularity - 1) / granularity * granularity;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  ACLCHECK(aclrtReserveMemAddress(&va, alloc, 0, nullptr, 1));
  ACLCHECK(aclrtMallocPhysical(&handle, alloc, &prop, 0));
  ACLCHECK(aclrtMapMem(va, alloc, 0, handle, 0));

  HcclCommSymWindow win = nullptr;
  HCCLCHECK(HcclCommSymWinRegister(comm, va, bytes + slots, &win, HCCL_WIN_COLL_SYMMETRIC));
  auto *in = static_cast<float *>(va);
  float *out = in + g_count * static_cast<uint64_t>(size);
  auto *own_slots = reinterpret_cast<int64_t *>(static_cast<char *>(va) + bytes);
  HcclCommSymWindow found = nullptr;
  size_t offset = 0;
  HCCLCHECK(HcclCommSymWinGet(comm, own_slots, slots, &found, &offset));
  int failures = found == win && offset == bytes ? 0 : 1;
  failures += Collectives(comm, stream, in, out, size);
  failures += PeerPointers(win, offset, own_slots, size);

  MPI_Barrier(MPI_COMM_WORLD);  // the peers' stores are done before the window goes
  HCCLCHECK(HcclCommSymWinDeregister(win));
  ACLCHECK(aclrtUnmapMem(va));
  ACLCHECK(aclrtFreePhysical(handle));
  ACLCHECK(aclrtReleaseMemAddress(va));
  HCCLCHECK(HcclCommDestroy(comm));
  ACLCHECK(aclrtDestroyStream(stream));
  ACLCHECK(aclrtResetDevice(local_rank));
  ACLCHECK(aclFinalize());

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf("%s: %d failed check(s)\n", total == 0 ? "PASS" : "FAIL", total);
  }
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
