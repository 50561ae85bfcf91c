// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: peer mappings and the listing of a peer's ranges.
 *
 * Every open file of /dev/hzc shares one address_space (of an inode on a
 * private pseudo filesystem), so unmap_mapping_range() on a range's window
 * reaches every peer VMA of that range.  A peer VMA holds a reference to
 * the range it maps through a grant; its faults insert the owner's pinned
 * pages of activated parts (VM_PFNMAP) and give SIGBUS elsewhere.
 *
 * Who may map a range: its owner, and a context that shares an unbroken
 * domain with the owner, for as long as it does.  mmap() decides that
 * before it looks at anything else, and answers every refusal with EPERM,
 * so that probing offsets tells nothing about other users' ranges.  When a
 * domain breaks, each grant on its members' ranges is checked at once: it
 * dies unless another unbroken domain still allows it, and stays dead (a
 * new domain needs a new mmap()); then every peer PTE of those ranges is
 * zapped, and faults through a dead grant get SIGBUS.
 */
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "hzc.h"

#define HZC_FS_MAGIC	0x687a6331	/* "hzc1" */

static struct vfsmount *hzc_mnt;
static int hzc_mnt_count;
static struct inode *hzc_inode;

static int hzc_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, HZC_FS_MAGIC) ? 0 : -ENOMEM;
}

/* Never mounted by users; it only provides the shared inode. */
static struct file_system_type hzc_fs_type = {
	.name = "hzc",
	.init_fs_context = hzc_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

int hzc_peer_init(void)
{
	int ret;

	ret = simple_pin_fs(&hzc_fs_type, &hzc_mnt, &hzc_mnt_count);
	if (ret)
		return ret;
	hzc_inode = alloc_anon_inode(hzc_mnt->mnt_sb);
	if (IS_ERR(hzc_inode)) {
		ret = PTR_ERR(hzc_inode);
		simple_release_fs(&hzc_mnt, &hzc_mnt_count);
		return ret;
	}
	return 0;
}

void hzc_peer_exit(void)
{
	iput(hzc_inode);
	simple_release_fs(&hzc_mnt, &hzc_mnt_count);
}

void hzc_peer_file_init(struct file *file)
{
	file->f_mapping = hzc_inode->i_mapping;
}

/* Zap every peer PTE of [start, start + size) of the range (offsets). */
void hzc_peer_revoke(struct hzc_range *range, unsigned long start,
		     unsigned long size)
{
	loff_t off = ((loff_t)range->window << PAGE_SHIFT) + start;

	unmap_mapping_range(hzc_inode->i_mapping, off, size, 1);
}

/**
 * struct hzc_grant - a peer mapping's right to a range
 * @ref: references: each VMA (a split VMA shares its grant)
 * @node: in @range->grants, under range->lock
 * @range: the mapped range (referenced)
 * @mapper: the mapping context (referenced)
 * @dead: the domain that allowed it broke and no other does; never valid
 *	again, even if the two contexts come to share a domain later
 */
struct hzc_grant {
	refcount_t ref;
	struct list_head node;
	struct hzc_range *range;
	struct hzc_ctx *mapper;
	bool dead;
};

static void hzc_grant_put(struct hzc_grant *grant)
{
	struct hzc_range *range = grant->range;

	if (!refcount_dec_and_test(&grant->ref))
		return;
	down_write(&range->lock);
	list_del(&grant->node);
	up_write(&range->lock);
	hzc_range_put(range);
	hzc_ctx_put(grant->mapper);
	kfree(grant);
}

/* May @mapper still map @range: its own, or while they share a domain. */
static bool hzc_grant_allowed(struct hzc_grant *grant)
{
	return grant->range->ctx == grant->mapper ||
	       hzc_ctx_share_domain(grant->mapper, grant->range->ctx);
}

/*
 * A domain of the range's owner broke: each grant that no other domain
 * allows dies.  Called with range->lock held for writing, which faults hold
 * for reading while they use a grant.
 */
void hzc_peer_check_grants(struct hzc_range *range)
{
	struct hzc_grant *grant;

	lockdep_assert_held_write(&range->lock);
	list_for_each_entry(grant, &range->grants, node)
		if (!grant->dead && !hzc_grant_allowed(grant))
			WRITE_ONCE(grant->dead, true);
}

static void hzc_vm_open(struct vm_area_struct *vma)
{
	struct hzc_grant *grant = vma->vm_private_data;

	refcount_inc(&grant->ref);
}

static void hzc_vm_close(struct vm_area_struct *vma)
{
	hzc_grant_put(vma->vm_private_data);
}

/* The address in the owner's space that @addr of @vma shows. */
static unsigned long hzc_vma_to_va(struct vm_area_struct *vma,
				   struct hzc_range *range, unsigned long addr)
{
	return hzc_range_base(range) +
	       ((vma->vm_pgoff - range->window) << PAGE_SHIFT) +
	       (addr - vma->vm_start);
}

/*
 * Insert the faulting page, and with it the rest of its 2 MiB block that
 * lies in the same activation and VMA, so a sequential reader faults once
 * per block.
 *
 * Why PTEs and not one 2 MiB PMD entry per block, even where the pinned
 * pages are a THP or hugetlb page:
 * - Before 6.12, __handle_mm_fault() only calls ->huge_fault() when
 *   hugepage_vma_check() allows it, and that refuses every VMA with a
 *   VM_SPECIAL flag (VM_NO_KHUGEPAGED), VM_PFNMAP included, unless the
 *   VMA's mapping host is a DAX inode (S_DAX).
 * - Marking our inode S_DAX would get ->huge_fault() called, but the 6.1
 *   page tables have no "special" bit for PMDs (pmd_special() arrived with
 *   ARCH_SUPPORTS_PMD_PFNMAP in 6.12): lockless GUP would take references
 *   on the owner's pages through such an entry and so outlive revocation;
 *   for pages that are not one compound page it would even get the
 *   reference counts wrong.  Only the devmap bit hides a PMD from it, and
 *   that bit promises a ZONE_DEVICE page, which ours are not.
 * PTEs made by vmf_insert_pfn() are pte_special(), which every GUP path
 * refuses, so the pages stay reachable only through this VMA.  On 6.12+
 * kernels with CONFIG_ARCH_SUPPORTS_PMD_PFNMAP, a ->huge_fault() using
 * vmf_insert_pfn_pmd() (and thp_get_unmapped_area() for aligned mmap
 * addresses) would give real 2 MiB entries.
 */
static vm_fault_t hzc_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct hzc_grant *grant = vma->vm_private_data;
	struct hzc_range *range = grant->range;
	unsigned long va, first, last, addr, blk;
	struct interval_tree_node *node;
	struct hzc_activation *act;
	vm_fault_t ret = VM_FAULT_SIGBUS;

