/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hzc/hzc.h: hzc's own extension API (inspection of the kernel module through libhzc).
 */
#ifndef HZC_HZC_H_
#define HZC_HZC_H_

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bits of hzc_device_info.features: what the loaded module supports. */
#define HZC_DEVICE_FEATURE_INFO (1ULL << 0)
#define HZC_DEVICE_FEATURE_RANGES (1ULL << 1)            /* memory ranges */
#define HZC_DEVICE_FEATURE_ACTIVATIONS (1ULL << 2)       /* activation and pinning */
#define HZC_DEVICE_FEATURE_DOMAINS (1ULL << 3)           /* communicator domains, boards */
#define HZC_DEVICE_FEATURE_PEER_MAP (1ULL << 4)          /* listing and mapping peers' memory */
#define HZC_DEVICE_FEATURE_ACTIVATION_COOKIE (1ULL << 5) /* activations carry RDMA keys */

/** What the loaded hzc.ko reports about itself (its INFO ioctl). */
struct hzc_device_info {
  uint32_t abi_version;      /* ABI version of the module */
  uint32_t page_size;        /* PAGE_SIZE of the running kernel */
  uint64_t features;         /* HZC_DEVICE_FEATURE_* bits */
  uint64_t max_pinned_bytes; /* per-context pin limit, 0 = unlimited */
  uint32_t max_ranges;       /* ranges per context */
  uint32_t max_domains;      /* domains in the system */
  uint32_t max_ranks;        /* ranks per domain */
  uint32_t max_blob_size;    /* bytes per published endpoint blob */
};

/**
 * Fill @info from the module behind HZC_DEVICE (default /dev/hzc).
 * HCCL_E_PTR for NULL; HCCL_E_DRV when the device cannot be opened, is not hzc, or speaks
 * another ABI version.
 */
HcclResult hzc_get_device_info(struct hzc_device_info *info);

/** Name of one feature bit ("info", ...), or NULL for a bit this library does not know. */
const char *hzc_feature_name(uint64_t feature_bit);

/** The device path the library uses (HZC_DEVICE, default "/dev/hzc"). */
const char *hzc_device_path(void);

/** The library version, "MAJOR.MINOR.PATCH". */
const char *hzc_version(void);

/** One activation of a rank: [va, va + size) in that rank's address space. */
struct hzc_peer_activation {
  uint64_t va;
  uint64_t size;
};

/**
 * Peer access to activated memory (after the communicator's first HcclCommSetMemoryRange).
 *
 * hzc_comm_peer_ptr: set *local to a pointer through which this process reads and writes
 * [peer_va, peer_va + size) of rank @rank; the bytes must lie in memory that rank has
 * activated (adjacent activations count as one). For the caller's own rank *local is peer_va.
 * The pointer stays valid until that rank deactivates or unsets the memory or @comm is
 * destroyed; an access after that raises SIGBUS or SIGSEGV. Peer pointers cannot be used as
 * buffers of process_vm_readv, ibv_reg_mr or O_DIRECT I/O.
 *
 * hzc_comm_peer_activations: the activations of rank @rank, sorted by address. *count is the
 * capacity of @activations on input (activations may be NULL when it is 0) and the number of
 * activations on output; at most the capacity are written.
 *
 * Errors: HCCL_E_PTR for a NULL comm, peer_va, local or count; HCCL_E_PARA for a destroyed
 * or foreign comm, rank >= rank size, size 0, or memory that is not activated;
 * HCCL_E_UNAVAIL when the communicator has no links yet; HCCL_E_REMOTE when the rank (or any
 * rank of the communicator: it is then broken and should be destroyed) died or
 * left; HCCL_E_SYSCALL/HCCL_E_MEMORY when the window cannot be mapped.
 */
HcclResult hzc_comm_peer_ptr(HcclComm comm, uint32_t rank, const void *peer_va, size_t size,
                             void **local);
HcclResult hzc_comm_peer_activations(HcclComm comm, uint32_t rank,
                                     struct hzc_peer_activation *activations, uint32_t *count);

/**
 * The names hzc_comm_peer_activations and its struct had in 0.1 (an activation was called a
 * block then); kept so that programs built against 0.1 still load and run. Same layout, same
 * behaviour; errors are logged under the old name.
 */
struct hzc_peer_block {
  uint64_t va;
  uint64_t size;
};
HcclResult hzc_comm_peer_blocks(HcclComm comm, uint32_t rank, struct hzc_peer_block *blocks,
                                uint32_t *count)
    __attribute__((deprecated("use hzc_comm_peer_activations")));

/** What a communicator's links are made of (after its first HcclCommSetMemoryRange). */
struct hzc_link_info {
  uint32_t linked;    /* 1 once the first HcclCommSetMemoryRange made the links */
  uint32_t rdma;      /* 1 when they include RDMA queue pairs; 0: kernel-only links */
  char device[64];    /* RDMA device name ("" when rdma is 0), NUL-terminated */
  uint32_t port;      /* its port number (0 when rdma is 0) */
  uint32_t gid_index; /* the GID index the queue pairs use (0 when rdma is 0) */
};

/**
 * hzc_comm_link_info: fill @info for @comm. HCCL_E_PTR for NULL, HCCL_E_PARA for a destroyed
 * or foreign comm. Before the first HcclCommSetMemoryRange linked is 0 and rdma is 0. The
 * links are kernel-only (rdma 0) when any rank of @comm has no RDMA device with an active
 * port; HZC_RDMA_DEVICE ("name" or "name:port") chooses the device, HZC_RDMA_GID_INDEX the GID.
 */
