// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma_wire.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "base/errno_string.h"
#include "base/log.h"
#include "transport/group_board.h"

namespace hzc::transport {

namespace {

constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
// Flag lines in the area (written by peers) and in the out region (what this member writes
// to peers, and where a probe reads into).
constexpr uint32_t kReady = 0;
constexpr uint32_t kCredit = 1;
constexpr uint32_t kProbe = 2;
constexpr uint32_t kAbort = 3;
constexpr uint32_t kLines = 4;
// Tags on the TCP connections, from Options::tags: the key exchange, the board (transport/wire.cpp
// uses tags + 1 to tags + 3).
constexpr uint32_t kKeysTag = 0;
constexpr uint32_t kBoardTags = 0x100;
// The wire's queue pairs: local ACK timeout 4.096 us * 2^18 (1.07 s), 6 retries (7 would mean
// retrying for ever): a dead peer fails a transfer after about 7.5 s; a transfer that sees no
// completion for 30 s is abandoned.
constexpr uint8_t kAckTimeout = 18;
constexpr uint8_t kRetryCount = 6;
constexpr std::chrono::milliseconds kProgressTimeout{30'000};
// A wait without progress for this long probes the peer.
constexpr std::chrono::milliseconds kProbeAfter{1000};

}  // namespace

RdmaWire::RdmaWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
                   const Options &options)
    : Wire(group, std::move(members), me, options) {}

RdmaWire::~RdmaWire() = default;

Expected<std::unique_ptr<Wire>> RdmaWire::Open(bootstrap::Group &group,
                                               std::vector<uint32_t> members, uint32_t me,
                                               const Options &options, Clock::time_point deadline) {
  std::unique_ptr<RdmaWire> w(new RdmaWire(group, std::move(members), me, options));
  const GroupBoard board(group, w->members_, options.tags + kBoardTags);
  verbs::LinkOptions link = verbs::LinkOptions::FromEnvironment();
  link.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - Clock::now(), Clock::duration::zero()));
  // Between servers the network and a loaded peer stall for longer than inside one: longer
  // between retries, and patience with a link that only stalls.
  link.ack_timeout = kAckTimeout;
  link.retry_count = kRetryCount;
  link.progress_timeout = kProgressTimeout;
  auto links = verbs::Links::Establish(board, link);
  if (!links.ok()) {
    return Error(links.status().code(), "links between the servers: {}", links.status().message());
  }
  if (!*links) {
    return std::unique_ptr<Wire>();
  }
  w->links_ = std::move(*links);
  HZC_RETURN_IF_ERROR(w->Register());
  HZC_RETURN_IF_ERROR(w->ExchangeKeys(deadline));
  LogDebug("wire: rank {} is member {} of {} ({} port {})", group.rank(), me, w->size(),
           w->links_->port().device, w->links_->port().port_num);
  return std::unique_ptr<Wire>(std::move(w));
}

Status RdmaWire::Register() {
  const size_t len = AreaBytes();
  area_ = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  if (!area_.valid()) {
    return Error(HCCL_E_MEMORY, "wire: cannot map {} bytes for the landing slots: {}", len,
                 ErrnoString(errno));
  }
  auto mr = links_->Register(area_.get(), len);
  if (!mr.ok()) {
    return mr.status();
  }
  mr_ = std::move(*mr);
  return Status::Ok();
}

Status RdmaWire::ExchangeKeys(Clock::time_point deadline) {
  const verbs::RemoteBuffer mine = mr_->remote();
  auto all = group_.AllGatherFixed(members_, options_.tags + kKeysTag, verbs::Bytes(mine), deadline,
                                   "the landing slots of the servers");
  if (!all.ok()) {
    return all.status();
  }
  remote_.resize(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) {
    const auto &blob = (*all)[i];
    if (blob.size() != sizeof(verbs::RemoteBuffer)) {
      return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} sent {} bytes for its landing slots",
                   members_[i], blob.size());
    }
    std::memcpy(&remote_[i], blob.data(), sizeof(verbs::RemoteBuffer));
    // The area's size follows from the member count and the slot count alone.
    if (remote_[i].length != mr_->length()) {
      return Error(HCCL_E_PARA,
                   "wire: rank {} registered {} bytes for its landing slots, rank {} {} ({} "
                   "slots per peer): the members' slot counts differ",
                   members_[i], remote_[i].length, group_.rank(), mr_->length(), options_.slots);
    }
  }
  return Status::Ok();
}

// The area: the flag lines peers write (kLines per member), the out flag lines this member
// writes from (the same, then one ready source per member and slot), the landing slots
// ([member][slot]) and the outbox slots ([member][slot]).
size_t RdmaWire::FlagBytes() const {
  const size_t lines = (kLines + options_.slots) * members_.size();
  return (lines * kLine + kPage - 1) / kPage * kPage;
}

