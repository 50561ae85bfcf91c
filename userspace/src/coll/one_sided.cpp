// SPDX-License-Identifier: Apache-2.0
#include "coll/one_sided.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/group.h"
#include "coll/one_sided_wire.h"
#include "coll/reduce.h"
#include "verbs/links.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

// Tag of the exchange's messages on the group's connections (span.cpp, p2p_wire.cpp and the
// wires use others).
constexpr uint32_t kDescTag = 0x4000;
// Host memory HCCL registers at most.
constexpr uint64_t kMaxSize = uint64_t{1} << 40;

struct Registration {
  uint64_t id;
  uint32_t peer;
  uint64_t addr, size;
  uint32_t refs;
  std::shared_ptr<const verbs::MemoryRegion> mr;
};

struct Enabled {
  uint64_t id;
  uint64_t addr, size;
  uint32_t rkey;
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
  std::unique_ptr<verbs::Links> links;
  uint64_t tag = 0;
  uint64_t next_id = 1;
  std::vector<Registration> mine;
  std::vector<bool> ready;                    // by rank: its queue pair is connected
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

// Whether @comm spans servers: its ranks have the group's connections to swap descriptors
// over, and reach each other over RDMA, a peer on the same server through the device's loopback
// (HCCL_E_NOT_SUPPORT naming why not).
Status Spanning(const Communicator &comm, uint32_t peer, const char *name) {
  if (comm.group() == nullptr) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "{}={}: the communicator's ranks are all on this server; one-sided transfers "
                 "work in communicators that span servers only",
                 name, peer);
  }
  return Status::Ok();
}

Status CheckPeer(const Communicator &comm, uint32_t peer, const char *name) {
  if (peer >= comm.size()) {
    return Error(HCCL_E_PARA, "{}={}: the communicator has {} ranks", name, peer, comm.size());
  }
  if (peer == comm.rank()) {
    return Error(HCCL_E_PARA, "{}={}: the calling rank itself", name, peer);
  }
  return Spanning(comm, peer, name);
}

// The communicator's state, made with its links on first use (under the one-sided mutex).
Expected<State *> GetState(Communicator &comm) {
  auto &slot = comm.one_sided_state();
  if (slot) {
    return static_cast<State *>(slot.get());
  }
  auto links =
      verbs::Links::OpenLazy(comm.rank(), comm.size(), verbs::LinkOptions::BetweenServers());
  if (!links.ok()) {
    return links.status();
  }
  if (!*links) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "this server has no RDMA device with an active port: one-sided transfers need "
                 "RDMA between the servers");
  }
  auto state = std::make_unique<State>();
  state->links = std::move(*links);
  state->tag = CommTag(comm);
  state->ready.assign(comm.size(), false);
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

// One more count of the registration of [addr, addr + size) for @peer (kAnyPeer: for every
// peer), made if there is none.
Expected<Registration *> Hold(State &s, uint32_t peer, void *addr, uint64_t size) {
  const auto va = reinterpret_cast<uint64_t>(addr);
  auto same = std::find_if(s.mine.begin(), s.mine.end(), [&](const Registration &r) {
    return r.peer == peer && r.addr == va && r.size == size;
  });
  if (same == s.mine.end()) {
    if (s.mine.size() >= kOneSidedMax) {
      return Error(HCCL_E_UNAVAIL, "the communicator holds {} registrations already, the most",
                   s.mine.size());
    }
    auto mr = s.links->Register(addr, size);
    HZC_RETURN_IF_ERROR(mr.status());
    s.mine.push_back({.id = s.next_id++,
                      .peer = peer,
                      .addr = va,
                      .size = size,
                      .refs = 0,
                      .mr = std::shared_ptr<const verbs::MemoryRegion>(std::move(*mr))});
    same = s.mine.end() - 1;
  }
  ++same->refs;
  return &*same;
}

// The descriptor of @r for @peer.
void Describe(const State &s, const Communicator &comm, const Registration &r, uint32_t peer,
              HcclMemDesc *desc) {
  Desc d{};
  std::memcpy(d.magic, Desc::kMagic, sizeof(d.magic));
  d.version = Desc::kVersion;
  d.owner = comm.rank();
  d.peer = peer;
  d.rkey = r.mr->rkey();
  d.comm_tag = s.tag;
  d.id = r.id;
  d.addr = r.addr;
  d.size = r.size;
  std::memset(desc->desc, 0, sizeof(desc->desc));
  std::memcpy(desc->desc, &d, sizeof(d));
}

