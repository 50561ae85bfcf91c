// SPDX-License-Identifier: Apache-2.0
#include "verbs/links.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/log.h"
#include "base/rollback.h"

namespace hzc::verbs {

struct ProtectionDomain {
  std::shared_ptr<ibv_context> context;  // declared first: outlives pd
  PdPtr pd;
};

namespace {

using Clock = std::chrono::steady_clock;

uint32_t RandomPsn() {
  uint32_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
    value = static_cast<uint32_t>(Clock::now().time_since_epoch().count());
  }
  return value & 0xffffff;
}

// HCCL_E_PARA or HCCL_E_NOT_SUPPORT when links cannot be set up for rank @rank of @nranks
// with @options on @device's board.
Status CheckSetup(const Device &device, uint32_t rank, uint32_t nranks,
                  const LinkOptions &options) {
  if (nranks == 0 || rank >= nranks) {
    return Error(HCCL_E_PARA, "link setup: rank {} of {} of {} is not a domain member", rank,
                 nranks, device.path());
  }
  if (options.endpoint_key >= Device::kBoardKeys || options.ready_key >= Device::kBoardKeys ||
      options.endpoint_key == options.ready_key) {
    return Error(HCCL_E_PARA, "link setup: board keys {} and {} must differ and be below {}",
                 options.endpoint_key, options.ready_key, Device::kBoardKeys);
  }
  const uint32_t max_blob = device.info().max_blob_size;
  if (nranks > MaxRanksForBlob(max_blob)) {
    return Error(HCCL_E_NOT_SUPPORT,
                 "link setup: {} ranks do not fit the domain board ({} bytes per blob: at most {} "
                 "ranks with rdma links)",
                 nranks, max_blob, MaxRanksForBlob(max_blob));
  }
  return Status::Ok();
}

// Tell peers this rank's link @state under @key (the endpoint or the ready key), so that they
// fail (or fall back to kernel-only links) at once instead of waiting for the timeout.
void PublishState(const BlobBoard &board, const LinkOptions &options, uint32_t key,
                  EndpointHeader::State state) {
  Status st;
  if (key == options.endpoint_key) {
    EndpointHeader h;
    h.state = state;
    h.rank = board.rank();
    h.nranks = board.nranks();
    st = board.Put(key, Bytes(h));
  } else {
    ReadyBlob ready;
    ready.state = state;
    st = board.Put(key, Bytes(ready));
  }
  if (!st.ok()) {
    LogDebug("verbs: cannot tell peers this rank's link state: {}", st.message());
  }
}

// Every rank's endpoint; HCCL_E_ROCE_CONNECT when a rank failed.
Expected<PeerEndpoints> WaitForEndpoints(const BlobBoard &board, const LinkOptions &options,
                                         Clock::time_point deadline) {
  const uint32_t stride =
      static_cast<uint32_t>(sizeof(EndpointHeader) + board.nranks() * sizeof(QpEndpoint));
  auto blobs = board.Wait(options.endpoint_key, stride, deadline, "link setup: endpoints");
  if (!blobs.ok()) {
    return blobs.status();
  }
  auto peers = DecodeEndpoints(*blobs);
  if (peers.ok() && !peers->failed.empty()) {
    return Error(HCCL_E_ROCE_CONNECT, "link setup: rank(s) {} failed to set up their links",
                 RankList(peers->failed));
  }
  return peers;
}

// The final barrier: every rank connected its queue pairs.
Status WaitUntilReady(const BlobBoard &board, const LinkOptions &options,
                      Clock::time_point deadline) {
  auto ready =
      board.Wait(options.ready_key, sizeof(ReadyBlob), deadline, "link setup: final barrier");
  if (!ready.ok()) {
    return ready.status();
  }
  if (const auto failed = RanksNotReady(*ready); !failed.empty()) {
    return Error(HCCL_E_ROCE_CONNECT, "link setup: rank(s) {} could not connect their queue pairs",
                 RankList(failed));
  }
  return Status::Ok();
}

// A completion channel whose reads do not block, or null.
CompChannelPtr NonBlockingChannel(ibv_context *ctx) {
  CompChannelPtr channel(ibv_create_comp_channel(ctx));
  if (channel) {
    const int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      channel.reset();
    }
  }
  return channel;
}

// Wait on @channel for news of @cq until @until, at most a slice: when not *@armed, only ask
// for the next news and return (completions that came before the request raise no event, so
// the caller polls once more before it waits); false when that request failed.
bool AwaitEvent(ibv_comp_channel *channel, ibv_cq *cq, bool *armed, Clock::time_point until) {
  if (!*armed) {
    if (ibv_req_notify_cq(cq, 0) != 0) {
      return false;
    }
    *armed = true;
    return true;
  }
  // A slice, so a wait never outlives its caller's limits by much.
  constexpr std::chrono::milliseconds kSlice{100};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  pollfd fd{.fd = channel->fd, .events = POLLIN, .revents = 0};
  if (poll(&fd, 1,
           static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), kSlice).count())) <= 0) {
    return true;
  }
  ibv_cq *ev_cq = nullptr;
  void *context = nullptr;
  if (ibv_get_cq_event(channel, &ev_cq, &context) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    *armed = false;
  }
  return true;
}

}  // namespace

LinkOptions LinkOptions::FromEnvironment() {
  return FromConfig(GetConfig());
}

LinkOptions LinkOptions::BetweenServers() {
  return BetweenServers(GetConfig());
}

