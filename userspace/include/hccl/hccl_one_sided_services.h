/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hccl/hccl_one_sided_services.h: HCCL's one-sided calls, as CANN declares them: memory
 * registered for one peer rank, descriptors swapped with it, its memory enabled, then batches
 * of writes (HcclBatchPut) and reads (HcclBatchGet) straight between the registered buffers.
 *
 * In hzc these work between the ranks of a communicator that spans servers, over RDMA (RDMA
 * WRITE / READ between memory regions; a peer on the same server through the device's loopback;
 * README "One-sided transfers"). A communicator of one server, or servers without RDMA devices:
 * HCCL_E_NOT_SUPPORT.
 */
#ifndef HCCL_HCCL_ONE_SIDED_SERVICES_H_
#define HCCL_HCCL_ONE_SIDED_SERVICES_H_

#include <acl/acl_base.h>
#include <hccl/hccl_types.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where memory lives (hzc: host memory either way). */
typedef enum {
  HCCL_MEM_TYPE_DEVICE = 0,
  HCCL_MEM_TYPE_HOST = 1,
  HCCL_MEM_TYPE_NUM = 2,
} HcclMemType;

/** A span of memory. */
typedef struct {
  HcclMemType type;
  void *addr;
  uint64_t size;
} HcclMem;

#define HCCL_MEM_DESC_LENGTH 511

/** An opaque descriptor of registered memory (its content is the library's). */
typedef struct {
  char desc[HCCL_MEM_DESC_LENGTH + 1];
} HcclMemDesc;

/** An array of descriptors. */
typedef struct {
  HcclMemDesc *array;
  uint32_t arrayLength;
} HcclMemDescs;

/** One transfer of a batch: @count elements of @dataType between local and remote memory. */
typedef struct {
  void *localAddr;
  void *remoteAddr;
  uint64_t count;
  HcclDataType dataType;
} HcclOneSideOpDesc;

/**
 * Register [addr, addr + size) of this process for @remoteRank of @comm and describe it in
 * *@desc. @type is HCCL_MEM_TYPE_DEVICE or HCCL_MEM_TYPE_HOST. The same span registered again
 * for the same peer is counted (each needs its HcclDeregisterMem) and gets the same descriptor.
 * @remoteRank the calling rank: a warning, HCCL_SUCCESS, nothing registered. At most 256
 * registrations per communicator (HCCL_E_UNAVAIL). Registration pins the memory (RLIMIT_MEMLOCK).
 */
HcclResult HcclRegisterMem(HcclComm comm, uint32_t remoteRank, int type, void *addr, uint64_t size,
                           HcclMemDesc *desc);
/** Drop a registration of HcclRegisterMem (the last one revokes the peer's access). */
HcclResult HcclDeregisterMem(HcclComm comm, HcclMemDesc *desc);
/**
 * Swap descriptors with @remoteRank, which makes the same call with this rank: @local's go to it,
 * its own land in @remote (at most remote->arrayLength of them), their number in *@actualNum.
 * Links the two ranks the first time. @timeout in seconds; 0: HCCL_CONNECT_TIMEOUT; -1: none.
 */
HcclResult HcclExchangeMemDesc(HcclComm comm, uint32_t remoteRank, HcclMemDescs *local, int timeout,
                               HcclMemDescs *remote, uint32_t *actualNum);
/** Let this rank reach the memory @remoteMemDesc describes (from HcclExchangeMemDesc); its
 * span in *@remoteMem. */
HcclResult HcclEnableMemAccess(HcclComm comm, HcclMemDesc *remoteMemDesc, HcclMem *remoteMem);
/** End HcclEnableMemAccess of @remoteMemDesc. */
HcclResult HcclDisableMemAccess(HcclComm comm, HcclMemDesc *remoteMemDesc);
/**
 * Write each desc[i].localAddr's elements to desc[i].remoteAddr of @remoteRank (HcclBatchPut) or
 * read them from there (HcclBatchGet), in order, on @stream (NULL: now, complete on return; a
 * stream: complete once the stream ran it, aclrtSynchronizeStream). Each local span must lie in
 * one registration of this rank, each remote span in one span this rank enabled of @remoteRank.
 * At most 256 descriptors; none: HCCL_SUCCESS.
 */
HcclResult HcclBatchPut(HcclComm comm, uint32_t remoteRank, HcclOneSideOpDesc *desc,
                        uint32_t descNum, aclrtStream stream);
HcclResult HcclBatchGet(HcclComm comm, uint32_t remoteRank, HcclOneSideOpDesc *desc,
                        uint32_t descNum, aclrtStream stream);

/** How HcclCommPrepare connects the ranks. */
typedef enum {
  HCCL_TOPO_FULLMESH = 0, /**< every rank with every other rank */
  HCCL_TOPO_NUM,
} HcclTopoType;

typedef struct {
  HcclTopoType topoType;
  uint64_t rsvd0;
  uint64_t rsvd1;
  uint64_t rsvd2;
} HcclPrepareConfig;

/**
 * Global memory: [mem->addr, mem->addr + mem->size) of this process as a handle (*@memHandle)
 * that communicators bind (HcclCommBindMem). HcclCommPrepare then registers every bound span
 * for every other rank, swaps the descriptors and enables the peers' spans, so
 * that HcclBatchPut/Get reach them without HcclRegisterMem and HcclExchangeMemDesc.
 */
HcclResult HcclRegisterGlobalMem(const HcclMem *mem, void **memHandle);
/** Drop a handle of HcclRegisterGlobalMem; HCCL_E_PARA while a communicator binds it. */
HcclResult HcclDeregisterGlobalMem(void *memHandle);
/** Bind a global memory handle to @comm (at most 256 per communicator), before HcclCommPrepare. */
HcclResult HcclCommBindMem(HcclComm comm, void *memHandle);
/** Unbind it; after HcclCommPrepare this revokes the peers' access to it. */
HcclResult HcclCommUnbindMem(HcclComm comm, void *memHandle);
/**
 * Every rank of @comm at once (blocking): connect each rank with every other rank
 * (HCCL_TOPO_FULLMESH), register the bound memory for them, swap the descriptors and enable
 * them. @timeout in seconds; 0: HCCL_CONNECT_TIMEOUT; -1: none. A second call: HCCL_SUCCESS,
 * nothing done.
 */
HcclResult HcclCommPrepare(HcclComm comm, const HcclPrepareConfig *prepareConfig,
                           const int timeout);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HCCL_HCCL_ONE_SIDED_SERVICES_H_ */
