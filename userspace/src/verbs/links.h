// SPDX-License-Identifier: Apache-2.0
// RDMA links of a communicator: one reliable-connected queue pair per peer on one device
// port, set up through the kernel domain board (or one peer at a time: OpenLazy); memory
// registration; RDMA WRITE / READ
// into peers' registered memory with completion by CQ polling.
//
// Use (every rank of the domain, at about the same time):
//   auto links = Links::Establish(device, domain, rank, nranks, LinkOptions::FromEnvironment());
//   if (!links.ok()) -> links.status() (HCCL_E_TIMEOUT, HCCL_E_ROCE_CONNECT, ...)
//   if (!*links)     -> no RDMA device on some rank: kernel-only links
//   auto mr = (*links)->Register(va, len);      publish mr->remote() to peers
//   (between servers, domain_per_peer: (*links)->RegisterFor(peer, va, len, remote))
//   (*links)->Write(peer, **mr, local, len, remote.addr + off, remote.rkey);
// Destroying Links (and its MemoryRegions, in any order) releases every verbs object and
// never waits for peers.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "device/device.h"
#include "verbs/board.h"
#include "verbs/ibv.h"
#include "verbs/port.h"

namespace hzc::verbs {

struct LinkOptions {
  // Board keys link setup publishes under (each once per domain and rank: a second setup in
  // the same domain needs other keys). Key 0 is the communicator's own rendezvous.
  static constexpr uint32_t kEndpointKey = 1;
  static constexpr uint32_t kReadyKey = 2;

