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
#include <string.h>

#include <acl/acl.h>
#include <hccl/hccl_sym_win.h>
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
/**
 * Destroy a communicator. Calls on it that start from now on are refused (HCCL_E_PARA); the
 * calls in progress in other threads and those queued on streams are waited for, at most
 * hcclExecTimeOut (else HCCL_EXEC_TIMEOUT) seconds, then everything is released. HCCL_E_AGAIN
 * when calls still hold it after that wait: nothing was released; call it again.
 */
HcclResult HcclCommDestroy(HcclComm comm);
HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/**
 * Fill @config with "nothing set" and its header (size, magic word, version); then set the
 * fields wanted.  Inline, as in HCCL: the header records the layout this program was built
 * with.
 */
static inline void HcclCommConfigInit(HcclCommConfig *config) {
  struct {
    size_t size;
    uint32_t magicWord;
    uint32_t version;
    uint64_t reserved;
  } info = {sizeof(HcclCommConfig), HCCL_COMM_CONFIG_MAGIC_WORD, HCCL_COMM_CONFIG_VERSION, 0};
  if (config == NULL) {
    return;
  }
  memset(config, 0, sizeof(*config));
  memcpy(config->reserved, &info, sizeof(info));
  config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
  config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
  config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
  config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
  config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
  config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
  config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
  config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
  config->hcclChannelSqDepth = HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET;
}

/**
 * The first HcclCommConfigCapability item this library does not support
 * (HCCL_COMM_CONFIG_RESERVED: it accepts every item; see HcclCommConfig for which ones act).
 */
uint32_t HcclGetCommConfigCapability(void);
/**
 * HcclCommInitRootInfo with a configuration (NULL: none).  A bad header (not filled by
 * HcclCommConfigInit) or a value out of its documented range is HCCL_E_PARA; nothing is
 * joined then.  hcclBufferSize and hcclExecTimeOut apply to this communicator only.
 */
HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm);
/** HcclCommInitClusterInfo with a configuration (NULL: none), as HcclCommInitRootInfoConfig. */
HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm);
/**
 * One process, @ndev ranks: comms[i] is rank i, on device devices[i] (distinct, below
 * aclrtGetDeviceCount()).  The ranks of such a communicator are threads of one process: a
 * collective needs every rank's call, so each rank is driven by its own thread (or its own
 * stream).  Memory ranges are per process: ranks that set ranges set different ones.
 */
HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);
/**
 * A communicator of the ranks rankIds[0..rankNum) of *@comm (ascending ranks of *@comm, the
 * caller among them at position @subCommRankId).  Every member calls it with the same
 * rankIds and @subCommId (a new one for each sub-communicator of *@comm); it returns without
 * waiting for them (the members meet on the new communicator's first collective or memory
 * range, where differing lists time out).  Members on different servers talk over *@comm's
 * connections, which stay open until *@comm and all its sub-communicators are destroyed (in any
 * order).  A rank of *@comm outside the sub-communicator may call it with @rankIds NULL and
 * @subCommId 0xFFFFFFFF: HCCL_SUCCESS, *@subComm untouched.
 * @config as HcclCommInitRootInfoConfig.
 */
HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                   uint64_t subCommId, uint32_t subCommRankId,
                                   HcclCommConfig *config, HcclComm *subComm);
/**
 * Process-wide settings: HCCL_DETERMINISTIC (0, 1 or 2) is kept and reported back; hzc's
 * reductions are deterministic whatever it says (ranks combine in rank order).
 */
HcclResult HcclSetConfig(HcclConfig config, union HcclConfigValue configValue);
HcclResult HcclGetConfig(HcclConfig config, union HcclConfigValue *configValue);
/**
 * The communicator's name (at most COMM_NAME_MAX_LENGTH bytes with the NUL) into @commName:
 * hcclCommName of its configuration, else one made from its unique id, the same on every rank.
 */
HcclResult HcclGetCommName(HcclComm comm, char *commName);
/**
 * HCCL_SUCCESS, or the error of a collective that failed on this communicator after its call
 * returned (a call queued on a stream) or half-way (the communicator's collectives are then
 * unusable); it stays until the communicator is destroyed.
 */
HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);

/*
 * Symmetric memory windows, on a communicator whose ranks share one server.  Every rank
 * registers a window together, on memory it reserved and mapped (aclrtReserveMemAddress,
 * aclrtMallocPhysical, aclrtMapMem) outside memory ranges: the window is the aclrtMapMem
 * mappings from @addr that cover [addr, addr + size) (all of them, as in HCCL), which the call
 * sets as a memory range and activates, so collectives on buffers in windows run zero-copy and
 * every rank reaches every peer's window (HcclSymWinGetPeerPointer, hccl/hccl_sym_win.h).
 * @flag must be HCCL_WIN_COLL_SYMMETRIC (HCCL_WIN_DEFAULT is HCCL_E_NOT_SUPPORT, as in HCCL).
 * Every rank passes the same size and flag and maps as many bytes from addr, or the call fails
 * on every rank with HCCL_E_PARA; a rank whose own arguments are bad returns its code and the
 * others fail with HCCL_E_PARA.  A rank's windows on a communicator hold at most
 * hcclSymWinMaxMemSizePerRank GB (HCCL_E_PARA).  A communicator that spans servers is
 * HCCL_E_NOT_SUPPORT.  aclrtUnmapMem of a window's mapping fails until the window is
 * deregistered, and the memory calls refuse its memory (HCCL_E_PARA).
 */
HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                  HcclCommSymWindow *winHandle, uint32_t flag);
/**
 * Deregister a window (every rank together, each with its handle): its memory is deactivated
 * and its range unset.  HCCL_E_AGAIN while calls of its communicator queued on streams have not
 * run (they may use the window; the others fail with HCCL_E_PARA and nothing is released: call
 * again once the streams are synchronized); ranks that name different windows all fail with
 * HCCL_E_PARA.  HcclCommDestroy releases the windows still registered on the communicator.
 */
HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle);
/** The window of @comm holding [ptr, ptr + size) (size > 0), and ptr's offset in it. */
HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size, HcclCommSymWindow *winHandle,
                             size_t *offset);

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
 * INT128, HIF8 and FP8 types are moved by AllGather/Broadcast (and the moving collectives
 * below) but not reduced (HCCL_E_NOT_SUPPORT).
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
 * The rooted and vector collectives, with the semantics above (paths, timeouts, mismatches,
 * refusals) and CANN's arguments.  Counts and displacements are uint64_t arrays of rank-count
 * entries, in elements.  Each rank's send and receive blocks are checked against every other
 * rank's: what rank p sends rank q must be what q expects from p, or the call fails with
 * HCCL_E_PARA on every rank before any byte moves.  AlltoAll(V/VC) do not convert types:
 * recvType must be sendType.  A count or displacement whose bytes overflow is HCCL_E_PARA,
 * a NULL array HCCL_E_PTR.  Received blocks must not overlap each other or, except a rank's
 * own block in place, the blocks the rank sends; in-place AlltoAll (recvBuf == sendBuf) works
 * but takes the staging path.  The moving ones take every HcclDataType, the reducing ones
 * (Reduce, ReduceScatterV) the types and ops HcclAllReduce takes.
 *
 * HcclReduce: the root's recvBuf gets the reduction of every rank's @count elements; recvBuf
 *   matters only on the root (NULL elsewhere is fine).
 * HcclScatter: the root's sendBuf holds rank-count blocks of @recvCount elements, block i goes
 *   to rank i's recvBuf; sendBuf matters only on the root.
 * HcclAllGatherV: rank i's @sendCount elements go to recvBuf + recvDispls[i] of every rank;
 *   recvCounts[i] must be rank i's sendCount (the arrays are the same on every rank).
 * HcclReduceScatterV: rank i gets, in its recvBuf, the reduction of every rank's sendCounts[i]
 *   elements at sendDispls[i]; its recvCount must be sendCounts[i].
 * HcclAlltoAll: block j (@sendCount elements) of rank i's sendBuf goes to block i of rank j's
 *   recvBuf; @recvCount must equal sendCount.
 * HcclAlltoAllV: rank i sends sendCounts[j] elements at sdispls[j] to rank j, which puts them
 *   at rdispls[i]; rank j's recvCounts[i] must be rank i's sendCounts[j].
 * HcclAlltoAllVC: sendCountMatrix (rank count x rank count, the same on every rank) entry
 *   [i][j] is what rank i sends rank j; blocks are packed in rank order in sendBuf and
 *   recvBuf.
 */
HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);
HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                       uint32_t root, HcclComm comm, aclrtStream stream);
HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                          const void *recvDispls, HcclDataType dataType, HcclComm comm,
                          aclrtStream stream);
HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                              void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                              HcclReduceOp op, HcclComm comm, aclrtStream stream);
HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, aclrtStream stream);
HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                         HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                         const void *rdispls, HcclDataType recvType, HcclComm comm,
                         aclrtStream stream);
HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                          const void *recvBuf, HcclDataType recvType, HcclComm comm,
                          aclrtStream stream);

/*
 * Point-to-point transfers between two ranks of one server.  Only the two ranks call, and
 * each ordered pair (sender, receiver) matches its calls in order: the n-th send of rank a to
 * rank b is the n-th receive of rank b from rank a, with the same count and dataType (else
 * HCCL_E_PARA on both, nothing moved).  With a NULL stream a call is complete when it
 * returns: the data is in the receiver's buffer and the sender's buffer may be reused; with a
 * stream from aclrtCreateStream it is checked at once and queued on the stream, like the
 * collectives (complete when the stream has run it).  When both buffers lie in
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
