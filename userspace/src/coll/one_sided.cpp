// SPDX-License-Identifier: Apache-2.0
#include "coll/one_sided.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/log.h"
#include "base/rollback.h"
#include "base/unique_fd.h"
#include "bootstrap/auth.h"
#include "bootstrap/group.h"
#include "bootstrap/local_exchange.h"
#include "coll/guard.h"
#include "coll/one_sided_wire.h"
#include "coll/reduce.h"
#include "transport/socket_window.h"
#include "transport/transport.h"
#include "verbs/links.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

// Tag of the exchange's messages on the group's connections (span.cpp, p2p_wire.cpp and the
// wires use others).
constexpr uint32_t kDescTag = 0x4000;
// How a pair inside a server reaches each other (State::via; across servers kOverRdma or
// kOverTcp): through the peer mappings.
constexpr uint32_t kInServer = 4;
// Host memory HCCL registers at most.
constexpr uint64_t kMaxSize = uint64_t{1} << 40;

// What a batch of this rank holds while it may still run (queued on a stream, or running on
// another thread): a copy of each registration's and enabled span's Use. HcclDeregisterMem and
// HcclDisableMemAccess refuse one that is held (HCCL_E_AGAIN): once they return, no batch of
// this rank reaches the span any more.
using Use = std::shared_ptr<const bool>;

bool Held(const Use &use) {
  return use.use_count() > 1;
}

struct Registration {
  uint64_t id;
  uint32_t peer;
  uint64_t addr, size;
  uint32_t refs;
  // Over RDMA, by peer: the memory region for requests to and from it (RegionFor); none
  // inside a server or over TCP.
  std::map<uint32_t, std::shared_ptr<const verbs::MemoryRegion>> regions;
  Use use = std::make_shared<const bool>();
};

struct Enabled {
  uint64_t id;
  uint64_t addr, size;
  uint32_t rkey;
  Use use = std::make_shared<const bool>();
};

// Global memory (HcclRegisterGlobalMem) by handle; a handle is a number never reused.
struct Global {
  HcclMemType type;
  void *addr;
  uint64_t size;
  uint32_t binds;  // communicators that bind it
};
struct Globals {
  std::mutex mutex;
  std::map<uintptr_t, Global> by_handle;
  uintptr_t next = 0x676d0001;
};
Globals &GlobalsOf() {
  static Globals *g = new Globals;  // never destroyed: communicators may outlive static objects
  return *g;
}

// A global memory handle bound to a communicator, and the registration HcclCommPrepare made of
// it (for every peer).
struct Bound {
  uintptr_t handle;
  std::vector<uint64_t> registrations;
};

struct State : Communicator::CollState {
  ~State() override {
    Globals &g = GlobalsOf();
    std::lock_guard lock(g.mutex);
    for (const Bound &b : bound) {
      if (auto it = g.by_handle.find(b.handle); it != g.by_handle.end()) {
        --it->second.binds;
      }
    }
  }
  // A communicator that spans servers reaches every peer over RDMA or TCP, as the pair agrees
  // (Link); one of one server through the peer mappings (the communicator's PeerMemory).
  bool spanning = false;
  bool local() const { return !spanning; }
  uint32_t kinds = 0;  // the kinds of link this rank can make (kOverRdma, kOverTcp)
  // With an RDMA device (HZC_NET auto or rdma): the queue pairs.
  std::unique_ptr<verbs::Links> links;
  // TCP connections and a service thread (transport/socket_window.h): opened with the first
  // pair that links over TCP (at once without RDMA).
  std::unique_ptr<transport::SocketWindows> sockets;
  // By rank: how the pair reaches each other once it is ready for transfers (kOverRdma,
  // kOverTcp, kInServer; 0: not yet), whether this rank offered it its kinds (once per pair),
  // and why linking with it failed (the pair stays unusable).
  std::vector<uint32_t> via;
  bool ready(uint32_t peer) const { return via[peer] != 0; }
  std::vector<bool> offered;
  std::vector<Status> failed;
  uint64_t tag = 0;
  uint64_t next_id = 1;
  std::vector<Registration> mine;
  std::vector<std::vector<Enabled>> enabled;  // by rank
  std::vector<Bound> bound;
  bool prepared = false;
};

// The communicator's tag in descriptors: derived from its key, telling nothing of it
// (bootstrap/auth.h).
uint64_t CommTag(const Communicator &comm) {
  const bootstrap::UniqueId keyed = bootstrap::KeyedId(comm.id(), "hzc-one-sided");
  uint64_t tag = 0;
  std::memcpy(&tag, keyed.data(), sizeof(tag));
  return tag;
}

Status CheckPeer(const Communicator &comm, uint32_t peer, const char *name) {
  if (peer >= comm.size()) {
    return Error(HCCL_E_PARA, "{}={}: the communicator has {} ranks", name, peer, comm.size());
  }
  if (peer == comm.rank()) {
    return Error(HCCL_E_PARA, "{}={}: the calling rank itself", name, peer);
  }
  return Status::Ok();
}

// The other ranks' addresses ("host:port" of their communicator connections): the hosts whose
// connections the TCP one-sided service serves before any other's.
std::vector<std::string> PeerAddresses(const Communicator &comm) {
  std::vector<std::string> out;
  for (uint32_t r = 0; r < comm.size(); ++r) {
    if (r != comm.rank()) {
      out.push_back(comm.group()->Address(r));
    }
  }
  return out;
}

