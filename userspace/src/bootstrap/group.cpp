// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/group.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "bootstrap/auth.h"
#include "bootstrap/frames.h"
#include "bootstrap/handshake.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wait_fd.h"

namespace hzc::bootstrap {

namespace {

using Clock = Group::Clock;

// A receive waits for its socket in slices of this length: another thread may take the bytes
// it waits for (and queue the frame for it) without waking it.
constexpr std::chrono::milliseconds kRecvSlice{10};
// How long an accepted connection has to send its handshake (each its own: see HelloReader).
constexpr std::chrono::seconds kHelloTime{2};
// Connections that may wait for their handshake at once (see HelloReader for why the oldest goes
// beyond that).
constexpr size_t kMaxPending = 128;
// A receive from a rank that has not connected yet dials it after this long (to learn whether
// it is gone).
constexpr std::chrono::milliseconds kProbeAfter{200};
// The listener's thread wakes when the group closes (it shuts the listener down), and looks
// whether it did this often should that fail.
constexpr std::chrono::seconds kServeSlice{1};

}  // namespace

Expected<Listener> Listener::Open(const std::string &address) {
  const std::string chosen = ChooseAddress(address);
  auto addr = ParseAddress(chosen);
  if (!addr.ok()) {
    return Error(HCCL_E_TCP_CONNECT, "cannot listen on {}", addr.status().message());
  }
  sockaddr_storage bound{};
  auto fd = ListenOn(*addr, /*reuse=*/false, &bound);
  if (!fd.ok()) {
    return fd.status();
  }
  Listener l;
  l.fd_ = std::move(*fd);
  l.address_ = EndpointString(bound);
  return l;
}

// The connections, shared by the Group that Connect made and its views; in the ranks of the
// former.
struct Group::Impl {
  // One TCP connection with a peer and the frames read from it.
  struct Conn {
    UniqueFd fd;
    // What the peer sent on it, cut into frames (bootstrap/frames.h): a group holds at most
    // 2 * (ranks - 1) * FrameInput::kMaxQueuedBytes of them, besides what the sockets hold.
    FrameInput input;
    bool ended = false;  // read to its end (or its error): nothing more comes on it
  };
  struct Peer {
    std::string address;
    sockaddr_storage addr{};
    // The connections with the peer: [kDialed] the one this rank made, [kAccepted] the one the
    // peer made; a connection's descriptor never changes once set (until the group closes), so a
    // thread may use it without the mutex once it read it under it. Each side sends on the first
    // of them it had (@send, -1 before) and reads both: if both ranks dialed at once, each
    // direction still keeps to one connection, so messages arrive in the order they were sent.
    std::array<Conn, 2> conns;
    int send = -1;
    // Why the connection is unusable (HCCL_SUCCESS while it works), said around the peer's
    // name: each Group names the peer by its own rank numbers.
    HcclResult broken_code = HCCL_SUCCESS;
    std::string broken_before, broken_after;
    // The end of a connection (its code and words), noted once no connection with the peer is
    // left to read and none is on its way (Pump).
    HcclResult end_code = HCCL_SUCCESS;
    std::string end_why;
    // A connection with the peer on its way: until then the peer's dial is in its handshake
    // here (it may have sent its last messages on it already), or this rank dials it.
    Clock::time_point handshake_until{};
    bool dialing = false;
    // Held for a whole frame sent to the peer (and for dialing it), so that frames of two
    // threads never mix.
    std::unique_ptr<std::mutex> sending = std::make_unique<std::mutex>();

    bool broken() const { return broken_code != HCCL_SUCCESS; }
    bool connected() const { return send >= 0; }
    // Why the connection is unusable, naming the peer @name; "" while it works.
    std::string Why(std::string_view name) const {
      return broken() ? broken_before + std::string(name) + broken_after : "";
    }
  };
  static constexpr int kDialed = 0;
  static constexpr int kAccepted = 1;

