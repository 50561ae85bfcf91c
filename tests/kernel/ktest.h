// SPDX-License-Identifier: GPL-2.0
// Helpers of the hzc.ko guest tests: raw ioctls, sysfs reads, struct-size sweeps.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/hzc.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace hzc::ktest {

inline constexpr const char *kDevice = "/dev/hzc";
inline constexpr const char *kSysfsRoot = "/sys/kernel/hzc";

// ioctl() returning 0 or the errno, so tests can EXPECT_EQ(Ioctl(...), EINVAL).
inline int Ioctl(int fd, unsigned long cmd, void *arg) {
  return ioctl(fd, cmd, arg) == 0 ? 0 : errno;
}

// First line of a sysfs (or procfs) file, without the newline; empty on error.
inline std::string ReadLine(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline long long ReadNumber(const std::string &path) {
  const std::string line = ReadLine(path);
  return line.empty() ? -1 : std::stoll(line, nullptr, 0);
}

inline long long Counter(const std::string &name) {
  return ReadNumber(std::string(kSysfsRoot) + "/" + name);
}

inline int OpenDevice() {
  return open(kDevice, O_RDWR | O_CLOEXEC);
}

// @cmd with @size encoded in its size bits: the kernel requires the encoded size to
// equal the struct's @size field (EINVAL otherwise).  _IOC_SIZE has 14 bits, so a
// @size above 16383 cannot be encoded (its low bits are, and the call is EINVAL).
inline unsigned long CmdWithSize(unsigned long cmd, uint32_t size) {
  return (cmd & ~(static_cast<unsigned long>(_IOC_SIZEMASK) << _IOC_SIZESHIFT)) |
         ((static_cast<unsigned long>(size) & _IOC_SIZEMASK) << _IOC_SIZESHIFT);
}

// ioctl() of a struct whose @size may differ from sizeof(T), with that @size in the command.
template <typename T>
int SizedIoctl(int fd, unsigned long cmd, T *arg) {
  return Ioctl(fd, CmdWithSize(cmd, arg->size), arg);
}

// A struct of type T preceded by its size, followed by `extra` bytes of tail, as a
// future (or older) caller would pass it.
template <typename T>
class Sized {
 public:
  explicit Sized(uint32_t size, uint8_t tail = 0) : buf_(std::max<size_t>(size, sizeof(T)) + 8, 0) {
    std::memset(buf_.data() + sizeof(T), tail, buf_.size() - sizeof(T));
    Get()->size = size;
  }
  T *Get() { return reinterpret_cast<T *>(buf_.data()); }
  uint8_t *Tail() { return buf_.data() + sizeof(T); }
  size_t TailSize() const { return buf_.size() - sizeof(T) - 8; }

 private:
  std::vector<uint8_t> buf_;
};

// Struct-size rules every command follows, each call with its @size encoded in the
// command: a short struct is EINVAL, a longer one with a non-zero tail is E2BIG, a
// longer one with a zero tail behaves like the exact size (`expect_ok` is the errno
// the exact-size call gives, `undo` reverts a successful call).  A command whose
// encoded size differs from @size is EINVAL.  Also checks each flag bit is EOPNOTSUPP.
// `min_size` is the size of the struct's first version, when it has grown since.
template <typename T, typename Undo>
void CheckAbi(int fd, unsigned long cmd, const T &valid, int expect_ok, Undo undo,
              uint32_t min_size = sizeof(T)) {
  for (uint32_t size : {0u, 4u, min_size - 4}) {
    Sized<T> arg(size);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = size;
    EXPECT_EQ(SizedIoctl(fd, cmd, arg.Get()), EINVAL) << "short size " << size;
  }
  {
    Sized<T> arg(sizeof(T) + 8, 0x5a);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = sizeof(T) + 8;
    EXPECT_EQ(SizedIoctl(fd, cmd, arg.Get()), E2BIG) << "long struct with garbage tail";
  }
  {
    Sized<T> arg(sizeof(T) + 8, 0);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = sizeof(T) + 8;
    EXPECT_EQ(SizedIoctl(fd, cmd, arg.Get()), expect_ok) << "long struct with zero tail";
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(arg.Tail()[i], 0) << "tail byte " << i << " written";
    }
    if (expect_ok == 0) {
      undo(*arg.Get());
    }
  }
  {
    // The size in the command must be the struct's @size: checked before anything else.
    Sized<T> arg(sizeof(T) + 8, 0);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = sizeof(T) + 8;
    EXPECT_EQ(Ioctl(fd, CmdWithSize(cmd, sizeof(T)), arg.Get()), EINVAL)
        << "command encodes sizeof(T), @size is sizeof(T) + 8";
    T exact = valid;
    EXPECT_EQ(Ioctl(fd, CmdWithSize(cmd, sizeof(T) + 8), &exact), EINVAL)
        << "command encodes sizeof(T) + 8, @size is sizeof(T)";
    EXPECT_EQ(Ioctl(fd, CmdWithSize(cmd, 0), &exact), EINVAL) << "command encodes size 0";
  }
  for (uint32_t bit = 0; bit < 32; bit += 7) {
    T arg = valid;
    arg.flags = 1u << bit;
    EXPECT_EQ(Ioctl(fd, cmd, &arg), EOPNOTSUPP) << "flag bit " << bit;
  }
  {
    T arg = valid;
    EXPECT_EQ(Ioctl(fd, cmd, &arg), expect_ok) << "exact size";
    if (expect_ok == 0) {
      undo(arg);
    }
  }
}

