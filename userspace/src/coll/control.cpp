// SPDX-License-Identifier: Apache-2.0
#include "coll/control.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>
#include <utility>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/futex.h"
#include "base/log.h"
#include "base/prefetch.h"
#include "base/rank_list.h"
#include "base/spin.h"
#include "bootstrap/local_exchange.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x687a6363;  // "hzcc"
constexpr size_t kPage = 4096;
// A sleeping waiter wakes to check for dead peers after this long, then twice as long each time
// up to kMaxSleepSlice (a rank that waits for seconds, as a thousand ranks on a few CPUs do,
// should not take the CPUs from the ones it waits for); aborts wake it at once.
constexpr auto kSleepSlice = std::chrono::milliseconds(10);
constexpr auto kMaxSleepSlice = std::chrono::milliseconds(160);

bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

size_t PageAligned(size_t bytes) {
  return (bytes + kPage - 1) / kPage * kPage;
}

// Bytes of the argument regions of @nranks ranks (both call parities).
size_t ArgBytes(uint32_t nranks) {
  return size_t{2} * nranks * ControlArea::kArgWords * nranks * sizeof(uint64_t);
}

// An error of the hand-off of the area, told as the control area's.
Status HandOffError(const Status &s) {
  return Error(s.code(), "control area: {}", s.message());
}

// The hand-off of the area: every rank comes at its first collective call.
bootstrap::LocalExchange HandOff(const ControlArea::Options &o,
                                 std::chrono::steady_clock::time_point deadline) {
  return {.name = o.name,
          .rank = o.rank,
          .nranks = o.nranks,
          .deadline = deadline,
          .arrival = "make the first collective call within HCCL_CONNECT_TIMEOUT"};
}

}  // namespace

struct ControlArea::Header {
  uint32_t magic;
  uint32_t nranks;
  uint64_t bytes;
  uint64_t staging_offset;
  uint64_t staging_bytes;
  uint64_t args_offset;    // the argument regions: [rank][parity][kArgWords * nranks]
  uint64_t inline_offset;  // the inline regions: [rank][parity][inline_bytes]
  uint64_t inline_bytes;
  // 0, or (its HcclResult << 16) | (1 + the rank that aborted first)
  std::atomic<uint32_t> abort;
};

struct alignas(64) ControlArea::Slot {
  std::atomic<uint32_t> step;     // futex word
  std::atomic<uint32_t> waiters;  // ranks about to sleep on @step
  uint32_t pid;
  std::atomic<int32_t> cpu;      // where the rank last arrived (sched_getcpu)
  alignas(64) CallDesc desc[2];  // by call parity
};

struct alignas(64) ControlArea::Line {
  std::atomic<uint32_t> seq;  // futex word: the call number's low bits, written last
  uint32_t reserved;
  uint32_t flags;
  uint32_t kind, dtype, op, root;
  std::atomic<int32_t> cpu;  // where the rank arrived (sched_getcpu)
  uint64_t count, args_hash;
  uint8_t data[kLineData];
};

// The ranks about to sleep on one of a rank's arrival lines, in a cache line of its own: the
// rank reads it after each announcement, and as long as nobody sleeps nobody writes it, so that
// read hits this CPU's cache (in the line itself it waited for the line's way back from the
// peers that read it: a cache miss per call).
struct alignas(64) ControlArea::Sleepers {
  std::atomic<uint32_t> count;
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);

ControlArea::ControlArea(UniqueMapping map, uint32_t rank, uint32_t nranks)
    : map_(std::move(map)), rank_(rank), nranks_(nranks) {
  header_ = map_.as<Header>();
  args_ = reinterpret_cast<uint64_t *>(map_.as<uint8_t>() + header_->args_offset);
  inline_ = map_.as<uint8_t>() + header_->inline_offset;
  inline_bytes_ = header_->inline_bytes;
  staging_ = map_.as<uint8_t>() + header_->staging_offset;
  staging_bytes_ = header_->staging_bytes;
  peers_.resize(nranks);
  oversubscribed_ = Oversubscribed(nranks);
}

ControlArea::~ControlArea() = default;

ControlArea::Slot &ControlArea::slot(uint32_t r) const {
  return reinterpret_cast<Slot *>(map_.as<uint8_t>() + kPage)[r];
}