	va = hzc_range_base(range) +
	     ((vmf->pgoff - range->window) << PAGE_SHIFT);

	down_read(&range->lock);
	if (range->dead || READ_ONCE(grant->dead))
		goto out_unlock;
	node = interval_tree_iter_first(&range->acts, va, va);
	if (!node)
		goto out_unlock;
	act = container_of(node, struct hzc_activation, node);

	ret = vmf_insert_pfn(vma, vmf->address,
			     page_to_pfn(act->pages[(va - node->start) >> PAGE_SHIFT]));
	if (ret != VM_FAULT_NOPAGE)
		goto out_unlock;

	blk = ALIGN_DOWN(vmf->address, PMD_SIZE);
	first = max3(blk, vma->vm_start, vmf->address - (va - node->start));
	last = min3(blk + PMD_SIZE - 1, vma->vm_end - 1,
		    vmf->address + (node->last - va));
	for (addr = first; addr < last; addr += PAGE_SIZE) {
		unsigned long i = (va - node->start + addr - vmf->address) >>
				  PAGE_SHIFT;

		if (addr == vmf->address)
			continue;
		if (vmf_insert_pfn(vma, addr, page_to_pfn(act->pages[i])) !=
		    VM_FAULT_NOPAGE)
			break;
	}
out_unlock:
	up_read(&range->lock);
	return ret;
}

/*
 * ptrace and /proc/PID/mem: GUP refuses VM_PFNMAP, so access_remote_vm()
 * comes here.  Copies through the activations' pages under the same checks
 * as a fault; stops at the first byte that is not activated.
 */
