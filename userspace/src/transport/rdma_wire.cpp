// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma_wire.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "base/unique_mapping.h"

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
// Tags on the group's connections, from Options::tags: the ports at the open, the links
// (transport/wire.cpp uses tags + 1 and tags + 2, the socket wire tags + 3).
constexpr uint32_t kPortTag = 0;
constexpr uint32_t kLinkTag = 4;
// How long Abort tries to reach the members it has no link with, in all.
constexpr std::chrono::milliseconds kNewsTime{1000};
// A wait without progress for this long probes the peer.
constexpr std::chrono::milliseconds kProbeAfter{1000};

}  // namespace

// What members tell each other over the group: at the open its port (kPort: the port's
// address, or why it has none, and the slot count), then per pair its queue pair and area
// (kLink), that it connected (kReady), or that it aborted (kAbort, code).
struct RdmaWire::Card {
  static constexpr uint32_t kMagic = 0x574d4448;  // "HDMW"
  enum Kind : uint32_t { kPort = 1, kLink = 2, kReady = 3, kAbort = 4 };

  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint32_t state = verbs::EndpointHeader::kReady;  // kPort
  uint32_t slots = 0;                              // kPort
  uint64_t code = 0;                               // kAbort
  verbs::EndpointHeader port = {};                 // kPort
  verbs::QpEndpoint qp = {};                       // kLink
  verbs::RemoteBuffer area = {};                   // kLink
};

namespace {

// @blob as a card (of a size and magic that say so), or nullopt.
template <typename Card>
std::optional<Card> AsCard(std::span<const std::byte> blob) {
  Card c;
  if (blob.size() != sizeof(Card)) {
    return std::nullopt;
  }
  std::memcpy(&c, blob.data(), sizeof(c));
  return c.magic == Card::kMagic ? std::optional<Card>(c) : std::nullopt;
}

}  // namespace

struct RdmaWire::Peer {
  UniqueMapping area;  // this member's area for the peer
  std::unique_ptr<verbs::MemoryRegion> mr;
  verbs::RemoteBuffer remote;  // the peer's area for this member
  bool ready = false;          // both ends connected: flags reach it
};

RdmaWire::RdmaWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
                   const Options &options)
    : Wire(group, std::move(members), me, options), ports_(size()), peers_(size()) {}

RdmaWire::~RdmaWire() = default;

Expected<std::unique_ptr<Wire>> RdmaWire::Open(bootstrap::Group &group,
                                               std::vector<uint32_t> members, uint32_t me,
                                               const Options &options, Clock::time_point deadline) {
  std::unique_ptr<RdmaWire> w(new RdmaWire(group, std::move(members), me, options));
  bool none = false;
  HZC_RETURN_IF_ERROR(w->Setup(deadline, &none));
  if (none) {
    return std::unique_ptr<Wire>();
  }
  LogDebug("wire: rank {} is member {} of {} ({} port {})", group.rank(), me, w->size(),
           w->links_->port().device, w->links_->port().port_num);
  return std::unique_ptr<Wire>(std::move(w));
}