size_t ControlArea::SlotBytes(uint32_t nranks) {
  static_assert(sizeof(Line) == 64, "an arrival line is one cache line");
  return PageAligned(nranks *
                     (sizeof(Slot) + kLineDepth * (sizeof(Line) + kEagerData) + sizeof(Sleepers)));
}

// A rank's arrival lines come each with its kEagerData bytes right after it, so that a call
// whose data is there reads adjacent lines (which the CPU fetches together).
namespace {
constexpr size_t kArrivalStride = 64 + ControlArea::kEagerData;  // a Line is 64 (SlotBytes)
}  // namespace

ControlArea::Line &ControlArea::line(uint32_t r, uint64_t seq) const {
  static_assert((kLineDepth & (kLineDepth - 1)) == 0);
  uint8_t *first = map_.as<uint8_t>() + kPage + nranks_ * sizeof(Slot);
  return *reinterpret_cast<Line *>(first + (size_t{r} * kLineDepth + (seq & (kLineDepth - 1))) *
                                               kArrivalStride);
}

ControlArea::Sleepers &ControlArea::sleepers(uint32_t r) const {
  auto *first = reinterpret_cast<Sleepers *>(map_.as<uint8_t>() + kPage + nranks_ * sizeof(Slot) +
                                             size_t{nranks_} * kLineDepth * kArrivalStride);
  return first[r];
}

uint8_t *ControlArea::eager(uint32_t r, uint64_t seq) const {
  return reinterpret_cast<uint8_t *>(&line(r, seq)) + sizeof(Line);
}

ControlArea::Word ControlArea::word(uint32_t r, uint64_t seq) const {
  if (seq == 0) {
    return {slot(r).step, slot(r).waiters, slot(r).cpu};
  }
  Line &l = line(r, seq);
  return {l.seq, sleepers(r).count, l.cpu};
}

size_t ControlArea::InlineSlotBytes(size_t requested, uint32_t nranks) {
  constexpr size_t kBudget = size_t{32} << 20, kLeast = 4096, kLine = 64;
  if (requested == 0 || nranks == 0) {
    return 0;
  }
  const size_t cap = std::max(kLeast, kBudget / (size_t{2} * nranks) / kLine * kLine);
  return std::min(cap, (requested + kLine - 1) / kLine * kLine);
}

Expected<UniqueMapping> ControlArea::Create(const Options &o, Clock::time_point deadline) {
  const size_t slots = SlotBytes(o.nranks);
  const size_t args = PageAligned(ArgBytes(o.nranks));
  const size_t inline_slot = InlineSlotBytes(o.inline_bytes, o.nranks);
  const size_t inlined = PageAligned(size_t{2} * o.nranks * inline_slot);
  const size_t staging = PageAligned(o.staging_bytes);
  const size_t len = kPage + slots + args + inlined + staging;
  auto shared = MakeSharedMemfd("hzc-coll", len);
  if (!shared.ok()) {
    return Error(shared.status().code(), "control area: {}", shared.status().message());
  }
  UniqueFd mem = std::move(shared->fd);
  UniqueMapping map = std::move(shared->map);
  auto *h = new (map.get()) Header{};
  h->magic = kMagic;
  h->nranks = o.nranks;
  h->bytes = len;
  h->args_offset = kPage + slots;
  h->inline_offset = kPage + slots + args;
  h->inline_bytes = inline_slot;
  h->staging_offset = kPage + slots + args + inlined;
  h->staging_bytes = staging;
  for (uint32_t r = 0; r < o.nranks; ++r) {
    (new (map.as<uint8_t>() + kPage + r * sizeof(Slot)) Slot{})->cpu = -1;
  }
  for (uint32_t i = 0; i < kLineDepth * o.nranks; ++i) {
    (new (map.as<uint8_t>() + kPage + o.nranks * sizeof(Slot) + i * sizeof(Line)) Line{})->cpu = -1;
  }
  if (Status s = bootstrap::GiveDescriptor(HandOff(o, deadline), mem.get(), len); !s.ok()) {
    return HandOffError(s);
  }
  return map;
}