LinkOptions LinkOptions::BetweenServers(const Config &config) {
  LinkOptions options = FromConfig(config);
  options.ack_timeout = config.rdma_timeout;
  options.retry_count = config.rdma_retry_cnt;
  // The queue pair gives up after about (retry_count + 1) ACK timeouts; the data path waits a
  // little longer than that for a completion (soft-RoCE retries for ever at a count of 7, so
  // there this wait is what gives up on a dead peer).
  options.progress_timeout =
      std::max(std::chrono::milliseconds(30'000), config.PeerSilence() + std::chrono::seconds(10));
  options.domain_per_peer = true;
  return options;
}

LinkOptions LinkOptions::FromConfig(const Config &config) {
  LinkOptions options;
  options.device = config.rdma_device;
  options.timeout = config.connect_timeout;
  options.gid_index = config.rdma_gid_index;
  return options;
}

std::vector<std::byte> EncodeEndpoint(const Endpoint &ep) {
  std::vector<std::byte> blob(sizeof(EndpointHeader) + ep.qps.size() * sizeof(QpEndpoint));
  std::memcpy(blob.data(), &ep.header, sizeof(ep.header));
  if (!ep.qps.empty()) {
    std::memcpy(blob.data() + sizeof(EndpointHeader), ep.qps.data(),
                ep.qps.size() * sizeof(QpEndpoint));
  }
  return blob;
}

Expected<Endpoint> DecodeEndpoint(std::span<const std::byte> blob, uint32_t rank, uint32_t nranks) {
  Endpoint ep;
  if (blob.size() < sizeof(EndpointHeader)) {
    return Error(HCCL_E_ROCE_CONNECT, "endpoint of rank {}: {} bytes, too short", rank,
                 blob.size());
  }
  std::memcpy(&ep.header, blob.data(), sizeof(EndpointHeader));
  const EndpointHeader &h = ep.header;
  if (h.magic != EndpointHeader::kMagic || h.version != EndpointHeader::kVersion) {
    return Error(HCCL_E_ROCE_CONNECT, "endpoint of rank {}: not an hzc endpoint version {}", rank,
                 EndpointHeader::kVersion);
  }
  if (h.rank != rank || h.nranks != nranks) {
    return Error(HCCL_E_ROCE_CONNECT,
                 "endpoint of rank {}: says rank {} of {}, expected rank {} of {}", rank, h.rank,
                 h.nranks, rank, nranks);
  }
  if (h.state != EndpointHeader::kReady) {
    if (h.state != EndpointHeader::kNoRdmaDevice && h.state != EndpointHeader::kFailed) {
      return Error(HCCL_E_ROCE_CONNECT, "endpoint of rank {}: unknown state {}", rank, h.state);
    }
    return ep;  // no queue pairs follow
  }
  if (h.mtu < IBV_MTU_256 || h.mtu > IBV_MTU_4096) {
    return Error(HCCL_E_ROCE_CONNECT, "endpoint of rank {}: invalid path mtu code {}", rank, h.mtu);
  }
  const size_t want = sizeof(EndpointHeader) + size_t{nranks} * sizeof(QpEndpoint);
  if (blob.size() != want) {
    return Error(HCCL_E_ROCE_CONNECT, "endpoint of rank {}: {} bytes, expected {}", rank,
                 blob.size(), want);
  }
  ep.qps.resize(nranks);
  std::memcpy(ep.qps.data(), blob.data() + sizeof(EndpointHeader), nranks * sizeof(QpEndpoint));
  return ep;
}

Expected<PeerEndpoints> DecodeEndpoints(const BoardBlobs &blobs) {
  const uint32_t nranks = blobs.nranks();
  PeerEndpoints out;
  out.endpoints.resize(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    auto ep = DecodeEndpoint(blobs.blob(r), r, nranks);
    if (!ep.ok()) {
      return ep.status();
    }
    if (ep->header.state == EndpointHeader::kFailed) {
      out.failed.push_back(r);
    } else if (ep->header.state == EndpointHeader::kNoRdmaDevice) {
      out.no_device.push_back(r);
    }
    out.endpoints[r] = std::move(*ep);
  }
  return out;
}

std::vector<uint32_t> RanksNotReady(const BoardBlobs &blobs) {
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < blobs.nranks(); ++r) {
    ReadyBlob blob;
    const auto bytes = blobs.blob(r);
    if (bytes.size() == sizeof(blob)) {
      std::memcpy(&blob, bytes.data(), sizeof(blob));
    } else {
      blob.magic = 0;
    }
    if (blob.magic != EndpointHeader::kMagic || blob.state != EndpointHeader::kReady) {
      ranks.push_back(r);
    }
  }
  return ranks;
}

MemoryRegion::MemoryRegion(std::shared_ptr<const ProtectionDomain> pd, MrPtr mr)
    : pd_(std::move(pd)), mr_(std::move(mr)) {}

MemoryRegion::~MemoryRegion() = default;

bool MemoryRegion::Contains(const void *p, size_t len) const {
  const auto begin = reinterpret_cast<uintptr_t>(mr_->addr);
  const auto start = reinterpret_cast<uintptr_t>(p);
  return start >= begin && start - begin <= mr_->length && len <= mr_->length - (start - begin);
}

Window::Window(std::shared_ptr<const ProtectionDomain> pd, MwPtr mw)
    : pd_(std::move(pd)), mw_(std::move(mw)), rkey_(mw_->rkey) {}

Window::~Window() = default;

Links::Links(uint32_t rank, uint32_t nranks, const LinkOptions &options, std::unique_ptr<Port> port)
    : rank_(rank),
      nranks_(nranks),
      options_(options),
      port_(std::move(port)),
      qps_(nranks),
      send_psn_(nranks),
      post_bytes_(nranks),
      broken_(nranks) {}

Links::~Links() {
  LogDebug("verbs: rank {}: closing {} links on {}", rank_, linked(), port_->device);
}

Status Links::CreateQueues() {
  HZC_RETURN_IF_ERROR(CreateDomain());
  for (uint32_t peer = 0; peer < nranks_; ++peer) {
    if (peer != rank_) {
      HZC_RETURN_IF_ERROR(AddPeer(peer).status());
    }
  }
  return Status::Ok();
}

Status Links::CreateDomain() {
  ibv_context *ctx = port_->context.get();
  if (options_.domain_per_peer) {
    domains_.resize(nranks_);  // each peer's made at its first use (Domain)
  } else {
    auto pd = NewDomain(port_->device, /*per_peer=*/false);
    HZC_RETURN_IF_ERROR(pd.status());
    pd_ = std::move(*pd);
  }

  const uint32_t peers = nranks_ - 1;
  const uint32_t max_cqe = static_cast<uint32_t>(std::max(port_->device_attr.max_cqe, 1));
  const uint32_t max_wr = static_cast<uint32_t>(std::max(port_->device_attr.max_qp_wr, 1));
  uint32_t depth = std::clamp<uint32_t>(options_.queue_depth, 1, max_wr);
  if (peers > 0) {
    depth = std::clamp<uint32_t>(std::min(depth, max_cqe / peers), 1, depth);
  }
  options_.queue_depth = depth;
  cq_size_ = std::clamp<uint32_t>(peers * depth, 1, max_cqe);
  channel_ = NonBlockingChannel(ctx);
  if (!channel_) {
    LogDebug("verbs: no completion channel on {} ({}): waits poll", port_->device,
             ErrnoString(errno));
  }
  cq_.reset(ibv_create_cq(ctx, static_cast<int>(cq_size_), nullptr, channel_.get(), 0));
  if (!cq_) {
    return ConnectError("ibv_create_cq", errno, fmt::format("{} entries", cq_size_));
  }
  if (options_.arrivals != 0 && peers > 0) {
    // Every peer's entries fit the queue: no arrival is ever dropped for want of room.
    const uint32_t wanted = options_.arrivals;
    options_.arrivals =
        std::clamp<uint32_t>(std::min({wanted, max_wr, max_cqe / peers}), 1, wanted);
    if (options_.arrivals < wanted) {
      LogWarn(
          "verbs: {} keeps {} receive entries per peer for {} peers, not {}: a peer that "
          "sends more news at once waits for them",
          port_->device, options_.arrivals, peers, wanted);
    }
    const uint32_t entries = peers * options_.arrivals;
    arrivals_channel_ = NonBlockingChannel(ctx);
    arrivals_cq_.reset(
        ibv_create_cq(ctx, static_cast<int>(entries), nullptr, arrivals_channel_.get(), 0));
    if (!arrivals_cq_) {
      return ConnectError("ibv_create_cq", errno, fmt::format("{} entries for arrivals", entries));
    }
  }
  return Status::Ok();
}

Expected<QpEndpoint> Links::AddPeer(uint32_t peer) {
  if (peer >= nranks_ || peer == rank_ || qps_[peer]) {
    return Error(HCCL_E_INTERNAL, "link setup: rank {} is not a peer without a queue pair", peer);
  }
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_.get();
  attr.recv_cq = arrivals_cq_ ? arrivals_cq_.get() : cq_.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = options_.queue_depth;
  attr.cap.max_recv_wr = arrivals_cq_ ? options_.arrivals : 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  auto pd = Domain(peer);
  if (!pd.ok()) {
    return pd.status();
  }
  qps_[peer].reset(ibv_create_qp((*pd)->pd.get(), &attr));
  if (!qps_[peer]) {
    return ConnectError("ibv_create_qp", errno, fmt::format("rc queue pair for rank {}", peer));
  }
  send_psn_[peer] = RandomPsn();
  if (Status st = ModifyToInit(peer); !st.ok()) {
    qps_[peer].reset();
    return st;
  }
  if (arrivals_cq_ && !PostReceives(peer, options_.arrivals)) {
    const int err = errno;
    qps_[peer].reset();
    return ConnectError("ibv_post_recv", err,
                        fmt::format("{} entries for rank {}", options_.arrivals, peer));
  }
  return QpEndpoint{.qpn = qps_[peer]->qp_num, .psn = send_psn_[peer]};
}

Status Links::ConnectPeer(uint32_t peer, const EndpointHeader &header, const QpEndpoint &theirs) {
  if (peer >= nranks_ || !qps_[peer]) {
    return Error(HCCL_E_INTERNAL, "link setup: no queue pair for rank {}", peer);
  }
  if (header.link_layer != port_->port_attr.link_layer) {
    return Error(HCCL_E_ROCE_CONNECT, "link setup: rank {} uses link layer {}, this rank {}", peer,
                 header.link_layer, port_->port_attr.link_layer);
  }
  HZC_RETURN_IF_ERROR(ModifyToReadyToReceive(peer, header, theirs));
  return ModifyToReadyToSend(peer);
}

uint32_t Links::linked() const {
  return static_cast<uint32_t>(
      std::count_if(qps_.begin(), qps_.end(), [](const QpPtr &qp) { return qp != nullptr; }));
}

Status Links::ModifyToInit(uint32_t peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port_->port_num;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  if (int ret = ibv_modify_qp(qps_[peer].get(), &attr, mask); ret != 0) {
    return ConnectError("ibv_modify_qp", ret, fmt::format("qp to rank {} -> init", peer));
  }
  return Status::Ok();
}

Status Links::ModifyToReadyToReceive(uint32_t peer, const EndpointHeader &header,
                                     const QpEndpoint &theirs) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(port_->port_attr.active_mtu, static_cast<ibv_mtu>(header.mtu));
  attr.dest_qp_num = theirs.qpn;
  attr.rq_psn = theirs.psn;
  attr.max_dest_rd_atomic =
      static_cast<uint8_t>(std::clamp(port_->device_attr.max_qp_rd_atom, 1, 16));
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = port_->port_num;
  attr.ah_attr.dlid = static_cast<uint16_t>(header.lid);
  if (port_->global()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, header.gid, sizeof(header.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_->gid_index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  const int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int ret = ibv_modify_qp(qps_[peer].get(), &attr, mask); ret != 0) {
    return ConnectError("ibv_modify_qp", ret,
                        fmt::format("qp to rank {} -> rtr (remote qp {:#x}, gid {})", peer,
                                    theirs.qpn, GidString(attr.ah_attr.grh.dgid)));
  }
  const uint64_t mtu_bytes = uint64_t{128} << attr.path_mtu;  // IBV_MTU_256 is 1
  post_bytes_[peer] =
      options_.post_bytes != 0 ? options_.post_bytes : LinkOptions::kPacketsPerPost * mtu_bytes;
  return Status::Ok();
}

Status Links::ModifyToReadyToSend(uint32_t peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = send_psn_[peer];
  attr.timeout = options_.ack_timeout;
  attr.retry_cnt = options_.retry_count;
  // 7 means for ever for RNR: a write with immediate data that finds the peer's receive
  // entries all taken waits until it takes their arrivals (LinkOptions::arrivals). Plain
  // WRITE and READ meet no RNR.
  attr.rnr_retry = options_.arrivals != 0 ? 7 : std::min<uint8_t>(options_.retry_count, 6);
  attr.max_rd_atomic =
      static_cast<uint8_t>(std::clamp(port_->device_attr.max_qp_init_rd_atom, 1, 16));
  const int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  if (int ret = ibv_modify_qp(qps_[peer].get(), &attr, mask); ret != 0) {
    return ConnectError("ibv_modify_qp", ret, fmt::format("qp to rank {} -> rts", peer));
  }
  return Status::Ok();
}

EndpointHeader Links::Header() const {
  EndpointHeader h;
  h.rank = rank_;
  h.nranks = nranks_;
  std::memcpy(h.gid, port_->gid.raw, sizeof(h.gid));
  h.lid = port_->port_attr.lid;
  h.mtu = port_->port_attr.active_mtu;
  h.port = port_->port_num;
  h.link_layer = port_->port_attr.link_layer;
  return h;
}

Endpoint Links::LocalEndpoint() const {
  Endpoint ep;
  ep.header = Header();
  ep.qps.resize(nranks_);
  for (uint32_t peer = 0; peer < nranks_; ++peer) {
    if (qps_[peer]) {
      ep.qps[peer] = {.qpn = qps_[peer]->qp_num, .psn = send_psn_[peer]};
    }
  }
  return ep;
}

Expected<std::unique_ptr<Links>> Links::OpenLazy(uint32_t rank, uint32_t nranks,
                                                 const LinkOptions &options) {
  if (nranks == 0 || rank >= nranks) {
    return Error(HCCL_E_PARA, "link setup: rank {} of {}", rank, nranks);
  }
  auto links = Open(rank, nranks, options);
  if (links.ok() && *links) {
    HZC_RETURN_IF_ERROR((*links)->CreateDomain());
  }
  return links;
}

Expected<std::unique_ptr<Links>> Links::Open(uint32_t rank, uint32_t nranks,
                                             const LinkOptions &options) {
  auto spec = ParseRdmaDeviceSpec(options.device);
  if (!spec.ok()) {
    return spec.status();
  }
  auto port = OpenPort(*spec, options.gid_index);
  if (!port.ok()) {
    return port.status();
  }
  if (!*port) {
    static std::once_flag once;
    std::call_once(
        once, [] { LogInfo("verbs: no RDMA device with an active port: links are kernel-only"); });
    return std::unique_ptr<Links>();
  }
  return std::unique_ptr<Links>(new Links(rank, nranks, options, std::move(*port)));
}

Status Links::Connect(const std::vector<Endpoint> &endpoints) {
  for (uint32_t peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) {
      continue;
    }
    HZC_RETURN_IF_ERROR(ConnectPeer(peer, endpoints[peer].header, endpoints[peer].qps[rank_]));
  }
  return Status::Ok();
}