// The communicator's state, made with its links on first use (under the one-sided mutex).
// Inside a server (a communicator of one server) the state has no links.
Expected<State *> GetState(Communicator &comm) {
  auto &slot = comm.one_sided_state();
  if (slot) {
    return static_cast<State *>(slot.get());
  }
  auto state = std::make_unique<State>();
  if (comm.group() != nullptr) {
    // RDMA with the peers that have it too (HZC_NET auto or rdma), else TCP (auto or socket).
    const NetChoice net = GetConfig().net;
    state->spanning = true;
    if (net != NetChoice::kSocket) {
      auto links =
          verbs::Links::OpenLazy(comm.rank(), comm.size(), verbs::LinkOptions::BetweenServers());
      if (!links.ok()) {
        return links.status();
      }
      if (!*links && net == NetChoice::kRdma) {
        return Error(HCCL_E_NOT_SUPPORT,
                     "HZC_NET=rdma and this server has no RDMA device with an active port");
      }
      state->links = std::move(*links);
    }
    if (!state->links) {
      auto sockets = transport::SocketWindows::Open(
          comm.rank(), comm.size(), comm.group()->Address(comm.rank()), PeerAddresses(comm));
      HZC_RETURN_IF_ERROR(sockets.status());
      state->sockets = std::move(*sockets);
    }
    state->kinds = (state->links ? kOverRdma : 0) | (net != NetChoice::kRdma ? kOverTcp : 0);
  }
  state->tag = CommTag(comm);
  state->via.assign(comm.size(), 0);
  state->offered.assign(comm.size(), false);
  state->failed.assign(comm.size(), Status::Ok());
  state->enabled.resize(comm.size());
  State *s = state.get();
  slot = std::move(state);
  return s;
}

Clock::time_point ExchangeDeadline(int timeout) {
  if (timeout < 0) {
    return Clock::now() + std::chrono::hours(24 * 365 * 100);  // no limit, yet safe to add to
  }
  const std::chrono::seconds t =
      timeout == 0 ? GetConfig().connect_timeout : std::chrono::seconds(timeout);
  return Clock::now() + t;
}

// The checks of HcclRegisterMem's own arguments but @peer's.
Status CheckSpan(int type, const void *addr, uint64_t size) {
  if (type != HCCL_MEM_TYPE_DEVICE && type != HCCL_MEM_TYPE_HOST) {
    return Error(HCCL_E_PARA, "type={}: not HCCL_MEM_TYPE_DEVICE (0) or HCCL_MEM_TYPE_HOST (1)",
                 type);
  }
  if (size == 0 || size > kMaxSize) {
    return Error(HCCL_E_PARA, "size={}: not in 1 to {} bytes", size, kMaxSize);
  }
  if (reinterpret_cast<uintptr_t>(addr) > UINTPTR_MAX - size) {
    return Error(HCCL_E_PARA, "addr={} size={}: the span wraps around", addr, size);
  }
  return Status::Ok();
}

// Registrations HcclCommPrepare makes of bound memory are for every peer.
constexpr uint32_t kAnyPeer = UINT32_MAX;

// Inside a server: HCCL_E_NOT_SUPPORT unless [addr, addr + size) lies in memory this process
// activated (the only memory its peers can map).
Status CheckReachable(Communicator &comm, const void *addr, uint64_t size) {
  transport::PeerMemory *pm = comm.peer_memory();
  if (pm == nullptr) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "addr={}: inside a server, peers reach only activated memory, through the "
                 "communicator's links to their memory, and this communicator has none yet "
                 "(HcclCommSetMemoryRange on it links them)",
                 addr);
  }
  if (!pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(addr), size).ok()) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "addr={} size={}: not within memory activated for this server's ranks "
                 "(HcclCommActivateCommMemory, HcclCommSymWinRegister): inside a server, peers "
                 "reach only that",
                 addr, size);
  }
  return Status::Ok();
}

// The memory region of @r for requests to and from @peer over RDMA, made at its first use in
// @peer's protection domain (verbs::LinkOptions::domain_per_peer): the peer may reach it (its
// key is in @r's descriptor for it) when @r is for it or for every peer; else it serves only this
// rank's own requests to @peer (a transfer's local span may lie in a registration for another
// peer). No other peer can use it, whatever key it learns.
Expected<const verbs::MemoryRegion *> RegionFor(const State &s, Registration &r, uint32_t peer) {
  auto it = r.regions.find(peer);
  if (it == r.regions.end()) {
    const bool remote = r.peer == peer || r.peer == kAnyPeer;
    auto mr = s.links->RegisterFor(peer, reinterpret_cast<void *>(static_cast<uintptr_t>(r.addr)),
                                   r.size, remote);
    HZC_RETURN_IF_ERROR(mr.status());
    it = r.regions.emplace(peer, std::move(*mr)).first;
  }
  return it->second.get();
}

// One more count of the registration of [addr, addr + size) for @peer (kAnyPeer: for every
// peer), made if there is none (over RDMA with its memory region for @peer: RegionFor).
Expected<Registration *> Hold(Communicator &comm, State &s, uint32_t peer, void *addr,
                              uint64_t size) {
  const auto va = reinterpret_cast<uint64_t>(addr);
  auto same = std::find_if(s.mine.begin(), s.mine.end(), [&](const Registration &r) {
    return r.peer == peer && r.addr == va && r.size == size;
  });
  if (same == s.mine.end()) {
    if (s.mine.size() >= kOneSidedMax) {
      return Error(HCCL_E_UNAVAIL, "the communicator holds {} registrations already, the most",
                   s.mine.size());
    }
    Registration fresh{.id = s.next_id++,
                       .peer = peer,
                       .addr = va,
                       .size = size,
                       .refs = 0,
                       .regions = {},
                       .use = std::make_shared<const bool>()};
    if (s.links && peer != kAnyPeer) {
      // Fails here rather than at a batch (one used as a transfer's local side to another peer
      // gets a region for that peer at that batch).
      HZC_RETURN_IF_ERROR(RegionFor(s, fresh, peer).status());
    } else if (s.local()) {
      HZC_RETURN_IF_ERROR(CheckReachable(comm, addr, size));
    }
    if (s.sockets) {
      s.sockets->Expose(fresh.id, peer == kAnyPeer ? transport::SocketWindows::kAnyPeer : peer, va,
                        size);
    }
    s.mine.push_back(std::move(fresh));
    same = s.mine.end() - 1;
  }
  ++same->refs;
  return &*same;
}