// Touches *p (a write of 0x5c, or a read into *value): 0 if the access worked, else the
// signal it raised (SIGBUS, SIGSEGV).  For probing peer mappings after revocation.
inline sigjmp_buf probe_jmp;

inline void ProbeHandler(int sig) {
  siglongjmp(probe_jmp, sig);
}

inline int Probe(volatile char *p, bool write, char *value = nullptr) {
  struct sigaction sa {
  }, old_bus{}, old_segv{};
  sa.sa_handler = ProbeHandler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &old_bus);
  sigaction(SIGSEGV, &sa, &old_segv);
  const int sig = sigsetjmp(probe_jmp, 1);
  if (sig == 0) {
    if (write) {
      *p = 0x5c;
    } else {
      char v = *p;
      if (value != nullptr) {
        *value = v;
      }
    }
  }
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaction(SIGSEGV, &old_segv, nullptr);
  return sig;
}

inline size_t PageSize() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Raw calls; each returns 0 or the errno.
inline int RegisterRange(int fd, const void *base, size_t len, hzc_range_register *out = nullptr) {
  hzc_range_register arg{};
  arg.size = sizeof(arg);
  arg.base = reinterpret_cast<uintptr_t>(base);
  arg.length = len;
  const int err = Ioctl(fd, HZC_IOC_RANGE_REGISTER, &arg);
  if (out != nullptr) {
    *out = arg;
  }
  return err;
}

inline int UnregisterRange(int fd, const void *base) {
  hzc_range_unregister arg{};
  arg.size = sizeof(arg);
  arg.base = reinterpret_cast<uintptr_t>(base);
  return Ioctl(fd, HZC_IOC_RANGE_UNREGISTER, &arg);
}

inline int Activate(int fd, const void *va, size_t len, uint64_t *range_id = nullptr,
                    uint64_t cookie = 0) {
  hzc_activate arg{};
  arg.size = sizeof(arg);
  arg.va = reinterpret_cast<uintptr_t>(va);
  arg.length = len;
  arg.cookie = cookie;
  const int err = Ioctl(fd, HZC_IOC_ACTIVATE, &arg);
  if (range_id != nullptr) {
    *range_id = arg.out_range_id;
  }
  return err;
}

inline int Deactivate(int fd, const void *va) {
  hzc_deactivate arg{};
  arg.size = sizeof(arg);
  arg.va = reinterpret_cast<uintptr_t>(va);
  return Ioctl(fd, HZC_IOC_DEACTIVATE, &arg);
}

struct DomainId {
  uint64_t lo;
  uint64_t hi;
};

