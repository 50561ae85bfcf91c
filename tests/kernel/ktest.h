// SPDX-License-Identifier: GPL-2.0
// Helpers of the hzc.ko guest tests: raw ioctls, sysfs reads, struct-size sweeps.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/hzc.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
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

// Struct-size rules every command follows: a short struct is EINVAL, a longer
// one with a non-zero tail is E2BIG, a longer one with a zero tail behaves like
// the exact size (`expect_ok` is the errno the exact-size call gives, `undo`
// reverts a successful call).  Also checks each flag bit is EOPNOTSUPP.
// `min_size` is the size of the struct's first version, when it has grown since.
template <typename T, typename Undo>
void CheckAbi(int fd, unsigned long cmd, const T &valid, int expect_ok, Undo undo,
              uint32_t min_size = sizeof(T)) {
  for (uint32_t size : {0u, 4u, min_size - 4}) {
    Sized<T> arg(size);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = size;
    EXPECT_EQ(Ioctl(fd, cmd, arg.Get()), EINVAL) << "short size " << size;
  }
  {
    Sized<T> arg(sizeof(T) + 8, 0x5a);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = sizeof(T) + 8;
    EXPECT_EQ(Ioctl(fd, cmd, arg.Get()), E2BIG) << "long struct with garbage tail";
  }
  {
    Sized<T> arg(sizeof(T) + 8, 0);
    std::memcpy(static_cast<void *>(arg.Get()), &valid, sizeof(T));
    arg.Get()->size = sizeof(T) + 8;
    EXPECT_EQ(Ioctl(fd, cmd, arg.Get()), expect_ok) << "long struct with zero tail";
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(arg.Tail()[i], 0) << "tail byte " << i << " written";
    }
    if (expect_ok == 0) {
      undo(*arg.Get());
    }
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
