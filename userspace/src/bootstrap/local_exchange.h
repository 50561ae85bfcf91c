// SPDX-License-Identifier: Apache-2.0
// Hand-off of one descriptor from rank 0 to the other ranks of a group on this host.
//
// Rank 0 listens on an abstract Unix socket (SOCK_SEQPACKET) named after the group; every
// other rank connects, retrying until rank 0 listens, and sends its rank number; rank 0
// answers each rank once with the descriptor (SCM_RIGHTS) and a 64-bit word. Both ends check
// that the other runs as the same effective uid. The socket is gone with its last descriptor:
// nothing to clean up, and nobody keeps a connection after the hand-off.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc::bootstrap {

struct LocalExchange {
  std::string name;  // socket name: the same in every rank, unique per group and hand-off
  uint32_t rank = 0;
  uint32_t nranks = 1;
  std::chrono::steady_clock::time_point deadline;
  // What a late rank failed to do, for the timeout messages ("rank(s) 1,3 of 4 did not
  // <arrival>", "rank 0 did not <arrival>"), e.g. "make the first collective call within
  // HCCL_CONNECT_TIMEOUT". The socket name stays out of the messages (it is logged at DEBUG).
  std::string arrival = "come in time";
};

struct HandedDescriptor {
  UniqueFd fd;
  uint64_t word = 0;
};

// Rank 0: give @fd and @word to each other rank of @x once; returns when every rank has them.
// HCCL_E_TIMEOUT naming the ranks that did not come by the deadline; HCCL_E_PARA when @x.rank
// is not below @x.nranks.
Status GiveDescriptor(const LocalExchange &x, int fd, uint64_t word);

// Any other rank: receive the descriptor and the word from rank 0. HCCL_E_TIMEOUT when rank 0
// does not listen or answer by the deadline, HCCL_E_REMOTE when it closes without them.
Expected<HandedDescriptor> TakeDescriptor(const LocalExchange &x);

}  // namespace hzc::bootstrap
