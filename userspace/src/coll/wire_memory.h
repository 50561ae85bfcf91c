// SPDX-License-Identifier: Apache-2.0
// Activated memory on the wires between servers (transport/wire.h): a message that lies in
// activated memory (core/range_registry.h) is marked with its activation, so that the RDMA wire
// sends it from there (its registration made once, kept while the memory stays activated)
// instead of copying it into its outbox; a deactivation drops the wire's registrations of that
// memory before HcclCommDeactivateCommMemory returns.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/wire.h"

namespace hzc::coll {

// Set each message's region to the activation that holds it (none where no activation does).
void MarkRegions(std::vector<transport::Wire::Out> *out);

// Tells @wire of every deactivation while it lives (transport::Wire::Withdraw).
class WireWatch {
 public:
  explicit WireWatch(transport::Wire *wire);
  ~WireWatch();
  WireWatch(const WireWatch &) = delete;
  WireWatch &operator=(const WireWatch &) = delete;

 private:
  uint64_t id_;
};

}  // namespace hzc::coll