Status RdmaWire::Setup(Clock::time_point deadline, bool *none) {
  auto links = verbs::Links::OpenLazy(me_, size(), verbs::LinkOptions::BetweenServers());
  static_assert(sizeof(Card) == 104, "cards travel as they are: one layout on every member");
  Card mine{.kind = Card::kPort, .slots = options_.slots};
  if (!links.ok()) {
    mine.state = verbs::EndpointHeader::kFailed;
  } else if (!*links) {
    mine.state = verbs::EndpointHeader::kNoRdmaDevice;
  } else {
    links_ = std::move(*links);
    mine.port = links_->Header();
  }
  // Every member learns every member's state, so that none waits for a link another never makes.
  auto all =
      group_.AllGatherFixed(members_, options_.tags + kPortTag, std::as_bytes(std::span(&mine, 1)),
                            deadline, "the RDMA ports of the servers");
  if (!links.ok()) {
    return Error(links.status().code(), "links between the servers: {}", links.status().message());
  }
  if (!all.ok()) {
    return all.status();
  }
  std::vector<uint32_t> failed, no_device, slots;
  for (uint32_t i = 0; i < size(); ++i) {
    const std::optional<Card> card = AsCard<Card>((*all)[i]);
    if (!card || card->kind != Card::kPort) {
      return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} sent {} bytes that are not its RDMA port",
                   members_[i], (*all)[i].size());
    }
    const Card &c = *card;
    if (c.state == verbs::EndpointHeader::kNoRdmaDevice) {
      no_device.push_back(members_[i]);
    } else if (c.state != verbs::EndpointHeader::kReady) {
      failed.push_back(members_[i]);
    } else if (c.slots != options_.slots) {
      slots.push_back(members_[i]);
    }
    ports_[i] = c.port;
  }
  if (!failed.empty()) {
    return Error(HCCL_E_ROCE_CONNECT,
                 "links between the servers: rank(s) {} failed to open their RDMA device (see "
                 "their logs)",
                 RankList(failed));
  }
  if (!no_device.empty()) {
    if (links_) {
      LogWarn("verbs: rank(s) {} have no RDMA device: no RDMA between the servers",
              RankList(no_device));
    }
    links_.reset();
    *none = true;
    return Status::Ok();
  }
  if (!slots.empty()) {
    return Error(HCCL_E_PARA,
                 "wire: rank(s) {} registered another slot count than rank {} ({} slots per "
                 "peer): the members' slot counts differ",
                 RankList(slots), group_.rank(), options_.slots);
  }
  return Status::Ok();  // a port of another link layer fails the pair's link (ConnectPeer)
}

uint32_t RdmaWire::links() const {
  return static_cast<uint32_t>(
      std::count_if(peers_.begin(), peers_.end(), [](const auto &p) { return p && p->ready; }));
}

Status RdmaWire::Link(const std::vector<Out> &out, const std::vector<size_t> &in,
                      Clock::time_point deadline) {
  std::vector<uint32_t> fresh;
  for (uint32_t p = 0; p < size(); ++p) {
    if (p != me_ && (out[p].len != 0 || in[p] != 0) && !(peers_[p] && peers_[p]->ready)) {
      fresh.push_back(p);
    }
  }
  const uint32_t tag = options_.tags + kLinkTag;
  // Each end: a queue pair and an area for the other, sent; then both connected; then ready.
  for (uint32_t p : fresh) {
    auto peer = std::make_unique<Peer>();
    const size_t len = AreaBytes();
    peer->area = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (!peer->area.valid()) {
      return Error(HCCL_E_MEMORY, "wire: cannot map {} bytes for the landing slots of rank {}: {}",
                   len, members_[p], ErrnoString(errno));
    }
    auto mr = links_->RegisterFor(p, peer->area.get(), len, /*remote=*/true);
    if (!mr.ok()) {
      return mr.status();
    }
    peer->mr = std::move(*mr);
    auto qp = links_->AddPeer(p);
    if (!qp.ok()) {
      return qp.status();
    }
    peers_[p] = std::move(peer);
    const Card mine{.kind = Card::kLink, .qp = *qp, .area = peers_[p]->mr->remote()};
    HZC_RETURN_IF_ERROR(
        group_.Send(members_[p], tag, std::as_bytes(std::span(&mine, 1)), deadline));
  }
  for (uint32_t p : fresh) {
    auto theirs = Expect(p, Card::kLink, deadline);
    if (!theirs.ok()) {
      return theirs.status();
    }
    if (theirs->area.length != AreaBytes()) {
      return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} registered {} bytes for this rank, not {}",
                   members_[p], theirs->area.length, AreaBytes());
    }
    HZC_RETURN_IF_ERROR(links_->ConnectPeer(p, ports_[p], theirs->qp));
    peers_[p]->remote = theirs->area;
    const Card ready{.kind = Card::kReady};
    HZC_RETURN_IF_ERROR(
        group_.Send(members_[p], tag, std::as_bytes(std::span(&ready, 1)), deadline));
  }
  for (uint32_t p : fresh) {
    HZC_RETURN_IF_ERROR(Expect(p, Card::kReady, deadline).status());
    peers_[p]->ready = true;
  }
  if (!fresh.empty()) {
    LogDebug("wire: rank {} linked with {} more member(s) ({} in all)", group_.rank(), fresh.size(),
             links());
  }
  return Status::Ok();
}

