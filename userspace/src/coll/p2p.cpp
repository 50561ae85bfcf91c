// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "base/errno_string.h"
#include "base/futex.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "bootstrap/local_exchange.h"
#include "bootstrap/peer_process.h"
#include "bootstrap/root_info.h"
#include "coll/control.h"
#include "coll/guard.h"
#include "coll/p2p_wire.h"
#include "coll/reduce.h"
#include "transport/transport.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x687a7032;  // "hzp2"
constexpr size_t kPage = 4096;
constexpr size_t kMaxSlot = size_t{4} << 20;
constexpr size_t kAlign = 64;
constexpr auto kSlice = std::chrono::milliseconds(10);
constexpr auto kShortSlice = std::chrono::milliseconds(1);

// The receiver's answer to a message.
enum Verdict : uint32_t { kNone = 0, kStaging = 1, kZeroCopy = 2, kMismatch = 3, kRefused = 4 };

// Written by the sender of a direction.
struct alignas(64) SenderSide {
  std::atomic<uint32_t> posted;  // number of the last message posted
  uint32_t refused;              // 1: its sender refused it (nothing else is valid)
  uint32_t dtype;
  uint32_t zero_copy;  // 1: the sender's buffer lies in activated memory
  uint64_t count;
  uint64_t addr;                 // in the sender's address space
  std::atomic<uint64_t> filled;  // staging chunks written for the posted message
  // Number of the last message whose outcome the sender has read (or that it refused): the
  // receiver answers the next one only then, so an answer is never overwritten unread.
  std::atomic<uint32_t> finished;
};

// Written by the receiver of a direction.
struct alignas(64) ReceiverSide {
  std::atomic<uint32_t> answered;  // number of the last message answered
  uint32_t verdict;                // Verdict of @answered
  uint32_t dtype;                  // the receiver's, for the sender's message on a mismatch
  uint32_t done_code;              // HcclResult of message @done
  uint64_t count;
  std::atomic<uint64_t> drained;  // staging chunks copied out for the answered message
  std::atomic<uint32_t> done;     // number of the last message finished (or failed)
};

struct Direction {
  SenderSide s;
  ReceiverSide r;
};

struct PairHeader {
  uint32_t magic;
  uint32_t lo;
  uint32_t hi;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t slot_bytes;
  std::atomic<uint32_t> broken;               // 0, or 1 + the rank that broke the channel
  alignas(64) std::atomic<uint32_t> bell[2];  // by side (0: lo, 1: hi), bumped to wake it
  alignas(64) Direction dir[2];               // 0: lo -> hi, 1: hi -> lo
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(PairHeader) <= kPage);

bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

// One pair's channel as this rank sees it.
class Channel {
 public:
  static Expected<std::unique_ptr<Channel>> Open(const Communicator &comm, uint32_t peer,
                                                 Clock::time_point deadline);

  uint32_t peer() const { return peer_; }
  Direction &out() const { return h_->dir[side_]; }  // this rank -> peer
  Direction &in() const { return h_->dir[1 - side_]; }
  uint8_t *half(bool out, uint64_t chunk) const {
    return slots_ + (out ? side_ : 1 - side_) * slot_bytes_ + (chunk % 2) * half_bytes();
  }
  size_t half_bytes() const { return slot_bytes_ / 2 / kAlign * kAlign; }
  std::atomic<uint32_t> &bell() const { return h_->bell[side_]; }

  // Wake the peer after a change.
  void Ring() const {
    h_->bell[1 - side_].fetch_add(1, std::memory_order_seq_cst);
    FutexWake(&h_->bell[1 - side_]);
  }
  // An error when the channel is broken or the peer died.
  Status Check() const;
  // Mark the channel broken for both sides after @why.
  void Break(const Status &why);

  uint32_t send_seq = 0;  // number of the last message sent / received on this channel
  uint32_t recv_seq = 0;

 private:
  Channel(UniqueMapping map, uint32_t me, uint32_t peer);
  UniqueMapping map_;
  PairHeader *h_ = nullptr;
  uint8_t *slots_ = nullptr;
  size_t slot_bytes_ = 0;
  uint32_t me_ = 0;
  uint32_t peer_ = 0;
  uint32_t side_ = 0;
  bootstrap::PeerProcess process_;
  Status broken_;
};