Expected<UniqueMapping> ControlArea::Receive(const Options &o, Clock::time_point deadline) {
  auto handed = bootstrap::TakeDescriptor(HandOff(o, deadline));
  if (!handed.ok()) {
    return HandOffError(handed.status());
  }
  const size_t len = handed->word;
  auto map = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_SHARED, handed->fd.get());
  if (!map.valid()) {
    return Error(HCCL_E_MEMORY, "control area: mmap of {} bytes: {}", len, ErrnoString(errno));
  }
  const auto *h = map.as<const Header>();
  if (h->magic != kMagic || h->nranks != o.nranks || h->bytes != len) {
    return Error(HCCL_E_INTERNAL, "control area: rank 0's area does not match ({} ranks)",
                 h->nranks);
  }
  // The layout is rank 0's: every region must lie where this rank's own Create would put it,
  // inside the mapping, before this rank writes through it.
  const size_t slots = SlotBytes(o.nranks);
  const size_t args = PageAligned(ArgBytes(o.nranks));
  const uint64_t inline_slot = h->inline_bytes;
  const bool inline_fits =
      inline_slot <= InlineSlotBytes(Config::kMaxInlineMax, o.nranks) && inline_slot % 64 == 0;
  const size_t inlined = inline_fits ? PageAligned(size_t{2} * o.nranks * inline_slot) : 0;
  if (!inline_fits || h->args_offset != kPage + slots || h->inline_offset != kPage + slots + args ||
      h->staging_offset != kPage + slots + args + inlined || h->staging_offset > len ||
      h->staging_bytes > len - h->staging_offset) {
    return Error(HCCL_E_INTERNAL,
                 "control area: rank 0's layout (arguments at {:#x}, {:#x} inline bytes per rank "
                 "at {:#x}, staging at {:#x}, {:#x} bytes) does not fit its {:#x} bytes",
                 h->args_offset, inline_slot, h->inline_offset, h->staging_offset, h->staging_bytes,
                 len);
  }
  return map;
}

Expected<std::unique_ptr<ControlArea>> ControlArea::Open(const Options &o) {
  const Clock::time_point deadline = Clock::now() + o.connect_timeout;
  auto map = o.rank == 0 ? Create(o, deadline) : Receive(o, deadline);
  if (!map.ok()) {
    return map.status();
  }
  std::unique_ptr<ControlArea> area(new ControlArea(std::move(*map), o.rank, o.nranks));
  HZC_RETURN_IF_ERROR(area->Meet(deadline));
  return area;
}

Status ControlArea::Meet(Clock::time_point deadline) {
  slot(rank_).pid = static_cast<uint32_t>(getpid());
  HZC_RETURN_IF_ERROR(Barrier(deadline, "the control area"));
  for (uint32_t r = 0; r < nranks_; ++r) {
    const uint32_t pid = slot(r).pid;
    if (r == rank_ || pid == static_cast<uint32_t>(getpid())) {
      continue;  // ranks of this process cannot die without us
    }
    auto peer = bootstrap::PeerProcess::Open(static_cast<pid_t>(pid));
    if (peer.ok()) {
      peers_[r] = std::move(*peer);
    } else if (peer.status().code() == HCCL_E_REMOTE) {
      return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", r, pid);
    } else {
      LogWarn("control area: rank {}: {}; its death is noticed only by the timeout", r,
              peer.status().message());
    }
  }
  return Status::Ok();
}

uint8_t *ControlArea::LineData(uint64_t seq) const {
  return line(rank_, seq).data;
}

void ControlArea::Announce(const CallDesc &d, uint32_t flags) {
  Line &l = line(rank_, d.seq);
  l.flags = flags;
  l.kind = d.kind;
  l.dtype = d.dtype;
  l.op = d.op;
  l.root = d.root;
  l.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  l.count = d.count;
  l.args_hash = d.args_hash;
  // A release store, not a fence: the line goes to the peers without this rank stalling for it.
  // A waiter that counted itself in Sleepers just as this load read the count before it (the
  // store still in this CPU's store buffer) finds the new number when its FUTEX_WAIT compares
  // (a system call later, long after the buffer drained); at worst it sleeps one slice.
  l.seq.store(static_cast<uint32_t>(d.seq), std::memory_order_release);
  if (sleepers(rank_).count.load(std::memory_order_relaxed) != 0) {
    FutexWake(&l.seq);
  }
  // The next call's line, which the peers read since this rank last wrote it: ask for it now
  // (a prefetch for writing), so that the next Announce's stores find it owned instead of
  // waiting at the head of this CPU's store buffer for it to come back, which stalls every
  // store of the call behind them.
  PrefetchForWrite(&line(rank_, d.seq + 1));
  if ((flags & kEagerHolds) != 0) {  // the next call is likely of the same size
    PrefetchForWrite(eager(rank_, d.seq + 1), kEagerData);
  }
}

