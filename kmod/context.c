// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: contexts.  One context per open file, bound to the opener's mm.
 */
#include <linux/cred.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "hzc.h"

struct hzc_ctx *hzc_ctx_create(void)
{
	struct hzc_ctx *ctx;

	if (!current->mm)
		return ERR_PTR(-EPERM);

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return ERR_PTR(-ENOMEM);

	kref_init(&ctx->kref);
	mutex_init(&ctx->lock);
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

	mmdrop(ctx->mm);
	put_pid(ctx->tgid);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
}

void hzc_ctx_put(struct hzc_ctx *ctx)
{
	kref_put(&ctx->kref, hzc_ctx_free);
}

/* The file is closed: tear everything down, then drop the file's reference. */
void hzc_ctx_release(struct hzc_ctx *ctx)
{
	atomic64_dec(&hzc_stats.nr_contexts);
	hzc_ctx_put(ctx);
}