  ~Impl() {
    stop = true;
    if (server.joinable()) {
      (void)shutdown(listener.fd(), SHUT_RDWR);  // wakes Serve's wait for connections
      server.join();
    }
  }

  UniqueId id{};  // the key the ranks prove
  TrustList trust;
  uint32_t rank = 0;
  std::vector<Peer> peers;  // by rank; this rank's entry has no connection
  Listener listener;
  // Guards every peer's connections, input and broken state, and the reads and writes of the
  // sockets; never held while waiting.
  std::mutex mutex;
  std::condition_variable connected;  // a connection was added (Recv waits for its peer's)
  std::thread server;                 // Serve
  std::atomic<bool> stop{false};

  std::string Name(uint32_t p) const { return fmt::format("rank {} ({})", p, peers[p].address); }
  uint32_t size() const { return static_cast<uint32_t>(peers.size()); }
  // Note why @p's connection is unusable (@before, the peer's name, @after), unless it was.
  void Break(uint32_t p, HcclResult code, std::string before, std::string after);
  // Fail @p's connection for breaking the protocol (HCCL_E_TCP_TRANSFER, "<peer><@after>"): it
  // is shut down (the peer's further sends fail) and what it sent and nobody took is dropped.
  void Reject(uint32_t p, std::string after);
  void Pump(uint32_t p);
  // Errors name @to as @name.
  Status Write(uint32_t to, std::string_view name, const std::byte *data, size_t len,
               Clock::time_point deadline);
  // Make sure this rank has a connection to @p to send on: dial it unless it has one (the
  // caller holds @p's sending mutex). Errors name @p as @name.
  Status Reach(uint32_t p, std::string_view name, Clock::time_point deadline);
  // Add connection @fd with @p as @conns[@which].
  void Add(uint32_t p, int which, UniqueFd fd);
  // The listener's thread: accepts the connections of the ranks that need this one.
  void Serve(HelloReader reader);
  void AnswerDialer(HelloReader &reader, HelloReader::Hello conn);
  std::optional<uint32_t> CheckProof(const HelloReader &reader, const HelloReader::Hello &conn);
};

void Group::Impl::Break(uint32_t p, HcclResult code, std::string before, std::string after) {
  Peer &peer = peers[p];
  if (!peer.broken()) {
    peer.broken_code = code;
    peer.broken_before = std::move(before);
    peer.broken_after = std::move(after);
  }
}

void Group::Impl::Reject(uint32_t p, std::string after) {
  Peer &peer = peers[p];
  Break(p, HCCL_E_TCP_TRANSFER, "", std::move(after));
  // Disconnect (connect to AF_UNSPEC): the peer gets a reset at once, whatever its socket and
  // ours hold, and threads that wait in poll on the socket wake. The descriptor stays open (until
  // the group closes), so no other thread can meet its number reused. Should that fail, shut the
  // connection down: the peer sees its end.
  for (Conn &c : peer.conns) {
    const sockaddr unspec{.sa_family = AF_UNSPEC, .sa_data = {}};
    if (c.fd.valid() && connect(c.fd.get(), &unspec, sizeof(unspec)) != 0) {
      (void)shutdown(c.fd.get(), SHUT_RDWR);
    }
    c.input.Clear();
  }
}

// Read what @p has sent, without waiting, into its queues; notes the peer's end once every
// connection with it has ended and none is on its way: the peer's last message may wait on one
// of its two connections when the other has ended already (two ranks that dialed each other at
// once, the peer's group closed right after its last send: the connection it had dialed reset
// before its handshake was done, or still in its handshake with this rank's listener thread, or
// its data behind the other's end on the network).
void Group::Impl::Pump(uint32_t p) {
  Peer &peer = peers[p];
  std::byte buf[64 * 1024];
  HcclResult &end_code = peer.end_code;
  std::string &end_why = peer.end_why;
  for (Conn &c : peer.conns) {
    while (c.fd.valid() && !c.ended && !peer.broken()) {
      const ssize_t n = recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        if (std::string why = c.input.Add({buf, static_cast<size_t>(n)}); !why.empty()) {
          Reject(p, std::move(why));
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      }
      if (n < 0 && errno == EINTR) {
        continue;
      }
      c.ended = true;
      if (end_code == HCCL_SUCCESS && n == 0) {
        // A message cut off by the end is not received: its bytes so far are dropped.
        end_code = HCCL_E_REMOTE;
        end_why = c.input.partial() == 0 ? std::string(" closed the connection")
                                         : fmt::format(
                                               " closed the connection in the middle of a message "
                                               "({} bytes of it arrived)",
                                               c.input.partial());
      } else if (end_code == HCCL_SUCCESS) {
        const int err = errno;
        end_code = err == ECONNRESET ? HCCL_E_REMOTE : HCCL_E_TCP_TRANSFER;
        end_why =
            fmt::format(" {}: {}", err == ECONNRESET ? "closed the connection" : "cannot be read",
                        ErrnoString(err));
      }
      break;
    }
  }
  if (end_code == HCCL_SUCCESS || peer.broken()) {
    return;
  }
  const bool open = std::any_of(peer.conns.begin(), peer.conns.end(),
                                [](const Conn &c) { return c.fd.valid() && !c.ended; });
  const bool coming =
      peer.dialing || (Clock::now() < peer.handshake_until && !peer.conns[kAccepted].fd.valid());
  if (!open && !coming) {
    Break(p, end_code, "", end_why);
  }
}

// Send @len bytes at @data to @to, reading meanwhile what every peer sends (so that ranks
// sending each other more than their sockets hold do not wait for each other forever).
Status Group::Impl::Write(uint32_t to, std::string_view name, const std::byte *data, size_t len,
                          Clock::time_point deadline) {
  std::vector<pollfd> fds;
  std::vector<uint32_t> who;
  std::unique_lock lock(mutex);
  const int out = peers[to].conns[peers[to].send].fd.get();
  while (len > 0 && !peers[to].broken()) {
    fds.clear();
    who.clear();
    for (uint32_t p = 0; p < size(); ++p) {
      for (const Conn &c : peers[p].conns) {
        // An ended connection is not read again; the one sent on is still written (its error
        // breaks the peer).
        const short events =
            static_cast<short>((c.ended ? 0 : POLLIN) | (c.fd.get() == out ? POLLOUT : 0));
        if (p != rank && c.fd.valid() && events != 0 && !peers[p].broken()) {
          fds.push_back({c.fd.get(), events, 0});
          who.push_back(p);
        }
      }
    }
    lock.unlock();
    const int n = poll(fds.data(), fds.size(), RemainingMs(deadline));
    lock.lock();
    if (n < 0 && errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "poll failed: {}", ErrnoString(errno));
    }
    if (n == 0) {
      return Error(HCCL_E_TIMEOUT, "timed out sending to {}", name);
    }
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        Pump(who[i]);
      }
      if (fds[i].fd != out || (fds[i].revents & POLLOUT) == 0 || peers[to].broken()) {
        continue;
      }
      const ssize_t k = send(out, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        data += k;
        len -= static_cast<size_t>(k);
      } else if (errno == EPIPE || errno == ECONNRESET) {
        Break(to, HCCL_E_REMOTE, "", " closed the connection");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Break(to, HCCL_E_TCP_TRANSFER, "send to ", fmt::format(": {}", ErrnoString(errno)));
      }
    }
  }
  const Peer &peer = peers[to];
  return len == 0 ? Status::Ok() : Status(peer.broken_code, peer.Why(name));
}

