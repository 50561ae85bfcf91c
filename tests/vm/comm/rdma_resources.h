// SPDX-License-Identifier: Apache-2.0
// What the guest's RDMA side looks like to the communicator tests: whether an RDMA device
// exists (soft-RoCE rxe0 under scripts/vm-run) and which RDMA objects `rdma resource show`
// lists.
#pragma once

#include <sys/types.h>

#include <cstdlib>
#include <string>

#include "rdma_tool.h"

namespace hzc::test {

// True when /sys/class/infiniband lists a device and HZC_RDMA_DEVICE is unset, i.e. when
// the library's links include RDMA queue pairs.
inline bool RdmaLinksExpected() {
  return std::getenv("HZC_RDMA_DEVICE") == nullptr && HaveRdmaDevice();
}

// Objects of @kind of task @pid. The kernel files each object under the thread that made it:
// objects made by another thread carry its thread id, and none once that thread has exited.
inline int RdmaObjects(const std::string &kind, pid_t pid) {
  return ShowAndCountRdmaObjects(kind,
                                 [&](const nlohmann::json &o) { return RdmaObjectOf(o, pid); });
}

// Objects of @kind made by user processes, including those whose thread has exited (kernel
// objects carry the owner's name in "comm" but no "pid").
inline int RdmaUserObjects(const std::string &kind) {
  return ShowAndCountRdmaObjects(
      kind, [](const nlohmann::json &o) { return o.contains("pid") || !o.contains("comm"); });
}

}  // namespace hzc::test
