/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hzc: zero-copy memory ranges for collective communication.
 *
 * This header is the whole contract between hzc.ko (/dev/hzc) and user space.
 *
 * General rules for every ioctl
 * -----------------------------
 * - Every command is _IOWR(HZC_IOCTL_TYPE, nr, struct hzc_xxx).  The kernel
 *   dispatches on the command number only; the size that counts is the
 *   struct's first member, @size, which the caller sets to sizeof() of the
 *   struct it was compiled against.  Structs only grow at the end.
 * - @size smaller than the first version of the struct is -EINVAL.  A larger
 *   @size is accepted if every byte beyond what the kernel knows is zero, and
 *   is -E2BIG otherwise.  Outputs are written back only up to the smaller of
 *   the two sizes.
 * - Every @flags bit not defined for the command, and every __reserved field
 *   that is not zero, is -EOPNOTSUPP.
 * - Fields are __u32 or __u64 (user pointers as __aligned_u64), naturally
 *   aligned, with explicit padding.  Fields named out_* are written by the
 *   kernel.  Only ids cross the ABI, never kernel pointers.
 * - A context is bound to the mm of the process that opened /dev/hzc; an
 *   ioctl or mmap from another mm (e.g. a forked child) is -EPERM.
 *
 * Errno table (common to all commands; each command lists its own extras)
 * ------------------------------------------------------------------------
 *   ENOTTY      unknown command
 *   EINVAL      @size too small, or a field has an invalid value
 *   E2BIG       @size larger than known and the unknown tail is not zero
 *   EOPNOTSUPP  unknown @flags bit or non-zero __reserved field
 *   EFAULT      the struct or a buffer it points to is not accessible
 *   EPERM       the caller's mm does not own this context
 *   ENOMEM      out of kernel memory
 */
#ifndef _UAPI_LINUX_HZC_H
#define _UAPI_LINUX_HZC_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define HZC_DEVICE_NAME		"hzc"
#define HZC_ABI_VERSION		1

#define HZC_IOCTL_TYPE		0xCD

enum {
	HZC_CMD_INFO = 0x00,
};

/* Feature bits reported in hzc_info.out_features. */
#define HZC_FEATURE_INFO	(1ULL << 0)

/**
 * struct hzc_info - HZC_IOC_INFO: describe the module and its limits
 * @size: sizeof(struct hzc_info)
 * @flags: must be 0
 * @out_abi_version: HZC_ABI_VERSION of the running module
 * @out_page_size: PAGE_SIZE of the running kernel
 * @out_features: HZC_FEATURE_* bits
 * @out_max_pinned_bytes: max_pinned_bytes module parameter (0 = unlimited)
 * @out_max_ranges: max_ranges module parameter (per context)
 * @out_max_domains: max_domains module parameter (global)
 * @out_max_ranks: largest nranks a domain may have
 * @out_max_blob_size: largest blob one member may publish under one key
 *
 * Errors: only the common ones.
 */
struct hzc_info {
	__u32 size;
	__u32 flags;
	__u32 out_abi_version;
	__u32 out_page_size;
	__aligned_u64 out_features;
	__aligned_u64 out_max_pinned_bytes;
	__u32 out_max_ranges;
	__u32 out_max_domains;
	__u32 out_max_ranks;
	__u32 out_max_blob_size;
};

#define HZC_IOC_INFO _IOWR(HZC_IOCTL_TYPE, HZC_CMD_INFO, struct hzc_info)

#endif /* _UAPI_LINUX_HZC_H */
