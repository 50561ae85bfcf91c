// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: zero-copy memory ranges for collective communication.
 *
 * This file owns module init/exit, the /dev/hzc file operations and the
 * ioctl table.  Each object kind lives in its own file.
 */
#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "hzc.h"

struct hzc_stats hzc_stats;

static int hzc_info(struct hzc_ucmd *ucmd)
{
	struct hzc_info *cmd = ucmd->cmd;

	if (cmd->flags)
		return -EOPNOTSUPP;

	cmd->out_abi_version = HZC_ABI_VERSION;
	cmd->out_page_size = PAGE_SIZE;
	cmd->out_features = HZC_FEATURE_INFO | HZC_FEATURE_RANGES |
			    HZC_FEATURE_ACTIVATIONS | HZC_FEATURE_DOMAINS |
			    HZC_FEATURE_PEER_MAP | HZC_FEATURE_ACTIVATION_COOKIE;
	cmd->out_max_pinned_bytes = READ_ONCE(hzc_max_pinned_bytes);
	cmd->out_max_ranges = READ_ONCE(hzc_max_ranges);
	cmd->out_max_domains = READ_ONCE(hzc_max_domains);
	cmd->out_max_ranks = HZC_MAX_RANKS;
	cmd->out_max_blob_size = HZC_MAX_BLOB_SIZE;
	return 0;
}

/* Big enough for the kernel's version of every command struct. */
union hzc_ucmd_buffer {
	struct hzc_info info;
	struct hzc_range_register range_register;
	struct hzc_range_unregister range_unregister;
	struct hzc_activate activate;
	struct hzc_deactivate deactivate;
	struct hzc_domain_join domain_join;
	struct hzc_domain_leave domain_leave;
	struct hzc_board_put board_put;
	struct hzc_board_wait board_wait;
	struct hzc_list_ranges list_ranges;
	struct hzc_list_activations list_activations;
};

/**
 * struct hzc_ioctl_op - one row of the ioctl table
 * @size: the kernel's sizeof() of the command struct
 * @min_size: the smallest @size a caller may pass (the first version)
 * @execute: the handler
 */
struct hzc_ioctl_op {
	unsigned int size;
	unsigned int min_size;
	int (*execute)(struct hzc_ucmd *ucmd);
};

#define HZC_IOCTL_OP(_nr, _fn, _struct, _last)				\
	[_nr] = {							\
		.size = sizeof(_struct) +				\
			BUILD_BUG_ON_ZERO(sizeof(union hzc_ucmd_buffer) <	\
					  sizeof(_struct)),		\
		.min_size = offsetofend(_struct, _last),		\
		.execute = _fn,						\
	}

static const struct hzc_ioctl_op hzc_ioctl_ops[] = {
	HZC_IOCTL_OP(HZC_CMD_INFO, hzc_info, struct hzc_info, out_max_blob_size),
	HZC_IOCTL_OP(HZC_CMD_RANGE_REGISTER, hzc_range_register,
		     struct hzc_range_register, out_mmap_offset),
	HZC_IOCTL_OP(HZC_CMD_RANGE_UNREGISTER, hzc_range_unregister,
		     struct hzc_range_unregister, base),
	HZC_IOCTL_OP(HZC_CMD_ACTIVATE, hzc_activate, struct hzc_activate,
		     out_range_id),
	HZC_IOCTL_OP(HZC_CMD_DEACTIVATE, hzc_deactivate, struct hzc_deactivate,
		     va),
	HZC_IOCTL_OP(HZC_CMD_DOMAIN_JOIN, hzc_domain_join,
		     struct hzc_domain_join, nranks),
	HZC_IOCTL_OP(HZC_CMD_DOMAIN_LEAVE, hzc_domain_leave,
		     struct hzc_domain_leave, __reserved),
	HZC_IOCTL_OP(HZC_CMD_BOARD_PUT, hzc_board_put, struct hzc_board_put,
		     __reserved),
	HZC_IOCTL_OP(HZC_CMD_BOARD_WAIT, hzc_board_wait, struct hzc_board_wait,
		     __reserved),
	HZC_IOCTL_OP(HZC_CMD_LIST_RANGES, hzc_list_ranges,
		     struct hzc_list_ranges, ranges),
	HZC_IOCTL_OP(HZC_CMD_LIST_ACTIVATIONS, hzc_list_activations,
		     struct hzc_list_activations, activations),
};

