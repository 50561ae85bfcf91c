// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: activations.  An activation pins [va, va + size) inside one range
 * for the long term, charges it to RLIMIT_MEMLOCK of the owner's mm (as
 * RDMA umem does), and publishes it to peer mappings.
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

static int hzc_charge_memlock(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

static void hzc_unpin(struct page **pages, unsigned long npages)
{
	unsigned long done, n;

	for (done = 0; done < npages; done += n) {
		n = min_t(unsigned long, npages - done, HZC_PIN_BATCH);
		unpin_user_pages_dirty_lock(pages + done, n, true);
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
 * Pin all of it or nothing, a batch at a time, with the lockless fast path
 * (as RDMA memory registration does): it pins a huge page in one step, where
 * pin_user_pages() walks it 4 KiB at a time.  Each pinned batch is then
 * checked under mmap_lock; a batch from a mapping that may not be pinned
 * for the long term is unpinned again.  A mapping replaced between the pin
 * and the check is the caller racing itself: it gets the pages it asked for
 * at the time of the pin.
 */
static int hzc_pin(struct mm_struct *mm, unsigned long va, unsigned long npages,
		   struct page **pages)
{
	unsigned long done = 0, addr, n;
	long ret;

	while (done < npages) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto out_unpin;
		}
		addr = va + done * PAGE_SIZE;
		n = min_t(unsigned long, npages - done, HZC_PIN_BATCH);
		ret = pin_user_pages_fast(addr, n, FOLL_LONGTERM | FOLL_WRITE,
					  pages + done);
		if (ret <= 0) {
			if (!ret)
				ret = -EFAULT;
			goto out_unpin;
		}
		n = ret;
		mmap_read_lock(mm);
		ret = hzc_check_pinnable(mm, addr, addr + n * PAGE_SIZE);
		mmap_read_unlock(mm);
		if (ret) {
			unpin_user_pages(pages + done, n);
			goto out_unpin;
		}
		done += n;
		cond_resched();
	}
	return 0;

out_unpin:
	/* Nothing was written through these pages: unpin them clean. */
	unpin_user_pages(pages, done);
	return ret;
}

static struct hzc_range *hzc_range_at(struct hzc_ctx *ctx, unsigned long va)
{
	struct interval_tree_node *node;

	node = interval_tree_iter_first(&ctx->ranges, va, va);
	return node ? container_of(node, struct hzc_range, node) : NULL;
}

int hzc_activate(struct hzc_ucmd *ucmd)
{
	struct hzc_activate *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	unsigned long npages, max_pinned;
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
	npages = cmd->length >> PAGE_SHIFT;

	mutex_lock(&ctx->lock);
	range = hzc_range_at(ctx, cmd->va);
	if (!range) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (end - 1 > range->node.last) {
		ret = -EINVAL;
		goto out_unlock;
	}
	if (interval_tree_iter_first(&range->acts, cmd->va, end - 1)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	max_pinned = READ_ONCE(hzc_max_pinned_bytes);
	if (max_pinned && ctx->pinned_bytes + cmd->length > max_pinned) {
		ret = -ENOMEM;
		goto out_unlock;
	}

	/*
	 * Charge first: the page array below is sized by the caller, and
	 * RLIMIT_MEMLOCK is what bounds it for unprivileged callers.  For
	 * CAP_IPC_LOCK callers an array too big for kvmalloc() (over INT_MAX
	 * bytes, or more than the memory there is) is a plain ENOMEM, without
	 * the allocator's warning.
	 */
	ret = hzc_charge_memlock(ctx->mm, npages);
	if (ret)
		goto out_unlock;
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
	act->node.last = end - 1;
	down_write(&range->lock);
	interval_tree_insert(&act->node, &range->acts);
	WRITE_ONCE(range->nr_acts, range->nr_acts + 1);
	WRITE_ONCE(range->activated_bytes, range->activated_bytes + cmd->length);
	up_write(&range->lock);
	ctx->pinned_bytes += cmd->length;
	atomic64_inc(&hzc_stats.nr_activations);
	atomic64_add(cmd->length, &hzc_stats.pinned_bytes);
	cmd->out_range_id = range->id;
	mutex_unlock(&ctx->lock);
	return 0;

out_free_pages:
	kvfree(act->pages);
out_free_act:
	kfree(act);
out_uncharge:
	atomic64_sub(npages, &ctx->mm->pinned_vm);
out_unlock:
	mutex_unlock(&ctx->lock);
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

	hzc_peer_revoke(range, act->node.start - hzc_range_base(range), size);
	hzc_unpin(act->pages, act->npages);
	atomic64_sub(act->npages, &ctx->mm->pinned_vm);
	ctx->pinned_bytes -= size;
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
