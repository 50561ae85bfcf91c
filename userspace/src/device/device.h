// SPDX-License-Identifier: Apache-2.0
// RAII wrapper of /dev/hzc: one open file per process (the kernel binds the context to the
// opener's mm), one typed method per ioctl. The module's ABI (<linux/hzc.h>) stays inside
// device/: the methods take and return the library's own types.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc {

// The HcclResult for errno @err of the module's ioctl @request (HZC_IOC_*): caller mistakes
// are E_PARA, limits E_UNAVAIL or E_MEMORY, a broken domain E_REMOTE, anything unexpected
// E_DRV. The board's keys and blob sizes are the library's own, so a second publish under a
// key (BOARD_PUT EEXIST) and a blob larger than the stride (BOARD_WAIT EMSGSIZE) are
// E_INTERNAL; a range that is gone (LIST_ACTIVATIONS ENOENT) is E_NOT_FOUND.
HcclResult ResultOfErrno(unsigned long request, int err);

// The ranks whose bit is set in @bits (bit r of word r / 64), below @nranks.
std::vector<uint32_t> RanksOfBits(std::span<const uint64_t> bits, uint32_t nranks);

class Device {
 public:
  // Open @path O_RDWR|O_CLOEXEC, query INFO and check the ABI version.
  // HCCL_E_DRV naming the path and the cause on any failure.
  static Expected<std::unique_ptr<Device>> Open(const std::string &path);

  // The process's device (GetConfig().device_path), opened on first use and reopened in a
  // forked child. A failure is not cached: a later call tries again.
  static Expected<std::shared_ptr<Device>> Process();

  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  ~Device() = default;

  using DomainId = std::array<uint64_t, 2>;

  // What the module says of itself (HZC_IOC_INFO).
  struct Info {
    uint32_t abi_version = 0;
    uint32_t page_size = 0;
    uint64_t features = 0;          // Feature bits
    uint64_t max_pinned_bytes = 0;  // per user; 0: only RLIMIT_MEMLOCK
    uint32_t max_ranges = 0;        // per context
    uint32_t max_domains = 0;       // in the system
    uint32_t max_ranks = 0;         // per domain
    uint32_t max_blob_size = 0;     // bytes one member publishes under one board key
  };
  // Bits of Info::features: what the module supports.
  enum Feature : uint64_t {
    kFeatureInfo = uint64_t{1} << 0,
    kFeatureRanges = uint64_t{1} << 1,
    kFeatureActivations = uint64_t{1} << 2,
    kFeatureDomains = uint64_t{1} << 3,
    kFeaturePeerMap = uint64_t{1} << 4,
    kFeatureActivationCookie = uint64_t{1} << 5,
  };
  // Board keys of a domain: 0 .. kBoardKeys - 1.
  static constexpr uint32_t kBoardKeys = 16;

  // A peer's range (HZC_IOC_LIST_RANGES).
  struct RangeDesc {
    uint64_t id = 0;
    uintptr_t base = 0;
    size_t length = 0;
    uint64_t mmap_offset = 0;  // of its window (MapPeerWindow)
    uint32_t nr_activations = 0;
  };
  // One activation of a peer's range (HZC_IOC_LIST_ACTIVATIONS).
  struct ActivationDesc {
    uintptr_t va = 0;
    size_t length = 0;
    uint64_t cookie = 0;
  };

  // HZC_IOC_INFO, asked afresh.
  Expected<Info> QueryInfo() const;

  struct RangeIds {
    uint64_t id = 0;
    uint64_t mmap_offset = 0;
  };
  // HZC_IOC_RANGE_REGISTER / UNREGISTER.
  Expected<RangeIds> RegisterRange(uintptr_t base, size_t length) const;
  Status UnregisterRange(uintptr_t base) const;
  // HZC_IOC_ACTIVATE / DEACTIVATE.
  Status Activate(uintptr_t va, size_t length, uint64_t cookie = 0) const;
  Status Deactivate(uintptr_t va) const;
  // HZC_IOC_DOMAIN_JOIN / LEAVE.
  Status JoinDomain(const DomainId &id, uint32_t rank, uint32_t nranks) const;
  Status LeaveDomain(const DomainId &id, uint32_t rank) const;
  // HZC_IOC_BOARD_PUT / WAIT (codes as ResultOfErrno). On HCCL_E_TIMEOUT, @missing lists the
  // ranks that did not publish. @blobs (optional, nranks * @stride bytes) receives rank r's
  // blob at r * @stride and @lens (optional, nranks entries) each blob's length. A wait
  // interrupted by a signal resumes with what is left of @timeout_ms.
  Status BoardPut(const DomainId &id, uint32_t rank, uint32_t key, const void *blob,
                  uint32_t len) const;
  Status BoardWait(const DomainId &id, uint32_t rank, uint32_t nranks, uint32_t key,
                   uint32_t timeout_ms, std::vector<uint32_t> *missing, void *blobs = nullptr,
                   uint32_t stride = 0, uint32_t *lens = nullptr) const;

  // HZC_IOC_LIST_RANGES: every range of @peer_rank, sorted by base. HCCL_E_REMOTE when the
  // domain broke (a member left or died).
  Expected<std::vector<RangeDesc>> ListRanges(const DomainId &id, uint32_t rank,
                                              uint32_t peer_rank) const;
  // HZC_IOC_LIST_ACTIVATIONS: the activations of range @range_id of @peer_rank, sorted by va.
  // HCCL_E_NOT_FOUND when the range is gone, HCCL_E_REMOTE when the domain broke.
  Expected<std::vector<ActivationDesc>> ListActivations(const DomainId &id, uint32_t rank,
                                                        uint32_t peer_rank,
                                                        uint64_t range_id) const;
  // mmap of a peer range's window (MAP_SHARED, read-write): @length bytes from @mmap_offset.
  Expected<void *> MapPeerWindow(uint64_t mmap_offset, size_t length) const;

  // What INFO said when the device was opened.
  const Info &info() const { return info_; }
  const std::string &path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  // One ioctl; the errno on failure (EINTR retried).
  int Ioctl(unsigned long request, void *arg) const;

  Device(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
  Info info_{};
};

}  // namespace hzc
