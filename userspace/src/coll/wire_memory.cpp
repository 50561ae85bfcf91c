// SPDX-License-Identifier: Apache-2.0
#include "coll/wire_memory.h"

#include "core/range_registry.h"

namespace hzc::coll {

void MarkRegions(std::vector<transport::Wire::Out> *out) {
  for (transport::Wire::Out &o : *out) {
    o.region = {};
    if (o.len == 0) {
      continue;
    }
    if (const auto held =
            RangeRegistry::Process().Holding(reinterpret_cast<uintptr_t>(o.data), o.len)) {
      o.region = {.base = held->va, .len = held->size, .serial = held->serial};
    }
  }
}

std::vector<transport::Wire::Place> Places(const std::vector<uint8_t *> &into,
                                           const std::vector<size_t> &in) {
  std::vector<transport::Wire::Place> places(into.size());
  for (size_t p = 0; p < into.size(); ++p) {
    places[p].dest = into[p];
    if (into[p] == nullptr || in[p] == 0) {
      continue;
    }
    if (const auto held =
            RangeRegistry::Process().Holding(reinterpret_cast<uintptr_t>(into[p]), in[p])) {
      places[p].region = {.base = held->va, .len = held->size, .serial = held->serial};
    }
  }
  return places;
}

void MarkScratch(const transport::Wire::Region &scratch, std::vector<transport::Wire::Out> *out,
                 std::vector<transport::Wire::Place> *places, const std::vector<size_t> &in) {
  if (scratch.base == 0) {
    return;
  }
  auto inside = [&](const uint8_t *p, size_t len) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return len != 0 && a >= scratch.base && a - scratch.base <= scratch.len &&
           len <= scratch.len - (a - scratch.base);
  };
  for (transport::Wire::Out &o : *out) {
    if (o.region.base == 0 && inside(o.data, o.len)) {
      o.region = scratch;
    }
  }
  for (size_t p = 0; p < places->size(); ++p) {
    transport::Wire::Place &pl = (*places)[p];
    if (pl.dest != nullptr && pl.region.base == 0 && inside(pl.dest, in[p])) {
      pl.region = scratch;
    }
  }
}

WireWatch::WireWatch(transport::Wire *wire)
    : id_(RangeRegistry::Process().Watch(
          [wire](uintptr_t va, size_t size) { wire->Withdraw(va, size); })) {}

WireWatch::~WireWatch() {
  RangeRegistry::Process().Unwatch(id_);
}

}  // namespace hzc::coll
