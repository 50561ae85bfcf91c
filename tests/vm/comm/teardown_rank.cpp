// SPDX-License-Identifier: Apache-2.0
// One rank of the teardown tests (run as a process by teardown_vm_test.cpp): HcclCommDestroy
// after calls every rank refused, and while calls of this process are running or queued.
//
// Usage: hzc-teardown-rank ROOT_INFO_HEX NRANKS RANK SCENARIO [ROUNDS]
//   The communicator from the root info (the "parent") carries each round's root info.
//   SCENARIO:
//     refuse-stream  ROUNDS rounds (default 200) of: rank 0 makes a root info and broadcasts
//                    it over the parent, every rank makes a communicator from it, a Barrier,
//                    then an AllReduce with a NULL sendBuf on a stream (HCCL_E_PTR, the
//                    refusal queued on the stream) and at once HcclCommDestroy, which must be
//                    HCCL_SUCCESS; then the stream must synchronize without error. At the end
//                    the process holds as many descriptors as after the first round.
//     refuse-null    the same with the AllReduce on the NULL stream
//     busy           rank 0 makes an AllReduce on the parent in a second thread, which waits
//                    for the others (they call 1.5 s later); HcclCommDestroy from the main
//                    thread meanwhile must wait until that call has returned (with the right
//                    sum) and then succeed; a third thread's calls that start after the destroy
//                    began must be HCCL_E_PARA
//     queued         rank 0 queues three AllReduces on a stream and destroys the parent at
//                    once (the others call 1.5 s later): the destroy must succeed after the
//                    three have run (their sums are in place when it returns)
//     deadpeer       after a Barrier rank 1 kills itself; every other rank queues an AllReduce
//                    on a stream and destroys the parent at once: HcclCommDestroy must succeed
//                    (the queued call fails on the dead peer), well within HCCL_EXEC_TIMEOUT
// Exit status: 0 success; 50-54 setup failures; 55 a refused call got another result; 56
// HcclCommDestroy failed (the line before says how often and with what); 57 the stream did
// not synchronize as it should; 58 descriptors leaked; 60 the call in progress failed; 61
// wrong sum; 62 the destroy returned before the call it had to wait for had its sum; 63 the
// destroy did not wait; 64 a call after the destroy began was not HCCL_E_PARA; 65 the destroy
// took too long.
#include <acl/acl.h>
#include <dirent.h>
#include <hccl/hccl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rank_args.h"

namespace {

using Clock = std::chrono::steady_clock;

uint32_t g_n = 0;
uint32_t g_rank = 0;
HcclComm g_parent = nullptr;
int g_failed_destroys = 0;  // refuse-*: rounds whose HcclCommDestroy failed

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

float ExpectedSum() {
  return static_cast<float>(g_n * (g_n + 1) / 2);
}

// This process's open descriptors.
int CountFds() {
  int n = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) {
      ++n;
    }
    closedir(d);
  }
  return n;
}

// The count once at most @before, allowing 2 s for threads that are closing theirs (the root
// info's server thread after the last rank joined); the last count.
int SettledFds(int before) {
  int now = CountFds();
  for (int i = 0; i < 20 && now > before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = CountFds();
  }
  return now;
}

// A fresh communicator of every rank: rank 0's root info, broadcast over the parent.
int NewComm(HcclComm *comm) {
  HcclRootInfo root{};
  if (g_rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS) {
    return 51;
  }
  if (HcclBroadcast(&root, sizeof(root), HCCL_DATA_TYPE_INT8, 0, g_parent, nullptr) !=
      HCCL_SUCCESS) {
    return 52;
  }
  if (HcclCommInitRootInfo(g_n, &root, g_rank, comm) != HCCL_SUCCESS) {
    return 53;
  }
  return HcclBarrier(*comm, nullptr) == HCCL_SUCCESS ? 0 : 54;  // the communicator's first call
}