// Drop one count of registration @id; HCCL_E_NOT_FOUND naming @what when there is none.
Status Drop(State &s, uint64_t id, const char *what) {
  auto it =
      std::find_if(s.mine.begin(), s.mine.end(), [&](const Registration &r) { return r.id == id; });
  if (it == s.mine.end()) {
    return Error(HCCL_E_NOT_FOUND, "{}: registration {} is not registered", what, id);
  }
  if (--it->refs == 0) {
    s.mine.erase(it);  // the region goes now, or when a batch that holds it ends
  }
  return Status::Ok();
}

// Connect this rank's queue pairs with @peers' (those not linked yet): every card sent first,
// then every peer's received and connected (the group reads while it writes: no pair waits
// for another).
Status Link(State &s, bootstrap::Group &group, std::span<const uint32_t> peers,
            Clock::time_point deadline) {
  std::vector<uint32_t> fresh;
  for (uint32_t p : peers) {
    if (s.links->qp_num(p) != 0) {
      continue;  // linked, or a failure on the way left the pair unusable
    }
    auto qp = s.links->AddPeer(p);
    HZC_RETURN_IF_ERROR(qp.status());
    ExchangeHeader mine;
    mine.has_link = 1;
    mine.port = s.links->Header();
    mine.qp = *qp;
    HZC_RETURN_IF_ERROR(group.Send(p, kDescTag + 1, std::as_bytes(std::span(&mine, 1)), deadline));
    fresh.push_back(p);
  }
  for (uint32_t p : fresh) {
    auto theirs = group.Recv(p, kDescTag + 1, deadline);
    HZC_RETURN_IF_ERROR(theirs.status());
    auto card = ParseLinkCard(*theirs, p);
    HZC_RETURN_IF_ERROR(card.status());
    const ExchangeHeader &h = *card;
    HZC_RETURN_IF_ERROR(s.links->ConnectPeer(p, h.port, h.qp));
    s.ready[p] = true;
  }
  return Status::Ok();
}

Status SendDescs(bootstrap::Group &group, uint32_t peer, std::span<const HcclMemDesc> descs,
                 Clock::time_point deadline) {
  ExchangeHeader mine;
  mine.count = static_cast<uint32_t>(descs.size());
  std::vector<std::byte> out(sizeof(mine) + descs.size_bytes());
  std::memcpy(out.data(), &mine, sizeof(mine));
  if (!descs.empty()) {
    std::memcpy(out.data() + sizeof(mine), descs.data(), descs.size_bytes());
  }
  return group.Send(peer, kDescTag, out, deadline);
}

