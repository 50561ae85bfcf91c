// SPDX-License-Identifier: Apache-2.0
#include "coll/span.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "base/unique_mapping.h"
#include "coll/collectives.h"
#include "coll/exchange.h"
#include "coll/kinds.h"
#include "coll/reduce.h"
#include "coll/wire_memory.h"
#include "core/comm_init.h"
#include "transport/wire.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

// Tag of the leaders' agreement on each call (over the TCP connections), and the tags of
// their wire (point-to-point transfers use others, coll/p2p_wire.h).
constexpr uint32_t kCallTag = 0x30;
constexpr uint32_t kCheckTag = 0x31;  // the leaders' check of an AlltoAllV's pairs
constexpr uint32_t kWireTags = 0x1000;
// A Broadcast of at least this many bytes across three or more servers is scattered and
// all-gathered between the leaders (Spanning::LeadersBroadcast).
constexpr size_t kScatteredBroadcast = size_t{256} << 10;
// The sink of a step that receives nothing.
const transport::Wire::Sink kNoSink = [](uint32_t, size_t, const uint8_t *, size_t) {};
// Landing slots per peer of the leaders' wire (8 MiB registered per peer).
constexpr uint32_t kWireSlots = 4;

// What the ranks compare before a call; a rank that refused the call says so in kind.
struct CallWords {
  uint64_t seq = 0;
  uint64_t kind = 0;
  uint64_t dtype = 0;
  uint64_t op = 0;
  uint64_t count = 0;
  uint64_t root = 0;
  uint64_t args = 0;      // the exchanges: the hash of the arrays every rank must share
  uint64_t verdict = 0;   // between the leaders: their server's verdict (an HcclResult)
  uint64_t ring_min = 0;  // between the leaders: their HZC_SPAN_RING_MIN
};
constexpr uint64_t kWords = sizeof(CallWords) / sizeof(uint64_t);
constexpr uint64_t kRefusedWord = UINT64_MAX;

// Whether @ranks are consecutive.
bool Consecutive(const std::vector<uint32_t> &ranks) {
  return ranks.back() - ranks.front() + 1 == ranks.size();
}

// How long a destroyed communicator's leader waits for the other leaders' goodbye.
constexpr std::chrono::seconds kGoodbyeTime{10};

}  // namespace

// The collectives' state of a communicator that spans servers, with the servers of its ranks.
struct SpanState : Communicator::CollState, ServerLayout {
  ~SpanState() override {
    if (wire) {
      wire->Close(Clock::now() + kGoodbyeTime);
    }
  }

  std::mutex mutex;  // one call at a time
  Status broken;     // set once a call failed half-way
  uint64_t seq = 0;
  std::shared_ptr<Communicator> local;  // this server's ranks (MakeServerLocal)
  // A leader's buffer for its calls' temporaries (Spanning::Temp), a region of the wire like
  // activated memory (what it sends from or receives into there moves without a copy): kept
  // between calls, grown to the largest need up to the communicator's HCCL_BUFFSIZE. Declared
  // before the wire, which goes first with its registrations of it.
  UniqueMapping scratch;
  transport::Wire::Region scratch_region;
  bool scratch_busy = false;              // a call (Spanning::Temp) holds it
  std::unique_ptr<transport::Wire> wire;  // the leaders'
  std::unique_ptr<WireWatch> watch;       // the wire's, while it lives
  Status wire_status;                     // why a leader has no wire
  // The leaders: the first leader's HZC_SPAN_RING_MIN, agreed on each call.
  uint64_t ring_min = 0;

  const std::vector<uint32_t> &mine() const { return servers[server]; }
  bool leader() const { return local->rank() == 0; }
  uint32_t nservers() const { return static_cast<uint32_t>(servers.size()); }
};

namespace {

Expected<std::unique_ptr<SpanState>> MakeState(Communicator &comm) {
  if (comm.group() == nullptr) {
    // Every communicator that spans servers has them (its own, or a view of its parent's).
    return Error(HCCL_E_INTERNAL,
                 "the communicator spans {} servers but has no connections between them",
                 comm.ServerCount());
  }
  auto s = std::make_unique<SpanState>();
  static_cast<ServerLayout &>(*s) = LayOutServers(comm.ranks(), comm.rank());
  s->local = MakeServerLocal(comm, *s);
  if (s->leader()) {
    auto wire = transport::Wire::Open(*comm.group(), s->leaders,
                                      {.tags = kWireTags, .slots = kWireSlots, .net = {}},
                                      Clock::now() + GetConfig().connect_timeout);
    if (wire.ok()) {
      s->wire = std::move(*wire);
      s->watch = std::make_unique<WireWatch>(s->wire.get());
    } else {
      s->wire_status = wire.status();  // told to the local ranks by the first call
    }
  }
  LogInfo("collectives across servers: rank {} is rank {} of {} on server {} of {}{}", comm.rank(),
          s->local->rank(), s->local->size(), s->server, s->nservers(),
          s->leader() ? " (its leader)" : "");
  return s;
}

Expected<SpanState *> GetState(Communicator &comm) {
  std::lock_guard lock(comm.coll_state_mutex());
  auto &slot = comm.coll_state();
  if (!slot) {
    auto s = MakeState(comm);
    if (!s.ok()) {
      return s.status();
    }
    slot = std::move(*s);
  }
  return static_cast<SpanState *>(slot.get());
}

// The arrays of a local AlltoAllV of bytes, by local rank.
struct LocalArrays {
  explicit LocalArrays(size_t n) : sl(n), so(n), rl(n), ro(n) {}
  std::vector<uint64_t> sl, so, rl, ro;  // send lengths and offsets, receive lengths and offsets
};

// One call of the hierarchical schedule on rank @comm.rank().
class Spanning {
 public:
  Spanning(Context &ctx, const Call &c)
      : ctx_(ctx),
        comm_(ctx.comm),
        s_(*ctx.span),
        c_(c),
        deadline_(ctx.deadline),
        es_(TypeSize(c.dtype)),
        plans_(ctx.plans) {}
  ~Spanning() {
    if (holds_scratch_) {
      s_.scratch_busy = false;
    }
  }
  Spanning(const Spanning &) = delete;
  Spanning &operator=(const Spanning &) = delete;

  // Check the call on every rank, @refused when this rank refused it: HCCL_E_PARA (on every
  // rank alike) when a rank refused it or made another call; nothing moved then.
  Status Agree(const Status *refused);

  // The hierarchical schedule of each kind (the entry points).
  Status AllReduce();
  Status Broadcast();
  Status AllGather();
  Status ReduceScatter();
  Status Barrier();
  Status Reduce();
  Status Scatter();
  Status ReduceScatterV();
  // AllGatherV: every rank's whole input region to every rank.
  Status Regions();
  // AlltoAll(V/VC): each pair's block only, through the leaders.
  Status Pairwise();

