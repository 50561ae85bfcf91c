// SPDX-License-Identifier: Apache-2.0
#include "runtime/memory.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "base/errno_string.h"
#include "base/unique_mapping.h"
#include "runtime/stream.h"
#include "runtime/vmm.h"

#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << 26)
#endif

namespace hzc::runtime {

namespace {

constexpr size_t kSmallHuge = size_t{1} << 20;  // HUGE_FIRST uses normal pages up to this
constexpr uint32_t kPageKinds = 0xFF;
constexpr uint32_t kBandwidth = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH;
// Larger sizes cannot be mapped; refusing them first keeps the rounding from overflowing.
constexpr size_t kMaxSize = SIZE_MAX >> 2;

struct Block {
  size_t size = 0;  // as asked
  bool device = false;
  UniqueMapping mapping;
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Block> blocks;  // by start address
};

State &Memory() {
  static auto *const state = new State();  // outlives static destructors
  return *state;
}

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

constexpr int kAnon = MAP_PRIVATE | MAP_ANONYMOUS;

// @size bytes of transparent huge pages: a 2 MiB-aligned part of a larger mapping.
UniqueMapping ThpMapping(size_t size) {
  const size_t len = RoundUp(size, kHugePageSize);
  UniqueMapping over = UniqueMapping::Map(len + kHugePageSize, PROT_READ | PROT_WRITE, kAnon, -1);
  if (!over.valid()) {
    return {};
  }
  const uintptr_t start = Addr(over.get());
  const uintptr_t aligned = RoundUp(start, kHugePageSize);
  const size_t total = over.size();
  over.release();
  if (aligned > start) {
    munmap(reinterpret_cast<void *>(start), aligned - start);
  }
  const uintptr_t end = start + total;
  if (end > aligned + len) {
    munmap(reinterpret_cast<void *>(aligned + len), end - aligned - len);
  }
  UniqueMapping m(reinterpret_cast<void *>(aligned), len);
  madvise(m.get(), len, MADV_HUGEPAGE);  // best effort: THP may be disabled
  return m;
}

// The mapping of an aclrtMalloc block of @size bytes with page kind @kind.
UniqueMapping MapDevice(size_t size, uint32_t kind) {
  const int prot = PROT_READ | PROT_WRITE;
  switch (kind) {
    case ACL_MEM_MALLOC_NORMAL_ONLY:
    case ACL_MEM_MALLOC_NORMAL_ONLY_P2P:
      return UniqueMapping::Map(RoundUp(size, PageSize()), prot, kAnon, -1);
    case ACL_MEM_MALLOC_HUGE1G_ONLY:
    case ACL_MEM_MALLOC_HUGE1G_ONLY_P2P:
      return UniqueMapping::Map(RoundUp(size, kGiantPageSize), prot,
                                kAnon | MAP_HUGETLB | MAP_HUGE_1GB, -1);
    case ACL_MEM_MALLOC_HUGE_FIRST:
    case ACL_MEM_MALLOC_HUGE_FIRST_P2P:
      if (size <= kSmallHuge) {
        return UniqueMapping::Map(RoundUp(size, PageSize()), prot, kAnon, -1);
      }
      [[fallthrough]];
    default: {  // HUGE_ONLY(_P2P)
      UniqueMapping m =
          UniqueMapping::Map(RoundUp(size, kHugePageSize), prot, kAnon | MAP_HUGETLB, -1);
      return m.valid() ? std::move(m) : ThpMapping(size);
    }
  }
}

// @size is 1..kMaxSize.
AclStatus CheckSize(size_t size) {
  if (size == 0) {
    return Error(ACL_ERROR_INVALID_PARAM, "size=0: must not be 0");
  }
  if (size > kMaxSize) {
    return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: too large", size);
  }
  return AclStatus::Ok();
}

AclStatus CheckPolicy(uint32_t policy) {
  if ((policy & ACL_MEM_ACCESS_USER_SPACE_READONLY) != 0) {
    return Error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                 "policy={:#x}: ACL_MEM_ACCESS_USER_SPACE_READONLY is not supported", policy);
  }
  if ((policy & ~(kPageKinds | kBandwidth)) != 0 ||
      (policy & kPageKinds) > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P ||
      (policy & kBandwidth) == kBandwidth) {
    return Error(ACL_ERROR_INVALID_PARAM, "policy={:#x}: not an aclrtMemMallocPolicy", policy);
  }
  return AclStatus::Ok();
}

AclStatus Register(void **out, size_t size, bool device, UniqueMapping mapping) {
  const uintptr_t start = Addr(mapping.get());
  State &s = Memory();
  const std::lock_guard lock(s.mu);
  s.blocks[start] = Block{.size = size, .device = device, .mapping = std::move(mapping)};
  *out = reinterpret_cast<void *>(start);
  return AclStatus::Ok();
}

AclStatus Unregister(void *p, bool device) {
  const char *name = device ? "devPtr" : "hostPtr";
  UniqueMapping gone;  // unmapped after the lock is released
  State &s = Memory();
  const std::lock_guard lock(s.mu);
  auto it = s.blocks.find(Addr(p));
  if (it == s.blocks.end()) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "{}={}: not the start of a block of {}", name, p,
                 device ? "aclrtMalloc" : "aclrtMallocHost");
  }
  if (it->second.device != device) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "{}={}: a block of {} (free it with {})", name, p,
                 device ? "aclrtMallocHost" : "aclrtMalloc",
                 device ? "aclrtFreeHost" : "aclrtFree");
  }
  gone = std::move(it->second.mapping);
  s.blocks.erase(it);
  return AclStatus::Ok();
}

