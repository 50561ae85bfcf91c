// SPDX-License-Identifier: Apache-2.0
#include "transport/memfd.h"

#include <unistd.h>

#include "base/process_id.h"
#include "bootstrap/fd_handoff.h"
#include "runtime/vmm.h"
#include "transport/generation.h"
#include "transport/memfd_directory.h"

namespace hzc::transport {

namespace {

// A directory error about rank @peer (pid @pid): what the peer did (it exited, it lists
// something impossible) is named with its rank, an exit as the kernel transport names it.
Status Named(const Status &st, uint32_t peer, pid_t pid) {
  if (st.code() != HCCL_E_REMOTE) {
    return st;
  }
  const std::string said = fmt::format("pid {} ", pid);
  if (st.message().starts_with(said)) {
    return Error(HCCL_E_REMOTE, "rank {} (pid {}) {}", peer, pid, st.message().substr(said.size()));
  }
  return Error(HCCL_E_REMOTE, "rank {} (pid {}): {}", peer, pid, st.message());
}

class MemfdLink final : public Link {
 public:
  MemfdLink(uint32_t rank, std::vector<uint32_t> pids, std::vector<bootstrap::PeerProcess> cards)
      : peers_(rank, std::move(pids), std::move(cards)) {}
  PeerMemory &peers() override { return peers_; }
  Expected<std::unique_ptr<verbs::Links>> Rdma(const verbs::LinkOptions &) override {
    return std::unique_ptr<verbs::Links>();
  }

 private:
  MemfdPeerMemory peers_;
};

}  // namespace

Status MemfdTransport::AddRange(uintptr_t base, size_t size) {
  auto exported = MemfdExport::Process();
  return exported.ok() ? (*exported)->AddRange(base, size) : exported.status();
}

Status MemfdTransport::RemoveRange(uintptr_t base) {
  auto exported = MemfdExport::Process();
  return Changed(exported.ok() ? (*exported)->RemoveRange(base) : exported.status());
}

Status MemfdTransport::Activate(uintptr_t va, size_t size, uint64_t cookie) {
  auto exported = MemfdExport::Process();
  if (!exported.ok()) {
    return exported.status();
  }
  const int fd = runtime::PhysicalFdAt(reinterpret_cast<void *>(va));
  if (fd < 0) {
    return Error(HCCL_E_PARA, "virPtr={:#x}: no aclrtMapMem mapping starts there", va);
  }
  return Changed((*exported)->Activate(va, size, fd, 0, cookie));
}

Status MemfdTransport::Deactivate(uintptr_t va) {
  auto exported = MemfdExport::Process();
  return Changed(exported.ok() ? (*exported)->Deactivate(va) : exported.status());
}

Status MemfdTransport::Changed(Status st) const {
  if (Withdrawn(st)) {
    Generation::BumpProcess();
  }
  return st;
}

bool MemfdTransport::Withdrawn(const Status &st) const {
  return st.ok() || st.code() == HCCL_E_TIMEOUT;
}

Expected<std::unique_ptr<Link>> MemfdTransport::Connect(LinkRequest request) {
  std::vector<bootstrap::PeerProcess> cards(request.pids.size());
  for (uint32_t peer = 0; peer < request.pids.size(); ++peer) {
    const auto pid = static_cast<pid_t>(request.pids[peer]);
    if (peer == request.rank || pid == ProcessId()) {
      continue;
    }
    // Held since the ranks arrived: a peer that has exited since fails the first use of its
    // memory (HCCL_E_REMOTE), not this link, which it may have completed on its side.
    if (peer < request.processes.size() && request.processes[peer].valid() &&
        request.processes[peer].pid() == pid) {
      cards[peer] = std::move(request.processes[peer]);
      continue;
    }
    auto process = bootstrap::PeerProcess::Open(pid);
    if (!process.ok() && process.status().code() == HCCL_E_REMOTE) {
      return Error(HCCL_E_REMOTE, "rank {} (pid {}) has exited", peer, pid);
    }
    if (!process.ok()) {
      return Error(process.status().code(), "rank {}: {}", peer, process.status().message());
    }
    cards[peer] = std::move(*process);
  }
  // The peers may take this process's memfds through its socket where they lack ptrace rights
  // over it; without the socket (its name taken: logged) they may still use pidfd_getfd.
  std::vector<pid_t> peers;
  for (uint32_t peer = 0; peer < request.pids.size(); ++peer) {
    if (peer != request.rank) {
      peers.push_back(static_cast<pid_t>(request.pids[peer]));
    }
  }
  (void)bootstrap::ServeFds(peers);
  return std::unique_ptr<Link>(
      std::make_unique<MemfdLink>(request.rank, request.pids, std::move(cards)));
}

MemfdPeerMemory::MemfdPeerMemory(uint32_t rank, std::vector<uint32_t> pids,
                                 std::vector<bootstrap::PeerProcess> cards)
    : rank_(rank),
      pids_(std::move(pids)),
      cards_(std::move(cards)),
      checked_(std::make_unique<std::atomic<uint64_t>[]>(pids_.size())) {}

pid_t MemfdPeerMemory::PidOf(uint32_t peer) const {
  return peer == rank_ ? ProcessId() : static_cast<pid_t>(pids_[peer]);
}

Status MemfdPeerMemory::Attach(uint32_t peer, pid_t pid) {
  auto &imp = MemfdImport::Process();
  if (peer >= cards_.size() || !cards_[peer].valid()) {
    return imp.AttachProcess(pid);
  }
  auto serial = imp.AttachCard(pid, cards_[peer], checked_[peer].load(std::memory_order_relaxed));
  if (!serial.ok()) {
    return serial.status();
  }
  checked_[peer].store(*serial, std::memory_order_relaxed);
  return Status::Ok();
}

Expected<void *> MemfdPeerMemory::Translate(uint32_t peer, uintptr_t va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckPeerArgs(peer, pids_.size(), va, len));
  const pid_t pid = PidOf(peer);
  auto &imp = MemfdImport::Process();
  if (Status st = Attach(peer, pid); !st.ok()) {
    return Named(st, peer, pid);
  }
  auto p = imp.Translate(pid, va, len);
  if (!p.ok() && p.status().code() == HCCL_E_PARA) {
    return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of rank {}", va, len, peer);
  }
  if (!p.ok()) {
    return Named(p.status(), peer, pid);
  }
  return p;
}