 private:
  // The exchanges' plans and check: this rank's plan (MakePlan); the lengths of this server's
  // ranks' plans for Pairwise; then, where the call's words and each rank's own checks do not
  // already make the pairs agree (AlltoAllV), every pair checked once, by its sending rank's
  // leader: HCCL_E_PARA, the same on every rank, when two ranks disagree; nothing moved then.
  Status PlanExchange();
  // The pairs of an AlltoAllV, each checked by its sender's leader against what the receiver
  // expects (its own server's plans, or what the receiver's leader sends it); the leaders agree
  // on the first disagreement (by sending rank, then receiving rank) and tell their ranks.
  Status CheckPairs();
  // A pair's disagreement (none: from = UINT64_MAX).
  struct Disagreement {
    uint64_t from = UINT64_MAX, to = 0, sent = 0, expected = 0;
    bool Before(const Disagreement &o) const { return std::tie(from, to) < std::tie(o.from, o.to); }
  };
  // The leaders' part of CheckPairs: the first disagreement of all into *@first.
  Status CrossCheck(Disagreement *first);
  // @call (a hierarchical collective) as a step of this one.
  Status Sub(const Call &call) { return Info(call.kind).across(ctx_, call); }
  const Plan &Mine() const { return plans_[comm_.rank()]; }
  CallWords Words(const Status *refused) const;
  Status Compare(const std::vector<CallWords> &words, const std::vector<uint32_t> &ranks) const;
  Status AgreeAcrossServers(Status *verdict);
  // A collective of the server-local communicator (a copy when the server has one rank).
  Status Local(const Call &call);
  // @call on the server-local communicator, its errors saying which ranks its numbers mean.
  Status OnServer(const Call &call);
  // An AlltoAllV of bytes among this server's ranks: a copy of the own block when the server
  // has one rank.
  Status LocalExchange(const uint8_t *send, uint8_t *recv, const LocalArrays &a);
  // Pairwise's steps.
  // What rank @from sends rank @to, one of them on this server (the plans of the pairs agree).
  uint64_t Len(uint32_t from, uint32_t to) const {
    return s_.server_of[from] == s_.server ? plans_[from].send_len[to] : plans_[to].recv_len[from];
  }
  Status GatherPacks(const uint8_t *send, const std::vector<uint32_t> &away,
                     std::vector<uint64_t> *packs, std::vector<uint8_t> *gathered);
  Status SwapPacks(const std::vector<uint32_t> &away, const std::vector<uint64_t> &packs,
                   const std::vector<uint8_t> &gathered, std::vector<std::vector<uint8_t>> *got);
  Status DeliverMail(const std::vector<uint32_t> &away,
                     const std::vector<std::vector<uint8_t>> &got, uint8_t *recv);
  // @into[p]: where member p's bytes only go (transport::Wire::Place), or nullptr: to @sink
  // (@into empty: all of them).
  Status Transfer(const std::vector<transport::Wire::Out> &out, const std::vector<size_t> &in,
                  const transport::Wire::Sink &sink, const std::vector<uint8_t *> &into = {}) {
    std::vector<transport::Wire::Out> marked = out;
    MarkRegions(&marked);
    std::vector<transport::Wire::Place> places = Places(into, in);
    MarkScratch(s_.scratch_region, &marked, &places, in);
    return s_.wire->Transfer(marked, in, sink, deadline_, places);
  }
  // @len bytes for one temporary of this call (zeroed only when new), valid until the next
  // Temp of this call: a leader's scratch (SpanState) when its wire takes regions (RDMA), the
  // communicator's HCCL_BUFFSIZE holds them and no other call of it (a Sub) holds the scratch,
  // else memory of this call's own.
  uint8_t *Temp(size_t len);
  bool Leads() const { return s_.leader() && s_.nservers() > 1; }
  // Whether the leaders move @bytes of collective @coll in a ring (from s_.ring_min) rather than
  // by @below; logged.
  bool Ring(const char *coll, size_t bytes, const char *below) const {
    const bool ring = bytes >= s_.ring_min;
    LogDebug("collectives: call {}: the leaders' {} of {} bytes: {}", s_.seq, coll, bytes,
             ring ? "ring" : below);
    return ring;
  }
  // AllReduce of @buf (@count elements) between the leaders: RingAllReduce from s_.ring_min
  // bytes, DoublingAllReduce below.
  Status LeadersAllReduce(uint8_t *buf, size_t count);
  // Recursive doubling: ceil(log2 S) rounds (two more for the leaders beyond the largest power
  // of two, which hand their data to a partner first and get the result from it last), each an
  // exchange of the whole buffer with one partner, combined lower server first on both sides, so
  // every leader ends with the same bits.
  Status DoublingAllReduce(uint8_t *buf, size_t len);
  // Ring: RingReduceScatter then RingAllGather of the buffer's S blocks.
  Status RingAllReduce(uint8_t *buf, size_t count);
  // The ring's halves over @segs, one segment per server (contiguous, writable, the same lengths
  // on every leader), each of S-1 steps a segment to the next server and one from the previous.
  // Reduce-scatter: segs[me] ends reduced over every server (taken in ring order from server
  // me + 1: the same bits on every run); all-gather: segs[me] goes around, every segs[p] ends
  // holding server p's.
  Status RingReduceScatter(const std::vector<std::span<uint8_t>> &segs);
  Status RingAllGather(const std::vector<std::span<uint8_t>> &segs);
  // AllGather between the leaders of their servers' segments (@seg this server's, @block bytes per
  // rank) into the rank-ordered @recv: RingAllGather from s_.ring_min bytes of output,
  // BruckAllGather below.
  Status LeadersAllGather(const uint8_t *seg, size_t block, uint8_t *recv);
  // Bruck: ceil(log2 S) rounds; in round k a leader sends the segments it holds (its own and the
  // next 2^k - 1 servers', in that order, contiguous in a staging copy) to server me - 2^k and
  // receives as many from server me + 2^k.
  Status BruckAllGather(const uint8_t *seg, size_t block, uint8_t *recv);
  // The ring (RingAllGather) in @recv itself when every server's ranks are consecutive, else in a
  // staging copy.
  Status RingAllGatherInto(const uint8_t *seg, size_t block, uint8_t *recv);
  // One step with one or two partners: @out to leader @to, @in bytes from leader @from (its
  // chunks to @sink).
  Status Step(uint32_t to, transport::Wire::Out out, uint32_t from, size_t in,
              const transport::Wire::Sink &sink) {
    std::vector<transport::Wire::Out> outs(s_.nservers());
    std::vector<size_t> ins(s_.nservers());
    outs[to] = out;
    ins[from] = in;
    return Transfer(outs, ins, sink);
  }
  // Step whose @in bytes from @from only go to @into.
  Status StepInto(uint32_t to, transport::Wire::Out out, uint32_t from, size_t in, uint8_t *into) {
    std::vector<transport::Wire::Out> outs(s_.nservers());
    std::vector<size_t> ins(s_.nservers());
    std::vector<uint8_t *> dest(s_.nservers());
    outs[to] = out;
    ins[from] = in;
    dest[from] = into;
    return Transfer(outs, ins, kNoSink, dest);
  }
  // Recursive halving over @segs (as RingReduceScatter's): the leaders beyond the largest power
  // of two, P, hand their segments to leader me - P first; then in ceil(log2 P) rounds each
  // leader sends the half of the segments it still holds that its partner (me ^ d, d = P/2, P/4,
  // ..., 1) keeps and reduces the partner's copy of its own half, lower server's data first;
  // last, leader me - P sends leader me its segment. Each leader ends with segs[me] reduced
  // over every server, in an order fixed by the servers.
  Status HalvingReduceScatter(const std::vector<std::span<uint8_t>> &segs);
  // @buf (the call's count) from the leader of server @root to the other leaders.
  Status LeadersBroadcast(uint8_t *buf, uint32_t root);
  // Copy [off, off + len) of server @p's blocks (of @block bytes, in its rank order) between
  // @flat and the rank-ordered buffer @by_rank; @reduce combines instead of copying in.
  void Blockwise(uint32_t p, size_t block, size_t off, const uint8_t *from, size_t len,
                 uint8_t *by_rank, const ReduceFn *reduce) const;

