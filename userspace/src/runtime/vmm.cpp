// SPDX-License-Identifier: Apache-2.0
#include "runtime/vmm.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "runtime/stream.h"

namespace hzc::runtime {

namespace {

struct Physical {
  UniqueFd fd;
  size_t size = 0;
  size_t granularity = 0;
  bool hugetlb = false;
};

struct Mapping {
  size_t size = 0;
  std::shared_ptr<Physical> physical;
  std::string held;  // why aclrtUnmapMem may not take it now (HoldMapping); empty: it may
};

struct Reservation {
  size_t size = 0;
  std::map<uintptr_t, Mapping> mappings;  // by start address
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Reservation> reservations;               // by base
  std::map<uintptr_t, std::shared_ptr<Physical>> handles;      // by handle value
  std::map<Physical *, std::weak_ptr<Physical>> all_physical;  // for Stats
  uint64_t handles_made = 0;                                   // handle values are never reused
};

State &GetState() {
  static State *const state = new State();  // outlives static destructors
  return *state;
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// The live allocation behind @handle (s.mutex held), or why there is none.
Expected<std::map<uintptr_t, std::shared_ptr<Physical>>::iterator, aclError> FindHandle(
    State &s, aclrtDrvMemHandle handle) {
  auto it = s.handles.find(Addr(handle));
  if (it == s.handles.end()) {
    return Error(ACL_ERROR_RT_INVALID_HANDLE,
                 "handle={}: not a live allocation of aclrtMallocPhysical", handle);
  }
  return it;
}

// Handles are opaque values, not addresses: a stale handle never names a newer allocation.
constexpr uintptr_t kHandleBase = uintptr_t{0x48} << 40;
constexpr uintptr_t kHandleStride = 0x40;

// Enum fields from C callers may hold any int: read them as int, never as the enum type.
template <typename Enum>
int RawEnum(const Enum &field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value = 0;
  std::memcpy(&value, &field, sizeof(value));
  return value;
}

bool IsHugeAttr(int attr) {
  switch (attr) {
    case ACL_DDR_MEM_HUGE:
    case ACL_HBM_MEM_HUGE:
    case ACL_DDR_MEM_P2P_HUGE:
    case ACL_HBM_MEM_P2P_HUGE:
      return true;
    default:
      return false;
  }
}

bool IsGiantAttr(int attr) {
  return attr == ACL_HBM_MEM_HUGE1G || attr == ACL_HBM_MEM_P2P_HUGE1G;
}

bool KnownAttr(int attr) {
  return attr >= ACL_DDR_MEM && attr <= ACL_HBM_MEM_P2P_HUGE1G;
}

// The reservation containing [va, va+size), or end().
std::map<uintptr_t, Reservation>::iterator FindReservation(State &s, uintptr_t va, size_t size) {
  auto it = s.reservations.upper_bound(va);
  if (it == s.reservations.begin()) {
    return s.reservations.end();
  }
  --it;
  if (va - it->first > it->second.size || size > it->second.size - (va - it->first)) {
    return s.reservations.end();
  }
  return it;
}

constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// Where the library picks a reservation's address: the largest granularity of an allocation
// that can be mapped inside @size bytes, since a mapping's address must be a multiple of its
// allocation's granularity and the caller cannot ask for an alignment (it is reserved) nor
// know, when reserving, which allocations it will map: 1 GiB (ACL_HBM_MEM_HUGE1G) when a
// 1 GiB page fits, else 2 MiB (the huge-page attributes), whatever the flags.
size_t BaseAlignment(size_t size) {
  return size >= kGiantPageSize ? kGiantPageSize : kHugePageSize;
}

// A PROT_NONE reservation of @size bytes at an address aligned to @align that the kernel
// picks: over-reserve, then trim both ends. nullptr (errno set) if there is no such hole.
void *ReserveAligned(size_t size, size_t align) {
  const size_t extra = align - PageSize();  // mmap's addresses are page-aligned already
  void *raw = mmap(nullptr, size + extra, PROT_NONE, kReserveFlags, -1, 0);
  if (raw == MAP_FAILED) {
    return nullptr;
  }
  const uintptr_t start = (Addr(raw) + align - 1) / align * align;
  if (const size_t head = start - Addr(raw); head > 0) {
    munmap(raw, head);
  }
  if (const size_t tail = Addr(raw) + size + extra - (start + size); tail > 0) {
    munmap(reinterpret_cast<void *>(start + size), tail);
  }
  return reinterpret_cast<void *>(start);
}

// Try a hugetlb memfd with every page allocated up front; an empty fd if the pool lacks them.
UniqueFd TryHugetlb(size_t size, size_t page) {
  const unsigned int size_flag = page == kGiantPageSize ? MFD_HUGE_1GB : MFD_HUGE_2MB;
  UniqueFd fd(
      memfd_create("hzc-physical", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | size_flag));
  if (!fd.valid()) {
    return fd;
  }
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0 ||
      fallocate(fd.get(), 0, 0, static_cast<off_t>(size)) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    LogDebug("aclrtMallocPhysical: hugetlb pool cannot back {} bytes ({}), using a plain memfd",
             size, ErrnoString(errno));
    fd.reset();
  }
  return fd;
}

}  // namespace

AclStatus Granularity(const aclrtPhysicalMemProp &prop, aclrtMemGranularityOptions option,
                      size_t *out) {
  const int attr = RawEnum(prop.memAttr);
  const int opt = RawEnum(option);
  if (!KnownAttr(attr)) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "prop->memAttr={}: unknown memory attribute", attr);
  }
  if (opt != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM &&
      opt != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "option={}: not MINIMUM (0) or RECOMMENDED (1)", opt);
  }
  size_t g = PageSize();
  if (IsGiantAttr(attr)) {
    g = kGiantPageSize;
  } else if (IsHugeAttr(attr) || opt == ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    g = kHugePageSize;
  }
  *out = g;
  return AclStatus::Ok();
}

