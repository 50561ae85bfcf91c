// SPDX-License-Identifier: Apache-2.0
// RAII wrapper of /dev/hzc: one open file per process (the kernel binds the context to the
// opener's mm), one typed method per ioctl.
#pragma once

#include <linux/hzc.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace hzc {

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

  // HZC_IOC_INFO.
  Status Info(hzc_info *out) const;

  // What INFO said when the device was opened.
  const hzc_info &info() const { return info_; }
  const std::string &path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  Device(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
  hzc_info info_{};
};

}  // namespace hzc
