// SPDX-License-Identifier: Apache-2.0
#include "transport/memfd_directory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/ranges.h>

#include "base/config.h"
#include "base/death_word.h"
#include "base/errno_string.h"
#include "base/futex.h"
#include "base/log.h"
#include "base/process_id.h"
#include "base/shared_memfd.h"
#include "base/unique_fd.h"
#include "base/unique_mapping.h"
#include "bootstrap/peer_process.h"
#include "transport/memfd_layout.h"

namespace hzc::transport {

namespace {

using memfd::DirAck;
using memfd::DirAct;
using memfd::Directory;
using memfd::DirRange;
using memfd::DirSlot;
using memfd::kActs;
using memfd::kDirBytes;
using memfd::kMagic;
using memfd::kMailboxBytes;
using memfd::kMailboxMagic;
using memfd::kRanges;
using memfd::kSlots;
using memfd::Mailbox;

// A directory's: peers map it read-only (memfd_layout.h). A mailbox's: peers write it.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
constexpr int kMailboxSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr const char *kDirName = "hzc-directory";
constexpr const char *kMailboxName = "hzc-mailbox";

template <typename T>
std::atomic_ref<T> At(T &word) {
  return std::atomic_ref<T>(word);
}

// A consistent copy of a directory's ranges and activations (seqlock read), or nothing when
// the writer kept it busy.
struct Snapshot {
  uint64_t generation = 0;
  std::vector<DirRange> ranges;
  std::vector<DirAct> acts;  // sorted by va
};

std::optional<Snapshot> Read(Directory *d) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    Snapshot s;
    s.generation = At(d->generation).load(std::memory_order_acquire);
    if (s.generation % 2 != 0) {
      std::this_thread::yield();
      continue;
    }
    const uint32_t nr = std::min<uint32_t>(At(d->nranges).load(), kRanges);
    const uint32_t na = std::min<uint32_t>(At(d->nacts).load(), kActs);
    s.ranges.assign(d->ranges, d->ranges + nr);
    s.acts.assign(d->acts, d->acts + na);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (At(d->generation).load(std::memory_order_relaxed) == s.generation) {
      return s;
    }
  }
  return std::nullopt;
}

// Map @fd of pid @pid, checked: a memfd of @len bytes sealed with @seals (else it is no memory
// @what: HCCL_E_REMOTE, the peer's fault), not inherited by fork; read-only unless @writable.
Expected<UniqueMapping> MapShared(int fd, pid_t pid, const char *what, size_t len, int seals,
                                  bool writable) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(len) ||
      ::fcntl(fd, F_GET_SEALS) != seals) {
    return Error(HCCL_E_REMOTE, "the descriptor of pid {} is not a memory {}", pid, what);
  }
  auto m = UniqueMapping::Map(len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd);
  if (!m.valid()) {
    return Error(HCCL_E_MEMORY, "mapping the memory {} of pid {}: {}", what, pid,
                 ErrnoString(errno));
  }
  if (::madvise(m.get(), m.size(), MADV_DONTFORK) != 0) {
    return Error(HCCL_E_SYSCALL, "madvise(MADV_DONTFORK) of the memory {} of pid {}: {}", what, pid,
                 ErrnoString(errno));
  }
  return m;
}

// Map the directory @fd of pid @pid (checked: size, seals, owner), read-only.
Expected<UniqueMapping> MapDirectory(int fd, pid_t pid) {
  auto m = MapShared(fd, pid, "directory", kDirBytes, kSeals, false);
  if (m.ok() && (m->as<Directory>()->magic != kMagic ||
                 m->as<Directory>()->owner != static_cast<uint32_t>(pid))) {
    return Error(HCCL_E_REMOTE, "the descriptor of pid {} is not a memory directory", pid);
  }
  return m;
}

// Map the mailbox @fd of pid @pid (checked: size, seals, owner), read-write.
Expected<UniqueMapping> MapMailbox(int fd, pid_t pid) {
  auto m = MapShared(fd, pid, "mailbox", kMailboxBytes, kMailboxSeals, true);
  if (m.ok() && (m->as<Mailbox>()->magic != kMailboxMagic ||
                 m->as<Mailbox>()->owner != static_cast<uint32_t>(pid))) {
    return Error(HCCL_E_REMOTE, "the descriptor of pid {} is not a memory mailbox", pid);
  }
  return m;
}

// The acknowledgement that directory @d (mapped) holds of owner @owner, or nothing.
std::optional<uint64_t> AckedIn(Directory *d, pid_t owner) {
  for (DirAck &a : d->acks) {
    if (static_cast<pid_t>(At(a.owner).load(std::memory_order_acquire)) == owner) {
      return At(a.acked).load(std::memory_order_acquire);
    }
  }
  return std::nullopt;
}

// A new memfd @name of @len bytes, sealed with @seals except F_SEAL_FUTURE_WRITE and
// F_SEAL_SEAL (the caller adds them once it has mapped it), mapped read-write.
Expected<SharedMemfd> MakeSealable(const char *name, size_t len, int seals) {
  UniqueFd fd(static_cast<int>(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!fd.valid()) {
    return Error(HCCL_E_SYSCALL, "memfd_create of the memory {}: {}", name, ErrnoString(errno));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(len)) != 0 ||
      ::fcntl(fd.get(), F_ADD_SEALS, seals & ~(F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)) != 0) {
    return Error(HCCL_E_SYSCALL, "sizing the memory {}: {}", name, ErrnoString(errno));
  }
  auto m = UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get());
  if (!m.valid()) {
    return Error(HCCL_E_MEMORY, "mapping the memory {}: {}", name, ErrnoString(errno));
  }
  // A forked child publishes its own and cannot write this one.
  if (::madvise(m.get(), len, MADV_DONTFORK) != 0) {
    return Error(HCCL_E_SYSCALL, "madvise(MADV_DONTFORK) of the memory {}: {}", name,
                 ErrnoString(errno));
  }
  return SharedMemfd{std::move(fd), std::move(m)};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Owner side