Status ControlArea::AwaitAnnounced(uint64_t seq, const Deadline &deadline, const char *what,
                                   bool *waited) {
  for (uint32_t r = 0; r < nranks_ && seq != 0; ++r) {
    if (r != rank_) {
      const uint32_t target = static_cast<uint32_t>(seq);
      if (!Reached(line(r, seq).seq.load(std::memory_order_acquire), target)) {
        if (waited != nullptr) {
          *waited = true;
        }
        HZC_RETURN_IF_ERROR(WaitWord(r, seq, target, deadline, what));
      }
    }
  }
  return Status::Ok();
}

Status ControlArea::AwaitArrivals(uint64_t seq, const Deadline &deadline, const char *what) {
  bool waited = false;
  HZC_RETURN_IF_ERROR(AwaitAnnounced(seq, deadline, what, &waited));
  const bool ahead = !waited;  // every peer had arrived already: they run ahead of this rank
  // The peers' data beside their lines, fetched now (while the call checks the arrivals) rather
  // than one line after another by the copy that reads it.
  for (uint32_t r = 0; r < std::min(nranks_, kPrefetchPeers) && seq != 0; ++r) {
    if (r != rank_ && (line(r, seq).flags & kEagerHolds) != 0) {
      PrefetchForRead(eager(r, seq), kEagerData);
    }
  }
  // The peers' lines of the next call, which peers ahead of this rank (a Broadcast's root) have
  // likely written already: fetched now, they are not a miss of the next call's wait. Not when
  // this rank waited: the line would be taken from its writer just before it writes it.
  for (uint32_t r = 0; r < std::min(nranks_, kPrefetchPeers) && seq != 0 && ahead; ++r) {
    if (r != rank_) {
      __builtin_prefetch(&line(r, seq + 1), 0);
      if ((line(r, seq).flags & kEagerHolds) != 0) {  // likely again
        PrefetchForRead(eager(r, seq + 1), kEagerData);
      }
    }
  }
  return CheckAbort();
}

bool ControlArea::AllAnnounced(uint64_t seq) const {
  for (uint32_t r = 0; r < nranks_; ++r) {
    if (r != rank_ &&
        !Reached(line(r, seq).seq.load(std::memory_order_acquire), static_cast<uint32_t>(seq))) {
      return false;
    }
  }
  return true;
}

bool ControlArea::StillAnnounced(uint32_t r, uint64_t seq) const {
  std::atomic_thread_fence(std::memory_order_acquire);  // the reads before stay before this one
  return line(r, seq).seq.load(std::memory_order_relaxed) == static_cast<uint32_t>(seq);
}

ControlArea::Arrived ControlArea::Arrival(uint32_t r, uint64_t seq) const {
  const Line &l = line(r, seq);
  return {.seq = l.seq.load(std::memory_order_acquire),
          .flags = l.flags,
          .kind = l.kind,
          .dtype = l.dtype,
          .op = l.op,
          .root = l.root,
          .count = l.count,
          .args_hash = l.args_hash};
}

std::span<const uint8_t> ControlArea::InlineInput(uint32_t r, uint64_t seq) const {
  const Line &l = line(r, seq);
  if ((l.flags & kLineHolds) != 0) {
    return {l.data, kLineData};
  }
  if ((l.flags & kEagerHolds) != 0) {
    return {eager(r, seq), kEagerData};
  }
  return {Inline(r, seq), inline_bytes_};
}

void ControlArea::Post(const CallDesc &d) {
  slot(rank_).desc[d.seq & 1] = d;
}

CallDesc ControlArea::Posted(uint32_t r, uint64_t seq) const {
  return slot(r).desc[seq & 1];
}

uint64_t *ControlArea::Args(uint32_t r, uint64_t seq) const {
  const size_t words = kArgWords * nranks_;
  return args_ + (size_t{r} * 2 + (seq & 1)) * words;
}

