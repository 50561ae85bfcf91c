// SPDX-License-Identifier: Apache-2.0
// HCCL's one-sided calls (hccl/hccl_one_sided_services.h) between the ranks of a communicator.
// Three paths, by the communicator:
//   across servers  (it spans servers) RDMA WRITE and READ straight between registered buffers
//                   (a peer on the same server through the device's loopback); where a server
//                   has no RDMA device (or HZC_NET=socket), requests over TCP that a thread of
//                   the target serves (transport/socket_window.h);
//   inside a server (all its ranks on this one) loads and stores through the communicator's
//                   peer mappings (transport/transport.h): registered memory must lie in
//                   activated memory, each transfer is translated when it starts and copied
//                   inside a guarded region (coll/guard.h).
//
// A communicator's one-sided state is made by its first such call: across servers verbs links of
// its own (verbs::Links::OpenLazy: a protection domain and completion queue, a queue pair per
// peer made at the first HcclExchangeMemDesc with that peer, or by HcclCommPrepare with every
// other rank); this rank's registrations (across servers a memory region each), for one peer, or
// for every peer when HcclCommPrepare made it of bound global memory; the spans of the peers it
// enabled and the global memory bound to the communicator. It goes with the communicator
// (HcclCommDestroy, or the process's end: the kernel drops its regions and queue pairs).
//
// A descriptor (HcclMemDesc, 512 bytes) carries a magic and version, the communicator's tag
// (keyed from its id), the registering rank, the peer it is for, the span, the region's remote
// key (0 inside a server) and the registration's number. What a peer sends is untrusted:
// HcclEnableMemAccess takes only a descriptor of this communicator, from another rank, for this
// rank, whose span does not wrap (inside a server: lies in the peer's activated memory), and
// not enabled already (at most kOneSidedMax per peer); spans of different registrations may
// overlap, a transfer takes the newest registration that holds its span. A hostile peer can only
// point this rank's transfers at its own memory: across servers the device checks every access
// against the peer's region (over TCP the peer's thread does), inside a server the peer mappings
// reach only what the peer activated.
//
// Exchange (both ranks call it with each other): a message {magic, version, count, the port and
// queue pair when the pair is not linked yet, count descriptors}. Across servers it goes with
// tag kDescTag on the group's connection, each rank connecting its queue pair to the peer's
// before it sends its descriptors, so a rank that holds the peer's descriptors may transfer at
// once. Inside a server (no connections) each rank writes it into a memfd and the pair hands
// the two over its abstract Unix socket (bootstrap/local_exchange.h), the lower rank's first;
// HcclCommPrepare swaps with the peers one by one in rank order, which no two ranks can wait on
// in a circle. Across servers without RDMA the link cards carry where to connect and a token
// (transport/socket_window.h).
//
// Locking: one mutex per communicator (Communicator::one_sided_mutex) over the state; a batch
// takes the regions it needs under it, then transfers without it (Links::Execute runs one batch
// at a time per communicator). A deregistration (or a disable) while a batch of this rank that
// uses the span is still queued or running is refused (HCCL_E_AGAIN): the batch holds a count of
// the span's use, so that when a deregistration returns, the region is gone.
#pragma once

#include <hccl/hccl_one_sided_services.h>

#include <cstdint>
#include <functional>
#include <span>

#include "base/status.h"
#include "core/comm.h"

namespace hzc::coll {

// At most this many registrations per communicator, descriptors per exchange and transfers per
// batch (HCCL's limits).
inline constexpr uint32_t kOneSidedMax = 256;

Status RegisterMem(Communicator &comm, uint32_t peer, int type, void *addr, uint64_t size,
                   HcclMemDesc *desc);
Status DeregisterMem(Communicator &comm, const HcclMemDesc &desc);
// @timeout as HCCL's (seconds; 0 the connect timeout; -1 none), checked by the caller.
Status ExchangeMemDesc(Communicator &comm, uint32_t peer, std::span<const HcclMemDesc> local,
                       int timeout, std::span<HcclMemDesc> remote, uint32_t *actual);
Status EnableMemAccess(Communicator &comm, const HcclMemDesc &desc, HcclMem *mem);
Status DisableMemAccess(Communicator &comm, const HcclMemDesc &desc);
// Global memory (process-wide handles, never reused) and its binding to communicators.
Expected<void *> RegisterGlobalMem(const HcclMem &mem);
Status DeregisterGlobalMem(void *handle);
Status BindMem(Communicator &comm, void *handle);
Status UnbindMem(Communicator &comm, void *handle);
// HCCL_E_PARA when global memory is bound to @comm (HcclCommDestroy refuses it, as HCCL).
Status NoneBound(Communicator &comm);
// HcclCommPrepare (HCCL_TOPO_FULLMESH, checked by the caller); @timeout as ExchangeMemDesc's.
Status Prepare(Communicator &comm, int timeout);
// Checks @ops against the state now (HCCL_E_PARA naming the bad one) and returns the work that
// transfers them (run now or on a stream).
Expected<std::function<Status()>> PrepareBatch(Communicator &comm, uint32_t peer,
                                               std::span<const HcclOneSideOpDesc> ops, bool put);

}  // namespace hzc::coll