Channel::Channel(UniqueMapping map, uint32_t me, uint32_t peer)
    : map_(std::move(map)), me_(me), peer_(peer), side_(me < peer ? 0 : 1) {
  h_ = map_.as<PairHeader>();
  slots_ = map_.as<uint8_t>() + kPage;
  slot_bytes_ = h_->slot_bytes;
}

Status Channel::Check() const {
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
  if (process_.Exited()) {
    return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", peer_, process_.pid());
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

// The area of the pair {lo, hi}: made by lo.
Expected<UniqueMapping> MakeArea(const bootstrap::LocalExchange &x, size_t staging_bytes) {
  const size_t slot =
      std::min<size_t>(std::max<size_t>(staging_bytes, kPage), kMaxSlot) / kPage * kPage;
  const size_t len = kPage + 2 * slot;
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
  if (h->magic != kMagic || h->bytes != len || kPage + 2 * h->slot_bytes != len) {
    return Error(HCCL_E_INTERNAL, "the area handed over does not match");
  }
  return map;
}

Expected<std::unique_ptr<Channel>> Channel::Open(const Communicator &comm, uint32_t peer,
                                                 Clock::time_point deadline) {
  const uint32_t me = comm.rank(), lo = std::min(me, peer), hi = std::max(me, peer);
  const bootstrap::LocalExchange x{.name = "hzc-p2p-" + bootstrap::IdString(comm.id()) + "-" +
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

// The point-to-point state of one communicator.
struct State : Communicator::CollState {
  std::mutex mutex;  // one call at a time
  std::map<uint32_t, std::unique_ptr<Channel>> channels;
  std::unique_ptr<RemoteP2p> remote;  // peers on other servers (made by their first item)
};

std::mutex g_state_mutex;

State &GetState(Communicator &comm) {
  std::lock_guard lock(g_state_mutex);
  auto &slot = comm.p2p_state();
  if (!slot) {
    slot = std::make_unique<State>();
  }
  return static_cast<State &>(*slot);
}

// One item in progress.
struct Op {
  P2pItem item;
  size_t index = 0;  // in the caller's list
  Channel *ch = nullptr;
  uint32_t seq = 0;
  enum Phase { kStart, kAnswer, kFill, kDrain, kDone, kFinished } phase = kStart;
  bool zero_copy = false;  // this rank's buffer lies in activated memory
  size_t bytes = 0;
  const Op *prev = nullptr;  // the op before it in the same direction of the same channel
  uint64_t chunk = 0;
  uint64_t chunks = 0;
  Status result;
};

uint64_t Chunks(size_t bytes, size_t half) {
  return (bytes + half - 1) / half;
}

bool Activated(Communicator &comm, const void *p, size_t bytes) {
  transport::PeerMemory *pm = comm.peer_memory();
  return pm != nullptr && bytes != 0 &&
         pm->Translate(comm.rank(), reinterpret_cast<uintptr_t>(p), bytes).ok();
}

// Finish @op with @st.
bool Finish(Op &op, Status st) {
  op.result = std::move(st);
  op.phase = Op::kFinished;
  return true;
}

// Finish the send @op with @st, telling the receiver that its answer was read.
bool FinishSend(Op &op, Status st) {
  op.ch->out().s.finished.store(op.seq, std::memory_order_release);
  op.ch->Ring();
  return Finish(op, std::move(st));
}

// The sender's side of @op: one step if it can make one; whether it did.
bool PollSend(Op &op) {
  Channel &ch = *op.ch;
  SenderSide &s = ch.out().s;
  ReceiverSide &r = ch.out().r;
  switch (op.phase) {
    case Op::kStart:
      if (!Reached(r.done.load(std::memory_order_acquire), op.seq - 1)) {
        return false;
      }
      s.refused = 0;
      s.dtype = static_cast<uint32_t>(op.item.dtype);
      s.count = op.item.count;
      s.addr = reinterpret_cast<uintptr_t>(op.item.buf);
      s.zero_copy = op.zero_copy ? 1 : 0;
      s.filled.store(0, std::memory_order_relaxed);
      s.posted.store(op.seq, std::memory_order_release);
      ch.Ring();
      op.phase = Op::kAnswer;
      return true;
    case Op::kAnswer:
      if (!Reached(r.answered.load(std::memory_order_acquire), op.seq)) {
        return false;
      }
      if (r.verdict == kRefused) {
        return FinishSend(op, Error(HCCL_E_PARA,
                                    "rank {} refused its receive {} from this rank (its arguments "
                                    "failed its own checks, see its log); nothing was moved",
                                    ch.peer(), op.seq));
      }
      if (r.verdict == kMismatch) {
        return FinishSend(op,
                          Error(HCCL_E_PARA,
                                "send {} to rank {}: it receives count={} dataType={}, this rank "
                                "sends count={} dataType={}; nothing was moved",
                                op.seq, ch.peer(), r.count, r.dtype, op.item.count,
                                static_cast<int>(op.item.dtype)));
      }
      op.phase = r.verdict == kStaging && op.chunks != 0 ? Op::kFill : Op::kDone;
      return true;
    case Op::kFill: {
      if (op.chunk >= r.drained.load(std::memory_order_acquire) + 2) {
        return false;  // both halves hold chunks the receiver has not copied yet
      }
      const size_t half = ch.half_bytes(), off = op.chunk * half;
      std::memcpy(ch.half(true, op.chunk), static_cast<const uint8_t *>(op.item.buf) + off,
                  std::min(half, op.bytes - off));
      s.filled.store(++op.chunk, std::memory_order_release);
      ch.Ring();
      if (op.chunk == op.chunks) {
        op.phase = Op::kDone;
      }
      return true;
    }
    case Op::kDone:
      if (!Reached(r.done.load(std::memory_order_acquire), op.seq)) {
        return false;
      }
      if (r.done_code != HCCL_SUCCESS) {
        return FinishSend(
            op, Error(static_cast<HcclResult>(r.done_code),
                      "rank {} failed to receive send {} (see its log)", ch.peer(), op.seq));
      }
      return FinishSend(op, Status::Ok());
    default:
      return false;
  }
}

// The receiver answers message @op.seq with @verdict (its own count and dataType with it).
void Answer(Op &op, Verdict verdict) {
  ReceiverSide &r = op.ch->in().r;
  r.verdict = verdict;
  r.count = op.item.count;
  r.dtype = static_cast<uint32_t>(op.item.dtype);
  r.drained.store(0, std::memory_order_relaxed);
  r.answered.store(op.seq, std::memory_order_release);
}

// The receiver marks message @op.seq done with @code.
void MarkDone(Op &op, HcclResult code) {
  ReceiverSide &r = op.ch->in().r;
  r.done_code = static_cast<uint32_t>(code);
  r.done.store(op.seq, std::memory_order_release);
  op.ch->Ring();
}

// Zero-copy: copy the sender's buffer, mapped at @from, straight into this rank's.
Status Pull(Op &op, const void *from) {
  const auto b = reinterpret_cast<uintptr_t>(from);
  const Fault f = RunGuarded({{.begin = b, .end = b + op.bytes, .rank = op.ch->peer()}},
                             [&] { std::memcpy(op.item.buf, from, op.bytes); });
  if (f.faulted) {
    return Error(HCCL_E_REMOTE,
                 "rank {}'s send buffer became inaccessible during receive {} (deactivated, "
                 "unset or the rank died): fault at {:#x} of its peer mapping",
                 op.ch->peer(), op.seq, f.address);
  }
  return Status::Ok();
}

// The sender's buffer at @addr through this rank's peer mapping, or null when it is not
// accessible (then the message is staged).
const void *MapSend(Communicator &comm, const Op &op, uint64_t addr) {
  auto from = comm.peer_memory()->Translate(op.ch->peer(), addr, op.bytes);
  return from.ok() ? *from : nullptr;
}

// The receiver's answer to the posted message of @op.
bool Match(Communicator &comm, Op &op) {
  const SenderSide &s = op.ch->in().s;
  if (s.refused != 0) {
    Answer(op, kNone);
    MarkDone(op, HCCL_E_PARA);
    return Finish(op, Error(HCCL_E_PARA,
                            "rank {} refused its send {} to this rank (its arguments failed its "
                            "own checks, see its log); nothing was moved",
                            op.ch->peer(), op.seq));
  }
  if (s.count != op.item.count || s.dtype != static_cast<uint32_t>(op.item.dtype)) {
    Answer(op, kMismatch);
    MarkDone(op, HCCL_E_PARA);
    return Finish(op, Error(HCCL_E_PARA,
                            "receive {} from rank {}: it sends count={} dataType={}, this rank "
                            "receives count={} dataType={}; nothing was moved",
                            op.seq, op.ch->peer(), s.count, s.dtype, op.item.count,
                            static_cast<int>(op.item.dtype)));
  }
  if (const void *from = op.zero_copy && s.zero_copy != 0 ? MapSend(comm, op, s.addr) : nullptr) {
    Answer(op, kZeroCopy);
    op.ch->Ring();
    LogDebug("p2p: receive {} from rank {}: {} bytes zero-copy", op.seq, op.ch->peer(), op.bytes);
    Status st = Pull(op, from);
    MarkDone(op, st.code());
    return Finish(op, std::move(st));
  }
  Answer(op, kStaging);
  op.ch->Ring();
  LogDebug("p2p: receive {} from rank {}: {} bytes staged", op.seq, op.ch->peer(), op.bytes);
  op.phase = Op::kDrain;
  if (op.chunks == 0) {
    MarkDone(op, HCCL_SUCCESS);
    return Finish(op, Status::Ok());
  }
  return true;
}

// The receiver's side of @op: one step if it can make one; whether it did.
bool PollRecv(Communicator &comm, Op &op) {
  Channel &ch = *op.ch;
  const SenderSide &s = ch.in().s;
  ReceiverSide &r = ch.in().r;
  if (op.phase == Op::kStart) {
    if (!Reached(s.posted.load(std::memory_order_acquire), op.seq)) {
      return false;
    }
    return Match(comm, op);
  }
  if (op.phase != Op::kDrain || s.filled.load(std::memory_order_acquire) <= op.chunk) {
    return false;
  }
  const size_t half = ch.half_bytes(), off = op.chunk * half;
  std::memcpy(static_cast<uint8_t *>(op.item.buf) + off, ch.half(false, op.chunk),
              std::min(half, op.bytes - off));
  r.drained.store(++op.chunk, std::memory_order_release);
  ch.Ring();
  if (op.chunk == op.chunks) {
    MarkDone(op, HCCL_SUCCESS);
    return Finish(op, Status::Ok());
  }
  return true;
}

// What the peer of @op has not done yet, for the timeout message.
std::string Awaited(const Op &op) {
  if (op.item.dir == P2pItem::kSend) {
    return op.phase == Op::kStart ? fmt::format("finish receive {} from this rank", op.seq - 1)
                                  : fmt::format("receive send {} of this rank", op.seq);
  }
  return fmt::format("post send {} to this rank", op.seq);
}

// The first unfinished op's channel that is broken or whose peer died. Taken before a pass
// over the ops: a peer that finished its part and then exited is seen finished by the pass,
// not dead.
Status CheckPeers(std::vector<Op> &ops) {
  for (Op &op : ops) {
    if (op.phase != Op::kFinished && op.ch != nullptr) {
      HZC_RETURN_IF_ERROR(op.ch->Check());
    }
  }
  return Status::Ok();
}

// The first unfinished op's failure to wait once the deadline passed.
Status CheckDeadline(std::vector<Op> &ops, Clock::time_point deadline,
                     std::chrono::seconds timeout) {
  if (Clock::now() < deadline) {
    return Status::Ok();
  }
  for (Op &op : ops) {  // the ops still opening their channel fail with the opening
    if (op.phase != Op::kFinished && op.ch != nullptr) {
      return Error(HCCL_E_TIMEOUT, "rank {} did not {} within HCCL_EXEC_TIMEOUT ({} s)",
                   op.ch->peer(), Awaited(op), timeout.count());
    }
  }
  return Status::Ok();
}

// A channel being opened in a thread of its own while the call's other items progress: a
// hand-off waits for the peer to come, and the peer may come only after this rank's other
// items moved.
struct Opening {
  uint32_t peer = 0;
  std::thread thread;
  std::atomic<bool> done{false};
  std::optional<Expected<std::unique_ptr<Channel>>> result;
};

// The items of one call in progress, on the channels of @s (which the caller holds).
class Batch {
 public:
  Batch(Communicator &comm, State &s, std::vector<Op> &ops, Clock::time_point deadline)
      : comm_(comm), s_(s), ops_(ops), deadline_(deadline) {}
  // Joins the openings still running (they end by the deadline too); a channel opened for
  // items that never ran is broken, since its peer's numbering moved on.
  ~Batch();
  Batch(const Batch &) = delete;
  Batch &operator=(const Batch &) = delete;

  // Every op finished (then the first op's error, if any), or a failure to wait (then the
  // channels of the unfinished ops are broken).
  Status Run();

 private:
  // Start an opening for every peer without a channel; give the ops of the others theirs.
  void Start();
  // Give the ops of @peer its channel @ch: numbers in list order, sizes, eligibility.
  void Assign(uint32_t peer, Channel *ch);
  // Install the channels of finished openings (or fail their ops); whether any finished.
  bool Collect();
  // One pass over the ops; the first unfinished op with a channel and its bell before it.
  bool PollAll(Op **waiting, uint32_t *bell, bool *unfinished);

  Communicator &comm_;
  State &s_;
  std::vector<Op> &ops_;
  const Clock::time_point deadline_;
  std::vector<std::unique_ptr<Opening>> openings_;
  Status failed_;
};

void Batch::Start() {
  for (const Op &op : ops_) {
    const uint32_t peer = op.item.peer;
    auto it = s_.channels.find(peer);
    if (it != s_.channels.end()) {
      if (op.ch == nullptr) {
        Assign(peer, it->second.get());
      }
      continue;
    }
    bool started = false;
    for (const auto &o : openings_) {
      started = started || o->peer == peer;
    }
    if (!started) {
      auto o = std::make_unique<Opening>();
      o->peer = peer;
      Opening *raw = o.get();
      o->thread = std::thread([this, raw] {
        raw->result = Channel::Open(comm_, raw->peer, deadline_);
        raw->done.store(true, std::memory_order_release);
      });
      openings_.push_back(std::move(o));
    }
  }
}

void Batch::Assign(uint32_t peer, Channel *ch) {
  for (Op &op : ops_) {
    if (op.item.peer != peer) {
      continue;
    }
    op.ch = ch;
    op.seq = op.item.dir == P2pItem::kSend ? ++ch->send_seq : ++ch->recv_seq;
    op.bytes = static_cast<size_t>(op.item.count) * TypeSize(op.item.dtype);
    op.chunks = Chunks(op.bytes, ch->half_bytes());
    op.zero_copy = Activated(comm_, op.item.buf, op.bytes);
  }
}

bool Batch::Collect() {
  bool any = false;
  for (auto &o : openings_) {
    if (!o->thread.joinable() || !o->done.load(std::memory_order_acquire)) {
      continue;
    }
    o->thread.join();
    any = true;
    if (!o->result->ok()) {
      for (Op &op : ops_) {
        if (op.item.peer == o->peer) {
          Finish(op, o->result->status());
        }
      }
      continue;
    }
    Channel *ch = o->result->value().get();
    s_.channels[o->peer] = std::move(o->result->value());
    Assign(o->peer, ch);
  }
  return any;
}

bool Batch::PollAll(Op **waiting, uint32_t *bell, bool *unfinished) {
  bool progressed = false;
  for (Op &op : ops_) {
    if (op.phase == Op::kFinished) {
      continue;
    }
    *unfinished = true;
    if (op.ch == nullptr) {
      continue;  // its channel is being opened
    }
    if (*waiting == nullptr) {
      *waiting = &op;
      *bell = op.ch->bell().load(std::memory_order_seq_cst);
    }
    if (op.prev == nullptr || op.prev->phase == Op::kFinished) {
      progressed |= op.item.dir == P2pItem::kSend ? PollSend(op) : PollRecv(comm_, op);
    }
  }
  return progressed;
}

Status Batch::Run() {
  Start();
  for (;;) {
    const Status alive = CheckPeers(ops_);
    const bool opened = Collect();
    Op *waiting = nullptr;
    uint32_t bell = 0;
    bool unfinished = false;
    const bool progressed = PollAll(&waiting, &bell, &unfinished);
    if (!unfinished) {
      break;
    }
    if (opened || progressed) {
      continue;
    }
    if (Status st = alive.ok() ? CheckDeadline(ops_, deadline_, comm_.ExecTimeout()) : alive;
        !st.ok()) {
      failed_ = st;
      for (Op &op : ops_) {
        if (op.phase != Op::kFinished && op.ch != nullptr) {
          op.ch->Break(st);
        }
      }
      return st;
    }
    const bool several = openings_.size() + s_.channels.size() > 1;
    const auto left =
        std::clamp<std::chrono::nanoseconds>(deadline_ - Clock::now(), std::chrono::nanoseconds(0),
                                             waiting == nullptr || several ? kShortSlice : kSlice);
    if (waiting != nullptr) {
      FutexWait(&waiting->ch->bell(), bell, left);
    } else {
      std::this_thread::sleep_for(left);
    }
  }
  for (const Op &op : ops_) {
    HZC_RETURN_IF_ERROR(op.result);
  }
  return Status::Ok();
}

Batch::~Batch() {
  for (auto &o : openings_) {
    if (!o->thread.joinable()) {
      continue;
    }
    o->thread.join();
    if (o->result->ok()) {
      Channel &ch = *o->result->value();
      ch.Break(failed_.ok() ? Error(HCCL_E_INTERNAL, "the call gave up") : failed_);
      s_.channels[o->peer] = std::move(o->result->value());
    }
  }
}

// A message in batches of more than one item names the item.
Status ItemError(const std::vector<P2pItem> &items, size_t i, const Status &st) {
  if (items.size() == 1) {
    return st;
  }
  return Error(st.code(), "sendRecvInfo[{}]: {}", i, st.message());
}

// Wait until @ready() (the peer's progress on @ch), until @deadline.
template <typename Ready>
Status WaitOn(const Channel &ch, Ready ready, Clock::time_point deadline, const char *what) {
  for (;;) {
    const uint32_t bell = ch.bell().load(std::memory_order_seq_cst);
    const Status alive = ch.Check();  // before: a peer that made @ready() true and exited is done
    if (ready()) {
      return Status::Ok();
    }
    HZC_RETURN_IF_ERROR(alive);
    if (Clock::now() >= deadline) {
      return Error(HCCL_E_TIMEOUT, "rank {} did not {} within HCCL_EXEC_TIMEOUT", ch.peer(), what);
    }
    FutexWait(&ch.bell(), bell, kSlice);
  }
}

// Take the next message number of @dir on @ch and post it as refused by this rank. First wait
// for the peer to be done with the message before (the one this rank refused just before, if
// any: refusals are not waited for), so that nothing it still reads is overwritten.
Status PostRefusal(Channel &ch, P2pItem::Dir dir, Clock::time_point deadline) {
  if (dir == P2pItem::kSend) {
    SenderSide &s = ch.out().s;
    const uint32_t seq = ++ch.send_seq;
    HZC_RETURN_IF_ERROR(WaitOn(
        ch, [&] { return Reached(ch.out().r.done.load(std::memory_order_acquire), seq - 1); },
        deadline, "finish the message before"));
    s.refused = 1;
    s.finished.store(seq, std::memory_order_relaxed);
    s.posted.store(seq, std::memory_order_release);
  } else {
    ReceiverSide &r = ch.in().r;
    const uint32_t seq = ++ch.recv_seq;
    HZC_RETURN_IF_ERROR(WaitOn(
        ch, [&] { return Reached(ch.in().s.finished.load(std::memory_order_acquire), seq - 1); },
        deadline, "read the answer to the message before"));
    r.verdict = kRefused;
    r.done_code = HCCL_E_PARA;
    r.answered.store(seq, std::memory_order_release);
    r.done.store(seq, std::memory_order_release);
  }
  ch.Ring();
  return Status::Ok();
}

// The items of @items that move data: an item of count 0 is no transfer at all (no message,
// no check of its buffer, dataType or rank), as in CANN, where HcclSend and HcclRecv return
// at once for count 0.
std::vector<P2pItem> NonEmpty(const std::vector<P2pItem> &items) {
  std::vector<P2pItem> out;
  for (const P2pItem &item : items) {
    if (item.count != 0) {
      out.push_back(item);
    }
  }
  return out;
}

}  // namespace

Status ValidateP2p(const Communicator &comm, const P2pItem &item) {
  if (item.dir != P2pItem::kSend && item.dir != P2pItem::kRecv) {
    return Error(HCCL_E_PARA, "sendRecvType={}: not HCCL_SEND (0) nor HCCL_RECV (1)",
                 static_cast<int>(item.dir));
  }
  const size_t es = TypeSize(item.dtype);
  if (es == 0) {
    return Error(HCCL_E_PARA, "dataType={}: not an HcclDataType", static_cast<int>(item.dtype));
  }
  if (item.count > SIZE_MAX / es ||
      reinterpret_cast<uintptr_t>(item.buf) > UINTPTR_MAX - item.count * es) {
    return Error(HCCL_E_PARA, "count={}: the buffer wraps around the address space", item.count);
  }
  if (item.peer >= comm.size()) {
    return Error(HCCL_E_PARA, "{}={}: must be below the rank count {}", item.peer_name, item.peer,
                 comm.size());
  }
  if (item.peer == comm.rank()) {
    return Error(HCCL_E_NOT_SUPPORT, "{}={}: this rank itself; a rank cannot {} itself",
                 item.peer_name, item.peer,
                 item.dir == P2pItem::kSend ? "send to" : "receive from");
  }
  return Status::Ok();
}

Status RefuseP2p(Communicator &comm, const std::vector<P2pItem> &all, const Status &why) {
  const std::vector<P2pItem> items = NonEmpty(all);
  State &s = GetState(comm);
  std::lock_guard lock(s.mutex);
  const Clock::time_point deadline = Clock::now() + comm.ExecTimeout();
  std::string told;
  if (s.remote) {
    std::vector<P2pItem> remote;
    for (const P2pItem &item : items) {
      if (item.peer < comm.size() && OnOtherServer(comm, item.peer)) {
        remote.push_back(item);
      }
    }
    for (uint32_t peer : s.remote->Refuse(remote, deadline)) {
      told += (told.empty() ? "" : ",") + std::to_string(peer);
    }
  }
  for (const P2pItem &item : items) {
    if (item.peer < comm.size() && OnOtherServer(comm, item.peer)) {
      continue;
    }
    auto it = s.channels.find(item.peer);
    if (item.dir == P2pItem::kInvalid || it == s.channels.end() || !it->second->Check().ok()) {
      continue;  // no channel: the peer times out
    }
    Channel &ch = *it->second;
    if (Status st = PostRefusal(ch, item.dir, deadline); !st.ok()) {
      ch.Break(st);
      LogWarn("p2p: the refusal did not reach rank {}: {}", ch.peer(), st.message());
      continue;
    }
    told += (told.empty() ? "" : ",") + std::to_string(item.peer);
  }
  if (told.empty()) {
    return why;
  }
  return Error(why.code(), "{}; rank(s) {} fail the matching call(s) too", why.message(), told);
}

Status RunP2p(Communicator &comm, const std::vector<P2pItem> &all) {
  std::vector<Op> ops;
  std::vector<P2pItem> remote;  // peers on other servers
  std::vector<size_t> remote_index;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].count == 0) {
      continue;  // NonEmpty
    }
    if (Status st = ValidateP2p(comm, all[i]); !st.ok()) {
      return RefuseP2p(comm, all, ItemError(all, i, st));
    }
    if (OnOtherServer(comm, all[i].peer)) {
      remote.push_back(all[i]);
      remote_index.push_back(i);
      continue;
    }
    Op &op = ops.emplace_back();
    op.item = all[i];
    op.index = i;
  }
  for (Op &op : ops) {
    for (const Op *q = ops.data(); q != &op; ++q) {
      if (q->item.peer == op.item.peer && q->item.dir == op.item.dir) {
        op.prev = q;
      }
    }
  }
  State &s = GetState(comm);
  std::lock_guard lock(s.mutex);
  for (const Op &op : ops) {
    if (auto it = s.channels.find(op.item.peer); it != s.channels.end()) {
      HZC_RETURN_IF_ERROR(it->second->Check());
    }
  }
  const Clock::time_point deadline = Clock::now() + comm.ExecTimeout();
  // The items with peers on other servers progress at the same time as the others: a peer of
  // one may wait for this rank's other items first.
  std::vector<Status> remote_results;
  std::thread across;
  if (!remote.empty()) {
    if (!s.remote) {
      s.remote = std::make_unique<RemoteP2p>(comm);
    }
    across = std::thread([&] { s.remote->Run(remote, &remote_results, deadline); });
  }
  Status st;
  {
    Batch batch(comm, s, ops, deadline);
    st = batch.Run();
  }
  if (across.joinable()) {
    across.join();
  }
  for (const Op &op : ops) {
    if (!op.result.ok()) {
      return ItemError(all, op.index, op.result);
    }
  }
  HZC_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < remote.size(); ++i) {
    if (!remote_results[i].ok()) {
      return ItemError(all, remote_index[i], remote_results[i]);
    }
  }
  return Status::Ok();
}

}  // namespace hzc::coll