Status ControlArea::CheckAbort() const {
  const uint32_t a = header_->abort.load(std::memory_order_acquire);
  if (a != 0) {
    const uint32_t rank = (a & 0xffff) - 1;
    if ((a >> 16) == HCCL_E_TIMEOUT) {
      return Error(HCCL_E_TIMEOUT,
                   "rank {} timed out waiting for a rank that did not join the call (see its "
                   "log); the communicator's collectives are unusable (destroy it)",
                   rank);
    }
    return Error(HCCL_E_REMOTE,
                 "rank {} failed a collective call of this communicator; its collectives are "
                 "unusable (destroy it)",
                 rank);
  }
  return Status::Ok();
}

void ControlArea::Abort(HcclResult code) {
  uint32_t none = 0;
  const uint32_t word = (static_cast<uint32_t>(code) & 0xffff) << 16 | (rank_ + 1);
  if (!header_->abort.compare_exchange_strong(none, word)) {
    return;  // another rank aborted first; everybody was woken then
  }
  for (uint32_t r = 0; r < nranks_; ++r) {
    FutexWake(&slot(r).step);
    for (uint32_t i = 0; i < kLineDepth; ++i) {
      FutexWake(&line(r, i).seq);
    }
  }
}

Status ControlArea::CheckPeers() const {
  if (auto r = bootstrap::PeerProcess::FirstExited(peers_)) {
    return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", *r, slot(static_cast<uint32_t>(*r)).pid);
  }
  return Status::Ok();
}

Status ControlArea::WaitWord(uint32_t r, uint64_t seq, uint32_t target, const Deadline &deadline,
                             const char *what) {
  const Word w = word(r, seq);
  // A peer that last ran on this rank's CPU (the scheduler may put both there while other CPUs
  // idle) runs only when this rank lets it, and stays there as long as it only yields: sleep at
  // once, so that its wake-up may put this rank on an idle CPU.
  const int here = sched_getcpu();
  if (here < 0 || w.cpu.load(std::memory_order_relaxed) != here) {
    SpinWait spin(&spin_, oversubscribed_);
    for (;;) {
      if (Reached(w.value.load(std::memory_order_acquire), target)) {
        spin.Caught();
        return Status::Ok();
      }
      if (!spin.Again()) {
        break;
      }
    }
  }
  std::chrono::nanoseconds slice = kSleepSlice;
  for (;;) {
    HZC_RETURN_IF_ERROR(CheckAbort());
    w.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = w.value.load(std::memory_order_seq_cst);
    if (!Reached(v, target)) {
      const auto left = deadline.at() - Clock::now();
      FutexWait(&w.value, v,
                std::clamp<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(0), slice));
      slice = std::min<std::chrono::nanoseconds>(2 * slice, kMaxSleepSlice);
    }
    w.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (Reached(w.value.load(std::memory_order_acquire), target)) {
      return Status::Ok();  // woken by the arrival: no need to look at the peers
    }
    // The peers before the word: a rank that arrived and then exited has arrived, not died.
    const Status alive = CheckPeers();
    if (Reached(w.value.load(std::memory_order_acquire), target)) {
      return Status::Ok();
    }
    HZC_RETURN_IF_ERROR(CheckAbort());
    HZC_RETURN_IF_ERROR(alive);
    if (Clock::now() >= deadline.at()) {
      const std::string missing = RanksWhere(nranks_, [&](uint32_t q) {
        return !Reached(word(q, seq).value.load(std::memory_order_acquire), target);
      });
      return Error(HCCL_E_TIMEOUT, "rank(s) {} of {} did not reach {} in time", missing, nranks_,
                   what);
    }
  }
}

void ControlArea::Arrive() {
  Slot &mine = slot(rank_);
  mine.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  ++step_;
  mine.step.store(step_, std::memory_order_seq_cst);
  if (mine.waiters.load(std::memory_order_seq_cst) != 0) {
    FutexWake(&mine.step);
  }
}

Status ControlArea::Barrier(const Deadline &deadline, const char *what) {
  Arrive();
  return Wait(deadline, what);
}

Status ControlArea::Wait(const Deadline &deadline, const char *what) {
  for (uint32_t r = 0; r < nranks_; ++r) {
    if (r != rank_) {
      HZC_RETURN_IF_ERROR(WaitWord(r, 0, step_, deadline, what));
    }
  }
  return CheckAbort();
}

}  // namespace hzc::coll