void Group::Impl::Add(uint32_t p, int which, UniqueFd fd) {
  TuneLink(fd.get());  // a rank only waiting for a message learns of a cut link
  {
    const std::lock_guard lock(mutex);
    Peer &peer = peers[p];
    peer.conns[which].fd = std::move(fd);
    if (peer.send < 0) {
      peer.send = which;
    }
    if (which == kAccepted) {
      peer.handshake_until = {};
    }
  }
  connected.notify_all();
}

// Dial @p and prove this rank to it: the hello (this rank's nonce), @p's answer (its proof and
// nonce, checked), this rank's proof. Errors name @p.
Status Group::Impl::Reach(uint32_t p, std::string_view name, Clock::time_point deadline) {
  {
    const std::lock_guard lock(mutex);
    if (peers[p].broken()) {
      return Status(peers[p].broken_code, peers[p].Why(name));
    }
    if (peers[p].connected()) {
      return Status::Ok();
    }
    peers[p].dialing = true;
  }
  // Until the connection is added (or the dial failed), the peer's end waits for it.
  struct Dialing {
    Impl &impl;
    uint32_t p;
    ~Dialing() {
      const std::lock_guard lock(impl.mutex);
      impl.peers[p].dialing = false;
    }
  } dialing{*this, p};
  // Every rank listened before the rendezvous gave out the addresses: a rank that refuses has
  // closed its group (its communicator was destroyed, or its process ended).
  bool refused = false;
  auto fd = Dial(peers[p].addr, deadline, /*refused_ends=*/true, &refused);
  if (!fd.ok()) {
    if (refused) {
      const std::lock_guard lock(mutex);
      Break(p, HCCL_E_REMOTE, "",
            " is gone: it refuses connections (its communicator was destroyed or its process "
            "ended)");
      return Status(peers[p].broken_code, peers[p].Why(name));
    }
    return Error(HCCL_E_TCP_CONNECT, "cannot connect to {}: {}", name, fd.status().message());
  }
  auto nonce = RandomNonce();
  if (!nonce.ok()) {
    return nonce.status();
  }
  const Hello mine = MakeHello(id, rank, p, size(), *nonce);
  Status st = SendAll(fd->get(), &mine, sizeof(mine), deadline);
  Answer a{};
  if (st.ok()) {
    st = RecvAll(fd->get(), &a, sizeof(a), deadline);
  }
  if (!st.ok()) {
    return Error(st.code() == HCCL_E_TIMEOUT ? HCCL_E_TIMEOUT : HCCL_E_TCP_CONNECT,
                 "handshake with {}: {}", name, st.message());
  }
  if (const std::string why = CheckAnswer(a, id, rank, p, size(), mine); !why.empty()) {
    return Error(HCCL_E_TCP_CONNECT, "{} is not rank {} of this communicator: {}", name, p, why);
  }
  const ProofMessage m = MakeProof(id, mine, std::span(a.hello.nonce));
  if (st = SendAll(fd->get(), &m, sizeof(m), deadline); !st.ok()) {
    return Error(st.code(), "handshake with {}: {}", name, st.message());
  }
  Add(p, kDialed, std::move(*fd));
  LogDebug("bootstrap: rank {} connected to {}", rank, name);
  return Status::Ok();
}

