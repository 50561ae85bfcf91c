// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p_wire.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "base/log.h"
#include "coll/reduce.h"
#include "coll/wire_memory.h"

namespace hzc::coll {

namespace {

// The wires' tags on the pair's TCP connection (coll/span.cpp's are below 0x2000): the wire
// from the lower rank to the higher, and back.
constexpr uint32_t kUpTags = 0x2000;
constexpr uint32_t kDownTags = 0x3000;
// Landing slots per wire: a message streams without waiting for each chunk's credit.
constexpr uint32_t kSlots = 2;
// How long a destroyed communicator waits for its peers' goodbyes, over all wires.
constexpr std::chrono::seconds kGoodbyeTime{10};

// A header (sender to receiver) or an answer (receiver to sender).
struct Word {
  uint64_t seq = 0;
  uint64_t code = 0;  // kMatch, kRefused, kMismatch
  uint64_t count = 0;
  uint64_t dtype = 0;
};
constexpr uint64_t kMatch = 0;
constexpr uint64_t kRefused = 1;
constexpr uint64_t kMismatch = 2;

const char *Verb(P2pItem::Dir dir) {
  return dir == P2pItem::kSend ? "to" : "from";
}

}  // namespace

struct RemoteP2p::Link {
  uint32_t peer = 0;
  P2pItem::Dir dir = P2pItem::kSend;  // this rank's
  std::unique_ptr<transport::Wire> wire;
  std::unique_ptr<WireWatch> watch;  // the wire's, while it lives
  Status broken;                     // a failure half-way: the wire is unusable
  uint64_t seq = 0;                  // messages on the wire so far
  uint64_t pending = 0;              // the other halves of refused messages, still to be read

  uint32_t other() const { return 1 - wire->index(); }
  std::string Name() const {
    return fmt::format("the link {} rank {} (another server)", Verb(dir), peer);
  }

  Status Put(const Word &w, Clock::time_point deadline) {
    std::vector<transport::Wire::Out> out(2);
    out[other()] = {reinterpret_cast<const uint8_t *>(&w), sizeof(w)};
    return wire->Transfer(out, std::vector<size_t>(2), Ignore, deadline);
  }

  Expected<Word> Take(uint64_t want, Clock::time_point deadline) {
    Word w;
    std::vector<size_t> in(2);
    in[other()] = sizeof(w);
    HZC_RETURN_IF_ERROR(wire->Transfer(
        std::vector<transport::Wire::Out>(2), in,
        [&](uint32_t, size_t off, const uint8_t *d, size_t len) {
          std::memcpy(reinterpret_cast<uint8_t *>(&w) + off, d, len);
        },
        deadline));
    if (w.seq != want) {
      return Error(HCCL_E_INTERNAL, "{}: message {} arrived where {} was due", Name(), w.seq, want);
    }
    return w;
  }

  // Read the other halves of the messages this rank refused.
  Status Drain(Clock::time_point deadline) {
    for (; pending > 0; --pending) {
      auto w = Take(seq - pending + 1, deadline);
      if (!w.ok()) {
        return w.status();
      }
    }
    return Status::Ok();
  }