// A domain id no other test (or earlier run) uses.
inline DomainId NewDomainId() {
  static uint64_t counter = 0;
  return DomainId{static_cast<uint64_t>(getpid()) << 32 | ++counter,
                  static_cast<uint64_t>(time(nullptr)) ^ 0x687a63ULL};
}

inline int Join(int fd, DomainId id, uint32_t rank, uint32_t nranks) {
  hzc_domain_join arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  arg.nranks = nranks;
  return Ioctl(fd, HZC_IOC_DOMAIN_JOIN, &arg);
}

inline int Leave(int fd, DomainId id, uint32_t rank) {
  hzc_domain_leave arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  return Ioctl(fd, HZC_IOC_DOMAIN_LEAVE, &arg);
}

inline int Put(int fd, DomainId id, uint32_t rank, uint32_t key, const void *blob, uint32_t len) {
  hzc_board_put arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  arg.key = key;
  arg.blob = reinterpret_cast<uintptr_t>(blob);
  arg.blob_len = len;
  return Ioctl(fd, HZC_IOC_BOARD_PUT, &arg);
}

struct WaitResult {
  int err = 0;
  uint32_t nr_missing = 0;
  std::vector<uint64_t> missing;
  std::vector<uint32_t> lens;
  std::vector<std::string> blobs;
};

inline WaitResult Wait(int fd, DomainId id, uint32_t rank, uint32_t key, uint32_t nranks,
                       uint32_t timeout_ms, uint32_t stride = 4096) {
  WaitResult r;
  r.missing.assign((nranks + 63) / 64, ~0ULL);
  r.lens.assign(nranks, ~0u);
  std::vector<char> buf(static_cast<size_t>(nranks) * stride);
  hzc_board_wait arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  arg.key = key;
  arg.timeout_ms = timeout_ms;
  arg.blob_stride = stride;
  arg.blobs = reinterpret_cast<uintptr_t>(buf.data());
  arg.blob_lens = reinterpret_cast<uintptr_t>(r.lens.data());
  arg.missing = reinterpret_cast<uintptr_t>(r.missing.data());
  arg.out_nr_missing = ~0u;
  r.err = Ioctl(fd, HZC_IOC_BOARD_WAIT, &arg);
  r.nr_missing = arg.out_nr_missing;
  if (r.err == 0) {
    for (uint32_t i = 0; i < nranks; ++i) {
      r.blobs.emplace_back(buf.data() + static_cast<size_t>(i) * stride, r.lens[i]);
    }
  }
  return r;
}

inline int ListRanges(int fd, DomainId id, uint32_t rank, uint32_t peer,
                      std::vector<hzc_range_desc> *out, uint32_t *peer_pid = nullptr) {
  hzc_list_ranges arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  arg.peer_rank = peer;
  arg.num_ranges = 0;
  int err = Ioctl(fd, HZC_IOC_LIST_RANGES, &arg);
  if (err != 0 && err != EMSGSIZE) {
    return err;
  }
  out->assign(arg.num_ranges, hzc_range_desc{});
  arg.ranges = reinterpret_cast<uintptr_t>(out->data());
  err = Ioctl(fd, HZC_IOC_LIST_RANGES, &arg);
  out->resize(arg.num_ranges);
  if (peer_pid != nullptr) {
    *peer_pid = arg.out_peer_pid;
  }
  return err;
}

inline int ListActivations(int fd, DomainId id, uint32_t rank, uint32_t peer, uint64_t range_id,
                           std::vector<hzc_activation_desc> *out) {
  hzc_list_activations arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = id.lo;
  arg.domain_id[1] = id.hi;
  arg.rank = rank;
  arg.peer_rank = peer;
  arg.range_id = range_id;
  arg.desc_size = sizeof(hzc_activation_desc);
  int err = Ioctl(fd, HZC_IOC_LIST_ACTIVATIONS, &arg);
  if (err != 0 && err != EMSGSIZE) {
    return err;
  }
  out->assign(arg.num_activations, hzc_activation_desc{});
  arg.activations = reinterpret_cast<uintptr_t>(out->data());
  err = Ioctl(fd, HZC_IOC_LIST_ACTIVATIONS, &arg);
  out->resize(arg.num_activations);
  return err;
}