Expected<std::unique_ptr<Links>> Links::Establish(const Device &device,
                                                  const Device::DomainId &domain, uint32_t rank,
                                                  uint32_t nranks, const LinkOptions &options) {
  HZC_RETURN_IF_ERROR(CheckSetup(device, rank, nranks, options));
  return Establish(Board(device, domain, rank, nranks), options);
}

Expected<std::unique_ptr<Links>> Links::Establish(const BlobBoard &board,
                                                  const LinkOptions &options) {
  const uint32_t rank = board.rank(), nranks = board.nranks();
  const auto deadline = Clock::now() + options.timeout;

  // Until this rank has published its last blob, a failure publishes "failed" under the key
  // it would have published next.
  uint32_t pending_key = options.endpoint_key;
  Rollback tell_peers;
  tell_peers.Push([&] { PublishState(board, options, pending_key, EndpointHeader::kFailed); });
  auto links = Open(rank, nranks, options);
  if (!links.ok()) {
    return links.status();
  }
  if (*links) {
    HZC_RETURN_IF_ERROR((*links)->CreateQueues());
    HZC_RETURN_IF_ERROR(board.Put(options.endpoint_key, EncodeEndpoint((*links)->LocalEndpoint())));
    pending_key = options.ready_key;
  } else {
    tell_peers.Commit();
    PublishState(board, options, options.endpoint_key, EndpointHeader::kNoRdmaDevice);
  }
  auto peers = WaitForEndpoints(board, options, deadline);
  if (!peers.ok()) {
    return peers.status();
  }
  if (!peers->no_device.empty()) {
    if (*links) {
      LogWarn("verbs: rank(s) {} have no RDMA device: links are kernel-only",
              RankList(peers->no_device));
    }
    tell_peers.Commit();
    return std::unique_ptr<Links>();
  }
  HZC_RETURN_IF_ERROR((*links)->Connect(peers->endpoints));
  HZC_RETURN_IF_ERROR(board.Put(options.ready_key, Bytes(ReadyBlob{})));
  tell_peers.Commit();
  HZC_RETURN_IF_ERROR(WaitUntilReady(board, options, deadline));
  LogDebug("verbs: rank {} of {}: {} links up on {} port {}", rank, nranks, nranks - 1,
           (*links)->port_->device, (*links)->port_->port_num);
  return std::move(*links);
}