AclStatus Reserve(void **out, size_t size, void *expect, uint64_t flags) {
  if (flags > 1) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "flags={:#x}: must be 0 (normal) or 1 (huge pages)",
                 flags);
  }
  if (size == 0) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "size=0: must not be 0");
  }
  const size_t granule = flags == 1 ? kHugePageSize : PageSize();
  if (size > SIZE_MAX - 2 * kGiantPageSize) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "size={:#x}: too large", size);
  }
  const size_t rounded = (size + granule - 1) / granule * granule;
  if (expect != nullptr && Addr(expect) % granule != 0) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "expectPtr={}: not aligned to {:#x}", expect, granule);
  }
  if (expect != nullptr && Addr(expect) > UINTPTR_MAX - rounded) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "expectPtr={}: range wraps around", expect);
  }
  void *base = nullptr;
  if (expect != nullptr) {
    base = mmap(expect, rounded, PROT_NONE, kReserveFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (base == MAP_FAILED) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "expectPtr={} size={:#x}: address not free: {}",
                   expect, rounded, ErrnoString(errno));
    }
    if (base != expect) {  // kernels before 4.17 treat the flag as a hint
      munmap(base, rounded);
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "expectPtr={} size={:#x}: address not free",
                   expect, rounded);
    }
  } else {
    const size_t align = BaseAlignment(rounded);
    base = ReserveAligned(rounded, align);
    if (base == nullptr && align > granule) {
      LogDebug(
          "aclrtReserveMemAddress: no {:#x}-aligned hole for {:#x} bytes ({}), aligning to "
          "{:#x}",
          align, rounded, ErrnoString(errno), granule);
      base = ReserveAligned(rounded, granule);
    }
    if (base == nullptr) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: mmap failed: {}", rounded,
                   ErrnoString(errno));
    }
  }
  State &s = GetState();
  {
    std::lock_guard lock(s.mutex);
    s.reservations[Addr(base)] = Reservation{.size = rounded, .mappings = {}};
  }
  *out = base;
  LogDebug("aclrtReserveMemAddress: reserved [{}, +{:#x})", base, rounded);
  return AclStatus::Ok();
}

AclStatus Release(void *base) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto it = s.reservations.find(Addr(base));
  if (it == s.reservations.end()) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "virPtr={}: not the base of a reservation", base);
  }
  if (!it->second.mappings.empty()) {
    return Error(ACL_ERROR_RT_PARAM_INVALID,
                 "virPtr={}: {} mapping(s) still inside; call aclrtUnmapMem first", base,
                 it->second.mappings.size());
  }
  if (munmap(base, it->second.size) != 0) {
    return Error(ACL_ERROR_RT_INTERNAL_ERROR, "virPtr={}: munmap failed: {}", base,
                 ErrnoString(errno));
  }
  s.reservations.erase(it);
  return AclStatus::Ok();
}

