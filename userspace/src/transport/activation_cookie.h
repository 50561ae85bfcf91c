// SPDX-License-Identifier: Apache-2.0
// The cookie libhzc stores with each activation in hzc.ko (hzc_activate.cookie, returned to
// peers by LIST_ACTIVATIONS): how peers reach the activated memory over RDMA.
//
//   cookie = (tag << 32) | rkey      cookie 0: the memory has no RDMA registration
//
// The rkey is that of the memory region the activating rank's links registered; it is valid
// only in the protection domain of those links, i.e. for the queue pairs of one rank of one
// communicator. The tag names that rank and communicator: a nonzero 32-bit fold of the
// communicator's 128-bit domain id and the rank. A peer accepts the rkey only when the tag is
// the one of the rank it targets in its own communicator; anything else was registered
// through another communicator (or another rank of a process that holds several ranks) and
// would break the link with a remote access error.
#pragma once

#include <array>
#include <cstdint>

namespace hzc::transport {

class ActivationCookie {
 public:
  // The tag of rank @rank in the communicator whose kernel domain is @domain; never 0.
  static constexpr uint32_t Tag(const std::array<uint64_t, 2> &domain, uint32_t rank) {
    constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
    uint64_t x = Mix(domain[1] + kGolden);
    x = Mix(x ^ domain[0]);
    x = Mix(x + rank + kGolden);
    const auto tag = static_cast<uint32_t>(x ^ (x >> 32));
    return tag != 0 ? tag : 1;
  }

  // The cookie of memory registered with @rkey by the links of the rank with @tag.
  static constexpr uint64_t Encode(uint32_t tag, uint32_t rkey) {
    return (uint64_t{tag} << 32) | rkey;
  }

  enum class Match {
    kNone,   // cookie 0: no RDMA registration
    kOther,  // registered by another rank or communicator
    kOk,     // registered by the rank with the expected tag: *rkey is set
  };
  // What @cookie says to a peer that expects @tag.
  static constexpr Match Decode(uint64_t cookie, uint32_t tag, uint32_t *rkey) {
    if (cookie == 0) {
      return Match::kNone;
    }
    if (static_cast<uint32_t>(cookie >> 32) != tag) {
      return Match::kOther;
    }
    *rkey = static_cast<uint32_t>(cookie);
    return Match::kOk;
  }

 private:
  // splitmix64's finaliser: every input bit affects every output bit.
  static constexpr uint64_t Mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }
};

}  // namespace hzc::transport