// /proc/vmstat counter, or -1.  Per-CPU deltas are folded first (root only;
// otherwise the value may lag by up to a second).
inline long long VmStat(const std::string &name) {
  {
    std::ofstream refresh("/proc/sys/vm/stat_refresh");
    refresh << 1;
  }
  std::ifstream in("/proc/vmstat");
  std::string key;
  long long value = 0;
  while (in >> key >> value) {
    if (key == name) {
      return value;
    }
  }
  return -1;
}

// Global counters that must return to their value when a test is done.
struct Counters {
  long long ranges = Counter("nr_ranges");
  long long activations = Counter("nr_activations");
  long long domains = Counter("nr_domains");
  long long pinned = Counter("pinned_bytes");
  long long contexts = Counter("nr_contexts");
  // Pages pinned but not yet released system-wide (FOLL_PIN).
  long long foll_pins = VmStat("nr_foll_pin_acquired") - VmStat("nr_foll_pin_released");
};

inline void ExpectBalanced(const Counters &before) {
  const Counters now;
  EXPECT_EQ(now.ranges, before.ranges) << "nr_ranges";
  EXPECT_EQ(now.activations, before.activations) << "nr_activations";
  EXPECT_EQ(now.domains, before.domains) << "nr_domains";
  EXPECT_EQ(now.pinned, before.pinned) << "pinned_bytes";
  EXPECT_EQ(now.contexts, before.contexts) << "nr_contexts";
  EXPECT_EQ(now.foll_pins, before.foll_pins) << "nr_foll_pin_acquired - nr_foll_pin_released";
}

// 32 hex digits of a domain id as the sysfs `id` file shows it: id[1], then id[0].
inline std::string DomainIdHex(DomainId id) {
  char name[40];
  snprintf(name, sizeof(name), "%016llx%016llx", static_cast<unsigned long long>(id.hi),
           static_cast<unsigned long long>(id.lo));
  return name;
}

// Names of the entries of a directory (without . and ..); empty if it cannot be read.
inline std::vector<std::string> ListDir(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *d = opendir(path.c_str())) {
    while (dirent *e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") {
        names.push_back(name);
      }
    }
    closedir(d);
  }
  return names;
}

// The sysfs directory of the newest domain (live or broken) with this id: domains/<N>
// with the largest N whose root-only `id` file shows it (so only root finds it); "" if none.
inline std::string FindDomainDir(DomainId id) {
  const std::string root = std::string(kSysfsRoot) + "/domains/";
  long long best = -1;
  for (const std::string &name : ListDir(root)) {
    if (ReadLine(root + name + "/id") == DomainIdHex(id)) {
      best = std::max(best, std::strtoll(name.c_str(), nullptr, 10));
    }
  }
  return best < 0 ? "" : root + std::to_string(best);
}

// A "Key:   123 kB" line of /proc/<pid>/status, in kB; -1 if absent.
inline long long ProcStatusKb(pid_t pid, const std::string &key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::stoll(line.substr(key.size() + 1));
    }
  }
  return -1;
}

// Module parameters (/sys/module/hzc/parameters/<name>): -1 if absent.
inline std::string ParamPath(const std::string &name) {
  return "/sys/module/hzc/parameters/" + name;
}

inline long long ReadParam(const std::string &name) {
  return ReadNumber(ParamPath(name));
}

// Writes a parameter (root only); false if it does not exist or refused the value.
inline bool WriteParam(const std::string &name, long long value) {
  const int fd = open(ParamPath(name).c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  const std::string text = std::to_string(value) + "\n";
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok && ReadParam(name) == value;
}

// Sets a module parameter for the lifetime of the object and restores the old value.
// ok() is false if the parameter does not exist (e.g. an older module) or refused it.
class ScopedParam {
 public:
  ScopedParam(std::string name, long long value) : name_(std::move(name)), old_(ReadParam(name_)) {
    ok_ = old_ >= 0 && WriteParam(name_, value);
  }
  ~ScopedParam() {
    if (old_ >= 0) {
      WriteParam(name_, old_);
    }
  }
  ScopedParam(const ScopedParam &) = delete;
  ScopedParam &operator=(const ScopedParam &) = delete;
  bool ok() const { return ok_; }
  const std::string &name() const { return name_; }

 private:
  std::string name_;
  long long old_;
  bool ok_ = false;
};

// Passing a file descriptor over a unix socket (SCM_RIGHTS).  SendFd returns 0 or the
// errno; ReceiveFd returns the new descriptor or -1.
inline int SendFd(int sock, int fd) {
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : errno;
}

inline int ReceiveFd(int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1) {
    return -1;
  }
  cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
    return -1;
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return fd;
}

