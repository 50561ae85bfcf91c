// SPDX-License-Identifier: Apache-2.0
#include "coll/collectives.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/root_info.h"
#include "coll/control.h"
#include "coll/exchange.h"
#include "coll/inline.h"
#include "coll/kinds.h"
#include "coll/reduce.h"
#include "coll/span.h"
#include "coll/zero_copy.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

// The collectives' state of one communicator.
struct State : Communicator::CollState {
  std::mutex mutex;  // one call at a time
  std::unique_ptr<ControlArea> area;
  uint64_t seq = 0;
  Status broken;  // set once a call failed half-way
  // Every rank announced this call or a later one, as far as this rank waited to see: the calls
  // after it that this rank refused (Refuse) or whose Broadcast root it was (inline) ended
  // without waiting. CatchUp waits for more before a call writes what a rank may still read.
  uint64_t awaited = 0;
  // This rank's calls that ended at its arrival and whose arrivals it has not checked yet, by
  // call number modulo kLineDepth (seq 0: none): CheckUnseen checks them once it saw them.
  std::array<CallDesc, ControlArea::kLineDepth> unseen{};
  uint32_t unseen_count = 0;  // entries of @unseen with a call number
};

std::mutex g_made_mutex;
std::map<std::string, uint64_t> g_made;  // control areas made per communicator id and rank

// Count a control area made (+1) or not made after all (-1) under @key; the new count.
uint64_t Made(const std::string &key, int delta) {
  std::lock_guard lock(g_made_mutex);
  return g_made[key] += static_cast<uint64_t>(delta);
}

Expected<State *> GetState(Communicator &comm) {
  if (auto *made = comm.coll_state_made().load(std::memory_order_acquire)) {
    return static_cast<State *>(made);
  }
  // Per communicator: opening waits for the other ranks, which may be threads of this process
  // (HcclCommInitAll) opening their own communicator's area.
  std::lock_guard lock(comm.coll_state_mutex());
  auto &slot = comm.coll_state();
  if (!slot) {
    // Counted per rank: the ranks of an HcclCommInitAll communicator share this process.
    const std::string id = bootstrap::IdString(comm.id());
    const std::string key = id + "/" + std::to_string(comm.rank());
    ControlArea::Options o;
    o.name = "hzc-coll-" + bootstrap::SecretName(comm.id()) + "-" + std::to_string(Made(key, +1));
    o.rank = comm.rank();
    o.nranks = comm.size();
    o.staging_bytes = comm.StagingBytes();  // hcclBufferSize, else HCCL_BUFFSIZE
    o.inline_bytes = GetConfig().inline_max;
    o.connect_timeout = GetConfig().connect_timeout;
    auto area = ControlArea::Open(o);
    if (!area.ok()) {
      Made(key, -1);  // a retry uses the same name again
      return area.status();
    }
    auto state = std::make_unique<State>();
    state->area = std::move(*area);
    LogDebug("collectives: rank {} of {} mapped the control area @{} ({} MiB staging)", comm.rank(),
             comm.size(), o.name, state->area->staging_bytes() >> 20);
    slot = std::move(state);
    comm.coll_state_made().store(slot.get(), std::memory_order_release);
  }
  return static_cast<State *>(slot.get());
}

// The communicator's state if its control area is open, else null (never opens it).
State *OpenState(Communicator &comm) {
  return static_cast<State *>(comm.coll_state_made().load(std::memory_order_acquire));
}

// The collectives that run only inside one server.
Status OneServer(const Communicator &comm, Kind kind) {
  if (comm.ServerCount() > 1 && !RunsAcrossServers(kind)) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "the communicator's {} ranks span {} servers; {} runs only inside one server",
                 comm.size(), comm.ServerCount(), KindName(kind));
  }
  return Status::Ok();
}

