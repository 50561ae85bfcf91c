// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <cstddef>
#include <utility>

namespace hzc {

// Owns one mmap'd region [get(), get() + size()); unmaps it on destruction.
class UniqueMapping {
 public:
  UniqueMapping() = default;
  // Adopt @p (nullptr or MAP_FAILED: nothing) of @len bytes.
  UniqueMapping(void *p, size_t len) { reset(p, len); }
  UniqueMapping(UniqueMapping &&other) noexcept
      : p_(std::exchange(other.p_, nullptr)), len_(std::exchange(other.len_, 0)) {}
  UniqueMapping &operator=(UniqueMapping &&other) noexcept {
    if (this != &other) {
      const size_t len = std::exchange(other.len_, 0);
      reset(std::exchange(other.p_, nullptr), len);
    }
    return *this;
  }
  UniqueMapping(const UniqueMapping &) = delete;
  UniqueMapping &operator=(const UniqueMapping &) = delete;
  ~UniqueMapping() { reset(); }

  // mmap(2) of @len bytes; an invalid mapping (errno set) when it fails.
  static UniqueMapping Map(size_t len, int prot, int flags, int fd, off_t offset = 0) {
    return UniqueMapping(::mmap(nullptr, len, prot, flags, fd, offset), len);
  }

  void *get() const { return p_; }
  template <typename T>
  T *as() const {
    return static_cast<T *>(p_);
  }
  size_t size() const { return len_; }
  bool valid() const { return p_ != nullptr; }
  // Give up ownership: the caller unmaps the region.
  void *release() {
    len_ = 0;
    return std::exchange(p_, nullptr);
  }
  void reset(void *p = nullptr, size_t len = 0) {
    if (p_ != nullptr) {
      ::munmap(p_, len_);
    }
    const bool none = p == nullptr || p == MAP_FAILED;
    p_ = none ? nullptr : p;
    len_ = none ? 0 : len;
  }

 private:
  void *p_ = nullptr;
  size_t len_ = 0;
};

}  // namespace hzc