Expected<std::shared_ptr<const ProtectionDomain>> Links::Domain(uint32_t peer) const {
  if (!options_.domain_per_peer) {
    return pd_;
  }
  if (peer >= nranks_ || peer == rank_) {
    return Error(HCCL_E_INTERNAL, "verbs: rank {} is not a peer of rank {} of {}", peer, rank_,
                 nranks_);
  }
  std::lock_guard lock(domains_mutex_);
  if (!domains_[peer]) {
    auto pd = NewDomain(fmt::format("the domain of rank {}", peer), /*per_peer=*/true);
    HZC_RETURN_IF_ERROR(pd.status());
    domains_[peer] = std::move(*pd);
  }
  return domains_[peer];
}

Expected<std::shared_ptr<const ProtectionDomain>> Links::NewDomain(const std::string &what,
                                                                   bool per_peer) const {
  auto pd = std::make_shared<ProtectionDomain>();
  pd->context = port_->context;
  pd->pd.reset(ibv_alloc_pd(port_->context.get()));
  if (!pd->pd) {
    const int err = errno;
    if (per_peer && (err == ENOMEM || err == ENOSPC || err == EAGAIN)) {
      return Error(HCCL_E_UNAVAIL,
                   "verbs: no protection domain left on {} for {} ({}; the device has {} for all "
                   "processes, and links between servers take one per peer)",
                   port_->device, what, ErrnoString(err), port_->device_attr.max_pd);
    }
    return ConnectError("ibv_alloc_pd", err, what);
  }
  return std::shared_ptr<const ProtectionDomain>(std::move(pd));
}

