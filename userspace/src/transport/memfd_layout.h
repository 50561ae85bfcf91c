// SPDX-License-Identifier: Apache-2.0
// The layout of a memfd transport directory (transport/memfd_directory.h): the memory that a
// process publishes to its peers. Every field an importer reads from it is a peer's word and
// is checked before use (CheckListing, and the descriptors when they are taken).
//
// Only its owner writes a directory: it is sealed F_SEAL_FUTURE_WRITE once the owner has
// mapped it, so peers map it read-only whatever descriptor of it they hold. What peers write
// lives in their own directories (their acknowledgements) or in the owner's mailbox (which
// peers are attached, and where their directories are); the futex words of a directory are
// only waited on by its owner and woken by its peers, never written by them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hzc::transport::memfd {

constexpr uint32_t kMagic = 0x687a6364;         // "hzcd"
constexpr uint32_t kMailboxMagic = 0x687a636d;  // "hzcm"
constexpr size_t kSlots = 64;
constexpr size_t kRanges = 256;
constexpr size_t kActs = 1024;

// A peer attached to the owner's directory (in the owner's mailbox, written by the peer).
struct DirSlot {
  uint32_t pid;    // 0: free
  int32_t dir_fd;  // the peer's own directory (its acknowledgements), in the peer's process
};
// An acknowledgement (in the acknowledging process's own directory).
struct DirAck {
  uint32_t owner;  // pid of the directory acknowledged; 0: free
  uint32_t reserved;
  uint64_t acked;  // generation of it this process holds nothing older than
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
  uint32_t doorbell;    // futex: owners wake this process's watcher
  uint32_t ack;         // futex: peers wake this process when they have acknowledged
  uint32_t nacts;
  uint32_t owner;  // pid of the process that publishes it
  // The owner's death word (base/death_word.h): peers see its death without a system call.
  uint32_t alive;
  int32_t mailbox_fd;   // the owner's descriptor of its Mailbox
  DirAck acks[kSlots];  // this process's acknowledgements of the directories it has attached
  DirRange ranges[kRanges];
  DirAct acts[kActs];
};
constexpr size_t kDirBytes = (sizeof(Directory) + 4095) / 4096 * 4096;

// What peers write to an owner: which of them are attached.
struct Mailbox {
  uint32_t magic;
  uint32_t owner;  // pid of the owner of the directory
  DirSlot slots[kSlots];
};
constexpr size_t kMailboxBytes = (sizeof(Mailbox) + 4095) / 4096 * 4096;

}  // namespace hzc::transport::memfd
