// SPDX-License-Identifier: Apache-2.0
// The transport layer: how this process publishes its activated memory and how a rank reaches
// its peers' memory. One interface, one implementation per way of reaching a peer:
//   kernel  (transport/kernel.h)  windows of /dev/hzc: hzc.ko pins, publishes and revokes;
//   memfd   (transport/memfd.h)   the activations' memfds, taken with pidfd_getfd; revocation
//                                 by a protocol between the processes
//                                 (transport/memfd_directory.h);
//   network (transport/wire.h)    messages between the servers of a communicator that spans
//                                 servers: RDMA WRITE into registered landing slots, each
//                                 pair linked over its TCP connections at its first transfer
//                                 (transport/rdma_wire.h), or TCP connections of its own
//                                 (transport/socket_wire.h).
// The kernel and memfd transports implement Transport below; the process uses one of them,
// chosen once (Process). The network transport moves messages between servers; it reaches no
// peer memory by address yet.
//
// Use (core/memory.cpp, core/comm.cpp):
//   auto t = transport::Process();                  // the process's transport
//   (*t)->AddRange(base, size); (*t)->Activate(va, size, cookie); ...
//   auto link = (*t)->Connect({.id = ..., .rank = r, .pids = ..., .timeout = ...});
//   (*link)->peers().Translate(peer, peer_va, len);  // a local pointer to the peer's bytes
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "bootstrap/peer_process.h"
#include "verbs/links.h"

namespace hzc::transport {

enum class Kind { kKernel, kMemfd };
const char *KindName(Kind kind);

// A peer's activation: [va, va + size) in the peer's address space, with the cookie it was
// activated with (transport/activation_cookie.h: the RDMA key of the memory, if any).
struct PeerActivation {
  uintptr_t va = 0;
  size_t size = 0;
  uint64_t cookie = 0;
};

// One communicator's access to its peers' activated memory. Thread-safe.
//
// A pointer from Translate stays usable until the peer deactivates or unsets that memory or
// the communicator is destroyed; a later access then raises SIGBUS (revoked by the kernel) or
// SIGSEGV (window unmapped or covered). Peer mappings cannot be used as buffers of
// process_vm_readv, ibv_reg_mr or O_DIRECT I/O.
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;

  // A local pointer to [peer_va, peer_va + len) of rank @peer, which must lie in activated
  // memory of the peer (adjacent activations count as one). For the caller's own rank (or a
  // peer in the same process) that is @peer_va itself. HCCL_E_PARA for a bad rank or memory
  // that is not activated, HCCL_E_REMOTE when the peer died or the domain broke.
  virtual Expected<void *> Translate(uint32_t peer, uintptr_t peer_va, size_t len) = 0;
  // The one activation of rank @peer that contains [peer_va, peer_va + len) (adjacent
  // activations are not merged). Errors as Translate.
  virtual Expected<PeerActivation> Activation(uint32_t peer, uintptr_t peer_va, size_t len) = 0;
  // Every activation of rank @peer, sorted by address (listed afresh).
  virtual Expected<std::vector<PeerActivation>> Activations(uint32_t peer) = 0;
  // Number of peer windows mapped now (for tests).
  virtual size_t MappedWindows() const = 0;
};

// What a communicator's ranks need to reach each other's memory.
struct LinkRequest {
  std::array<uint64_t, 2> id{};  // the communicator's id: the kernel domain's
  uint32_t rank = 0;
  std::vector<uint32_t> pids;  // every rank's process
  // [rank]: the processes of the ranks of this host, held since the ranks arrived (a rank
  // holds pidfds of its peers from its communicator's creation on, so that a peer that links
  // and leaves before a slower rank links is still its card, not a pid that may be reused);
  // empty, or invalid entries, where none was taken. The memfd transport takes them.
  std::vector<bootstrap::PeerProcess> processes{};
  // How long to wait for every rank (HCCL_CONNECT_TIMEOUT).
  std::chrono::seconds timeout{};
};

// A communicator's link over a transport: its peers' memory, and what the transport holds for
// it (the kernel domain's membership, left when the link is destroyed).
class Link {
 public:
  virtual ~Link() = default;
  virtual PeerMemory &peers() = 0;
  // RDMA links among the ranks, set up through the transport's board: nullptr when the
  // transport or some rank has none (the memfd transport never has). Every rank calls it
  // together, once.
  virtual Expected<std::unique_ptr<verbs::Links>> Rdma(const verbs::LinkOptions &options) = 0;
};

// The process's side of a transport: what it publishes of its own memory. Thread-safe. Every
// change that takes effect moves the process's generation (transport/generation.h), so peers
// drop their cached views of its memory.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual Kind kind() const = 0;

  // A range [base, base + size) that activations will lie in (page aligned, no overlap).
  virtual Status AddRange(uintptr_t base, size_t size) = 0;
  // Withdraw a range without activations: no peer maps it any more when this returns.
  virtual Status RemoveRange(uintptr_t base) = 0;
  // Publish [va, va + size), mapped by aclrtMapMem inside one range, with the activation
  // @cookie; the kernel transport pins it (RLIMIT_MEMLOCK).
  virtual Status Activate(uintptr_t va, size_t size, uint64_t cookie) = 0;
  // Withdraw the activation starting at @va: no peer maps it any more when this returns.
  virtual Status Deactivate(uintptr_t va) = 0;
  // Whether a withdrawal that failed with @st has happened all the same (the memfd transport
  // withdraws first and then waits for its peers' acknowledgements, which may time out).
  virtual bool Withdrawn(const Status &st) const = 0;

  // Link the ranks of @request (every rank calls it together): HCCL_E_TIMEOUT naming the ranks
  // that did not come within the timeout, HCCL_E_REMOTE when one left or died.
  virtual Expected<std::unique_ptr<Link>> Connect(LinkRequest request) = 0;
};

// The transport HZC_TRANSPORT chooses (base/config.h): auto takes the kernel transport when the
// device (HZC_DEVICE, /dev/hzc) exists, else the memfd one (logged once at INFO); kernel without
// the device is HCCL_E_NOT_FOUND naming the module.
Expected<Kind> Chosen();
// The process's transport: of the kind Chosen says at the first call that succeeds, the same
// one for the rest of the process's life (its memory must not be split between transports).
Expected<Transport *> Process();

// For implementations: HCCL_E_PARA for a rank not below @nranks (CheckPeerRank), and also for a
// zero length or a range that wraps around (CheckPeerArgs).
Status CheckPeerRank(uint32_t peer, size_t nranks);
Status CheckPeerArgs(uint32_t peer, size_t nranks, uintptr_t va, size_t len);

}  // namespace hzc::transport
