// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: contexts.  One context per open file, bound to the opener's mm.
 *
 * A context's resources (pins, ranges, memberships) belong to its opener,
 * not to whoever holds the file: the file survives its opener through fork
 * without exec, SCM_RIGHTS or pidfd_getfd, but the context is torn down as
 * soon as the opener's address space goes away (exit, kill, execve), by an
 * mmu notifier's release(), or when the file is closed, whichever is first.
 * The struct itself lives on, empty, until its last reference is dropped.
 */
#include <linux/cred.h>
#include <linux/mmu_notifier.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>

#include "hzc.h"

static void hzc_ctx_free(struct kref *kref)
{
	struct hzc_ctx *ctx = container_of(kref, struct hzc_ctx, kref);

	WARN_ON(ctx->nr_ranges || ctx->nr_members || ctx->board_bytes ||
		!list_empty(&ctx->members));
	mmdrop(ctx->mm);
	put_pid(ctx->tgid);
	free_uid(ctx->user);
	hzc_user_put(ctx->hu);
	mutex_destroy(&ctx->lock);
	mutex_destroy(&ctx->teardown_lock);
	kfree(ctx);
}

void hzc_ctx_put(struct hzc_ctx *ctx)
{
	kref_put(&ctx->kref, hzc_ctx_free);
}

/*
 * Leave every domain (waking peers that wait on the board and revoking
 * their mappings), revoke and unpin every activation, remove every range.
 * Runs once; a second caller waits until the first is done.
 */
static void hzc_ctx_teardown(struct hzc_ctx *ctx)
{
	mutex_lock(&ctx->teardown_lock);
	if (!ctx->dead) {
		mutex_lock(&ctx->lock);
		ctx->dead = true;
		mutex_unlock(&ctx->lock);
		hzc_domains_leave_all(ctx);
		hzc_ranges_destroy(ctx);
		hzc_nl_event_ctx_release(ctx);
	}
	mutex_unlock(&ctx->teardown_lock);
}

/* The opener's mm is being torn down (exit_mmap) or the file closed. */
static void hzc_mn_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	hzc_ctx_teardown(container_of(mn, struct hzc_ctx, mn));
}

/* After an SRCU grace period following mmu_notifier_put(). */
static void hzc_mn_free(struct mmu_notifier *mn)
{
	hzc_ctx_put(container_of(mn, struct hzc_ctx, mn));
}

static const struct mmu_notifier_ops hzc_mn_ops = {
	.release = hzc_mn_release,
	.free_notifier = hzc_mn_free,
};

struct hzc_ctx *hzc_ctx_create(void)
{
	struct hzc_ctx *ctx;
	int ret;

	if (!current->mm)
		return ERR_PTR(-EPERM);

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	ctx->uid = current_uid();
	ctx->hu = hzc_user_get(hzc_account_uid());
	if (!ctx->hu) {
		kfree(ctx);
		return ERR_PTR(-ENOMEM);
	}
	kref_init(&ctx->kref);
	mutex_init(&ctx->teardown_lock);
	mutex_init(&ctx->lock);
	spin_lock_init(&ctx->members_lock);
	INIT_LIST_HEAD(&ctx->members);
	ctx->ranges = RB_ROOT_CACHED;
	mmgrab(current->mm);
	ctx->mm = current->mm;
	ctx->tgid = get_pid(task_tgid(current));
	ctx->user = get_uid(current_user());

	ctx->mn.ops = &hzc_mn_ops;
	ret = mmu_notifier_register(&ctx->mn, current->mm);
	if (ret) {
		hzc_ctx_put(ctx);
		return ERR_PTR(ret);
	}
	/* The notifier's reference, dropped by hzc_mn_free(). */
	kref_get(&ctx->kref);
	atomic64_inc(&hzc_stats.nr_contexts);
	return ctx;
}

/* The file is closed: tear down (if the mm has not), drop the file's refs. */
void hzc_ctx_close(struct hzc_ctx *ctx)
{
	hzc_ctx_teardown(ctx);
	mmu_notifier_put(&ctx->mn);
	atomic64_dec(&hzc_stats.nr_contexts);
	hzc_ctx_put(ctx);
}

/*
 * A domain @ctx was a member of broke: the grants of its ranges' peer
 * mappings that no other domain allows die now (peer.c), and every peer PTE
 * of its ranges is zapped.  Faults that passed the check before the domain
 * broke hold range->lock for reading while they insert; taking it for
 * writing waits for them, so no PTE they insert survives the zap, and every
 * later fault sees the grant dead.
 */
void hzc_ctx_revoke(struct hzc_ctx *ctx)
{
	struct interval_tree_node *node;
	struct hzc_range *range;

	mutex_lock(&ctx->lock);
	for (node = interval_tree_iter_first(&ctx->ranges, 0, ULONG_MAX); node;
	     node = interval_tree_iter_next(node, 0, ULONG_MAX)) {
		range = container_of(node, struct hzc_range, node);
		down_write(&range->lock);
		hzc_peer_check_grants(range);
		up_write(&range->lock);
		hzc_peer_revoke(range, 0, hzc_range_size(range));
		cond_resched();
	}
	mutex_unlock(&ctx->lock);
}