// Accept the connections of the ranks that dial this one, until the group closes: answer each
// handshake (AnswerDialer), then check its proof (CheckProof). Handshakes and proofs are read all
// at once (HelloReader): a connection that is not one of them (another communicator's, a
// stranger's, a stray, silent or garbled one, one from an address off the trust list) is
// dropped, logged at WARN, and never delays the others.
void Group::Impl::Serve(HelloReader reader) {
  while (!stop) {
    auto next = reader.Next(Clock::now() + kServeSlice);
    if (!next.ok()) {
      LogWarn("bootstrap: rank {} ({}): {}", rank, listener.address(), next.status().message());
      std::this_thread::sleep_for(kServeSlice);
      continue;
    }
    if (!next->has_value()) {
      continue;
    }
    HelloReader::Hello &conn = **next;
    if (conn.state.empty()) {
      AnswerDialer(reader, std::move(conn));
    } else if (const auto from = CheckProof(reader, conn)) {
      Add(*from, kAccepted, std::move(conn.fd));
      LogDebug("bootstrap: rank {} accepted {}", rank, Name(*from));
    }
  }
}

// A connection's handshake: dropped (logged) unless it is another rank's of this communicator
// from an address on the trust list, its first; else answered with this rank's nonce and proof
// and read again for the dialer's proof (its hello and this rank's nonce kept in its state).
void Group::Impl::AnswerDialer(HelloReader &reader, HelloReader::Hello conn) {
  std::string why = trust.Why(HostOf(conn.peer));
  Hello h{};
  if (why.empty() && conn.data.size() != sizeof(Hello)) {
    why = "a proof without a handshake";
  }
  if (why.empty()) {
    std::memcpy(&h, conn.data.data(), sizeof(h));
    why = CheckHello(h, id, rank, size());
  }
  const uint32_t from = ntohl(h.from);
  if (why.empty()) {
    const std::lock_guard lock(mutex);
    if (from == rank || peers[from].conns[kAccepted].fd.valid()) {
      why = fmt::format("rank {} connects to other ranks only, once", from);
    }
  }
  auto nonce = RandomNonce();
  if (why.empty() && !nonce.ok()) {
    why = nonce.status().message();
  }
  if (why.empty()) {
    const Answer a = MakeAnswer(id, rank, size(), h, *nonce);
    // 80 bytes on a fresh connection: its socket takes them at once, so no wait.
    const Status st = SendAll(conn.fd.get(), &a, sizeof(a), Clock::now());
    why = st.ok() ? "" : st.message();
  }
  if (!why.empty()) {
    reader.LogDropped(conn.peer, why);
    return;
  }
  conn.state.assign(reinterpret_cast<const char *>(&h), sizeof(h));
  conn.state.append(reinterpret_cast<const char *>(nonce->data()), nonce->size());
  {
    // The dialer may send its messages right after its proof: its end waits for them.
    const std::lock_guard lock(mutex);
    peers[from].handshake_until = Clock::now() + kHelloTime;
  }
  reader.Again(std::move(conn));
}

