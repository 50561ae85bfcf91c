// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: activations.  An activation pins [va, va + size) inside one range
 * for the long term, charges it to the opener's user against RLIMIT_MEMLOCK
 * (user->locked_vm, as io_uring and iommufd do; also shown in the mm's
 * pinned_vm), and publishes it to peer mappings.
 *
 * Teardown order: unlink under range->lock (no new peer fault can find
 * it), zap every peer PTE (faults that found it have finished, since they
 * hold range->lock for reading while inserting), then unpin.  So the pages
 * stay pinned until the last peer PTE is gone.
 */
#include <linux/backing-dev.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "hzc.h"

/* Pages pinned (or unpinned) per call: one page of page pointers. */
#define HZC_PIN_BATCH	(PAGE_SIZE / sizeof(struct page *))

/*
 * Charge @npages to the context's user: RLIMIT_MEMLOCK of the caller bounds
 * every pin of the user, whichever process or file made it (CAP_IPC_LOCK
 * exempts), and max_pinned_bytes bounds it once more.  The pins also count
 * in the opener's pinned_vm, where RDMA memory registration charges its own
 * pins: the process's total is held to the same limit.
 */
static int hzc_charge_pins(struct hzc_ctx *ctx, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long locked;
	u64 pinned;
	u64 max = READ_ONCE(hzc_max_pinned_bytes);
	u64 bytes = (u64)npages << PAGE_SHIFT;

	if (atomic64_add_return(bytes, &ctx->hu->pinned_bytes) > max && max) {
		atomic64_sub(bytes, &ctx->hu->pinned_bytes);
		return hzc_limit_hit("max_pinned_bytes", -ENOMEM);
	}
	locked = atomic_long_add_return(npages, &ctx->user->locked_vm);
	pinned = atomic64_add_return(npages, &ctx->mm->pinned_vm);
	if ((locked > limit || pinned > limit) && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &ctx->mm->pinned_vm);
		atomic_long_sub(npages, &ctx->user->locked_vm);
		atomic64_sub(bytes, &ctx->hu->pinned_bytes);
		return -ENOMEM;
	}
	return 0;
}

static void hzc_uncharge_pins(struct hzc_ctx *ctx, unsigned long npages)
{
	atomic64_sub(npages, &ctx->mm->pinned_vm);
	atomic_long_sub(npages, &ctx->user->locked_vm);
	atomic64_sub((u64)npages << PAGE_SHIFT, &ctx->hu->pinned_bytes);
}

static void hzc_unpin(struct page **pages, unsigned long npages, bool dirty)
{
	unsigned long done, n;

	for (done = 0; done < npages; done += n) {
		n = min_t(unsigned long, npages - done, HZC_PIN_BATCH);
		unpin_user_pages_dirty_lock(pages + done, n, dirty);
		cond_resched();
	}
}

/*
 * Can [start, end) be pinned writable for the long term?  Not where a
 * shared file mapping needs dirty tracking (page_mkwrite, writeback): the
 * file system would meet pages written behind its back, through the pin and
 * through peer mappings, long after it cleaned them.  The same rule as GUP
 * itself applies from 6.5 on (writable_file_mapping_allowed()); anonymous
 * memory, shmem/memfd and hugetlbfs are fine.  Called with mmap_lock held.
 */
static int hzc_check_pinnable(struct mm_struct *mm, unsigned long start,
			      unsigned long end)
{
	struct vm_area_struct *vma;
	unsigned long addr = start;

	/* Not mmap_assert_locked(): with DEBUG_VM it needs dump_mm(), not exported. */
	lockdep_assert_held(&mm->mmap_lock);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		if ((vma->vm_flags & (VM_SHARED | VM_WRITE)) ==
		    (VM_SHARED | VM_WRITE) && vma->vm_file &&
		    !(vma->vm_flags & VM_PFNMAP) &&
		    ((vma->vm_ops && (vma->vm_ops->page_mkwrite ||
				      vma->vm_ops->pfn_mkwrite)) ||
		     mapping_can_writeback(vma->vm_file->f_mapping)))
			return -EFAULT;
		addr = vma->vm_end;
	}
	return 0;
}

/*
 * Pin all of it or nothing, a batch at a time.  Each batch is checked and
 * pinned under one hold of mmap_lock, so the mappings checked are the
 * mappings pinned: with a pin before the lock and a check under it, a
 * racing mprotect() or MAP_FIXED could swap a shared file mapping for an
 * allowed one in between and leave its page cache pinned and written behind
 * the file system's back.  The lockless walk (FOLL_FAST_ONLY: it takes no
 * lock, so it may run under mmap_lock) pins a huge page in one step; what
 * it cannot pin (not present, not writable yet, to be migrated first) goes
 * to pin_user_pages(), which faults it in, and which on 6.1 takes each
 * 4 KiB subpage of a huge page on its own.  The caller's own mm: ioctls
 * come from the opener only.
 */
