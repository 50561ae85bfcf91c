/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hzc: declarations shared by the files of hzc.ko.
 *
 * Objects and their owners:
 *   hzc_ctx         one per open file; owns its ranges and memberships.  Torn
 *                   down when its opener's mm goes away (mmu notifier release)
 *                   or the file is closed, whichever comes first
 *   hzc_user        accounting of one uid: pins, memberships, board bytes
 *   hzc_range       in its context's interval tree and in the window tree;
 *                   referenced by the context and by every peer mapping
 *   hzc_activation  in its range's interval tree; owns the pinned pages
 *   hzc_domain      in the domain table while not broken; referenced by its
 *                   members and by waiters; counted until freed
 *   hzc_member      one rank of a domain held by a context
 *   hzc_grant       one peer mapping's right to a range (peer.c)
 *
 * Reachability (as iommufd does it): an object is put where others can find
 * it (sysfs, window tree, domain table, board, the id-ordered xarrays the
 * netlink dumps walk) only once fully initialised, and is taken out of
 * reach before its teardown starts.
 *
 * Lock order (outer first):
 *   ctx->teardown_lock -> hzc_domains_lock -> ctx->members_lock
 *   ctx->teardown_lock -> ctx->lock -> range->lock
 *   ctx->lock -> mmap_lock (VMA checks)
 *   mmap_lock (mmap, peer fault) -> range->lock -> hzc_domains_lock
 *   ctx->lock, hzc_domains_lock -> hzc_events_lock (netlink.c; innermost
 *	mutex: it numbers and sends events, netlink's own locks inside it)
 *   netlink dump or doit -> hzc_domains_lock or range->lock ->
 *	ctx->members_lock
 * The xa_locks of hzc_ranges_xa and hzc_domains_xa are innermost spinlocks,
 * held only to find an object and take a reference on it.
 * Pinning takes no hzc lock.  Nothing copies to or from user memory under
 * hzc_domains_lock or range->lock.  sysfs show() takes no lock but
 * ctx->members_lock, so sysfs entries may be removed under any mutex.
 */
#ifndef _HZC_PRIV_H
#define _HZC_PRIV_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/interval_tree.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <linux/hzc.h>

struct mm_struct;
struct pid;
struct page;
struct file;
struct user_struct;
struct vm_area_struct;
struct hzc_kobj;

/* Module parameters (limits.c). */
extern unsigned int hzc_max_ranges;
extern unsigned int hzc_max_user_ranges;
extern unsigned long long hzc_max_user_range_bytes;
extern unsigned int hzc_max_domains;
extern unsigned long long hzc_max_pinned_bytes;
extern unsigned int hzc_max_memberships;
extern unsigned int hzc_max_user_memberships;
extern unsigned int hzc_max_board_bytes;
extern unsigned int hzc_max_user_board_bytes;

int hzc_limit_hit(const char *param, int err);

/*
 * Ranges must end below 2^HZC_VA_BITS (the 4-level x86-64 user address
 * space).  Windows are allocated in the mmap offset space of /dev/hzc, in
 * pages 1 .. HZC_WINDOW_LAST, so that every byte offset fits in a signed
 * 64-bit off_t.
 */
#define HZC_VA_BITS		47
#define HZC_VA_LIMIT		BIT_ULL(HZC_VA_BITS)
#define HZC_WINDOW_LAST		((1UL << (63 - PAGE_SHIFT)) - 1)

/* Fixed limits reported by HZC_IOC_INFO. */
#define HZC_MAX_RANKS		1024
#define HZC_MAX_BLOB_SIZE	4096

/* Global counters, shown in /sys/kernel/hzc/. */
struct hzc_stats {
	atomic64_t nr_contexts;
	atomic64_t nr_ranges;
	atomic64_t nr_activations;
	atomic64_t nr_domains;
	atomic64_t pinned_bytes;
};

extern struct hzc_stats hzc_stats;

/**
 * struct hzc_user - what one uid holds, for the per-user limits (user.c)
 * @node: in the table of users
 * @uid: the uid charged (hzc_account_uid() of the openers)
 * @ref: references: each context of the uid, each blob it published
 * @pinned_bytes: bytes pinned by its activations
 * @nr_members: memberships of its contexts
 * @board_bytes: bytes of its blobs that still exist
 * @nr_ranges: ranges of its contexts
 * @range_bytes: bytes of those ranges (the window space they take)
 */
struct hzc_user {
	struct hlist_node node;
	kuid_t uid;
	refcount_t ref;
	atomic64_t pinned_bytes;
	atomic_t nr_members;
	atomic64_t board_bytes;
	atomic_t nr_ranges;
	atomic64_t range_bytes;
};

/**
 * struct hzc_ctx - one open file of /dev/hzc
 * @kref: references: the file, the mmu notifier, each range, each peer
 *	mapping made through it, short-lived lookups
 * @mn: release() tears the context down when the opener's mm goes away
 * @mm: the opener's mm (mmgrab()ed); every ioctl and mmap must come from it
 * @tgid: the opener's thread group, shown in sysfs
 * @user: the opener's user_struct, charged with pins (RLIMIT_MEMLOCK)
 * @uid: the opener's real uid: it owns the context's objects for the netlink
 *	family (HZC_NLA_UID)
 * @hu: the hzc_user the per-user limits charge: @uid's, or for an opener in
 *	a user namespace, its namespace's owner's (hzc_account_uid())
 * @teardown_lock: serialises teardown (mm release against close)
 * @dead: torn down; nothing new may appear
 * @lock: serialises changes of this context's ranges and activations
 * @ranges: interval tree of the ranges, by address
 * @nr_ranges: number of ranges
 * @members_lock: protects @members for sysfs readers
 * @members: memberships (struct hzc_member.ctx_node), ordered by domain
 *	seq; changed under hzc_domains_lock and @members_lock
 * @nr_members: number of memberships (hzc_domains_lock)
 * @board_bytes: bytes published through the memberships (hzc_domains_lock)
 */
struct hzc_ctx {
	struct kref kref;
	struct mmu_notifier mn;
	struct mm_struct *mm;
	struct pid *tgid;
	struct user_struct *user;
	kuid_t uid;
	struct hzc_user *hu;
	struct mutex teardown_lock; /* teardown against teardown */
	bool dead;
	struct mutex lock; /* ranges and activations of this context */
	struct rb_root_cached ranges;
	unsigned int nr_ranges;
	spinlock_t members_lock; /* @members, for sysfs readers */
	struct list_head members;
	unsigned int nr_members;
	u64 board_bytes;
};

/**
 * struct hzc_range - a registered range
 * @kref: references: the context's tree, each peer mapping, lookups
 * @node: in @ctx->ranges; start/last are the first and last byte
 * @ctx: the owning context (referenced)
 * @id: unique id, never reused
 * @window: first page of the range's window in the mmap offset space
 * @lock: protects @acts and @dead against the peer fault handler
 * @acts: interval tree of the activations, by address
 * @nr_acts: number of activations
 * @activated_bytes: sum of their lengths
 * @dead: not (or no longer) registered; peer faults get SIGBUS
 * @grants: the grants of its peer mappings (peer.c), under @lock
 * @kobj: the range's sysfs directory
 */
struct hzc_range {
	struct kref kref;
	struct interval_tree_node node;
	struct hzc_ctx *ctx;
	u64 id;
	unsigned long window;
	struct rw_semaphore lock; /* @acts and @dead, against faults */
	struct rb_root_cached acts;
	unsigned int nr_acts;
	u64 activated_bytes;
	bool dead;
	struct list_head grants;
	struct hzc_kobj *kobj;
};

static inline unsigned long hzc_range_base(const struct hzc_range *range)
{
	return range->node.start;
}

static inline unsigned long hzc_range_size(const struct hzc_range *range)
{
	return range->node.last - range->node.start + 1;
}

/**
 * struct hzc_activation - a pinned, published sub-range of a range
 * @node: in the range's @acts; start/last are the first and last byte
 * @npages: number of pinned pages
 * @pages: the pinned pages, in address order
 * @cookie: the caller's opaque value, returned by LIST_ACTIVATIONS
 */
struct hzc_activation {
	struct interval_tree_node node;
	unsigned long npages;
	struct page **pages;
	u64 cookie;
};

/**
 * struct hzc_board_slot - what one rank published under one key
 * @blob: the blob (ZERO_SIZE_PTR if empty), NULL if nothing was published
 * @len: its length
 * @user: who is charged for it (referenced)
 */
struct hzc_board_slot {
	void *blob;
	u32 len;
	struct hzc_user *user;
};

/**
 * struct hzc_domain - the kernel side of a communicator on this host
 * @kref: references: each member, each waiter, a revocation in progress
 * @hnode: in the domain table while not broken
 * @id: 128-bit id (a capability: shown to root only)
 * @seq: sequence number, the name of its sysfs directory
 * @nranks: number of ranks
 * @nr_joined: number of members
 * @euid: the creator's effective uid
 * @broken: a member left; waiters fail with ECONNRESET
 * @wq: board waiters
 * @nr_published: per key, how many members published it
 * @members: member per rank, NULL if the rank is free
 * @revoke: the members' contexts when the domain broke (referenced), whose
 *	ranges' peer mappings the breaker revokes
 * @board: the published blobs, indexed [rank * HZC_BOARD_KEYS + key]; they
 *	belong to the domain, not the member, so a key that every rank
 *	published stays readable after a member leaves
 * @kobj: the domain's sysfs directory
 */
struct hzc_domain {
	struct kref kref;
	struct hlist_node hnode;
	u64 id[2];
	u64 seq;
	u32 nranks;
	u32 nr_joined;
	kuid_t euid;
	bool broken;
	wait_queue_head_t wq;
	u32 nr_published[HZC_BOARD_KEYS];
	struct hzc_member **members;
	struct hzc_ctx **revoke;
	struct hzc_board_slot *board;
	struct hzc_kobj *kobj;
};

/**
 * struct hzc_member - one rank of a domain held by a context
 * @dom: the domain (referenced)
 * @ctx: the context
 * @ctx_node: in @ctx->members
 * @rank: the rank
 * @pid: the member's process id, shown in sysfs
 * @board_bytes: bytes it published
 * @kobj: the member's sysfs directory
 */
struct hzc_member {
	struct hzc_domain *dom;
	struct hzc_ctx *ctx;
	struct list_head ctx_node;
	u32 rank;
	pid_t pid;
	u64 board_bytes;
	struct hzc_kobj *kobj;
};

/**
 * struct hzc_ucmd - one ioctl call in flight
 * @ctx: the calling context
 * @ubuffer: the user's struct
 * @user_size: the user's @size
 * @cmd: the kernel copy of the struct
 * @copy_out_on_error: write the struct back even though the handler failed
 *	(commands whose outputs explain the error)
 */
struct hzc_ucmd {
	struct hzc_ctx *ctx;
	void __user *ubuffer;
	u32 user_size;
	void *cmd;
	bool copy_out_on_error;
};

/* user.c */
kuid_t hzc_account_uid(void);
struct hzc_user *hzc_user_get(kuid_t uid);
void hzc_user_put(struct hzc_user *hu);

/* context.c */
struct hzc_ctx *hzc_ctx_create(void);
void hzc_ctx_close(struct hzc_ctx *ctx);
void hzc_ctx_put(struct hzc_ctx *ctx);
void hzc_ctx_revoke(struct hzc_ctx *ctx);

/* range.c */
int hzc_range_register(struct hzc_ucmd *ucmd);
int hzc_range_unregister(struct hzc_ucmd *ucmd);
void hzc_ranges_destroy(struct hzc_ctx *ctx);
struct hzc_range *hzc_range_get_by_window(unsigned long pgoff);
struct hzc_range *hzc_range_get_by_id(u64 id);
struct hzc_range *hzc_range_get_next(u64 *id);
void hzc_range_put(struct hzc_range *range);
void hzc_windows_destroy(void);

/* activation.c */
int hzc_activate(struct hzc_ucmd *ucmd);
int hzc_deactivate(struct hzc_ucmd *ucmd);
void hzc_activations_destroy(struct hzc_ctx *ctx, struct hzc_range *range);

/* domain.c */
extern struct mutex hzc_domains_lock;
struct hzc_domain *hzc_domain_get_next(u64 *seq);
void hzc_domain_put(struct hzc_domain *dom);
int hzc_domain_join(struct hzc_ucmd *ucmd);
int hzc_domain_leave(struct hzc_ucmd *ucmd);
int hzc_board_put(struct hzc_ucmd *ucmd);
int hzc_board_wait(struct hzc_ucmd *ucmd);
void hzc_domains_leave_all(struct hzc_ctx *ctx);
bool hzc_ctx_share_domain(struct hzc_ctx *a, struct hzc_ctx *b);
struct hzc_ctx *hzc_domain_peer_get(struct hzc_ctx *ctx, const u64 *id,
				    u32 rank, u32 peer_rank, pid_t *pid);

/* peer.c */
int hzc_peer_init(void);
void hzc_peer_exit(void);
void hzc_peer_file_init(struct file *file);
int hzc_peer_mmap(struct file *file, struct vm_area_struct *vma);
void hzc_peer_check_grants(struct hzc_range *range);
void hzc_peer_revoke(struct hzc_range *range, unsigned long start,
		     unsigned long size);
int hzc_list_ranges(struct hzc_ucmd *ucmd);
int hzc_list_activations(struct hzc_ucmd *ucmd);

/* sysfs.c */
int hzc_sysfs_init(void);
void hzc_sysfs_exit(void);
int hzc_sysfs_range_add(struct hzc_range *range);
void hzc_sysfs_range_del(struct hzc_range *range);
int hzc_sysfs_domain_add(struct hzc_domain *dom);
void hzc_sysfs_domain_del(struct hzc_domain *dom);
int hzc_sysfs_member_add(struct hzc_member *member);
void hzc_sysfs_member_del(struct hzc_member *member);

/* netlink.c */
int hzc_nl_init(void);
void hzc_nl_exit(void);
void hzc_nl_event_range(u8 cmd, struct hzc_range *range);
void hzc_nl_event_act(u8 cmd, struct hzc_range *range,
		      const struct hzc_activation *act);
/*
 * A member event, noted under hzc_domains_lock (what it says of the member
 * and its domain then) and sent after it is dropped; cmd 0: none.
 */
struct hzc_nl_member_note {
	u8 cmd;
	u32 rank;
	u32 pid;
	u32 uid;
	u64 seq;
	const char *state;
};

void hzc_nl_note_member(struct hzc_nl_member_note *note, u8 cmd,
			const struct hzc_member *m);
void hzc_nl_event_member(const struct hzc_nl_member_note *note);
void hzc_nl_event_ctx_release(struct hzc_ctx *ctx);

#endif /* _HZC_PRIV_H */