  std::string device;                          // HZC_RDMA_DEVICE, see RdmaDeviceSpec
  std::optional<uint32_t> gid_index;           // HZC_RDMA_GID_INDEX; nullopt: ChooseGidIndex
  std::chrono::milliseconds timeout{120'000};  // whole setup (HCCL_CONNECT_TIMEOUT)
  uint32_t endpoint_key = kEndpointKey;
  uint32_t ready_key = kReadyKey;
  uint32_t queue_depth = 128;  // send work requests in flight per queue pair
  // Each peer's queue pair, and the memory registered for that peer (RegisterFor), in a
  // protection domain of their own, so that a peer reaches no memory registered for another
  // one, whatever keys it learns or guesses (between servers). Else one domain for all
  // (Register: memory every peer of the communicator may reach, as activated memory).
  bool domain_per_peer = false;
  // Local ACK timeout 4.096 us * 2^ack_timeout (134 ms) and retry count: a dead peer makes
  // a transfer fail after about (retry_count + 1) * 134 ms instead of hanging. soft-RoCE
  // retransmits whenever the timer fires during a long transfer, so a short timeout costs
  // bandwidth there; the retry count must outlast the guest's scheduling stalls.
  uint8_t ack_timeout = 15;
  uint8_t retry_count = 6;
  // Data path: longest wait without any completion before the transfer is abandoned.
  std::chrono::milliseconds progress_timeout{10'000};
  // Most bytes one ibv_post_send call hands to a queue pair: longer requests are split into
  // work requests of at most this size, and the work requests of a batch go out in calls of at
  // most this many bytes. 0: kPacketsPerPost packets of the path MTU (4 MiB at MTU 4096).
  // Soft-RoCE (rxe) does a user queue pair's protocol work inside the post call, but only for
  // 1024 packets (RXE_MAX_ITERATIONS); the rest of a larger batch is deferred to a tasklet that
  // ends up in ksoftirqd, which shares a CPU with the polling thread and ran at about half the
  // speed. On hardware the split only costs a few more doorbells and completions.
  static constexpr uint64_t kPacketsPerPost = 1024;
  uint64_t post_bytes = 0;
  // Receive entries kept posted on each queue pair for the peer's writes with immediate data
  // (WorkRequest::kWriteImm), which this rank learns of from Arrivals and waits for with
  // AwaitArrival; 0: none (the peer must not send any). An entry is posted again as its
  // arrival is taken; a peer that runs out of them waits (RNR) until then (its requests fail
  // after progress_timeout without a completion, as any).
  uint32_t arrivals = 0;

  // HZC_RDMA_DEVICE, HZC_RDMA_GID_INDEX and HCCL_CONNECT_TIMEOUT from GetConfig().
  static LinkOptions FromEnvironment();
  // FromEnvironment() for links between servers, where the network and a loaded peer stall for
  // longer than inside one: the local ACK timeout and retry count of HCCL_RDMA_TIMEOUT and
  // HCCL_RDMA_RETRY_CNT (by default 4.3 s and 7: a peer may stall for about 34 s), a transfer
  // that sees no completion for 10 s longer than that (at least 30 s) is abandoned (soft-RoCE
  // retries for ever at a count of 7: there this is what fails a dead peer), and a protection
  // domain per peer.
  static LinkOptions BetweenServers();
  static LinkOptions BetweenServers(const Config &config);
  // The same from @config.
  static LinkOptions FromConfig(const Config &config);
};

// What a rank publishes about itself; the queue-pair part is per peer.
struct EndpointHeader {
  static constexpr uint32_t kMagic = 0x687a6365;  // "hzce"
  static constexpr uint16_t kVersion = 1;
  enum State : uint16_t { kReady = 1, kNoRdmaDevice = 2, kFailed = 3 };

  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t state = kReady;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint8_t gid[16] = {};
  uint32_t lid = 0;
  uint32_t mtu = 0;  // enum ibv_mtu
  uint32_t port = 0;
  uint32_t link_layer = 0;
};
static_assert(sizeof(EndpointHeader) == 48);

// The queue pair rank i created for rank j: its number and first send PSN.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
};
static_assert(sizeof(QpEndpoint) == 8);

// A parsed endpoint blob.
struct Endpoint {
  EndpointHeader header;
  std::vector<QpEndpoint> qps;  // nranks entries (own rank's is zero)
};
std::vector<std::byte> EncodeEndpoint(const Endpoint &ep);
// HCCL_E_ROCE_CONNECT naming what is wrong with rank @rank's blob.
Expected<Endpoint> DecodeEndpoint(std::span<const std::byte> blob, uint32_t rank, uint32_t nranks);
// Every rank's endpoint from the endpoint round's @blobs, with the ranks that reported a
// failure or no RDMA device. HCCL_E_ROCE_CONNECT for a malformed blob.
struct PeerEndpoints {
  std::vector<Endpoint> endpoints;  // [rank]
  std::vector<uint32_t> failed;
  std::vector<uint32_t> no_device;
};
Expected<PeerEndpoints> DecodeEndpoints(const BoardBlobs &blobs);

// The final barrier's blob: every rank says whether its queue pairs are connected.
struct ReadyBlob {
  uint32_t magic = EndpointHeader::kMagic;
  uint32_t state = EndpointHeader::kReady;
};
static_assert(sizeof(ReadyBlob) == 8);
// The ranks of @blobs whose ready blob is missing, malformed or not kReady.
std::vector<uint32_t> RanksNotReady(const BoardBlobs &blobs);

// Largest nranks whose endpoint fits a board blob of @max_blob bytes.
constexpr uint32_t MaxRanksForBlob(uint32_t max_blob) {
  return (max_blob - sizeof(EndpointHeader)) / sizeof(QpEndpoint);
}

// Registered memory as a peer targets it: plain, to be published (e.g. on the board).
struct RemoteBuffer {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(RemoteBuffer) == 24);

struct ProtectionDomain;

// One memory registration (local write; remote read and write unless made by RegisterFor for
// this rank's own requests only). Keeps the protection domain alive, so it may outlive the Links
// that made it.
class MemoryRegion {
 public:
  MemoryRegion(std::shared_ptr<const ProtectionDomain> pd, MrPtr mr);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion &) = delete;
  MemoryRegion &operator=(const MemoryRegion &) = delete;

