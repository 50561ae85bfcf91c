/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hzc: zero-copy memory ranges for collective communication.
 *
 * This header is the whole contract between hzc.ko (/dev/hzc) and user space.
 *
 * General rules for every ioctl
 * -----------------------------
 * - Every command is _IOWR(HZC_IOCTL_TYPE, nr, struct hzc_xxx).  The whole
 *   command must match: another type, number or direction is -ENOTTY.  The
 *   struct's first member, @size, is sizeof() of the struct the caller was
 *   compiled against and must equal the size encoded in the command
 *   (-EINVAL otherwise).  Structs only grow at the end.
 * - @size smaller than the first version of the struct is -EINVAL.  A larger
 *   @size is accepted if every byte beyond what the kernel knows is zero, and
 *   is -E2BIG otherwise; a @size above the page size is always -E2BIG.
 *   Outputs are written back only up to the smaller of the two sizes.
 * - Every @flags bit not defined for the command, and every __reserved field
 *   that is not zero, is -EOPNOTSUPP.
 * - Fields are __u32 or __u64 (user pointers as __aligned_u64), naturally
 *   aligned, with explicit padding.  Fields named out_* are written by the
 *   kernel.  Only ids cross the ABI, never kernel pointers.
 * - A context is bound to the mm of the process that opened /dev/hzc; an
 *   ioctl or mmap from another mm (e.g. a forked child) is -EPERM.
 * - A context's resources belong to its opener, not to whoever holds the
 *   file: when the opener's address space goes away (exit, kill, execve)
 *   every activation is unpinned and uncharged, every range removed, every
 *   membership left (peers' waits end with ECONNRESET) and every peer
 *   mapping of its ranges revoked, even if a forked child or the receiver
 *   of the file descriptor (SCM_RIGHTS, pidfd_getfd) still holds the file.
 *
 * Limits (module parameters, /sys/module/hzc/parameters/; see
 * Documentation/ABI/testing/sysfs-kernel-hzc): per context ENOSPC
 * (max_ranges, max_memberships, max_board_bytes), per user EDQUOT
 * (max_user_ranges, max_user_range_bytes, max_user_memberships,
 * max_user_board_bytes), global ENOSPC
 * (max_domains), pins ENOMEM (RLIMIT_MEMLOCK and max_pinned_bytes, both
 * per user).  "User" is the real uid of the process that opened the file.
 *
 * Errno table (common to all commands; each command lists its own extras)
 * ------------------------------------------------------------------------
 *   ENOTTY      unknown command, or wrong type or direction bits
 *   EINVAL      @size too small or not the size encoded in the command, or
 *               a field has an invalid value
 *   E2BIG       @size larger than known and the unknown tail is not zero,
 *               or @size larger than the page size
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
#define HZC_ABI_VERSION		2

#define HZC_IOCTL_TYPE		0xCD

enum {
	HZC_CMD_INFO = 0x00,
	HZC_CMD_RANGE_REGISTER = 0x01,
	HZC_CMD_RANGE_UNREGISTER = 0x02,
	HZC_CMD_ACTIVATE = 0x03,
	HZC_CMD_DEACTIVATE = 0x04,
	HZC_CMD_DOMAIN_JOIN = 0x05,
	HZC_CMD_DOMAIN_LEAVE = 0x06,
	HZC_CMD_BOARD_PUT = 0x07,
	HZC_CMD_BOARD_WAIT = 0x08,
	HZC_CMD_LIST_RANGES = 0x09,
	HZC_CMD_LIST_ACTIVATIONS = 0x0a,
};

/* Feature bits reported in hzc_info.out_features. */
#define HZC_FEATURE_INFO	(1ULL << 0)
#define HZC_FEATURE_RANGES	(1ULL << 1)	/* RANGE_REGISTER/UNREGISTER */
#define HZC_FEATURE_ACTIVATIONS	(1ULL << 2)	/* ACTIVATE/DEACTIVATE */
#define HZC_FEATURE_DOMAINS	(1ULL << 3)	/* DOMAIN_*, BOARD_* */
#define HZC_FEATURE_PEER_MAP	(1ULL << 4)	/* LIST_*, mmap of peer ranges */
/* hzc_activate.cookie, hzc_list_activations.desc_size, hzc_activation_desc.cookie */
#define HZC_FEATURE_ACTIVATION_COOKIE	(1ULL << 5)

/* Number of board keys per domain: keys are 0 .. HZC_BOARD_KEYS - 1. */
#define HZC_BOARD_KEYS		16

/**
 * struct hzc_info - HZC_IOC_INFO: describe the module and its limits
 * @size: sizeof(struct hzc_info)
 * @flags: must be 0
 * @out_abi_version: HZC_ABI_VERSION of the running module
 * @out_page_size: PAGE_SIZE of the running kernel
 * @out_features: HZC_FEATURE_* bits
 * @out_max_pinned_bytes: max_pinned_bytes module parameter, per user
 *                        (0 = only RLIMIT_MEMLOCK)
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

/**
 * struct hzc_range_register - HZC_IOC_RANGE_REGISTER: publish a VA range
 * @size: sizeof(struct hzc_range_register)
 * @flags: must be 0
 * @base: first byte of the range in the caller's address space
 * @length: length of the range in bytes
 * @out_id: the range's id, unique and never reused while the module is loaded
 * @out_mmap_offset: offset of the range's window in the /dev/hzc mmap space;
 *                   allocated, unrelated to @base (a window may be reused
 *                   after its range is gone)
 *
 * [@base, @base + @length) must be page aligned, inside the user address
 * space and covered by mappings (any protection, e.g. a PROT_NONE
 * reservation).  It must not overlap a range of the same context.
 *
 * Errors:
 *   EINVAL      @length is 0, @base or @length is not page aligned, or the
 *               range ends beyond the user address space or beyond 2^47
 *               (the 4-level x86-64 user address space)
 *   EOVERFLOW   @base + @length overflows
 *   EFAULT      part of the range is not mapped
 *   EEXIST      the range overlaps a registered range; nothing changed
 *   ENOSPC      the context has max_ranges ranges, or no window is left
 *   EDQUOT      the user's ranges number max_user_ranges, or would cover
 *               more than max_user_range_bytes (a range takes as much of
 *               the window space, shared by all users, as it covers)
 */
struct hzc_range_register {
	__u32 size;
	__u32 flags;
	__aligned_u64 base;
	__aligned_u64 length;
	__aligned_u64 out_id;
	__aligned_u64 out_mmap_offset;
};

#define HZC_IOC_RANGE_REGISTER \
	_IOWR(HZC_IOCTL_TYPE, HZC_CMD_RANGE_REGISTER, struct hzc_range_register)

/**
 * struct hzc_range_unregister - HZC_IOC_RANGE_UNREGISTER: remove a range
 * @size: sizeof(struct hzc_range_unregister)
 * @flags: must be 0
 * @base: exactly the @base the range was registered with
 *
 * Peers' mappings of the range are revoked: a later access is SIGBUS.
 *
 * Errors:
 *   ENOENT      no range of this context starts at @base
 *   EBUSY       the range still has activations
 */
struct hzc_range_unregister {
	__u32 size;
	__u32 flags;
	__aligned_u64 base;
};

#define HZC_IOC_RANGE_UNREGISTER \
	_IOWR(HZC_IOCTL_TYPE, HZC_CMD_RANGE_UNREGISTER, struct hzc_range_unregister)

/**
 * struct hzc_activate - HZC_IOC_ACTIVATE: pin a sub-range and publish it
 * @size: sizeof(struct hzc_activate)
 * @flags: must be 0
 * @va: first byte of the activation
 * @length: length in bytes
 * @out_range_id: id of the range that contains the activation
 * @cookie: an opaque value stored with the activation and returned with it by
 *          HZC_IOC_LIST_ACTIVATIONS (e.g. how peers reach the memory by other
 *          means); callers that do not know the field store 0.  Modules
 *          without HZC_FEATURE_ACTIVATION_COOKIE refuse a non-zero cookie
 *          (E2BIG)
 *
 * [@va, @va + @length) must lie inside one registered range, be mapped
 * writable, and not overlap another activation.  Its pages are pinned
 * long-term (FOLL_LONGTERM | FOLL_WRITE) and charged to the opener's user
 * (user->locked_vm, shown in the opener's VmPin) against the caller's
 * RLIMIT_MEMLOCK: every pin of one uid counts against the one limit
 * (CAP_IPC_LOCK exempts).  Either the whole activation is pinned or nothing
 * is.  Pinning does not block other calls on the context.
 *
 * Errors:
 *   EINVAL      @length is 0, @va or @length is not page aligned, or the
 *               activation leaves the range that contains @va
 *   EOVERFLOW   @va + @length overflows
 *   ENOENT      no range contains @va
 *   EEXIST      the activation overlaps an existing activation
 *   ENOMEM      RLIMIT_MEMLOCK or max_pinned_bytes would be exceeded for the
 *               user, or out of memory
 *   ENOENT      (also) the range was unregistered while pinning
 *   EFAULT      part of it is not mapped, or not writable, or is a shared
 *               mapping of a file whose writes the file system tracks
 *               (anonymous memory, shmem/memfd and hugetlbfs can be
 *               activated; a MAP_SHARED file on ext4, say, cannot)
 *   EINTR       a fatal signal arrived while pinning
 */
struct hzc_activate {
	__u32 size;
	__u32 flags;
	__aligned_u64 va;
	__aligned_u64 length;
	__aligned_u64 out_range_id;
	__aligned_u64 cookie;
};

#define HZC_IOC_ACTIVATE _IOWR(HZC_IOCTL_TYPE, HZC_CMD_ACTIVATE, struct hzc_activate)

/**
 * struct hzc_deactivate - HZC_IOC_DEACTIVATE: revoke and unpin an activation
 * @size: sizeof(struct hzc_deactivate)
 * @flags: must be 0
 * @va: exactly the @va the activation was made with
 *
 * Peers' mappings of the activation are revoked first (a later access is
 * SIGBUS), then the pages are unpinned (marked dirty) and uncharged.
 *
 * Errors:
 *   ENOENT      no activation of this context starts at @va
 */
struct hzc_deactivate {
	__u32 size;
	__u32 flags;
	__aligned_u64 va;
};

#define HZC_IOC_DEACTIVATE _IOWR(HZC_IOCTL_TYPE, HZC_CMD_DEACTIVATE, struct hzc_deactivate)

/**
 * struct hzc_domain_join - HZC_IOC_DOMAIN_JOIN: become rank @rank of a domain
 * @size: sizeof(struct hzc_domain_join)
 * @flags: must be 0
 * @domain_id: 128-bit domain id (@domain_id[0] low half), not all zero
 * @rank: this member's rank, < @nranks
 * @nranks: number of ranks of the domain, 1 .. out_max_ranks of INFO
 *
 * The first joiner creates the domain; later joiners must give the same
 * @nranks and have the creator's effective uid (or CAP_SYS_ADMIN).  A
 * context may hold several ranks of one domain.  When any member leaves
 * (explicitly, by closing the file or by the opener's exit) the domain
 * breaks: its waiters get ECONNRESET, it is no longer found by id (a new
 * join with the same id creates a new domain), peer mappings made under it
 * are revoked, and the remaining members should leave.  The id is a
 * capability: together with the creator's uid it admits to the domain, so it
 * is shown to root only.  A domain counts against max_domains until its
 * last member has left.
 *
 * Errors:
 *   EINVAL      @domain_id is zero, @nranks is 0 or too large, @rank >=
 *               @nranks, or @nranks differs from the existing domain's
 *   EBUSY       @rank is taken, or this context already holds @rank of a
 *               domain with this id (leave it first)
 *   EPERM       the caller's effective uid is not the creator's
 *   ENOSPC      max_domains domains exist, or the context holds
 *               max_memberships memberships
 *   EDQUOT      the user holds max_user_memberships memberships
 */
struct hzc_domain_join {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 nranks;
};

#define HZC_IOC_DOMAIN_JOIN _IOWR(HZC_IOCTL_TYPE, HZC_CMD_DOMAIN_JOIN, struct hzc_domain_join)

/**
 * struct hzc_domain_leave - HZC_IOC_DOMAIN_LEAVE: leave a domain
 * @size: sizeof(struct hzc_domain_leave)
 * @flags: must be 0
 * @domain_id: the domain's id
 * @rank: the rank this context holds
 * @__reserved: must be 0
 *
 * Errors:
 *   ENOENT      this context holds no such rank of such a domain
 */
struct hzc_domain_leave {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 __reserved;
};

#define HZC_IOC_DOMAIN_LEAVE _IOWR(HZC_IOCTL_TYPE, HZC_CMD_DOMAIN_LEAVE, struct hzc_domain_leave)

/**
 * struct hzc_board_put - HZC_IOC_BOARD_PUT: publish a blob on the board
 * @size: sizeof(struct hzc_board_put)
 * @flags: must be 0
 * @domain_id: the domain's id
 * @rank: the rank this context holds
 * @key: board key, < HZC_BOARD_KEYS
 * @blob: user pointer to the blob
 * @blob_len: its length, 0 .. out_max_blob_size of INFO
 * @__reserved: must be 0
 *
 * Each member publishes at most one blob per key; the blob stays on the
 * board until the domain is freed.  Its bytes count against the context's
 * max_board_bytes while the member stays, and against the user's
 * max_user_board_bytes until the domain is freed.
 *
 * Errors:
 *   EINVAL      @key or @blob_len out of bounds
 *   ENOENT      this context holds no such rank of such a domain
 *   EEXIST      this member already published under @key
 *   ECONNRESET  the domain is broken (a member left)
 *   ENOSPC      the context's max_board_bytes would be exceeded
 *   EDQUOT      the user's max_user_board_bytes would be exceeded
 */
struct hzc_board_put {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 key;
	__aligned_u64 blob;
	__u32 blob_len;
	__u32 __reserved;
};

#define HZC_IOC_BOARD_PUT _IOWR(HZC_IOCTL_TYPE, HZC_CMD_BOARD_PUT, struct hzc_board_put)

/**
 * struct hzc_board_wait - HZC_IOC_BOARD_WAIT: wait for every rank's blob
 * @size: sizeof(struct hzc_board_wait)
 * @flags: must be 0
 * @domain_id: the domain's id
 * @rank: the rank this context holds
 * @key: board key, < HZC_BOARD_KEYS
 * @timeout_ms: how long to wait; 0 = only look
 * @blob_stride: bytes reserved per rank in @blobs
 * @blobs: user pointer to nranks * @blob_stride bytes, or 0: receives rank
 *         r's blob at r * @blob_stride
 * @blob_lens: user pointer to nranks __u32, or 0: receives each blob's length
 * @missing: user pointer to (nranks + 63) / 64 __u64, or 0: bit r set if
 *           rank r has not published @key (written on success and ETIMEDOUT)
 * @out_nr_missing: number of ranks that have not published @key (written on
 *                  success and ETIMEDOUT)
 * @__reserved: must be 0
 *
 * Sleeps interruptibly until all nranks members have published @key.
 *
 * Errors:
 *   EINVAL      @key out of bounds, or @blobs given with @blob_stride 0
 *   ENOENT      this context holds no such rank of such a domain
 *   EOVERFLOW   a buffer (nranks entries from @blobs, @blob_lens or
 *               @missing) wraps around the end of the address space
 *   ETIMEDOUT   not every rank published in time (see @missing)
 *   ECONNRESET  the domain broke (a member left or died) before every rank
 *               published @key; a key that every rank published stays
 *               readable after the domain breaks
 *   EMSGSIZE    a blob is longer than @blob_stride (@blob_lens is written)
 *   EINTR       a signal arrived
 */
struct hzc_board_wait {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 key;
	__u32 timeout_ms;
	__u32 blob_stride;
	__aligned_u64 blobs;
	__aligned_u64 blob_lens;
	__aligned_u64 missing;
	__u32 out_nr_missing;
	__u32 __reserved;
};

#define HZC_IOC_BOARD_WAIT _IOWR(HZC_IOCTL_TYPE, HZC_CMD_BOARD_WAIT, struct hzc_board_wait)

/**
 * struct hzc_range_desc - one range in the output of HZC_IOC_LIST_RANGES
 * @id: the range's id
 * @base: its base in the owner's address space
 * @length: its length
 * @mmap_offset: offset to pass to mmap() of /dev/hzc to map it
 * @activated_bytes: sum of the lengths of its activations
 * @nr_activations: number of activations
 * @__reserved: written as 0
 */
struct hzc_range_desc {
	__aligned_u64 id;
	__aligned_u64 base;
	__aligned_u64 length;
	__aligned_u64 mmap_offset;
	__aligned_u64 activated_bytes;
	__u32 nr_activations;
	__u32 __reserved;
};

/**
 * struct hzc_list_ranges - HZC_IOC_LIST_RANGES: list a member's ranges
 * @size: sizeof(struct hzc_list_ranges)
 * @flags: must be 0
 * @domain_id: a domain the caller is a member of
 * @rank: the rank the caller holds in it
 * @peer_rank: the member whose ranges are listed (may be @rank)
 * @num_ranges: in: capacity of @ranges; out: number of ranges the peer has
 * @out_peer_pid: the peer's process id (in the initial pid namespace)
 * @ranges: user pointer to @num_ranges struct hzc_range_desc, sorted by base
 *
 * Errors:
 *   EINVAL      @peer_rank >= nranks
 *   ENOENT      the caller holds no such rank, or @peer_rank has not joined
 *   ECONNRESET  the domain is broken
 *   EMSGSIZE    @num_ranges is too small; it is updated to the needed count
 *               and the first entries are written
 */
struct hzc_list_ranges {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 peer_rank;
	__u32 num_ranges;
	__u32 out_peer_pid;
	__aligned_u64 ranges;
};

#define HZC_IOC_LIST_RANGES _IOWR(HZC_IOCTL_TYPE, HZC_CMD_LIST_RANGES, struct hzc_list_ranges)

/**
 * struct hzc_activation_desc - one activation in HZC_IOC_LIST_ACTIVATIONS
 * @va: its first byte in the owner's address space
 * @length: its length
 * @cookie: the @cookie it was activated with
 *
 * Like the ioctl structs, this one only grows at the end; the caller says
 * which size it knows in hzc_list_activations.desc_size.  Set desc_size to
 * sizeof(struct hzc_activation_desc): 0 (what callers built before the
 * cookie existed pass) means the first version, 16 bytes apart.
 */
struct hzc_activation_desc {
	__aligned_u64 va;
	__aligned_u64 length;
	__aligned_u64 cookie;
};

/* Size of the first version of struct hzc_activation_desc (va, length). */
#define HZC_ACTIVATION_DESC_SIZE_V0	16

/**
 * struct hzc_list_activations - HZC_IOC_LIST_ACTIVATIONS: list a range's
 *                               activations
 * @size: sizeof(struct hzc_list_activations)
 * @flags: must be 0
 * @domain_id: a domain the caller is a member of
 * @rank: the rank the caller holds in it
 * @peer_rank: the member that owns the range (may be @rank)
 * @range_id: the range's id
 * @num_activations: in: capacity of @activations; out: number of activations
 * @desc_size: size of one element of @activations, i.e. the caller's
 *             sizeof(struct hzc_activation_desc); 0 means
 *             HZC_ACTIVATION_DESC_SIZE_V0.  Elements are @desc_size apart; the
 *             kernel fills what it knows of each and zeroes the rest.  Modules
 *             without HZC_FEATURE_ACTIVATION_COOKIE require 0 here.
 * @activations: user pointer to @num_activations elements of @desc_size
 *               bytes, sorted by va
 *
 * Errors:
 *   EINVAL      @peer_rank >= nranks, or @desc_size is not 0 and is below
 *               HZC_ACTIVATION_DESC_SIZE_V0, above the page size or not a
 *               multiple of 8
 *   ENOENT      the caller holds no such rank, @peer_rank has not joined,
 *               or the peer has no range @range_id
 *   ECONNRESET  the domain is broken
 *   EMSGSIZE    @num_activations is too small; it is updated to the needed
 *               count and the first entries are written
 */
struct hzc_list_activations {
	__u32 size;
	__u32 flags;
	__aligned_u64 domain_id[2];
	__u32 rank;
	__u32 peer_rank;
	__aligned_u64 range_id;
	__u32 num_activations;
	__u32 desc_size;
	__aligned_u64 activations;
};

#define HZC_IOC_LIST_ACTIVATIONS \
	_IOWR(HZC_IOCTL_TYPE, HZC_CMD_LIST_ACTIVATIONS, struct hzc_list_activations)

/*
 * Peer mappings
 * -------------
 * mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off) of /dev/hzc,
 * with off = mmap_offset of a range (from RANGE_REGISTER or LIST_RANGES)
 * plus a page-aligned offset into the range, maps that part of the owner's
 * range.  Activated parts show the owner's pages; an access elsewhere is
 * SIGBUS.  A context may map its own ranges, and another context's while
 * the two hold ranks of a common unbroken domain.  Deactivate, unregister,
 * the owner's exit and the breaking of the last domain the two share revoke
 * the mapping (later accesses are SIGBUS, also after the owner activates
 * that memory again); the mapping keeps its own range and never shows
 * another range's pages.  It is not inherited by fork().  ptrace and
 * /proc/PID/mem can read it.  A file opened read-only maps read-only
 * (PROT_WRITE is then EACCES).
 *
 * mmap errors, checked in this order:
 *   EPERM       the caller's mm does not own this file
 *   EINVAL      not MAP_SHARED
 *   EPERM       PROT_EXEC was asked for (mprotect() to PROT_EXEC is EACCES)
 *   EPERM       @off names no range the caller may map: no window there,
 *               the range is gone, or its owner shares no unbroken domain
 *               with the caller.  One errno for all of them, decided before
 *               anything else about the range, so that probing offsets
 *               reveals nothing about other users' ranges
 *   EINVAL      the mapping extends beyond the range
 */

/*
 * Generic netlink family "hzc"
 * ============================
 * Inspection of the module's objects and a stream of their changes, for
 * operators (hzcctl) and monitoring agents, in the manner of the RDMA
 * netlink family ("rdma resource show", "rdma monitor").  The family is
 * registered while hzc.ko is loaded, in the initial network namespace only
 * (resolve its id with CTRL_CMD_GETFAMILY and HZC_GENL_NAME).  Every message
 * carries a struct genlmsghdr with .version = HZC_GENL_VERSION and no
 * family header; attributes are HZC_NLA_*.
 *
 * Who sees what (decided in the kernel, per request):
 *   - A caller with CAP_SYS_ADMIN in the initial user namespace sees every
 *     object, and their addresses (HZC_NLA_RANGE_BASE, HZC_NLA_ACT_ADDR)
 *     and domain ids (HZC_NLA_DOMAIN_ID) - what the root-only (0400)
 *     sysfs files show.
 *   - Any other caller sees only objects of its own uid (the real uid of
 *     the process that opened /dev/hzc, HZC_NLA_UID; for domains, those
 *     with a member of its uid), never addresses or domain ids.  An object
 *     it may not see is ENOENT, as one that does not exist.
 *   - The "events" multicast group may be joined only with CAP_SYS_ADMIN
 *     (EPERM otherwise): an event names objects of every user.
 *
 * Commands (request -> reply):
 *   HZC_NL_CMD_STAT_GET        doit.  Reply: the global counters (the files
 *                              of /sys/kernel/hzc/): HZC_NLA_ABI_VERSION,
 *                              HZC_NLA_STAT_*.  Counts all users' objects.
 *   HZC_NL_CMD_RANGE_GET       doit with HZC_NLA_RANGE_ID: one range.
 *                              dump: every visible range, in id order;
 *                              optional filter HZC_NLA_PID (owner).
 *   HZC_NL_CMD_ACTIVATION_GET  dump only: every visible activation, ordered
 *                              by range id then address; optional filters
 *                              HZC_NLA_RANGE_ID, HZC_NLA_PID.
 *   HZC_NL_CMD_DOMAIN_GET      doit with HZC_NLA_DOMAIN_SEQ: one domain.
 *                              dump: every visible domain, in seq order.
 *   HZC_NL_CMD_MEMBER_GET      dump only: every member of the visible
 *                              domains, ordered by domain seq then rank;
 *                              optional filter HZC_NLA_DOMAIN_SEQ.
 * A dump sends one message (NLM_F_MULTI) per object and ends with
 * NLMSG_DONE; it may take many recvmsg() calls.  It resumes after the last
 * object it sent, by key (range id; range id + address; domain seq; domain
 * seq + rank): an object that exists during the whole dump is sent exactly
 * once; one created or removed during it may or may not appear.
 *
 * Objects and their attributes (names and values as in sysfs,
 * Documentation/ABI/testing/sysfs-kernel-hzc):
 *   range:      RANGE_ID, PID (owner_pid), UID, RANGE_BASE (privileged),
 *               RANGE_SIZE, RANGE_ACTIVATED_BYTES, RANGE_NR_ACTIVATIONS,
 *               RANGE_STATE ("registered" or "active"),
 *               RANGE_DOMAINS (nested: one HZC_NLA_DOMAIN_SEQ per domain the
 *               owner is a member of, ascending as in sysfs' domains file)
 *   activation: RANGE_ID, PID, UID, ACT_OFFSET (from the range's base),
 *               ACT_SIZE, ACT_ADDR (privileged), ACT_COOKIE
 *   domain:     DOMAIN_SEQ (its sysfs directory name), DOMAIN_ID
 *               (privileged; 16 bytes, the id as two __u64 in host order,
 *               low word first), DOMAIN_STATE ("live" or "broken"),
 *               DOMAIN_NRANKS, DOMAIN_JOINED, DOMAIN_CREATOR_UID
 *   member:     DOMAIN_SEQ, MEMBER_RANK, PID, UID
 *
 * Events (multicast group HZC_GENL_MCGRP_EVENTS; never sent as replies).
 * Each carries HZC_NLA_EVENT_SEQ, a counter that grows by one per event
 * the module emits (a gap means the listener lost events: its socket
 * buffer overflowed, recvmsg() also reports ENOBUFS), and the attributes
 * of the object as it is after the change (addresses and ids included):
 *   HZC_NL_CMD_EVENT_RANGE_SET         a range was registered
 *   HZC_NL_CMD_EVENT_RANGE_UNSET       a range was unregistered (or its
 *                                      context released)
 *   HZC_NL_CMD_EVENT_ACTIVATE          an activation was made
 *   HZC_NL_CMD_EVENT_DEACTIVATE        an activation was removed
 *   HZC_NL_CMD_EVENT_MEMBER_JOIN       a member joined a domain (member
 *                                      attributes + DOMAIN_STATE)
 *   HZC_NL_CMD_EVENT_MEMBER_LEAVE      a member left it cleanly
 *   HZC_NL_CMD_EVENT_MEMBER_BROKEN     a member left without DOMAIN_LEAVE
 *                                      (its process died or closed the
 *                                      file); the domain is broken
 *   HZC_NL_CMD_EVENT_CONTEXT_RELEASE   a context was torn down: PID, UID
 * A context's teardown emits the UNSET, DEACTIVATE and MEMBER_BROKEN events
 * of what it held before its CONTEXT_RELEASE.
 *
 * Errors: unknown command EOPNOTSUPP; an attribute of the wrong type or
 * length, an unknown attribute, or a missing required attribute EINVAL
 * (with an extended ACK naming the attribute); no such or no visible
 * object ENOENT; a doit-only command asked to dump, or a dump-only command
 * asked without NLM_F_DUMP, EOPNOTSUPP; an object too big for one message
 * (a range whose owner holds some 300 memberships or more, possible only
 * with max_memberships raised above its default of 256) EMSGSIZE, for a
 * dump in its NLMSG_DONE, and such an event is dropped (a gap in
 * HZC_NLA_EVENT_SEQ).
 */
#define HZC_GENL_NAME		"hzc"
#define HZC_GENL_VERSION	1
#define HZC_GENL_MCGRP_EVENTS	"events"

enum hzc_nl_cmd {
	HZC_NL_CMD_UNSPEC,
	HZC_NL_CMD_STAT_GET,
	HZC_NL_CMD_RANGE_GET,
	HZC_NL_CMD_ACTIVATION_GET,
	HZC_NL_CMD_DOMAIN_GET,
	HZC_NL_CMD_MEMBER_GET,
	HZC_NL_CMD_EVENT_RANGE_SET,
	HZC_NL_CMD_EVENT_RANGE_UNSET,
	HZC_NL_CMD_EVENT_ACTIVATE,
	HZC_NL_CMD_EVENT_DEACTIVATE,
	HZC_NL_CMD_EVENT_MEMBER_JOIN,
	HZC_NL_CMD_EVENT_MEMBER_LEAVE,
	HZC_NL_CMD_EVENT_MEMBER_BROKEN,
	HZC_NL_CMD_EVENT_CONTEXT_RELEASE,

	__HZC_NL_CMD_MAX,
	HZC_NL_CMD_MAX = __HZC_NL_CMD_MAX - 1
};

enum hzc_nl_attr {
	HZC_NLA_UNSPEC,
	HZC_NLA_PAD,			/* alignment of the __u64 attributes */
	HZC_NLA_ABI_VERSION,		/* u32 */
	HZC_NLA_STAT_NR_CONTEXTS,	/* u64 */
	HZC_NLA_STAT_NR_RANGES,		/* u64 */
	HZC_NLA_STAT_NR_ACTIVATIONS,	/* u64 */
	HZC_NLA_STAT_NR_DOMAINS,	/* u64 */
	HZC_NLA_STAT_PINNED_BYTES,	/* u64 */
	HZC_NLA_PID,			/* u32: owner process (tgid) */
	HZC_NLA_UID,			/* u32: owner's real uid */
	HZC_NLA_RANGE_ID,		/* u64 */
	HZC_NLA_RANGE_BASE,		/* u64: first address */
	HZC_NLA_RANGE_SIZE,		/* u64: bytes */
	HZC_NLA_RANGE_ACTIVATED_BYTES,	/* u64 */
	HZC_NLA_RANGE_NR_ACTIVATIONS,	/* u32 */
	HZC_NLA_RANGE_STATE,		/* NUL-terminated string */
	HZC_NLA_RANGE_DOMAINS,		/* nested: HZC_NLA_DOMAIN_SEQ ... */
	HZC_NLA_ACT_OFFSET,		/* u64: from the range's base */
	HZC_NLA_ACT_SIZE,		/* u64: bytes */
	HZC_NLA_ACT_ADDR,		/* u64: first address */
	HZC_NLA_ACT_COOKIE,		/* u64: hzc_activate.cookie */
	HZC_NLA_DOMAIN_SEQ,		/* u64 */
	HZC_NLA_DOMAIN_ID,		/* binary, 16 bytes */
	HZC_NLA_DOMAIN_STATE,		/* NUL-terminated string */
	HZC_NLA_DOMAIN_NRANKS,		/* u32 */
	HZC_NLA_DOMAIN_JOINED,		/* u32 */
	HZC_NLA_DOMAIN_CREATOR_UID,	/* u32 */
	HZC_NLA_MEMBER_RANK,		/* u32 */
	HZC_NLA_EVENT_SEQ,		/* u64 */

	__HZC_NLA_MAX,
	HZC_NLA_MAX = __HZC_NLA_MAX - 1
};

#endif /* _UAPI_LINUX_HZC_H */
