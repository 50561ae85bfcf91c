// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma_wire.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
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
constexpr uint32_t kCredit = 0;
constexpr uint32_t kProbe = 1;
constexpr uint32_t kAbort = 2;
constexpr uint32_t kWant = 3;      // the count of wants written (RdmaWire::Want)
constexpr uint32_t kWantBody = 4;  // the last want
constexpr uint32_t kLines = 5;
// What a write with immediate data tells its receiver (verbs::Links::Arrival::imm): a chunk
// arrived, or the line of that name was written.
constexpr uint32_t kChunkNews = 1;
constexpr uint32_t kCreditNews = 2;
constexpr uint32_t kWantNews = 3;
constexpr uint32_t kAbortNews = 4;
// Tags on the group's connections, from Options::tags: the ports at the open, the links
// (transport/wire.cpp uses tags + 1 and tags + 2, the socket wire tags + 3).
constexpr uint32_t kPortTag = 0;
constexpr uint32_t kLinkTag = 4;
// How long Abort tries to reach the members it has no link with, in all.
constexpr std::chrono::milliseconds kNewsTime{1000};
// A wait without progress for this long probes the peer.
constexpr std::chrono::milliseconds kProbeAfter{1000};

// Whether @r, an activation's (its number set), holds [at, at + len).
bool Holds(const Wire::Region &r, uintptr_t at, size_t len) {
  return r.base != 0 && r.serial != 0 && at >= r.base && at - r.base <= r.len &&
         len <= r.len - (at - r.base);
}

}  // namespace

// What members tell each other over the group: at the open its port (kPort: the port's
// address, or why it has none, and the slot count), then per pair its queue pair and area
// (kLink), that it connected (kReady), or that it aborted (kAbort, code).
struct RdmaWire::Card {
  // "HDM3": the third protocol (news in writes with immediate data); a member of another one
  // fails the open.
  static constexpr uint32_t kMagic = 0x334d4448;
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

// Where a receiver wants the next message of kPlaceMin bytes or more from a sender: written
// into the sender's kWantBody line, then its count into kWant (one queue pair: in order).
struct RdmaWire::Want {
  uint64_t addr;  // 0: through the landing slots
  uint64_t len;   // the message's length
  uint32_t rkey;
  uint32_t pad;
};

// One Move: the transfer's arguments and how far it got.
struct RdmaWire::Pass {
  const std::vector<Out> &out;
  const std::vector<size_t> &in;
  const Sink &sink;
  const std::vector<Place> &places;    // one per member, or empty
  std::vector<Loaned> direct;          // [member]: the registration out[p] is sent from, if any
  std::vector<size_t> sent, received;  // [member]: bytes posted, bytes consumed
  std::vector<Clock::time_point> progress;  // [member]: when something last moved
  std::vector<std::optional<Want>> wants;   // [member]: where out[p] goes, once known
  std::vector<Loaned> into;  // [member]: the registration in[p] is written into, if any
  uint8_t *Dest(uint32_t p) const { return places.empty() ? nullptr : places[p].dest; }
};

struct RdmaWire::Peer {
  UniqueMapping area;  // this member's area for the peer
  std::unique_ptr<verbs::MemoryRegion> mr;
  verbs::RemoteBuffer remote;  // the peer's area for this member
  bool ready = false;          // both ends connected: flags reach it
  // The window the peer writes placed messages through (opened at the first one; null when the
  // device has none: then they land in the slots), and whether it is open now.
  std::unique_ptr<verbs::Window> window;
  bool windowless = false;
  bool open = false;
};

RdmaWire::RdmaWire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
                   const Options &options)
    : Wire(group, std::move(members), me, options),
      ports_(size()),
      peers_(size()),
      arrived_(size()),
      wants_sent_(size()),
      wants_taken_(size()) {}