  Context &ctx_;
  Communicator &comm_;
  SpanState &s_;
  const Call &c_;
  const Clock::time_point deadline_;
  const size_t es_;
  std::vector<Plan> &plans_;    // the exchanges': by rank, this server's ranks' only (PlanExchange)
  std::vector<uint8_t> own_;    // Temp's, where the scratch is not used
  bool holds_scratch_ = false;  // this call's Temp is the scratch (SpanState::scratch_busy)
};

// Numbers of the scratch's regions: apart from the activations' (RangeRegistry's count up from 1).
constexpr uint64_t kScratchSerial = uint64_t{1} << 63;

uint8_t *Spanning::Temp(size_t len) {
  // The scratch is the communicator's: one temporary at a time (a call's Sub that took one too
  // gets its own memory).
  if (!Leads() || !s_.wire || !s_.wire->uses_regions() || len == 0 || len > comm_.StagingBytes() ||
      (s_.scratch_busy && !holds_scratch_)) {
    own_.assign(len, 0);
    return own_.data();
  }
  if (s_.scratch.size() < len) {
    if (s_.scratch.valid()) {
      s_.wire->Withdraw(s_.scratch_region.base, s_.scratch_region.len);
      s_.scratch = UniqueMapping();
    }
    s_.scratch_region = {};
    constexpr size_t kGrain = size_t{2} << 20;
    const size_t size =
        std::max(len, std::min<size_t>((len + kGrain - 1) / kGrain * kGrain, comm_.StagingBytes()));
    s_.scratch = UniqueMapping::Map(size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (!s_.scratch.valid()) {
      const int err = errno;
      LogWarn("span: cannot map {} bytes for the leaders' temporaries: {}", size, ErrnoString(err));
      own_.assign(len, 0);
      return own_.data();
    }
    static std::atomic<uint64_t> serials{0};
    s_.scratch_region = {.base = reinterpret_cast<uintptr_t>(s_.scratch.get()),
                         .len = size,
                         .serial = kScratchSerial | ++serials};
  }
  s_.scratch_busy = holds_scratch_ = true;
  return s_.scratch.as<uint8_t>();
}

Status Spanning::OnServer(const Call &call) {
  Status st = coll::Run(*s_.local, call);
  if (!st.ok()) {
    return Error(st.code(), "among this server's ranks {} (numbered from 0 there): {}",
                 RankList(s_.mine()), st.message());
  }
  return st;
}

Status Spanning::Local(const Call &call) {
  if (s_.local->size() > 1) {
    return OnServer(call);
  }
  const size_t bytes = call.count * es_;
  switch (call.kind) {
    case Kind::kAllReduce:
    case Kind::kAllGather:
    case Kind::kScatter:
      if (call.recv != call.send && bytes != 0) {
        std::memmove(call.recv, call.send, bytes);
      }
      break;
    default:  // Broadcast, Barrier: nothing to do alone
      break;
  }
  return Status::Ok();
}

// Every rank's word on the call, checked on every rank of each server, then between the
// servers' leaders, whose verdict goes back to their server's ranks.
Status Spanning::Agree(const Status *refused) {
  const CallWords mine = Words(refused);
  std::vector<CallWords> local(s_.local->size());
  local[0] = mine;
  if (local.size() > 1) {
    HZC_RETURN_IF_ERROR(OnServer({.kind = Kind::kAllGather,
                                  .send = &mine,
                                  .recv = local.data(),
                                  .count = kWords,
                                  .dtype = HCCL_DATA_TYPE_UINT64}));
  }
  Status verdict = Compare(local, s_.mine());
  if (s_.leader()) {
    HZC_RETURN_IF_ERROR(AgreeAcrossServers(&verdict));
  }
  if (local.size() > 1) {
    uint64_t word = static_cast<uint64_t>(verdict.code());
    HZC_RETURN_IF_ERROR(OnServer({.kind = Kind::kBroadcast,
                                  .send = &word,
                                  .recv = &word,
                                  .count = 1,
                                  .dtype = HCCL_DATA_TYPE_UINT64}));
    if (verdict.ok() && word != HCCL_SUCCESS) {
      verdict = Error(PeerCode(word),
                      "rank {}, this server's first rank, failed call {} before it started (see "
                      "its log); nothing was moved",
                      s_.mine().front(), s_.seq);
    }
  }
  if (verdict.ok() && IsExchange(c_.kind)) {
    verdict = PlanExchange();  // every rank alike: an agreed call, nobody refused it
  }
  return verdict;
}

// This rank's word on the call (@refused: it refused it).
CallWords Spanning::Words(const Status *refused) const {
  if (refused != nullptr) {
    return {.seq = s_.seq, .kind = kRefusedWord};
  }
  const KindInfo &kind = Info(c_.kind);
  return {.seq = s_.seq,
          .kind = static_cast<uint64_t>(c_.kind),
          .dtype = c_.kind == Kind::kBarrier ? 0 : uint64_t{c_.dtype},
          .op = kind.reduces ? uint64_t{c_.op} : 0,
          .count = kind.vector ? 0 : c_.count,  // the vector ones compare their plans
          .root = kind.rooted ? c_.root : 0,
          .args = SharedArgsHash(c_, comm_.size())};
}

// HCCL_E_PARA naming the first of @ranks whose word in @words refuses the call or differs from
// the first rank's.
Status Spanning::Compare(const std::vector<CallWords> &words,
                         const std::vector<uint32_t> &ranks) const {
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].kind == kRefusedWord) {
      return Error(HCCL_E_PARA,
                   "rank {} refused call {}: its arguments failed its own checks (see its log); "
                   "nothing was moved",
                   ranks[i], s_.seq);
    }
    if (std::memcmp(&words[i], &words[0], sizeof(CallWords)) != 0) {
      return Error(HCCL_E_PARA,
                   "ranks disagree on call {}: rank {} made another call than rank {} "
                   "(collective, type, op, count, root or the arrays every rank shares); nothing "
                   "was moved",
                   s_.seq, ranks[i], ranks[0]);
    }
  }
  return Status::Ok();
}

// The leaders' part of Agree: every server's word and verdict to every leader; @verdict
// becomes the first failure among them (and the wire's, if this leader has none).
Status Spanning::AgreeAcrossServers(Status *verdict) {
  const std::vector<uint32_t> &leaders = s_.leaders;
  CallWords mine = Words(nullptr);
  mine.verdict = static_cast<uint64_t>(verdict->code());
  mine.ring_min = GetConfig().span_ring_min;
  auto all = comm_.group()->AllGatherFixed(leaders, kCallTag, std::as_bytes(std::span(&mine, 1)),
                                           deadline_, "the call's arguments");
  if (!all.ok()) {
    return all.status();
  }
  std::vector<CallWords> words(leaders.size());
  for (size_t i = 0; i < leaders.size(); ++i) {
    if ((*all)[i].size() != sizeof(CallWords)) {
      return Error(HCCL_E_INTERNAL, "rank {} sent {} bytes for call {}", leaders[i],
                   (*all)[i].size(), s_.seq);
    }
    std::memcpy(&words[i], (*all)[i].data(), sizeof(CallWords));
    if (verdict->ok() && words[i].verdict != HCCL_SUCCESS) {
      *verdict = Error(PeerCode(words[i].verdict),
                       "the server of rank {} failed call {} before it started (see its log); "
                       "nothing was moved",
                       leaders[i], s_.seq);
    }
    words[i].verdict = 0;
  }
  s_.ring_min = words[0].ring_min;  // one choice of algorithm, whatever each leader was told
  for (CallWords &w : words) {
    w.ring_min = 0;
  }
  if (verdict->ok()) {
    *verdict = Compare(words, leaders);
  }
  if (verdict->ok() && !s_.wire) {
    *verdict = s_.wire_status;
  }
  return Status::Ok();
}

Status Spanning::AllReduce() {
  Call local = c_;
  HZC_RETURN_IF_ERROR(Local(local));
  if (Leads()) {
    HZC_RETURN_IF_ERROR(LeadersAllReduce(static_cast<uint8_t *>(c_.recv), c_.count));
  }
  return Local({.kind = Kind::kBroadcast,
                .send = c_.recv,
                .recv = c_.recv,
                .count = c_.count,
                .dtype = c_.dtype});
}