static int hzc_vm_access(struct vm_area_struct *vma, unsigned long addr,
			 void *buf, int len, int write)
{
	struct hzc_grant *grant = vma->vm_private_data;
	struct hzc_range *range = grant->range;
	struct interval_tree_node *node;
	struct hzc_activation *act;
	unsigned long va, off;
	int done = 0, n;
	void *kaddr;

	if (write && !(vma->vm_flags & VM_MAYWRITE))
		return -EACCES;
	down_read(&range->lock);
	if (range->dead || READ_ONCE(grant->dead))
		goto out_unlock;
	while (done < len) {
		va = hzc_vma_to_va(vma, range, addr + done);
		node = interval_tree_iter_first(&range->acts, va, va);
		if (!node)
			break;
		act = container_of(node, struct hzc_activation, node);
		off = offset_in_page(va);
		n = min_t(unsigned long, len - done, PAGE_SIZE - off);
		kaddr = kmap_local_page(act->pages[(va - node->start) >> PAGE_SHIFT]);
		if (write)
			memcpy(kaddr + off, buf + done, n);
		else
			memcpy(buf + done, kaddr + off, n);
		kunmap_local(kaddr);
		done += n;
	}
out_unlock:
	up_read(&range->lock);
	return done ?: -EIO;
}

static const struct vm_operations_struct hzc_vm_ops = {
	.open = hzc_vm_open,
	.close = hzc_vm_close,
	.fault = hzc_vm_fault,
	.access = hzc_vm_access,
};

/* May @ctx map @range now?  Every refusal is the same EPERM. */
static int hzc_may_map(struct hzc_ctx *ctx, struct hzc_range *range)
{
	bool dead;

	down_read(&range->lock);
	dead = range->dead;
	up_read(&range->lock);
	if (dead)
		return -EPERM;
	if (range->ctx != ctx && !hzc_ctx_share_domain(ctx, range->ctx))
		return -EPERM;
	return 0;
}

int hzc_peer_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct hzc_ctx *ctx = file->private_data;
	struct hzc_grant *grant;
	struct hzc_range *range;
	unsigned long npages;
	bool dead;
	int ret;

	if (current->mm != ctx->mm)
		return -EPERM;
	/*
	 * MAP_SHARED only (VM_MAYSHARE: VM_SHARED is cleared for a file opened
	 * read-only, which may still map read-only).  A private mapping would
	 * be a COW mapping, which VM_PFNMAP cannot be.
	 */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	/* A peer's memory is data: never executable, now or after mprotect(). */
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;

	/* Authorize first: an offset without a window is refused the same way. */
	range = hzc_range_get_by_window(vma->vm_pgoff);
	if (!range)
		return -EPERM;
	ret = hzc_may_map(ctx, range);
	if (ret)
		goto out_put;
	npages = hzc_range_size(range) >> PAGE_SHIFT;
	if (vma->vm_pgoff - range->window + vma_pages(vma) > npages) {
		ret = -EINVAL;
		goto out_put;
	}
	grant = kzalloc(sizeof(*grant), GFP_KERNEL_ACCOUNT);
	if (!grant) {
		ret = -ENOMEM;
		goto out_put;
	}
	refcount_set(&grant->ref, 1);
	grant->range = range;
	kref_get(&ctx->kref);
	grant->mapper = ctx;
	/*
	 * Listed before it is checked again: a domain that breaks after the
	 * check finds it (hzc_peer_check_grants()), one that broke before
	 * fails the check.
	 */
	down_write(&range->lock);
	dead = range->dead;
	list_add(&grant->node, &range->grants);
	up_write(&range->lock);
	if (dead || !hzc_grant_allowed(grant)) {
		hzc_grant_put(grant);
		return -EPERM;
	}

	/*
	 * VM_PFNMAP: no struct page behind the PTEs as far as the core is
	 * concerned, so GUP cannot take references through them.  VM_IO with
	 * VM_DONTCOPY: not inherited by fork(), and madvise(MADV_DOFORK) cannot
	 * undo that.  VM_DONTEXPAND: mremap() cannot grow it past the range.
	 */
#ifdef HZC_HAVE_VM_FLAGS_SET
	vm_flags_mod(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP |
		     VM_DONTCOPY, VM_MAYEXEC);
#else
	vma->vm_flags |= VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP |
			 VM_DONTCOPY;
	vma->vm_flags &= ~VM_MAYEXEC;
#endif
	vma->vm_ops = &hzc_vm_ops;
	vma->vm_private_data = grant;
	return 0;

out_put:
	hzc_range_put(range);
	return ret;
}

static void hzc_range_describe(struct hzc_range *range,
			       struct hzc_range_desc *desc)
{
	desc->id = range->id;
	desc->base = hzc_range_base(range);
	desc->length = hzc_range_size(range);
	desc->mmap_offset = (u64)range->window << PAGE_SHIFT;
	desc->activated_bytes = range->activated_bytes;
	desc->nr_activations = range->nr_acts;
}

