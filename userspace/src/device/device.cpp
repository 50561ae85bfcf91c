// SPDX-License-Identifier: Apache-2.0
#include "device/device.h"

#include <fcntl.h>
#include <linux/hzc.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>

#include "base/config.h"
#include "base/errno_string.h"
#include "base/log.h"
#include "base/process_id.h"

namespace hzc {

static_assert(Device::kBoardKeys == HZC_BOARD_KEYS);
static_assert(Device::kFeatureInfo == HZC_FEATURE_INFO);
static_assert(Device::kFeatureRanges == HZC_FEATURE_RANGES);
static_assert(Device::kFeatureActivations == HZC_FEATURE_ACTIVATIONS);
static_assert(Device::kFeatureDomains == HZC_FEATURE_DOMAINS);
static_assert(Device::kFeaturePeerMap == HZC_FEATURE_PEER_MAP);
static_assert(Device::kFeatureActivationCookie == HZC_FEATURE_ACTIVATION_COOKIE);

namespace {

// An ioctl argument of type @T with its size set.
template <typename T>
T Arg() {
  T arg{};
  arg.size = sizeof(arg);
  return arg;
}

// An ioctl argument of type @T addressed to rank @rank of domain @id.
template <typename T>
T MemberArg(const Device::DomainId &id, uint32_t rank) {
  T arg = Arg<T>();
  arg.domain_id[0] = id[0];
  arg.domain_id[1] = id[1];
  arg.rank = rank;
  return arg;
}

// " (a rank left or died)" after the errno of a broken domain.
const char *BrokenHint(int err) {
  return err == ECONNRESET ? " (a rank left or died)" : "";
}

}  // namespace

Expected<std::unique_ptr<Device>> Device::Open(const std::string &path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    return Error(HCCL_E_DRV, "cannot open {}: {}{}", path, ErrnoString(err),
                 err == ENOENT ? " (is hzc.ko loaded?)" : "");
  }
  std::unique_ptr<Device> dev(new Device(std::move(fd), path));
  auto info = dev->QueryInfo();
  if (!info.ok()) {
    return info.status();
  }
  if (info->abi_version != HZC_ABI_VERSION) {
    return Error(HCCL_E_DRV, "{}: module speaks abi version {}, this library needs {}", path,
                 info->abi_version, HZC_ABI_VERSION);
  }
  dev->info_ = *info;
  LogDebug("device: opened {} (abi {}, page size {}, features {:#x})", path, info->abi_version,
           info->page_size, info->features);
  return dev;
}

Expected<Device::Info> Device::QueryInfo() const {
  auto info = Arg<hzc_info>();
  if (::ioctl(fd_.get(), HZC_IOC_INFO, &info) != 0) {
    const int err = errno;
    if (err == ENOTTY) {
      return Error(HCCL_E_DRV, "{}: info ioctl not understood ({}): not an hzc device", path_,
                   ErrnoString(err));
    }
    return Error(HCCL_E_DRV, "{}: info ioctl failed: {}", path_, ErrnoString(err));
  }
  return Info{
      .abi_version = info.out_abi_version,
      .page_size = info.out_page_size,
      .features = info.out_features,
      .max_pinned_bytes = info.out_max_pinned_bytes,
      .max_ranges = info.out_max_ranges,
      .max_domains = info.out_max_domains,
      .max_ranks = info.out_max_ranks,
      .max_blob_size = info.out_max_blob_size,
  };
}

int Device::Ioctl(unsigned long request, void *arg) const {
  for (;;) {
    if (::ioctl(fd_.get(), request, arg) == 0) {
      return 0;
    }
    if (errno != EINTR) {
      return errno;
    }
  }
}

HcclResult ResultOfErrno(unsigned long request, int err) {
  if ((request == HZC_IOC_BOARD_PUT && err == EEXIST) ||
      (request == HZC_IOC_BOARD_WAIT && err == EMSGSIZE)) {
    return HCCL_E_INTERNAL;
  }
  if (request == HZC_IOC_LIST_ACTIVATIONS && err == ENOENT) {
    return HCCL_E_NOT_FOUND;
  }
  switch (err) {
    case EINVAL:
    case EOVERFLOW:
    case EFAULT:
    case EEXIST:
    case ENOENT:
    case EBUSY:
      return HCCL_E_PARA;
    case ENOMEM:
      return HCCL_E_MEMORY;
    case ENOSPC:
      return HCCL_E_UNAVAIL;
    case ETIMEDOUT:
      return HCCL_E_TIMEOUT;
    case ECONNRESET:
      return HCCL_E_REMOTE;
    case EPERM:
      return HCCL_E_NOT_SUPPORT;
    default:
      return HCCL_E_DRV;
  }
}

