/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hzc: declarations shared by the files of hzc.ko.
 */
#ifndef _HZC_PRIV_H
#define _HZC_PRIV_H

#include <linux/atomic.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/hzc.h>

struct mm_struct;
struct pid;
struct kobject;

/* Module parameters (limits.c). */
extern unsigned int hzc_max_ranges;
extern unsigned int hzc_max_domains;
extern unsigned long long hzc_max_pinned_bytes;

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
 * struct hzc_ctx - one open file of /dev/hzc
 * @kref: references: the file, and short-lived lookups by peers
 * @mm: the opener's mm (mmgrab()ed); every ioctl must come from it
 * @tgid: the opener's thread group, shown in sysfs
 * @euid: the opener's effective uid
 * @lock: serialises changes of this context's ranges and activations
 */
struct hzc_ctx {
	struct kref kref;
	struct mm_struct *mm;
	struct pid *tgid;
	kuid_t euid;
	struct mutex lock; /* ranges and activations of this context */
};

struct hzc_ctx *hzc_ctx_create(void);
void hzc_ctx_release(struct hzc_ctx *ctx);
void hzc_ctx_put(struct hzc_ctx *ctx);

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

/* sysfs.c */
int hzc_sysfs_init(void);
void hzc_sysfs_exit(void);

#endif /* _HZC_PRIV_H */