// The rank whose proof came on @conn (answered by AnswerDialer), if it holds; else the
// connection is logged as dropped.
std::optional<uint32_t> Group::Impl::CheckProof(const HelloReader &reader,
                                                const HelloReader::Hello &conn) {
  Hello h{};
  std::memcpy(&h, conn.state.data(), sizeof(h));
  const std::span<const uint8_t> nonce(
      reinterpret_cast<const uint8_t *>(conn.state.data()) + sizeof(h), sizeof(Nonce));
  const uint32_t from = ntohl(h.from);
  std::string why = bootstrap::CheckProof(std::span<const std::byte>(conn.data), id, h, nonce);
  if (why.empty()) {
    const std::lock_guard lock(mutex);
    if (peers[from].conns[kAccepted].fd.valid()) {
      why = "it connected already";
    }
  }
  if (!why.empty()) {
    {
      const std::lock_guard lock(mutex);
      peers[from].handshake_until = {};
    }
    reader.LogDropped(conn.peer, fmt::format("rank {} not admitted: {}", from, why));
    return std::nullopt;
  }
  return from;
}

Group::Group(std::shared_ptr<Impl> impl, uint64_t space, std::vector<uint32_t> ranks, uint32_t rank)
    : impl_(std::move(impl)), space_(space), ranks_(std::move(ranks)), rank_(rank) {}
Group::~Group() = default;