Expected<RdmaWire::Card> RdmaWire::Expect(uint32_t p, uint32_t kind, Clock::time_point deadline) {
  auto blob = group_.Recv(members_[p], options_.tags + kLinkTag, deadline);
  if (!blob.ok()) {
    return Error(blob.status().code(), "wire: linking with rank {} (another server): {}",
                 members_[p], blob.status().message());
  }
  const std::optional<Card> card = AsCard<Card>(*blob);
  if (!card) {
    return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} sent {} bytes that are not a link card",
                 members_[p], blob->size());
  }
  const Card &c = *card;
  if (c.kind == Card::kAbort) {
    return Error(HCCL_E_REMOTE, "rank {} (another server) failed the call with code {}",
                 members_[p], c.code);
  }
  if (c.kind != kind) {
    return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} sent a link card of kind {}, not {}",
                 members_[p], c.kind, kind);
  }
  return c;
}

// The area for a member: the flag lines the member writes (kLines), the out flag lines this
// member writes from (kLines, then one ready source per slot), the landing slots and the
// outbox slots.
size_t RdmaWire::FlagBytes() const {
  const size_t lines = kLines + options_.slots;
  return (lines * kLine + kPage - 1) / kPage * kPage;
}

size_t RdmaWire::AreaBytes() const {
  return 2 * FlagBytes() + 2 * size_t{options_.slots} * kChunk;
}

uint64_t RdmaWire::FlagOffset(uint32_t line) {
  return uint64_t{line} * kLine;
}

uint64_t RdmaWire::LandingOffset(uint32_t slot) const {
  return 2 * FlagBytes() + uint64_t{slot} * kChunk;
}

uint64_t *RdmaWire::Flag(uint32_t line, uint32_t p) const {
  return reinterpret_cast<uint64_t *>(peers_[p]->area.as<uint8_t>() + FlagOffset(line));
}

uint64_t *RdmaWire::OutFlag(uint32_t line, uint32_t p) const {
  return reinterpret_cast<uint64_t *>(peers_[p]->area.as<uint8_t>() + FlagBytes() +
                                      FlagOffset(line));
}

uint64_t *RdmaWire::ReadySource(uint32_t p, uint32_t slot) const {
  return OutFlag(kLines + slot, p);
}

uint8_t *RdmaWire::Landing(uint32_t p, uint32_t slot) const {
  return peers_[p]->area.as<uint8_t>() + LandingOffset(slot);
}

uint8_t *RdmaWire::Outbox(uint32_t p, uint32_t slot) const {
  return Landing(p, slot) + size_t{options_.slots} * kChunk;
}

verbs::WorkRequest RdmaWire::FlagWrite(uint32_t line, uint32_t p) const {
  return {.peer = p,
          .mr = peers_[p]->mr.get(),
          .local = OutFlag(line, p),
          .length = sizeof(uint64_t),
          .remote_addr = peers_[p]->remote.addr + FlagOffset(line),
          .rkey = peers_[p]->remote.rkey};
}

