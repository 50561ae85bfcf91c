// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/group.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "base/errno_string.h"
#include "base/fd_limit.h"
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
  struct Peer {
    UniqueFd fd;
    std::string address;
    Nonce nonce{};  // of this rank's hello to it (a higher rank)
    // What it sent, cut into frames (bootstrap/frames.h): a group holds at most
    // (ranks - 1) * FrameInput::kMaxQueuedBytes of them, besides what the sockets hold.
    FrameInput input;
    // Why the connection is unusable (HCCL_SUCCESS while it works), said around the peer's
    // name: each Group names the peer by its own rank numbers.
    HcclResult broken_code = HCCL_SUCCESS;
    std::string broken_before, broken_after;
    // Held for a whole frame sent to the peer, so that frames of two threads never mix.
    std::unique_ptr<std::mutex> sending = std::make_unique<std::mutex>();

    bool broken() const { return broken_code != HCCL_SUCCESS; }
    // Why the connection is unusable, naming the peer @name; "" while it works.
    std::string Why(std::string_view name) const {
      return broken() ? broken_before + std::string(name) + broken_after : "";
    }
  };

  UniqueId id{};  // the key the ranks prove
  TrustList trust;
  uint32_t rank = 0;
  std::vector<Peer> peers;  // by rank; this rank's entry has no connection
  // Guards every peer's input and broken state, and the reads and writes of the
  // sockets once the group is connected; never held while waiting.
  std::mutex mutex;

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
  // Connect's steps.
  Status DialHigher(const std::vector<sockaddr_storage> &addrs, Clock::time_point deadline);
  Status AcceptLower(const Listener &listener, Clock::time_point deadline);
  void AnswerLower(HelloReader &reader, HelloReader::Hello conn);
  std::optional<uint32_t> CheckProof(const HelloReader &reader, const HelloReader::Hello &conn);
  Status AwaitAnswer(uint32_t r, Clock::time_point deadline);
  Status AwaitAnswers(Clock::time_point deadline);
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
  const sockaddr unspec{.sa_family = AF_UNSPEC, .sa_data = {}};
  if (connect(peer.fd.get(), &unspec, sizeof(unspec)) != 0) {
    (void)shutdown(peer.fd.get(), SHUT_RDWR);
  }
  peer.input.Clear();
}

// Read what @p has sent, without waiting, into its queue; notes the end of the connection.
void Group::Impl::Pump(uint32_t p) {
  Peer &peer = peers[p];
  std::byte buf[64 * 1024];
  while (!peer.broken()) {
    const ssize_t n = recv(peer.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      if (std::string why = peer.input.Add({buf, static_cast<size_t>(n)}); !why.empty()) {
        Reject(p, std::move(why));
      }
    } else if (n == 0) {
      // A message cut off by the end is not received: its bytes so far are dropped.
      Break(p, HCCL_E_REMOTE, "",
            peer.input.partial() == 0
                ? std::string(" closed the connection")
                : fmt::format(" closed the connection in the middle of a message "
                              "({} bytes of it arrived)",
                              peer.input.partial()));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      Break(p, err == ECONNRESET ? HCCL_E_REMOTE : HCCL_E_TCP_TRANSFER, "",
            fmt::format(" {}: {}", err == ECONNRESET ? "closed the connection" : "cannot be read",
                        ErrnoString(err)));
    }
  }
}