Status Spanning::LeadersAllReduce(uint8_t *buf, size_t count) {
  return Ring("AllReduce", count * es_, "recursive doubling") ? RingAllReduce(buf, count)
                                                              : DoublingAllReduce(buf, count * es_);
}

Status Spanning::DoublingAllReduce(uint8_t *buf, size_t len) {
  ReduceFn reduce;
  HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  const uint32_t pow2 = std::bit_floor(n), rest = n - pow2;
  std::vector<uint8_t> theirs(len);
  auto into = [&](uint32_t, size_t off, const uint8_t *d, size_t l) {
    std::memcpy(theirs.data() + off, d, l);
  };
  // @buf combined with @theirs from server @p, the lower server's data first.
  auto combine = [&](uint32_t p) {
    const void *in[2] = {buf, theirs.data()};
    if (p < me) {
      std::swap(in[0], in[1]);
    }
    reduce(buf, in, 2, len / es_);
  };
  if (me >= pow2) {  // hand over, then take the result
    HZC_RETURN_IF_ERROR(Step(me - pow2, {buf, len}, me - pow2, 0, into));
    return Step(
        me - pow2, {}, me - pow2, len,
        [&](uint32_t, size_t off, const uint8_t *d, size_t l) { std::memcpy(buf + off, d, l); });
  }
  if (me < rest) {
    HZC_RETURN_IF_ERROR(Step(me + pow2, {}, me + pow2, len, into));
    combine(me + pow2);
  }
  for (uint32_t bit = 1; bit < pow2; bit <<= 1) {
    const uint32_t p = me ^ bit;
    HZC_RETURN_IF_ERROR(Step(p, {buf, len}, p, len, into));
    combine(p);
  }
  if (me < rest) {
    return Step(me + pow2, {buf, len}, me + pow2, 0, into);
  }
  return Status::Ok();
}

Status Spanning::RingAllReduce(uint8_t *buf, size_t count) {
  const uint32_t n = s_.nservers();
  const Blocks blk(count, es_, n);
  std::vector<std::span<uint8_t>> segs;
  for (uint32_t p = 0; p < n; ++p) {
    segs.emplace_back(buf + blk.first(p) * es_, blk.size(p) * es_);
  }
  HZC_RETURN_IF_ERROR(RingReduceScatter(segs));
  return RingAllGather(segs);
}

Status Spanning::RingReduceScatter(const std::vector<std::span<uint8_t>> &segs) {
  ReduceFn reduce;
  HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  // Step k sends segment me-k-1 and receives segment me-k-2, its chunks combined into this
  // leader's as they arrive (the segment being sent is another); the last step receives
  // segment me.
  for (uint32_t k = 0; k + 1 < n; ++k) {
    const std::span<uint8_t> send = segs[(me + 2 * n - k - 1) % n];
    const std::span<uint8_t> got = segs[(me + 2 * n - k - 2) % n];
    HZC_RETURN_IF_ERROR(Step((me + 1) % n, {send.data(), send.size()}, (me + n - 1) % n, got.size(),
                             [&](uint32_t, size_t off, const uint8_t *d, size_t l) {
                               const void *in[2] = {d, got.data() + off};
                               reduce(got.data() + off, in, 2, l / es_);
                             }));
  }
  return Status::Ok();
}

Status Spanning::RingAllGather(const std::vector<std::span<uint8_t>> &segs) {
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  // Step k sends segment me-k (this leader's first) and receives segment me-k-1.
  for (uint32_t k = 0; k + 1 < n; ++k) {
    const std::span<uint8_t> send = segs[(me + n - k) % n];
    const std::span<uint8_t> got = segs[(me + 2 * n - k - 1) % n];
    HZC_RETURN_IF_ERROR(StepInto((me + 1) % n, {send.data(), send.size()}, (me + n - 1) % n,
                                 got.size(), got.data()));
  }
  return Status::Ok();
}

Status Spanning::LeadersAllGather(const uint8_t *seg, size_t block, uint8_t *recv) {
  return Ring("AllGather", block * comm_.size(), "Bruck") ? RingAllGatherInto(seg, block, recv)
                                                          : BruckAllGather(seg, block, recv);
}

Status Spanning::BruckAllGather(const uint8_t *seg, size_t block, uint8_t *recv) {
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  auto server = [&](uint32_t j) { return (me + j) % n; };  // the j-th after this one
  auto bytes = [&](uint32_t j) { return s_.servers[server(j)].size() * block; };
  std::vector<size_t> at(n + 1);  // where the j-th's segment is in the staging copy
  for (uint32_t j = 0; j < n; ++j) {
    at[j + 1] = at[j] + bytes(j);
  }
  std::vector<uint8_t> staging(at[n]);
  std::memcpy(staging.data(), seg, bytes(0));
  for (uint32_t dist = 1; dist < n; dist *= 2) {
    const uint32_t k = std::min(dist, n - dist);  // segments sent and received
    HZC_RETURN_IF_ERROR(Step((me + n - dist) % n, {staging.data(), at[k]}, server(dist),
                             at[dist + k] - at[dist],
                             [&](uint32_t, size_t off, const uint8_t *d, size_t l) {
                               std::memcpy(staging.data() + at[dist] + off, d, l);
                             }));
  }
  for (uint32_t j = 1; j < n; ++j) {
    Blockwise(server(j), block, 0, staging.data() + at[j], bytes(j), recv, nullptr);
  }
  return Status::Ok();
}

Status Spanning::RingAllGatherInto(const uint8_t *seg, size_t block, uint8_t *recv) {
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  bool consecutive = true;
  size_t total = 0;
  for (uint32_t p = 0; p < n; ++p) {
    consecutive = consecutive && Consecutive(s_.servers[p]);
    total += s_.servers[p].size() * block;
  }
  std::vector<uint8_t> staging(consecutive ? 0 : total);  // by server
  std::vector<std::span<uint8_t>> segs;
  size_t at = 0;
  for (uint32_t p = 0; p < n; ++p) {
    const size_t len = s_.servers[p].size() * block;
    segs.emplace_back(consecutive ? recv + s_.servers[p].front() * block : staging.data() + at,
                      len);
    at += len;
  }
  if (!consecutive) {
    std::memcpy(segs[me].data(), seg, segs[me].size());
  }
  HZC_RETURN_IF_ERROR(RingAllGather(segs));
  for (uint32_t p = 0; p < n && !consecutive; ++p) {
    if (p != me) {
      Blockwise(p, block, 0, segs[p].data(), segs[p].size(), recv, nullptr);
    }
  }
  return Status::Ok();
}

