// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: ranges.  A range is a registered [base, base + size) of the owner's
 * address space, kept in the context's interval tree, with a unique id and
 * a window in the mmap offset space of /dev/hzc.
 *
 * Windows are allocated (lowest free first) in a maple tree, so an offset
 * says nothing about the range's address.  A window is reused once its
 * range is gone, which is safe because a peer mapping keeps a reference to
 * the range it mapped and never looks the offset up again.  The tree is
 * used as the 6.1 mm uses its VMA tree (mas_empty_area() to find a gap,
 * mas_store_gfp() to fill it) under an external lock, so that allocating
 * tree nodes never drops the lock between finding a gap and filling it.
 */
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "hzc.h"

/* Windows of all live ranges, by page offset.  Entries are ranges. */
static DEFINE_MUTEX(hzc_windows_lock);
static struct maple_tree hzc_windows =
	MTREE_INIT_EXT(hzc_windows, MT_FLAGS_ALLOC_RANGE | MT_FLAGS_LOCK_EXTERN,
		       hzc_windows_lock);
static atomic64_t hzc_last_range_id = ATOMIC64_INIT(0);
/*
 * Registered ranges by id, for the netlink dumps.  A range is in it while
 * it is in its context's tree; it is erased before the tree's reference is
 * dropped, so one found under the xa_lock can be referenced.
 */
static DEFINE_XARRAY(hzc_ranges_xa);

/* Give @range the lowest free window of @npages pages. */
static int hzc_window_alloc(struct hzc_range *range, unsigned long npages)
{
	MA_STATE(mas, &hzc_windows, 0, 0);
	int ret;

	mutex_lock(&hzc_windows_lock);
	ret = mas_empty_area(&mas, 1, HZC_WINDOW_LAST, npages);
	if (!ret) {
		range->window = mas.index;
		mas.last = mas.index + npages - 1;
		ret = mas_store_gfp(&mas, range, GFP_KERNEL_ACCOUNT);
	}
	mutex_unlock(&hzc_windows_lock);
	/* -EBUSY: no gap of this size is left. */
	return ret == -EBUSY ? -ENOSPC : ret;
}

/*
 * Erasing may need tree nodes, and must not fail: a window left behind would
 * hand out a freed range.  So not mas_erase() (it gives up when allocating
 * fails) but a store of NULL over the window that retries until it can.
 */
static void hzc_window_free(struct hzc_range *range)
{
	MA_STATE(mas, &hzc_windows, range->window,
		 range->window + (hzc_range_size(range) >> PAGE_SHIFT) - 1);

	mutex_lock(&hzc_windows_lock);
	WARN_ON(mas_store_gfp(&mas, NULL, GFP_KERNEL | __GFP_NOFAIL));
	mutex_unlock(&hzc_windows_lock);
}

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
	MA_STATE(mas, &hzc_windows, pgoff, pgoff);
	struct hzc_range *range;

	/* Windows are erased under the same lock, before the range is put. */
	mutex_lock(&hzc_windows_lock);
	range = mas_walk(&mas);
	if (range)
		kref_get(&range->kref);
	mutex_unlock(&hzc_windows_lock);
	return range;
}

/* Takes a reference on the registered range @id, if any. */
struct hzc_range *hzc_range_get_by_id(u64 id)
{
	struct hzc_range *range;

	xa_lock(&hzc_ranges_xa);
	range = xa_load(&hzc_ranges_xa, id);
	if (range)
		kref_get(&range->kref);
	xa_unlock(&hzc_ranges_xa);
	return range;
}

/*
 * Takes a reference on the registered range of the lowest id >= *@id, if
 * any, and sets *@id to its id.
 */
struct hzc_range *hzc_range_get_next(u64 *id)
{
	unsigned long index = *id;
	struct hzc_range *range;

	if (*id > ULONG_MAX)
		return NULL;
	xa_lock(&hzc_ranges_xa);
	range = xa_find(&hzc_ranges_xa, &index, ULONG_MAX, XA_PRESENT);
	if (range)
		kref_get(&range->kref);
	xa_unlock(&hzc_ranges_xa);
	*id = index;
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

/* Count a range of @bytes against the limits of the context's user. */
static int hzc_range_charge(struct hzc_ctx *ctx, u64 bytes)
{
	struct hzc_user *hu = ctx->hu;

	if (atomic_inc_return(&hu->nr_ranges) > READ_ONCE(hzc_max_user_ranges)) {
		atomic_dec(&hu->nr_ranges);
		return hzc_limit_hit("max_user_ranges", -EDQUOT);
	}
	if (atomic64_add_return(bytes, &hu->range_bytes) >
	    READ_ONCE(hzc_max_user_range_bytes)) {
		atomic64_sub(bytes, &hu->range_bytes);
		atomic_dec(&hu->nr_ranges);
		return hzc_limit_hit("max_user_range_bytes", -EDQUOT);
	}
	return 0;
}

static void hzc_range_uncharge(struct hzc_ctx *ctx, u64 bytes)
{
	atomic64_sub(bytes, &ctx->hu->range_bytes);
	atomic_dec(&ctx->hu->nr_ranges);
}

/* A new range of @ctx over [@base, @end), dead until registered. */
static struct hzc_range *hzc_range_alloc(struct hzc_ctx *ctx, u64 base,
					 u64 end)
{
	struct hzc_range *range;

	range = kzalloc(sizeof(*range), GFP_KERNEL_ACCOUNT);
	if (!range)
		return NULL;
	kref_init(&range->kref);
	init_rwsem(&range->lock);
	range->acts = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&range->grants);
	range->node.start = base;
	range->node.last = end - 1;
	kref_get(&ctx->kref);
	range->ctx = ctx;
	/* Not mappable until fully set up. */
	range->dead = true;
	return range;
}