  static void Ignore(uint32_t, size_t, const uint8_t *, size_t) {}
};

bool OnOtherServer(const Communicator &comm, uint32_t peer) {
  return comm.ranks()[peer].host != comm.ranks()[comm.rank()].host;
}

RemoteP2p::RemoteP2p(Communicator &comm) : comm_(comm) {}

RemoteP2p::~RemoteP2p() {
  // Every pair closes its wires in the same order (by pair, then the wire's direction), so no
  // two ranks wait for each other's goodbye on different wires.
  // A peer one of whose links broke is not waited for on the other (it may be gone).
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t, transport::Wire *>> wires;
  const uint32_t me = comm_.rank();
  std::set<uint32_t> broken;
  for (auto &[key, link] : links_) {
    if (!link->broken.ok()) {
      broken.insert(link->peer);
    }
  }
  for (auto &[key, link] : links_) {
    if (link->wire && !broken.contains(link->peer)) {
      const uint32_t s = link->dir == P2pItem::kSend ? me : link->peer;
      wires.emplace_back(std::min(me, link->peer), std::max(me, link->peer),
                         s == std::min(me, link->peer) ? kUpTags : kDownTags, link->wire.get());
    }
  }
  std::sort(wires.begin(), wires.end());
  const auto deadline = Clock::now() + kGoodbyeTime;
  for (const auto &w : wires) {
    std::get<3>(w)->Close(deadline);
  }
}

RemoteP2p::Link &RemoteP2p::Get(const Key &key) {
  auto &slot = links_[key];
  if (!slot) {
    slot = std::make_unique<Link>();
    slot->peer = key.first;
    slot->dir = key.second;
  }
  return *slot;
}

Status RemoteP2p::Open(Link &link, Clock::time_point deadline) {
  if (comm_.group() == nullptr) {
    // Every communicator that spans servers has them (its own, or a view of its parent's).
    return Error(HCCL_E_INTERNAL,
                 "rank {} is on another server but the communicator has no connections between "
                 "its servers",
                 link.peer);
  }
  const uint32_t me = comm_.rank(), lo = std::min(me, link.peer), hi = std::max(me, link.peer);
  const uint32_t sender = link.dir == P2pItem::kSend ? me : link.peer;
  auto wire = transport::Wire::Open(
      *comm_.group(), {lo, hi},
      {.tags = sender == lo ? kUpTags : kDownTags, .slots = kSlots, .net = {}}, deadline);
  if (!wire.ok()) {
    if (wire.status().code() == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "rank {} (another server) made no matching {} within HCCL_EXEC_TIMEOUT ({} s) "
                   "(opening their link: {})",
                   link.peer, link.dir == P2pItem::kSend ? "receive" : "send",
                   comm_.ExecTimeout().count(), wire.status().message());
    }
    return Error(wire.status().code(), "opening {}: {}", link.Name(), wire.status().message());
  }
  link.wire = std::move(*wire);
  link.watch = std::make_unique<WireWatch>(link.wire.get());
  LogDebug("p2p: rank {} opened {}", me, link.Name());
  return Status::Ok();
}

Status RemoteP2p::Send(Link &link, const P2pItem &item, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(link.Drain(deadline));
  const Word h{.seq = ++link.seq, .code = kMatch, .count = item.count, .dtype = item.dtype};
  HZC_RETURN_IF_ERROR(link.Put(h, deadline));
  auto a = link.Take(h.seq, deadline);
  if (!a.ok()) {
    return a.status();
  }
  if (a->code == kRefused) {
    return Error(HCCL_E_PARA,
                 "rank {} (another server) refused the matching receive: its arguments failed "
                 "its own checks (see its log); nothing was moved",
                 item.peer);
  }
  if (a->code != kMatch) {
    return Error(HCCL_E_PARA,
                 "rank {} (another server) receives count={} dataType={} where this rank sends "
                 "count={} dataType={}; nothing was moved",
                 item.peer, a->count, a->dtype, item.count, static_cast<int>(item.dtype));
  }
  std::vector<transport::Wire::Out> out(2);
  out[link.other()] = {.data = static_cast<const uint8_t *>(item.buf),
                       .len = item.count * TypeSize(item.dtype)};
  MarkRegions(&out);
  return link.wire->Transfer(out, std::vector<size_t>(2), Link::Ignore, deadline);
}