std::vector<uint32_t> RanksOfBits(std::span<const uint64_t> bits, uint32_t nranks) {
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < nranks && r / 64 < bits.size(); ++r) {
    if (bits[r / 64] & (1ULL << (r % 64))) {
      ranks.push_back(r);
    }
  }
  return ranks;
}

Expected<Device::RangeIds> Device::RegisterRange(uintptr_t base, size_t length) const {
  auto arg = Arg<hzc_range_register>();
  arg.base = base;
  arg.length = length;
  if (int err = Ioctl(HZC_IOC_RANGE_REGISTER, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_RANGE_REGISTER, err),
                 "kernel refused range [{:#x}, +{:#x}): {}{}", base, length, ErrnoString(err),
                 err == EFAULT ? " (not mapped; reserve it first)" : "");
  }
  return RangeIds{.id = arg.out_id, .mmap_offset = arg.out_mmap_offset};
}

Status Device::UnregisterRange(uintptr_t base) const {
  auto arg = Arg<hzc_range_unregister>();
  arg.base = base;
  if (int err = Ioctl(HZC_IOC_RANGE_UNREGISTER, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_RANGE_UNREGISTER, err),
                 "kernel refused to unregister {:#x}: {}", base, ErrnoString(err));
  }
  return Status::Ok();
}

Status Device::Activate(uintptr_t va, size_t length, uint64_t cookie) const {
  auto arg = Arg<hzc_activate>();
  arg.va = va;
  arg.length = length;
  arg.cookie = cookie;
  if (int err = Ioctl(HZC_IOC_ACTIVATE, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_ACTIVATE, err), "kernel cannot pin [{:#x}, +{:#x}): {}{}",
                 va, length, ErrnoString(err),
                 err == ENOMEM ? " (RLIMIT_MEMLOCK or max_pinned_bytes?)" : "");
  }
  return Status::Ok();
}

Status Device::Deactivate(uintptr_t va) const {
  auto arg = Arg<hzc_deactivate>();
  arg.va = va;
  if (int err = Ioctl(HZC_IOC_DEACTIVATE, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_DEACTIVATE, err), "kernel refused to deactivate {:#x}: {}",
                 va, ErrnoString(err));
  }
  return Status::Ok();
}

Status Device::JoinDomain(const DomainId &id, uint32_t rank, uint32_t nranks) const {
  auto arg = MemberArg<hzc_domain_join>(id, rank);
  arg.nranks = nranks;
  if (int err = Ioctl(HZC_IOC_DOMAIN_JOIN, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_DOMAIN_JOIN, err),
                 "cannot join the kernel domain as rank {} of {}: {}", rank, nranks,
                 ErrnoString(err));
  }
  return Status::Ok();
}

Status Device::LeaveDomain(const DomainId &id, uint32_t rank) const {
  auto arg = MemberArg<hzc_domain_leave>(id, rank);
  if (int err = Ioctl(HZC_IOC_DOMAIN_LEAVE, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_DOMAIN_LEAVE, err),
                 "cannot leave the kernel domain (rank {}): {}", rank, ErrnoString(err));
  }
  return Status::Ok();
}

Status Device::BoardPut(const DomainId &id, uint32_t rank, uint32_t key, const void *blob,
                        uint32_t len) const {
  auto arg = MemberArg<hzc_board_put>(id, rank);
  arg.key = key;
  arg.blob = reinterpret_cast<uintptr_t>(blob);
  arg.blob_len = len;
  if (int err = Ioctl(HZC_IOC_BOARD_PUT, &arg); err != 0) {
    return Error(ResultOfErrno(HZC_IOC_BOARD_PUT, err),
                 "cannot publish on the domain board (key {}): {}", key, ErrnoString(err));
  }
  return Status::Ok();
}

Status Device::BoardWait(const DomainId &id, uint32_t rank, uint32_t nranks, uint32_t key,
                         uint32_t timeout_ms, std::vector<uint32_t> *missing, void *blobs,
                         uint32_t stride, uint32_t *lens) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  const auto deadline = steady_clock::now() + milliseconds(timeout_ms);
  std::vector<uint64_t> bits((nranks + 63) / 64);
  auto arg = MemberArg<hzc_board_wait>(id, rank);
  arg.key = key;
  arg.timeout_ms = timeout_ms;
  arg.missing = reinterpret_cast<uintptr_t>(bits.data());
  arg.blob_lens = reinterpret_cast<uintptr_t>(lens);
  if (blobs != nullptr) {
    arg.blobs = reinterpret_cast<uintptr_t>(blobs);
    arg.blob_stride = stride;
  }
  int err = 0;
  // Not Ioctl(): after a signal the wait resumes with what is left of the timeout.
  while (::ioctl(fd_.get(), HZC_IOC_BOARD_WAIT, &arg) != 0) {
    err = errno;
    if (err != EINTR) {
      break;
    }
    err = 0;
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    arg.timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 0, timeout_ms));
  }
  if (err == ETIMEDOUT && missing != nullptr) {
    *missing = RanksOfBits(bits, nranks);
  }
  if (err != 0) {
    return Error(ResultOfErrno(HZC_IOC_BOARD_WAIT, err), "waiting on the domain board (key {}): {}",
                 key, ErrnoString(err));
  }
  return Status::Ok();
}