// One round of refuse-stream (@stream) or refuse-null (@stream NULL); 0, an exit status, or -1
// when only the destroy failed (counted by the caller).
int RefuseRound(int round, aclrtStream stream) {
  HcclComm comm = nullptr;
  if (int rc = NewComm(&comm); rc != 0) {
    return rc;
  }
  float x = 0;
  const HcclResult refused =
      HcclAllReduce(nullptr, &x, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
  if (refused != HCCL_E_PTR) {
    std::fprintf(stderr, "rank %u round %d: the refused AllReduce returned %d\n", g_rank, round,
                 refused);
    return 55;
  }
  const HcclResult destroyed = HcclCommDestroy(comm);
  if (stream != nullptr && aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
    return 57;
  }
  if (destroyed != HCCL_SUCCESS) {
    if (++g_failed_destroys <= 3) {  // the first few; the count follows at the end
      std::fprintf(stderr, "rank %u round %d: HcclCommDestroy returned %d\n", g_rank, round,
                   destroyed);
    }
    return -1;
  }
  return 0;
}

int Refuse(int rounds, bool on_stream) {
  aclrtStream stream = nullptr;
  if (on_stream && aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 50;
  }
  int failed = 0, fds = 0;
  const auto start = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    const int rc = RefuseRound(round, stream);
    if (rc > 0) {
      return rc;
    }
    failed += rc < 0 ? 1 : 0;
    if (round == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      fds = CountFds();
    }
  }
  std::fprintf(stderr, "rank %u: %d rounds in %.1f s, HcclCommDestroy failed in %d\n", g_rank,
               rounds, SecondsSince(start), failed);
  if (stream != nullptr && aclrtDestroyStream(stream) != ACL_SUCCESS) {
    return 57;
  }
  if (failed > 0) {
    return 56;
  }
  if (const int now = SettledFds(fds); now > fds) {
    std::fprintf(stderr, "rank %u: %d descriptors after the first round, %d after the last\n",
                 g_rank, fds, now);
    return 58;
  }
  return 0;
}

// The other ranks of busy and queued: @calls AllReduces 1.5 s late, then destroy.
int LateCalls(int calls) {
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (int i = 0; i < calls; ++i) {
    float v = static_cast<float>(g_rank + 1);
    if (HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_parent, nullptr) !=
        HCCL_SUCCESS) {
      return 60;
    }
    if (v != ExpectedSum()) {
      return 61;
    }
  }
  return HcclCommDestroy(g_parent) == HCCL_SUCCESS ? 0 : 56;
}

// What the threads of Busy saw.
struct BusyResult {
  std::atomic<bool> entered{false};
  HcclResult call = HCCL_E_RESERVED;
  float sum = 0;
  Clock::time_point returned;
  HcclResult late = HCCL_E_RESERVED;  // stays so if the handle never refused a call
  std::atomic<bool> destroy_returned{false};
};