Status Spanning::HalvingReduceScatter(const std::vector<std::span<uint8_t>> &segs) {
  ReduceFn reduce;
  HZC_RETURN_IF_ERROR(GetReduce(c_.dtype, c_.op, &reduce));
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  const uint32_t pow2 = std::bit_floor(n);
  // Group g (below pow2) is segments g and g + pow2 (when there is one), packed in that order.
  auto groups = [&](uint32_t first, uint32_t count) {
    std::vector<std::span<uint8_t>> out;
    for (uint32_t g = first; g < first + count; ++g) {
      out.push_back(segs[g]);
      if (g + pow2 < n) {
        out.push_back(segs[g + pow2]);
      }
    }
    return out;
  };
  auto pack = [](const std::vector<std::span<uint8_t>> &parts, std::vector<uint8_t> *to) {
    to->clear();
    for (const std::span<uint8_t> part : parts) {
      to->insert(to->end(), part.begin(), part.end());
    }
  };
  auto bytes = [](const std::vector<std::span<uint8_t>> &parts) {
    size_t len = 0;
    for (const std::span<uint8_t> part : parts) {
      len += part.size();
    }
    return len;
  };
  // The chunks of @parts' packed copy from leader @p, each combined into its part; the lower
  // server's data first.
  auto combine = [&](const std::vector<std::span<uint8_t>> &parts, uint32_t p) {
    return [&parts, p, me, &reduce, this](uint32_t, size_t off, const uint8_t *d, size_t len) {
      for (const std::span<uint8_t> part : parts) {
        if (off >= part.size()) {
          off -= part.size();
          continue;
        }
        const size_t l = std::min(len, part.size() - off);
        const void *in[2] = {part.data() + off, d};
        if (p < me) {
          std::swap(in[0], in[1]);
        }
        reduce(part.data() + off, in, 2, l / es_);
        d += l, len -= l, off = 0;
        if (len == 0) {
          break;
        }
      }
    };
  };
  std::vector<uint8_t> out;
  if (me >= pow2) {  // hand over every segment, then take this one's
    std::vector<std::span<uint8_t>> all(segs.begin(), segs.end());
    pack(all, &out);
    HZC_RETURN_IF_ERROR(Step(me - pow2, {out.data(), out.size()}, me - pow2, 0, kNoSink));
    return StepInto(me - pow2, {}, me - pow2, segs[me].size(), segs[me].data());
  }
  if (me + pow2 < n) {
    const std::vector<std::span<uint8_t>> all(segs.begin(), segs.end());
    HZC_RETURN_IF_ERROR(Step(me + pow2, {}, me + pow2, bytes(all), combine(all, me + pow2)));
  }
  for (uint32_t d = pow2 / 2; d >= 1; d /= 2) {
    const uint32_t p = me ^ d;
    const uint32_t keep = me & ~(d - 1), give = p & ~(d - 1);  // each half's first group
    const std::vector<std::span<uint8_t>> theirs = groups(give, d), mine = groups(keep, d);
    pack(theirs, &out);
    HZC_RETURN_IF_ERROR(Step(p, {out.data(), out.size()}, p, bytes(mine), combine(mine, p)));
  }
  if (me + pow2 < n) {
    return Step(me + pow2, {segs[me + pow2].data(), segs[me + pow2].size()}, me + pow2, 0, kNoSink);
  }
  return Status::Ok();
}

Status Spanning::Broadcast() {
  const uint32_t root_server = s_.server_of[c_.root];
  auto local = [&](uint32_t root) {
    return Local({.kind = Kind::kBroadcast,
                  .send = c_.recv,
                  .recv = c_.recv,
                  .count = c_.count,
                  .dtype = c_.dtype,
                  .root = root});
  };
  if (s_.server == root_server) {
    HZC_RETURN_IF_ERROR(local(s_.pos(c_.root)));
  }
  if (Leads()) {
    HZC_RETURN_IF_ERROR(LeadersBroadcast(static_cast<uint8_t *>(c_.recv), root_server));
  }
  return s_.server == root_server ? Status::Ok() : local(0);
}

// From the root server's leader to the others: when small or between two servers down a
// binomial tree (ceil(log2 S) rounds: a leader receives the buffer from its parent, then sends
// it to its children at once, at most ceil(log2 S) of them); else scattered then all-gathered
// (van de Geijn: block i goes to server i, then every leader sends its block to the others), so
// the root sends 2 (S - 1) / S of the buffer instead of ceil(log2 S) times it.
Status Spanning::LeadersBroadcast(uint8_t *buf, uint32_t root) {
  const uint32_t n = s_.nservers(), me = s_.wire->index();
  const size_t bytes = c_.count * es_;
  std::vector<transport::Wire::Out> out(n);
  std::vector<size_t> in(n);
  std::vector<uint8_t *> into(n);
  if (n == 2 || bytes < kScatteredBroadcast) {
    // Numbered from the root: leader v's parent is v less its lowest set bit, its children v + m
    // for each power of two m below that bit (below S for the root).
    const uint32_t v = (me + n - root) % n;
    const uint32_t low = v == 0 ? std::bit_ceil(n) : v & (~v + 1);
    if (v != 0) {
      in[(v - low + root) % n] = bytes;
      into[(v - low + root) % n] = buf;
      HZC_RETURN_IF_ERROR(Transfer(out, in, kNoSink, into));
      in.assign(n, 0);
    }
    bool any = false;
    for (uint32_t m = 1; m < low; m <<= 1) {
      if (v + m < n) {
        out[(v + m + root) % n] = {buf, bytes};
        any = true;
      }
    }
    return any ? Transfer(out, in, kNoSink) : Status::Ok();
  }
  LogDebug("span: a Broadcast of {} bytes is scattered and all-gathered between {} leaders", bytes,
           n);
  const Blocks blk(c_.count, es_, n);
  auto block = [&](uint32_t i) {
    return transport::Wire::Out{buf + blk.first(i) * es_, blk.size(i) * es_};
  };
  // Server p's block to server p.
  for (uint32_t p = 0; p < n; ++p) {
    out[p] = me == root ? block(p) : transport::Wire::Out{};
    in[p] = p == root && me != root ? blk.size(me) * es_ : 0;
    into[p] = buf + blk.first(me) * es_;
  }
  HZC_RETURN_IF_ERROR(Transfer(out, in, kNoSink, into));
  // Every leader's block to every leader but the root (which has them all).
  for (uint32_t p = 0; p < n; ++p) {
    out[p] = p == root ? transport::Wire::Out{} : block(me);
    in[p] = me == root ? 0 : blk.size(p) * es_;
    into[p] = buf + blk.first(p) * es_;
  }
  return Transfer(out, in, kNoSink, into);
}

void Spanning::Blockwise(uint32_t p, size_t block, size_t off, const uint8_t *from, size_t len,
                         uint8_t *by_rank, const ReduceFn *reduce) const {
  const auto &ranks = s_.servers[p];
  while (len > 0) {
    const size_t j = off / block, at = off % block, n = std::min(len, block - at);
    uint8_t *to = by_rank + ranks[j] * block + at;
    if (reduce != nullptr) {
      const void *inputs[2] = {to, from};
      (*reduce)(to, inputs, 2, n / es_);
    } else {
      std::memcpy(to, from, n);
    }
    off += n, from += n, len -= n;
  }
}

Status Spanning::AllGather() {
  const size_t block = c_.count * es_;
  auto *recv = static_cast<uint8_t *>(c_.recv);
  const auto &mine = s_.mine();
  std::vector<uint8_t> tmp;
  uint8_t *seg = recv + mine.front() * block;
  if (!Consecutive(mine)) {
    tmp.resize(mine.size() * block);
    seg = tmp.data();
  }
  HZC_RETURN_IF_ERROR(Local({.kind = Kind::kAllGather,
                             .send = c_.send,
                             .recv = seg,
                             .count = c_.count,
                             .dtype = c_.dtype}));
  if (s_.leader() && !tmp.empty()) {
    Blockwise(s_.server, block, 0, seg, tmp.size(), recv, nullptr);
  }
  if (Leads()) {
    HZC_RETURN_IF_ERROR(LeadersAllGather(seg, block, recv));
  }
  return Local({.kind = Kind::kBroadcast,
                .send = recv,
                .recv = recv,
                .count = c_.count * comm_.size(),
                .dtype = c_.dtype});
}