// The descriptor of @r for @peer (over RDMA with the key of its region for @peer).
Status Describe(const State &s, const Communicator &comm, Registration &r, uint32_t peer,
                HcclMemDesc *desc) {
  uint32_t rkey = 0;
  if (s.links && s.via[peer] != kOverTcp) {  // before the pair links: RDMA may be its kind
    auto region = RegionFor(s, r, peer);
    HZC_RETURN_IF_ERROR(region.status());
    rkey = (*region)->rkey();
  }
  Desc d{};
  std::memcpy(d.magic, Desc::kMagic, sizeof(d.magic));
  d.version = Desc::kVersion;
  d.owner = comm.rank();
  d.peer = peer;
  d.rkey = rkey;
  d.comm_tag = s.tag;
  d.id = r.id;
  d.addr = r.addr;
  d.size = r.size;
  std::memset(desc->desc, 0, sizeof(desc->desc));
  std::memcpy(desc->desc, &d, sizeof(d));
  return Status::Ok();
}

std::vector<Registration>::iterator FindRegistration(State &s, uint64_t id) {
  return std::find_if(s.mine.begin(), s.mine.end(),
                      [&](const Registration &r) { return r.id == id; });
}

// HCCL_E_AGAIN naming @what when dropping a count of registration @id would end it while a batch
// of this rank holds it.
Status CheckDroppable(State &s, uint64_t id, const char *what) {
  auto it = FindRegistration(s, id);
  if (it != s.mine.end() && it->refs == 1 && Held(it->use)) {
    return Error(HCCL_E_AGAIN,
                 "{}: a batch of this rank that is still queued or running uses its {} bytes at "
                 "{:#x}; synchronize that stream first (nothing was released)",
                 what, it->size, it->addr);
  }
  return Status::Ok();
}

// Drop one count of registration @id; HCCL_E_NOT_FOUND naming @what when there is none,
// HCCL_E_AGAIN when it would end while a batch of this rank holds it (CheckDroppable). The last
// count revokes the peers' access before this returns: the region is deregistered (over TCP the
// span withdrawn).
Status Drop(State &s, uint64_t id, const char *what) {
  auto it = FindRegistration(s, id);
  if (it == s.mine.end()) {
    return Error(HCCL_E_NOT_FOUND, "{}: registration {} is not registered", what, id);
  }
  HZC_RETURN_IF_ERROR(CheckDroppable(s, id, what));
  if (--it->refs == 0) {
    if (s.sockets) {
      s.sockets->Withdraw(id);  // no peer's request touches it once this returns
    }
    s.mine.erase(it);  // no batch holds the region: it is deregistered here
  }
  return Status::Ok();
}

// The TCP service of @s, opened if it is not yet; the registrations made before are exposed to
// it.
Status OpenSockets(State &s, const Communicator &comm) {
  if (s.sockets) {
    return Status::Ok();
  }
  auto sockets = transport::SocketWindows::Open(
      comm.rank(), comm.size(), comm.group()->Address(comm.rank()), PeerAddresses(comm));
  HZC_RETURN_IF_ERROR(sockets.status());
  s.sockets = std::move(*sockets);
  for (const Registration &r : s.mine) {
    s.sockets->Expose(r.id, r.peer == kAnyPeer ? transport::SocketWindows::kAnyPeer : r.peer,
                      r.addr, r.size);
  }
  return Status::Ok();
}

// This rank's card for @peer over @kind (set up here: a queue pair, or a TCP token).
Expected<std::vector<std::byte>> Card(State &s, const Communicator &comm, uint32_t peer,
                                      uint32_t kind) {
  ExchangeHeader mine;
  if (kind == kOverRdma) {
    auto qp = s.links->AddPeer(peer);
    HZC_RETURN_IF_ERROR(qp.status());
    mine.has_link = ExchangeHeader::kRdmaCard;
    mine.port = s.links->Header();
    mine.qp = *qp;
    return Message(mine);
  }
  HZC_RETURN_IF_ERROR(OpenSockets(s, comm));
  auto card = s.sockets->CardFor(peer);
  HZC_RETURN_IF_ERROR(card.status());
  mine.has_link = ExchangeHeader::kSocketCard;
  return Message(mine, std::as_bytes(std::span(&*card, 1)));
}

// A pair on its way to being linked (Link).
struct LinkPair {
  uint32_t peer = 0;
  uint32_t kind = 0;    // what the pair agreed on
  Status st;            // its first failure
  bool heard = false;   // the peer's offer came
  bool carded = false;  // this rank sent its card (or gave up): the peer's is to be received
  void Fail(Status why) {
    if (st.ok()) {
      st = std::move(why);
    }
  }
};

// Receive @f.peer's offer and agree on the kind of link.
void TakeOffer(const State &s, const Communicator &comm, LinkPair &f, Clock::time_point deadline) {
  auto offer = comm.group()->Recv(f.peer, kDescTag + 2, deadline);
  if (!offer.ok()) {
    f.Fail(offer.status());  // not heard from: no card either (it may still come in time)
    return;
  }
  f.heard = f.carded = true;  // from here on the peer waits for a card
  auto kind = ParseOffer(*offer, f.peer);
  if (kind.ok()) {
    kind = ChooseLink(s.kinds, *kind, f.peer);
  }
  if (!kind.ok()) {
    f.Fail(kind.status());
    return;
  }
  f.kind = *kind;
  LogDebug("one-sided: rank {} links with rank {} over {}", comm.rank(), f.peer,
           f.kind == kOverRdma ? "RDMA" : "TCP");
}

// Send @f.peer this rank's card of the agreed kind, or word that it gave up.
void SendCard(State &s, const Communicator &comm, LinkPair &f, Clock::time_point deadline) {
  Expected<std::vector<std::byte>> card = GiveUp();
  if (f.st.ok()) {
    card = Card(s, comm, f.peer, f.kind);
    if (!card.ok()) {
      f.Fail(card.status());
      card = GiveUp();
    }
  }
  if (Status st = comm.group()->Send(f.peer, kDescTag + 1, *card, deadline); !st.ok()) {
    f.Fail(st);
    f.carded = false;  // nothing to wait for either
  }
}