struct MemfdExport::State {
  struct Act {
    size_t size = 0;
    uint64_t cookie = 0;
    uint64_t offset = 0;
    UniqueFd fd;
    uint32_t serial = 0;
  };
  // A peer: its directory (its acknowledgements, its doorbell), mapped read-only.
  struct Rung {
    bootstrap::PeerProcess process;
    UniqueMapping dir;
  };
  UniqueFd fd;
  UniqueMapping page;
  UniqueFd mailbox_fd;
  UniqueMapping mailbox;
  std::mutex mutex;  // serialises changes and withdrawals
  std::map<uintptr_t, size_t> ranges;
  std::map<uintptr_t, Act> acts;
  std::map<pid_t, Rung> rung;
  uint32_t activations = 0;  // made: the next one's serial
  std::chrono::milliseconds timeout{10000};

  Directory *dir() const { return page.as<Directory>(); }
  DirSlot *slots() const { return mailbox.as<Mailbox>()->slots; }
  void Publish();
  // The peer @pid (its doorbell mapped once @dir_fd names it), or nullptr when it is gone.
  Rung *Find(pid_t pid, int dir_fd);
  void Free(DirSlot &s, pid_t pid);
  // Forget the peers that have detached.
  void Prune();
  Status Revoke(uint64_t gen);
};