Expected<std::vector<HcclMemDesc>> RecvDescs(bootstrap::Group &group, uint32_t peer,
                                             Clock::time_point deadline) {
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
  if (!s.ready[d->owner]) {
    return Error(HCCL_E_PARA, "remoteMemDesc: rank {} never exchanged descriptors with this rank",
                 d->owner);
  }
  auto &enabled = s.enabled[d->owner];
  for (const Enabled &e : enabled) {
    if (d->addr < e.addr + e.size && e.addr < d->addr + d->size) {
      return Error(HCCL_E_PARA,
                   "remoteMemDesc: rank {}'s {} bytes at {:#x} overlap its {} bytes at {:#x}, "
                   "enabled already",
                   d->owner, d->size, d->addr, e.size, e.addr);
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
  HZC_RETURN_IF_ERROR(Spanning(comm, peer, "remoteRank"));
  std::lock_guard lock(comm.one_sided_mutex());
  auto state = GetState(comm);
  HZC_RETURN_IF_ERROR(state.status());
  auto r = Hold(**state, peer, addr, size);
  HZC_RETURN_IF_ERROR(r.status());
  Describe(**state, comm, **r, peer, desc);
  return Status::Ok();
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
  State &s = **state;
  bootstrap::Group &group = *comm.group();
  HZC_RETURN_IF_ERROR(Link(s, group, std::span(&peer, 1), deadline));
  HZC_RETURN_IF_ERROR(SendDescs(group, peer, local, deadline));
  auto in = RecvDescs(group, peer, deadline);
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
  if (comm.group() == nullptr) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "the communicator's ranks are all on this server; one-sided transfers work in "
                 "communicators that span servers only");
  }
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

Status Prepare(Communicator &comm, int timeout) {
  if (comm.group() == nullptr) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "the communicator's ranks are all on this server; one-sided transfers work in "
                 "communicators that span servers only");
  }
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
  // This rank's bound memory, registered once, described for every peer.
  std::vector<std::vector<HcclMemDesc>> mine(comm.size());
  for (Bound &b : s.bound) {
    Global g;
    {
      Globals &all = GlobalsOf();
      std::lock_guard glock(all.mutex);
      g = all.by_handle.at(b.handle);  // bound handles cannot be deregistered
    }
    auto r = Hold(s, kAnyPeer, g.addr, g.size);
    HZC_RETURN_IF_ERROR(r.status());
    b.registrations.push_back((*r)->id);
    for (uint32_t p : peers) {
      Describe(s, comm, **r, p, &mine[p].emplace_back());
    }
  }
  bootstrap::Group &group = *comm.group();
  HZC_RETURN_IF_ERROR(Link(s, group, peers, deadline));
  for (uint32_t p : peers) {
    HZC_RETURN_IF_ERROR(SendDescs(group, p, mine[p], deadline));
  }
  for (uint32_t p : peers) {
    auto theirs = RecvDescs(group, p, deadline);
    HZC_RETURN_IF_ERROR(theirs.status());
    for (const HcclMemDesc &d : *theirs) {
      Status st = Enable(s, comm, d, nullptr);
      if (!st.ok()) {
        return Error(HCCL_E_REMOTE, "rank {} sent a descriptor this rank cannot enable: {}", p,
                     st.message());
      }
    }
  }
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
  if (s == nullptr || !s->ready[peer]) {
    return Error(HCCL_E_PARA, "remoteRank={}: this rank never exchanged descriptors with it", peer);
  }
  std::vector<std::shared_ptr<const verbs::MemoryRegion>> held;
  std::vector<verbs::WorkRequest> requests;
  for (size_t i = 0; i < ops.size(); ++i) {
    const HcclOneSideOpDesc &op = ops[i];
    const size_t type = TypeSize(op.dataType);
    if (type == 0) {
      return Error(HCCL_E_PARA, "desc[{}].dataType={}: not an HcclDataType", i,
                   static_cast<int>(op.dataType));
    }
    if (op.count == 0) {
      continue;
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
    const auto &enabled = s->enabled[peer];
    auto e = std::find_if(enabled.begin(), enabled.end(), [&](const Enabled &x) {
      return remote >= x.addr && remote + bytes <= x.addr + x.size;
    });
    if (e == enabled.end()) {
      return Error(HCCL_E_PARA,
                   "desc[{}]: remoteAddr={} + {} bytes is not within memory of rank {} that "
                   "this rank enabled",
                   i, op.remoteAddr, bytes, peer);
    }
    auto m = std::find_if(s->mine.begin(), s->mine.end(), [&](const Registration &r) {
      return local >= r.addr && local + bytes <= r.addr + r.size;
    });
    if (m == s->mine.end()) {
      return Error(HCCL_E_PARA,
                   "desc[{}]: localAddr={} + {} bytes is not within memory this rank registered", i,
                   op.localAddr, bytes);
    }
    held.push_back(m->mr);
    requests.push_back({.op = put ? verbs::WorkRequest::kWrite : verbs::WorkRequest::kRead,
                        .peer = peer,
                        .mr = m->mr.get(),
                        .local = op.localAddr,
                        .length = bytes,
                        .remote_addr = remote,
                        .rkey = e->rkey});
  }
  if (requests.empty()) {
    return std::function<Status()>([] { return Status::Ok(); });
  }
  // The links live as long as the state, which lives as long as the communicator the caller
  // holds (a queued call holds it until the stream ran it).
  verbs::Links *links = s->links.get();
  return std::function<Status()>(
      [links, held = std::move(held), requests = std::move(requests)]() -> Status {
        return links->Execute(requests);
      });
}

}  // namespace hzc::coll
