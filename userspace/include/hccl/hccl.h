/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hccl/hccl.h: the HCCL C API implemented by libhzc.
 *
 * Every function returns an HcclResult, checks its arguments before doing any work and logs
 * one line (stderr, level from HZC_LOG) naming the function, the argument and the cause
 * when it fails.  Any function may be called from any thread.
 */
#ifndef HCCL_HCCL_H_
#define HCCL_HCCL_H_

#include <stddef.h>
#include <stdint.h>

#include <acl/acl.h>
#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A static, human-readable string for @code ("unknown error code" for unknown codes). */
const char *HcclGetErrorString(HcclResult code);

/** Root rank: make the root info (address, port, unique id) to hand to every rank. */
HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
/** Create a communicator of @nRanks ranks by TCP rendezvous at the root (all ranks call). */
HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm);
/** Create a communicator from a rank-table JSON file (version 1.0 or 1.2). */
HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);
/** Destroy a communicator; HCCL_E_AGAIN while a call on it is in progress. */
HcclResult HcclCommDestroy(HcclComm comm);
HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/*
 * Zero-copy memory ranges.  Ranges are process-wide (visible to every communicator of the
 * process) and may not repeat or overlap.  The first HcclCommSetMemoryRange of a
 * communicator establishes its links: every rank must call it within HCCL_CONNECT_TIMEOUT.
 */
HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                  uint64_t flags);
HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr);
HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                      aclrtDrvMemHandle handle, uint64_t flags);
HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HCCL_HCCL_H_ */