void MemfdExport::State::Publish() {
  Directory *d = dir();
  const uint64_t g = At(d->generation).load();
  At(d->generation).store(g + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  size_t i = 0;
  for (const auto &[base, size] : ranges) {
    d->ranges[i++] = DirRange{.base = base, .size = size};
  }
  At(d->nranges).store(static_cast<uint32_t>(i));
  i = 0;
  for (const auto &[va, a] : acts) {
    d->acts[i++] = DirAct{.va = va,
                          .size = a.size,
                          .cookie = a.cookie,
                          .offset = a.offset,
                          .fd = a.fd.get(),
                          .serial = a.serial};
  }
  At(d->nacts).store(static_cast<uint32_t>(i));
  At(d->generation).store(g + 2, std::memory_order_release);
}

MemfdExport::State::Rung *MemfdExport::State::Find(pid_t pid, int dir_fd) {
  auto it = rung.find(pid);
  if (it == rung.end()) {
    auto process = bootstrap::PeerProcess::Open(pid);
    if (!process.ok()) {
      return nullptr;  // gone already (reaped)
    }
    it = rung.emplace(pid, Rung{.process = std::move(*process), .dir = {}}).first;
  }
  Rung &r = it->second;
  if (!r.dir.valid() && dir_fd >= 0) {
    auto taken = r.process.TakeFd(dir_fd);
    auto m = taken.ok() ? MapDirectory(taken->get(), pid) : Expected<UniqueMapping>(taken.status());
    if (m.ok()) {
      r.dir = std::move(*m);
    } else {
      LogDebug("memfd transport: cannot read pid {} yet: {}", pid, m.status().message());
    }
  }
  return &r;
}

void MemfdExport::State::Free(DirSlot &s, pid_t pid) {
  At(s.dir_fd).store(-1);
  uint32_t expected = static_cast<uint32_t>(pid);
  At(s.pid).compare_exchange_strong(expected, 0);
  rung.erase(pid);
}

void MemfdExport::State::Prune() {
  for (auto it = rung.begin(); it != rung.end();) {
    bool attached = false;
    for (size_t i = 0; i < kSlots; ++i) {
      attached = attached || static_cast<pid_t>(At(slots()[i].pid).load()) == it->first;
    }
    it = attached ? std::next(it) : rung.erase(it);
  }
}

Status MemfdExport::State::Revoke(uint64_t gen) {
  Directory *d = dir();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const uint32_t ack = At(d->ack).load(std::memory_order_acquire);
    std::vector<pid_t> pending;
    for (size_t i = 0; i < kSlots; ++i) {
      DirSlot &s = slots()[i];
      const auto pid = static_cast<pid_t>(At(s.pid).load(std::memory_order_acquire));
      if (pid == 0) {
        continue;
      }
      Rung *r = Find(pid, At(s.dir_fd).load(std::memory_order_acquire));
      if (r == nullptr || r->process.Exited()) {
        Free(s, pid);  // a dead peer holds nothing
        continue;
      }
      // A peer acknowledges in its own directory; one that lists no acknowledgement of this
      // directory is detaching (it drops that after its slot) and holds nothing.
      if (r->dir.valid()) {
        const std::optional<uint64_t> acked = AckedIn(r->dir.as<Directory>(), ProcessId());
        if (!acked || *acked >= gen) {
          continue;
        }
        FutexWake(&r->dir.as<Directory>()->doorbell);
      }
      pending.push_back(pid);
    }
    if (pending.empty()) {
      Prune();
      return Status::Ok();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Error(HCCL_E_TIMEOUT,
                   "peer process(es) {} did not drop their mappings within {} ms (generation {})",
                   fmt::join(pending, ","), timeout.count(), gen);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    FutexWait(&d->ack, ack,
              std::min(left, std::chrono::milliseconds(20)) + std::chrono::milliseconds(1));
  }
}

MemfdExport::MemfdExport(std::unique_ptr<State> state) : state_(std::move(state)) {}

Expected<MemfdExport *> MemfdExport::Process() {
  static std::mutex mutex;
  static MemfdExport *current = nullptr;  // never freed: peers may ring it until exit
  static pid_t owner = 0;
  std::lock_guard lock(mutex);
  if (current != nullptr && owner == ProcessId()) {
    return current;
  }
  auto state = std::make_unique<State>();
  auto dir = MakeSealable(kDirName, kDirBytes, kSeals);
  auto mailbox = MakeSealable(kMailboxName, kMailboxBytes, kMailboxSeals);
  if (!dir.ok() || !mailbox.ok()) {
    return dir.ok() ? mailbox.status() : dir.status();
  }
  state->fd = std::move(dir->fd);
  state->page = std::move(dir->map);
  state->mailbox_fd = std::move(mailbox->fd);
  state->mailbox = std::move(mailbox->map);
  for (size_t i = 0; i < kSlots; ++i) {
    state->slots()[i].dir_fd = -1;
  }
  state->mailbox.as<Mailbox>()->owner = static_cast<uint32_t>(ProcessId());
  state->mailbox.as<Mailbox>()->magic = kMailboxMagic;
  state->dir()->owner = static_cast<uint32_t>(ProcessId());
  state->dir()->mailbox_fd = state->mailbox_fd.get();
  if (Status armed = ArmDeathWord(&state->dir()->alive); !armed.ok()) {
    LogInfo("memory directory: no death word ({}); peers poll this process's pidfd instead",
            armed.message());
  }
  state->dir()->magic = kMagic;
  // From here on only this mapping writes the directory: peers can map it read-only only.
  if (::fcntl(state->fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0 ||
      ::fcntl(state->mailbox_fd.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) {
    return Error(HCCL_E_SYSCALL, "sealing the memory directory: {}", ErrnoString(errno));
  }
  current = new MemfdExport(std::move(state));  // a forked child's inherited one is the parent's
  owner = ProcessId();
  return current;
}

int MemfdExport::fd() const {
  return state_->fd.get();
}

uint64_t MemfdExport::generation() const {
  return At(state_->dir()->generation).load(std::memory_order_acquire);
}

void MemfdExport::set_revoke_timeout(std::chrono::milliseconds t) {
  std::lock_guard lock(state_->mutex);
  state_->timeout = t;
}

size_t MemfdExport::AttachedPeers() const {
  size_t n = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    n += At(state_->slots()[i].pid).load() != 0 ? 1 : 0;
  }
  return n;
}

Status MemfdExport::AddRange(uintptr_t base, size_t size) {
  std::lock_guard lock(state_->mutex);
  auto &ranges = state_->ranges;
  if (ranges.size() >= kRanges) {
    return Error(HCCL_E_MEMORY, "the memory directory holds {} ranges, its most", kRanges);
  }
  auto next = ranges.lower_bound(base);
  const bool overlaps_next = next != ranges.end() && next->first < base + size;
  const bool overlaps_prev =
      next != ranges.begin() && std::prev(next)->first + std::prev(next)->second > base;
  if (size == 0 || overlaps_next || overlaps_prev) {
    return Error(HCCL_E_PARA, "range {:#x} (+{:#x}): empty or overlaps a published range", base,
                 size);
  }
  ranges.emplace(base, size);
  state_->Publish();
  return Status::Ok();
}

Status MemfdExport::RemoveRange(uintptr_t base) {
  std::lock_guard lock(state_->mutex);
  auto it = state_->ranges.find(base);
  if (it == state_->ranges.end()) {
    return Error(HCCL_E_PARA, "range {:#x}: not published", base);
  }
  auto act = state_->acts.lower_bound(base);
  if (act != state_->acts.end() && act->first < base + it->second) {
    return Error(HCCL_E_PARA, "range {:#x}: activation {:#x} is still published", base, act->first);
  }
  state_->ranges.erase(it);
  state_->Publish();
  return state_->Revoke(generation());
}

Status MemfdExport::Activate(uintptr_t va, size_t size, int memfd, uint64_t offset,
                             uint64_t cookie) {
  std::lock_guard lock(state_->mutex);
  auto &acts = state_->acts;
  auto r = state_->ranges.upper_bound(va);
  if (size == 0 || r == state_->ranges.begin() ||
      va + size > std::prev(r)->first + std::prev(r)->second) {
    return Error(HCCL_E_PARA, "activation {:#x} (+{:#x}): not inside one published range", va,
                 size);
  }
  auto next = acts.lower_bound(va);
  if ((next != acts.end() && next->first < va + size) ||
      (next != acts.begin() && std::prev(next)->first + std::prev(next)->second.size > va)) {
    return Error(HCCL_E_PARA, "activation {:#x} (+{:#x}): overlaps a published one", va, size);
  }
  if (acts.size() >= kActs) {
    return Error(HCCL_E_MEMORY, "the memory directory holds {} activations, its most", kActs);
  }
  // Peers refuse any other (a memfd that shrinks under their mapping is SIGBUS in them).
  const int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Error(HCCL_E_PARA,
                 "activation {:#x}: descriptor {} is no memfd sealed against "
                 "shrinking",
                 va, memfd);
  }
  UniqueFd dup(::fcntl(memfd, F_DUPFD_CLOEXEC, 0));
  if (!dup.valid()) {
    return Error(HCCL_E_SYSCALL, "duplicating the memfd of activation {:#x}: {}", va,
                 ErrnoString(errno));
  }
  acts.emplace(va, State::Act{.size = size,
                              .cookie = cookie,
                              .offset = offset,
                              .fd = std::move(dup),
                              .serial = ++state_->activations});
  state_->Publish();
  return Status::Ok();
}

Status MemfdExport::Deactivate(uintptr_t va) {
  std::lock_guard lock(state_->mutex);
  auto it = state_->acts.find(va);
  if (it == state_->acts.end()) {
    return Error(HCCL_E_PARA, "activation {:#x}: not published", va);
  }
  // The memfd stays open until the peers have dropped it, so its descriptor number cannot name
  // another memfd to a peer that listed it before.
  UniqueFd keep = std::move(it->second.fd);
  state_->acts.erase(it);
  state_->Publish();
  return state_->Revoke(generation());
}

}  // namespace hzc::transport

