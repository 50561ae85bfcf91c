// SPDX-License-Identifier: Apache-2.0
// The memfd transport's directory: how a process publishes its activations' memfds to its
// peers without /dev/hzc, and how withdrawals reach them (transport/memfd.h is the transport).
//
// Every activation is a physical allocation of aclrtMallocPhysical (a memfd, runtime/vmm.h)
// mapped whole at its address, so a peer that holds the same memfd sees the same pages. This
// transport gives peers those memfds and the offsets to map them at, and replaces what the
// kernel module does for the kernel transport (transport/kernel.h) with a protocol between
// the processes.
//
// How memfds and offsets reach peers. Each process publishes one directory: a small memfd (sizes
// sealed, and writable by its owner's mapping only: F_SEAL_FUTURE_WRITE) holding a seqlocked
// generation, its ranges, its activations (address, length, cookie, the owner's descriptor number
// of the memfd and the offset in it, a serial number) and its own acknowledgements of the
// directories it has attached; beside it a mailbox memfd, the one thing peers write, holds a slot
// per attached peer naming that peer's directory (transport/memfd_layout.h). A peer finds the
// directory among the owner's descriptors (MemfdImport::AttachProcess), through the pidfd its link
// took when the ranks arrived; it takes the directory and then each activation's memfd with
// pidfd_getfd (the same right as ptrace over the owner; where that is refused, the owner hands them
// over its own socket with SCM_RIGHTS: bootstrap/fd_handoff.h). For each range the peer reserves a
// PROT_NONE window as long as the range and maps each activation's memfd MAP_FIXED at (va - base)
// in it, so adjacent activations (allocations in different chunks) are contiguous in the peer as
// they are in the owner. The owner keeps a duplicate of every activated memfd until the activation
// is withdrawn, so the descriptor number a peer reads names that memfd.
//
// Revocation without the kernel (the generation protocol). A change of the directory moves its
// generation: odd while being written, even when done; peers copy the directory between two equal
// even readings. A withdrawal (Deactivate, Unset) then rings every attached peer (a futex wake on
// the doorbell word of the peer's directory, again every 20 ms) and waits until each has
// acknowledged the new generation in its own directory, or has exited. A peer's watcher thread (one
// per process, started at its first attachment) answers the doorbell: it lists afresh the owner
// whose generation moved and covers with a PROT_NONE anonymous mapping what the listing no longer
// has (an activation gone, or one at the same place that is another: the owner numbers its
// activations), then acknowledges. The address stays reserved, so a stale pointer faults instead of
// reaching other memory (coll/guard turns the fault into an error); what is still listed stays
// mapped where it was, since another thread may be using it, and a range's window is kept (covered,
// reserved) even once the range is withdrawn, until the owner is forgotten. A listing that cannot
// be read covers all of the owner's windows. So when Deactivate or Unset returns, no peer maps the
// withdrawn memory any more. A Translate lists afresh whenever the owner's generation moved since
// its listing, and acknowledges that generation.
//
// What a peer reads is the peer's word. Before any of a listing is used it is checked (ranges
// and activations page-aligned spans that do not wrap, each activation inside one range and
// apart from the others, its offset mappable), and every memfd taken from it must be a regular
// memfd sealed against shrinking (F_SEAL_SHRINK, which aclrtMallocPhysical sets and the owner
// requires) that holds what is listed; anything else is HCCL_E_REMOTE naming the entry, and
// nothing of it is mapped. Windows and mapped directories are MADV_DONTFORK, as the kernel
// transport's windows are VM_DONTCOPY: a forked child reaches none of a peer's memory through
// its parent (and attaches afresh).
//
// When a process dies. An owner's exit is seen through its pidfd (bootstrap/peer_process.h):
// Translate fails with HCCL_E_REMOTE and the peer unmaps what it had (so does the watcher, which
// looks at least once a second) (the pages of a dead
// owner are no one's memory any more; they go with the last mapping). A peer's exit frees its
// slot: the owner's wait polls the pidfds of the peers it waits for, so it never waits for
// a dead one. A live peer that does not acknowledge within the timeout fails the withdrawal
// with HCCL_E_TIMEOUT naming it (the directory has changed already: the memory is withdrawn
// for every later lookup).
//
// What this transport gives up against the kernel one: long-term pinning (pages of a memfd
// can be swapped or migrated; RDMA registers its own memory regions), revocation that does not
// depend on the peers' cooperation (a peer that stops answering can only be timed out, a
// peer that is stopped under a debugger holds the memory), inspection through sysfs and
// hzcctl, and RDMA memory regions of pinned peer memory. Processes must run as the same user.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "bootstrap/peer_process.h"
#include "transport/memfd_layout.h"

