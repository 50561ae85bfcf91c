// SPDX-License-Identifier: Apache-2.0
#include "coll/guard.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <mutex>

namespace hzc::coll {

namespace {

struct Region {
  sigjmp_buf env;
  const std::vector<Span> *spans = nullptr;
  Fault fault;
};

thread_local Region *t_region = nullptr;

struct sigaction g_prev_bus;
struct sigaction g_prev_segv;
std::once_flag g_install;

void Chain(int sig, siginfo_t *info, void *ctx) {
  const struct sigaction &prev = sig == SIGBUS ? g_prev_bus : g_prev_segv;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, ctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  } else {
    // Default action: reset it and return, so the faulting instruction faults again and the
    // kernel kills the process with the right signal (a core dump shows the real fault).
    signal(sig, SIG_DFL);
  }
}

void Handler(int sig, siginfo_t *info, void *ctx) {
  Region *region = t_region;
  if (region != nullptr && info != nullptr) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (const Span &s : *region->spans) {
      if (addr >= s.begin && addr < s.end) {
        region->fault = Fault{.faulted = true, .address = addr, .rank = s.rank};
        siglongjmp(region->env, 1);
      }
    }
  }
  Chain(sig, info, ctx);
}

void Install() {
  struct sigaction sa {};
  sa.sa_sigaction = Handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_prev_bus);
  sigaction(SIGSEGV, &sa, &g_prev_segv);
}

}  // namespace

Fault RunGuarded(const std::vector<Span> &spans, const std::function<void()> &fn) {
  std::call_once(g_install, Install);
  Region region;
  region.spans = &spans;
  // No signal mask is saved or restored (SA_NODEFER keeps the signal unblocked): no syscall.
  if (sigsetjmp(region.env, 0) == 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_region = &region;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    fn();
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_region = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return region.fault;
}

}  // namespace hzc::coll
