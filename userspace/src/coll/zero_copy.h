// SPDX-License-Identifier: Apache-2.0
// The zero-copy path: every rank's buffers lie in activated memory, and each rank reads its
// peers' buffers through the communicator's peer mappings (transport/transport.h), one copy per
// byte, inside guarded regions (coll/guard.h) so revoked peer memory is an error, not a crash.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "coll/collectives.h"
#include "coll/control.h"
#include "coll/guard.h"

namespace hzc::coll {

class ZeroCopy {
 public:
  // Whether this rank's buffers of @call lie in activated memory (and the communicator has
  // peer mappings).
  static bool Eligible(Communicator &comm, const Call &call);

  ZeroCopy(Communicator &comm, ControlArea &area, const Call &call, uint64_t seq,
           std::chrono::steady_clock::time_point deadline)
      : comm_(comm), area_(area), c_(call), seq_(seq), deadline_(deadline) {}

  Status Run();

 private:
  // Local pointers to every rank's send and recv buffers (this rank's own for itself).
  Status MapPeers();
  Status Guarded(const std::function<void()> &fn);
  Status Step(const char *what) { return area_.Barrier(deadline_, what); }

  Communicator &comm_;
  ControlArea &area_;
  const Call &c_;
  const uint64_t seq_;
  const std::chrono::steady_clock::time_point deadline_;
  std::vector<const uint8_t *> send_;
  std::vector<uint8_t *> recv_;
  std::vector<Span> spans_;
};

}  // namespace hzc::coll