namespace hzc::transport {

std::vector<MemfdActivation> MemfdExport::Published() const {
  std::lock_guard lock(state_->mutex);
  std::vector<MemfdActivation> out;
  for (const auto &[va, a] : state_->acts) {
    out.push_back(MemfdActivation{.va = va, .size = a.size, .cookie = a.cookie});
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Peer side

namespace {

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// The end of the run of adjacent activations of @acts (sorted) that covers @va onwards, as
// far as @end; @va when none contains it.
uintptr_t Covered(const std::vector<MemfdActivation> &acts, uintptr_t va, uintptr_t end) {
  uintptr_t covered = va;
  for (const MemfdActivation &a : acts) {
    if (a.va > covered) {
      break;
    }
    if (a.va + a.size > covered) {
      covered = a.va + a.size;
      if (covered >= end) {
        break;
      }
    }
  }
  return covered;
}

size_t Page() {
  static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

bool Aligned(uint64_t v) {
  return v % Page() == 0;
}

// Whether [base, base + size) is non-empty, page-aligned and does not wrap.
bool Span(uint64_t base, uint64_t size) {
  return size != 0 && Aligned(base) && Aligned(size) && base <= UINTPTR_MAX - size;
}

Status CheckRanges(pid_t pid, const std::vector<DirRange> &ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const DirRange &r = ranges[i];
    if (!Span(r.base, r.size)) {
      return Error(HCCL_E_REMOTE,
                   "pid {} lists range {:#x} of size {:#x}: empty, unaligned or "
                   "wrapping",
                   pid, r.base, r.size);
    }
    if (i > 0 && ranges[i - 1].base + ranges[i - 1].size > r.base) {
      return Error(HCCL_E_REMOTE, "pid {} lists range {:#x}: it overlaps range {:#x}", pid, r.base,
                   ranges[i - 1].base);
    }
  }
  return Status::Ok();
}

// Activation @a of pid @pid against its fields and @ranges (sorted, checked).
Status CheckAct(pid_t pid, const DirAct &a, const std::vector<DirRange> &ranges) {
  if (!Span(a.va, a.size)) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} of size {:#x}: empty, unaligned or "
                 "wrapping",
                 pid, a.va, a.size);
  }
  constexpr auto kFileMax = static_cast<uint64_t>(INT64_MAX);  // off_t
  if (!Aligned(a.offset) || a.size > kFileMax || a.offset > kFileMax - a.size) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} at memfd offset {:#x}: unaligned "
                 "or past the end of any file",
                 pid, a.va, a.offset);
  }
  if (a.fd < 0) {
    return Error(HCCL_E_REMOTE, "pid {} lists activation {:#x} with descriptor {}", pid, a.va,
                 a.fd);
  }
  auto r = std::upper_bound(ranges.begin(), ranges.end(), a.va,
                            [](uint64_t va, const DirRange &x) { return va < x.base; });
  if (r == ranges.begin() || a.va - std::prev(r)->base >= std::prev(r)->size) {
    return Error(HCCL_E_REMOTE, "pid {} lists activation {:#x} outside its ranges", pid, a.va);
  }
  --r;
  if (a.size > r->size - (a.va - r->base)) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} of size {:#x}: it runs past the end "
                 "of range {:#x} (+{:#x})",
                 pid, a.va, a.size, r->base, r->size);
  }
  return Status::Ok();
}

// A listing of pid @pid checked as CheckListing does.
Status CheckListing(pid_t pid, Snapshot &s) {
  return transport::CheckListing(pid, s.ranges, s.acts);
}

// The descriptor @fd taken for activation @a of pid @pid: a regular memfd, sealed against
// shrinking, that holds [offset, offset + size). HCCL_E_REMOTE otherwise.
Status CheckMemfd(pid_t pid, const DirAct &a, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} with descriptor {}: not a regular "
                 "file",
                 pid, a.va, a.fd);
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} with descriptor {}: not a memfd "
                 "sealed against shrinking",
                 pid, a.va, a.fd);
  }
  if (static_cast<uint64_t>(st.st_size) < a.offset + a.size) {
    return Error(HCCL_E_REMOTE,
                 "pid {} lists activation {:#x} at offset {:#x} of size {:#x}: its "
                 "memfd holds {:#x} bytes",
                 pid, a.va, a.offset, a.size, st.st_size);
  }
  return Status::Ok();
}

std::vector<MemfdActivation> Listed(const std::vector<DirAct> &acts) {
  std::vector<MemfdActivation> out;
  for (const DirAct &a : acts) {
    out.push_back(MemfdActivation{.va = a.va, .size = a.size, .cookie = a.cookie});
  }
  return out;
}

}  // namespace