AclStatus MallocPhysical(aclrtDrvMemHandle *out, size_t size, const aclrtPhysicalMemProp &prop) {
  if (const int v = RawEnum(prop.handleType); v != ACL_MEM_HANDLE_TYPE_NONE) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "prop->handleType={}: only NONE (0) is supported", v);
  }
  if (const int v = RawEnum(prop.allocationType); v != ACL_MEM_ALLOCATION_TYPE_PINNED) {
    return Error(ACL_ERROR_RT_PARAM_INVALID,
                 "prop->allocationType={}: only PINNED (0) is supported", v);
  }
  if (const int v = RawEnum(prop.location.type);
      v != ACL_MEM_LOCATION_TYPE_HOST && v != ACL_MEM_LOCATION_TYPE_DEVICE) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "prop->location.type={}: not HOST or DEVICE", v);
  }
  if (prop.reserve != 0) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "prop->reserve={:#x}: reserved, must be 0",
                 prop.reserve);
  }
  size_t g = 0;
  if (AclStatus st = Granularity(prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g); !st.ok()) {
    return st;
  }
  if (size == 0 || size % g != 0) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "size={:#x}: not a non-zero multiple of {:#x}", size,
                 g);
  }
  if (size > static_cast<size_t>(INT64_MAX)) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "size={:#x}: too large", size);
  }
  auto phys = std::make_shared<Physical>();
  phys->size = size;
  phys->granularity = g;
  if (g > PageSize()) {
    phys->fd = TryHugetlb(size, g);
    phys->hugetlb = phys->fd.valid();
  }
  if (!phys->fd.valid()) {
    phys->fd.reset(memfd_create("hzc-physical", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!phys->fd.valid()) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: memfd_create failed: {}", size,
                   ErrnoString(errno));
    }
    if (ftruncate(phys->fd.get(), static_cast<off_t>(size)) != 0) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: ftruncate failed: {}", size,
                   ErrnoString(errno));
    }
    // Allocate now, so running out of memory is this call's error and not a later SIGBUS.
    if (int err = posix_fallocate(phys->fd.get(), 0, static_cast<off_t>(size)); err != 0) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: cannot allocate: {}", size,
                   ErrnoString(err));
    }
    // Peers that map it (the memfd transport) must not see it shrink under them.
    if (fcntl(phys->fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "size={:#x}: cannot seal the memfd: {}", size,
                   ErrnoString(errno));
    }
  }
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  const uintptr_t key = kHandleBase + (++s.handles_made) * kHandleStride;
  s.all_physical[phys.get()] = phys;
  s.handles[key] = std::move(phys);
  *out = reinterpret_cast<aclrtDrvMemHandle>(key);
  return AclStatus::Ok();
}

AclStatus FreePhysical(aclrtDrvMemHandle handle) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto it = FindHandle(s, handle);
  if (!it.ok()) {
    return it.status();
  }
  s.handles.erase(*it);  // mappings still hold the memory
  return AclStatus::Ok();
}

AclStatus Map(void *va, size_t size, aclrtDrvMemHandle handle) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto hit = FindHandle(s, handle);
  if (!hit.ok()) {
    return hit.status();
  }
  const std::shared_ptr<Physical> &phys = (*hit)->second;
  if (size != phys->size) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "size={:#x}: the allocation has {:#x} bytes", size,
                 phys->size);
  }
  if (Addr(va) % phys->granularity != 0) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "virPtr={}: not aligned to {:#x}", va,
                 phys->granularity);
  }
  auto rit = FindReservation(s, Addr(va), size);
  if (rit == s.reservations.end()) {
    return Error(ACL_ERROR_RT_PARAM_INVALID,
                 "virPtr={} size={:#x}: not inside one aclrtReserveMemAddress reservation", va,
                 size);
  }
  auto &maps = rit->second.mappings;
  auto next = maps.lower_bound(Addr(va));
  if (next != maps.end() && next->first < Addr(va) + size) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "virPtr={} size={:#x}: overlaps the mapping at {:#x}",
                 va, size, next->first);
  }
  if (next != maps.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > Addr(va)) {
      return Error(ACL_ERROR_RT_PARAM_INVALID,
                   "virPtr={} size={:#x}: overlaps the mapping at {:#x}", va, size, prev->first);
    }
  }
  void *p = mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, phys->fd.get(), 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    // MAP_FIXED may have replaced part of the reservation: restore it.
    mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return Error(ACL_ERROR_RT_MEMORY_ALLOCATION, "virPtr={} size={:#x}: mmap failed: {}", va, size,
                 ErrnoString(err));
  }
  if (!phys->hugetlb && phys->granularity > PageSize()) {
    madvise(va, size, MADV_HUGEPAGE);  // best effort: THP for shmem may be disabled
  }
  maps[Addr(va)] = Mapping{.size = size, .physical = phys, .held = {}};
  return AclStatus::Ok();
}