Expected<std::unique_ptr<MemoryRegion>> Links::Register(void *va, size_t length) const {
  if (options_.domain_per_peer) {
    return Error(HCCL_E_INTERNAL, "verbs: links with a domain per peer register for a peer");
  }
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return RegisterIn(pd_, va, length, kAccess);
}

Expected<std::unique_ptr<MemoryRegion>> Links::RegisterFor(uint32_t peer, void *va, size_t length,
                                                           bool remote) const {
  auto pd = Domain(peer);
  if (!pd.ok()) {
    return pd.status();
  }
  const int access =
      IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0);
  return RegisterIn(std::move(*pd), va, length, access);
}

Expected<std::unique_ptr<MemoryRegion>> Links::RegisterForWindows(uint32_t peer, void *va,
                                                                  size_t length) const {
  auto pd = Domain(peer);
  if (!pd.ok()) {
    return pd.status();
  }
  return RegisterIn(std::move(*pd), va, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
}

Expected<std::unique_ptr<Window>> Links::OpenWindow(uint32_t peer) const {
  constexpr uint64_t kType2 = IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  if ((port_->device_attr.device_cap_flags & kType2) == 0 || port_->device_attr.max_mw <= 0) {
    return Error(HCCL_E_NOT_SUPPORT, "verbs: {} has no type 2 memory windows", port_->device);
  }
  auto pd = Domain(peer);
  if (!pd.ok()) {
    return pd.status();
  }
  MwPtr mw(ibv_alloc_mw((*pd)->pd.get(), IBV_MW_TYPE_2));
  if (!mw) {
    return ConnectError("ibv_alloc_mw", errno, fmt::format("a window for rank {}", peer));
  }
  return std::make_unique<Window>(std::move(*pd), std::move(mw));
}

Expected<std::unique_ptr<MemoryRegion>> Links::RegisterIn(
    std::shared_ptr<const ProtectionDomain> pd, void *va, size_t length, int access) const {
  const auto start = reinterpret_cast<uintptr_t>(va);
  if (va == nullptr || length == 0 || start + length < start) {
    return Error(HCCL_E_PARA, "verbs: cannot register [{}, +{:#x}): empty or overflowing", va,
                 length);
  }
  MrPtr mr(ibv_reg_mr(pd->pd.get(), va, length, access));
  if (!mr) {
    const int err = errno;
    if (err == ENOMEM || err == EAGAIN) {
      rlimit lim{};
      getrlimit(RLIMIT_MEMLOCK, &lim);
      const std::string limit = lim.rlim_cur == RLIM_INFINITY
                                    ? std::string("unlimited")
                                    : fmt::format("{} KiB", lim.rlim_cur / 1024);
      return Error(HCCL_E_MEMORY,
                   "verbs: ibv_reg_mr of [{}, +{:#x}) failed: {} (RLIMIT_MEMLOCK is {}; activated "
                   "memory is pinned by hzc.ko and by the RDMA device, and memory registered for "
                   "several peers between servers once per peer, so raise it, e.g. "
                   "`ulimit -l unlimited` or memlock in /etc/security/limits.conf)",
                   va, length, ErrnoString(err), limit);
    }
    if (err == EFAULT || err == EINVAL) {
      return Error(HCCL_E_PARA, "verbs: ibv_reg_mr of [{}, +{:#x}) failed: {} (not mapped?)", va,
                   length, ErrnoString(err));
    }
    return ConnectError("ibv_reg_mr", err, fmt::format("[{}, +{:#x})", va, length));
  }
  return std::make_unique<MemoryRegion>(std::move(pd), std::move(mr));
}

uint32_t Links::qp_num(uint32_t peer) const {
  return peer < nranks_ && qps_[peer] ? qps_[peer]->qp_num : 0;
}

std::string Links::broken(uint32_t peer) const {
  std::lock_guard lock(mutex_);
  return peer < nranks_ ? broken_[peer] : std::string("no such rank");
}

void Links::Break(uint32_t peer, const std::string &why) {
  if (!broken_[peer].empty()) {
    return;
  }
  broken_[peer] = why;
  if (!qps_[peer]) {
    return;
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (int ret = ibv_modify_qp(qps_[peer].get(), &attr, IBV_QP_STATE); ret != 0) {
    LogWarn("verbs: ibv_modify_qp of qp to rank {} -> error failed: {}", peer, ErrnoString(ret));
  }
}

// The state of one Execute call.
struct Links::Batch {
  Batch(std::span<const WorkRequest> r, uint64_t g, uint64_t m, uint32_t nranks)
      : requests(r), tag(g), max_msg(m), outstanding(nranks), chains(nranks), sges(nranks) {}

  std::span<const WorkRequest> requests;
  const uint64_t tag;                            // in the upper half of every wr_id of this call
  const uint64_t max_msg;                        // longest work request
  std::vector<uint32_t> outstanding;             // [peer] work requests posted and not completed
  uint64_t total = 0;                            // sum of outstanding
  size_t next = 0;                               // request being posted
  uint64_t offset = 0;                           // bytes of it already posted
  std::string error;                             // first failure
  std::vector<std::vector<ibv_send_wr>> chains;  // [peer] to post next
  std::vector<std::vector<ibv_sge>> sges;        // [peer] what chains point into
  std::unordered_map<uint32_t, uint32_t> peer_of_qp;
};

Status Links::CheckRequests(std::span<const WorkRequest> requests) const {
  for (size_t i = 0; i < requests.size(); ++i) {
    const WorkRequest &r = requests[i];
    if (r.peer >= nranks_ || r.peer == rank_) {
      return Error(HCCL_E_PARA, "rdma request {}: rank {} is not a peer of rank {} of {}", i,
                   r.peer, rank_, nranks_);
    }
    if (r.op != WorkRequest::kWrite && r.op != WorkRequest::kRead &&
        r.op != WorkRequest::kWriteImm && r.op != WorkRequest::kBind &&
        r.op != WorkRequest::kInvalidate) {
      return Error(HCCL_E_PARA, "rdma request {}: unknown operation {}", i, static_cast<int>(r.op));
    }
    if (!qps_[r.peer]) {
      return Error(HCCL_E_INTERNAL, "rdma request {}: no queue pair to rank {}", i, r.peer);
    }
    const bool windowed = r.op == WorkRequest::kBind || r.op == WorkRequest::kInvalidate;
    if (windowed != (r.window != nullptr) || (windowed && !r.window->Serves(qps_[r.peer].get()))) {
      return Error(HCCL_E_PARA, "rdma request {}: {}", i,
                   windowed ? "no window of rank " + std::to_string(r.peer)
                            : std::string("a window where none belongs"));
    }
    if (!broken_[r.peer].empty()) {
      return Error(HCCL_E_ROCE_TRANSFER, "rdma to rank {}: the link is broken ({})", r.peer,
                   broken_[r.peer]);
    }
    if (r.op == WorkRequest::kInvalidate) {
      continue;
    }
    if (r.mr == nullptr || !r.mr->Contains(r.local, r.length)) {
      return Error(HCCL_E_PARA, "rdma request {}: local [{}, +{:#x}) is not in the registration", i,
                   r.local, r.length);
    }
    if (!r.mr->Serves(qps_[r.peer].get())) {
      return Error(HCCL_E_PARA, "rdma request {}: its local memory is not registered for rank {}",
                   i, r.peer);
    }
  }
  return Status::Ok();
}

void Links::Fail(Batch &batch, uint32_t peer, const std::string &why) {
  if (batch.error.empty()) {
    batch.error = why;
  }
  Break(peer, why);
}

ibv_send_wr Links::WindowRequest(const WorkRequest &r, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.send_flags = IBV_SEND_SIGNALED;
  Window &w = *r.window;
  if (r.op == WorkRequest::kBind) {
    w.rkey_ = ibv_inc_rkey(w.rkey_);
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = w.mw_.get();
    wr.bind_mw.rkey = w.rkey_;
    wr.bind_mw.bind_info = {.mr = r.mr->get(),
                            .addr = reinterpret_cast<uintptr_t>(r.local),
                            .length = r.length,
                            .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
  } else {
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.invalidate_rkey = w.rkey_;
  }
  return wr;
}

// Turn the next requests into work requests, as many as the queue depth lets through, as
// one chain per peer.
void Links::ChainRequests(Batch &batch) {
  const uint32_t depth = options_.queue_depth;
  while (batch.next < batch.requests.size() && batch.error.empty()) {
    const WorkRequest &r = batch.requests[batch.next];
    auto &chain = batch.chains[r.peer];
    auto &sges = batch.sges[r.peer];
    if (batch.outstanding[r.peer] + chain.size() >= depth) {
      break;
    }
    if (sges.capacity() < depth) {
      sges.reserve(depth);  // chains point into it: no reallocation while filling
    }
    if (r.op == WorkRequest::kBind || r.op == WorkRequest::kInvalidate) {
      chain.push_back(WindowRequest(r, (batch.tag << 32) | batch.next));
      ++batch.next;
      continue;
    }
    const uint64_t len = std::min({r.length - batch.offset, batch.max_msg, post_bytes_[r.peer]});
    sges.push_back({.addr = reinterpret_cast<uintptr_t>(r.local) + batch.offset,
                    .length = static_cast<uint32_t>(len),
                    .lkey = r.mr->lkey()});
    ibv_send_wr wr{};
    wr.wr_id = (batch.tag << 32) | batch.next;
    wr.sg_list = &sges.back();
    wr.num_sge = 1;
    wr.opcode = r.op == WorkRequest::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    if (r.op == WorkRequest::kWriteImm && batch.offset + len >= r.length) {
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;  // the last piece: the others have landed then
      wr.imm_data = htonl(r.imm);
    }
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = r.remote_addr + batch.offset;
    wr.wr.rdma.rkey = r.rkey;
    chain.push_back(wr);
    batch.offset += len;
    if (batch.offset >= r.length) {
      ++batch.next;
      batch.offset = 0;
    }
  }
}

// Post @peer's chain in calls of at most post_bytes_[peer] bytes each (and at least one
// work request).
void Links::PostChain(Batch &batch, uint32_t peer) {
  auto &c = batch.chains[peer];
  const auto bytes_of = [](const ibv_send_wr &wr) -> uint64_t {
    return wr.num_sge != 0 ? wr.sg_list->length : 0;
  };
  for (size_t first = 0, last = 0; first < c.size(); first = last) {
    uint64_t bytes = bytes_of(c[first]);
    for (last = first + 1; last < c.size(); ++last) {
      bytes += bytes_of(c[last]);
      if (bytes > post_bytes_[peer]) {
        break;
      }
      c[last - 1].next = &c[last];
    }
    ibv_send_wr *bad = nullptr;
    const int ret = ibv_post_send(qps_[peer].get(), &c[first], &bad);
    const size_t posted = ret == 0 ? last - first : static_cast<size_t>(bad - &c[first]);
    // A window's key is the one its last bind gave it (the provider names the window by it).
    for (size_t i = first; i < first + posted; ++i) {
      if (c[i].opcode == IBV_WR_BIND_MW) {
        c[i].bind_mw.mw->rkey = c[i].bind_mw.rkey;
      }
    }
    batch.outstanding[peer] += static_cast<uint32_t>(posted);
    batch.total += posted;
    if (ret != 0) {
      Fail(batch, peer, fmt::format("ibv_post_send to rank {} failed: {}", peer, ErrnoString(ret)));
      return;
    }
  }
}

// Post whatever fits.
void Links::Post(Batch &batch) {
  for (auto &c : batch.chains) {
    c.clear();
  }
  for (auto &s : batch.sges) {
    s.clear();
  }
  ChainRequests(batch);
  for (uint32_t p = 0; p < nranks_; ++p) {
    if (!batch.chains[p].empty()) {
      PostChain(batch, p);
    }
  }
}

// Poll the completion queue once and account for what completed (*@reaped entries). False
// when polling failed: every peer with work outstanding is then broken.
bool Links::Reap(Batch &batch, int *reaped) {
  ibv_wc wcs[32];
  const int n = ibv_poll_cq(cq_.get(), 32, wcs);
  *reaped = std::max(n, 0);
  if (n < 0) {
    batch.error = fmt::format("ibv_poll_cq failed: {}", ErrnoString(errno));
    for (uint32_t p = 0; p < nranks_; ++p) {
      if (batch.outstanding[p] != 0) {
        Break(p, batch.error);
      }
    }
    return false;
  }
  for (int i = 0; i < n; ++i) {
    const ibv_wc &wc = wcs[i];
    auto it = batch.peer_of_qp.find(wc.qp_num);
    if ((wc.wr_id >> 32) != batch.tag || it == batch.peer_of_qp.end()) {
      continue;  // left over from an earlier, abandoned call
    }
    const uint32_t peer = it->second;
    --batch.outstanding[peer];
    --batch.total;
    if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
      const WorkRequest &r = batch.requests[wc.wr_id & 0xffffffff];
      Fail(batch, peer,
           fmt::format("rdma {} of {:#x} bytes to rank {} (remote {:#x}, rkey {:#x}) "
                       "failed: {} (vendor error {:#x})",
                       r.op == WorkRequest::kRead         ? "read"
                       : r.op == WorkRequest::kBind       ? "window bind"
                       : r.op == WorkRequest::kInvalidate ? "window invalidation"
                                                          : "write",
                       r.length, peer, r.remote_addr,
                       r.window != nullptr ? r.window->rkey() : r.rkey,
                       ibv_wc_status_str(wc.status), wc.vendor_err));
    } else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      Fail(batch, peer,
           fmt::format("rdma to rank {} flushed: the queue pair is in the error state", peer));
    }
  }
  return true;
}

// No completion within progress_timeout (or by the caller's deadline, @deadline): break every
// peer with work outstanding.
void Links::TimeOut(Batch &batch, bool deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.progress_timeout).count();
  for (uint32_t p = 0; p < nranks_; ++p) {
    if (batch.outstanding[p] != 0) {
      Fail(batch, p,
           deadline ? fmt::format("rdma to rank {}: no completion by the deadline", p)
                    : fmt::format("rdma to rank {}: no completion within {} ms", p, ms));
    }
  }
}