// Ranges and activations page-aligned spans that do not wrap, each activation inside one range
// and apart from the others.
Status CheckListing(pid_t pid, std::vector<DirRange> &ranges, std::vector<DirAct> &acts) {
  std::sort(ranges.begin(), ranges.end(),
            [](const DirRange &a, const DirRange &b) { return a.base < b.base; });
  std::sort(acts.begin(), acts.end(), [](const DirAct &a, const DirAct &b) { return a.va < b.va; });
  HZC_RETURN_IF_ERROR(CheckRanges(pid, ranges));
  for (size_t i = 0; i < acts.size(); ++i) {
    HZC_RETURN_IF_ERROR(CheckAct(pid, acts[i], ranges));
    if (i > 0 && acts[i - 1].va + acts[i - 1].size > acts[i].va) {
      return Error(HCCL_E_REMOTE, "pid {} lists activation {:#x}: it overlaps activation {:#x}",
                   pid, acts[i].va, acts[i - 1].va);
    }
  }
  return Status::Ok();
}

struct MemfdImport::State {
  struct Owner;
  // Whether @o's process has died: its death word, or (never armed) its pidfd.
  static bool Exited(const Owner &o);
  // A range's reservation, kept as long as the range is listed: what another thread holds in
  // it stays reserved across listings, and only what the owner withdrew is covered.
  struct RangeWindow {
    UniqueMapping span;
    std::map<uint64_t, DirAct> mapped;  // by address: the activations mapped in it
    uint64_t filled = UINT64_MAX;       // generation of the listing it maps all of
  };
  struct Owner {
    bootstrap::PeerProcess process;
    UniqueMapping dir;      // read-only
    UniqueMapping mailbox;  // where this process's slot is
    DirSlot *slot = nullptr;
    DirAck *ack = nullptr;  // in this process's own directory
    uint64_t serial = 0;    // of the attachment (AttachCard)
    bool dead = false;
    bool listed = false;
    Snapshot list;
    std::map<uintptr_t, RangeWindow> windows;  // by range base
    // Windows of ranges the owner withdrew: covered, kept reserved (a stale pointer faults)
    // until the owner is forgotten.
    std::vector<UniqueMapping> retired;
    Directory *d() const { return dir.as<Directory>(); }
  };
  std::mutex mutex;
  std::map<pid_t, Owner> owners;
  uint64_t attachments = 0;
  pid_t made_by = 0;
  bool watching = false;

  void Forked();
  // Unmap @it's windows, free this process's slot in its mailbox and drop it.
  void Forget(std::map<pid_t, Owner>::iterator it);
  // Take a slot in @o's mailbox naming this process's directory @own_fd, after an entry for
  // @o's acknowledgements in that directory (@own).
  static Status Claim(pid_t pid, Owner &o, Directory *own, int own_fd);
  // Stop acknowledging @o (it no longer reads them).
  static void Unclaim(Owner &o);
  // @o has died: its memory is nobody's any more.
  static void Bury(Owner &o);
  static void Ack(Owner &o, uint64_t gen);
  // Cover every window of @o: it maps nothing of the owner until it lists again.
  static void Revoke(Owner &o);
  // Cover what @o's windows map that its listing no longer has; retire the windows of ranges
  // it no longer lists.
  static void Reconcile(Owner &o);
  static Status Relist(pid_t pid, Owner &o);
  static Expected<void *> Window(pid_t pid, Owner &o, const DirRange &r);
  static Status MapInto(pid_t pid, Owner &o, const DirRange &r, RangeWindow &w);
  static Expected<void *> Lookup(pid_t pid, Owner &o, uintptr_t va, size_t len);
  static void Watch(const std::shared_ptr<State> &self, Directory *own);
  Expected<Owner *> Live(pid_t pid);
};

namespace {

// Put a PROT_NONE reservation over [p, p + len) of a window (a stale pointer faults instead of
// reaching other memory); where that fails, unmap it rather than keep the owner's memory.
void Cover(char *p, size_t len) {
  if (::mmap(p, len, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0) == MAP_FAILED) {
    LogError("memfd transport: cannot cover [{}, +{:#x}) of a window: {}; unmapping it",
             static_cast<void *>(p), len, ErrnoString(errno));
    ::munmap(p, len);
    return;
  }
  ::madvise(p, len, MADV_DONTFORK);
}

bool SameAct(const DirAct &a, const DirAct &b) {
  return a.va == b.va && a.size == b.size && a.offset == b.offset && a.fd == b.fd &&
         a.serial == b.serial;
}

}  // namespace

bool MemfdImport::State::Exited(const Owner &o) {
  const uint32_t word = At(o.d()->alive).load(std::memory_order_acquire);
  return word != 0 ? DeathWordSaysDead(word) : o.process.Exited();
}

void MemfdImport::State::Forked() {
  if (made_by != ProcessId()) {
    // The parent's views: their slots are the parent's, and their mappings (MADV_DONTFORK) are
    // not this process's; whatever it has mapped at those addresses since is not theirs.
    for (auto &[pid, o] : owners) {
      o.dir.release();
      o.mailbox.release();
      for (auto &[base, w] : o.windows) {
        w.span.release();
      }
      for (UniqueMapping &w : o.retired) {
        w.release();
      }
    }
    owners.clear();
    watching = false;
    made_by = ProcessId();
  }
}

void MemfdImport::State::Ack(Owner &o, uint64_t gen) {
  At(o.ack->acked).store(gen, std::memory_order_release);
  FutexWake(&o.d()->ack);
}