Expected<std::vector<Device::RangeDesc>> Device::ListRanges(const DomainId &id, uint32_t rank,
                                                            uint32_t peer_rank) const {
  std::vector<hzc_range_desc> out(8);
  for (;;) {
    auto arg = MemberArg<hzc_list_ranges>(id, rank);
    arg.peer_rank = peer_rank;
    arg.num_ranges = static_cast<uint32_t>(out.size());
    arg.ranges = reinterpret_cast<uintptr_t>(out.data());
    const int err = Ioctl(HZC_IOC_LIST_RANGES, &arg);
    if (err == EMSGSIZE && arg.num_ranges > out.size()) {
      out.resize(arg.num_ranges);
      continue;  // the peer set more ranges meanwhile
    }
    if (err != 0) {
      return Error(ResultOfErrno(HZC_IOC_LIST_RANGES, err),
                   "cannot list the ranges of rank {}: {}{}", peer_rank, ErrnoString(err),
                   BrokenHint(err));
    }
    out.resize(arg.num_ranges);
    std::vector<RangeDesc> ranges;
    ranges.reserve(out.size());
    for (const hzc_range_desc &d : out) {
      ranges.push_back(RangeDesc{.id = d.id,
                                 .base = d.base,
                                 .length = d.length,
                                 .mmap_offset = d.mmap_offset,
                                 .nr_activations = d.nr_activations});
    }
    return ranges;
  }
}

Expected<std::vector<Device::ActivationDesc>> Device::ListActivations(const DomainId &id,
                                                                      uint32_t rank,
                                                                      uint32_t peer_rank,
                                                                      uint64_t range_id) const {
  std::vector<hzc_activation_desc> out(8);
  for (;;) {
    auto arg = MemberArg<hzc_list_activations>(id, rank);
    arg.peer_rank = peer_rank;
    arg.range_id = range_id;
    arg.num_activations = static_cast<uint32_t>(out.size());
    arg.desc_size = sizeof(hzc_activation_desc);
    arg.activations = reinterpret_cast<uintptr_t>(out.data());
    const int err = Ioctl(HZC_IOC_LIST_ACTIVATIONS, &arg);
    if (err == EMSGSIZE && arg.num_activations > out.size()) {
      out.resize(arg.num_activations);
      continue;
    }
    if (err != 0) {
      return Error(ResultOfErrno(HZC_IOC_LIST_ACTIVATIONS, err),
                   "cannot list the activations of range {} of rank {}: {}{}", range_id, peer_rank,
                   ErrnoString(err), BrokenHint(err));
    }
    out.resize(arg.num_activations);
    std::vector<ActivationDesc> activations;
    activations.reserve(out.size());
    for (const hzc_activation_desc &d : out) {
      activations.push_back(ActivationDesc{.va = d.va, .length = d.length, .cookie = d.cookie});
    }
    return activations;
  }
}

Expected<void *> Device::MapPeerWindow(uint64_t mmap_offset, size_t length) const {
  void *p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(),
                   static_cast<off_t>(mmap_offset));
  if (p == MAP_FAILED) {
    const int err = errno;
    return Error(err == ENOMEM ? HCCL_E_MEMORY : HCCL_E_SYSCALL,
                 "cannot map the peer window at offset {:#x} (+{:#x}): {}", mmap_offset, length,
                 ErrnoString(err));
  }
  return p;
}

Expected<std::shared_ptr<Device>> Device::Process() {
  static std::mutex mutex;
  static std::shared_ptr<Device> device;
  static pid_t owner = 0;

  std::lock_guard lock(mutex);
  if (device && owner == ProcessId()) {
    return device;
  }
  // A forked child inherits the parent's file, whose context belongs to the parent's mm.
  device.reset();
  auto opened = Open(GetConfig().device_path);
  if (!opened.ok()) {
    return opened.status();
  }
  device = std::move(opened.value());
  owner = ProcessId();
  return device;
}

}  // namespace hzc