// Receive @f.peer's card and connect with it (unless the pair failed already).
void TakeCard(State &s, const Communicator &comm, LinkPair &f, Clock::time_point deadline) {
  bootstrap::Group &group = *comm.group();
  auto theirs = group.Recv(f.peer, kDescTag + 1, deadline);
  if (!theirs.ok() || !f.st.ok()) {
    f.Fail(theirs.status());
    return;
  }
  auto card = ParseLinkCard(*theirs, f.peer, f.kind == kOverRdma);
  Status st = card.status();
  if (st.ok() && f.kind == kOverRdma) {
    st = s.links->ConnectPeer(f.peer, card->header.port, card->header.qp);
  } else if (st.ok()) {
    st = s.sockets->Connect(f.peer, group.Address(f.peer), card->socket, deadline);
  }
  f.Fail(st);
}

// Link this rank with @peers (those not linked yet): first each pair offers the other the kinds
// it can make (once) and takes RDMA when both can, else TCP (ChooseLink); then each sends the
// other its card of that kind, or word that it gave up (GiveUp), so that a failure on one side
// fails the other at once instead of leaving it waiting. Every message of a round is sent before
// any is received (the group reads while it writes: no pair waits for another). A pair that
// failed once stays unusable (its first failure is returned again); the first failure among
// @peers is returned once every pair is done.
Status Link(State &s, const Communicator &comm, std::span<const uint32_t> peers,
            Clock::time_point deadline) {
  std::vector<LinkPair> fresh;
  for (uint32_t p : peers) {
    if (s.ready(p)) {
      continue;
    }
    if (!s.failed[p].ok()) {
      return Error(s.failed[p].code(), "rank {}: its link failed before: {}", p,
                   s.failed[p].message());
    }
    if (!s.offered[p]) {
      HZC_RETURN_IF_ERROR(comm.group()->Send(p, kDescTag + 2, Offer(s.kinds), deadline));
      s.offered[p] = true;
    }
    fresh.emplace_back().peer = p;
  }
  for (LinkPair &f : fresh) {
    TakeOffer(s, comm, f, deadline);
  }
  for (LinkPair &f : fresh) {
    if (f.carded) {
      SendCard(s, comm, f, deadline);
    }
  }
  Status first;
  for (LinkPair &f : fresh) {
    if (f.carded) {
      TakeCard(s, comm, f, deadline);
    }
    if (f.st.ok()) {
      s.via[f.peer] = f.kind;
    } else if (f.heard) {
      s.failed[f.peer] = f.st;  // the pair went too far to start again
    }
    if (first.ok() && !f.st.ok()) {
      first = f.st;
    }
  }
  return first;
}

// The exchange's message of @descs.
std::vector<std::byte> DescMessage(std::span<const HcclMemDesc> descs) {
  ExchangeHeader mine;
  mine.count = static_cast<uint32_t>(descs.size());
  return Message(mine, std::as_bytes(descs));
}

// The longest message of an exchange.
constexpr size_t kMaxMessage = sizeof(ExchangeHeader) + kDescsPerMessage * sizeof(HcclMemDesc);

