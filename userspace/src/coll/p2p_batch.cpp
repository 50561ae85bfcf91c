// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p_batch.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "base/spin.h"
#include "coll/reduce.h"

namespace hzc::coll::p2p {

namespace {

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

}  // namespace

void Batch::Start() {
  for (const Op &op : ops_) {
    const uint32_t peer = op.item.peer;
    auto it = channels_.find(peer);
    if (it != channels_.end()) {
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
      o->thread = std::thread([this, raw, deadline = Deadline()] {
        raw->result = Channel::Open(comm_, raw->peer, deadline);
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
    op.box = op.item.dir == P2pItem::kSend && op.bytes <= ch->box_bytes();
    // Zero-copy where the buffer allows it, for a message too large to go eagerly or large
    // enough that one copy beats two (HZC_P2P_ZERO_COPY_MIN).
    const uint64_t zc_min = GetConfig().p2p_zero_copy_min;
    op.zero_copy = !op.box &&
                   (op.bytes > ch->eager_bytes() || (zc_min != 0 && op.bytes >= zc_min)) &&
                   Activated(comm_, op.item.buf, op.bytes);
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
    channels_[o->peer] = std::move(o->result->value());
    Assign(o->peer, ch);
  }
  return any;
}

Clock::time_point Batch::Deadline() {
  if (deadline_ == Clock::time_point{}) {
    deadline_ = Clock::now() + comm_.ExecTimeout();
  }
  return deadline_;
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
      if (bell != nullptr) {
        *bell = op.ch->bell().load(std::memory_order_seq_cst);
      }
    }
    if (op.prev == nullptr || op.prev->phase == Op::kFinished) {
      progressed |= op.item.dir == P2pItem::kSend ? PollSend(op) : PollRecv(comm_, op);
    }
  }
  return progressed;
}

Status Batch::Run() {
  Start();
  SpinWait spin(budget_, Oversubscribed(comm_.size()));
  bool spinning = false;  // since the last progress
  for (bool checked = false;;) {
    // The peers' liveness is taken before a pass (only after spinning: it is a system call): a
    // peer that finished its part and then exited is seen finished by the pass, not dead.
    const Status alive = checked ? CheckPeers(ops_) : Status::Ok();
    const bool opened = Collect();
    Op *waiting = nullptr;
    uint32_t bell = 0;
    bool unfinished = false;
    // The bell only for the pass before a sleep: the peer rings it at every change.
    const bool progressed = PollAll(&waiting, checked ? &bell : nullptr, &unfinished);
    if (!unfinished) {
      break;
    }
    if (opened || progressed) {
      if (!checked) {
        spin.Caught();
      }
      spin.Reset();
      checked = spinning = false;
      continue;
    }
    if (!checked) {
      // Once the spinning is over: check, then sleep. A peer that last wrote from this CPU (the
      // scheduler may put both there while other CPUs idle) runs only when this rank lets it:
      // sleep at once, so that its wake-up may put this rank on an idle CPU.
      const bool here =
          !spinning && waiting != nullptr && waiting->ch->peer_cpu() == sched_getcpu();
      spinning = true;
      checked = here || !spin.Again();
      continue;
    }
    if (Status st = alive.ok() ? CheckDeadline(ops_, Deadline(), comm_.ExecTimeout()) : alive;
        !st.ok()) {
      failed_ = st;
      for (Op &op : ops_) {
        if (op.phase != Op::kFinished && op.ch != nullptr) {
          op.ch->Break(st);
        }
      }
      return st;
    }
    const bool several = openings_.size() + channels_.size() > 1;
    const auto left =
        std::clamp<std::chrono::nanoseconds>(Deadline() - Clock::now(), std::chrono::nanoseconds(0),
                                             waiting == nullptr || several ? kShortSlice : kSlice);
    if (waiting != nullptr) {
      waiting->ch->Sleep(bell, left);
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
      channels_[o->peer] = std::move(o->result->value());
    }
  }
}

}  // namespace hzc::coll::p2p