Status Spanning::ReduceScatter() {
  const size_t block = c_.count * es_;
  const std::span<uint8_t> part(Temp(comm_.size() * block), comm_.size() * block);
  HZC_RETURN_IF_ERROR(Local({.kind = Kind::kAllReduce,
                             .send = c_.send,
                             .recv = part.data(),
                             .count = c_.count * comm_.size(),
                             .dtype = c_.dtype,
                             .op = c_.op}));
  const auto &mine = s_.mine();
  if (Leads()) {
    std::vector<std::vector<uint8_t>> gathered(s_.nservers());
    std::vector<transport::Wire::Out> out(s_.nservers());
    for (uint32_t p = 0; p < s_.nservers(); ++p) {
      const auto &ranks = s_.servers[p];
      if (Consecutive(ranks)) {
        out[p] = {part.data() + ranks.front() * block, ranks.size() * block};
        continue;
      }
      for (uint32_t r : ranks) {
        gathered[p].insert(gathered[p].end(), part.data() + r * block,
                           part.data() + (r + 1) * block);
      }
      out[p] = {gathered[p].data(), gathered[p].size()};
    }
    // This server's blocks, reduced with the other servers' in place (a copy, reduced, copied
    // back when this server's ranks are not consecutive).
    auto *own = const_cast<uint8_t *>(out[s_.server].data);
    std::vector<std::span<uint8_t>> segs;
    for (const transport::Wire::Out &o : out) {
      segs.emplace_back(const_cast<uint8_t *>(o.data), o.len);  // part's, or gathered's
    }
    HZC_RETURN_IF_ERROR(Ring("ReduceScatter", part.size(), "recursive halving")
                            ? RingReduceScatter(segs)
                            : HalvingReduceScatter(segs));
    if (!Consecutive(mine)) {
      Blockwise(s_.server, block, 0, own, mine.size() * block, part.data(), nullptr);
    }
  }
  std::vector<uint8_t> seg;
  const uint8_t *send = part.data() + mine.front() * block;
  if (!Consecutive(mine)) {
    for (uint32_t r : mine) {
      seg.insert(seg.end(), part.data() + r * block, part.data() + (r + 1) * block);
    }
    send = seg.data();
  }
  return Local({.kind = Kind::kScatter,
                .send = send,
                .recv = c_.recv,
                .count = c_.count,
                .dtype = c_.dtype,
                .root = 0});
}

Status Spanning::Barrier() {
  HZC_RETURN_IF_ERROR(Local({.kind = Kind::kBarrier}));
  if (Leads()) {
    // Dissemination: in round k each leader tells the one 2^k after it and hears from the one
    // 2^k before it; after ceil(log2 S) rounds each has heard, through others, from all.
    const uint32_t n = s_.nservers(), me = s_.wire->index();
    static const uint64_t token = 0;
    for (uint32_t k = 1; k < n; k <<= 1) {
      std::vector<transport::Wire::Out> out(n);
      std::vector<size_t> in(n);
      out[(me + k) % n] = {reinterpret_cast<const uint8_t *>(&token), sizeof(token)};
      in[(me + n - k) % n] = sizeof(token);
      HZC_RETURN_IF_ERROR(Transfer(out, in, [](uint32_t, size_t, const uint8_t *, size_t) {}));
    }
  }
  return Local({.kind = Kind::kBarrier});
}

Status Spanning::PlanExchange() {
  const uint32_t n = comm_.size(), me = comm_.rank();
  auto mine = MakePlan(c_, n, me);
  if (!mine.ok()) {
    return Error(HCCL_E_INTERNAL, "plan of a validated call: {}", mine.status().message());
  }
  plans_.assign(n, Plan{});
  plans_[me] = std::move(*mine);
  if (Info(c_.kind).across != AcrossPairwise) {
    return Status::Ok();  // the schedule reads this rank's plan only
  }
  const std::vector<uint32_t> &loc = s_.mine();
  if (loc.size() > 1) {
    std::vector<uint64_t> words(plans_[me].send_len);
    words.insert(words.end(), plans_[me].recv_len.begin(), plans_[me].recv_len.end());
    std::vector<uint64_t> all(words.size() * loc.size());
    HZC_RETURN_IF_ERROR(OnServer({.kind = Kind::kAllGather,
                                  .send = words.data(),
                                  .recv = all.data(),
                                  .count = words.size(),
                                  .dtype = HCCL_DATA_TYPE_UINT64}));
    for (size_t j = 0; j < loc.size(); ++j) {
      if (loc[j] != me) {
        const uint64_t *w = all.data() + j * words.size();
        plans_[loc[j]].send_len.assign(w, w + n);
        plans_[loc[j]].recv_len.assign(w + n, w + 2 * n);
      }
    }
  }
  // The others' plans follow from the words every rank compared (counts, the shared arrays)
  // and their own checks (MakePlan: what a rank sends itself it expects): AlltoAllV's arrays
  // are each rank's own.
  return Info(c_.kind).shared == Shared::kNone && IsVector(c_.kind) ? CheckPairs() : Status::Ok();
}

Status Spanning::CheckPairs() {
  Disagreement first;
  if (Leads()) {
    HZC_RETURN_IF_ERROR(CrossCheck(&first));
  }
  if (s_.local->size() > 1) {
    HZC_RETURN_IF_ERROR(OnServer({.kind = Kind::kBroadcast,
                                  .send = &first,
                                  .recv = &first,
                                  .count = sizeof(first) / sizeof(uint64_t),
                                  .dtype = HCCL_DATA_TYPE_UINT64}));
  }
  if (first.from == UINT64_MAX) {
    return Status::Ok();
  }
  return PairDisagrees(s_.seq, first.from, first.to, first.sent, first.expected);
}

// Each leader sends every other what its ranks expect from that server's ranks (by its rank,
// then theirs) and checks what it receives, and its own server's plans, against what its ranks
// send; then the leaders all-gather their first disagreements and take the first of all.
Status Spanning::CrossCheck(Disagreement *first) {
  const std::vector<uint32_t> &loc = s_.mine();
  const uint32_t ns = s_.nservers();
  std::vector<std::vector<uint64_t>> expect(ns), got(ns);
  std::vector<transport::Wire::Out> out(ns);
  std::vector<size_t> in(ns);
  for (uint32_t b = 0; b < ns; ++b) {
    if (b == s_.server) {
      continue;
    }
    for (uint32_t a : loc) {
      for (uint32_t q : s_.servers[b]) {
        expect[b].push_back(plans_[a].recv_len[q]);
      }
    }
    out[b] = {reinterpret_cast<const uint8_t *>(expect[b].data()),
              expect[b].size() * sizeof(uint64_t)};
    got[b].resize(s_.servers[b].size() * loc.size());
    in[b] = got[b].size() * sizeof(uint64_t);
  }
  HZC_RETURN_IF_ERROR(Transfer(out, in, [&](uint32_t b, size_t off, const uint8_t *d, size_t len) {
    std::memcpy(reinterpret_cast<uint8_t *>(got[b].data()) + off, d, len);
  }));
  for (uint32_t b = 0; b < ns; ++b) {
    const std::vector<uint32_t> &theirs = s_.servers[b];
    for (size_t i = 0; i < theirs.size(); ++i) {  // their rank i expects
      for (size_t j = 0; j < loc.size(); ++j) {   // from our rank j
        const uint64_t sent = plans_[loc[j]].send_len[theirs[i]],
                       expected = b == s_.server ? plans_[theirs[i]].recv_len[loc[j]]
                                                 : got[b][i * loc.size() + j];
        const Disagreement d{loc[j], theirs[i], sent, expected};
        if (sent != expected && d.Before(*first)) {
          *first = d;
        }
      }
    }
  }
  auto all =
      comm_.group()->AllGatherFixed(s_.leaders, kCheckTag, std::as_bytes(std::span(first, 1)),
                                    deadline_, "the checks of the pairs");
  if (!all.ok()) {
    return all.status();
  }
  for (size_t i = 0; i < all->size(); ++i) {
    if ((*all)[i].size() != sizeof(Disagreement)) {
      return Error(HCCL_E_INTERNAL, "rank {} sent {} bytes for the check of call {}", s_.leaders[i],
                   (*all)[i].size(), s_.seq);
    }
    Disagreement d;
    std::memcpy(&d, (*all)[i].data(), sizeof(d));
    if (d.Before(*first)) {
      *first = d;
    }
  }
  return Status::Ok();
}