int hzc_list_ranges(struct hzc_ucmd *ucmd)
{
	struct hzc_list_ranges *cmd = ucmd->cmd;
	struct interval_tree_node *node;
	struct hzc_range_desc *descs = NULL;
	struct hzc_ctx *peer;
	u32 total, n, i = 0;
	pid_t pid = 0;
	int ret = 0;

	if (cmd->flags)
		return -EOPNOTSUPP;

	peer = hzc_domain_peer_get(ucmd->ctx, cmd->domain_id, cmd->rank,
				   cmd->peer_rank, &pid);
	if (IS_ERR(peer))
		return PTR_ERR(peer);

	mutex_lock(&peer->lock);
	total = peer->nr_ranges;
	n = min(total, cmd->num_ranges);
	if (n) {
		descs = kvcalloc(n, sizeof(*descs), GFP_KERNEL_ACCOUNT);
		if (!descs) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	for (node = interval_tree_iter_first(&peer->ranges, 0, ULONG_MAX);
	     node && i < n; node = interval_tree_iter_next(node, 0, ULONG_MAX))
		hzc_range_describe(container_of(node, struct hzc_range, node),
				   &descs[i++]);
out_unlock:
	mutex_unlock(&peer->lock);
	hzc_ctx_put(peer);
	if (ret)
		goto out_free;

	if (n && copy_to_user(u64_to_user_ptr(cmd->ranges), descs,
			      n * sizeof(*descs))) {
		ret = -EFAULT;
		goto out_free;
	}
	cmd->out_peer_pid = pid;
	if (total > cmd->num_ranges) {
		ret = -EMSGSIZE;
		ucmd->copy_out_on_error = true;
	}
	cmd->num_ranges = total;
out_free:
	kvfree(descs);
	return ret;
}

int hzc_list_activations(struct hzc_ucmd *ucmd)
{
	struct hzc_list_activations *cmd = ucmd->cmd;
	struct hzc_activation_desc *descs = NULL;
	struct interval_tree_node *node;
	struct hzc_range *range = NULL;
	u32 total = 0, n, i = 0;
	struct hzc_ctx *peer;
	size_t desc_size, len;
	void __user *dst;
	pid_t pid = 0;
	int ret = 0;

	if (cmd->flags)
		return -EOPNOTSUPP;
	desc_size = cmd->desc_size ?: HZC_ACTIVATION_DESC_SIZE_V0;
	if (desc_size < HZC_ACTIVATION_DESC_SIZE_V0 || desc_size > PAGE_SIZE ||
	    !IS_ALIGNED(desc_size, sizeof(u64)))
		return -EINVAL;
	len = min(desc_size, sizeof(*descs));

	peer = hzc_domain_peer_get(ucmd->ctx, cmd->domain_id, cmd->rank,
				   cmd->peer_rank, &pid);
	if (IS_ERR(peer))
		return PTR_ERR(peer);

	mutex_lock(&peer->lock);
	for (node = interval_tree_iter_first(&peer->ranges, 0, ULONG_MAX);
	     node; node = interval_tree_iter_next(node, 0, ULONG_MAX)) {
		range = container_of(node, struct hzc_range, node);
		if (range->id == cmd->range_id)
			break;
	}
	if (!node) {
		ret = -ENOENT;
		goto out_unlock;
	}
	total = range->nr_acts;
	n = min(total, cmd->num_activations);
	if (n) {
		descs = kvcalloc(n, sizeof(*descs), GFP_KERNEL_ACCOUNT);
		if (!descs) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	for (node = interval_tree_iter_first(&range->acts, 0, ULONG_MAX);
	     node && i < n; node = interval_tree_iter_next(node, 0, ULONG_MAX)) {
		struct hzc_activation *act =
			container_of(node, struct hzc_activation, node);

		descs[i].va = node->start;
		descs[i].length = node->last - node->start + 1;
		descs[i].cookie = act->cookie;
		i++;
	}
out_unlock:
	mutex_unlock(&peer->lock);
	hzc_ctx_put(peer);
	if (ret)
		goto out_free;

	/* Element by element: the caller's stride may differ from ours. */
	dst = u64_to_user_ptr(cmd->activations);
	for (i = 0; i < n; i++, dst += desc_size) {
		if (copy_to_user(dst, &descs[i], len) ||
		    (desc_size > len && clear_user(dst + len, desc_size - len))) {
			ret = -EFAULT;
			goto out_free;
		}
	}
	if (total > cmd->num_activations) {
		ret = -EMSGSIZE;
		ucmd->copy_out_on_error = true;
	}
	cmd->num_activations = total;
out_free:
	kvfree(descs);
	return ret;
}