/*
 * May @range join the ranges of @ctx: is the context alive and under
 * max_ranges, the range mapped and clear of the others?  Called with
 * ctx->lock held.
 */
static int hzc_range_check(struct hzc_ctx *ctx, struct hzc_range *range)
{
	lockdep_assert_held(&ctx->lock);
	if (ctx->dead)
		return -EPERM;
	if (ctx->nr_ranges >= READ_ONCE(hzc_max_ranges))
		return hzc_limit_hit("max_ranges", -ENOSPC);
	if (interval_tree_iter_first(&ctx->ranges, range->node.start,
				     range->node.last))
		return -EEXIST;
	return hzc_check_mapped(ctx->mm, range->node.start,
				range->node.last + 1);
}

/*
 * Give @range its id and window, then put it in sysfs and hzc_ranges_xa.
 * It stays dead: a peer mmap that finds its window sees that.  On failure
 * the range is in none of them.
 */
static int hzc_range_publish(struct hzc_range *range)
{
	int ret;

	range->id = atomic64_inc_return(&hzc_last_range_id);
	ret = hzc_window_alloc(range, hzc_range_size(range) >> PAGE_SHIFT);
	if (ret)
		return ret;
	/* Complete now: the last step makes it visible in sysfs. */
	ret = hzc_sysfs_range_add(range);
	if (ret)
		goto out_window;
	ret = xa_insert(&hzc_ranges_xa, range->id, range, GFP_KERNEL_ACCOUNT);
	if (ret) {
		hzc_sysfs_range_del(range);
		goto out_window;
	}
	return 0;

out_window:
	hzc_window_free(range);
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

	range = hzc_range_alloc(ctx, cmd->base, end);
	if (!range)
		return -ENOMEM;

	mutex_lock(&ctx->lock);
	ret = hzc_range_check(ctx, range);
	if (ret)
		goto out_unlock;
	ret = hzc_range_charge(ctx, cmd->length);
	if (ret)
		goto out_unlock;
	ret = hzc_range_publish(range);
	if (ret)
		goto out_uncharge;
	interval_tree_insert(&range->node, &ctx->ranges);
	ctx->nr_ranges++;
	atomic64_inc(&hzc_stats.nr_ranges);
	down_write(&range->lock);
	range->dead = false;
	up_write(&range->lock);
	hzc_nl_event_range(HZC_NL_CMD_EVENT_RANGE_SET, range);
	mutex_unlock(&ctx->lock);

	cmd->out_id = range->id;
	cmd->out_mmap_offset = (u64)range->window << PAGE_SHIFT;
	return 0;

out_uncharge:
	hzc_range_uncharge(ctx, cmd->length);
out_unlock:
	mutex_unlock(&ctx->lock);
	/* Peer mmap may have found it in the window tree; it saw it dead. */
	hzc_range_put(range);
	return ret;
}

/* Remove a range without activations.  Called with ctx->lock held. */
static void hzc_range_remove(struct hzc_ctx *ctx, struct hzc_range *range)
{
	lockdep_assert_held(&ctx->lock);

	down_write(&range->lock);
	range->dead = true;
	up_write(&range->lock);

	xa_erase(&hzc_ranges_xa, range->id);
	hzc_sysfs_range_del(range);
	hzc_window_free(range);
	interval_tree_remove(&range->node, &ctx->ranges);
	hzc_range_uncharge(ctx, hzc_range_size(range));
	ctx->nr_ranges--;
	atomic64_dec(&hzc_stats.nr_ranges);
	/* Peer mappings keep the range; their faults now get SIGBUS. */
	hzc_peer_revoke(range, 0, hzc_range_size(range));
	hzc_nl_event_range(HZC_NL_CMD_EVENT_RANGE_UNSET, range);
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
	mutex_lock(&hzc_windows_lock);
	WARN_ON(!mtree_empty(&hzc_windows));
	__mt_destroy(&hzc_windows);
	mutex_unlock(&hzc_windows_lock);
	WARN_ON(!xa_empty(&hzc_ranges_xa));
	xa_destroy(&hzc_ranges_xa);
}