static long hzc_fops_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct hzc_ctx *ctx = file->private_data;
	const struct hzc_ioctl_op *op;
	union hzc_ucmd_buffer buf;
	struct hzc_ucmd ucmd = {};
	unsigned int nr;
	int ret;

	/*
	 * The whole command must match: type, number and direction; the size
	 * it encodes must be the struct's @size (checked below).
	 */
	nr = _IOC_NR(cmd);
	if (_IOC_TYPE(cmd) != HZC_IOCTL_TYPE ||
	    _IOC_DIR(cmd) != (_IOC_READ | _IOC_WRITE) ||
	    nr >= ARRAY_SIZE(hzc_ioctl_ops))
		return -ENOTTY;
	op = &hzc_ioctl_ops[nr];
	if (!op->execute)
		return -ENOTTY;

	if (current->mm != ctx->mm)
		return -EPERM;

	ucmd.ctx = ctx;
	ucmd.ubuffer = (void __user *)arg;
	ret = get_user(ucmd.user_size, (u32 __user *)ucmd.ubuffer);
	if (ret)
		return ret;
	if (ucmd.user_size != _IOC_SIZE(cmd))
		return -EINVAL;
	if (ucmd.user_size < op->min_size)
		return -EINVAL;
	/*
	 * As clone3() and openat2() do: no command struct will ever outgrow a
	 * page, and a larger @size would only make the kernel check gigabytes
	 * of user memory for zeroes.
	 */
	if (ucmd.user_size > PAGE_SIZE)
		return -E2BIG;

	ucmd.cmd = &buf;
	ret = copy_struct_from_user(ucmd.cmd, op->size, ucmd.ubuffer,
				    ucmd.user_size);
	if (ret)
		return ret;

	ret = op->execute(&ucmd);
	if (ret && !ucmd.copy_out_on_error)
		return ret;
	if (copy_to_user(ucmd.ubuffer, ucmd.cmd,
			 min_t(u32, ucmd.user_size, op->size)))
		return -EFAULT;
	return ret;
}

static int hzc_fops_open(struct inode *inode, struct file *file)
{
	struct hzc_ctx *ctx;

	ctx = hzc_ctx_create();
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	file->private_data = ctx;
	hzc_peer_file_init(file);
	return 0;
}

static int hzc_fops_release(struct inode *inode, struct file *file)
{
	hzc_ctx_close(file->private_data);
	return 0;
}

static const struct file_operations hzc_fops = {
	.owner = THIS_MODULE,
	.open = hzc_fops_open,
	.release = hzc_fops_release,
	.unlocked_ioctl = hzc_fops_ioctl,
	.mmap = hzc_peer_mmap,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

/*
 * World read/write: ranks run as ordinary users, and the module authorizes
 * each object instead of the device node.  Pins are charged per user
 * against RLIMIT_MEMLOCK, kernel memory to the caller's memory cgroup,
 * memberships and board bytes per context and per user; joining a domain
 * needs the creator's euid and the domain's secret id; mapping a peer's
 * pages needs a common unbroken domain, and is revoked when there is none.
 */
static struct miscdevice hzc_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = HZC_DEVICE_NAME,
	.fops = &hzc_fops,
	.mode = 0666,
};

static int __init hzc_init(void)
{
	int ret;

	ret = hzc_sysfs_init();
	if (ret)
		return ret;
	ret = hzc_peer_init();
	if (ret)
		goto out_sysfs;
	/*
	 * Before the device: once /dev/hzc exists a file may be open, and a
	 * failure after it could not be unwound.  The family shows the same
	 * (empty) object tables as sysfs until then.
	 */
	ret = hzc_nl_init();
	if (ret)
		goto out_peer;
	ret = misc_register(&hzc_misc);
	if (ret)
		goto out_nl;
	return 0;

out_nl:
	hzc_nl_exit();
out_peer:
	hzc_peer_exit();
out_sysfs:
	hzc_sysfs_exit();
	return ret;
}

/* Only reached once no file is open and no peer VMA exists. */
static void __exit hzc_exit(void)
{
	hzc_nl_exit();
	misc_deregister(&hzc_misc);
	/* Contexts whose notifiers were put are freed after a grace period. */
	mmu_notifier_synchronize();
	hzc_peer_exit();
	hzc_windows_destroy();
	hzc_sysfs_exit();
}

module_init(hzc_init);
module_exit(hzc_exit);

MODULE_DESCRIPTION("hzc: zero-copy memory ranges for collective communication");
MODULE_AUTHOR("hzc developers");
/* HZC_VERSION comes from Kbuild (the package version in dkms.conf). */
MODULE_VERSION(HZC_VERSION);
MODULE_LICENSE("GPL");
