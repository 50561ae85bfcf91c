// SPDX-License-Identifier: Apache-2.0
// Status and expected types of the core: a result code plus the message that the api layer
// logs once, prefixed with the API name.
#pragma once

#include <fmt/format.h>
#include <hccl/hccl_types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace hzc {

// Code is HcclResult or aclError; 0 means success in both.
template <typename Code>
class [[nodiscard]] BasicStatus {
 public:
  BasicStatus() = default;
  BasicStatus(Code code, std::string message)
      : code_(code), message_(std::make_unique<std::string>(std::move(message))) {}
  // The message lives on the heap only for an error: an ok status, made and dropped on every
  // small call many times over, is a code and a null pointer.
  BasicStatus(const BasicStatus &other)
      : code_(other.code_),
        message_(other.message_ ? std::make_unique<std::string>(*other.message_) : nullptr) {}
  BasicStatus &operator=(const BasicStatus &other) {
    if (this != &other) {
      code_ = other.code_;
      message_ = other.message_ ? std::make_unique<std::string>(*other.message_) : nullptr;
    }
    return *this;
  }
  BasicStatus(BasicStatus &&) noexcept = default;
  BasicStatus &operator=(BasicStatus &&) noexcept = default;
  ~BasicStatus() = default;

  static BasicStatus Ok() { return {}; }

  bool ok() const { return code_ == Code{}; }
  Code code() const { return code_; }
  const std::string &message() const {
    static const std::string &kNone = *new std::string;  // never destroyed: read at exit too
    return message_ ? *message_ : kNone;
  }

 private:
  Code code_{};
  std::unique_ptr<std::string> message_;
};

using Status = BasicStatus<HcclResult>;

// The code a peer reported (@word, read from a message or a page it writes: untrusted) as this
// rank's error: an HcclResult error code as it is, anything else (0, or no such code)
// HCCL_E_REMOTE.
inline HcclResult PeerCode(uint64_t word) {
  const bool known = (word >= HCCL_E_PARA && word <= HCCL_E_OOM) || word == HCCL_E_IN_STATUS;
  return known ? static_cast<HcclResult>(word) : HCCL_E_REMOTE;
}

template <typename Code, typename... Args>
BasicStatus<Code> Error(Code code, fmt::format_string<Args...> format, Args &&...args) {
  return BasicStatus<Code>(code, fmt::format(format, std::forward<Args>(args)...));
}

// A value or the status explaining why there is none.
template <typename T, typename Code = HcclResult>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Expected(BasicStatus<Code> status)               // NOLINT(google-explicit-constructor)
      : status_(std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const BasicStatus<Code> &status() const { return status_; }
  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() { return *value_; }

 private:
  std::optional<T> value_;
  BasicStatus<Code> status_;
};

}  // namespace hzc

// Return early from a function returning a status on failure.
#define HZC_RETURN_IF_ERROR(expr) \
  do {                            \
    auto hzc_status_ = (expr);    \
    if (!hzc_status_.ok()) {      \
      return hzc_status_;         \
    }                             \
  } while (0)
