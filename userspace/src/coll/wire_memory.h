// SPDX-License-Identifier: Apache-2.0
// Activated memory on the wires between servers (transport/wire.h): a message that lies in
// activated memory (core/range_registry.h) is marked with its activation, so that the RDMA wire
// sends it from there (its registration made once, kept while the memory stays activated)
// instead of copying it into its outbox, and one received into activated memory is written
// there by the sender's RDMA device instead of being copied from a landing slot; a deactivation
// drops the wire's registrations of that memory before HcclCommDeactivateCommMemory returns.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/wire.h"

namespace hzc::coll {

// Set each message's region to the activation that holds it (none where no activation does).
void MarkRegions(std::vector<transport::Wire::Out> *out);

// Where a transfer's messages only go: member p's @in[p] bytes to @into[p] (nullptr: to the
// sink), each with the activation that holds it; empty when @into is.
std::vector<transport::Wire::Place> Places(const std::vector<uint8_t *> &into,
                                           const std::vector<size_t> &in);

// Mark the messages (@out) and places (@places, of @in bytes each) that lie in @scratch, a
// region of the caller's own (coll/span.cpp's temporaries), and have no region yet.
void MarkScratch(const transport::Wire::Region &scratch, std::vector<transport::Wire::Out> *out,
                 std::vector<transport::Wire::Place> *places, const std::vector<size_t> &in);

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