void MemfdImport::State::Revoke(Owner &o) {
  for (auto &[base, w] : o.windows) {
    if (!w.mapped.empty()) {
      Cover(w.span.as<char>(), w.span.size());
      w.mapped.clear();
    }
    w.filled = UINT64_MAX;
  }
  o.listed = false;
}

void MemfdImport::State::Reconcile(Owner &o) {
  for (auto it = o.windows.begin(); it != o.windows.end();) {
    RangeWindow &w = it->second;
    const auto range = std::find_if(o.list.ranges.begin(), o.list.ranges.end(), [&](auto &r) {
      return r.base == it->first && r.size == w.span.size();
    });
    if (range == o.list.ranges.end()) {
      Cover(w.span.as<char>(), w.span.size());
      o.retired.push_back(std::move(w.span));
      it = o.windows.erase(it);
      continue;
    }
    for (auto m = w.mapped.begin(); m != w.mapped.end();) {
      const auto now = std::lower_bound(o.list.acts.begin(), o.list.acts.end(), m->first,
                                        [](const DirAct &a, uint64_t va) { return a.va < va; });
      if (now != o.list.acts.end() && SameAct(*now, m->second)) {
        ++m;
        continue;
      }
      Cover(w.span.as<char>() + (m->first - it->first), m->second.size);
      m = w.mapped.erase(m);
    }
    w.filled = UINT64_MAX;
    ++it;
  }
}

Status MemfdImport::State::Relist(pid_t pid, Owner &o) {
  // Acknowledge before reading: a withdrawal published after this reading is waited for.
  const uint64_t g = At(o.d()->generation).load(std::memory_order_acquire);
  At(o.ack->acked).store(g & ~uint64_t{1}, std::memory_order_seq_cst);
  auto snap = Read(o.d());
  if (!snap) {
    Revoke(o);
    return Error(HCCL_E_INTERNAL, "the memory directory of pid {} stays busy", pid);
  }
  if (Status st = CheckListing(pid, *snap); !st.ok()) {
    Revoke(o);
    return st;
  }
  o.list = std::move(*snap);
  Reconcile(o);
  o.listed = true;
  // Nothing withdrawn by this listing is mapped any more.
  if (At(o.ack->acked).load(std::memory_order_relaxed) < o.list.generation) {
    Ack(o, o.list.generation);
  }
  return Status::Ok();
}

// Map into @w what the listing has in range @r and @w does not map yet.
Status MemfdImport::State::MapInto(pid_t pid, Owner &o, const DirRange &r, RangeWindow &w) {
  for (const DirAct &a : o.list.acts) {
    if (a.va < r.base || a.va - r.base >= r.size || w.mapped.contains(a.va)) {
      continue;
    }
    auto fd = o.process.TakeFd(a.fd);
    if (!fd.ok()) {
      return fd.status();
    }
    HZC_RETURN_IF_ERROR(CheckMemfd(pid, a, fd->get()));
    // In bounds: CheckListing put [va, va + size) inside the range, the window's span.
    char *at = w.span.as<char>() + (a.va - r.base);
    if (::mmap(at, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd->get(),
               static_cast<off_t>(a.offset)) == MAP_FAILED) {
      const int err = errno;
      Cover(at, a.size);
      return Error(HCCL_E_MEMORY, "mapping activation {:#x} of pid {}: {}", a.va, pid,
                   ErrnoString(err));
    }
    w.mapped.emplace(a.va, a);
    // A forked child inherits none of it (the kernel transport's windows are VM_DONTCOPY).
    if (::madvise(at, a.size, MADV_DONTFORK) != 0) {
      return Error(HCCL_E_SYSCALL, "madvise(MADV_DONTFORK) of activation {:#x} of pid {}: {}", a.va,
                   pid, ErrnoString(errno));
    }
  }
  w.filled = o.list.generation;
  return Status::Ok();
}

Expected<void *> MemfdImport::State::Window(pid_t pid, Owner &o, const DirRange &r) {
  auto it = o.windows.find(r.base);
  if (it == o.windows.end()) {
    auto span = UniqueMapping::Map(r.size, PROT_NONE, kReserveFlags, -1);
    if (!span.valid()) {
      return Error(HCCL_E_MEMORY, "reserving {:#x} bytes for range {:#x} of pid {}: {}", r.size,
                   r.base, pid, ErrnoString(errno));
    }
    if (::madvise(span.get(), span.size(), MADV_DONTFORK) != 0) {
      return Error(HCCL_E_SYSCALL,
                   "madvise(MADV_DONTFORK) of the window of range {:#x} of pid {}: "
                   "{}",
                   r.base, pid, ErrnoString(errno));
    }
    LogDebug("memfd transport: reserved range {:#x} (+{:#x}) of pid {} at {}", r.base, r.size, pid,
             span.get());
    it = o.windows
             .emplace(r.base,
                      RangeWindow{.span = std::move(span), .mapped = {}, .filled = UINT64_MAX})
             .first;
  }
  if (it->second.filled != o.list.generation) {
    HZC_RETURN_IF_ERROR(MapInto(pid, o, r, it->second));
  }
  return it->second.span.get();
}

Expected<void *> MemfdImport::State::Lookup(pid_t pid, Owner &o, uintptr_t va, size_t len) {
  const DirRange *range = nullptr;
  for (const DirRange &r : o.list.ranges) {
    if (va >= r.base && va - r.base < r.size && len <= r.size - (va - r.base)) {
      range = &r;
    }
  }
  if (range == nullptr || Covered(Listed(o.list.acts), va, va + len) < va + len) {
    return static_cast<void *>(nullptr);
  }
  auto w = Window(pid, o, *range);
  if (!w.ok()) {
    return w.status();
  }
  return static_cast<void *>(static_cast<char *>(*w) + (va - range->base));
}