RdmaWire::~RdmaWire() {
  // Windows before the registrations they may still be bound to (a broken link's).
  for (auto &peer : peers_) {
    if (peer) {
      peer->window.reset();
    }
  }
}

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
  verbs::LinkOptions link_options = verbs::LinkOptions::BetweenServers();
  // A peer has at most its credits' worth of chunks and as many credits, a want and an abort
  // in flight to this member before it takes them: their receive entries, with room to spare.
  link_options.arrivals = 4 * options_.slots + 16;
  auto links = verbs::Links::OpenLazy(me_, size(), link_options);
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
      return Error(
          HCCL_E_ROCE_CONNECT,
          "wire: rank {} sent {} bytes that are not its RDMA port of this version (another "
          "hzc build on that server?)",
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
// member writes from (kLines), the landing slots and the outbox slots.
size_t RdmaWire::FlagBytes() const {
  return (kLines * kLine + kPage - 1) / kPage * kPage;
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

uint8_t *RdmaWire::Landing(uint32_t p, uint32_t slot) const {
  return peers_[p]->area.as<uint8_t>() + LandingOffset(slot);
}

uint8_t *RdmaWire::Outbox(uint32_t p, uint32_t slot) const {
  return Landing(p, slot) + size_t{options_.slots} * kChunk;
}

verbs::WorkRequest RdmaWire::FlagWrite(uint32_t line, uint32_t p) const {
  // The lines a member waits for come with news; the want's body precedes its count.
  const uint32_t news = line == kCredit  ? kCreditNews
                        : line == kWant  ? kWantNews
                        : line == kAbort ? kAbortNews
                                         : 0;
  return {.op = news != 0 ? verbs::WorkRequest::kWriteImm : verbs::WorkRequest::kWrite,
          .peer = p,
          .mr = peers_[p]->mr.get(),
          .local = OutFlag(line, p),
          .length = sizeof(uint64_t),
          .remote_addr = peers_[p]->remote.addr + FlagOffset(line),
          .rkey = peers_[p]->remote.rkey,
          .imm = news};
}

Status RdmaWire::Listen() {
  std::array<verbs::Links::Arrival, 64> news;
  size_t n = 0;
  // A bounded number of rounds: a peer that floods this member with news does not keep it here.
  int rounds = 0;
  do {
    n = links_->Arrivals(news);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t p = news[i].peer;
      if (news[i].imm == kChunkNews && p < size()) {
        ++arrived_[p];
      }
    }
  } while (n == news.size() && ++rounds < 16);
  // A member never has more chunks in flight than its credits allow: more is a broken peer.
  for (uint32_t p = 0; p < size(); ++p) {
    if (arrived_[p] > received_[p] + options_.slots) {
      return Error(HCCL_E_ROCE_TRANSFER,
                   "wire: rank {} (another server) broke the wire's protocol: {} chunks arrived "
                   "where {} were taken and {} may be in flight",
                   members_[p], arrived_[p], received_[p], options_.slots);
    }
  }
  return Status::Ok();
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
                                .remote_addr = peers_[p]->remote.addr + FlagOffset(kCredit),
                                .rkey = peers_[p]->remote.rkey};
  if (Status st = Execute({&read, 1}, deadline); !st.ok()) {
    return Error(st.code(), "rank {} (another server) does not answer: {}", members_[p],
                 st.message());
  }
  return Status::Ok();
}

