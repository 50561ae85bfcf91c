// SPDX-License-Identifier: Apache-2.0
#include "coll/control.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <thread>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc::coll {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x687a6363;  // "hzcc"
constexpr size_t kPage = 4096;
// Spin iterations before sleeping: short, because ranks often outnumber cores.
constexpr int kSpins = 256;
// A sleeping waiter wakes at least this often to check for aborts, dead peers and deadlines.
constexpr auto kSleepSlice = std::chrono::milliseconds(10);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

int FutexWait(std::atomic<uint32_t> *word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{.tv_sec = static_cast<time_t>(timeout.count() / 1000000000),
              .tv_nsec = static_cast<long>(timeout.count() % 1000000000)};
  // Not FUTEX_PRIVATE_FLAG: the word lives in a mapping shared between processes.
  return static_cast<int>(::syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT,
                                    expected, &ts, nullptr, 0));
}

void FutexWake(std::atomic<uint32_t> *word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

sockaddr_un SocketAddress(const std::string &name, socklen_t *len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: sun_path[0] = 0; no file to clean up, gone with the socket.
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

Status CheckPeerUid(int fd, const char *who) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Error(HCCL_E_SYSCALL, "control area: SO_PEERCRED of {}: {}", who, ErrnoString(errno));
  }
  if (cred.uid != geteuid()) {
    return Error(HCCL_E_REMOTE, "control area: {} (pid {}) runs as uid {}, not {}", who, cred.pid,
                 cred.uid, geteuid());
  }
  return Status::Ok();
}

int RemainingMs(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX));
}

// A mapping that is unmapped unless released.
struct Mapping {
  void *p = MAP_FAILED;
  size_t len = 0;
  ~Mapping() {
    if (p != MAP_FAILED) {
      munmap(p, len);
    }
  }
  void *release() { return std::exchange(p, MAP_FAILED); }
};

}  // namespace

struct ControlArea::Header {
  uint32_t magic;
  uint32_t nranks;
  uint64_t bytes;
  uint64_t staging_offset;
  uint64_t staging_bytes;
  // 0, or (its HcclResult << 16) | (1 + the rank that aborted first)
  std::atomic<uint32_t> abort;
};

struct alignas(64) ControlArea::Slot {
  std::atomic<uint32_t> step;     // futex word
  std::atomic<uint32_t> waiters;  // ranks about to sleep on @step
  uint32_t pid;
  uint32_t reserved;
  alignas(64) CallDesc desc[2];  // by call parity
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);

ControlArea::ControlArea(void *base, size_t bytes, uint32_t rank, uint32_t nranks)
    : base_(base), bytes_(bytes), rank_(rank), nranks_(nranks) {
  header_ = static_cast<Header *>(base);
  staging_ = static_cast<uint8_t *>(base) + header_->staging_offset;
  staging_bytes_ = header_->staging_bytes;
  pidfds_.resize(nranks);
}

ControlArea::~ControlArea() {
  munmap(base_, bytes_);
}

ControlArea::Slot &ControlArea::slot(uint32_t r) const {
  return reinterpret_cast<Slot *>(static_cast<uint8_t *>(base_) + kPage)[r];
}

