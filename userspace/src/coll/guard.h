// SPDX-License-Identifier: Apache-2.0
// Guarded access to peer mappings: the kernel revokes a peer mapping when the peer deactivates
// or unsets its memory (or dies), and a later access raises SIGBUS (SIGSEGV once the library
// unmapped the window). A guarded region turns such a fault into an error instead of a crash.
//
// The library installs one SIGBUS and one SIGSEGV handler on first use, chained to whatever
// handler was there: a fault is taken over only when the faulting thread is inside a guarded
// region and the address lies in one of the spans that region declared; anything else goes to
// the previous handler (or the default action). The handler runs with SA_NODEFER and leaves by
// siglongjmp without restoring a signal mask, so entering a region makes no syscall.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace hzc::coll {

struct Span {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  uint32_t rank = 0;  // whose memory it is
};

struct Fault {
  bool faulted = false;
  uintptr_t address = 0;
  uint32_t rank = 0;
};

// Run @fn; if it faults inside one of @spans, stop it and report the fault.
// Not reentrant within one thread. @fn must not hold locks or own resources that a jump out of
// it would leak (plain copies and reductions).
Fault RunGuarded(const std::vector<Span> &spans, const std::function<void()> &fn);

}  // namespace hzc::coll
