// SPDX-License-Identifier: Apache-2.0
// Fuzzer: the ranges and activations of a peer's memfd directory as an importer checks them
// before it maps anything (transport::CheckListing). The first byte splits the input into
// ranges and activations (raw DirRange and DirAct records, as a peer could write them); a
// listing that passes must be one the importer can map without leaving a range's window.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/memfd_directory.h"
#include "transport/memfd_layout.h"

namespace {

template <typename T>
std::vector<T> Records(const uint8_t *&data, size_t &size, size_t count) {
  std::vector<T> out;
  for (; count > 0 && size >= sizeof(T); --count, data += sizeof(T), size -= sizeof(T)) {
    T record;
    std::memcpy(&record, data, sizeof(T));
    out.push_back(record);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using hzc::transport::memfd::DirAct;
  using hzc::transport::memfd::DirRange;
  if (size < 1) {
    return 0;
  }
  const size_t nranges = data[0] % (hzc::transport::memfd::kRanges + 1);
  ++data, --size;
  std::vector<DirRange> ranges = Records<DirRange>(data, size, nranges);
  std::vector<DirAct> acts = Records<DirAct>(data, size, hzc::transport::memfd::kActs);
  if (!hzc::transport::CheckListing(1, ranges, acts).ok()) {
    return 0;
  }
  // Accepted: every activation lies inside one range and is mappable at its offset.
  for (const DirAct &a : acts) {
    const auto in = std::find_if(ranges.begin(), ranges.end(), [&](const DirRange &r) {
      return a.va >= r.base && a.size <= r.size && a.va - r.base <= r.size - a.size;
    });
    if (in == ranges.end() || a.size == 0 || a.size > INT64_MAX ||
        a.offset > static_cast<uint64_t>(INT64_MAX) - a.size) {
      std::abort();
    }
  }
  return 0;
}