Expected<std::unique_ptr<ControlArea>> ControlArea::Open(const Options &o) {
  const Clock::time_point deadline = Clock::now() + o.connect_timeout;
  const size_t slots = (o.nranks * sizeof(Slot) + kPage - 1) / kPage * kPage;
  Mapping map;
  socklen_t addr_len = 0;
  const sockaddr_un addr = SocketAddress(o.name, &addr_len);

  if (o.rank == 0) {
    const size_t staging = (o.staging_bytes + kPage - 1) / kPage * kPage;
    map.len = kPage + slots + staging;
    UniqueFd mem(memfd_create("hzc-coll", MFD_CLOEXEC));
    if (!mem.valid()) {
      return Error(HCCL_E_SYSCALL, "control area: memfd_create: {}", ErrnoString(errno));
    }
    if (ftruncate(mem.get(), static_cast<off_t>(map.len)) != 0) {
      return Error(HCCL_E_MEMORY, "control area: ftruncate to {} bytes: {}", map.len,
                   ErrnoString(errno));
    }
    map.p = mmap(nullptr, map.len, PROT_READ | PROT_WRITE, MAP_SHARED, mem.get(), 0);
    if (map.p == MAP_FAILED) {
      return Error(HCCL_E_MEMORY, "control area: mmap of {} bytes: {}", map.len,
                   ErrnoString(errno));
    }
    auto *h = new (map.p) Header{};
    h->magic = kMagic;
    h->nranks = o.nranks;
    h->bytes = map.len;
    h->staging_offset = kPage + slots;
    h->staging_bytes = staging;
    for (uint32_t r = 0; r < o.nranks; ++r) {
      new (static_cast<uint8_t *>(map.p) + kPage + r * sizeof(Slot)) Slot{};
    }
    if (o.nranks > 1) {
      UniqueFd listener(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
      if (!listener.valid()) {
        return Error(HCCL_E_SYSCALL, "control area: socket: {}", ErrnoString(errno));
      }
      if (bind(listener.get(), reinterpret_cast<const sockaddr *>(&addr), addr_len) != 0 ||
          listen(listener.get(), static_cast<int>(o.nranks)) != 0) {
        return Error(HCCL_E_SYSCALL, "control area: bind/listen on @{}: {}", o.name,
                     ErrnoString(errno));
      }
      std::vector<bool> served(o.nranks, false);
      served[0] = true;
      for (uint32_t n = 1; n < o.nranks;) {
        pollfd p{.fd = listener.get(), .events = POLLIN, .revents = 0};
        const int ready = poll(&p, 1, RemainingMs(deadline));
        if (ready == 0) {
          std::string missing;
          for (uint32_t r = 0; r < o.nranks; ++r) {
            if (!served[r]) {
              missing += (missing.empty() ? "" : ",") + std::to_string(r);
            }
          }
          return Error(HCCL_E_TIMEOUT,
                       "control area: rank(s) {} of {} did not make their first collective call "
                       "within HCCL_CONNECT_TIMEOUT",
                       missing, o.nranks);
        }
        if (ready < 0) {
          if (errno == EINTR) {
            continue;
          }
          return Error(HCCL_E_SYSCALL, "control area: poll: {}", ErrnoString(errno));
        }
        UniqueFd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!conn.valid()) {
          continue;
        }
        uint32_t peer = UINT32_MAX;
        if (!CheckPeerUid(conn.get(), "a connecting rank").ok() ||
            recv(conn.get(), &peer, sizeof(peer), 0) != sizeof(peer) || peer >= o.nranks ||
            served[peer]) {
          LogWarn("control area: refused a connection on @{} (rank {})", o.name, peer);
          continue;
        }
        const uint64_t len = map.len;
        char control[CMSG_SPACE(sizeof(int))] = {};
        iovec iov{.iov_base = const_cast<uint64_t *>(&len), .iov_len = sizeof(len)};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        const int fd = mem.get();
        std::memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
        if (sendmsg(conn.get(), &msg, MSG_NOSIGNAL) != sizeof(len)) {
          return Error(HCCL_E_SYSCALL, "control area: sending the area to rank {}: {}", peer,
                       ErrnoString(errno));
        }
        served[peer] = true;
        ++n;
      }
    }
  } else {
    UniqueFd conn;
    for (;;) {
      conn.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
      if (!conn.valid()) {
        return Error(HCCL_E_SYSCALL, "control area: socket: {}", ErrnoString(errno));
      }
      if (connect(conn.get(), reinterpret_cast<const sockaddr *>(&addr), addr_len) == 0) {
        break;
      }
      if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR) {
        return Error(HCCL_E_SYSCALL, "control area: connect to rank 0 at @{}: {}", o.name,
                     ErrnoString(errno));
      }
      if (Clock::now() >= deadline) {
        return Error(HCCL_E_TIMEOUT,
                     "control area: rank 0 did not make its first collective call within "
                     "HCCL_CONNECT_TIMEOUT");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    HZC_RETURN_IF_ERROR(CheckPeerUid(conn.get(), "rank 0"));
    if (send(conn.get(), &o.rank, sizeof(o.rank), MSG_NOSIGNAL) != sizeof(o.rank)) {
      return Error(HCCL_E_SYSCALL, "control area: sending to rank 0: {}", ErrnoString(errno));
    }
    pollfd p{.fd = conn.get(), .events = POLLIN, .revents = 0};
    if (poll(&p, 1, RemainingMs(deadline)) <= 0) {
      return Error(HCCL_E_TIMEOUT, "control area: no answer from rank 0 in time");
    }
    uint64_t len = 0;
    char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{.iov_base = &len, .iov_len = sizeof(len)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t got = recvmsg(conn.get(), &msg, MSG_CMSG_CLOEXEC);
    cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (got != sizeof(len) || cm == nullptr || cm->cmsg_type != SCM_RIGHTS) {
      return Error(HCCL_E_REMOTE, "control area: rank 0 closed the connection without the area");
    }
    int raw = -1;
    std::memcpy(&raw, CMSG_DATA(cm), sizeof(raw));
    UniqueFd mem(raw);
    map.len = len;
    map.p = mmap(nullptr, map.len, PROT_READ | PROT_WRITE, MAP_SHARED, mem.get(), 0);
    if (map.p == MAP_FAILED) {
      return Error(HCCL_E_MEMORY, "control area: mmap of {} bytes: {}", map.len,
                   ErrnoString(errno));
    }
    const auto *h = static_cast<const Header *>(map.p);
    if (h->magic != kMagic || h->nranks != o.nranks || h->bytes != len) {
      return Error(HCCL_E_INTERNAL, "control area: rank 0's area does not match ({} ranks)",
                   h->nranks);
    }
  }
  const size_t len = map.len;
  std::unique_ptr<ControlArea> area(new ControlArea(map.release(), len, o.rank, o.nranks));
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
    pidfds_[r].reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfds_[r].valid()) {
      if (errno == ESRCH) {
        return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", r, pid);
      }
      LogWarn(
          "control area: pidfd_open of rank {} (pid {}): {}; its death is noticed only by "
          "the timeout",
          r, pid, ErrnoString(errno));
    }
  }
  return Status::Ok();
}