Status RdmaWire::Turn(Pass *pass, bool *moved, Clock::time_point deadline) {
  const uint32_t slots = options_.slots;
  std::vector<verbs::WorkRequest> wrs;
  std::vector<bool> touched(size());
  HZC_RETURN_IF_ERROR(Listen());
  // What has arrived, each member's chunks in order; the credits go first in the batch, so
  // each peer's sender gets its room back before this member's own chunks follow.
  for (uint32_t p = 0; p < size(); ++p) {
    size_t &received = pass->received[p];
    const size_t in = pass->in[p];
    if (p == me_ || received >= in) {
      continue;
    }
    const uint64_t before = received_[p];
    uint8_t *dest = pass->Dest(p);
    while (received < in && arrived_[p] > received_[p]) {
      const size_t len = std::min(kChunk, in - received);
      const uint8_t *landing = Landing(p, received_[p] % slots);
      if (pass->into[p]) {
        moved_placed_ += len;  // written in place by the sender
      } else if (dest != nullptr) {
        std::memcpy(dest + received, landing, len);
        moved_landed_ += len;
      } else {
        pass->sink(p, received, landing, len);
        moved_landed_ += len;
      }
      received += len;
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
    const Out &out = pass->out[p];
    size_t &sent = pass->sent[p];
    if (p == me_ || sent >= out.len) {
      continue;
    }
    auto wanted = Wanted(pass, p);
    if (!wanted.ok()) {
      return wanted.status();
    }
    if (!*wanted) {
      continue;
    }
    const Want *want = pass->wants[p] ? &*pass->wants[p] : nullptr;
    const uint64_t credit =
        std::atomic_ref<uint64_t>(*Flag(kCredit, p)).load(std::memory_order_acquire);
    while (sent < out.len && sent_[p] < credit + slots) {
      const size_t len = std::min(kChunk, out.len - sent);
      const bool there = want != nullptr && want->addr != 0;
      PostChunk(p, out.data + sent, len, pass->direct[p].get(), there ? want->addr + sent : 0,
                there ? want->rkey : 0, &wrs);
      sent += len;
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
      pass->progress[p] = now;
    }
  }
  return Execute(wrs, deadline);
}

Expected<bool> RdmaWire::Wanted(Pass *pass, uint32_t p) {
  const size_t len = pass->out[p].len;
  if (len < kPlaceMin || pass->wants[p]) {
    return true;
  }
  const uint64_t count = std::atomic_ref<uint64_t>(*Flag(kWant, p)).load(std::memory_order_acquire);
  if (count == wants_taken_[p]) {
    return false;
  }
  // A member that failed since it wrote its want revokes it: do not write into it.
  if (const uint64_t code =
          std::atomic_ref<uint64_t>(*Flag(kAbort, p)).load(std::memory_order_acquire);
      code != 0) {
    return Error(HCCL_E_REMOTE, "rank {} (another server) failed the call with code {}",
                 members_[p], code);
  }
  // The member wrote its want, then the count: both untrusted.
  Want want{};
  std::memcpy(&want, Flag(kWantBody, p), sizeof(want));
  if (count != wants_taken_[p] + 1 || want.len != len ||
      (want.addr != 0 && want.addr + len < want.addr)) {
    return Error(HCCL_E_ROCE_TRANSFER,
                 "wire: rank {} (another server) broke the wire's protocol: want {} of {} bytes "
                 "at {:#x} where want {} of {} bytes was due",
                 members_[p], count, want.len, want.addr, wants_taken_[p] + 1, len);
  }
  ++wants_taken_[p];
  pass->wants[p] = want;
  return true;
}

void RdmaWire::PostChunk(uint32_t p, const uint8_t *data, size_t len,
                         const verbs::MemoryRegion *direct, uint64_t at, uint32_t rkey,
                         std::vector<verbs::WorkRequest> *wrs) {
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
  ++sent_[p];
  wrs->push_back({.op = verbs::WorkRequest::kWriteImm,
                  .peer = p,
                  .mr = mr,
                  .local = from,
                  .length = len,
                  .remote_addr = at != 0 ? at : peer.remote.addr + LandingOffset(slot),
                  .rkey = at != 0 ? rkey : peer.remote.rkey,
                  .imm = kChunkNews});
}

Status RdmaWire::Idle(Pass *pass, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(CheckAborts());
  const auto now = Clock::now();
  for (uint32_t p = 0; p < size(); ++p) {
    const bool data = pass->received[p] < pass->in[p];
    if (p == me_ || (!data && pass->sent[p] >= pass->out[p].len)) {
      continue;
    }
    if (now >= deadline) {
      return Error(
          HCCL_E_TIMEOUT, "rank {} (another server): no {} within HCCL_EXEC_TIMEOUT", members_[p],
          data                                             ? "data"
          : pass->wants[p] || pass->out[p].len < kPlaceMin ? "room for the next chunk"
                                                           : "word on where its data goes");
    }
    if (now - pass->progress[p] >= kProbeAfter) {
      HZC_RETURN_IF_ERROR(Probe(p, deadline));
      pass->progress[p] = Clock::now();
    }
  }
  return Status::Ok();
}

Status RdmaWire::Move(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      const std::vector<Place> &places, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(Link(out, in, deadline));
  const uint32_t n = size();
  Pass pass{.out = out,
            .in = in,
            .sink = sink,
            .places = places,
            .direct = Sources(out),
            .sent = std::vector<size_t>(n),
            .received = std::vector<size_t>(n),
            .progress = std::vector<Clock::time_point>(n, Clock::now()),
            .wants = std::vector<std::optional<Want>>(n),
            .into = std::vector<Loaned>(n)};
  moved_staged_ = moved_direct_ = moved_landed_ = moved_placed_ = 0;
  Status st = Pump(&pass, deadline);
  // The members this pass told where to write reach the caller's memory no more once it
  // returns, whether it succeeded or failed: their windows close first (a late write fails at
  // their device).
  CloseWindows();
  if (!st.ok()) {
    return st;
  }
  // Counted with the transfer (Wire::Transfer counts wire_sent once it completed).
  bootstrap::Group::Traffic &t = group_.traffic();
  t.wire_staged.fetch_add(moved_staged_, std::memory_order_relaxed);
  t.wire_direct.fetch_add(moved_direct_, std::memory_order_relaxed);
  t.wire_landed.fetch_add(moved_landed_, std::memory_order_relaxed);
  t.wire_placed.fetch_add(moved_placed_, std::memory_order_relaxed);
  return Status::Ok();
}

Status RdmaWire::Pump(Pass *pass, Clock::time_point deadline) {
  const uint32_t n = size();
  const std::vector<Out> &out = pass->out;
  const std::vector<size_t> &in = pass->in;
  HZC_RETURN_IF_ERROR(Ask(pass, deadline));
  auto more = [&] {
    for (uint32_t p = 0; p < n; ++p) {
      if (p != me_ && (pass->sent[p] < out[p].len || pass->received[p] < in[p])) {
        return true;
      }
    }
    return false;
  };
  for (uint32_t idle = 0; more();) {
    bool moved = false;
    Status st = Turn(pass, &moved, deadline);
    if (st.ok() && !moved) {
      st = Idle(pass, deadline);
      if (++idle > 64 && st.ok()) {
        // What this member waits for comes with news (a chunk, a credit, a want, an abort):
        // sleep on the completion channel until it does (the first call only arms it; the next
        // turn looks once more). The CPU also runs the RDMA device on soft-RoCE: no spinning.
        links_->AwaitArrival(std::min(deadline, Clock::now() + kProbeAfter));
      }
    } else {
      idle = 0;
    }
    HZC_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

Status RdmaWire::Ask(Pass *pass, Clock::time_point deadline) {
  // Where each message goes: a window onto its bytes in the caller's buffer, opened for its
  // sender alone until this pass ends, where a region holds them; else the landing slots.
  std::vector<verbs::WorkRequest> binds;
  for (uint32_t p = 0; p < size(); ++p) {
    const size_t len = pass->in[p];
    const auto dest = reinterpret_cast<uintptr_t>(pass->Dest(p));
    if (p == me_ || len < kPlaceMin || dest == 0) {
      continue;
    }
    const Region &r = pass->places[p].region;
    if (Holds(r, dest, len) && links_->broken(p).empty() && Windowed(p)) {
      pass->into[p] = Lent(p, r, /*writes=*/true);
    }
    if (pass->into[p]) {
      binds.push_back({.op = verbs::WorkRequest::kBind,
                       .peer = p,
                       .mr = pass->into[p].get(),
                       .local = pass->Dest(p),
                       .length = len,
                       .window = peers_[p]->window.get()});
      peers_[p]->open = true;
    }
  }
  if (!binds.empty()) {
    HZC_RETURN_IF_ERROR(Execute(binds, deadline));
  }
  std::vector<verbs::WorkRequest> wrs;
  for (uint32_t p = 0; p < size(); ++p) {
    const size_t len = pass->in[p];
    if (p == me_ || len < kPlaceMin) {
      continue;
    }
    static_assert(sizeof(Want) <= kLine);
    Want want{.addr = 0, .len = len, .rkey = 0, .pad = 0};
    if (pass->into[p]) {
      want.addr = reinterpret_cast<uintptr_t>(pass->Dest(p));
      want.rkey = peers_[p]->window->rkey();
    }
    std::memcpy(OutFlag(kWantBody, p), &want, sizeof(want));
    *OutFlag(kWant, p) = ++wants_sent_[p];
    verbs::WorkRequest body = FlagWrite(kWantBody, p);
    body.length = sizeof(want);
    wrs.push_back(body);
    wrs.push_back(FlagWrite(kWant, p));
  }
  return wrs.empty() ? Status::Ok() : Execute(wrs, deadline);
}

bool RdmaWire::Windowed(uint32_t p) {
  Peer &peer = *peers_[p];
  if (!peer.window && !peer.windowless) {
    auto w = links_->OpenWindow(p);
    if (!w.ok()) {
      LogWarn(
          "wire: no memory window for rank {} ({}): what it sends this rank lands in the "
          "wire's buffers first",
          members_[p], w.status().message());
      peer.windowless = true;
      return false;
    }
    peer.window = std::move(*w);
  }
  return peer.window != nullptr;
}

void RdmaWire::CloseWindows() {
  std::vector<verbs::WorkRequest> closes;
  for (uint32_t p = 0; p < size(); ++p) {
    if (!peers_[p] || !peers_[p]->open) {
      continue;
    }
    if (!links_->broken(p).empty()) {
      // A broken link reaches nothing any more (its queue pair is in the error state) and its
      // window's close would fail with it: the window goes instead, which unbinds it, so that
      // the memory it was bound to can be deregistered.
      peers_[p]->window.reset();
      peers_[p]->open = false;
      continue;
    }
    closes.push_back(
        {.op = verbs::WorkRequest::kInvalidate, .peer = p, .window = peers_[p]->window.get()});
  }
  if (closes.empty()) {
    return;
  }
  const Status st = links_->Execute(closes, Clock::now() + kNewsTime);
  if (!st.ok()) {
    LogWarn("wire: closing the windows of a transfer: {}", st.message());
  }
  // Closed when the invalidation completed, or gone with a link that broke on the way; else it
  // stays counted open (windows_open) until a later close or the wire's end.
  for (const verbs::WorkRequest &r : closes) {
    if (st.ok() || !links_->broken(r.peer).empty()) {
      if (!st.ok()) {
        peers_[r.peer]->window.reset();
      }
      peers_[r.peer]->open = false;
    }
  }
}

uint32_t RdmaWire::windows_open() const {
  return static_cast<uint32_t>(
      std::count_if(peers_.begin(), peers_.end(), [](const auto &p) { return p && p->open; }));
}

std::vector<RdmaWire::Loaned> RdmaWire::Sources(const std::vector<Out> &out) {
  std::vector<Loaned> direct(size());
  for (uint32_t p = 0; p < size(); ++p) {
    const Region &r = out[p].region;
    const auto data = reinterpret_cast<uintptr_t>(out[p].data);
    if (p != me_ && out[p].len != 0 && Holds(r, data, out[p].len)) {
      direct[p] = Lent(p, r, /*writes=*/false);
    }
  }
  return direct;
}

RdmaWire::Loaned RdmaWire::Lent(uint32_t p, const Region &region, bool writes) {
  std::lock_guard lock(lent_mutex_);
  auto it = lent_.find({p, region.base, writes});
  if (it != lent_.end() && it->second.len == region.len && it->second.serial == region.serial) {
    return it->second.mr;
  }
  // What overlaps it for another activation belongs to one that is gone (missed by Withdraw:
  // deactivated between the caller's look-up and this registration); this one's registration
  // of the other kind stays.
  DropLoans(p, region.base, region.len, region.serial);
  auto *va = reinterpret_cast<void *>(region.base);
  auto mr = writes ? links_->RegisterForWindows(p, va, region.len)
                   : links_->RegisterFor(p, va, region.len, /*remote=*/false);
  Loan &loan = lent_[{p, region.base, writes}];
  loan = {.len = region.len, .serial = region.serial, .mr = nullptr};
  if (!mr.ok()) {
    LogWarn("wire: activated memory [{:#x}, +{:#x}) cannot be registered for rank {} ({}): {}",
            region.base, region.len, members_[p], mr.status().message(),
            writes
                ? "what that rank sends into it lands in the wire's buffers first"
                : "what this rank sends that rank from it is copied into the wire's outbox first");
    return nullptr;
  }
  loan.mr = std::move(*mr);
  registered_.fetch_add(1, std::memory_order_relaxed);
  LogDebug("wire: rank {} {} activated memory [{:#x}, +{:#x}) {} rank {} directly", group_.rank(),
           writes ? "lets" : "sends from", region.base, region.len, writes ? "be written by" : "to",
           members_[p]);
  return loan.mr;
}

void RdmaWire::DropLoans(uint32_t p, uintptr_t base, size_t len, uint64_t keep) {
  for (auto it = lent_.begin(); it != lent_.end();) {
    const uintptr_t b = std::get<1>(it->first);
    if ((p == UINT32_MAX || std::get<0>(it->first) == p) && b < base + len &&
        base < b + it->second.len && (keep == 0 || it->second.serial != keep)) {
      it = lent_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t RdmaWire::registrations_kept() {
  std::lock_guard lock(lent_mutex_);
  return static_cast<size_t>(std::count_if(lent_.begin(), lent_.end(),
                                           [](const auto &l) { return l.second.mr != nullptr; }));
}

void RdmaWire::Withdraw(uintptr_t base, size_t len) {
  std::lock_guard lock(lent_mutex_);
  DropLoans(UINT32_MAX, base, len, 0);
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