Status RemoteP2p::Recv(Link &link, const P2pItem &item, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(link.Drain(deadline));
  auto h = link.Take(++link.seq, deadline);
  if (!h.ok()) {
    return h.status();
  }
  Word a{.seq = h->seq, .code = kMatch, .count = item.count, .dtype = item.dtype};
  Status verdict;
  if (h->code == kRefused) {
    a.code = kRefused;  // read and dropped by the sender's next message
    verdict = Error(HCCL_E_PARA,
                    "rank {} (another server) refused the matching send: its arguments failed "
                    "its own checks (see its log); nothing was moved",
                    item.peer);
  } else if (h->count != item.count || h->dtype != static_cast<uint64_t>(item.dtype)) {
    a.code = kMismatch;
    verdict = Error(HCCL_E_PARA,
                    "rank {} (another server) sends count={} dataType={} where this rank receives "
                    "count={} dataType={}; nothing was moved",
                    item.peer, h->count, h->dtype, item.count, static_cast<int>(item.dtype));
  }
  HZC_RETURN_IF_ERROR(link.Put(a, deadline));
  HZC_RETURN_IF_ERROR(verdict);
  std::vector<size_t> in(2);
  in[link.other()] = item.count * TypeSize(item.dtype);
  std::vector<uint8_t *> into(2);
  into[link.other()] = static_cast<uint8_t *>(item.buf);
  return link.wire->Transfer(std::vector<transport::Wire::Out>(2), in, Link::Ignore, deadline,
                             Places(into, in));
}

Status RemoteP2p::RunOne(Link &link, const P2pItem &item, Clock::time_point deadline) {
  if (!link.broken.ok()) {
    return Error(HCCL_E_REMOTE, "{} broke earlier ({}); destroy the communicator", link.Name(),
                 link.broken.message());
  }
  if (!link.wire) {
    HZC_RETURN_IF_ERROR(Open(link, deadline));  // a failed opening is tried again next time
  }
  Status st = item.dir == P2pItem::kSend ? Send(link, item, deadline) : Recv(link, item, deadline);
  if (!st.ok() && st.code() != HCCL_E_PARA) {
    // Half-way: the peer's wait ends now, not at its timeout.
    link.wire->Abort(static_cast<HcclResult>(st.code()));
    link.broken = st;
  }
  return st;
}

void RemoteP2p::Run(const std::vector<P2pItem> &items, std::vector<Status> *results,
                    Clock::time_point deadline) {
  results->assign(items.size(), Status::Ok());
  // The items of each (peer, direction), in list order.
  std::map<Key, std::vector<size_t>> groups;
  for (size_t i = 0; i < items.size(); ++i) {
    groups[{items[i].peer, items[i].dir}].push_back(i);
  }
  auto run = [&](Link *link, const std::vector<size_t> *which) {
    for (size_t i : *which) {
      (*results)[i] = RunOne(*link, items[i], deadline);
    }
  };
  std::vector<std::thread> threads;
  for (const auto &[key, which] : groups) {
    Link *link = &Get(key);
    if (&which == &groups.rbegin()->second) {
      run(link, &which);  // the last on this thread
    } else {
      threads.emplace_back(run, link, &which);
    }
  }
  for (std::thread &t : threads) {
    t.join();
  }
}

std::vector<uint32_t> RemoteP2p::Refuse(const std::vector<P2pItem> &items,
                                        Clock::time_point deadline) {
  std::vector<uint32_t> told;
  for (const P2pItem &item : items) {
    if (item.dir == P2pItem::kInvalid || item.peer >= comm_.size()) {
      continue;
    }
    auto it = links_.find({item.peer, item.dir});
    if (it == links_.end() || !it->second->wire || !it->second->broken.ok()) {
      continue;  // no wire: the peer times out
    }
    Link &link = *it->second;
    Word w{.seq = ++link.seq, .code = kRefused};
    if (Status st = link.Put(w, deadline); !st.ok()) {
      link.wire->Abort(static_cast<HcclResult>(st.code()));
      link.broken = st;
      LogWarn("p2p: the refusal did not reach rank {}: {}", item.peer, st.message());
      continue;
    }
    ++link.pending;
    told.push_back(item.peer);
  }
  return told;
}

}  // namespace hzc::coll