Expected<std::unique_ptr<Group>> Group::Connect(Listener listener, const UniqueId &id,
                                                uint32_t rank,
                                                const std::vector<std::string> &addresses,
                                                Clock::time_point deadline,
                                                std::optional<TrustList> trust) {
  (void)deadline;  // nothing waits here: connections are made when first needed
  const auto n = static_cast<uint32_t>(addresses.size());
  if (rank >= n || listener.fd() < 0) {
    return Error(HCCL_E_PARA, "rank {} of {} ranks{}", rank, n,
                 listener.fd() < 0 ? " without a listener" : ": no such rank");
  }
  auto list = trust ? Expected<TrustList>(std::move(*trust)) : ProcessTrustList();
  if (!list.ok()) {
    return list.status();
  }
  auto impl = std::make_shared<Impl>();
  impl->id = id;
  impl->trust = std::move(*list);
  impl->rank = rank;
  impl->peers.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    impl->peers[r].address = r == rank ? listener.address() : addresses[r];
    auto addr = ParseEndpoint(addresses[r]);
    if (r != rank && !addr.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "rank {}'s address: {}", r,
                   addresses[r].empty() ? "none (it could not listen)" : addr.status().message());
    }
    impl->peers[r].addr = addr.ok() ? *addr : sockaddr_storage{};
  }
  HelloReader::Options o;
  o.where = fmt::format("bootstrap: rank {} ({})", rank, listener.address());
  o.hello_time = kHelloTime;
  o.max_pending = kMaxPending;
  o.header = sizeof(uint32_t);
  o.size = MessageSize;
  for (uint32_t r = 0; r < n; ++r) {
    if (r != rank) {
      o.known.push_back(impl->peers[r].addr);
    }
  }
  auto reader = HelloReader::Open(listener.fd(), std::move(o));
  if (!reader.ok()) {
    return reader.status();
  }
  impl->listener = std::move(listener);
  Impl *raw = impl.get();
  impl->server = std::thread([raw, r = std::move(*reader)]() mutable { raw->Serve(std::move(r)); });
  LogDebug("bootstrap: rank {} of {} listens on {}; connections are made when first needed", rank,
           n, impl->listener.address());
  std::vector<uint32_t> ranks(n);
  for (uint32_t r = 0; r < n; ++r) {
    ranks[r] = r;
  }
  return std::unique_ptr<Group>(new Group(std::move(impl), 0, std::move(ranks), rank));
}

Expected<std::unique_ptr<Group>> Group::Subgroup(const Group &parent, std::vector<uint32_t> members,
                                                 uint64_t space) {
  const bool sorted =
      std::adjacent_find(members.begin(), members.end(), std::greater_equal<>()) == members.end();
  if (!sorted || members.empty() || members.back() >= parent.size() ||
      !std::binary_search(members.begin(), members.end(), parent.rank())) {
    return Error(HCCL_E_PARA,
                 "a group of ranks {} of a group of {}: not ascending ranks of it including "
                 "its rank {}",
                 RankList(members), parent.size(), parent.rank());
  }
  if (space == 0 || space == parent.space_) {
    return Error(HCCL_E_PARA, "a group of ranks {} of a group of {}: space {:#x} is {}",
                 RankList(members), parent.size(), space,
                 space == 0 ? "the connections' own" : "its parent's");
  }
  const auto rank = static_cast<uint32_t>(
      std::lower_bound(members.begin(), members.end(), parent.rank()) - members.begin());
  for (uint32_t &m : members) {
    m = parent.ranks_[m];
  }
  return std::unique_ptr<Group>(new Group(parent.impl_, space, std::move(members), rank));
}

const std::string &Group::Address(uint32_t r) const {
  return impl_->peers[ranks_[r]].address;
}

std::string Group::Name(uint32_t peer) const {
  return fmt::format("rank {} ({})", peer, impl_->peers[ranks_[peer]].address);
}

Status Group::CheckPeer(uint32_t peer, std::string_view call) const {
  if (peer >= size() || peer == rank_) {
    return Error(HCCL_E_PARA, "{}: peer {} is not another rank of this group (rank {} of {})", call,
                 peer, rank_, size());
  }
  return Status::Ok();
}

