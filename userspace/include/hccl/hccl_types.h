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

/*
 * Communicator configuration (HcclCommInitRootInfoConfig, HcclCreateSubCommConfig).  Fill it
 * with HcclCommConfigInit (hccl/hccl.h) first: its first 24 bytes record the size, a magic
 * word and the version of the structure the program was built with, so a program built
 * against an older, shorter HcclCommConfig keeps working (fields beyond its size count as
 * not set).  A field "not set" takes the environment's value (HCCL_BUFFSIZE,
 * HCCL_EXEC_TIMEOUT) or the default.
 */
#define HCCL_COMM_CONFIG_INFO_BYTES 24
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0u
#define HCCL_COMM_CONFIG_VERSION 11u
#define HCCL_COMM_DEFAULT_BUFFSIZE 200u
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0u
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE 0u
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET (-1)
#define HCCL_COMM_QOS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET 0xffffffffu
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE 16u
#define COMM_NAME_MAX_LENGTH 128
#define UDI_MAX_LENGTH 128
#define BUFFER_NAME_MAX_LENGTH 128
#define HCCL_COMM_ALGO_MAX_LENGTH 1600
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128

typedef struct HcclCommConfigDef {
  char reserved[HCCL_COMM_CONFIG_INFO_BYTES]; /**< size, magic word, version: leave alone */
  uint32_t hcclBufferSize;                    /**< staging buffer, MB (>= 1) */
  uint32_t hcclDeterministic;                 /**< 0, 1 or 2; hzc always reduces in rank order */
  char hcclCommName[COMM_NAME_MAX_LENGTH];    /**< "" lets the library name it */
  char hcclUdi[UDI_MAX_LENGTH];               /**< user-defined, kept */
  uint32_t hcclOpExpansionMode;               /**< accepted, no effect (always on the host) */
  uint32_t hcclRdmaTrafficClass;              /**< [0, 255], a multiple of 4 */
  uint32_t hcclRdmaServiceLevel;              /**< [0, 7] */
  uint32_t hcclWorldRankID;
  uint64_t hcclJobID;
  uint8_t aclGraphZeroCopyEnable; /**< 0 or 1, no effect */
  int32_t hcclExecTimeOut;        /**< seconds a collective waits for the other ranks */
  char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
  char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
  char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
  char hcclBufferName[BUFFER_NAME_MAX_LENGTH];
  uint32_t hcclQos;                     /**< [0, 7] */
  uint64_t hcclSymWinMaxMemSizePerRank; /**< GB of symmetric windows per rank, [1, 1048576] */
  uint32_t hcclChannelSqDepth;          /**< no effect */
} HcclCommConfig;

/** Configuration items; HcclGetCommConfigCapability() returns the first one not supported. */
typedef enum {
  HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
  HCCL_COMM_CONFIG_DETERMINISTIC = 1,
  HCCL_COMM_CONFIG_COMM_NAME = 2,
  HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
  HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
  HCCL_COMM_CONFIG_WORLD_RANKID = 5,
  HCCL_COMM_CONFIG_JOBID = 6,
  HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
  HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
  HCCL_COMM_CONFIG_ALGO = 9,
  HCCL_COMM_CONFIG_RETRY = 10,
  HCCL_COMM_CONFIG_BUFFER_NAME = 11,
  HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

/** Process-wide settings (HcclSetConfig). */
typedef enum {
  HCCL_DETERMINISTIC = 0, /**< 0 off, 1 on, 2 strict; hzc always reduces in rank order */
  HCCL_CONFIG_RESERVED
} HcclConfig;

union HcclConfigValue {
  int32_t value;
};

/** A registered symmetric memory window (HcclCommSymWinRegister). */
typedef void *HcclCommSymWindow;
typedef HcclCommSymWindow CommSymWindow;

/** HcclCommSymWinRegister's flag. */
typedef enum {
  HCCL_WIN_DEFAULT = 0,       /**< reserved: HCCL_E_NOT_SUPPORT, as in HCCL */
  HCCL_WIN_COLL_SYMMETRIC = 1 /**< a symmetric window for collectives */
} symmetricMemoryFlag;

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
static_assert(HCCL_COMM_CONFIG_RESERVED == 12, "HcclCommConfigCapability ABI");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is 4108 bytes in HCCL's ABI");
_Static_assert(HCCL_E_IN_STATUS == 1041 && HCCL_E_RESERVED == 1042, "HcclResult values are ABI");
#endif

#endif /* HCCL_HCCL_TYPES_H_ */
