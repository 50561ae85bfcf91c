// SPDX-License-Identifier: Apache-2.0
#pragma GCC visibility push(default)
#include <hccl/hccl.h>
#pragma GCC visibility pop

const char *HcclGetErrorString(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS:
      return "success";
    case HCCL_E_PARA:
      return "invalid parameter";
    case HCCL_E_PTR:
      return "null pointer";
    case HCCL_E_MEMORY:
      return "memory error";
    case HCCL_E_INTERNAL:
      return "internal error";
    case HCCL_E_NOT_SUPPORT:
      return "not supported";
    case HCCL_E_NOT_FOUND:
      return "not found";
    case HCCL_E_UNAVAIL:
      return "resource unavailable";
    case HCCL_E_SYSCALL:
      return "system call failed";
    case HCCL_E_TIMEOUT:
      return "timeout";
    case HCCL_E_OPEN_FILE_FAILURE:
      return "cannot open file";
    case HCCL_E_TCP_CONNECT:
      return "tcp connect failed";
    case HCCL_E_ROCE_CONNECT:
      return "roce connect failed";
    case HCCL_E_TCP_TRANSFER:
      return "tcp transfer failed";
    case HCCL_E_ROCE_TRANSFER:
      return "roce transfer failed";
    case HCCL_E_RUNTIME:
      return "runtime error";
    case HCCL_E_DRV:
      return "driver error";
    case HCCL_E_PROFILING:
      return "profiling error";
    case HCCL_E_CCE:
      return "cce error";
    case HCCL_E_NETWORK:
      return "network error";
    case HCCL_E_AGAIN:
      return "try again";
    case HCCL_E_REMOTE:
      return "error on a remote rank";
    case HCCL_E_SUSPENDING:
      return "communicator suspending";
    case HCCL_E_OPRETRY_FAIL:
      return "operation retry failed";
    case HCCL_E_OOM:
      return "out of device memory";
    case HCCL_E_IN_STATUS:
      return "invalid status";
    case HCCL_E_RESERVED:
      break;
  }
  return "unknown error code";
}