namespace hzc::transport {

// The checks a listing that process @pid published passes before any of it is used (see "What
// a peer reads is the peer's word" above); sorts @ranges and @acts by address. HCCL_E_REMOTE
// naming the entry and the field otherwise.
Status CheckListing(pid_t pid, std::vector<memfd::DirRange> &ranges,
                    std::vector<memfd::DirAct> &acts);

// A peer's activation as listed in its directory.
struct MemfdActivation {
  uintptr_t va = 0;
  size_t size = 0;
  uint64_t cookie = 0;
};

// The process's directory: what the owner side publishes. Thread-safe; made on first use (and
// afresh in a forked child).
class MemfdExport {
 public:
  static Expected<MemfdExport *> Process();

  // Descriptor of the directory (for the rank card).
  int fd() const;
  uint64_t generation() const;

  // A range [base, base + size): no overlap with the published ones. HCCL_E_MEMORY when the
  // directory is full.
  Status AddRange(uintptr_t base, size_t size);
  // Withdraw a range without activations; returns when every attached peer has dropped it.
  Status RemoveRange(uintptr_t base);
  // Publish [va, va + size) inside one range, backed by @memfd from @offset (duplicated, the
  // caller keeps its own descriptor), with the activation @cookie.
  Status Activate(uintptr_t va, size_t size, int memfd, uint64_t offset, uint64_t cookie);
  // Withdraw the activation starting at @va; returns when every attached peer has dropped it.
  Status Deactivate(uintptr_t va);

  // This process's published activations, sorted by address.
  std::vector<MemfdActivation> Published() const;

  // How long a withdrawal waits for the peers' acknowledgements (tests shorten it).
  void set_revoke_timeout(std::chrono::milliseconds t);
  // Number of peers attached to this directory (for tests).
  size_t AttachedPeers() const;

  struct State;

 private:
  friend class MemfdImport;  // rings and reads this process's directory
  explicit MemfdExport(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The peer side: this process's mappings of other processes' directories and activations,
// shared by every communicator of the process. Thread-safe.
class MemfdImport {
 public:
  static MemfdImport &Process();

  // Attach to the directory @dir_fd of process @pid (idempotent per pid). HCCL_E_SYSCALL when
  // pidfd_getfd is refused or the descriptor is no directory, HCCL_E_REMOTE when the process
  // has exited, HCCL_E_MEMORY when its mailbox has no free peer slot or this process has
  // attached as many directories as its own can acknowledge.
  Status Attach(pid_t pid, int dir_fd);
  // Attach to the directory of process @pid, found among its descriptors (/proc/<pid>/fd).
  // HCCL_E_NOT_FOUND when it has published none (yet); errors of Attach otherwise.
  Status AttachProcess(pid_t pid);
  // Attach to the directory of the process that @card holds (a pidfd taken when its rank
  // arrived) under pid @pid: a process that took the pid since is never attached for it (nor is
  // one attached for another card used for this one). Returns the attachment's serial number;
  // while @checked (an earlier return) is still current the call costs no system call.
  // HCCL_E_REMOTE when the card's process has exited; errors of AttachProcess otherwise.
  Expected<uint64_t> AttachCard(pid_t pid, const bootstrap::PeerProcess &card, uint64_t checked);
  // A local pointer to [va, va + len) of attached process @pid, which must lie in its activated
  // memory (adjacent activations count as one); this process's own memory is @va itself.
  // HCCL_E_PARA for memory that is not activated or a process never attached, HCCL_E_REMOTE when
  // the process has exited.
  Expected<void *> Translate(pid_t pid, uintptr_t va, size_t len);
  // Every activation of @pid, sorted by address.
  Expected<std::vector<MemfdActivation>> Activations(pid_t pid);
  // Forget @pid: unmap its windows and free this process's slot in its directory.
  void Detach(pid_t pid);
  // Windows mapped now (for tests).
  size_t MappedWindows() const;

  struct State;

 private:
  MemfdImport();
  std::shared_ptr<State> state_;
};

}  // namespace hzc::transport
