// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: ranges.  A range is a registered [base, base + size) of the owner's
 * address space, kept in the context's interval tree, with a unique id and
 * a window in the mmap offset space of /dev/hzc.
 *
 * A range's window starts at byte offset (ctx->slot << HZC_VA_BITS) + base:
 * ranges of one context never overlap, so neither do their windows, and no
 * window is ever "allocated" or exhausted.  A slot is reused by a later
 * context once its owner is gone, which is safe because a peer VMA keeps a
 * reference to the range it mapped and never looks the offset up again.
 */
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "hzc.h"

/* Windows of all live ranges, by byte offset. */
static DEFINE_SPINLOCK(hzc_windows_lock);
static struct rb_root_cached hzc_windows = RB_ROOT_CACHED;
static atomic64_t hzc_last_range_id = ATOMIC64_INIT(0);

static void hzc_range_free(struct kref *kref)
{
	struct hzc_range *range = container_of(kref, struct hzc_range, kref);

	hzc_ctx_put(range->ctx);
	kfree(range);
}

void hzc_range_put(struct hzc_range *range)
{
	kref_put(&range->kref, hzc_range_free);
}

/* Takes a reference on the range whose window contains @pgoff, if any. */
struct hzc_range *hzc_range_get_by_window(unsigned long pgoff)
{
	struct interval_tree_node *node;
	struct hzc_range *range = NULL;
	unsigned long off = pgoff << PAGE_SHIFT;

	if (pgoff > (ULONG_MAX >> PAGE_SHIFT))
		return NULL;
	/* A range is in the tree only while its context holds a reference. */
	spin_lock(&hzc_windows_lock);
	node = interval_tree_iter_first(&hzc_windows, off, off);
	if (node) {
		range = container_of(node, struct hzc_range, wnode);
		kref_get(&range->kref);
	}
	spin_unlock(&hzc_windows_lock);
	return range;
}

/* Is all of [start, end) covered by VMAs, without holes? */
static int hzc_check_mapped(struct mm_struct *mm, unsigned long start,
			    unsigned long end)
{
	struct vm_area_struct *vma;
	unsigned long addr = start;
	int ret = 0;

	mmap_read_lock(mm);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr) {
			ret = -EFAULT;
			break;
		}
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return ret;
}

int hzc_range_register(struct hzc_ucmd *ucmd)
{
	struct hzc_range_register *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct hzc_range *range;
	u64 end;
	int ret;

	if (cmd->flags)
		return -EOPNOTSUPP;
	if (check_add_overflow(cmd->base, cmd->length, &end))
		return -EOVERFLOW;
	if (!cmd->length || !PAGE_ALIGNED(cmd->base) ||
	    !PAGE_ALIGNED(cmd->length) || end > TASK_SIZE ||
	    end > HZC_VA_LIMIT)
		return -EINVAL;

	range = kzalloc(sizeof(*range), GFP_KERNEL_ACCOUNT);
	if (!range)
		return -ENOMEM;
	kref_init(&range->kref);
	init_rwsem(&range->lock);
	range->acts = RB_ROOT_CACHED;
	range->node.start = cmd->base;
	range->node.last = end - 1;
	/* Not mappable until fully set up. */
	range->dead = true;

	mutex_lock(&ctx->lock);
	if (ctx->nr_ranges >= READ_ONCE(hzc_max_ranges)) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	if (interval_tree_iter_first(&ctx->ranges, range->node.start,
				     range->node.last)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	ret = hzc_check_mapped(ctx->mm, cmd->base, end);
	if (ret)
		goto out_unlock;

	range->id = atomic64_inc_return(&hzc_last_range_id);
	ret = hzc_sysfs_range_add(range);
	if (ret)
		goto out_unlock;

	kref_get(&ctx->kref);
	range->ctx = ctx;
	range->wnode.start = ((unsigned long)ctx->slot << HZC_VA_BITS) +
			     cmd->base;
	range->wnode.last = range->wnode.start + cmd->length - 1;
	range->window = range->wnode.start >> PAGE_SHIFT;
	interval_tree_insert(&range->node, &ctx->ranges);
	ctx->nr_ranges++;
	atomic64_inc(&hzc_stats.nr_ranges);
	spin_lock(&hzc_windows_lock);
	interval_tree_insert(&range->wnode, &hzc_windows);
	spin_unlock(&hzc_windows_lock);
	down_write(&range->lock);
	range->dead = false;
	up_write(&range->lock);
	mutex_unlock(&ctx->lock);

	cmd->out_id = range->id;
	cmd->out_mmap_offset = range->wnode.start;
	return 0;

out_unlock:
	mutex_unlock(&ctx->lock);
	kfree(range);
	return ret;
}

/* Remove a range without activations.  Called with ctx->lock held. */
static void hzc_range_remove(struct hzc_ctx *ctx, struct hzc_range *range)
{
	lockdep_assert_held(&ctx->lock);

	down_write(&range->lock);
	range->dead = true;
	up_write(&range->lock);

	interval_tree_remove(&range->node, &ctx->ranges);
	ctx->nr_ranges--;
	atomic64_dec(&hzc_stats.nr_ranges);
	spin_lock(&hzc_windows_lock);
	interval_tree_remove(&range->wnode, &hzc_windows);
	spin_unlock(&hzc_windows_lock);
	hzc_sysfs_range_del(range);
	/* Peer VMAs keep the range; their faults now get SIGBUS. */
	hzc_peer_revoke(range, 0, hzc_range_size(range));
	hzc_range_put(range);
}

int hzc_range_unregister(struct hzc_ucmd *ucmd)
{
	struct hzc_range_unregister *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct interval_tree_node *node;
	struct hzc_range *range;
	int ret = 0;

	if (cmd->flags)
		return -EOPNOTSUPP;

	mutex_lock(&ctx->lock);
	node = interval_tree_iter_first(&ctx->ranges, cmd->base, cmd->base);
	if (!node || node->start != cmd->base) {
		ret = -ENOENT;
		goto out_unlock;
	}
	range = container_of(node, struct hzc_range, node);
	if (range->nr_acts) {
		ret = -EBUSY;
		goto out_unlock;
	}
	hzc_range_remove(ctx, range);
out_unlock:
	mutex_unlock(&ctx->lock);
	return ret;
}

/* The context is going away: deactivate and remove every range. */
void hzc_ranges_destroy(struct hzc_ctx *ctx)
{
	struct interval_tree_node *node;
	struct hzc_range *range;

	mutex_lock(&ctx->lock);
	while ((node = interval_tree_iter_first(&ctx->ranges, 0, ULONG_MAX))) {
		range = container_of(node, struct hzc_range, node);
		hzc_activations_destroy(ctx, range);
		hzc_range_remove(ctx, range);
		cond_resched();
	}
	mutex_unlock(&ctx->lock);
}

void hzc_windows_destroy(void)
{
	WARN_ON(!RB_EMPTY_ROOT(&hzc_windows.rb_root));
}