static int hzc_pin(struct mm_struct *mm, unsigned long va, unsigned long npages,
		   struct page **pages)
{
	const unsigned int flags = FOLL_LONGTERM | FOLL_WRITE;
	unsigned long done = 0, addr, n;
	long ret;

	while (done < npages) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto out_unpin;
		}
		addr = va + done * PAGE_SIZE;
		n = min_t(unsigned long, npages - done, HZC_PIN_BATCH);
		if (mmap_read_lock_killable(mm)) {
			ret = -EINTR;
			goto out_unpin;
		}
		ret = hzc_check_pinnable(mm, addr, addr + n * PAGE_SIZE);
		if (!ret) {
			ret = pin_user_pages_fast_only(addr, n, flags,
						       pages + done);
			if (!ret)
				ret = pin_user_pages(addr, n, flags,
						     pages + done, NULL);
		}
		mmap_read_unlock(mm);
		if (ret <= 0) {
			if (!ret)
				ret = -EFAULT;
			goto out_unpin;
		}
		done += ret;
		cond_resched();
	}
	return 0;

out_unpin:
	/* Nothing was written through these pages: unpin them clean. */
	hzc_unpin(pages, done, false);
	return ret;
}

static struct hzc_range *hzc_range_at(struct hzc_ctx *ctx, unsigned long va)
{
	struct interval_tree_node *node;

	node = interval_tree_iter_first(&ctx->ranges, va, va);
	return node ? container_of(node, struct hzc_range, node) : NULL;
}

/*
 * The range of @ctx that holds [@va, @end) and no activation there yet,
 * referenced; or an ERR_PTR.
 */
static struct hzc_range *hzc_activate_range_get(struct hzc_ctx *ctx,
						unsigned long va, u64 end)
{
	struct hzc_range *range;

	mutex_lock(&ctx->lock);
	range = hzc_range_at(ctx, va);
	if (!range || ctx->dead)
		range = ERR_PTR(-ENOENT);
	else if (end - 1 > range->node.last)
		range = ERR_PTR(-EINVAL);
	else if (interval_tree_iter_first(&range->acts, va, end - 1))
		range = ERR_PTR(-EEXIST);
	else
		kref_get(&range->kref);
	mutex_unlock(&ctx->lock);
	return range;
}

/*
 * Charge and pin the pages of @cmd in a new activation, not yet in any
 * range; or an ERR_PTR, with nothing left charged or pinned.
 *
 * Charge first: the page array below is sized by the caller, and
 * RLIMIT_MEMLOCK is what bounds it for unprivileged callers.  For
 * CAP_IPC_LOCK callers an array too big for kvmalloc() (over INT_MAX bytes,
 * or more than the memory there is) is a plain ENOMEM, without the
 * allocator's warning.
 */
static struct hzc_activation *hzc_activation_pin(struct hzc_ctx *ctx,
						 const struct hzc_activate *cmd)
{
	unsigned long npages = cmd->length >> PAGE_SHIFT;
	struct hzc_activation *act;
	int ret;

	ret = hzc_charge_pins(ctx, npages);
	if (ret)
		return ERR_PTR(ret);
	act = kzalloc(sizeof(*act), GFP_KERNEL_ACCOUNT);
	if (!act) {
		ret = -ENOMEM;
		goto out_uncharge;
	}
	act->pages = kvmalloc_array(npages, sizeof(*act->pages),
				    GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!act->pages) {
		ret = -ENOMEM;
		goto out_free_act;
	}
	ret = hzc_pin(ctx->mm, cmd->va, npages, act->pages);
	if (ret)
		goto out_free_pages;

	act->npages = npages;
	act->cookie = cmd->cookie;
	act->node.start = cmd->va;
	act->node.last = cmd->va + cmd->length - 1;
	return act;

out_free_pages:
	kvfree(act->pages);
out_free_act:
	kfree(act);
out_uncharge:
	hzc_uncharge_pins(ctx, npages);
	return ERR_PTR(ret);
}

/* Undo hzc_activation_pin() of an activation that no range took. */
static void hzc_activation_unpin(struct hzc_ctx *ctx,
				 struct hzc_activation *act)
{
	unsigned long npages = act->npages;

	/* Nothing was written through these pages: unpin them clean. */
	hzc_unpin(act->pages, npages, false);
	kvfree(act->pages);
	kfree(act);
	hzc_uncharge_pins(ctx, npages);
}