// One end of a connected pair of unix sockets (SOCK_SEQPACKET): short text messages and
// file descriptors between a test and its child processes.
class Channel {
 public:
  explicit Channel(int fd = -1) : fd_(fd) {}
  ~Channel() { Close(); }
  Channel(Channel &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Channel &operator=(Channel &&other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  // Two connected ends.
  static std::pair<Channel, Channel> Pair() {
    int fds[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
      return {Channel(), Channel()};
    }
    return {Channel(fds[0]), Channel(fds[1])};
  }
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  bool Send(const std::string &text) const {
    return send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }
  // The next message, or nullopt on timeout, error or when the other end is closed.
  std::optional<std::string> Receive(int timeout_ms = 60000) const {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) {
      return std::nullopt;
    }
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      return std::nullopt;
    }
    return std::string(buf, static_cast<size_t>(n));
  }
  // Waits for exactly this message; false otherwise.
  bool Expect(const std::string &text, int timeout_ms = 60000) const {
    return Receive(timeout_ms) == text;
  }
  int SendFd(int fd) const { return ktest::SendFd(fd_, fd); }
  int ReceiveFd() const { return ktest::ReceiveFd(fd_); }

 private:
  int fd_;
};

inline constexpr uid_t kNobody = 65534;
inline constexpr uid_t kOtherUser = 65533;  // a second unprivileged user

// How UserProcess prepares the child while it is still root.
struct UserOptions {
  uid_t uid = kNobody;            // also the gid; no supplementary groups
  std::optional<rlim_t> memlock;  // RLIMIT_MEMLOCK (soft and hard)
  std::string cgroup;             // a cgroup2 directory to move into
};