void ControlArea::Post(const CallDesc &d) {
  slot(rank_).desc[d.seq & 1] = d;
}

CallDesc ControlArea::Posted(uint32_t r, uint64_t seq) const {
  return slot(r).desc[seq & 1];
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
  }
}

Status ControlArea::CheckPeers() const {
  std::vector<pollfd> fds;
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < nranks_; ++r) {
    if (pidfds_[r].valid()) {
      fds.push_back({.fd = pidfds_[r].get(), .events = POLLIN, .revents = 0});
      ranks.push_back(r);
    }
  }
  if (fds.empty() || poll(fds.data(), fds.size(), 0) <= 0) {
    return Status::Ok();
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) {
      return Error(HCCL_E_REMOTE, "rank {} (pid {}) died", ranks[i], slot(ranks[i]).pid);
    }
  }
  return Status::Ok();
}

Status ControlArea::WaitStep(uint32_t r, uint32_t target, Clock::time_point deadline,
                             const char *what) {
  Slot &s = slot(r);
  for (int i = 0; i < kSpins; ++i) {
    if (Reached(s.step.load(std::memory_order_acquire), target)) {
      return Status::Ok();
    }
    CpuRelax();
  }
  for (;;) {
    HZC_RETURN_IF_ERROR(CheckAbort());
    s.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = s.step.load(std::memory_order_seq_cst);
    if (!Reached(v, target)) {
      const auto left = deadline - Clock::now();
      FutexWait(
          &s.step, v,
          std::clamp<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(0), kSleepSlice));
    }
    s.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (Reached(s.step.load(std::memory_order_acquire), target)) {
      return Status::Ok();
    }
    HZC_RETURN_IF_ERROR(CheckAbort());
    HZC_RETURN_IF_ERROR(CheckPeers());
    if (Clock::now() >= deadline) {
      std::string missing;
      for (uint32_t q = 0; q < nranks_; ++q) {
        if (!Reached(slot(q).step.load(std::memory_order_acquire), target)) {
          missing += (missing.empty() ? "" : ",") + std::to_string(q);
        }
      }
      return Error(HCCL_E_TIMEOUT, "rank(s) {} of {} did not reach {} in time", missing, nranks_,
                   what);
    }
  }
}

Status ControlArea::Barrier(Clock::time_point deadline, const char *what) {
  Slot &mine = slot(rank_);
  ++step_;
  mine.step.store(step_, std::memory_order_seq_cst);
  if (mine.waiters.load(std::memory_order_seq_cst) != 0) {
    FutexWake(&mine.step);
  }
  for (uint32_t r = 0; r < nranks_; ++r) {
    if (r != rank_) {
      HZC_RETURN_IF_ERROR(WaitStep(r, step_, deadline, what));
    }
  }
  return CheckAbort();
}

}  // namespace hzc::coll