AclStatus Unmap(void *va) {
  WaitAllStreams();  // work queued before the call may still use the mapping
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto rit = FindReservation(s, Addr(va), 1);
  if (rit == s.reservations.end() || !rit->second.mappings.contains(Addr(va))) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "virPtr={}: not the start of an aclrtMapMem mapping",
                 va);
  }
  auto *maps = &rit->second.mappings;
  auto mit = maps->find(Addr(va));
  if (!mit->second.held.empty()) {
    return Error(ACL_ERROR_RT_PARAM_INVALID, "virPtr={}: {}", va, mit->second.held);
  }
  void *p = mmap(va, mit->second.size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) {
    return Error(ACL_ERROR_RT_INTERNAL_ERROR, "virPtr={}: cannot restore the reservation: {}", va,
                 ErrnoString(errno));
  }
  maps->erase(mit);
  return AclStatus::Ok();
}

std::string CheckMapped(void *va, size_t size, aclrtDrvMemHandle handle) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto hit = FindHandle(s, handle);
  if (!hit.ok()) {
    return hit.status().message();
  }
  auto rit = FindReservation(s, Addr(va), 1);
  if (rit != s.reservations.end()) {
    auto mit = rit->second.mappings.find(Addr(va));
    if (mit != rit->second.mappings.end() && mit->second.physical == (*hit)->second) {
      if (mit->second.size != size) {
        return fmt::format("size={:#x}: the allocation mapped at {} has {:#x} bytes", size, va,
                           mit->second.size);
      }
      return "";
    }
  }
  return fmt::format("virPtr={}: handle {} is not mapped there (aclrtMapMem)", va, handle);
}

std::vector<MappedBlock> MappingsFrom(const void *p, size_t size) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  std::vector<MappedBlock> out;
  uintptr_t va = Addr(p);
  if (size == 0 || va > UINTPTR_MAX - size) {
    return out;
  }
  const uintptr_t end = va + size;
  auto rit = FindReservation(s, va, 1);
  if (rit == s.reservations.end()) {
    return out;
  }
  const auto &maps = rit->second.mappings;
  for (auto mit = maps.find(va); mit != maps.end() && mit->first == va && va < end; ++mit) {
    MappedBlock b{.va = va, .size = mit->second.size, .handle = nullptr};
    for (const auto &[key, phys] : s.handles) {
      if (phys == mit->second.physical) {
        b.handle = reinterpret_cast<aclrtDrvMemHandle>(key);
        break;
      }
    }
    out.push_back(b);
    va += mit->second.size;
  }
  if (va < end) {
    out.clear();  // a gap before the end
  }
  return out;
}

bool HoldMapping(const void *va, std::string why) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto rit = FindReservation(s, Addr(va), 1);
  if (rit == s.reservations.end()) {
    return false;
  }
  auto mit = rit->second.mappings.find(Addr(va));
  if (mit == rit->second.mappings.end()) {
    return false;
  }
  mit->second.held = std::move(why);
  return true;
}

void ReleaseMapping(const void *va) {
  (void)HoldMapping(va, std::string());
}

int PhysicalFdAt(const void *va) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  auto rit = FindReservation(s, Addr(va), 1);
  if (rit == s.reservations.end()) {
    return -1;
  }
  auto mit = rit->second.mappings.find(Addr(va));
  return mit == rit->second.mappings.end() ? -1 : mit->second.physical->fd.get();
}

bool InMappedMemory(const void *p, size_t size) {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  uintptr_t va = Addr(p);
  if (size == 0 || va > UINTPTR_MAX - size) {
    return false;
  }
  const uintptr_t end = va + size;
  auto rit = FindReservation(s, va, 1);
  if (rit == s.reservations.end()) {
    return false;
  }
  const auto &maps = rit->second.mappings;
  auto mit = maps.upper_bound(va);
  if (mit == maps.begin()) {
    return false;
  }
  --mit;
  // Walk the mappings from the one containing @va while each ends where the next begins.
  while (mit != maps.end() && mit->first <= va && va < mit->first + mit->second.size) {
    va = mit->first + mit->second.size;
    if (va >= end) {
      return true;
    }
    ++mit;
  }
  return false;
}

Stats GetStats() {
  State &s = GetState();
  std::lock_guard lock(s.mutex);
  Stats st;
  st.reservations = s.reservations.size();
  st.live_handles = s.handles.size();
  for (auto it = s.all_physical.begin(); it != s.all_physical.end();) {
    if (it->second.expired()) {
      it = s.all_physical.erase(it);
    } else {
      ++it;
    }
  }
  st.physical_objects = s.all_physical.size();
  for (const auto &[base, r] : s.reservations) {
    st.mappings += r.mappings.size();
  }
  return st;
}

}  // namespace hzc::runtime