// Whether a byte of [p, p + size) lies in an aclrtMalloc block; the caller holds the lock.
bool TouchesBlock(const State &s, uintptr_t p, size_t size) {
  auto it = s.blocks.lower_bound(p + size);  // first block starting at or after the end
  while (it != s.blocks.begin()) {
    --it;
    if (it->first + it->second.size <= p) {
      return false;  // blocks do not overlap each other, so earlier ones end earlier
    }
    if (it->second.device) {
      return true;
    }
  }
  return false;
}

bool InBlock(const State &s, uintptr_t p, size_t size) {
  auto it = s.blocks.upper_bound(p);
  if (it == s.blocks.begin()) {
    return false;
  }
  --it;
  return it->second.device && p - it->first < it->second.size &&
         size <= it->second.size - (p - it->first);
}

}  // namespace

AclStatus Malloc(void **out, size_t size, uint32_t policy) {
  HZC_RETURN_IF_ERROR(CheckSize(size));
  HZC_RETURN_IF_ERROR(CheckPolicy(policy));
  UniqueMapping m = MapDevice(size, policy & kPageKinds);
  if (!m.valid()) {
    return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x} policy={:#x}: mmap failed: {}", size,
                 policy, ErrnoString(errno));
  }
  return Register(out, size, true, std::move(m));
}

AclStatus Free(void *p) {
  WaitAllStreams();  // work queued before the call may still use the block
  return Unregister(p, true);
}

AclStatus MallocHost(void **out, size_t size) {
  HZC_RETURN_IF_ERROR(CheckSize(size));
  UniqueMapping m =
      UniqueMapping::Map(RoundUp(size, PageSize()), PROT_READ | PROT_WRITE, kAnon, -1);
  if (!m.valid()) {
    return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: mmap failed: {}", size,
                 ErrnoString(errno));
  }
  return Register(out, size, false, std::move(m));
}

AclStatus FreeHost(void *p) {
  WaitAllStreams();  // work queued before the call may still use the block
  return Unregister(p, false);
}

bool InDeviceMemory(const void *p, size_t size) {
  if (size == 0 || Addr(p) > UINTPTR_MAX - size) {
    return false;
  }
  {
    State &s = Memory();
    const std::lock_guard lock(s.mu);
    if (InBlock(s, Addr(p), size)) {
      return true;
    }
  }
  return InMappedMemory(p, size);
}