// Runs body in a forked child as an unprivileged user: uid = gid = options.uid, no
// supplementary groups, no capabilities, dumpable like any process of that user.
// body is `std::string()` / `int()` or takes the child's end of a Channel
// (`std::string(Channel &)` / `int(Channel &)`); it returns "" / 0 on success, else what
// went wrong (a string, or a step number).  The test talks to the child through
// channel() and collects the outcome with Wait().
class UserProcess {
 public:
  template <typename Body>
  UserProcess(UserOptions options, Body body) {
    auto [mine, theirs] = Channel::Pair();
    int result[2] = {-1, -1};
    // Non-blocking: grandchildren may hold the write end after the child is gone.
    if (mine.fd() < 0 || pipe2(result, O_CLOEXEC | O_NONBLOCK) != 0) {
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      mine.Close();
      close(result[0]);
      std::string outcome = DropPrivileges(options);
      if (outcome.empty()) {
        outcome = RunBody(body, theirs);
      }
      (void)!write(result[1], outcome.data(), outcome.size());
      _exit(outcome.empty() ? 0 : 1);
    }
    close(result[1]);
    result_ = result[0];
    if (pid_ > 0) {
      channel_ = std::move(mine);
    }
  }
  template <typename Body>
  UserProcess(uid_t uid, Body body) : UserProcess(UserOptions{uid, std::nullopt, ""}, body) {}
  ~UserProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      Reap(std::chrono::seconds(10));
    }
    if (result_ >= 0) {
      close(result_);
    }
  }
  UserProcess(const UserProcess &) = delete;
  UserProcess &operator=(const UserProcess &) = delete;

  pid_t pid() const { return pid_; }
  const Channel &channel() const { return channel_; }

  // Waits for the child (SIGKILL after `timeout`): "" if its body succeeded, else its
  // report or how it ended.
  std::string Wait(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    if (pid_ <= 0) {
      return "fork failed";
    }
    int status = 0;
    std::string how;
    if (!Reap(timeout, &status)) {
      kill(pid_, SIGKILL);
      how = "timed out after " + std::to_string(timeout.count()) + " s; ";
      if (!Reap(std::chrono::seconds(10), &status)) {
        return how + "unkillable (stuck in the kernel?)";
      }
    }
    std::string report;
    char buf[1024];
    ssize_t n;
    while ((n = read(result_, buf, sizeof(buf))) > 0) {
      report.append(buf, static_cast<size_t>(n));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && how.empty()) {
      return "";
    }
    if (WIFSIGNALED(status)) {
      how += "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
             strsignal(WTERMSIG(status)) + ")";
    } else if (report.empty()) {
      how += "exit status " + std::to_string(WEXITSTATUS(status));
    }
    return how + (how.empty() || report.empty() ? "" : ": ") + report;
  }

 private:
  static std::string DropPrivileges(const UserOptions &options) {
    if (!options.cgroup.empty()) {
      std::ofstream procs(options.cgroup + "/cgroup.procs");
      procs << 0 << std::endl;
      if (!procs) {
        return "cannot join cgroup " + options.cgroup;
      }
    }
    if (options.memlock) {
      rlimit rl{*options.memlock, *options.memlock};
      if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        return std::string("setrlimit: ") + strerror(errno);
      }
    }
    if (setgroups(0, nullptr) != 0 || setresgid(options.uid, options.uid, options.uid) != 0 ||
        setresuid(options.uid, options.uid, options.uid) != 0) {
      return std::string("cannot drop privileges: ") + strerror(errno);
    }
    // A credential change makes the process non-dumpable; a user's own processes are.
    prctl(PR_SET_DUMPABLE, 1);
    return "";
  }

  template <typename Body>
  static std::string RunBody(Body &body, Channel &channel) {
    if constexpr (std::is_invocable_v<Body &, Channel &>) {
      return Outcome(body(channel));
    } else {
      return Outcome(body());
    }
  }
  static std::string Outcome(const std::string &s) { return s; }
  static std::string Outcome(int step) {
    return step == 0 ? "" : "failed at step " + std::to_string(step);
  }

  bool Reap(std::chrono::seconds timeout, int *status = nullptr) {
    int st = 0;
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) {
        reaped_ = true;
        if (status != nullptr) {
          *status = st;
        }
        return true;
      }
      if (std::chrono::steady_clock::now() >= end) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  pid_t pid_ = -1;
  int result_ = -1;
  bool reaped_ = false;
  Channel channel_;
};

// Runs body as an unprivileged user (see UserProcess) and waits: "" on success.
template <typename Body>
std::string AsUser(UserOptions options, Body body) {
  return UserProcess(std::move(options), body).Wait();
}

template <typename Body>
std::string AsUser(uid_t uid, Body body) {
  return UserProcess(uid, body).Wait();
}

// "what: strerror(err)" for reports of child processes.
inline std::string Failed(const std::string &what, int err) {
  return what + ": " + (err == 0 ? std::string("succeeded") : std::string(strerror(err)));
}

// An anonymous PROT_NONE reservation, unmapped on destruction.
class Reservation {
 public:
  explicit Reservation(size_t len, int prot = PROT_NONE, int extra_flags = 0) : len_(len) {
    void *p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char *>(p);
  }
  ~Reservation() {
    if (base_ != nullptr) {
      munmap(base_, len_);
    }
  }
  Reservation(const Reservation &) = delete;
  Reservation &operator=(const Reservation &) = delete;
  char *base() const { return base_; }
  size_t size() const { return len_; }

 private:
  char *base_ = nullptr;
  size_t len_;
};

// Fixture owning one open file of the device.
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = OpenDevice();
    ASSERT_GE(fd_, 0) << kDevice << ": " << strerror(errno) << " (is hzc.ko loaded?)";
  }
  void TearDown() override {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  int fd_ = -1;
};

}  // namespace hzc::ktest