  void *addr() const { return mr_->addr; }
  size_t length() const { return mr_->length; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  RemoteBuffer remote() const {
    return {.addr = reinterpret_cast<uintptr_t>(mr_->addr), .length = mr_->length, .rkey = rkey()};
  }
  bool Contains(const void *p, size_t len) const;
  // Whether it was registered in the protection domain of @qp (whose requests may use it then).
  bool Serves(const ibv_qp *qp) const { return qp != nullptr && mr_->pd == qp->pd; }
  ibv_mr *get() const { return mr_.get(); }

 private:
  std::shared_ptr<const ProtectionDomain> pd_;
  MrPtr mr_;
};

// A memory window (type 2) for one peer (Links::OpenWindow): a kBind request on that peer's
// queue pair opens it onto a part of memory registered for the peer with RegisterForWindows,
// which that peer alone may then RDMA-WRITE with rkey(), until a kInvalidate request closes
// it. Each bind gives it a new key: the previous one no longer reaches anything.
class Window {
 public:
  Window(std::shared_ptr<const ProtectionDomain> pd, MwPtr mw);
  ~Window();
  Window(const Window &) = delete;
  Window &operator=(const Window &) = delete;

  uint32_t rkey() const { return rkey_; }  // of the last bind
  bool Serves(const ibv_qp *qp) const { return qp != nullptr && mw_->pd == qp->pd; }

 private:
  friend class Links;
  std::shared_ptr<const ProtectionDomain> pd_;
  MwPtr mw_;
  uint32_t rkey_ = 0;
};

// One RDMA operation between registered local memory and a peer's registered memory.
// kWriteImm: an RDMA WRITE whose last bytes arrive with @imm, which the peer's Arrivals
// reports once all of them are in its memory (the peer needs LinkOptions::arrivals).
// kBind: open @window onto [local, local + length) of @mr for the peer's writes (a new key,
// window->rkey() once it completed); kInvalidate: close @window (local, mr and length unused).
struct WorkRequest {
  enum Opcode { kWrite, kRead, kWriteImm, kBind, kInvalidate };
  Opcode op = kWrite;
  uint32_t peer = 0;
  const MemoryRegion *mr = nullptr;  // contains [local, local + length)
  void *local = nullptr;
  uint64_t length = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;          // kWriteImm
  Window *window = nullptr;  // kBind, kInvalidate
};

class Links {
 public:
  // Set up links with every other rank of kernel domain @domain, which the caller joined as
  // rank @rank of @nranks through @device; see the file comment. A null
  // Links when this rank or any peer has no RDMA device (kernel-only links, logged once).
  // Errors: HCCL_E_NOT_FOUND (HZC_RDMA_DEVICE names a missing device/port or GID),
  // HCCL_E_PARA (malformed HZC_RDMA_DEVICE or board), HCCL_E_TIMEOUT (ranks missing; the
  // message names them), HCCL_E_REMOTE (the domain broke), HCCL_E_ROCE_CONNECT (a verbs call
  // failed here or a peer reported a failure), HCCL_E_NOT_SUPPORT (too many ranks for the
  // board). On failure nothing is left behind.
  static Expected<std::unique_ptr<Links>> Establish(const Device &device,
                                                    const Device::DomainId &domain, uint32_t rank,
                                                    uint32_t nranks, const LinkOptions &options);
  // The same on any board (BlobBoard: e.g. the TCP connections of a communicator that spans
  // servers), as rank board.rank() of board.nranks().
  static Expected<std::unique_ptr<Links>> Establish(const BlobBoard &board,
                                                    const LinkOptions &options);

  // Links to be made one peer at a time (AddPeer, then ConnectPeer once the peer's queue pair
  // is known, exchanged by the caller): the port, protection domain and completion queue for
  // up to @nranks - 1 peers, no queue pair yet. A null Links when there is no RDMA device with
  // an active port. Errors as Establish's.
  static Expected<std::unique_ptr<Links>> OpenLazy(uint32_t rank, uint32_t nranks,
                                                   const LinkOptions &options);
  // This rank's port, as a peer connects to it.
  EndpointHeader Header() const;
  // A queue pair for @peer, which has none: its number and first PSN, for the peer.
  // HCCL_E_ROCE_CONNECT when verbs fail (nothing is left then).
  Expected<QpEndpoint> AddPeer(uint32_t peer);
  // Connect @peer's queue pair (AddPeer) to the peer's, @theirs on the port @header says.
  // HCCL_E_ROCE_CONNECT for another link layer or a failed transition.
  Status ConnectPeer(uint32_t peer, const EndpointHeader &header, const QpEndpoint &theirs);
  // The peers with a queue pair.
  uint32_t linked() const;