namespace {

// Whether any byte of [p, p + size) is device memory (blocks), or either end (mappings).
bool TouchesDeviceMemory(const void *p, size_t size) {
  {
    State &s = Memory();
    const std::lock_guard lock(s.mu);
    if (TouchesBlock(s, Addr(p), size)) {
      return true;
    }
  }
  return InMappedMemory(p, 1) || InMappedMemory(static_cast<const char *>(p) + size - 1, 1);
}

enum class Side { kHost, kDevice, kEither };

// The sides (dst, src) of @kind; false for a kind that is not an aclrtMemcpyKind.
bool KindSides(int kind, Side *dst, Side *src) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      *dst = Side::kHost, *src = Side::kHost;
      return true;
    case ACL_MEMCPY_HOST_TO_DEVICE:
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE:
      *dst = Side::kDevice, *src = Side::kHost;
      return true;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      *dst = Side::kHost, *src = Side::kDevice;
      return true;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE:
      *dst = Side::kDevice, *src = Side::kDevice;
      return true;
    case ACL_MEMCPY_DEFAULT:
      *dst = Side::kEither, *src = Side::kEither;
      return true;
    default:
      return false;
  }
}

// [p, p + count) (argument @name) is memory of @side for @kind.
AclStatus CheckSide(const void *p, size_t count, Side side, const char *name, int kind) {
  const bool device = InDeviceMemory(p, count);
  const bool touches = device || TouchesDeviceMemory(p, count);
  if (side == Side::kDevice && !device) {
    return Error(ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                 "{}={} count={:#x}: not inside device memory (aclrtMalloc, aclrtMapMem) as kind "
                 "{} needs",
                 name, p, count, kind);
  }
  if (side == Side::kHost && touches) {
    return Error(ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                 "{}={} count={:#x}: device memory, but kind {} needs host memory", name, p, count,
                 kind);
  }
  if (side == Side::kEither && touches && !device) {
    return Error(ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                 "{}={} count={:#x}: partly device memory, partly host memory", name, p, count);
  }
  return AclStatus::Ok();
}

}  // namespace

AclStatus CheckMemcpy(void *dst, size_t dest_max, const void *src, size_t count, int kind) {
  Side dst_side = Side::kHost;
  Side src_side = Side::kHost;
  if (!KindSides(kind, &dst_side, &src_side)) {
    return Error(ACL_ERROR_INVALID_PARAM, "kind={}: not an aclrtMemcpyKind", kind);
  }
  if (count > dest_max) {
    return Error(ACL_ERROR_INVALID_PARAM, "count={:#x}: more than destMax={:#x}", count, dest_max);
  }
  if (count == 0) {
    return AclStatus::Ok();
  }
  if (Addr(dst) > UINTPTR_MAX - count || Addr(src) > UINTPTR_MAX - count) {
    return Error(ACL_ERROR_INVALID_PARAM, "count={:#x}: passes the end of the address space",
                 count);
  }
  HZC_RETURN_IF_ERROR(CheckSide(dst, count, dst_side, "dst", kind));
  return CheckSide(src, count, src_side, "src", kind);
}

AclStatus CheckMemset(void *p, size_t max_count, size_t count) {
  if (count > max_count) {
    return Error(ACL_ERROR_INVALID_PARAM, "count={:#x}: more than maxCount={:#x}", count,
                 max_count);
  }
  if (count != 0 && !InDeviceMemory(p, count)) {
    return Error(ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                 "devPtr={} count={:#x}: not inside device memory (aclrtMalloc, aclrtMapMem)", p,
                 count);
  }
  return AclStatus::Ok();
}

AclStatus MemInfo(int attr, size_t *free, size_t *total) {
  if (attr < ACL_DDR_MEM || attr > ACL_HBM_MEM_P2P_HUGE1G) {
    return Error(ACL_ERROR_INVALID_PARAM, "attr={}: not an aclrtMemAttr", attr);
  }
  struct sysinfo info {};
  if (sysinfo(&info) != 0) {
    return Error(ACL_ERROR_RT_INTERNAL_ERROR, "sysinfo failed: {}", ErrnoString(errno));
  }
  *free = static_cast<size_t>(info.freeram) * info.mem_unit;
  *total = static_cast<size_t>(info.totalram) * info.mem_unit;
  return AclStatus::Ok();
}

MemoryStats GetMemoryStats() {
  State &s = Memory();
  const std::lock_guard lock(s.mu);
  MemoryStats st;
  for (const auto &[addr, b] : s.blocks) {
    ++(b.device ? st.device_blocks : st.host_blocks);
  }
  return st;
}

}  // namespace hzc::runtime