Expected<std::vector<PeerActivation>> MemfdPeerMemory::Activations(uint32_t peer) {
  HZC_RETURN_IF_ERROR(CheckPeerRank(peer, pids_.size()));
  const pid_t pid = PidOf(peer);
  auto &imp = MemfdImport::Process();
  Status st = Attach(peer, pid);
  auto listed = st.ok() ? imp.Activations(pid) : Expected<std::vector<MemfdActivation>>(st);
  if (!listed.ok()) {
    return Error(listed.status().code(), "cannot list the ranges of rank {}: {}", peer,
                 Named(listed.status(), peer, pid).message());
  }
  std::vector<PeerActivation> out;
  for (const MemfdActivation &a : *listed) {
    out.push_back(PeerActivation{.va = a.va, .size = a.size, .cookie = a.cookie});
  }
  return out;
}

Expected<PeerActivation> MemfdPeerMemory::Activation(uint32_t peer, uintptr_t peer_va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckPeerArgs(peer, pids_.size(), peer_va, len));
  auto all = Activations(peer);
  if (!all.ok()) {
    return all.status();
  }
  for (const PeerActivation &a : *all) {
    if (peer_va >= a.va && peer_va - a.va < a.size && len <= a.size - (peer_va - a.va)) {
      return a;
    }
  }
  return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not inside one activation of rank {}", peer_va, len,
               peer);
}

size_t MemfdPeerMemory::MappedWindows() const {
  return MemfdImport::Process().MappedWindows();
}

}  // namespace hzc::transport
