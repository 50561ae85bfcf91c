// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: contexts.  One context per open file, bound to the opener's mm.
 */
#include <linux/cred.h>
#include <linux/idr.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "hzc.h"

static DEFINE_IDA(hzc_slots);

struct hzc_ctx *hzc_ctx_create(void)
{
	struct hzc_ctx *ctx;
	int ret;

	if (!current->mm)
		return ERR_PTR(-EPERM);

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	ret = ida_alloc_range(&hzc_slots, 1, HZC_MAX_SLOTS, GFP_KERNEL);
	if (ret < 0) {
		kfree(ctx);
		return ERR_PTR(ret);
	}
	ctx->slot = ret;

	kref_init(&ctx->kref);
	mutex_init(&ctx->lock);
	spin_lock_init(&ctx->members_lock);
	INIT_LIST_HEAD(&ctx->members);
	ctx->ranges = RB_ROOT_CACHED;
	mmgrab(current->mm);
	ctx->mm = current->mm;
	ctx->tgid = get_pid(task_tgid(current));
	ctx->euid = current_euid();
	atomic64_inc(&hzc_stats.nr_contexts);
	return ctx;
}

static void hzc_ctx_free(struct kref *kref)
{
	struct hzc_ctx *ctx = container_of(kref, struct hzc_ctx, kref);

	WARN_ON(ctx->nr_ranges || ctx->pinned_bytes ||
		!list_empty(&ctx->members));
	mmdrop(ctx->mm);
	put_pid(ctx->tgid);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
}

void hzc_ctx_put(struct hzc_ctx *ctx)
{
	kref_put(&ctx->kref, hzc_ctx_free);
}

/*
 * The file is closed (explicitly or by the owner's death): leave every
 * domain (waking peers that wait on the board), revoke and unpin every
 * activation, remove every range, then drop the file's reference.  Peer
 * VMAs may keep dead ranges (and through them this struct) a while longer.
 */
void hzc_ctx_release(struct hzc_ctx *ctx)
{
	hzc_domains_leave_all(ctx);
	hzc_ranges_destroy(ctx);
	/* No window of this slot is left in the window tree. */
	ida_free(&hzc_slots, ctx->slot);
	atomic64_dec(&hzc_stats.nr_contexts);
	hzc_ctx_put(ctx);
}
