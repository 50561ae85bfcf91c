// SPDX-License-Identifier: Apache-2.0
#include "transport/wire.h"

#include <algorithm>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "base/config.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "transport/rdma_wire.h"
#include "transport/socket_wire.h"

namespace hzc::transport {

namespace {

// Tags on the group's connections, from Options::tags (the implementations use tags + 0, tags + 3
// and tags + 0x100 on).
constexpr uint32_t kByeTag = 1;
constexpr uint32_t kChoiceTag = 2;

const char *NetName(NetChoice c) {
  return c == NetChoice::kRdma ? "rdma" : c == NetChoice::kSocket ? "socket" : "auto";
}

}  // namespace

Wire::Wire(bootstrap::Group &group, std::vector<uint32_t> members, uint32_t me,
           const Options &options)
    : group_(group),
      members_(std::move(members)),
      me_(me),
      options_(options),
      sent_(members_.size()),
      received_(members_.size()) {}

Wire::~Wire() = default;

Expected<std::unique_ptr<Wire>> Wire::Open(bootstrap::Group &group, std::vector<uint32_t> members,
                                           const Options &options, Clock::time_point deadline) {
  if (options.slots == 0 || options.slots > kMaxSlots) {
    return Error(HCCL_E_PARA, "wire: {} slots per peer (1 to {})", options.slots, kMaxSlots);
  }
  const auto it = std::find(members.begin(), members.end(), group.rank());
  if (it == members.end()) {
    return Error(HCCL_E_INTERNAL, "wire: rank {} is not among its members", group.rank());
  }
  const auto me = static_cast<uint32_t>(it - members.begin());

  // The members' HZC_NET, so that none waits for a kind of wire another never opens.
  const NetChoice choice = options.net.value_or(GetConfig().net);
  const auto mine = static_cast<uint8_t>(choice);
  auto all =
      group.AllGatherFixed(members, options.tags + kChoiceTag, std::as_bytes(std::span(&mine, 1)),
                           deadline, "the wire's members' HZC_NET");
  if (!all.ok()) {
    return all.status();
  }
  std::vector<uint32_t> rdma, socket;
  for (size_t i = 0; i < members.size(); ++i) {
    const auto &blob = (*all)[i];
    if (blob.size() != 1 ||
        static_cast<uint8_t>(blob[0]) > static_cast<uint8_t>(NetChoice::kSocket)) {
      return Error(HCCL_E_TCP_TRANSFER, "wire: rank {} sent {} bytes for its HZC_NET", members[i],
                   blob.size());
    }
    const auto c = static_cast<NetChoice>(blob[0]);
    if (c == NetChoice::kRdma) {
      rdma.push_back(members[i]);
    } else if (c == NetChoice::kSocket) {
      socket.push_back(members[i]);
    }
  }
  if (!rdma.empty() && !socket.empty()) {
    return Error(HCCL_E_PARA,
                 "wire: HZC_NET differs between the servers: rank(s) {} rdma, rank(s) {} socket "
                 "(this rank {})",
                 RankList(rdma), RankList(socket), NetName(choice));
  }
  if (socket.empty()) {
    auto w = RdmaWire::Open(group, members, me, options, deadline);
    if (!w.ok() || *w) {
      return w;
    }
    if (!rdma.empty()) {
      return Error(HCCL_E_NOT_SUPPORT,
                   "links between the servers: HZC_NET=rdma (rank(s) {}) but a server has no RDMA "
                   "device with an active port (HZC_RDMA_DEVICE)",
                   RankList(rdma));
    }
    static std::once_flag once;
    std::call_once(once, [] {
      LogInfo(
          "wire: a server has no RDMA device with an active port: TCP between the servers "
          "(HZC_NET=auto)");
    });
  }
  return SocketWire::Open(group, std::move(members), me, options, deadline);
}

void Wire::Close(Clock::time_point deadline) {
  if (!broken_.ok()) {
    return;
  }
  const uint8_t bye = 1;
  auto all =
      group_.AllGatherFixed(members_, options_.tags + kByeTag, std::as_bytes(std::span(&bye, 1)),
                            deadline, "the goodbye of the wire's members");
  if (!all.ok()) {
    LogDebug("wire: {}", all.status().message());
  }
}

Status Wire::Transfer(const std::vector<Out> &out, const std::vector<size_t> &in, const Sink &sink,
                      Clock::time_point deadline, const std::vector<Place> &places) {
  if (!broken_.ok()) {
    return Error(broken_.code(), "an earlier transfer failed: {}", broken_.message());
  }
  if (out.size() != size() || in.size() != size() || (!places.empty() && places.size() != size())) {
    return Error(HCCL_E_INTERNAL, "wire: a transfer of {} messages out, {} in, {} places among {}",
                 out.size(), in.size(), places.size(), size());
  }
  if (Status st = Move(out, in, sink, places, deadline); !st.ok()) {
    broken_ = st;
    return st;
  }
  uint64_t sent = 0, received = 0;
  for (uint32_t p = 0; p < size(); ++p) {
    if (p != me_) {
      sent += out[p].len;
      received += in[p];
    }
  }
  group_.traffic().wire_sent.fetch_add(sent, std::memory_order_relaxed);
  group_.traffic().wire_received.fetch_add(received, std::memory_order_relaxed);
  return Status::Ok();
}

void Wire::Abort(HcclResult code) {
  if (broken_.ok()) {
    broken_ = Error(code, "this rank aborted the communicator's collectives");
  }
  Tell(code == HCCL_SUCCESS ? HCCL_E_INTERNAL : code);
}

uint64_t Wire::chunks_sent() const {
  uint64_t n = 0;
  for (uint64_t s : sent_) {
    n += s;
  }
  return n;
}

uint64_t Wire::chunks_received() const {
  uint64_t n = 0;
  for (uint64_t r : received_) {
    n += r;
  }
  return n;
}

}  // namespace hzc::transport