// Inside a server: swap @descs for @peer's over two hand-offs of a memfd on the pair's abstract
// Unix socket (bootstrap/local_exchange.h: same uid checked), the lower rank's first. The pair's
// exchanges follow each other under the same names (a hand-off's socket is gone once it is
// done). What the peer hands over must be a memfd no longer than the longest message; it is
// copied out before it is parsed (the peer may still write it).
Expected<std::vector<HcclMemDesc>> SwapLocal(const Communicator &comm, uint32_t peer,
                                             std::span<const HcclMemDesc> descs,
                                             Clock::time_point deadline) {
  const uint32_t me = comm.rank(), lo = std::min(me, peer), hi = std::max(me, peer);
  const std::string name = "hzc-os-" + bootstrap::SecretName(comm.id()) + "-" + std::to_string(lo) +
                           "-" + std::to_string(hi) + "-";
  const std::vector<std::byte> out = DescMessage(descs);
  UniqueFd fd(static_cast<int>(::memfd_create("hzc-one-sided", MFD_CLOEXEC)));
  if (!fd.valid() ||
      ::write(fd.get(), out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
    return Error(HCCL_E_SYSCALL, "memfd for the descriptors: {}", ErrnoString(errno));
  }
  auto hand_off = [&](uint32_t giver) {
    return bootstrap::LocalExchange{.name = name + std::to_string(giver),
                                    .rank = me == giver ? 0u : 1u,
                                    .nranks = 2,
                                    .deadline = deadline,
                                    .arrival = "call HcclExchangeMemDesc with this rank in time"};
  };
  Expected<bootstrap::HandedDescriptor> theirs = Error(HCCL_E_INTERNAL, "no hand-off");
  for (uint32_t giver : {lo, hi}) {
    if (giver == me) {
      HZC_RETURN_IF_ERROR(bootstrap::GiveDescriptor(hand_off(giver), fd.get(), out.size()));
    } else {
      theirs = bootstrap::TakeDescriptor(hand_off(giver));
      HZC_RETURN_IF_ERROR(theirs.status());
    }
  }
  struct stat st {};
  if (::fcntl(theirs->fd.get(), F_GET_SEALS) < 0 || ::fstat(theirs->fd.get(), &st) != 0 ||
      !S_ISREG(st.st_mode) || st.st_size < 0 || static_cast<size_t>(st.st_size) > kMaxMessage) {
    return Error(HCCL_E_REMOTE, "rank {} handed over something other than its descriptors", peer);
  }
  std::vector<std::byte> in(static_cast<size_t>(st.st_size));
  if (::pread(theirs->fd.get(), in.data(), in.size(), 0) != static_cast<ssize_t>(in.size())) {
    return Error(HCCL_E_REMOTE, "rank {}'s descriptors could not be read", peer);
  }
  return ParseDescMessage(in, peer);
}

// Swap @descs for @peer's (both ranks call it with each other): across servers on the group's
// connections, after linking the pair's queue pairs if they are not yet; inside a server through
// SwapLocal. The pair is ready for transfers once it returns.
Expected<std::vector<HcclMemDesc>> Swap(const Communicator &comm, State &s, uint32_t peer,
                                        std::span<const HcclMemDesc> descs,
                                        Clock::time_point deadline) {
  if (s.local()) {
    auto theirs = SwapLocal(comm, peer, descs, deadline);
    if (theirs.ok()) {
      s.via[peer] = kInServer;
    }
    return theirs;
  }
  bootstrap::Group &group = *comm.group();
  HZC_RETURN_IF_ERROR(Link(s, comm, std::span(&peer, 1), deadline));
  HZC_RETURN_IF_ERROR(group.Send(peer, kDescTag, DescMessage(descs), deadline));
  auto in = group.Recv(peer, kDescTag, deadline);
  HZC_RETURN_IF_ERROR(in.status());
  return ParseDescMessage(*in, peer);
}

// Enable @desc (a peer's, untrusted) for this rank; its span in *@mem.
Status Enable(State &s, const Communicator &comm, const HcclMemDesc &desc, HcclMem *mem) {
  const std::optional<Desc> d = ParseDesc(desc);
  if (!d) {
    return Error(HCCL_E_PARA, "remoteMemDesc: not a memory descriptor");
  }
  HZC_RETURN_IF_ERROR(CheckRemoteDesc(*d, s.tag, comm.rank(), comm.size()));
  if (!s.ready(d->owner)) {
    return Error(HCCL_E_PARA, "remoteMemDesc: rank {} never exchanged descriptors with this rank",
                 d->owner);
  }
  if (s.local()) {
    transport::PeerMemory *pm = comm.peer_memory();
    if (pm == nullptr || !pm->Translate(d->owner, d->addr, d->size).ok()) {
      return Error(HCCL_E_PARA,
                   "remoteMemDesc: rank {}'s {} bytes at {:#x} are not in memory it activated",
                   d->owner, d->size, d->addr);
    }
  }
  // The same registration once; spans of different registrations of a rank may overlap (a
  // transfer takes the newest that holds it: CheckOp).
  auto &enabled = s.enabled[d->owner];
  if (enabled.size() >= kOneSidedMax) {
    return Error(HCCL_E_UNAVAIL,
                 "remoteMemDesc: {} spans of rank {} are enabled already, the most "
                 "(HcclDisableMemAccess first)",
                 enabled.size(), d->owner);
  }
  for (const Enabled &e : enabled) {
    if (e.id == d->id) {
      return Error(HCCL_E_PARA,
                   "remoteMemDesc: rank {}'s registration {} ({} bytes at {:#x}) is enabled "
                   "already",
                   d->owner, d->id, d->size, d->addr);
    }
  }
  enabled.push_back({.id = d->id, .addr = d->addr, .size = d->size, .rkey = d->rkey});
  if (mem != nullptr) {
    mem->type = HCCL_MEM_TYPE_HOST;
    mem->addr = reinterpret_cast<void *>(d->addr);
    mem->size = d->size;
  }
  return Status::Ok();
}

// A transfer inside a server: @bytes between this rank's @local and the peer's @remote.
struct LocalCopy {
  size_t index;  // in the batch
  void *local;
  uint64_t remote;
  uint64_t bytes;
};

// Run @copies with rank @peer through the communicator's peer mappings (put: into the peer's
// memory), guarded: memory the peer deactivated since, or a peer that died, is HCCL_E_REMOTE
// naming the transfer, not a crash.
Status CopyLocal(Communicator &comm, uint32_t peer, const std::vector<LocalCopy> &copies,
                 bool put) {
  transport::PeerMemory *pm = comm.peer_memory();
  std::vector<Span> spans;
  std::vector<uint8_t *> at;
  for (const LocalCopy &c : copies) {
    auto p = pm->Translate(peer, c.remote, c.bytes);
    if (!p.ok()) {
      return Error(HCCL_E_REMOTE, "desc[{}]: rank {} no longer exposes it: {}", c.index, peer,
                   p.status().message());
    }
    at.push_back(static_cast<uint8_t *>(*p));
    spans.push_back({.begin = reinterpret_cast<uintptr_t>(*p),
                     .end = reinterpret_cast<uintptr_t>(*p) + c.bytes,
                     .rank = peer});
  }
  const Fault f = RunGuarded(spans, [&] {
    for (size_t i = 0; i < copies.size(); ++i) {
      if (put) {
        std::memcpy(at[i], copies[i].local, copies[i].bytes);
      } else {
        std::memcpy(copies[i].local, at[i], copies[i].bytes);
      }
    }
  });
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s memory became inaccessible during the batch (deactivated, unset or "
                 "the rank died): fault at {:#x} of its peer mapping",
                 peer, f.address);
  }
  return Status::Ok();
}