// The descriptor of @call as call @seq (without the zero-copy flag): the fields the ranks must
// agree on, the others 0.
CallDesc Describe(const Call &call, uint64_t seq, uint32_t nranks) {
  CallDesc d;
  d.seq = seq;
  d.kind = static_cast<uint32_t>(call.kind);
  d.dtype = call.kind == Kind::kBarrier ? 0 : static_cast<uint32_t>(call.dtype);
  d.op = Reduces(call.kind) ? static_cast<uint32_t>(call.op) : 0;
  d.root = HasRoot(call.kind) ? call.root : 0;
  d.count = IsVector(call.kind) ? 0 : call.count;  // the vector ones compare their plans
  d.send = reinterpret_cast<uintptr_t>(call.send);
  d.recv = reinterpret_cast<uintptr_t>(call.recv);
  d.args_hash = SharedArgsHash(call, nranks);
  return d;
}

// Rank @r's arrival @a at call @mine.seq against this rank's (@me): HCCL_E_PARA when it refused
// the call or disagrees.
Status Disagreement(const ControlArea::Arrived &a, const CallDesc &mine, uint32_t r, uint32_t me) {
  if (a.seq != static_cast<uint32_t>(mine.seq)) {
    return Error(HCCL_E_PARA,
                 "ranks disagree on call {}: rank {} went past it without this rank (it was "
                 "the root of a Broadcast too?); nothing was moved",
                 mine.seq, r);
  }
  if ((a.flags & ControlArea::kRefused) != 0) {
    return Error(HCCL_E_PARA,
                 "rank {} refused call {}: its arguments failed its own checks (see its log); "
                 "nothing was moved",
                 r, mine.seq);
  }
  const char *field = nullptr;
  uint64_t theirs = 0, ours = 0;
  if (a.kind != mine.kind) {
    field = "collective", theirs = a.kind, ours = mine.kind;
  } else if (a.count != mine.count) {
    field = "count", theirs = a.count, ours = mine.count;
  } else if (a.dtype != mine.dtype) {
    field = "dataType", theirs = a.dtype, ours = mine.dtype;
  } else if (a.op != mine.op) {
    field = "op", theirs = a.op, ours = mine.op;
  } else if (a.root != mine.root) {
    field = "root", theirs = a.root, ours = mine.root;
  } else if (a.args_hash != mine.args_hash) {
    field = "hash of the arrays that must be the same on every rank", theirs = a.args_hash,
    ours = mine.args_hash;
  }
  if (field == nullptr) {
    return Status::Ok();
  }
  return Error(HCCL_E_PARA,
               "ranks disagree on call {}: rank {} gave {}={} ({}), rank {} gave {}; nothing "
               "was moved",
               mine.seq, r, field, theirs,
               field == std::string("collective") ? KindName(static_cast<Kind>(theirs)) : "", me,
               ours);
}

