// SPDX-License-Identifier: Apache-2.0
// The layout of a memfd transport directory (transport/memfd_directory.h): the memory that a
// process publishes to its peers. Every field an importer reads from it is a peer's word and
// is checked before use (CheckListing, and the descriptors when they are taken).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hzc::transport::memfd {

constexpr uint32_t kMagic = 0x687a6364;  // "hzcd"
constexpr size_t kSlots = 64;
constexpr size_t kRanges = 256;
constexpr size_t kActs = 1024;

struct DirSlot {
  uint32_t pid;    // 0: free
  int32_t dir_fd;  // the peer's own directory (its doorbell), in the peer's process
  uint64_t acked;  // generation the peer holds nothing older than
};
struct DirRange {
  uint64_t base;
  uint64_t size;
};
struct DirAct {
  uint64_t va;
  uint64_t size;
  uint64_t cookie;
  uint64_t offset;
  int32_t fd;       // in the owner's process
  uint32_t serial;  // the owner's count of activations: a new one at the same place differs
};
struct Directory {
  uint32_t magic;
  uint32_t nranges;
  uint64_t generation;  // seqlock: odd while being written
  uint32_t doorbell;    // futex: owners ring this process's watcher
  uint32_t ack;         // futex: peers tell this process they acknowledged
  uint32_t nacts;
  uint32_t owner;  // pid of the process that publishes it
  // The owner's death word (base/death_word.h): peers see its death without a system call.
  uint32_t alive;
  uint32_t reserved;
  DirSlot slots[kSlots];
  DirRange ranges[kRanges];
  DirAct acts[kActs];
};
constexpr size_t kDirBytes = (sizeof(Directory) + 4095) / 4096 * 4096;

}  // namespace hzc::transport::memfd