// HcclCommPrepare's swap of @mine[p] with every peer p of @peers, enabling what they send; across
// servers after Link, whose outcome (or a failure since) is @ready: when it is an error, the
// peers linked with are told that this rank gave up, and it is returned.
Status SwapAll(Communicator &comm, State &s, std::span<const uint32_t> peers,
               const std::vector<std::vector<HcclMemDesc>> &mine, const Status &ready,
               Clock::time_point deadline) {
  auto take = [&](uint32_t p, const std::vector<HcclMemDesc> &theirs) -> Status {
    for (const HcclMemDesc &d : theirs) {
      Status st = Enable(s, comm, d, nullptr);
      if (!st.ok()) {
        return Error(HCCL_E_REMOTE, "rank {} sent a descriptor this rank cannot enable: {}", p,
                     st.message());
      }
    }
    return Status::Ok();
  };
  if (s.local()) {
    HZC_RETURN_IF_ERROR(ready);
    // Pair by pair in the order of the pairs' lower, then higher rank on every rank, so that
    // the pairwise hand-offs never wait in a circle.
    for (uint32_t p : peers) {
      auto theirs = Swap(comm, s, p, mine[p], deadline);
      HZC_RETURN_IF_ERROR(theirs.status());
      HZC_RETURN_IF_ERROR(take(p, *theirs));
    }
    return Status::Ok();
  }
  bootstrap::Group &group = *comm.group();
  // Every peer linked with gets this rank's descriptors, or word that it gave up (a link with
  // another peer failed, or its memory could not be registered), so that none waits for them.
  for (uint32_t p : peers) {
    if (s.ready(p)) {
      HZC_RETURN_IF_ERROR(
          group.Send(p, kDescTag, ready.ok() ? DescMessage(mine[p]) : GiveUp(), deadline));
    }
  }
  HZC_RETURN_IF_ERROR(ready);
  for (uint32_t p : peers) {
    auto in = group.Recv(p, kDescTag, deadline);
    HZC_RETURN_IF_ERROR(in.status());
    auto theirs = ParseDescMessage(*in, p);
    HZC_RETURN_IF_ERROR(theirs.status());
    HZC_RETURN_IF_ERROR(take(p, *theirs));
  }
  return Status::Ok();
}

// A transfer of a batch, checked: its bytes, its local registration and the peer's span.
struct Checked {
  uint64_t bytes = 0;  // 0: nothing to move
  Registration *mine = nullptr;
  const Enabled *theirs = nullptr;
};

// Check transfer @i (@op) of a batch to @peer against the state.
Expected<Checked> CheckOp(State &s, uint32_t peer, size_t i, const HcclOneSideOpDesc &op) {
  const size_t type = TypeSize(op.dataType);
  if (type == 0) {
    return Error(HCCL_E_PARA, "desc[{}].dataType={}: not an HcclDataType", i,
                 static_cast<int>(op.dataType));
  }
  if (op.count == 0) {
    return Checked{};
  }
  if (op.localAddr == nullptr || op.remoteAddr == nullptr) {
    return Error(HCCL_E_PTR, "desc[{}]: {} is null", i,
                 op.localAddr == nullptr ? "localAddr" : "remoteAddr");
  }
  if (op.count > UINT64_MAX / type) {
    return Error(HCCL_E_PARA, "desc[{}].count={}: too many elements", i, op.count);
  }
  const uint64_t bytes = op.count * type;
  const auto local = reinterpret_cast<uint64_t>(op.localAddr);
  const auto remote = reinterpret_cast<uint64_t>(op.remoteAddr);
  if (local > UINT64_MAX - bytes || remote > UINT64_MAX - bytes) {
    return Error(HCCL_E_PARA, "desc[{}]: a span of {} bytes wraps around", i, bytes);
  }
  const Enabled *e = nullptr;  // the newest registration of the peer that holds the span
  for (const Enabled &x : s.enabled[peer]) {
    if (remote >= x.addr && remote + bytes <= x.addr + x.size && (e == nullptr || x.id > e->id)) {
      e = &x;
    }
  }
  if (e == nullptr) {
    return Error(HCCL_E_PARA,
                 "desc[{}]: remoteAddr={} + {} bytes is not within memory of rank {} that this "
                 "rank enabled",
                 i, op.remoteAddr, bytes, peer);
  }
  // Among the registrations that hold the local span, one for this peer (or every peer), or one
  // with a region for it already, rather than one more region (RegionFor).
  auto holds = [&](const Registration &r) {
    return local >= r.addr && local + bytes <= r.addr + r.size;
  };
  auto m = std::find_if(s.mine.begin(), s.mine.end(), [&](const Registration &r) {
    return holds(r) && (r.peer == peer || r.peer == kAnyPeer || r.regions.contains(peer));
  });
  if (m == s.mine.end()) {
    m = std::find_if(s.mine.begin(), s.mine.end(), holds);
  }
  if (m == s.mine.end()) {
    return Error(HCCL_E_PARA,
                 "desc[{}]: localAddr={} + {} bytes is not within memory this rank registered", i,
                 op.localAddr, bytes);
  }
  return Checked{.bytes = bytes, .mine = &*m, .theirs = e};
}

}  // namespace

Status RegisterMem(Communicator &comm, uint32_t peer, int type, void *addr, uint64_t size,
                   HcclMemDesc *desc) {
  HZC_RETURN_IF_ERROR(CheckSpan(type, addr, size));
  if (peer >= comm.size()) {
    return Error(HCCL_E_PARA, "remoteRank={}: the communicator has {} ranks", peer, comm.size());
  }
  if (peer == comm.rank()) {
    LogWarn("HcclRegisterMem: remoteRank={} is the calling rank: nothing registered", peer);
    std::memset(desc->desc, 0, sizeof(desc->desc));
    return Status::Ok();
  }
  std::lock_guard lock(comm.one_sided_mutex());
  auto state = GetState(comm);
  HZC_RETURN_IF_ERROR(state.status());
  auto r = Hold(comm, **state, peer, addr, size);
  HZC_RETURN_IF_ERROR(r.status());
  return Describe(**state, comm, **r, peer, desc);
}

Status DeregisterMem(Communicator &comm, const HcclMemDesc &desc) {
  const std::optional<Desc> d = ParseDesc(desc);
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  if (!d || s == nullptr || d->comm_tag != s->tag || d->owner != comm.rank()) {
    return Error(HCCL_E_NOT_FOUND,
                 "desc: not a descriptor of a registration of this rank on this communicator");
  }
  return Drop(*s, d->id, "desc");
}