// AllReduce of the whole input into a temporary; the root copies it out.
Status Spanning::Reduce() {
  if (c_.count == 0) {
    return Status::Ok();
  }
  const std::span<uint8_t> tmp(Temp(c_.count * es_), c_.count * es_);
  HZC_RETURN_IF_ERROR(Sub({.kind = Kind::kAllReduce,
                           .send = c_.send,
                           .recv = tmp.data(),
                           .count = c_.count,
                           .dtype = c_.dtype,
                           .op = c_.op}));
  if (const Plan &p = Mine(); comm_.rank() == c_.root) {
    std::memcpy(static_cast<uint8_t *>(c_.recv) + p.recv_off[0], tmp.data(), p.recv_len[0]);
  }
  return Status::Ok();
}

// Broadcast of the root's whole input (a block of the call's count per rank, in rank order)
// into a temporary; each rank copies its block.
Status Spanning::Scatter() {
  const Plan &p = Mine();
  const uint64_t block = c_.count * es_, bytes = block * comm_.size();  // MakePlan checked
  if (bytes == 0) {
    return Status::Ok();
  }
  const std::span<uint8_t> tmp(Temp(bytes), bytes);
  if (comm_.rank() == c_.root) {
    std::memcpy(tmp.data(), c_.send, bytes);
  }
  HZC_RETURN_IF_ERROR(Sub({.kind = Kind::kBroadcast,
                           .send = tmp.data(),
                           .recv = tmp.data(),
                           .count = bytes,
                           .dtype = HCCL_DATA_TYPE_UINT8,
                           .root = c_.root}));
  std::memmove(static_cast<uint8_t *>(c_.recv) + p.recv_off[c_.root],
               tmp.data() + block * comm_.rank(), p.recv_len[c_.root]);
  return Status::Ok();
}

// AllReduce of the whole input region (the same on every rank: its arrays are shared); each
// rank copies its block.
Status Spanning::ReduceScatterV() {
  const Plan &p = Mine();
  const uint64_t bytes = p.SendExtent();
  if (bytes == 0) {
    return Status::Ok();
  }
  const std::span<uint8_t> tmp(Temp(bytes), bytes);
  HZC_RETURN_IF_ERROR(Sub({.kind = Kind::kAllReduce,
                           .send = c_.send,
                           .recv = tmp.data(),
                           .count = bytes / es_,
                           .dtype = c_.dtype,
                           .op = c_.op}));
  const uint32_t me = comm_.rank();
  if (p.recv_len[me] != 0) {
    std::memcpy(static_cast<uint8_t *>(c_.recv) + p.recv_off[me], tmp.data() + p.send_off[me],
                p.recv_len[me]);
  }
  return Status::Ok();
}

// AllGather of every rank's input region, padded to the largest, into a temporary; each rank
// takes the blocks addressed to it (in-place forms are safe: the input is copied first). Rank
// p's region is the block every rank receives from it (its count is recvCounts[p], which every
// rank shares, MakePlan checked on p).
Status Spanning::Regions() {
  const uint32_t n = comm_.size();
  const uint64_t most = *std::max_element(Mine().recv_len.begin(), Mine().recv_len.end());
  if (most == 0) {
    return Status::Ok();
  }
  std::vector<uint8_t> region(most), all(most * n);
  if (const uint64_t own = Mine().SendExtent(); own != 0) {
    std::memcpy(region.data(), c_.send, own);
  }
  HZC_RETURN_IF_ERROR(Sub({.kind = Kind::kAllGather,
                           .send = region.data(),
                           .recv = all.data(),
                           .count = most,
                           .dtype = HCCL_DATA_TYPE_UINT8}));
  const Plan &mine = Mine();
  for (uint32_t p = 0; p < n; ++p) {
    if (mine.recv_len[p] != 0) {
      std::memcpy(static_cast<uint8_t *>(c_.recv) + mine.recv_off[p], all.data() + p * most,
                  mine.recv_len[p]);
    }
  }
  return Status::Ok();
}

Status Spanning::LocalExchange(const uint8_t *send, uint8_t *recv, const LocalArrays &a) {
  if (s_.local->size() == 1) {
    if (a.sl[0] != 0) {
      std::memmove(recv + a.ro[0], send + a.so[0], a.sl[0]);
    }
    return Status::Ok();
  }
  return OnServer({.kind = Kind::kAlltoAllV,
                   .send = send,
                   .recv = recv,
                   .dtype = HCCL_DATA_TYPE_UINT8,
                   .send_counts = a.sl.data(),
                   .send_displs = a.so.data(),
                   .recv_counts = a.rl.data(),
                   .recv_displs = a.ro.data(),
                   .recv_dtype = HCCL_DATA_TYPE_UINT8});
}

// Each rank's blocks for the other servers' ranks, packed in one order that every rank knows:
// by destination server, then by destination rank (the servers' ranks ascending). The leader
// gathers its ranks' packs, sends each other server's leader only the blocks of that server's
// ranks (what the pairs move across servers, no more), and scatters what it received to its
// ranks, which unpack it; blocks between two ranks of one server go directly (a local AlltoAllV,
// zero copy where the buffers allow). Overlapping buffers (in place) are read from a copy.
Status Spanning::Pairwise() {
  const std::vector<uint32_t> &loc = s_.mine();
  const Plan &mine = Mine();
  auto *recv = static_cast<uint8_t *>(c_.recv);
  const auto *send = static_cast<const uint8_t *>(c_.send);
  std::vector<uint8_t> copy;
  if (const uint64_t in = mine.SendExtent(), out = mine.RecvExtent();
      in != 0 && out != 0 && send < recv + out && recv < send + in) {
    copy.assign(send, send + in);
    send = copy.data();
  }
  // The other servers' ranks, by server, then rank: the order of every pack.
  std::vector<uint32_t> away;
  for (uint32_t p = 0; p < s_.nservers(); ++p) {
    if (p != s_.server) {
      away.insert(away.end(), s_.servers[p].begin(), s_.servers[p].end());
    }
  }
  // The pairs on this server.
  LocalArrays pairs(loc.size());
  for (size_t j = 0; j < loc.size(); ++j) {
    pairs.sl[j] = mine.send_len[loc[j]], pairs.so[j] = mine.send_off[loc[j]];
    pairs.rl[j] = mine.recv_len[loc[j]], pairs.ro[j] = mine.recv_off[loc[j]];
  }
  HZC_RETURN_IF_ERROR(LocalExchange(send, recv, pairs));
  std::vector<uint64_t> packs;  // where local rank j's pack begins in @gathered
  std::vector<uint8_t> gathered;
  HZC_RETURN_IF_ERROR(GatherPacks(send, away, &packs, &gathered));
  std::vector<std::vector<uint8_t>> got(s_.nservers());
  if (Leads()) {
    HZC_RETURN_IF_ERROR(SwapPacks(away, packs, gathered, &got));
  }
  return DeliverMail(away, got, recv);
}

