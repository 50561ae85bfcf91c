// SPDX-License-Identifier: Apache-2.0
#include "core/peer_access.h"

#include "transport/activation_cookie.h"
#include "verbs/links.h"

namespace hzc {

namespace {

// @comm's peer memory, or why there is none yet.
Expected<transport::PeerMemory *> Linked(HcclComm handle, const Communicator &comm) {
  transport::PeerMemory *peers = comm.peer_memory();
  if (peers == nullptr) {
    return Error(HCCL_E_UNAVAIL,
                 "comm={}: no links yet (the first HcclCommSetMemoryRange makes them)", handle);
  }
  return peers;
}

// The rkey of the activation of @rank containing [peer_va, peer_va + size), registered by that rank
// on @comm.
Expected<uint32_t> PeerKey(HcclComm handle, const Communicator &comm, transport::PeerMemory &peers,
                           uint32_t rank, uintptr_t peer_va, size_t size) {
  auto activation = peers.Activation(rank, peer_va, size);
  if (!activation.ok()) {
    return activation.status();
  }
  const auto *va = reinterpret_cast<const void *>(peer_va);
  uint32_t rkey = 0;
  switch (transport::ActivationCookie::Decode(activation->cookie, comm.CookieTag(rank), &rkey)) {
    case transport::ActivationCookie::Match::kNone:
      return Error(HCCL_E_PARA,
                   "peer_va={}: the activation [{:#x}, +{:#x}) of rank {} has no RDMA registration "
                   "(it was activated through a communicator without RDMA links)",
                   va, activation->va, activation->size, rank);
    case transport::ActivationCookie::Match::kOther:
      return Error(HCCL_E_PARA,
                   "peer_va={}: the activation [{:#x}, +{:#x}) was not made by rank {} on "
                   "comm={} (but through another communicator, or by another rank of that "
                   "process); RDMA reaches only memory activated on the same communicator",
                   va, activation->va, activation->size, rank, handle);
    case transport::ActivationCookie::Match::kOk:
      break;
  }
  return rkey;
}

}  // namespace

LinkInfo DescribeLinks(const Communicator &comm) {
  LinkInfo info;
  info.linked = comm.linked();
  if (const verbs::Links *links = comm.links(); links != nullptr) {
    const verbs::Port &port = links->port();
    info.rdma = true;
    info.device = port.device;
    info.port = port.port_num;
    info.gid_index = port.gid_index;
  }
  return info;
}

Expected<void *> PeerPointer(HcclComm handle, const Communicator &comm, uint32_t rank,
                             uintptr_t peer_va, size_t size) {
  auto peers = Linked(handle, comm);
  if (!peers.ok()) {
    return peers.status();
  }
  return (*peers)->Translate(rank, peer_va, size);
}

Expected<std::vector<transport::PeerActivation>> PeerActivations(HcclComm handle,
                                                                 const Communicator &comm,
                                                                 uint32_t rank) {
  auto peers = Linked(handle, comm);
  if (!peers.ok()) {
    return peers.status();
  }
  return (*peers)->Activations(rank);
}

Status Transfer(HcclComm handle, Communicator &comm, uint32_t rank, void *local, uintptr_t peer_va,
                size_t size, bool write) {
  if (rank >= comm.size()) {
    return Error(HCCL_E_PARA, "rank={}: comm={} has {} ranks", rank, handle, comm.size());
  }
  if (rank == comm.rank()) {
    return Error(HCCL_E_PARA, "rank={}: the caller's own rank; RDMA needs another rank", rank);
  }
  auto peers = Linked(handle, comm);
  if (!peers.ok()) {
    return peers.status();
  }
  verbs::Links *links = comm.links();
  if (links == nullptr) {
    return Error(HCCL_E_UNAVAIL,
                 "comm={}: its links are kernel-only (some rank has no RDMA device)", handle);
  }
  const auto mr = comm.FindMemory(local, size);
  if (mr == nullptr) {
    return Error(HCCL_E_PARA,
                 "local={} size={:#x}: not inside one activation this process made on comm={}",
                 local, size, handle);
  }
  auto rkey = PeerKey(handle, comm, **peers, rank, peer_va, size);
  if (!rkey.ok()) {
    return rkey.status();
  }
  return write ? links->Write(rank, *mr, local, size, peer_va, *rkey)
               : links->Read(rank, *mr, local, size, peer_va, *rkey);
}

}  // namespace hzc