Expected<MemfdImport::State::Owner *> MemfdImport::State::Live(pid_t pid) {
  Forked();
  auto it = owners.find(pid);
  if (it == owners.end()) {
    return Error(HCCL_E_PARA, "pid {}: its memory directory is not attached", pid);
  }
  Owner &o = it->second;
  if (!o.dead && Exited(o)) {
    Bury(o);
  }
  if (o.dead) {
    return Error(HCCL_E_REMOTE, "pid {} has exited", pid);
  }
  return &o;
}

void MemfdImport::State::Watch(const std::shared_ptr<State> &self, Directory *own) {
  for (;;) {
    const uint32_t bell = At(own->doorbell).load(std::memory_order_acquire);
    {
      std::lock_guard lock(self->mutex);
      if (self->made_by != ProcessId()) {
        return;
      }
      for (auto &[pid, o] : self->owners) {
        if (!o.dead && Exited(o)) {
          Bury(o);
        }
        if (o.dead) {
          continue;
        }
        const uint64_t g = At(o.d()->generation).load(std::memory_order_acquire);
        const uint64_t done = g + (g & 1);  // a write in progress: its end
        if (o.listed && o.list.generation == g) {
          if (At(o.ack->acked).load() < g) {
            Ack(o, g);
          }
          continue;
        }
        // Cover only what the owner withdrew; a listing that cannot be read covers everything.
        if (Status st = Relist(pid, o); !st.ok()) {
          LogDebug("memfd transport: {}", st.message());
          Ack(o, done);
        }
      }
    }
    FutexWait(&own->doorbell, bell, std::chrono::milliseconds(1000));
  }
}

MemfdImport::MemfdImport() : state_(std::make_shared<State>()) {
  state_->made_by = ProcessId();
  // The watcher may hold the lock when another thread forks: the child must not inherit it held.
  static State *const forked = state_.get();
  ::pthread_atfork([] { forked->mutex.lock(); }, [] { forked->mutex.unlock(); },
                   [] { forked->mutex.unlock(); });
}

MemfdImport &MemfdImport::Process() {
  static MemfdImport *const import = new MemfdImport();  // its watcher runs until exit
  return *import;
}

Status MemfdImport::Attach(pid_t pid, int dir_fd) {
  if (pid == ProcessId()) {
    return Status::Ok();
  }
  auto own = MemfdExport::Process();
  if (!own.ok()) {
    return own.status();
  }
  std::lock_guard lock(state_->mutex);
  state_->Forked();
  if (state_->owners.contains(pid)) {
    return Status::Ok();
  }
  auto process = bootstrap::PeerProcess::Open(pid);
  if (!process.ok()) {
    return process.status();
  }
  auto fd = process->TakeFd(dir_fd);
  if (!fd.ok()) {
    return Error(HCCL_E_SYSCALL, "memory directory: {}", fd.status().message());
  }
  auto dir = MapDirectory(fd->get(), pid);
  if (!dir.ok()) {
    return dir.status();
  }
  State::Owner o;
  o.process = std::move(*process);
  o.dir = std::move(*dir);
  HZC_RETURN_IF_ERROR(State::Claim(pid, o, (*own)->state_->dir(), (*own)->fd()));
  o.serial = ++state_->attachments;
  state_->owners.emplace(pid, std::move(o));
  if (!state_->watching) {
    state_->watching = true;
    std::thread([self = state_, d = (*own)->state_->dir()] { State::Watch(self, d); }).detach();
  }
  return Status::Ok();
}

Status MemfdImport::AttachProcess(pid_t pid) {
  if (pid == ProcessId()) {
    return Status::Ok();
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->Forked();
    if (state_->owners.contains(pid)) {
      return Status::Ok();
    }
  }
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  std::unique_ptr<DIR, int (*)(DIR *)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    return Error(errno == ENOENT ? HCCL_E_REMOTE : HCCL_E_SYSCALL, "listing {}: {}", dir,
                 ErrnoString(errno));
  }
  const std::string want = fmt::format("/memfd:{}", kDirName);
  Status last = Error(HCCL_E_NOT_FOUND, "pid {} has published no memory directory", pid);
  while (const dirent *e = ::readdir(d.get())) {
    char target[256] = {};
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0 || std::string_view(target, static_cast<size_t>(n)).rfind(want, 0) != 0) {
      continue;
    }
    last = Attach(pid, std::atoi(e->d_name));  // an imported directory of another owner fails
    if (last.ok()) {
      return last;
    }
  }
  return last;
}

Expected<uint64_t> MemfdImport::AttachCard(pid_t pid, const bootstrap::PeerProcess &card,
                                           uint64_t checked) {
  if (pid == ProcessId()) {
    return checked;
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->Forked();
    auto it = state_->owners.find(pid);
    if (it != state_->owners.end() && !it->second.dead && !State::Exited(it->second)) {
      // The attached process holds the pid: it is the card's while the card's is alive.
      if (it->second.serial == checked) {
        return checked;
      }
      if (card.Exited()) {
        return Error(HCCL_E_REMOTE, "pid {} has exited", pid);
      }
      return it->second.serial;
    }
    if (card.Exited()) {
      return Error(HCCL_E_REMOTE, "pid {} has exited", pid);
    }
    if (it != state_->owners.end()) {
      state_->Forget(it);  // an earlier process of that pid, dead
    }
  }
  HZC_RETURN_IF_ERROR(AttachProcess(pid));
  // Attached after the card's process was seen alive: the same process, unless it has exited.
  if (card.Exited()) {
    Detach(pid);
    return Error(HCCL_E_REMOTE, "pid {} has exited", pid);
  }
  std::lock_guard lock(state_->mutex);
  auto it = state_->owners.find(pid);
  return it != state_->owners.end() ? it->second.serial : 0;
}

