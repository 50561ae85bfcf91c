// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p_match.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "coll/guard.h"
#include "coll/reduce.h"
#include "transport/transport.h"

namespace hzc::coll::p2p {

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

namespace {

// The buffered send @op: into the direction's next box once one is free (the receiver took the
// message kBoxes before out); then it is done.
bool SendBox(Op &op) {
  Channel &ch = *op.ch;
  if (ch.boxes_sent - ch.boxes_freed >= kBoxes) {
    ch.boxes_freed = ch.out().r.freed.load(std::memory_order_acquire);
    if (ch.boxes_sent - ch.boxes_freed >= kBoxes) {
      return false;
    }
  }
  Box *b = ch.box(true, ch.boxes_sent++);
  std::memcpy(Channel::box_data(b), op.item.buf, op.bytes);
  b->dtype = static_cast<uint32_t>(op.item.dtype);
  b->count = op.item.count;
  b->seq.store(op.seq, std::memory_order_release);
  ch.NoteCpu();
  ch.Ring();
  return Finish(op, Status::Ok());
}

// The sender's post of @op (the receiver answers it).
void Post(Op &op) {
  Channel &ch = *op.ch;
  SenderSide &s = ch.out().s;
  s.refused = 0;
  // A small message goes eagerly: its bytes with the post, into a staging half that is free
  // (the message before is done).
  s.eager = op.bytes != 0 && op.bytes <= ch.eager_bytes() && !op.zero_copy ? 1 : 0;
  if (s.eager != 0) {
    std::memcpy(ch.half(true, 0), op.item.buf, op.bytes);
  }
  s.dtype = static_cast<uint32_t>(op.item.dtype);
  s.count = op.item.count;
  s.addr = reinterpret_cast<uintptr_t>(op.item.buf);
  s.zero_copy = op.zero_copy ? 1 : 0;
  s.filled.store(0, std::memory_order_relaxed);
  s.posted.store(op.seq, std::memory_order_release);
  ch.NoteCpu();
  ch.Ring();
  op.phase = Op::kAnswer;
}

// The sender reads the receiver's answer to @op, if there is one yet.
bool ReadAnswer(Op &op) {
  Channel &ch = *op.ch;
  const ReceiverSide &r = ch.out().r;
  // @done before @answered: a message marked done but not answered was refused (an answered
  // one is answered before it is marked done).
  const uint32_t done = r.done.load(std::memory_order_acquire);
  if (!Reached(r.answered.load(std::memory_order_acquire), op.seq)) {
    if (!Reached(done, op.seq)) {
      return false;
    }
    return Finish(op, Error(HCCL_E_PARA,
                            "rank {} refused its receive {} from this rank (its arguments "
                            "failed its own checks, see its log); nothing was moved",
                            ch.peer(), op.seq));
  }
  if (r.verdict == kMismatch) {
    return Finish(op, Error(HCCL_E_PARA,
                            "send {} to rank {}: it receives count={} dataType={}, this rank "
                            "sends count={} dataType={}; nothing was moved",
                            op.seq, ch.peer(), r.count, r.dtype, op.item.count,
                            static_cast<int>(op.item.dtype)));
  }
  op.phase = r.verdict == kStaging && op.chunks != 0 ? Op::kFill : Op::kDone;  // or kEager
  return true;
}

}  // namespace

// The sender's side of @op: one step if it can make one; whether it did.
bool PollSend(Op &op) {
  Channel &ch = *op.ch;
  SenderSide &s = ch.out().s;
  ReceiverSide &r = ch.out().r;
  switch (op.phase) {
    case Op::kStart:
      if (op.box) {
        return SendBox(op);
      }
      if (!Reached(r.done.load(std::memory_order_acquire), op.seq - 1)) {
        return false;
      }
      Post(op);
      return true;
    case Op::kAnswer:
      return ReadAnswer(op);
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
        return Finish(
            op, Error(PeerCode(r.done_code), "rank {} failed to receive send {} (see its log)",
                      ch.peer(), op.seq));
      }
      return Finish(op, Status::Ok());
    default:
      return false;
  }
}