Status RdmaWire::Probe(uint32_t p, Clock::time_point deadline) {
  if (std::string why = group_.Broken(members_[p]); !why.empty()) {
    return Error(HCCL_E_REMOTE, "rank {} (another server) is gone: {}", members_[p], why);
  }
  // A member that aborted before it knew this one had linked with it said so over the group.
  if (auto card = group_.Recv(members_[p], options_.tags + kLinkTag, Clock::time_point{});
      card.ok()) {
    if (const std::optional<Card> c = AsCard<Card>(*card); c && c->kind == Card::kAbort) {
      return Error(HCCL_E_REMOTE, "rank {} (another server) failed the call with code {}",
                   members_[p], c->code);
    }
    return Error(HCCL_E_ROCE_CONNECT, "wire: rank {} sent a link card after it linked",
                 members_[p]);
  }
  // Where the peer writes our flags lies in its area like ours does in ours.
  const verbs::WorkRequest read{.op = verbs::WorkRequest::kRead,
                                .peer = p,
                                .mr = peers_[p]->mr.get(),
                                .local = OutFlag(kProbe, p),
                                .length = sizeof(uint64_t),
                                .remote_addr = peers_[p]->remote.addr + FlagOffset(kReady),
                                .rkey = peers_[p]->remote.rkey};
  if (Status st = Execute({&read, 1}, deadline); !st.ok()) {
    return Error(st.code(), "rank {} (another server) does not answer: {}", members_[p],
                 st.message());
  }
  return Status::Ok();
}

Status RdmaWire::Turn(const std::vector<Out> &out, const Direct &direct,
                      const std::vector<size_t> &in, const Sink &sink, std::vector<size_t> *sent,
                      std::vector<size_t> *received, bool *moved,
                      std::vector<Clock::time_point> *progress, Clock::time_point deadline) {
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
      const size_t len = std::min(kChunk, out[p].len - (*sent)[p]);
      PostChunk(p, out[p].data + (*sent)[p], len, direct[p].get(), &wrs);
      (*sent)[p] += len;
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
  return Execute(wrs, deadline);
}

void RdmaWire::PostChunk(uint32_t p, const uint8_t *data, size_t len,
                         const verbs::MemoryRegion *direct, std::vector<verbs::WorkRequest> *wrs) {
  const auto slot = static_cast<uint32_t>(sent_[p] % options_.slots);
  const Peer &peer = *peers_[p];
  auto *from = const_cast<uint8_t *>(data);  // an RDMA WRITE only reads its source
  const verbs::MemoryRegion *mr = direct;
  if (mr == nullptr) {
    std::memcpy(Outbox(p, slot), from, len);
    from = Outbox(p, slot);
    mr = peer.mr.get();
    moved_staged_ += len;
  } else {
    moved_direct_ += len;
  }
  *ReadySource(p, slot) = ++sent_[p];
  wrs->push_back({.peer = p,
                  .mr = mr,
                  .local = from,
                  .length = len,
                  .remote_addr = peer.remote.addr + LandingOffset(slot),
                  .rkey = peer.remote.rkey});
  wrs->push_back({.peer = p,
                  .mr = peer.mr.get(),
                  .local = ReadySource(p, slot),
                  .length = sizeof(uint64_t),
                  .remote_addr = peer.remote.addr + FlagOffset(kReady),
                  .rkey = peer.remote.rkey});
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
      HZC_RETURN_IF_ERROR(Probe(p, deadline));
      (*progress)[p] = Clock::now();
    }
  }
  return Status::Ok();
}

Status RdmaWire::Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(Link(out, in, deadline));
  const Direct direct = Sources(out);
  moved_staged_ = moved_direct_ = 0;
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
    Status st = Turn(out, direct, in, sink, &sent, &received, &moved, &progress, deadline);
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
  // Counted with the transfer (Wire::Transfer counts wire_sent once it completed).
  group_.traffic().wire_staged.fetch_add(moved_staged_, std::memory_order_relaxed);
  group_.traffic().wire_direct.fetch_add(moved_direct_, std::memory_order_relaxed);
  return Status::Ok();
}

RdmaWire::Direct RdmaWire::Sources(const std::vector<Out> &out) {
  Direct direct(size());
  for (uint32_t p = 0; p < size(); ++p) {
    const Region &r = out[p].region;
    const auto data = reinterpret_cast<uintptr_t>(out[p].data);
    if (p != me_ && out[p].len != 0 && r.base != 0 && data >= r.base && data - r.base <= r.len &&
        out[p].len <= r.len - (data - r.base)) {
      direct[p] = Lent(p, r);
    }
  }
  return direct;
}