Status Group::Send(uint32_t peer, uint32_t tag, std::span<const std::byte> data,
                   Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(CheckPeer(peer, "send"));
  const std::string name = Name(peer);
  if (data.size() > FrameInput::kMaxPayload) {
    return Error(HCCL_E_PARA, "a message of {} bytes to {}: more than 1 MiB", data.size(), name);
  }
  const uint32_t to = ranks_[peer];
  const FrameHeader h = MakeFrameHeader(space_, tag, static_cast<uint32_t>(data.size()));
  const std::lock_guard sending(*impl_->peers[to].sending);
  HZC_RETURN_IF_ERROR(impl_->Reach(to, name, deadline));
  Status st = impl_->Write(to, name, reinterpret_cast<const std::byte *>(&h), sizeof(h), deadline);
  if (st.ok()) {
    st = impl_->Write(to, name, data.data(), data.size(), deadline);
  }
  if (st.code() == HCCL_E_TIMEOUT) {
    // The message may be cut off: what follows on the connection would be garbage (for every
    // view of it).
    const std::lock_guard lock(impl_->mutex);
    impl_->Break(to, HCCL_E_TCP_TRANSFER, "a message to ", " was cut off by a timeout");
  }
  if (st.ok()) {
    traffic_.sent.fetch_add(sizeof(h) + data.size(), std::memory_order_relaxed);
  }
  return st;
}

Expected<Group::Blob> Group::Recv(uint32_t peer, uint32_t tag, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(CheckPeer(peer, "receive"));
  const uint32_t from = ranks_[peer];
  Impl::Peer &p = impl_->peers[from];
  Clock::time_point probe_at = Clock::now() + kProbeAfter;
  std::unique_lock lock(impl_->mutex);
  for (;;) {
    for (Impl::Conn &c : p.conns) {
      if (std::optional<Blob> out = c.input.Take(space_, tag)) {
        traffic_.received.fetch_add(sizeof(FrameHeader) + out->size(), std::memory_order_relaxed);
        return std::move(*out);
      }
    }
    if (p.broken()) {
      return Status(p.broken_code, p.Why(Name(peer)));
    }
    if (Clock::now() >= deadline) {
      return Error(HCCL_E_TIMEOUT, "timed out waiting for a message (tag {}) from {}", tag,
                   Name(peer));
    }
    // Its connections (none yet: wait until one is made, by either side; after kProbeAfter,
    // dial it: a rank that is gone refuses, and the receive fails at once).
    std::array<pollfd, 2> fds{};
    nfds_t n = 0;
    for (const Impl::Conn &c : p.conns) {
      if (c.fd.valid() && !c.ended) {
        fds[n++] = {c.fd.get(), POLLIN, 0};
      }
    }
    const Clock::time_point slice = std::min(deadline, Clock::now() + kRecvSlice);
    if (n == 0 && p.end_code != HCCL_SUCCESS) {
      // Its connections ended, one more is on its way (Pump): wait for it, or for its time.
      impl_->connected.wait_until(lock, slice);
      impl_->Pump(from);
      continue;
    }
    if (n == 0 && Clock::now() >= probe_at) {
      lock.unlock();
      {
        const std::lock_guard sending(*p.sending);
        (void)impl_->Reach(from, Name(peer), deadline);  // a failure breaks the peer, or times out
      }
      lock.lock();
      probe_at = Clock::time_point::max();
      continue;
    }
    if (n == 0) {
      impl_->connected.wait_until(lock, slice);
      continue;
    }
    lock.unlock();
    const int ready = poll(fds.data(), n, RemainingMs(slice));
    lock.lock();
    if (ready < 0 && errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "poll failed: {}", ErrnoString(errno));
    }
    impl_->Pump(from);
  }
}