// This rank's pack (its blocks for the ranks of @away, in that order), gathered at the leader in
// local rank order (*@gathered; where each begins: *@packs). Every buffer has a byte at least, so
// that none is null.
Status Spanning::GatherPacks(const uint8_t *send, const std::vector<uint32_t> &away,
                             std::vector<uint64_t> *packs, std::vector<uint8_t> *gathered) {
  const std::vector<uint32_t> &loc = s_.mine();
  const size_t nl = loc.size();
  packs->assign(nl + 1, 0);
  for (size_t j = 0; j < nl; ++j) {
    (*packs)[j + 1] = (*packs)[j];
    for (uint32_t q : away) {
      (*packs)[j + 1] += Len(loc[j], q);
    }
  }
  std::vector<uint8_t> pack;
  for (uint32_t q : away) {
    const uint8_t *from = send + Mine().send_off[q];
    pack.insert(pack.end(), from, from + Len(comm_.rank(), q));
  }
  if (nl == 1) {
    *gathered = std::move(pack);
    return Status::Ok();
  }
  LocalArrays a(nl);
  a.sl[0] = pack.size();
  gathered->resize(s_.leader() ? std::max<uint64_t>(1, (*packs)[nl]) : 1);
  for (size_t j = 0; j < nl && s_.leader(); ++j) {
    a.rl[j] = (*packs)[j + 1] - (*packs)[j], a.ro[j] = (*packs)[j];
  }
  pack.resize(std::max<size_t>(1, pack.size()));
  return LocalExchange(pack.data(), gathered->data(), a);
}

// The leaders: each sends server p's leader the blocks of p's ranks (from this server's ranks in
// order, then p's ranks in order) and receives this server's ranks' blocks likewise, by server
// into *@got.
Status Spanning::SwapPacks(const std::vector<uint32_t> &away, const std::vector<uint64_t> &packs,
                           const std::vector<uint8_t> &gathered,
                           std::vector<std::vector<uint8_t>> *got) {
  const std::vector<uint32_t> &loc = s_.mine();
  std::vector<std::vector<uint8_t>> to(s_.nservers());
  for (size_t j = 0; j < loc.size(); ++j) {
    const uint8_t *at = gathered.data() + packs[j];
    for (uint32_t q : away) {
      auto &t = to[s_.server_of[q]];
      t.insert(t.end(), at, at + Len(loc[j], q));
      at += Len(loc[j], q);
    }
  }
  std::vector<transport::Wire::Out> out(s_.nservers());
  std::vector<size_t> in(s_.nservers());
  for (uint32_t r : away) {
    for (uint32_t q : loc) {
      in[s_.server_of[r]] += Len(r, q);
    }
  }
  for (uint32_t p = 0; p < s_.nservers(); ++p) {
    out[p] = {to[p].data(), to[p].size()};
    (*got)[p].resize(in[p]);
  }
  return Transfer(out, in, [&](uint32_t p, size_t off, const uint8_t *d, size_t n) {
    std::memcpy((*got)[p].data() + off, d, n);
  });
}

// What each of this server's ranks receives from the other servers, in the order of @away:
// sorted by the leader (from @got), scattered to the ranks, unpacked by each into @recv.
Status Spanning::DeliverMail(const std::vector<uint32_t> &away,
                             const std::vector<std::vector<uint8_t>> &got, uint8_t *recv) {
  const std::vector<uint32_t> &loc = s_.mine();
  const size_t nl = loc.size();
  std::vector<uint64_t> mails(nl + 1);  // where local rank j's mail begins
  for (size_t j = 0; j < nl; ++j) {
    mails[j + 1] = mails[j];
    for (uint32_t r : away) {
      mails[j + 1] += Len(r, loc[j]);
    }
  }
  std::vector<uint8_t> mail(std::max<uint64_t>(1, s_.leader() ? mails[nl] : 0));
  if (s_.leader()) {
    std::vector<const uint8_t *> at(s_.nservers());
    for (uint32_t p = 0; p < s_.nservers(); ++p) {
      at[p] = got[p].data();
    }
    std::vector<uint64_t> fill(mails.begin(), mails.end() - 1);
    for (uint32_t r : away) {
      const uint8_t *&from = at[s_.server_of[r]];
      for (size_t j = 0; j < nl; ++j) {
        std::memcpy(mail.data() + fill[j], from, Len(r, loc[j]));
        fill[j] += Len(r, loc[j]);
        from += Len(r, loc[j]);
      }
    }
  }
  const uint8_t *box = mail.data();
  std::vector<uint8_t> received;
  if (nl > 1) {
    LocalArrays a(nl);
    for (size_t j = 0; j < nl && s_.leader(); ++j) {
      a.sl[j] = mails[j + 1] - mails[j], a.so[j] = mails[j];
    }
    const size_t li = s_.local->rank();
    a.rl[0] = mails[li + 1] - mails[li];
    received.resize(std::max<uint64_t>(1, a.rl[0]));
    HZC_RETURN_IF_ERROR(LocalExchange(mail.data(), received.data(), a));
    box = received.data();
  }
  for (uint32_t r : away) {
    if (const uint64_t n = Mine().recv_len[r]; n != 0) {
      std::memcpy(recv + Mine().recv_off[r], box, n);
      box += n;
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

// One call across servers: @call, or a call this rank refused for @refused (its other fields
// unused).
Status RunOrRefuse(Communicator &comm, const Call &call, const Status *refused) {
  auto state = GetState(comm);
  if (!state.ok()) {
    return refused != nullptr ? *refused : state.status();
  }
  SpanState &s = **state;
  std::lock_guard lock(s.mutex);
  if (!s.broken.ok()) {
    return refused != nullptr ? *refused
                              : Error(s.broken.code(),
                                      "an earlier call failed half-way ({}); destroy the "
                                      "communicator",
                                      s.broken.message());
  }
  ++s.seq;
  Context ctx{
      .comm = comm, .span = &s, .seq = s.seq, .deadline = Clock::now() + comm.ExecTimeout()};
  Status st = Spanning(ctx, call).Agree(refused);
  if (st.ok() && refused == nullptr) {
    st = Info(call.kind).across(ctx, call);
  } else if (st.code() == HCCL_E_PARA || (st.ok() && refused != nullptr)) {
    // Nothing moved: the communicator stays usable.
    return refused == nullptr ? st
                              : Error(refused->code(), "{}; the other ranks fail call {} too",
                                      refused->message(), s.seq);
  }
  if (!st.ok()) {
    // Whoever waits for this rank learns of the failure now, not at its timeout.
    if (s.wire) {
      s.wire->Abort(static_cast<HcclResult>(st.code()));
    }
    Abort(*s.local, st);
    s.broken = st;
    comm.RecordAsyncError(static_cast<HcclResult>(st.code()));
    return refused != nullptr ? *refused : st;
  }
  LogDebug("collectives: call {} ({}) across {} servers done{}", s.seq, KindName(call.kind),
           s.nservers(),
           s.wire ? fmt::format(" ({} chunks sent and {} received over the wire so far)",
                                s.wire->chunks_sent(), s.wire->chunks_received())
                  : std::string());
  return Status::Ok();
}

}  // namespace

Status AcrossAllReduce(Context &ctx, const Call &c) {
  return Spanning(ctx, c).AllReduce();
}

Status AcrossBroadcast(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Broadcast();
}

Status AcrossAllGather(Context &ctx, const Call &c) {
  return Spanning(ctx, c).AllGather();
}

Status AcrossReduceScatter(Context &ctx, const Call &c) {
  return Spanning(ctx, c).ReduceScatter();
}

Status AcrossBarrier(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Barrier();
}

Status AcrossReduce(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Reduce();
}

Status AcrossScatter(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Scatter();
}

Status AcrossReduceScatterV(Context &ctx, const Call &c) {
  return Spanning(ctx, c).ReduceScatterV();
}

Status AcrossRegions(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Regions();
}

Status AcrossPairwise(Context &ctx, const Call &c) {
  return Spanning(ctx, c).Pairwise();
}

Status RunAcrossServers(Communicator &comm, const Call &call) {
  return RunOrRefuse(comm, call, nullptr);
}

Status RefuseAcrossServers(Communicator &comm, const Status &why) {
  return RunOrRefuse(comm, Call{}, &why);
}

}  // namespace hzc::coll