Status ExchangeMemDesc(Communicator &comm, uint32_t peer, std::span<const HcclMemDesc> local,
                       int timeout, std::span<HcclMemDesc> remote, uint32_t *actual) {
  HZC_RETURN_IF_ERROR(CheckPeer(comm, peer, "remoteRank"));
  if (local.size() > kOneSidedMax) {
    return Error(HCCL_E_PARA, "local->arrayLength={}: more than {}", local.size(), kOneSidedMax);
  }
  const Clock::time_point deadline = ExchangeDeadline(timeout);
  std::lock_guard lock(comm.one_sided_mutex());
  auto state = GetState(comm);
  HZC_RETURN_IF_ERROR(state.status());
  auto in = Swap(comm, **state, peer, local, deadline);
  HZC_RETURN_IF_ERROR(in.status());
  *actual = static_cast<uint32_t>(in->size());
  if (in->size() > remote.size()) {
    return Error(HCCL_E_PARA, "remote->arrayLength={}: rank {} sent {} descriptors", remote.size(),
                 peer, in->size());
  }
  std::copy(in->begin(), in->end(), remote.begin());
  return Status::Ok();
}

Status EnableMemAccess(Communicator &comm, const HcclMemDesc &desc, HcclMem *mem) {
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  if (s == nullptr) {
    return ParseDesc(desc)
               ? Error(HCCL_E_PARA, "remoteMemDesc: a descriptor of another communicator")
               : Error(HCCL_E_PARA, "remoteMemDesc: not a memory descriptor");
  }
  return Enable(*s, comm, desc, mem);
}

Status DisableMemAccess(Communicator &comm, const HcclMemDesc &desc) {
  const std::optional<Desc> d = ParseDesc(desc);
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  if (!d || s == nullptr || d->comm_tag != s->tag || d->owner >= comm.size()) {
    return Error(HCCL_E_NOT_FOUND, "remoteMemDesc: not a descriptor this rank enabled");
  }
  auto &enabled = s->enabled[d->owner];
  auto it = std::find_if(enabled.begin(), enabled.end(), [&](const Enabled &e) {
    return e.id == d->id && e.addr == d->addr && e.size == d->size;
  });
  if (it == enabled.end()) {
    return Error(HCCL_E_NOT_FOUND, "remoteMemDesc: rank {}'s {} bytes at {:#x} are not enabled",
                 d->owner, d->size, d->addr);
  }
  if (Held(it->use)) {
    return Error(HCCL_E_AGAIN,
                 "remoteMemDesc: a batch of this rank that is still queued or running reaches "
                 "rank {}'s {} bytes at {:#x}; synchronize that stream first (still enabled)",
                 d->owner, d->size, d->addr);
  }
  enabled.erase(it);
  return Status::Ok();
}

Expected<void *> RegisterGlobalMem(const HcclMem &mem) {
  HZC_RETURN_IF_ERROR(CheckSpan(mem.type, mem.addr, mem.size));
  if (mem.addr == nullptr) {
    return Error(HCCL_E_PTR, "mem->addr is null");
  }
  Globals &g = GlobalsOf();
  std::lock_guard lock(g.mutex);
  const uintptr_t handle = g.next++;
  g.by_handle[handle] = {.type = mem.type, .addr = mem.addr, .size = mem.size, .binds = 0};
  return reinterpret_cast<void *>(handle);
}

Status DeregisterGlobalMem(void *handle) {
  Globals &g = GlobalsOf();
  std::lock_guard lock(g.mutex);
  auto it = g.by_handle.find(reinterpret_cast<uintptr_t>(handle));
  if (it == g.by_handle.end()) {
    return Error(HCCL_E_PARA, "memHandle={}: not a handle of HcclRegisterGlobalMem", handle);
  }
  if (it->second.binds != 0) {
    return Error(HCCL_E_PARA, "memHandle={}: {} communicator(s) bind it (HcclCommUnbindMem first)",
                 handle, it->second.binds);
  }
  g.by_handle.erase(it);
  return Status::Ok();
}

Status BindMem(Communicator &comm, void *handle) {
  std::lock_guard lock(comm.one_sided_mutex());
  auto state = GetState(comm);
  HZC_RETURN_IF_ERROR(state.status());
  State &s = **state;
  const auto h = reinterpret_cast<uintptr_t>(handle);
  if (s.prepared) {
    return Error(HCCL_E_PARA, "memHandle={}: HcclCommPrepare ran already (bind before it)", handle);
  }
  if (std::any_of(s.bound.begin(), s.bound.end(), [&](const Bound &b) { return b.handle == h; })) {
    return Error(HCCL_E_PARA, "memHandle={}: bound to this communicator already", handle);
  }
  if (s.bound.size() >= kOneSidedMax) {
    return Error(HCCL_E_UNAVAIL, "the communicator binds {} handles already, the most",
                 s.bound.size());
  }
  Globals &g = GlobalsOf();
  std::lock_guard glock(g.mutex);
  auto it = g.by_handle.find(h);
  if (it == g.by_handle.end()) {
    return Error(HCCL_E_PARA, "memHandle={}: not a handle of HcclRegisterGlobalMem", handle);
  }
  ++it->second.binds;
  s.bound.push_back({.handle = h, .registrations = {}});
  return Status::Ok();
}

Status UnbindMem(Communicator &comm, void *handle) {
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  const auto h = reinterpret_cast<uintptr_t>(handle);
  auto b = s == nullptr ? std::vector<Bound>::iterator{}
                        : std::find_if(s->bound.begin(), s->bound.end(),
                                       [&](const Bound &x) { return x.handle == h; });
  if (s == nullptr || b == s->bound.end()) {
    return Error(HCCL_E_PARA, "memHandle={}: not bound to this communicator", handle);
  }
  for (uint64_t id : b->registrations) {
    HZC_RETURN_IF_ERROR(CheckDroppable(*s, id, "memHandle"));  // before anything is dropped
  }
  for (uint64_t id : b->registrations) {
    (void)Drop(*s, id, "memHandle");  // revokes the peers' access
  }
  s->bound.erase(b);
  Globals &g = GlobalsOf();
  std::lock_guard glock(g.mutex);
  if (auto it = g.by_handle.find(h); it != g.by_handle.end()) {
    --it->second.binds;
  }
  return Status::Ok();
}

