// SPDX-License-Identifier: Apache-2.0
#include "verbs/ibv.h"

#include <cerrno>

#include "base/errno_string.h"
#include "base/log.h"

namespace hzc::verbs {

namespace {

// The ibv_destroy_* and ibv_dealloc_* calls return an errno value (some providers return -1
// and set errno instead).
int ErrOf(int ret) {
  return ret > 0 ? ret : errno;
}

}  // namespace

void DeviceListDeleter::operator()(ibv_device **list) const noexcept {
  ibv_free_device_list(list);
}

void ContextDeleter::operator()(ibv_context *ctx) const noexcept {
  if (int ret = ibv_close_device(ctx); ret != 0) {
    LogWarn("verbs: ibv_close_device failed: {}", ErrnoString(ErrOf(ret)));
  }
}

void PdDeleter::operator()(ibv_pd *pd) const noexcept {
  if (int ret = ibv_dealloc_pd(pd); ret != 0) {
    LogWarn("verbs: ibv_dealloc_pd failed: {}", ErrnoString(ErrOf(ret)));
  }
}

void CompChannelDeleter::operator()(ibv_comp_channel *channel) const noexcept {
  if (int ret = ibv_destroy_comp_channel(channel); ret != 0) {
    LogWarn("verbs: ibv_destroy_comp_channel failed: {}", ErrnoString(ErrOf(ret)));
  }
}

void CqDeleter::operator()(ibv_cq *cq) const noexcept {
  if (int ret = ibv_destroy_cq(cq); ret != 0) {
    LogWarn("verbs: ibv_destroy_cq failed: {}", ErrnoString(ErrOf(ret)));
  }
}

void QpDeleter::operator()(ibv_qp *qp) const noexcept {
  const uint32_t qpn = qp->qp_num;
  if (int ret = ibv_destroy_qp(qp); ret != 0) {
    LogWarn("verbs: ibv_destroy_qp of qp {:#x} failed: {}", qpn, ErrnoString(ErrOf(ret)));
  }
}

void MrDeleter::operator()(ibv_mr *mr) const noexcept {
  const void *addr = mr->addr;
  if (int ret = ibv_dereg_mr(mr); ret != 0) {
    LogWarn("verbs: ibv_dereg_mr of {} failed: {}", addr, ErrnoString(ErrOf(ret)));
  }
}

void MwDeleter::operator()(ibv_mw *mw) const noexcept {
  if (int ret = ibv_dealloc_mw(mw); ret != 0) {
    LogWarn("verbs: ibv_dealloc_mw failed: {}", ErrnoString(ErrOf(ret)));
  }
}

Status ConnectError(std::string_view call, int err, std::string_view what) {
  return Error(HCCL_E_ROCE_CONNECT, "verbs: {} failed ({}): {}", call, what, ErrnoString(err));
}

}  // namespace hzc::verbs