Expected<std::vector<Group::Blob>> Group::AllGather(std::span<const uint32_t> members, uint32_t tag,
                                                    std::span<const std::byte> mine,
                                                    Clock::time_point deadline,
                                                    std::string_view what) {
  const bool sorted =
      std::adjacent_find(members.begin(), members.end(), std::greater_equal<>()) == members.end();
  if (!sorted || members.empty() || members.back() >= size() ||
      !std::binary_search(members.begin(), members.end(), rank())) {
    return Error(HCCL_E_PARA, "{}: members {} are not ascending ranks of {} including rank {}",
                 what, RankList(members), size(), rank());
  }
  for (uint32_t m : members) {
    if (m == rank()) {
      continue;
    }
    if (Status st = Send(m, tag, mine, deadline); !st.ok()) {
      return Error(st.code(), "{}: {}", what, st.message());
    }
  }
  std::vector<Blob> out;
  for (uint32_t m : members) {
    if (m == rank()) {
      out.emplace_back(mine.begin(), mine.end());
      continue;
    }
    auto blob = Recv(m, tag, deadline);
    if (!blob.ok()) {
      return Error(blob.status().code(), "{}: {}", what, blob.status().message());
    }
    out.push_back(std::move(*blob));
  }
  return out;
}

Expected<std::vector<Group::Blob>> Group::AllGatherFixed(std::span<const uint32_t> members,
                                                         uint32_t tag,
                                                         std::span<const std::byte> mine,
                                                         Clock::time_point deadline,
                                                         std::string_view what) {
  const bool sorted =
      std::adjacent_find(members.begin(), members.end(), std::greater_equal<>()) == members.end();
  if (!sorted || members.empty() || members.back() >= size() ||
      !std::binary_search(members.begin(), members.end(), rank())) {
    return Error(HCCL_E_PARA, "{}: members {} are not ascending ranks of {} including rank {}",
                 what, RankList(members), size(), rank());
  }
  const size_t n = members.size(), b = mine.size();
  if (b == 0 || b * n > FrameInput::kMaxPayload) {
    return Error(HCCL_E_PARA, "{}: {} members of {} bytes each: not 1 byte to 1 MiB in all", what,
                 n, b);
  }
  const size_t me = static_cast<size_t>(std::lower_bound(members.begin(), members.end(), rank()) -
                                        members.begin());
  // have: the messages of members me, me + 1, ... (modulo n), in that order.
  std::vector<std::byte> have(mine.begin(), mine.end());
  Status failed;
  size_t k = 1;
  for (; k < n && failed.ok(); k <<= 1) {
    const size_t count = std::min(k, n - k);
    const uint32_t to = members[(me + n - k) % n], from = members[(me + k) % n];
    failed = Send(to, tag, std::span(have).first(count * b), deadline);
    auto got = failed.ok() ? Recv(from, tag, deadline) : Expected<Blob>(failed);
    if (failed.ok() && !got.ok()) {
      failed = got.status();
    } else if (failed.ok() && got->empty()) {
      failed = Error(HCCL_E_REMOTE, "{} failed this exchange (see its log)", Name(from));
    } else if (failed.ok() && got->size() != count * b) {
      failed = Error(HCCL_E_REMOTE, "{} sent {} bytes where {} were due", Name(from), got->size(),
                     count * b);
    } else if (failed.ok()) {
      have.insert(have.end(), got->begin(), got->end());
    }
  }
  if (!failed.ok()) {
    // The members this one would have sent to in the rounds left wait for it: an empty message
    // fails their exchange at once (and theirs, in turn, those they would have sent to).
    for (; k < n; k <<= 1) {
      (void)Send(members[(me + n - k) % n], tag, {}, deadline);
    }
    return Error(failed.code(), "{}: {}", what, failed.message());
  }
  std::vector<Blob> out(n);
  for (size_t j = 0; j < n; ++j) {
    const std::byte *at = have.data() + ((j + n - me) % n) * b;
    out[j].assign(at, at + b);
  }
  return out;
}

std::string Group::Broken(uint32_t peer) {
  if (Status st = CheckPeer(peer, "Broken"); !st.ok()) {
    return st.message();
  }
  const uint32_t p = ranks_[peer];
  const std::lock_guard lock(impl_->mutex);
  impl_->Pump(p);
  return impl_->peers[p].Why(Name(peer));
}

}  // namespace hzc::bootstrap