  ~Links();
  Links(const Links &) = delete;
  Links &operator=(const Links &) = delete;

  // Register [va, va + length). HCCL_E_PARA for an empty, unmapped or overflowing range,
  // HCCL_E_MEMORY (with a hint) when RLIMIT_MEMLOCK or memory is short, HCCL_E_ROCE_CONNECT
  // for other verbs failures.
  // With domain_per_peer: HCCL_E_INTERNAL (use RegisterFor).
  Expected<std::unique_ptr<MemoryRegion>> Register(void *va, size_t length) const;
  // Register [va, va + length) for @peer alone (domain_per_peer: in its protection domain):
  // for its requests too when @remote (the peer may read and write it with the region's key),
  // else only for this rank's requests to @peer. Errors as Register's.
  Expected<std::unique_ptr<MemoryRegion>> RegisterFor(uint32_t peer, void *va, size_t length,
                                                      bool remote) const;
  // As RegisterFor, but the peer reaches it only through a Window this rank opens onto a
  // part of it (its own key reaches nothing). Errors as Register's.
  Expected<std::unique_ptr<MemoryRegion>> RegisterForWindows(uint32_t peer, void *va,
                                                             size_t length) const;
  // A window for @peer (domain_per_peer: in its protection domain), closed.
  // HCCL_E_NOT_SUPPORT when the device has no type 2 memory windows, HCCL_E_ROCE_CONNECT when
  // verbs fail.
  Expected<std::unique_ptr<Window>> OpenWindow(uint32_t peer) const;

  // Post every request (up to queue_depth in flight per peer, large ones split at the
  // port's max message size and at post_bytes) and wait for all completions. HCCL_E_PARA for
  // a bad request (nothing posted), HCCL_E_ROCE_TRANSFER when an operation fails or makes no
  // progress within progress_timeout; the link to that peer is then broken for good and later
  // requests to it fail at once. Thread-safe (one call at a time per Links). @deadline: the
  // caller's own time limit; requests not all complete by then break their links the same way
  // and the call is HCCL_E_TIMEOUT.
  Status Execute(std::span<const WorkRequest> requests,
                 std::chrono::steady_clock::time_point deadline =
                     std::chrono::steady_clock::time_point::max());
  Status Write(uint32_t peer, const MemoryRegion &mr, const void *local, size_t length,
               uint64_t remote_addr, uint32_t rkey);
  Status Read(uint32_t peer, const MemoryRegion &mr, void *local, size_t length,
              uint64_t remote_addr, uint32_t rkey);

  // A peer's write with immediate data (WorkRequest::kWriteImm) whose bytes are in memory.
  struct Arrival {
    uint32_t peer = 0;
    uint32_t imm = 0;  // as the peer sent it: untrusted
  };
  // The arrivals since the last call, at most @out.size() of them, in the order each peer
  // sent them; their receive entries are posted again. Nothing that arrives after a peer's
  // link broke.
  // One thread takes arrivals and waits for them (AwaitArrival) at a time.
  size_t Arrivals(std::span<Arrival> out);
  // Sleep until an arrival is reported or @until (at most a slice of 100 ms). The first call
  // after an arrival only asks to be woken and returns at once: the caller looks at Arrivals
  // once more before the next call sleeps. Without a completion channel, a nap of 100 us.
  void AwaitArrival(std::chrono::steady_clock::time_point until);

  uint32_t rank() const { return rank_; }
  uint32_t nranks() const { return nranks_; }
  const Port &port() const { return *port_; }
  // Queue pair number of the link to @peer (0 for the own rank).
  uint32_t qp_num(uint32_t peer) const;
  // Why the link to @peer is unusable; empty while it works.
  std::string broken(uint32_t peer) const;

 private:
  struct Batch;

  Links(uint32_t rank, uint32_t nranks, const LinkOptions &options, std::unique_ptr<Port> port);

