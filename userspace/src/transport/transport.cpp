// SPDX-License-Identifier: Apache-2.0
#include "transport/transport.h"

#include <unistd.h>

#include <atomic>
#include <mutex>

#include "base/config.h"
#include "base/log.h"
#include "transport/kernel.h"
#include "transport/memfd.h"

namespace hzc::transport {

const char *KindName(Kind kind) {
  return kind == Kind::kKernel ? "kernel" : "memfd";
}

Status CheckPeerRank(uint32_t peer, size_t nranks) {
  if (peer >= nranks) {
    return Error(HCCL_E_PARA, "rank={}: the communicator has {} ranks", peer, nranks);
  }
  return Status::Ok();
}

Status CheckPeerArgs(uint32_t peer, size_t nranks, uintptr_t va, size_t len) {
  HZC_RETURN_IF_ERROR(CheckPeerRank(peer, nranks));
  if (len == 0) {
    return Error(HCCL_E_PARA, "size=0: must not be 0");
  }
  if (va > UINTPTR_MAX - len) {
    return Error(HCCL_E_PARA, "peer address {:#x} size {:#x}: wraps around", va, len);
  }
  return Status::Ok();
}

Expected<Kind> Chosen() {
  const Config &config = GetConfig();
  const bool present = ::access(config.device_path.c_str(), F_OK) == 0;
  switch (config.transport) {
    case TransportChoice::kKernel:
      if (!present) {
        return Error(HCCL_E_NOT_FOUND,
                     "HZC_TRANSPORT=kernel: {} is absent: the kernel module hzc.ko is not loaded "
                     "(modprobe hzc), or choose HZC_TRANSPORT=memfd",
                     config.device_path);
      }
      return Kind::kKernel;
    case TransportChoice::kMemfd:
      return Kind::kMemfd;
    case TransportChoice::kAuto:
      break;
  }
  if (present) {
    return Kind::kKernel;
  }
  static std::once_flag logged;
  std::call_once(logged, [&] {
    LogInfo(
        "{} is absent (hzc.ko not loaded): peers reach activated memory through memfds "
        "(HZC_TRANSPORT=memfd; see the README for what that gives up)",
        config.device_path);
  });
  return Kind::kMemfd;
}

Expected<Transport *> Process() {
  static std::atomic<Transport *> chosen{nullptr};
  if (Transport *t = chosen.load(std::memory_order_acquire)) {
    return t;
  }
  auto kind = Chosen();
  if (!kind.ok()) {
    return kind.status();  // not kept: the module may be loaded before the next call
  }
  Transport *made = *kind == Kind::kKernel ? static_cast<Transport *>(new KernelTransport())
                                           : new MemfdTransport();
  Transport *expected = nullptr;
  if (!chosen.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    delete made;  // another thread chose first
    return expected;
  }
  return made;
}

}  // namespace hzc::transport