namespace {

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

// The receiver's failure of @op: the sender sends @count elements of @dtype.
Status Mismatch(const Op &op, uint64_t count, uint32_t dtype) {
  return Error(HCCL_E_PARA,
               "receive {} from rank {}: it sends count={} dataType={}, this rank receives "
               "count={} dataType={}; nothing was moved",
               op.seq, op.ch->peer(), count, dtype, op.item.count, static_cast<int>(op.item.dtype));
}

// The receiver frees the next box of its incoming direction, which held message @seq.
void FreeBox(Channel &ch, uint32_t seq) {
  ch.box_seq = seq;
  ch.in().r.freed.store(++ch.boxes_taken, std::memory_order_release);
}

// The next box of the incoming direction if it holds message @seq, else null (the message is
// not there yet, or comes posted). Boxes of earlier messages, which this rank refused, are
// dropped on the way.
Box *NextBox(Channel &ch, uint32_t seq) {
  for (;;) {
    Box *b = ch.box(false, ch.boxes_taken);
    const uint32_t q = b->seq.load(std::memory_order_acquire);
    if (q == seq) {
      return b;
    }
    if (!Reached(q, ch.box_seq + 1) || Reached(q, seq)) {
      return nullptr;  // taken before (or never used), or a later message
    }
    FreeBox(ch, q);
    ch.Ring();
  }
}

// The receiver takes buffered message @op.seq out of box @b.
bool TakeBox(Op &op, Box *b) {
  Channel &ch = *op.ch;
  Status st;
  if (b->count != op.item.count || b->dtype != static_cast<uint32_t>(op.item.dtype)) {
    st = Mismatch(op, b->count, b->dtype);
  } else if (op.bytes > ch.box_bytes()) {
    st = Error(HCCL_E_REMOTE, "rank {} sent {} bytes buffered, more than the channel's {}",
               ch.peer(), op.bytes, ch.box_bytes());
  } else {
    std::memcpy(op.item.buf, Channel::box_data(b), op.bytes);
    LogDebug("p2p: receive {} from rank {}: {} bytes eager (buffered)", op.seq, ch.peer(),
             op.bytes);
  }
  FreeBox(ch, op.seq);
  ch.in().r.done.store(op.seq, std::memory_order_release);
  ch.NoteCpu();
  ch.Ring();
  return Finish(op, std::move(st));
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
    return Finish(op, Mismatch(op, s.count, s.dtype));
  }
  if (s.eager != 0) {
    // The bytes came with the post (at most a staging half: anything else is not this
    // library's sender).
    Status st = op.bytes <= op.ch->half_bytes()
                    ? Status::Ok()
                    : Error(HCCL_E_REMOTE,
                            "rank {} sent {} bytes eagerly, more than the channel's {}-byte slot",
                            op.ch->peer(), op.bytes, op.ch->half_bytes());
    if (st.ok()) {
      std::memcpy(op.item.buf, op.ch->half(false, 0), op.bytes);
      LogDebug("p2p: receive {} from rank {}: {} bytes eager", op.seq, op.ch->peer(), op.bytes);
    }
    Answer(op, kEager);
    MarkDone(op, st.code());
    return Finish(op, std::move(st));
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

}  // namespace

// The receiver's side of @op: one step if it can make one; whether it did.
bool PollRecv(Communicator &comm, Op &op) {
  Channel &ch = *op.ch;
  const SenderSide &s = ch.in().s;
  ReceiverSide &r = ch.in().r;
  if (op.phase == Op::kStart) {
    if (ch.box_bytes() != 0) {
      if (Box *b = NextBox(ch, op.seq)) {
        return TakeBox(op, b);
      }
    }
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
    if (op.box) {
      return fmt::format("take this rank's buffered sends out (its {} boxes are full)", kBoxes);
    }
    return op.phase == Op::kStart ? fmt::format("finish receive {} from this rank", op.seq - 1)
                                  : fmt::format("receive send {} of this rank", op.seq);
  }
  return fmt::format("post send {} to this rank", op.seq);
}

namespace {

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
    ch.Sleep(bell, kSlice);
  }
}

}  // namespace

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
    s.posted.store(seq, std::memory_order_release);
  } else {
    ch.in().r.done.store(++ch.recv_seq, std::memory_order_release);  // done, not answered
  }
  ch.Ring();
  return Status::Ok();
}

}  // namespace hzc::coll::p2p
