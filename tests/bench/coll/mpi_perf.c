/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hzc-mpi-perf: the MPI baseline of hzc-perf (Open MPI or MPICH, whichever it is built with),
 * printing the same table (fp32, sum).
 *
 *   mpirun -np 4 hzc-mpi-perf -t allreduce -b 1048576 -e 268435456 -f 2 -n 10 -w 2
 *
 * size is the larger buffer's bytes (nccl-tests; for allgather and reducescatter count x ranks x 4,
 * -b's multiple of 4 x ranks below it), time the mean per call (the mean of the ranks' times, as
 * hzc-perf reports by default), busbw uses nccl-tests' factors; errors counts wrong elements of one
 * checked call (all ranks).
 *
 * -t barrier: MPI_Barrier, one row of size 0 (-b, -e, -f ignored), algbw and busbw 0.
 * -t sendrecv: an MPI_Send/MPI_Recv ping-pong between ranks 0 and 1 (exactly 2 ranks): rank 0
 * sends and receives, rank 1 receives and sends back; time is half the round trip (one-way, as
 * OSU's osu_latency), busbw = algbw. The checked call: each rank sends rank + 1, expects the
 * peer's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One round trip between ranks 0 and 1: rank 0 sends and receives, rank 1 receives and sends. */
static void ping_pong(float *send, float *recv, int count, int rank) {
  if (rank == 0) {
    MPI_Send(send, count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(recv, count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(recv, count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(send, count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
  }
}

int main(int argc, char **argv) {
  const char *coll = "allreduce";
  size_t minb = 1 << 20, maxb = 64 << 20;
  double factor = 2;
  int iters = 10, warmup = 2, opt, rank, n;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  while ((opt = getopt(argc, argv, "t:b:e:f:n:w:")) != -1) {
    switch (opt) {
      case 't':
        coll = optarg;
        break;
      case 'b':
        minb = strtoull(optarg, NULL, 0);
        break;
      case 'e':
        maxb = strtoull(optarg, NULL, 0);
        break;
      case 'f':
        factor = atof(optarg);
        break;
      case 'n':
        iters = atoi(optarg);
        break;
      case 'w':
        warmup = atoi(optarg);
        break;
      default:
        if (rank == 0)
          fprintf(stderr,
                  "usage: hzc-mpi-perf [-t allreduce|allgather|reducescatter|broadcast|barrier|"
                  "sendrecv] [-b min] [-e max] [-f factor] [-n iters] [-w warmup]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int gather = !strcmp(coll, "allgather"), scatter = !strcmp(coll, "reducescatter");
  int bcast = !strcmp(coll, "broadcast"), barrier = !strcmp(coll, "barrier");
  int pingpong = !strcmp(coll, "sendrecv"), peer = 1 - rank;
  double busf = !strcmp(coll, "allreduce") ? 2.0 * (n - 1) / n
                : (bcast || pingpong)      ? 1.0
                                           : (double)(n - 1) / n;
  float *send, *recv;

  if (pingpong && n != 2) {
    if (rank == 0)
      fprintf(stderr,
              "hzc-mpi-perf: sendrecv is a ping-pong between ranks 0 and 1: it needs "
              "exactly 2 ranks, not %d\n",
              n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (barrier)
    minb = maxb = 0; /* one row */
  send = malloc(maxb + 4);
  recv = malloc(maxb + 4);
  if (!send || !recv || factor <= 1 || iters < 1)
    MPI_Abort(MPI_COMM_WORLD, 3);
  memset(send, 0, maxb);
  memset(recv, 0, maxb);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(version, &len);
    printf("# mpi: %s, %d ranks, %.*s\n", coll, n, (int)strcspn(version, "\n"), version);
    printf("# %10s %12s %8s %6s %12s %8s %8s %8s\n", "size", "count", "type", "redop", "time(us)",
           "algbw", "busbw", "errors");
  }
  for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)(bytes * factor)) {
    int count = (int)((gather || scatter) ? bytes / 4 / n : bytes / 4);
    long errors = 0, all = 0;
    double t0 = MPI_Wtime(), us;

    for (int it = -warmup - 1; it < iters; ++it) {
      if (it == -1) {
        /* the checked call: rank r sends r + 1 everywhere */
        for (size_t i = 0; i < bytes / 4; ++i) {
          send[i] = (float)(rank + 1);
          recv[i] = 0;
        }
      }
      if (barrier)
        MPI_Barrier(MPI_COMM_WORLD);
      else if (pingpong)
        ping_pong(send, recv, count, rank);
      else if (gather)
        MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
      else if (scatter)
        MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (bcast)
        MPI_Bcast(send, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (it == -1) {
        for (int i = 0; i < (gather ? count * n : count); ++i) {
          float want = bcast      ? 1.0f
                       : pingpong ? (float)(peer + 1)
                       : gather   ? (float)(i / count + 1)
                                  : (float)n * (n + 1) / 2;
          errors += (bcast ? send[i] : recv[i]) != want;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
      }
    }
    us = (MPI_Wtime() - t0) * 1e6 / iters;
    if (pingpong)
      us /= 2; /* one call is a round trip: the one-way time is half of it */
    /* the mean of the ranks' times, as hzc-perf (and nccl-tests) report by default: a root that
       returns before its peers received (Broadcast) does not make the call look free */
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    us /= n;
    MPI_Reduce(&errors, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      size_t moved = (gather || scatter) ? (size_t)count * n * 4 : bytes;
      double algbw = (double)moved / us / 1e3;

      printf("%12zu %12d %8s %6s %12.2f %8.3f %8.3f %8ld\n", moved, count, "fp32",
             (gather || bcast || barrier || pingpong) ? "none" : "sum", us, algbw, algbw * busf,
             all);
      fflush(stdout);
    }
    if (barrier)
      break;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
