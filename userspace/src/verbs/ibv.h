// SPDX-License-Identifier: Apache-2.0
// RAII owners of libibverbs objects: one unique_ptr type per ibv_* object whose deleter
// releases it, logs a failure and never throws; a scope guard for undo-on-failure.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace hzc::verbs {

// Deleters: each logs "verbs: ibv_xxx failed: <errno>" on failure and carries on.
struct DeviceListDeleter {
  void operator()(ibv_device **list) const noexcept;
};
struct ContextDeleter {
  void operator()(ibv_context *ctx) const noexcept;
};
struct PdDeleter {
  void operator()(ibv_pd *pd) const noexcept;
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel *channel) const noexcept;
};
struct CqDeleter {
  void operator()(ibv_cq *cq) const noexcept;
};
struct QpDeleter {
  void operator()(ibv_qp *qp) const noexcept;
};
struct MrDeleter {
  void operator()(ibv_mr *mr) const noexcept;
};
struct MwDeleter {
  void operator()(ibv_mw *mw) const noexcept;
};

using DeviceListPtr = std::unique_ptr<ibv_device *, DeviceListDeleter>;
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using MwPtr = std::unique_ptr<ibv_mw, MwDeleter>;

// HCCL_E_ROCE_CONNECT naming the verbs call and the errno (set by libibverbs, or returned by
// the calls that return it), for link-setup failures.
Status ConnectError(std::string_view call, int err, std::string_view what);

}  // namespace hzc::verbs