size_t RdmaWire::AreaBytes() const {
  return 2 * FlagBytes() + 2 * members_.size() * options_.slots * kChunk;
}

uint64_t RdmaWire::FlagOffset(uint32_t line, uint32_t p) const {
  return (uint64_t{line} * members_.size() + p) * kLine;
}

uint64_t RdmaWire::LandingOffset(uint32_t p, uint32_t slot) const {
  return 2 * FlagBytes() + (uint64_t{p} * options_.slots + slot) * kChunk;
}

uint64_t *RdmaWire::Flag(uint32_t line, uint32_t p) const {
  return reinterpret_cast<uint64_t *>(area_.as<uint8_t>() + FlagOffset(line, p));
}

uint64_t *RdmaWire::OutFlag(uint32_t line, uint32_t p) const {
  return reinterpret_cast<uint64_t *>(area_.as<uint8_t>() + FlagBytes() + FlagOffset(line, p));
}

uint64_t *RdmaWire::ReadySource(uint32_t p, uint32_t slot) const {
  return OutFlag(kLines, 0) + (uint64_t{p} * options_.slots + slot) * (kLine / sizeof(uint64_t));
}

uint8_t *RdmaWire::Landing(uint32_t p, uint32_t slot) const {
  return area_.as<uint8_t>() + LandingOffset(p, slot);
}

uint8_t *RdmaWire::Outbox(uint32_t p, uint32_t slot) const {
  return Landing(p, slot) + members_.size() * options_.slots * kChunk;
}

verbs::WorkRequest RdmaWire::FlagWrite(uint32_t line, uint32_t p) const {
  return {.peer = p,
          .mr = mr_.get(),
          .local = OutFlag(line, p),
          .length = sizeof(uint64_t),
          .remote_addr = remote_[p].addr + FlagOffset(line, me_),
          .rkey = remote_[p].rkey};
}

Status RdmaWire::Probe(uint32_t p) {
  if (std::string why = group_.Broken(members_[p]); !why.empty()) {
    return Error(HCCL_E_REMOTE, "rank {} (another server) is gone: {}", members_[p], why);
  }
  // Where the peer writes our flags lies in its area like ours does in ours.
  const verbs::WorkRequest read{.op = verbs::WorkRequest::kRead,
                                .peer = p,
                                .mr = mr_.get(),
                                .local = OutFlag(kProbe, p),
                                .length = sizeof(uint64_t),
                                .remote_addr = remote_[p].addr + FlagOffset(kReady, me_),
                                .rkey = remote_[p].rkey};
  if (Status st = Execute({&read, 1}); !st.ok()) {
    return Error(st.code(), "rank {} (another server) does not answer: {}", members_[p],
                 st.message());
  }
  return Status::Ok();
}

Status RdmaWire::Turn(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      std::vector<size_t> *sent, std::vector<size_t> *received, bool *moved,
                      std::vector<Clock::time_point> *progress) {
  const uint32_t slots = options_.slots;
  std::vector<verbs::WorkRequest> wrs;
  std::vector<bool> touched(size());
  // What has arrived, each member's chunks in order; the credits go first in the batch, so
  // each peer's sender gets its room back before this member's own chunks follow.
  for (uint32_t p = 0; p < size(); ++p) {
    if (p == me_ || (*received)[p] >= in[p]) {
      continue;
    }
    const std::atomic_ref<uint64_t> ready(*Flag(kReady, p));
    const uint64_t before = received_[p];
    while ((*received)[p] < in[p] && ready.load(std::memory_order_acquire) > received_[p]) {
      const size_t len = std::min(kChunk, in[p] - (*received)[p]);
      sink(p, (*received)[p], Landing(p, received_[p] % slots), len);
      (*received)[p] += len;
      ++received_[p];
    }
    if (received_[p] != before) {
      *OutFlag(kCredit, p) = received_[p];
      wrs.push_back(FlagWrite(kCredit, p));
      touched[p] = true;
    }
  }
  // Every chunk the peers' credits allow: chunk k needs chunk k - slots consumed.
  for (uint32_t p = 0; p < size(); ++p) {
    if (p == me_ || (*sent)[p] >= out[p].len) {
      continue;
    }
    const uint64_t credit =
        std::atomic_ref<uint64_t>(*Flag(kCredit, p)).load(std::memory_order_acquire);
    while ((*sent)[p] < out[p].len && sent_[p] < credit + slots) {
      const auto slot = static_cast<uint32_t>(sent_[p] % slots);
      const size_t len = std::min(kChunk, out[p].len - (*sent)[p]);
      std::memcpy(Outbox(p, slot), out[p].data + (*sent)[p], len);
      *ReadySource(p, slot) = ++sent_[p];
      (*sent)[p] += len;
      wrs.push_back({.peer = p,
                     .mr = mr_.get(),
                     .local = Outbox(p, slot),
                     .length = len,
                     .remote_addr = remote_[p].addr + LandingOffset(me_, slot),
                     .rkey = remote_[p].rkey});
      wrs.push_back({.peer = p,
                     .mr = mr_.get(),
                     .local = ReadySource(p, slot),
                     .length = sizeof(uint64_t),
                     .remote_addr = remote_[p].addr + FlagOffset(kReady, me_),
                     .rkey = remote_[p].rkey});
      touched[p] = true;
    }
  }
  *moved = !wrs.empty();
  if (wrs.empty()) {
    return Status::Ok();
  }
  const auto now = Clock::now();
  for (uint32_t p = 0; p < size(); ++p) {
    if (touched[p]) {
      (*progress)[p] = now;
    }
  }
  return Execute(wrs);
}