// busy on rank 0: destroy while the call of another thread runs; an exit status.
int Busy() {
  BusyResult r;
  std::thread caller([&r] {
    r.sum = static_cast<float>(g_rank + 1);
    r.entered = true;
    r.call =
        HcclAllReduce(&r.sum, &r.sum, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_parent, nullptr);
    r.returned = Clock::now();
  });
  while (!r.entered.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the call waits for the others
  std::thread late([&r] {
    uint32_t n = 0;
    while (HcclGetRankSize(g_parent, &n) == HCCL_SUCCESS) {  // until the destroy has begun
      if (r.destroy_returned.load()) {
        return;  // it never refused a call (a destroy that failed at once)
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    float v = 1;
    r.late = HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_parent, nullptr);
  });
  const auto start = Clock::now();
  const HcclResult destroyed = HcclCommDestroy(g_parent);
  const auto done = Clock::now();
  // The call's result, as of the destroy's return: in place, since the destroy waited for the
  // call (the call's end of its hold happens before the destroy's wait ends).
  const float sum_at_destroy = r.sum;
  r.destroy_returned = true;
  caller.join();
  late.join();
  std::fprintf(stderr,
               "rank %u: HcclCommDestroy %d after %.2f s; the call %d (sum %g) %.2f s into it; "
               "the call after it began %d\n",
               g_rank, destroyed, std::chrono::duration<double>(done - start).count(), r.call,
               static_cast<double>(r.sum),
               std::chrono::duration<double>(r.returned - start).count(), r.late);
  if (destroyed != HCCL_SUCCESS) {
    return 56;
  }
  if (r.call != HCCL_SUCCESS) {
    return 60;
  }
  if (r.sum != ExpectedSum()) {
    return 61;
  }
  if (sum_at_destroy != ExpectedSum()) {
    return 62;
  }
  if (done - start < std::chrono::milliseconds(500)) {
    return 63;
  }
  return r.late == HCCL_E_PARA ? 0 : 64;
}

// queued on rank 0: destroy at once after queueing three calls on a stream; an exit status.
int Queued() {
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 50;
  }
  std::vector<float> sums(3, static_cast<float>(g_rank + 1));
  for (float &v : sums) {
    if (HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_parent, stream) !=
        HCCL_SUCCESS) {
      return 60;
    }
  }
  const auto start = Clock::now();
  const HcclResult destroyed = HcclCommDestroy(g_parent);
  const double took = SecondsSince(start);
  std::fprintf(stderr, "rank %u: HcclCommDestroy %d after %.2f s, sums %g %g %g\n", g_rank,
               destroyed, took, static_cast<double>(sums[0]), static_cast<double>(sums[1]),
               static_cast<double>(sums[2]));
  if (destroyed != HCCL_SUCCESS) {
    (void)aclrtSynchronizeStream(stream);  // the calls still use the communicator: let them end
    return 56;
  }
  for (float v : sums) {
    if (v != ExpectedSum()) {
      return 61;  // a queued call had not run (or failed) when the destroy returned
    }
  }
  if (took < 0.5) {
    return 63;
  }
  return aclrtSynchronizeStream(stream) == ACL_SUCCESS && aclrtDestroyStream(stream) == ACL_SUCCESS
             ? 0
             : 57;
}

// deadpeer: rank 1 dies after a Barrier; the others destroy with a call queued; an exit status.
int DeadPeer() {
  if (HcclBarrier(g_parent, nullptr) != HCCL_SUCCESS) {
    return 54;
  }
  if (g_rank == 1) {
    kill(getpid(), SIGKILL);
  }
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) {
    return 50;
  }
  float v = 1;
  if (HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, g_parent, stream) !=
      HCCL_SUCCESS) {
    return 60;
  }
  const auto start = Clock::now();
  const HcclResult destroyed = HcclCommDestroy(g_parent);
  const double took = SecondsSince(start);
  const aclError synced = aclrtSynchronizeStream(stream);
  std::fprintf(stderr, "rank %u: HcclCommDestroy %d after %.2f s; the stream: %d\n", g_rank,
               destroyed, took, synced);
  if (destroyed != HCCL_SUCCESS) {
    return 56;
  }
  if (took > 20) {
    return 65;
  }
  // The queued call failed on the dead peer: its error is the stream's.
  return synced != ACL_SUCCESS && aclrtDestroyStream(stream) == ACL_SUCCESS ? 0 : 57;
}

int Run(const std::string &scenario, int rounds) {
  if (scenario == "refuse-stream" || scenario == "refuse-null") {
    const int rc = Refuse(rounds, scenario == "refuse-stream");
    return rc != 0 ? rc : (HcclCommDestroy(g_parent) == HCCL_SUCCESS ? 0 : 56);
  }
  if (scenario == "busy") {
    return g_rank == 0 ? Busy() : LateCalls(1);
  }
  if (scenario == "queued") {
    return g_rank == 0 ? Queued() : LateCalls(3);
  }
  if (scenario == "deadpeer") {
    return DeadPeer();
  }
  return 50;
}

}  // namespace

int main(int argc, char **argv) {
  hzc::test::RankArgs args;
  if (!hzc::test::ParseRankArgs(argc, argv, 0, 1, &args)) {
    return 50;
  }
  g_n = args.nranks;
  g_rank = args.rank;
  const int rounds = args.more.empty() ? 200 : std::atoi(args.more[0].c_str());
  if (HcclCommInitRootInfo(g_n, &args.root, g_rank, &g_parent) != HCCL_SUCCESS) {
    return 53;
  }
  return Run(args.scenario, rounds);
}
