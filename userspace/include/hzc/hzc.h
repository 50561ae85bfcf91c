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

/** What the loaded hzc.ko reports about itself (its INFO ioctl). */
struct hzc_device_info {
  uint32_t abi_version;      /* ABI version of the module */
  uint32_t page_size;        /* PAGE_SIZE of the running kernel */
  uint64_t features;         /* HZC_FEATURE_* bits of <linux/hzc.h> */
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

/** One activated block of a rank: [va, va + size) in that rank's address space. */
struct hzc_peer_block {
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
 * hzc_comm_peer_blocks: the activated blocks of rank @rank, sorted by address. *count is the
 * capacity of @blocks on input (blocks may be NULL when it is 0) and the number of blocks on
 * output; at most the capacity are written.
 *
 * Errors: HCCL_E_PTR for a NULL comm, peer_va, local or count; HCCL_E_PARA for a destroyed
 * or foreign comm, rank >= rank size, size 0, or memory that is not activated;
 * HCCL_E_UNAVAIL when the communicator has no links yet; HCCL_E_REMOTE when the rank died or
 * left; HCCL_E_SYSCALL/HCCL_E_MEMORY when the window cannot be mapped.
 */
HcclResult hzc_comm_peer_ptr(HcclComm comm, uint32_t rank, const void *peer_va, size_t size,
                             void **local);
HcclResult hzc_comm_peer_blocks(HcclComm comm, uint32_t rank, struct hzc_peer_block *blocks,
                                uint32_t *count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HZC_HZC_H_ */
