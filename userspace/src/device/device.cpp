// SPDX-License-Identifier: Apache-2.0
#include "device/device.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "core/config.h"
#include "core/errno_string.h"
#include "core/log.h"

namespace hzc {

Expected<std::unique_ptr<Device>> Device::Open(const std::string &path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    return Error(HCCL_E_DRV, "cannot open {}: {}{}", path, ErrnoString(err),
                 err == ENOENT ? " (is hzc.ko loaded?)" : "");
  }
  std::unique_ptr<Device> dev(new Device(std::move(fd), path));
  hzc_info info{};
  if (Status st = dev->Info(&info); !st.ok()) {
    return st;
  }
  if (info.out_abi_version != HZC_ABI_VERSION) {
    return Error(HCCL_E_DRV, "{}: module speaks abi version {}, this library needs {}", path,
                 info.out_abi_version, HZC_ABI_VERSION);
  }
  dev->info_ = info;
  LogDebug("device: opened {} (abi {}, page size {}, features {:#x})", path, info.out_abi_version,
           info.out_page_size, info.out_features);
  return dev;
}

Status Device::Info(hzc_info *out) const {
  hzc_info info{};
  info.size = sizeof(info);
  if (::ioctl(fd_.get(), HZC_IOC_INFO, &info) != 0) {
    const int err = errno;
    if (err == ENOTTY) {
      return Error(HCCL_E_DRV, "{}: info ioctl not understood ({}): not an hzc device", path_,
                   ErrnoString(err));
    }
    return Error(HCCL_E_DRV, "{}: info ioctl failed: {}", path_, ErrnoString(err));
  }
  *out = info;
  return Status::Ok();
}

Expected<std::shared_ptr<Device>> Device::Process() {
  static std::mutex mutex;
  static std::shared_ptr<Device> device;
  static pid_t owner = 0;

  std::lock_guard lock(mutex);
  if (device && owner == ::getpid()) {
    return device;
  }
  // A forked child inherits the parent's file, whose context belongs to the parent's mm.
  device.reset();
  auto opened = Open(GetConfig().device_path);
  if (!opened.ok()) {
    return opened.status();
  }
  device = std::move(opened.value());
  owner = ::getpid();
  return device;
}

}  // namespace hzc
