// SPDX-License-Identifier: Apache-2.0
#include "coll/p2p.h"

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/spin.h"
#include "coll/p2p_batch.h"
#include "coll/p2p_channel.h"
#include "coll/p2p_match.h"
#include "coll/p2p_wire.h"
#include "coll/reduce.h"

namespace hzc::coll {

namespace {

using p2p::Channel;
using p2p::Clock;
using p2p::Op;
using p2p::PostRefusal;

// The point-to-point state of one communicator.
struct State : Communicator::CollState {
  std::mutex mutex;  // one call at a time
  p2p::Channels channels;
  std::vector<Op> ops;  // the items of the call in progress (kept: no allocation per call)
  SpinBudget spin;      // how long the waits of its calls spin (base/spin.h)
  std::unique_ptr<RemoteP2p> remote;  // peers on other servers (made by their first item)
};

std::mutex g_state_mutex;

State &GetState(Communicator &comm) {
  if (auto *made = comm.p2p_state_made().load(std::memory_order_acquire)) {
    return static_cast<State &>(*made);
  }
  std::lock_guard lock(g_state_mutex);
  auto &slot = comm.p2p_state();
  if (!slot) {
    slot = std::make_unique<State>();
    comm.p2p_state_made().store(slot.get(), std::memory_order_release);
  }
  return static_cast<State &>(*slot);
}

// A message in batches of more than one item names the item.
Status ItemError(const std::vector<P2pItem> &items, size_t i, const Status &st) {
  if (items.size() == 1) {
    return st;
  }
  return Error(st.code(), "sendRecvInfo[{}]: {}", i, st.message());
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
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].count == 0) {
      continue;  // NonEmpty
    }
    if (Status st = ValidateP2p(comm, all[i]); !st.ok()) {
      return RefuseP2p(comm, all, ItemError(all, i, st));
    }
  }
  State &s = GetState(comm);
  std::lock_guard lock(s.mutex);
  std::vector<Op> &ops = s.ops;
  ops.clear();
  ops.reserve(all.size());
  std::vector<P2pItem> remote;  // peers on other servers
  std::vector<size_t> remote_index;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].count == 0) {
      continue;
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
  for (const Op &op : ops) {
    if (auto it = s.channels.find(op.item.peer); it != s.channels.end()) {
      HZC_RETURN_IF_ERROR(it->second->CheckBroken());  // a dead peer: seen while waiting
    }
  }
  // The items with peers on other servers progress at the same time as the others: a peer of
  // one may wait for this rank's other items first. Without them, the deadline counts from the
  // batch's first wait (a call that does not wait reads no clock).
  Clock::time_point deadline{};
  std::vector<Status> remote_results;
  std::thread across;
  if (!remote.empty()) {
    deadline = Clock::now() + comm.ExecTimeout();
    if (!s.remote) {
      s.remote = std::make_unique<RemoteP2p>(comm);
    }
    across = std::thread([&] { s.remote->Run(remote, &remote_results, deadline); });
  }
  Status st;
  {
    p2p::Batch batch(comm, s.channels, ops, deadline, &s.spin);
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