HcclResult hzc_comm_link_info(HcclComm comm, struct hzc_link_info *info);

/* Bytes this rank moved for a communicator that spans servers, since the communicator was made. */
struct hzc_net_stats {
  /* The calls' data sent to and received from ranks of other servers (the wires' payload). */
  uint64_t data_sent;
  uint64_t data_received;
  /* Messages over the communicator's TCP connections, headers included: the calls' agreement,
   * link setup, goodbyes. */
  uint64_t control_sent;
  uint64_t control_received;
};

/**
 * hzc_comm_net_stats: fill @stats for @comm (counts for this rank and @comm only: a
 * sub-communicator counts its own). All zero for a communicator on one server; the collectives
 * add nothing on a rank that is not its server's first (only the first ranks talk between
 * servers; point-to-point calls across servers count on both ends). HCCL_E_PTR for NULL,
 * HCCL_E_PARA for a destroyed or foreign comm. scripts/bench-scale reports them per call.
 */
HcclResult hzc_comm_net_stats(HcclComm comm, struct hzc_net_stats *stats);

/* How the calls' data this rank sent to other servers left it (@comm only, since it was made). */
struct hzc_net_sends {
  /* Bytes the CPU copied into the network transport's buffers before the RDMA device sent them:
   * what did not lie in activated memory (or the first rank's registered temporaries). */
  uint64_t staged;
  /* Bytes the RDMA device read straight from the caller's buffer: activated memory
   * (HcclCommActivateCommMemory through any communicator of the process), registered with the
   * link to each server at its first use and dropped when it is deactivated; or from the
   * registered buffer a server's first rank keeps for the temporaries of ReduceScatter, Reduce,
   * Scatter and ReduceScatterV. */
  uint64_t direct;
};

/**
 * hzc_comm_net_sends: fill @sends for @comm. Both zero over TCP (HZC_NET=socket: the kernel
 * copies into its socket buffers) and on a communicator on one server; staged + direct is
 * hzc_comm_net_stats' data_sent over RDMA. HCCL_E_PTR for NULL, HCCL_E_PARA for a destroyed or
 * foreign comm.
 */
HcclResult hzc_comm_net_sends(HcclComm comm, struct hzc_net_sends *sends);

/* How the calls' data this rank received from other servers reached it (@comm only, since it
 * was made). */
struct hzc_net_receives {
  /* Bytes the RDMA device wrote into the network transport's buffers, which the CPU then copied
   * or reduced into the caller's buffer. */
  uint64_t landed;
  /* Bytes the sending server's RDMA device wrote straight where they belong: a message of
   * 64 KiB or more that the collective only places (a gather's or a broadcast's block, a
   * receive) into activated memory, registered for writes by each server at its first use and
   * dropped when it is deactivated (or when a transfer that told that server of it failed), or
   * into the first rank's registered buffer for temporaries (as for direct). */
  uint64_t placed;
};

/**
 * hzc_comm_net_receives: fill @receives for @comm. Both zero over TCP and on a communicator on
 * one server; landed + placed is hzc_comm_net_stats' data_received over RDMA. HCCL_E_PTR for
 * NULL, HCCL_E_PARA for a destroyed or foreign comm.
 */
HcclResult hzc_comm_net_receives(HcclComm comm, struct hzc_net_receives *receives);

/**
 * RDMA between activated memory of this rank and of rank @rank over @comm's RDMA links
 * (one operation, returns when it has completed).
 *
 * hzc_comm_rdma_write: copy [local, local + size) into [peer_va, peer_va + size) of @rank.
 * hzc_comm_rdma_read: copy [peer_va, peer_va + size) of @rank into [local, local + size).
 *
 * With RDMA links, HcclCommActivateCommMemory registers each activation with the RDMA
 * device (a memory region: local write, remote read, remote write) and publishes its key with
 * the activation; HcclCommDeactivateCommMemory deregisters it. @local must lie in one activation
 * this process activated with HcclCommActivateCommMemory on @comm; [peer_va, peer_va + size)
 * must lie in one activation @rank made on @comm (each activation is registered on its own,
 * so a transfer cannot span two; memory activated through another communicator is not
 * reachable over @comm's links). @rank must be another rank of @comm. Registration pins the
 * memory a second time: activated memory counts twice against RLIMIT_MEMLOCK.
 *
 * Any thread may call these; transfers over one communicator run one at a time. A transfer
 * into memory the peer deactivates meanwhile fails and breaks the link to that peer.
 *
 * Errors: HCCL_E_PTR for a NULL comm, local or peer_va; HCCL_E_PARA for a destroyed or
 * foreign comm, @rank out of range or the own rank, size 0, a range that wraps around, or
 * memory not activated as above; HCCL_E_UNAVAIL when @comm has no links yet or its links are
 * kernel-only (no RDMA device); HCCL_E_REMOTE when @rank or any other rank of @comm died
 * or left (the communicator is then broken: destroy it); HCCL_E_ROCE_TRANSFER
 * when the transfer failed or made no progress in time (the link to @rank is then unusable).
 */
HcclResult hzc_comm_rdma_write(HcclComm comm, uint32_t rank, const void *local, void *peer_va,
                               size_t size);
HcclResult hzc_comm_rdma_read(HcclComm comm, uint32_t rank, void *local, const void *peer_va,
                              size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HZC_HZC_H_ */