Expected<void *> MemfdImport::Translate(pid_t pid, uintptr_t va, size_t len) {
  if (len == 0 || va > UINTPTR_MAX - len) {
    return Error(HCCL_E_PARA, "address {:#x} size {:#x}: empty or wraps around", va, len);
  }
  if (pid == ProcessId()) {
    auto own = MemfdExport::Process();
    if (!own.ok()) {
      return own.status();
    }
    if (Covered((*own)->Published(), va, va + len) < va + len) {
      return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of this process", va, len);
    }
    return reinterpret_cast<void *>(va);
  }
  std::lock_guard lock(state_->mutex);
  auto o = state_->Live(pid);
  if (!o.ok()) {
    return o.status();
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t g = At((*o)->d()->generation).load(std::memory_order_acquire);
    if (!(*o)->listed || (*o)->list.generation != g) {
      HZC_RETURN_IF_ERROR(State::Relist(pid, **o));
    }
    auto hit = State::Lookup(pid, **o, va, len);
    // Mapped from a listing that is still current: the descriptors named what it listed.
    if (At((*o)->d()->generation).load(std::memory_order_acquire) != (*o)->list.generation) {
      continue;
    }
    if (hit.ok() && *hit == nullptr) {
      return Error(HCCL_E_PARA, "[{:#x}, +{:#x}) is not activated memory of pid {}", va, len, pid);
    }
    return hit;
  }
  return Error(HCCL_E_INTERNAL, "the memory directory of pid {} keeps changing", pid);
}

Expected<std::vector<MemfdActivation>> MemfdImport::Activations(pid_t pid) {
  if (pid == ProcessId()) {
    auto own = MemfdExport::Process();
    if (!own.ok()) {
      return own.status();
    }
    return (*own)->Published();
  }
  std::lock_guard lock(state_->mutex);
  auto o = state_->Live(pid);
  if (!o.ok()) {
    return o.status();
  }
  auto snap = Read((*o)->d());
  if (!snap) {
    return Error(HCCL_E_INTERNAL, "the memory directory of pid {} stays busy", pid);
  }
  HZC_RETURN_IF_ERROR(CheckListing(pid, *snap));
  return Listed(snap->acts);
}

Status MemfdImport::State::Claim(pid_t pid, Owner &o, Directory *own, int own_fd) {
  const int32_t mailbox_fd = At(o.d()->mailbox_fd).load(std::memory_order_acquire);
  auto fd = o.process.TakeFd(mailbox_fd);
  auto mailbox = fd.ok() ? MapMailbox(fd->get(), pid) : Expected<UniqueMapping>(fd.status());
  if (!mailbox.ok()) {
    return Error(HCCL_E_SYSCALL, "memory directory: {}", mailbox.status().message());
  }
  o.mailbox = std::move(*mailbox);
  for (DirAck &a : own->acks) {  // only this process's importer writes them, under its lock
    if (At(a.owner).load(std::memory_order_relaxed) == 0) {
      At(a.acked).store(0, std::memory_order_relaxed);
      At(a.owner).store(static_cast<uint32_t>(pid), std::memory_order_release);
      o.ack = &a;
      break;
    }
  }
  if (o.ack == nullptr) {
    return Error(HCCL_E_MEMORY, "this process has attached {} memory directories, its most",
                 kSlots);
  }
  for (DirSlot &s : o.mailbox.as<Mailbox>()->slots) {
    uint32_t expected = 0;
    if (At(s.pid).compare_exchange_strong(expected, static_cast<uint32_t>(ProcessId()))) {
      At(s.dir_fd).store(own_fd, std::memory_order_release);
      o.slot = &s;
      return Status::Ok();
    }
  }
  Unclaim(o);
  return Error(HCCL_E_MEMORY, "the memory directory of pid {} has no free peer slot ({} peers)",
               pid, kSlots);
}

void MemfdImport::State::Unclaim(Owner &o) {
  if (o.slot != nullptr) {  // the slot first: the owner reads a slot without an entry as gone
    At(o.slot->dir_fd).store(-1);
    At(o.slot->pid).store(0, std::memory_order_release);
    o.slot = nullptr;
  }
  if (o.ack != nullptr) {
    At(o.ack->owner).store(0, std::memory_order_release);
    o.ack = nullptr;
  }
}

void MemfdImport::State::Bury(Owner &o) {
  o.windows.clear();
  o.retired.clear();
  o.listed = false;
  o.dead = true;
  Unclaim(o);
}

void MemfdImport::State::Forget(std::map<pid_t, Owner>::iterator it) {
  it->second.windows.clear();
  it->second.retired.clear();
  Unclaim(it->second);
  owners.erase(it);
}

void MemfdImport::Detach(pid_t pid) {
  std::lock_guard lock(state_->mutex);
  state_->Forked();
  auto it = state_->owners.find(pid);
  if (it != state_->owners.end()) {
    state_->Forget(it);
  }
}

size_t MemfdImport::MappedWindows() const {
  std::lock_guard lock(state_->mutex);
  size_t n = 0;
  for (const auto &[pid, o] : state_->owners) {
    for (const auto &[base, w] : o.windows) {
      n += w.mapped.empty() ? 0 : 1;
    }
  }
  return n;
}

}  // namespace hzc::transport