Status Links::Execute(std::span<const WorkRequest> requests, Clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  HZC_RETURN_IF_ERROR(CheckRequests(requests));
  Batch batch(requests, ++batch_tag_ & 0xffffffff,
              std::max<uint32_t>(port_->port_attr.max_msg_sz, 4096), nranks_);
  for (uint32_t p = 0; p < nranks_; ++p) {
    if (qps_[p]) {
      batch.peer_of_qp[qps_[p]->qp_num] = p;
    }
  }
  // A wait polls the completion queue this many times before it sleeps on the channel.
  constexpr unsigned kSpins = 64;
  auto last_progress = Clock::now();
  bool timed_out = false;
  bool past_deadline = false;
  unsigned idle = 0;
  Post(batch);
  while (batch.total > 0) {
    int n = 0;
    if (!Reap(batch, &n)) {
      break;
    }
    if (n > 0) {
      last_progress = Clock::now();
      idle = 0;
      Post(batch);
      continue;
    }
    if (++idle < kSpins) {
      continue;
    }
    const auto now = Clock::now();
    const auto limit = std::min(last_progress + options_.progress_timeout, deadline);
    if (now <= limit) {
      AwaitCompletion(limit);
      continue;
    }
    if (timed_out) {
      LogWarn("verbs: {} work requests never completed; their queue pairs stay broken",
              batch.total);
      break;
    }
    timed_out = true;
    past_deadline = now > deadline && batch.error.empty();  // else the first error's code
    TimeOut(batch, now > deadline);
    last_progress = now;  // the flush of the broken queue pairs gets one more period
    deadline = Clock::time_point::max();
  }
  if (!batch.error.empty()) {
    return Error(past_deadline ? HCCL_E_TIMEOUT : HCCL_E_ROCE_TRANSFER, "{}", batch.error);
  }
  return Status::Ok();
}