// The arrivals of call @mine.seq against this rank's: HCCL_E_PARA when a rank refused it or
// disagrees. @late: a call this rank ended at its arrival (a small Broadcast's root) and checks
// only now. A peer may then have reused that call's line since (as the root of Broadcasts of its
// own, once this rank announced the next call): a line that shows a later call, or changed while
// it was read, cannot be checked and is skipped. That peer checked this rank's line of the call
// itself, unless it too was a root that did not wait (a Broadcast whose ranks disagree on the
// root): that mismatch goes unreported when both ran on that far before looking.
Status CheckSame(const ControlArea &area, const CallDesc &mine, bool late = false) {
  for (uint32_t r = 0; r < area.nranks(); ++r) {
    if (r == area.rank()) {
      continue;  // its own line may still be in this CPU's store buffer: no reading it back
    }
    const ControlArea::Arrived a = area.Arrival(r, mine.seq);
    if (late && a.seq != static_cast<uint32_t>(mine.seq)) {
      continue;  // reused (a later call: this rank waited for the peer to announce this one)
    }
    Status st = Disagreement(a, mine, r, area.rank());
    if (!st.ok() && !(late && !area.StillAnnounced(r, mine.seq))) {
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Communicator &comm, const Call &c) {
  const KindInfo *kind = Find(c.kind);
  if (kind == nullptr) {
    return Error(HCCL_E_INTERNAL, "collective {}: no such kind", static_cast<uint32_t>(c.kind));
  }
  if (c.kind == Kind::kBarrier) {
    return Status::Ok();
  }
  const size_t es = TypeSize(c.dtype);
  if (es == 0) {
    return Error(HCCL_E_PARA, "dataType={}: not an HcclDataType", static_cast<int>(c.dtype));
  }
  if (kind->reduces) {
    ReduceFn fn = nullptr;
    HZC_RETURN_IF_ERROR(GetReduce(c.dtype, c.op, &fn));
  }
  if (kind->rooted && c.root >= comm.size()) {
    return Error(HCCL_E_PARA, "root={}: must be below the rank count {}", c.root, comm.size());
  }
  if (kind->plan != nullptr) {
    HZC_RETURN_IF_ERROR(MakePlan(c, comm.size(), comm.rank()).status());
    return OneServer(comm, c.kind);
  }
  const uint64_t blocks = kind->send_per_rank || kind->recv_per_rank ? comm.size() : 1;
  if (c.count > SIZE_MAX / es / blocks) {
    return Error(HCCL_E_PARA, "count={}: {} bytes overflow the address space", c.count,
                 "count * element size * ranks");
  }
  const size_t total = static_cast<size_t>(c.count) * es * blocks;
  const auto in = reinterpret_cast<uintptr_t>(c.send);
  const auto out = reinterpret_cast<uintptr_t>(c.recv);
  if ((in != 0 && in > UINTPTR_MAX - total) || (out != 0 && out > UINTPTR_MAX - total)) {
    return Error(HCCL_E_PARA, "count={}: the buffers wrap around the address space", c.count);
  }
  return OneServer(comm, c.kind);
}

namespace {

// Before call s.seq + 1 writes what the others may still read of an earlier call (coll/
// control.h, "Reuse"), wait (until @deadline) until every rank announced call @need.
Status CatchUp(State &s, uint64_t need, const Deadline &deadline) {
  if (s.awaited >= need) {
    return Status::Ok();
  }
  // A rank that runs ahead (a small Broadcast's root) looks half its lines further than it
  // must, so that while the others follow it looks once every few calls rather than at each
  // (a look takes the peers' lines from them); it waits only for what it must.
  const uint64_t further = std::min(s.seq, need + ControlArea::kLineDepth / 2);
  if (further > need && s.area->AllAnnounced(further)) {
    s.awaited = further;
    return Status::Ok();
  }
  HZC_RETURN_IF_ERROR(
      s.area->AwaitAnnounced(need, deadline, "a call this rank ended without waiting"));
  HZC_RETURN_IF_ERROR(s.area->CheckAbort());
  s.awaited = need;
  return Status::Ok();
}

// The first disagreement (HCCL_E_PARA) on the calls this rank ended at its arrival, among those
// whose arrivals it has seen by now; forgets them.
Status CheckUnseen(State &s) {
  Status first;
  uint64_t first_seq = UINT64_MAX;
  if (s.unseen_count == 0) {
    return first;
  }
  for (CallDesc &d : s.unseen) {
    if (d.seq == 0 || d.seq > s.awaited) {
      continue;
    }
    if (Status st = CheckSame(*s.area, d, /*late=*/true); !st.ok() && d.seq < first_seq) {
      first = st;
      first_seq = d.seq;
    }
    d.seq = 0;
    --s.unseen_count;
  }
  return first;
}

// What every rank must have announced before this rank's next call (eager: a small Broadcast's
// root, coll/inline.h) writes what the others may still read (coll/control.h, "Reuse"): the
// call before it, or for a call that writes only its arrival line, the oldest call whose line
// it reuses.
uint64_t Need(const State &s, bool eager) {
  constexpr uint64_t kDepth = ControlArea::kLineDepth;
  if (!eager) {
    return s.seq;
  }
  return s.seq + 2 > kDepth ? s.seq + 2 - kDepth : 0;
}

// Whether a collective's input of @input bytes per rank goes zero-copy, where its buffers allow
// it, rather than inline (HZC_ZERO_COPY_MIN). Never one that a Broadcast's root may post eagerly
// (coll/inline.h): that root does not wait to learn what the others offered.
bool PrefersZeroCopy(size_t input) {
  const uint64_t min = GetConfig().zero_copy_min;
  return min != 0 && input >= min && input > ControlArea::kEagerData;
}

// The protocol this rank offers for @call as call @seq: zero-copy when its input is large enough
// (PrefersZeroCopy) and its buffers allow it, else its input inline when it fits (copied there),
// else zero-copy when its buffers allow it (the ranks take what they all offer, staging
// otherwise). An exchange's plan is posted first. @input: the input's bytes per rank.
uint32_t Offer(Communicator &comm, ControlArea &area, const Call &call, uint64_t seq,
               size_t *input_out) {
  const KindInfo &kind = Info(call.kind);
  const bool exchange = kind.plan != nullptr;
  const Plan plan = exchange ? ExchangePost(area, call, seq) : Plan{};
  const size_t input = exchange ? plan.SendExtent() : InlineInputBytes(call, area.nranks());
  *input_out = input;
  if (!exchange && kind.zero_copy != nullptr && PrefersZeroCopy(input)) {
    if (ZeroCopyEligible(comm, call)) {
      return ControlArea::kZeroCopy;
    }
    return kind.inlined != nullptr ? InlinePost(area, call, seq, input) : 0;
  }
  const uint32_t flags = kind.inlined != nullptr ? InlinePost(area, call, seq, input) : 0;
  if (flags == 0 && (exchange ? ExchangeEligible(comm, call, plan)
                              : kind.zero_copy != nullptr && ZeroCopyEligible(comm, call))) {
    return ControlArea::kZeroCopy;
  }
  return flags;
}

// The path of call @seq: what every rank offered (this rank @flags), the same on every rank.
// @input: this rank's input bytes (logged).
Entry Choose(const ControlArea &area, const KindInfo &kind, uint64_t seq, uint32_t flags,
             size_t input) {
  uint32_t all = flags;
  for (uint32_t r = 0; r < area.nranks(); ++r) {
    all &= r != area.rank() ? area.Arrival(r, seq).flags : flags;
  }
  const bool inlined = (all & ControlArea::kInlined) != 0;
  const bool zero_copy = (all & ControlArea::kZeroCopy) != 0;
  LogDebug("collectives: call {} ({}, {} bytes in) takes the {} path", seq, kind.name, input,
           inlined     ? "inline"
           : zero_copy ? "zero-copy"
                       : "staging");
  return inlined ? kind.inlined : zero_copy ? kind.zero_copy : kind.staging;
}

// Take part in the next call as far as its arrival, which says "refused": the others pass it at
// once and fail the call as they fail a mismatched one. @why, naming the call.
Status RefuseNext(State &s, const Status &why) {
  CallDesc refused;
  refused.seq = ++s.seq;
  s.area->Announce(refused, ControlArea::kRefused);
  return Error(why.code(), "{}; the other ranks fail call {} too", why.message(), refused.seq);
}

}  // namespace

void Abort(Communicator &comm, const Status &why) {
  if (comm.ServerCount() > 1) {
    return;
  }
  State *s = OpenState(comm);
  if (s == nullptr) {
    return;
  }
  std::lock_guard lock(s->mutex);
  if (s->broken.ok()) {
    s->area->Abort(static_cast<HcclResult>(why.code()));
    s->broken = why;
  }
}

Status Refuse(Communicator &comm, const Status &why) {
  if (comm.ServerCount() > 1) {
    return RefuseAcrossServers(comm, why);
  }
  State *s = OpenState(comm);
  if (s == nullptr) {
    return why;  // the control area is opened by every rank together, never just for this
  }
  std::lock_guard lock(s->mutex);
  if (!s->broken.ok() || !s->area->CheckAbort().ok()) {
    return why;  // the others fail anyway
  }
  if (Status st = CatchUp(*s, s->seq, Deadline::After(comm.ExecTimeout())); !st.ok()) {
    s->area->Abort(st.code());
    s->broken = st;
    return Error(why.code(), "{}; the others did not reach the call this rank refused before: {}",
                 why.message(), st.message());
  }
  if (Status earlier = CheckUnseen(*s); !earlier.ok()) {
    return RefuseNext(*s,
                      Error(why.code(), "{} (and before: {})", why.message(), earlier.message()));
  }
  return RefuseNext(*s, why);
}

Status Run(Communicator &comm, const Call &call) {
  if (Status st = Validate(comm, call); !st.ok()) {
    return Refuse(comm, st);
  }
  if (comm.ServerCount() > 1) {
    return RunAcrossServers(comm, call);
  }
  auto state = GetState(comm);
  if (!state.ok()) {
    return state.status();
  }
  State &s = **state;
  std::lock_guard lock(s.mutex);
  if (!s.broken.ok()) {
    return Error(s.broken.code(), "an earlier call failed half-way ({}); destroy the communicator",
                 s.broken.message());
  }
  ControlArea &area = *s.area;
  HZC_RETURN_IF_ERROR(area.CheckAbort());
  const Deadline deadline = Deadline::After(comm.ExecTimeout());
  auto fail = [&](Status st) {
    area.Abort(st.code());
    s.broken = st;
    comm.RecordAsyncError(static_cast<HcclResult>(st.code()));
    return st;
  };
  const bool eager = InlineEager(area, call);
  if (Status st = CatchUp(s, Need(s, eager), deadline); !st.ok()) {
    return fail(Error(st.code(), "{}: {}", KindName(call.kind), st.message()));
  }
  const KindInfo &kind = Info(call.kind);
  if (Status st = CheckUnseen(s); !st.ok()) {
    return RefuseNext(s, Error(st.code(),
                               "{}; this rank, that call's Broadcast root, had returned before the "
                               "others came (a small Broadcast's root does not wait)",
                               st.message()));
  }

  CallDesc mine = Describe(call, ++s.seq, area.nranks());
  if (eager) {
    const size_t input = InlineInputBytes(call, area.nranks());
    area.Announce(mine, InlinePost(area, call, mine.seq, input));
    s.unseen[mine.seq % ControlArea::kLineDepth] = mine;
    ++s.unseen_count;
    LogDebug("collectives: call {} ({}, {} bytes in) takes the inline path; its root is done",
             mine.seq, kind.name, input);
    return Status::Ok();
  }
  size_t input = 0;
  const uint32_t flags = Offer(comm, area, call, mine.seq, &input);
  area.Post(mine);
  area.Announce(mine, flags);
  if (Status st = area.AwaitArrivals(mine.seq, deadline, kind.name); !st.ok()) {
    return fail(Error(st.code(), "{}: {}", kind.name, st.message()));
  }
  s.awaited = mine.seq;
  // Every rank sees the same arrivals, so every rank takes the same decision.
  HZC_RETURN_IF_ERROR(CheckSame(area, mine));
  if (kind.staging == nullptr) {
    return Status::Ok();  // Barrier: the arrival was the call
  }
  Context ctx{.comm = comm, .area = &area, .seq = mine.seq, .deadline = deadline};
  if (kind.plan != nullptr) {
    HZC_RETURN_IF_ERROR(ExchangeCheck(ctx));  // the pairs agree, on every rank alike
  }
  if (Status st = Choose(area, kind, mine.seq, flags, input)(ctx, call); !st.ok()) {
    return fail(st);
  }
  return Status::Ok();
}

}  // namespace hzc::coll
