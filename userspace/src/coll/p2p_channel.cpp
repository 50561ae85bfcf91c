// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p_channel.h"

#include "base/config.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/shared_memfd.h"
#include "base/unique_fd.h"
#include "bootstrap/auth.h"
#include "bootstrap/local_exchange.h"
#include "bootstrap/root_info.h"

namespace hzc::coll::p2p {

namespace {

constexpr uint32_t kMagic = 0x687a7033;  // "hzp3"
constexpr size_t kMaxSlot = size_t{4} << 20;

// Bytes from one box to the next for buffered messages of up to @bytes (0: no boxes).
size_t BoxStride(size_t bytes) {
  return bytes == 0 ? 0 : (kBoxHead + bytes + kAlign - 1) / kAlign * kAlign;
}

// Bytes of the area: the header page, two staging slots of @slot, two rings of boxes of
// @stride, in whole pages.
size_t AreaBytes(size_t slot, size_t stride) {
  return kPage + 2 * slot + (2 * kBoxes * stride + kPage - 1) / kPage * kPage;
}

// The area of the pair {lo, hi}: made by lo.
Expected<UniqueMapping> MakeArea(const bootstrap::LocalExchange &x, size_t staging_bytes) {
  const size_t slot =
      std::min<size_t>(std::max<size_t>(staging_bytes, kPage), kMaxSlot) / kPage * kPage;
  const size_t box_bytes = GetConfig().p2p_buffered_max;
  const size_t len = AreaBytes(slot, BoxStride(box_bytes));
  auto shared = MakeSharedMemfd("hzc-p2p", len);
  if (!shared.ok()) {
    return shared.status();
  }
  UniqueFd mem = std::move(shared->fd);
  UniqueMapping map = std::move(shared->map);
  auto *h = new (map.get()) PairHeader{};
  h->magic = kMagic;
  h->bytes = len;
  h->slot_bytes = slot;
  h->box_bytes = box_bytes;
  h->box_stride = BoxStride(box_bytes);
  h->cpu[0].store(-1, std::memory_order_relaxed);
  h->cpu[1].store(-1, std::memory_order_relaxed);
  HZC_RETURN_IF_ERROR(bootstrap::GiveDescriptor(x, mem.get(), len));
  return map;
}

// The area of the pair, from lo.
Expected<UniqueMapping> TakeArea(const bootstrap::LocalExchange &x) {
  auto handed = bootstrap::TakeDescriptor(x);
  if (!handed.ok()) {
    return handed.status();
  }
  const size_t len = handed->word;
  auto map = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_SHARED, handed->fd.get());
  if (!map.valid()) {
    return Error(HCCL_E_MEMORY, "mmap of {} bytes: {}", len, ErrnoString(errno));
  }
  const auto *h = map.as<const PairHeader>();
  if (h->magic != kMagic || h->bytes != len || h->box_bytes > Config::kMaxP2pBufferedMax ||
      h->box_stride != BoxStride(h->box_bytes) || AreaBytes(h->slot_bytes, h->box_stride) != len) {
    return Error(HCCL_E_INTERNAL, "the area handed over does not match");
  }
  return map;
}

}  // namespace

Channel::Channel(UniqueMapping map, uint32_t me, uint32_t peer)
    : map_(std::move(map)), me_(me), peer_(peer), side_(me < peer ? 0 : 1) {
  h_ = map_.as<PairHeader>();
  slots_ = map_.as<uint8_t>() + kPage;
  slot_bytes_ = h_->slot_bytes;
  box_bytes_ = h_->box_bytes;
  box_stride_ = h_->box_stride;
  boxes_[0] = slots_ + 2 * slot_bytes_;
  boxes_[1] = boxes_[0] + kBoxes * box_stride_;
}

Status Channel::Check() const {
  HZC_RETURN_IF_ERROR(CheckBroken());
  if (process_.Exited()) {
    return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", peer_, process_.pid());
  }
  return Status::Ok();
}

size_t Channel::eager_bytes() const {
  return std::min<size_t>(half_bytes(), GetConfig().inline_max);
}

Status Channel::CheckBroken() const {
  if (!broken_.ok()) {
    return Error(HCCL_E_REMOTE,
                 "the channel with rank {} broke earlier ({}); destroy the "
                 "communicator",
                 peer_, broken_.message());
  }
  const uint32_t b = h_->broken.load(std::memory_order_acquire);
  if (b != 0) {
    return Error(HCCL_E_REMOTE,
                 "rank {} failed a transfer with this rank half-way; the channel is unusable "
                 "(destroy the communicator)",
                 b - 1);
  }
  return Status::Ok();
}

void Channel::Break(const Status &why) {
  if (broken_.ok()) {
    broken_ = why;
  }
  uint32_t none = 0;
  h_->broken.compare_exchange_strong(none, me_ + 1);
  Ring();
}

Expected<std::unique_ptr<Channel>> Channel::Open(const Communicator &comm, uint32_t peer,
                                                 Clock::time_point deadline) {
  const uint32_t me = comm.rank(), lo = std::min(me, peer), hi = std::max(me, peer);
  const bootstrap::LocalExchange x{.name = "hzc-p2p-" + bootstrap::SecretName(comm.id()) + "-" +
                                           std::to_string(lo) + "-" + std::to_string(hi),
                                   .rank = me == lo ? 0u : 1u,
                                   .nranks = 2,
                                   .deadline = deadline,
                                   .arrival = "come"};
  auto map = me == lo ? MakeArea(x, comm.StagingBytes()) : TakeArea(x);
  if (!map.ok()) {
    if (map.status().code() == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "rank {} made no send or receive with this rank within HCCL_EXEC_TIMEOUT "
                   "({} s) (opening their channel)",
                   peer, comm.ExecTimeout().count());
    }
    return Error(map.status().code(), "the channel with rank {}: {}", peer, map.status().message());
  }
  std::unique_ptr<Channel> ch(new Channel(std::move(*map), me, peer));
  const uint32_t pid = comm.ranks()[peer].pid;
  if (pid != static_cast<uint32_t>(getpid())) {
    auto process = bootstrap::PeerProcess::Open(static_cast<pid_t>(pid));
    if (process.ok()) {
      ch->process_ = std::move(*process);
    } else if (process.status().code() == HCCL_E_REMOTE) {
      return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", peer, pid);
    } else {
      LogWarn("p2p: rank {}: {}; its death is noticed only by the timeout", peer,
              process.status().message());
    }
  }
  LogDebug("p2p: rank {} opened its channel with rank {} ({} KiB per direction)", me, peer,
           ch->slot_bytes_ >> 10);
  return ch;
}

}  // namespace hzc::coll::p2p