void Links::AwaitCompletion(Clock::time_point until) {
  if (!channel_ || !AwaitEvent(channel_.get(), cq_.get(), &armed_, until)) {
    sched_yield();
  }
}

bool Links::PostReceives(uint32_t peer, uint32_t n) {
  // No scatter list: a write with immediate data lands where it says and only takes the entry.
  ibv_recv_wr wr{};
  wr.wr_id = peer;
  for (uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr *bad = nullptr;
    if (int ret = ibv_post_recv(qps_[peer].get(), &wr, &bad); ret != 0) {
      errno = ret;
      return false;
    }
  }
  return true;
}

size_t Links::Arrivals(std::span<Arrival> out) {
  std::lock_guard lock(arrivals_mutex_);
  if (!arrivals_cq_) {
    return 0;
  }
  size_t got = 0;
  ibv_wc wcs[32];
  while (got < out.size()) {
    const int n = ibv_poll_cq(arrivals_cq_.get(),
                              static_cast<int>(std::min<size_t>(32, out.size() - got)), wcs);
    if (n <= 0) {
      break;  // a failed poll: the data path's own completions say what broke
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc &wc = wcs[i];
      const auto peer = static_cast<uint32_t>(wc.wr_id);
      // A flushed entry: the link broke (Break), nothing more comes from it.
      if (wc.status != IBV_WC_SUCCESS || peer >= nranks_ || !qps_[peer]) {
        continue;
      }
      if (!PostReceives(peer, 1)) {
        LogDebug("verbs: cannot post a receive entry for rank {} again: {}", peer,
                 ErrnoString(errno));
      }
      // Anything else that took an entry (a SEND of no bytes) is not an arrival.
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) != 0) {
        out[got++] = {.peer = peer, .imm = ntohl(wc.imm_data)};
      }
    }
  }
  return got;
}

void Links::AwaitArrival(Clock::time_point until) {
  bool slept = false;
  {
    std::lock_guard lock(arrivals_mutex_);
    slept = arrivals_channel_ &&
            AwaitEvent(arrivals_channel_.get(), arrivals_cq_.get(), &arrivals_armed_, until);
  }
  if (!slept) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Status Links::Write(uint32_t peer, const MemoryRegion &mr, const void *local, size_t length,
                    uint64_t remote_addr, uint32_t rkey) {
  const WorkRequest r{.op = WorkRequest::kWrite,
                      .peer = peer,
                      .mr = &mr,
                      .local = const_cast<void *>(local),
                      .length = length,
                      .remote_addr = remote_addr,
                      .rkey = rkey};
  return Execute({&r, 1});
}

Status Links::Read(uint32_t peer, const MemoryRegion &mr, void *local, size_t length,
                   uint64_t remote_addr, uint32_t rkey) {
  const WorkRequest r{.op = WorkRequest::kRead,
                      .peer = peer,
                      .mr = &mr,
                      .local = local,
                      .length = length,
                      .remote_addr = remote_addr,
                      .rkey = rkey};
  return Execute({&r, 1});
}

}  // namespace hzc::verbs
