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

/**
 * Root rank: make the root info (address, port, unique id) to hand to every rank.  The calling
 * process serves the rendezvous from a thread until every rank has joined (or
 * HCCL_CONNECT_TIMEOUT after the first): it must not exit before that unless it is a rank.
 */
HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
/**
 * Create a communicator of @nRanks ranks by TCP rendezvous at the root (all ranks call).  In
 * the process that called HcclGetRootInfo it returns once every rank has the rank table, so
 * that process may exit right after it.
 */
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

/*
 * Collectives of the ranks of one server.  Every call is complete when it returns (the data
 * is in recvBuf); @stream may be NULL or a stream from aclrtCreateStream and is only
 * validated.  When every rank's buffers lie in activated memory the data moves zero-copy
 * through the peers' mappings, otherwise through a shared staging buffer of HCCL_BUFFSIZE MB.
 * A rank that does not join within HCCL_EXEC_TIMEOUT seconds makes the others fail with
 * HCCL_E_TIMEOUT; mismatched calls fail with HCCL_E_PARA on every rank; a call that fails
 * half-way (timeout, dead rank, peer memory deactivated) leaves the communicator's collectives
 * unusable (HCCL_E_REMOTE).  A rank whose own arguments are bad (null buffer, bad stream, type,
 * op, root, count) gets HCCL_E_PTR / HCCL_E_PARA and the others fail that call at once with
 * HCCL_E_PARA naming it, as for mismatched calls; except in a communicator's first collective
 * call (which sets up what the ranks share), where the others fail with HCCL_E_TIMEOUT after
 * HCCL_CONNECT_TIMEOUT.
 * Reductions combine ranks in rank order; integers wrap around;
 * FP16/BFP16 accumulate in float and round once (nearest even); MAX/MIN propagate NaN.
 * INT128, HIF8 and FP8 types are moved by AllGather/Broadcast but not reduced
 * (HCCL_E_NOT_SUPPORT).
 */
HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream);
HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream);
HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream);
HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream);
HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

/*
 * Point-to-point transfers between two ranks of one server.  Only the two ranks call, and
 * each ordered pair (sender, receiver) matches its calls in order: the n-th send of rank a to
 * rank b is the n-th receive of rank b from rank a, with the same count and dataType (else
 * HCCL_E_PARA on both, nothing moved).  Every call is complete when it returns: the data is
 * in the receiver's buffer and the sender's buffer may be reused.  When both buffers lie in
 * activated memory the receiver reads the sender's buffer through its peer mapping,
 * otherwise the data passes through a buffer shared by the pair (min(HCCL_BUFFSIZE, 4) MB
 * per direction, in chunks).  Every dataType is moved.  A peer that does not make the
 * matching call within HCCL_EXEC_TIMEOUT seconds is HCCL_E_TIMEOUT naming it; a peer that
 * died is HCCL_E_REMOTE.  Count 0 is no transfer: the call returns HCCL_SUCCESS without
 * looking at the buffer, dataType or rank.  A rank cannot send to or receive from itself
 * (HCCL_E_NOT_SUPPORT).  HcclBatchSendRecv runs all its items together (sends, receives, in
 * any order, to any peers), so e.g. a ring exchange in one batch on every rank does not
 * deadlock; items to or from the same peer are matched in their order in the list.  itemNum
 * 0 does nothing.
 */
HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, aclrtStream stream);
HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, aclrtStream stream);
HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                             aclrtStream stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HCCL_HCCL_H_ */