Status NoneBound(Communicator &comm) {
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  if (s != nullptr && !s->bound.empty()) {
    return Error(HCCL_E_PARA,
                 "comm: {} global memory handle(s) bound to it (HcclCommUnbindMem first)",
                 s->bound.size());
  }
  return Status::Ok();
}

Status Prepare(Communicator &comm, int timeout) {
  const Clock::time_point deadline = ExchangeDeadline(timeout);
  std::lock_guard lock(comm.one_sided_mutex());
  auto state = GetState(comm);
  HZC_RETURN_IF_ERROR(state.status());
  State &s = **state;
  if (s.prepared) {
    return Status::Ok();
  }
  std::vector<uint32_t> peers;
  for (uint32_t p = 0; p < comm.size(); ++p) {
    if (p != comm.rank()) {
      peers.push_back(p);
    }
  }
  // A failure undoes this rank's registrations and enables (the peers' state is theirs).
  Rollback rollback;
  rollback.Push([&s, enabled = s.enabled] {
    for (Bound &b : s.bound) {
      for (uint64_t id : b.registrations) {
        (void)Drop(s, id, "memHandle");
      }
      b.registrations.clear();
    }
    s.enabled = enabled;
  });
  // Across servers linked first, so that memory gets a region only for the peers linked over
  // RDMA; then this rank's bound memory, registered once, described for every peer. What fails
  // on the way is told to the peers linked with (SwapAll).
  Status ready = s.local() ? Status::Ok() : Link(s, comm, peers, deadline);
  std::vector<std::vector<HcclMemDesc>> mine(comm.size());
  for (auto b = s.bound.begin(); b != s.bound.end() && ready.ok() && !peers.empty(); ++b) {
    Global g;
    {
      Globals &all = GlobalsOf();
      std::lock_guard glock(all.mutex);
      g = all.by_handle.at(b->handle);  // bound handles cannot be deregistered
    }
    auto r = Hold(comm, s, kAnyPeer, g.addr, g.size);
    if (!r.ok()) {
      ready = r.status();
      break;
    }
    b->registrations.push_back((*r)->id);
    for (uint32_t p : peers) {
      if (ready.ok()) {
        ready = Describe(s, comm, **r, p, &mine[p].emplace_back());
      }
    }
  }
  HZC_RETURN_IF_ERROR(SwapAll(comm, s, peers, mine, ready, deadline));
  rollback.Commit();
  s.prepared = true;
  return Status::Ok();
}

Expected<std::function<Status()>> PrepareBatch(Communicator &comm, uint32_t peer,
                                               std::span<const HcclOneSideOpDesc> ops, bool put) {
  if (ops.size() > kOneSidedMax) {
    return Error(HCCL_E_PARA, "descNum={}: more than {}", ops.size(), kOneSidedMax);
  }
  HZC_RETURN_IF_ERROR(CheckPeer(comm, peer, "remoteRank"));
  std::lock_guard lock(comm.one_sided_mutex());
  auto *s = static_cast<State *>(comm.one_sided_state().get());
  if (s == nullptr || !s->ready(peer)) {
    return Error(HCCL_E_PARA, "remoteRank={}: this rank never exchanged descriptors with it", peer);
  }
  std::vector<Use> uses;  // held until the batch is done with them
  std::vector<std::shared_ptr<const verbs::MemoryRegion>> held;
  std::vector<verbs::WorkRequest> requests;
  std::vector<LocalCopy> copies;
  std::vector<transport::SocketWindows::Op> tcp;
  for (size_t i = 0; i < ops.size(); ++i) {
    const HcclOneSideOpDesc &op = ops[i];
    auto checked = CheckOp(*s, peer, i, op);
    HZC_RETURN_IF_ERROR(checked.status());
    const uint64_t bytes = checked->bytes;
    const auto remote = reinterpret_cast<uint64_t>(op.remoteAddr);
    if (bytes == 0) {
      continue;
    }
    uses.push_back(checked->mine->use);
    uses.push_back(checked->theirs->use);
    if (s->via[peer] == kOverTcp) {
      tcp.push_back({.local = op.localAddr, .remote = remote, .bytes = bytes});
      continue;
    }
    if (s->local()) {
      copies.push_back({.index = i, .local = op.localAddr, .remote = remote, .bytes = bytes});
      continue;
    }
    auto region = RegionFor(*s, *checked->mine, peer);
    HZC_RETURN_IF_ERROR(region.status());
    held.push_back(checked->mine->regions.at(peer));
    requests.push_back({.op = put ? verbs::WorkRequest::kWrite : verbs::WorkRequest::kRead,
                        .peer = peer,
                        .mr = *region,
                        .local = op.localAddr,
                        .length = bytes,
                        .remote_addr = remote,
                        .rkey = checked->theirs->rkey});
  }
  if (!tcp.empty()) {
    transport::SocketWindows *sockets = s->sockets.get();
    const std::chrono::seconds timeout = comm.ExecTimeout();
    return std::function<Status()>(
        [sockets, peer, put, timeout, tcp = std::move(tcp), uses = std::move(uses)] {
          return sockets->Execute(peer, tcp, put, Clock::now() + timeout);
        });
  }
  if (!copies.empty()) {
    return std::function<Status()>(
        [&comm, peer, put, copies = std::move(copies), uses = std::move(uses)] {
          return CopyLocal(comm, peer, copies, put);
        });
  }
  if (requests.empty()) {
    return std::function<Status()>([] { return Status::Ok(); });
  }
  // The links live as long as the state, which lives as long as the communicator the caller
  // holds (a queued call holds it until the stream ran it).
  verbs::Links *links = s->links.get();
  return std::function<Status()>(
      [links, held = std::move(held), requests = std::move(requests),
       uses = std::move(uses)]() -> Status { return links->Execute(requests); });
}

}  // namespace hzc::coll
