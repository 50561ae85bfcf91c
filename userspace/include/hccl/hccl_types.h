/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hccl/hccl_types.h: the HCCL C types and constants, with HCCL's exact values.
 */
#ifndef HCCL_HCCL_TYPES_H_
#define HCCL_HCCL_TYPES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every HCCL call. */
typedef enum {
  HCCL_SUCCESS = 0,              /**< success */
  HCCL_E_PARA = 1,               /**< invalid parameter */
  HCCL_E_PTR = 2,                /**< empty (NULL) pointer */
  HCCL_E_MEMORY = 3,             /**< memory error */
  HCCL_E_INTERNAL = 4,           /**< internal error */
  HCCL_E_NOT_SUPPORT = 5,        /**< not supported */
  HCCL_E_NOT_FOUND = 6,          /**< resource not found */
  HCCL_E_UNAVAIL = 7,            /**< resource unavailable */
  HCCL_E_SYSCALL = 8,            /**< system call failed */
  HCCL_E_TIMEOUT = 9,            /**< timeout */
  HCCL_E_OPEN_FILE_FAILURE = 10, /**< cannot open a file */
  HCCL_E_TCP_CONNECT = 11,       /**< tcp connect failed */
  HCCL_E_ROCE_CONNECT = 12,      /**< roce connect failed */
  HCCL_E_TCP_TRANSFER = 13,      /**< tcp transfer failed */
  HCCL_E_ROCE_TRANSFER = 14,     /**< roce transfer failed */
  HCCL_E_RUNTIME = 15,           /**< runtime call failed */
  HCCL_E_DRV = 16,               /**< driver call failed */
  HCCL_E_PROFILING = 17,         /**< profiling call failed */
  HCCL_E_CCE = 18,               /**< cce call failed */
  HCCL_E_NETWORK = 19,           /**< network call failed */
  HCCL_E_AGAIN = 20,             /**< try again */
  HCCL_E_REMOTE = 21,            /**< error on a remote rank */
  HCCL_E_SUSPENDING = 22,        /**< communicator suspending */
  HCCL_E_OPRETRY_FAIL = 23,      /**< operation retry failed */
  HCCL_E_OOM = 24,               /**< out of memory on the device */
  HCCL_E_IN_STATUS = 1041,       /**< invalid status */
  HCCL_E_RESERVED                /**< reserved */
} HcclResult;

/** Opaque communicator handle. */
typedef void *HcclComm;

/** Reduction operations. */
typedef enum {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
  HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/** Element types of collective buffers. */
typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
  HCCL_DATA_TYPE_INT128 = 12,
  HCCL_DATA_TYPE_HIF8 = 14,
  HCCL_DATA_TYPE_FP8E4M3 = 15,
  HCCL_DATA_TYPE_FP8E5M2 = 16,
  HCCL_DATA_TYPE_FP8E8M0 = 17,
  HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

#define HCCL_ROOT_INFO_BYTES 4108

/** Made by the root rank (HcclGetRootInfo) and passed to every rank out of band. */
typedef struct HcclRootInfoDef {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

/** The direction of one item of HcclBatchSendRecv. */
typedef enum { HCCL_SEND = 0, HCCL_RECV = 1, HCCL_SEND_RECV_RESERVED } HcclSendRecvType;

/** One item of HcclBatchSendRecv: @count elements of @dataType to or from @remoteRank. */
typedef struct HcclSendRecvItemDef {
  HcclSendRecvType sendRecvType;
  void *buf;
  uint64_t count;
  HcclDataType dataType;
  uint32_t remoteRank;
} HcclSendRecvItem;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is 4108 bytes in HCCL's ABI");
static_assert(HCCL_E_IN_STATUS == 1041 && HCCL_E_RESERVED == 1042, "HcclResult values are ABI");
static_assert(HCCL_E_OOM == 24 && HCCL_E_DRV == 16, "HcclResult values are ABI");
static_assert(HCCL_DATA_TYPE_HIF8 == 14 && HCCL_DATA_TYPE_RESERVED == 255, "HcclDataType ABI");
static_assert(HCCL_REDUCE_MIN == 3 && HCCL_REDUCE_RESERVED == 255, "HcclReduceOp ABI");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is 4108 bytes in HCCL's ABI");
_Static_assert(HCCL_E_IN_STATUS == 1041 && HCCL_E_RESERVED == 1042, "HcclResult values are ABI");
#endif

#endif /* HCCL_HCCL_TYPES_H_ */