/*
 * Insert @act in @range unless the range was unregistered or another thread
 * activated an overlapping part meanwhile.  Called with ctx->lock held.
 */
static int hzc_activation_insert(struct hzc_ctx *ctx, struct hzc_range *range,
				 struct hzc_activation *act)
{
	u64 size = act->node.last - act->node.start + 1;

	lockdep_assert_held(&ctx->lock);
	/* range->dead changes under ctx->lock (and range->lock). */
	if (range->dead)
		return -ENOENT;
	if (interval_tree_iter_first(&range->acts, act->node.start,
				     act->node.last))
		return -EEXIST;
	down_write(&range->lock);
	interval_tree_insert(&act->node, &range->acts);
	WRITE_ONCE(range->nr_acts, range->nr_acts + 1);
	WRITE_ONCE(range->activated_bytes, range->activated_bytes + size);
	up_write(&range->lock);
	atomic64_inc(&hzc_stats.nr_activations);
	atomic64_add(size, &hzc_stats.pinned_bytes);
	hzc_nl_event_act(HZC_NL_CMD_EVENT_ACTIVATE, range, act);
	return 0;
}

/*
 * Validate under ctx->lock, pin without it (a fault may stall: userfaultfd,
 * FUSE), then commit under it after checking again: the range may have been
 * unregistered, or another thread may have activated an overlapping part.
 */
int hzc_activate(struct hzc_ucmd *ucmd)
{
	struct hzc_activate *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct hzc_activation *act;
	struct hzc_range *range;
	u64 end;
	int ret;

	if (cmd->flags)
		return -EOPNOTSUPP;
	if (check_add_overflow(cmd->va, cmd->length, &end))
		return -EOVERFLOW;
	if (!cmd->length || !PAGE_ALIGNED(cmd->va) || !PAGE_ALIGNED(cmd->length))
		return -EINVAL;

	range = hzc_activate_range_get(ctx, cmd->va, end);
	if (IS_ERR(range))
		return PTR_ERR(range);
	act = hzc_activation_pin(ctx, cmd);
	if (IS_ERR(act)) {
		ret = PTR_ERR(act);
		goto out_put;
	}

	mutex_lock(&ctx->lock);
	ret = hzc_activation_insert(ctx, range, act);
	if (ret) {
		mutex_unlock(&ctx->lock);
		hzc_activation_unpin(ctx, act);
		goto out_put;
	}
	cmd->out_range_id = range->id;
	mutex_unlock(&ctx->lock);
out_put:
	hzc_range_put(range);
	return ret;
}

/* Revoke, unpin and free one activation.  Called with ctx->lock held. */
static void hzc_activation_remove(struct hzc_ctx *ctx, struct hzc_range *range,
				  struct hzc_activation *act)
{
	u64 size = act->node.last - act->node.start + 1;

	lockdep_assert_held(&ctx->lock);

	down_write(&range->lock);
	interval_tree_remove(&act->node, &range->acts);
	WRITE_ONCE(range->nr_acts, range->nr_acts - 1);
	WRITE_ONCE(range->activated_bytes, range->activated_bytes - size);
	up_write(&range->lock);
	hzc_nl_event_act(HZC_NL_CMD_EVENT_DEACTIVATE, range, act);

	hzc_peer_revoke(range, act->node.start - hzc_range_base(range), size);
	hzc_unpin(act->pages, act->npages, true);
	hzc_uncharge_pins(ctx, act->npages);
	atomic64_dec(&hzc_stats.nr_activations);
	atomic64_sub(size, &hzc_stats.pinned_bytes);
	kvfree(act->pages);
	kfree(act);
}

int hzc_deactivate(struct hzc_ucmd *ucmd)
{
	struct hzc_deactivate *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct interval_tree_node *node;
	struct hzc_range *range;
	int ret = -ENOENT;

	if (cmd->flags)
		return -EOPNOTSUPP;

	mutex_lock(&ctx->lock);
	range = hzc_range_at(ctx, cmd->va);
	if (!range)
		goto out_unlock;
	node = interval_tree_iter_first(&range->acts, cmd->va, cmd->va);
	if (!node || node->start != cmd->va)
		goto out_unlock;
	hzc_activation_remove(ctx, range,
			      container_of(node, struct hzc_activation, node));
	ret = 0;
out_unlock:
	mutex_unlock(&ctx->lock);
	return ret;
}

void hzc_activations_destroy(struct hzc_ctx *ctx, struct hzc_range *range)
{
	struct interval_tree_node *node;

	while ((node = interval_tree_iter_first(&range->acts, 0, ULONG_MAX)))
		hzc_activation_remove(ctx, range,
				      container_of(node, struct hzc_activation,
						   node));
}