// Send @len bytes at @data to @to, reading meanwhile what every peer sends (so that ranks
// sending each other more than their sockets hold do not wait for each other forever).
Status Group::Impl::Write(uint32_t to, std::string_view name, const std::byte *data, size_t len,
                          Clock::time_point deadline) {
  std::vector<pollfd> fds;
  std::vector<uint32_t> who;
  std::unique_lock lock(mutex);
  while (len > 0 && !peers[to].broken()) {
    fds.clear();
    who.clear();
    for (uint32_t p = 0; p < size(); ++p) {
      if (p != rank && !peers[p].broken()) {
        fds.push_back({peers[p].fd.get(), static_cast<short>(POLLIN | (p == to ? POLLOUT : 0)), 0});
        who.push_back(p);
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
      if (who[i] != to || (fds[i].revents & POLLOUT) == 0 || peers[to].broken()) {
        continue;
      }
      const ssize_t k = send(peers[to].fd.get(), data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
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

// Connect to every higher rank and send it the handshake.
Status Group::Impl::DialHigher(const std::vector<sockaddr_storage> &addrs,
                               Clock::time_point deadline) {
  for (uint32_t r = rank + 1; r < size(); ++r) {
    auto fd = Dial(addrs[r], deadline);
    if (!fd.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "cannot connect to {}: {}", Name(r), fd.status().message());
    }
    auto nonce = RandomNonce();
    if (!nonce.ok()) {
      return nonce.status();
    }
    peers[r].nonce = *nonce;
    const Hello h = MakeHello(id, rank, r, size(), *nonce);
    if (Status st = SendAll(fd->get(), &h, sizeof(h), deadline); !st.ok()) {
      return Error(st.code(), "handshake with {}: {}", Name(r), st.message());
    }
    SetNoDelay(fd->get());
    peers[r].fd = std::move(*fd);
  }
  return Status::Ok();
}

// Accept the connection of every lower rank (until @deadline: Connect names those that did not
// come): answer its handshake (AnswerLower), then check its proof (CheckProof). Handshakes and
// proofs are read all at once (HelloReader): a connection that is not one of them (another
// communicator's, a stranger's, a stray, silent or garbled one, one from an address off the trust
// list) is dropped, logged at WARN, and never delays the others. HCCL_E_SYSCALL when the listener
// cannot be served.
Status Group::Impl::AcceptLower(const Listener &listener, Clock::time_point deadline) {
  HelloReader::Options o;
  o.where = fmt::format("bootstrap: rank {} ({})", rank, listener.address());
  o.hello_time = kHelloTime;
  o.max_pending = kMaxPending;
  o.header = sizeof(uint32_t);
  o.size = MessageSize;
  auto reader = HelloReader::Open(listener.fd(), std::move(o));
  if (!reader.ok()) {
    return reader.status();
  }
  uint32_t accepted = 0;
  while (accepted < rank) {
    auto next = reader->Next(deadline);
    if (!next.ok()) {
      return next.status();
    }
    if (!next->has_value()) {
      return Status::Ok();
    }
    HelloReader::Hello &conn = **next;
    if (conn.state.empty()) {
      AnswerLower(*reader, std::move(conn));
      continue;
    }
    if (const auto from = CheckProof(*reader, conn)) {
      SetNoDelay(conn.fd.get());
      peers[*from].fd = std::move(conn.fd);
      ++accepted;
    }
  }
  return Status::Ok();
}

// A connection's handshake: dropped (logged) unless it is a lower rank's of this communicator from
// an address on the trust list; else answered with this rank's nonce and proof and read again for
// the lower rank's proof (its hello and this rank's nonce kept in its state).
void Group::Impl::AnswerLower(HelloReader &reader, HelloReader::Hello conn) {
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
  if (why.empty() && (from >= rank || peers[from].fd.valid())) {
    why = fmt::format("rank {} connects to higher ranks only, once", from);
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
  reader.Again(std::move(conn));
}

// The lower rank whose proof came on @conn (answered by AnswerLower), if it holds; else the
// connection is logged as dropped.
std::optional<uint32_t> Group::Impl::CheckProof(const HelloReader &reader,
                                                const HelloReader::Hello &conn) {
  Hello h{};
  std::memcpy(&h, conn.state.data(), sizeof(h));
  const std::span<const uint8_t> nonce(
      reinterpret_cast<const uint8_t *>(conn.state.data()) + sizeof(h), sizeof(Nonce));
  const uint32_t from = ntohl(h.from);
  std::string why = bootstrap::CheckProof(std::span<const std::byte>(conn.data), id, h, nonce);
  if (why.empty() && peers[from].fd.valid()) {
    why = "it connected already";
  }
  if (!why.empty()) {
    reader.LogDropped(conn.peer, fmt::format("rank {} not admitted: {}", from, why));
    return std::nullopt;
  }
  return from;
}

// Receive the answer of every higher rank to this rank's handshake as it comes (AwaitAnswer). A
// rank that did not answer by @deadline keeps no connection (Connect names it). Runs beside
// AcceptLower (it touches only the higher ranks' entries): a rank proves itself to the ranks above
// it whatever the ranks below it do, so that one missing rank is the only one named missing.
Status Group::Impl::AwaitAnswers(Clock::time_point deadline) {
  std::vector<uint32_t> waiting;
  for (uint32_t r = rank + 1; r < size(); ++r) {
    waiting.push_back(r);
  }
  std::vector<pollfd> fds;
  while (!waiting.empty()) {
    fds.clear();
    for (uint32_t r : waiting) {
      fds.push_back({peers[r].fd.get(), POLLIN, 0});
    }
    const int n = poll(fds.data(), fds.size(), RemainingMs(deadline));
    if (n < 0 && errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "poll failed: {}", ErrnoString(errno));
    }
    if (n == 0) {
      break;
    }
    std::vector<uint32_t> still;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) {
        still.push_back(waiting[i]);
      } else {
        HZC_RETURN_IF_ERROR(AwaitAnswer(waiting[i], deadline));
      }
    }
    waiting = std::move(still);
  }
  for (uint32_t r : waiting) {
    peers[r].fd.reset();
  }
  return Status::Ok();
}

// Receive higher rank @r's answer to this rank's handshake (it has come, or is coming), check its
// proof and send this rank's (at once: @r waits for it, within its own 2 s).
Status Group::Impl::AwaitAnswer(uint32_t r, Clock::time_point deadline) {
  {
    Answer a{};
    Status st = RecvAll(peers[r].fd.get(), &a, sizeof(a), deadline);
    if (st.code() == HCCL_E_TIMEOUT) {
      peers[r].fd.reset();
      return Status::Ok();
    }
    if (!st.ok()) {
      return Error(st.code(), "{} did not answer the handshake: {}", Name(r), st.message());
    }
    const Hello mine = MakeHello(id, rank, r, size(), peers[r].nonce);
    const std::string why = CheckAnswer(a, id, rank, r, size(), mine);
    if (!why.empty()) {
      return Error(HCCL_E_TCP_CONNECT, "{} is not rank {} of this communicator: {}", Name(r), r,
                   why);
    }
    const ProofMessage m = MakeProof(id, mine, std::span(a.hello.nonce));
    if (st = SendAll(peers[r].fd.get(), &m, sizeof(m), deadline); !st.ok()) {
      return Error(st.code(), "handshake with {}: {}", Name(r), st.message());
    }
  }
  return Status::Ok();
}

Group::Group(std::shared_ptr<Impl> impl, uint64_t space, std::vector<uint32_t> ranks, uint32_t rank)
    : impl_(std::move(impl)), space_(space), ranks_(std::move(ranks)), rank_(rank) {}
Group::~Group() = default;

Expected<std::unique_ptr<Group>> Group::Connect(Listener listener, const UniqueId &id,
                                                uint32_t rank,
                                                const std::vector<std::string> &addresses,
                                                Clock::time_point deadline,
                                                std::optional<TrustList> trust) {
  const auto n = static_cast<uint32_t>(addresses.size());
  if (rank >= n || listener.fd() < 0) {
    return Error(HCCL_E_PARA, "rank {} of {} ranks{}", rank, n,
                 listener.fd() < 0 ? " without a listener" : ": no such rank");
  }
  HZC_RETURN_IF_ERROR(ReserveDescriptors(
      n - 1, fmt::format("rank {}'s connections to the other {} ranks", rank, n - 1)));
  auto list = trust ? Expected<TrustList>(std::move(*trust)) : ProcessTrustList();
  if (!list.ok()) {
    return list.status();
  }
  auto impl = std::make_unique<Impl>();
  impl->id = id;
  impl->trust = std::move(*list);
  impl->rank = rank;
  impl->peers.resize(n);
  std::vector<sockaddr_storage> addrs(n);
  for (uint32_t r = 0; r < n; ++r) {
    impl->peers[r].address = r == rank ? listener.address() : addresses[r];
    auto addr = ParseEndpoint(addresses[r]);
    if (r != rank && !addr.ok()) {
      return Error(HCCL_E_TCP_CONNECT, "rank {}'s address: {}", r,
                   addresses[r].empty() ? "none (it could not listen)" : addr.status().message());
    }
    addrs[r] = addr.ok() ? *addr : sockaddr_storage{};
  }
  HZC_RETURN_IF_ERROR(impl->DialHigher(addrs, deadline));
  auto answers = std::async(std::launch::async, [&] { return impl->AwaitAnswers(deadline); });
  const Status accepted = impl->AcceptLower(listener, deadline);
  const Status answered = answers.get();
  HZC_RETURN_IF_ERROR(answered);
  HZC_RETURN_IF_ERROR(accepted);
  const std::string missing =
      RanksWhere(n, [&](uint32_t r) { return r != rank && !impl->peers[r].fd.valid(); });
  if (!missing.empty()) {
    return Error(HCCL_E_TIMEOUT, "rank {} ({}): rank(s) {} of {} did not connect in time", rank,
                 listener.address(), missing, n);
  }
  LogDebug("bootstrap: rank {} ({}) connected to the other {} rank(s)", rank, listener.address(),
           n - 1);
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
  return st;
}

Expected<Group::Blob> Group::Recv(uint32_t peer, uint32_t tag, Clock::time_point deadline) {
  HZC_RETURN_IF_ERROR(CheckPeer(peer, "receive"));
  const uint32_t from = ranks_[peer];
  Impl::Peer &p = impl_->peers[from];
  std::unique_lock lock(impl_->mutex);
  for (;;) {
    if (std::optional<Blob> out = p.input.Take(space_, tag)) {
      return std::move(*out);
    }
    if (p.broken()) {
      return Status(p.broken_code, p.Why(Name(peer)));
    }
    if (Clock::now() >= deadline) {
      return Error(HCCL_E_TIMEOUT, "timed out waiting for a message (tag {}) from {}", tag,
                   Name(peer));
    }
    lock.unlock();
    auto ready = WaitFd(p.fd.get(), POLLIN, std::min(deadline, Clock::now() + kRecvSlice));
    lock.lock();
    if (!ready.ok()) {
      return ready.status();
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