std::shared_ptr<const verbs::MemoryRegion> RdmaWire::Lent(uint32_t p, const Region &region) {
  std::lock_guard lock(lent_mutex_);
  auto it = lent_.find({p, region.base});
  if (it != lent_.end() && it->second.len == region.len && it->second.serial == region.serial) {
    return it->second.mr;
  }
  // What overlaps it belongs to activations that are gone (one missed by Withdraw: deactivated
  // between the caller's look-up and this registration).
  DropLoans(p, region.base, region.len);
  auto mr = links_->RegisterFor(p, reinterpret_cast<void *>(region.base), region.len,
                                /*remote=*/false);
  Loan &loan = lent_[{p, region.base}];
  loan = {.len = region.len, .serial = region.serial, .mr = nullptr};
  if (!mr.ok()) {
    LogWarn(
        "wire: activated memory [{:#x}, +{:#x}) cannot be registered for rank {} ({}): what this "
        "rank sends it from there goes through the outbox",
        region.base, region.len, members_[p], mr.status().message());
    return nullptr;
  }
  loan.mr = std::move(*mr);
  LogDebug("wire: rank {} sends from activated memory [{:#x}, +{:#x}) to rank {} directly",
           group_.rank(), region.base, region.len, members_[p]);
  return loan.mr;
}

void RdmaWire::DropLoans(uint32_t p, uintptr_t base, size_t len) {
  for (auto it = lent_.begin(); it != lent_.end();) {
    const uintptr_t b = it->first.second;
    if ((p == UINT32_MAX || it->first.first == p) && b < base + len && base < b + it->second.len) {
      it = lent_.erase(it);
    } else {
      ++it;
    }
  }
}

void RdmaWire::Withdraw(uintptr_t base, size_t len) {
  std::lock_guard lock(lent_mutex_);
  DropLoans(UINT32_MAX, base, len);
}

Status RdmaWire::Execute(std::span<const verbs::WorkRequest> wrs, Clock::time_point deadline) {
  Status st = links_->Execute(wrs, deadline);
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
    if (!peers_[p] || !peers_[p]->ready) {
      continue;
    }
    const uint64_t code =
        std::atomic_ref<uint64_t>(*Flag(kAbort, p)).load(std::memory_order_acquire);
    if (code != 0) {
      return Error(HCCL_E_REMOTE, "rank {} (another server) failed the call with code {}",
                   members_[p], code);
    }
  }
  return Status::Ok();
}

void RdmaWire::Tell(HcclResult code) {
  if (!links_) {
    return;
  }
  // The linked members' flags in one batch, by kNewsTime: a dead member's write ends there (its
  // link broken) without holding up or breaking the others'. A member not linked, or whose link
  // is broken (or breaks now), hears it over the group, where its probe looks.
  const auto until = Clock::now() + kNewsTime;
  const auto flagged = [&](uint32_t p) {
    return p != me_ && peers_[p] && peers_[p]->ready && links_->broken(p).empty();
  };
  std::vector<verbs::WorkRequest> writes;
  for (uint32_t p = 0; p < size(); ++p) {
    if (flagged(p)) {
      *OutFlag(kAbort, p) = static_cast<uint64_t>(code);
      writes.push_back(FlagWrite(kAbort, p));
    }
  }
  if (Status st = links_->Execute(writes, until); !st.ok()) {
    LogDebug("wire: cannot tell every linked member of the abort: {}", st.message());
  }
  const Card news{.kind = Card::kAbort, .code = static_cast<uint64_t>(code)};
  for (uint32_t p = 0; p < size(); ++p) {
    if (p == me_ || flagged(p)) {
      continue;
    }
    if (Status st =
            group_.Send(members_[p], options_.tags + kLinkTag, std::as_bytes(std::span(&news, 1)),
                        std::max(until, Clock::now() + std::chrono::milliseconds(50)));
        !st.ok()) {
      LogDebug("wire: cannot tell rank {} of the abort: {}", members_[p], st.message());
    }
  }
}

}  // namespace hzc::transport