  // Link setup steps (Establish), each returning the first failure.
  static Expected<std::unique_ptr<Links>> Open(uint32_t rank, uint32_t nranks,
                                               const LinkOptions &options);
  Status CreateDomain();
  // The protection domain of @peer's queue pair and registrations (pd_ unless domain_per_peer:
  // then made at its first use).
  Expected<std::shared_ptr<const ProtectionDomain>> Domain(uint32_t peer) const;
  // A protection domain on the port (@what names it in errors; a @per_peer one is HCCL_E_UNAVAIL
  // when the device has none left).
  Expected<std::shared_ptr<const ProtectionDomain>> NewDomain(const std::string &what,
                                                              bool per_peer) const;
  Expected<std::unique_ptr<MemoryRegion>> RegisterIn(std::shared_ptr<const ProtectionDomain> pd,
                                                     void *va, size_t length, int access) const;
  Status CreateQueues();
  Status ModifyToInit(uint32_t peer);
  Status Connect(const std::vector<Endpoint> &endpoints);
  Status ModifyToReadyToReceive(uint32_t peer, const EndpointHeader &header,
                                const QpEndpoint &theirs);
  Status ModifyToReadyToSend(uint32_t peer);
  Endpoint LocalEndpoint() const;

  // Data path steps (Execute).
  Status CheckRequests(std::span<const WorkRequest> requests) const;
  void Fail(Batch &batch, uint32_t peer, const std::string &why);
  void Post(Batch &batch);
  void ChainRequests(Batch &batch);
  // The work request of a kBind (the window's next key) or kInvalidate request.
  static ibv_send_wr WindowRequest(const WorkRequest &r, uint64_t wr_id);
  void PostChain(Batch &batch, uint32_t peer);
  bool Reap(Batch &batch, int *reaped);
  void TimeOut(Batch &batch, bool deadline);
  // Nothing completed for a while: sleep until the completion queue has news or @until (at
  // most a slice), arming its event first; without a completion channel, yield the CPU.
  void AwaitCompletion(std::chrono::steady_clock::time_point until);
  // Post @n receive entries for @peer's writes with immediate data; false when verbs refuse.
  bool PostReceives(uint32_t peer, uint32_t n);

  // The link to @peer failed: move its queue pair to the error state so everything posted
  // on it completes (flushed), and refuse further requests to it.
  void Break(uint32_t peer, const std::string &why);

  const uint32_t rank_;
  const uint32_t nranks_;
  LinkOptions options_;         // queue_depth clamped to the device
  std::unique_ptr<Port> port_;  // owns the device context (shared with pd_)
  std::shared_ptr<const ProtectionDomain> pd_;
  // [peer] with domain_per_peer (sized by CreateDomain, each made at first use under
  // domains_mutex_).
  mutable std::mutex domains_mutex_;
  mutable std::vector<std::shared_ptr<const ProtectionDomain>> domains_;
  // Wakes a waiting Execute when cq_ has a completion (null when the device cannot): waits
  // longer than a few polls sleep instead of spinning, which matters most where the CPU also
  // runs the RDMA device (soft-RoCE). Destroyed after cq_.
  CompChannelPtr channel_;
  CqPtr cq_;
  bool armed_ = false;  // cq_'s event is requested and not yet taken
  uint32_t cq_size_ = 0;
  // Where the peers' writes with immediate data complete (LinkOptions::arrivals; else null),
  // with a channel of its own; arrivals_mutex_ guards them.
  CompChannelPtr arrivals_channel_;
  CqPtr arrivals_cq_;
  bool arrivals_armed_ = false;
  std::mutex arrivals_mutex_;
  std::vector<QpPtr> qps_;            // [peer], null for the own rank; destroyed before the queues
  std::vector<uint32_t> send_psn_;    // [peer]
  std::vector<uint64_t> post_bytes_;  // [peer]: options_.post_bytes for the path MTU
  std::vector<std::string> broken_;   // [peer]

  mutable std::mutex mutex_;  // data path: cq_, armed_, broken_, batch_tag_
  uint64_t batch_tag_ = 0;  // numbers each Execute, so completions of an earlier one are told apart
};

}  // namespace hzc::verbs