Status RdmaWire::Idle(const std::vector<Out> &out, const std::vector<size_t> &in,
                      const std::vector<size_t> &sent, const std::vector<size_t> &received,
                      std::vector<Clock::time_point> *progress, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(CheckAborts());
  const auto now = Clock::now();
  for (uint32_t p = 0; p < size(); ++p) {
    const bool data = received[p] < in[p];
    if (p == me_ || (!data && sent[p] >= out[p].len)) {
      continue;
    }
    if (now >= deadline) {
      return Error(HCCL_E_TIMEOUT, "rank {} (another server): no {} within HCCL_EXEC_TIMEOUT",
                   members_[p], data ? "data" : "room for the next chunk");
    }
    if (now - (*progress)[p] >= kProbeAfter) {
      HZC_RETURN_IF_ERROR(Probe(p));
      (*progress)[p] = Clock::now();
    }
  }
  return Status::Ok();
}

Status RdmaWire::Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      Clock::time_point deadline) {
  std::vector<size_t> sent(size()), received(size());
  std::vector<Clock::time_point> progress(size(), Clock::now());
  auto more = [&] {
    for (uint32_t p = 0; p < size(); ++p) {
      if (p != me_ && (sent[p] < out[p].len || received[p] < in[p])) {
        return true;
      }
    }
    return false;
  };
  for (uint32_t idle = 0; more();) {
    bool moved = false;
    Status st = Turn(out, in, sink, &sent, &received, &moved, &progress);
    if (st.ok() && !moved) {
      st = Idle(out, in, sent, received, &progress, deadline);
      if (++idle > 64) {
        // The CPU also runs the RDMA device's work on soft-RoCE: do not spin it away; the
        // longer nothing arrives, the longer the naps (at most 200 us).
        std::this_thread::sleep_for(std::chrono::microseconds(idle > 256 ? 200 : 20));
      }
    } else {
      idle = 0;
    }
    HZC_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

Status RdmaWire::Execute(std::span<const verbs::WorkRequest> wrs) {
  Status st = links_->Execute(wrs);
  if (!st.ok()) {
    std::string who;
    for (uint32_t i = 0; i < size(); ++i) {
      who += fmt::format("{}{} = rank {}", i == 0 ? "" : ", ", i, members_[i]);
    }
    return Error(st.code(), "{} (members of the wire between the servers: {})", st.message(), who);
  }
  return st;
}

Status RdmaWire::CheckAborts() const {
  for (uint32_t p = 0; p < size(); ++p) {
    const uint64_t code =
        std::atomic_ref<uint64_t>(*Flag(kAbort, p)).load(std::memory_order_acquire);
    if (p != me_ && code != 0) {
      return Error(HCCL_E_REMOTE, "rank {} (another server) failed the call with code {}",
                   members_[p], code);
    }
  }
  return Status::Ok();
}

void RdmaWire::Tell(HcclResult code) {
  if (!mr_ || remote_.size() != size()) {
    return;  // no peer knows our area yet: they fail on their own
  }
  std::vector<verbs::WorkRequest> wrs;
  for (uint32_t p = 0; p < size(); ++p) {
    if (p == me_) {
      continue;
    }
    *OutFlag(kAbort, p) = static_cast<uint64_t>(code);
    wrs.push_back(FlagWrite(kAbort, p));
  }
  // Each request goes alone: a broken link to one member must not keep the others uninformed.
  for (const verbs::WorkRequest &wr : wrs) {
    if (Status st = links_->Execute({&wr, 1}); !st.ok()) {
      LogDebug("wire: cannot tell rank {} of the abort: {}", members_[wr.peer], st.message());
    }
  }
}

}  // namespace hzc::transport
