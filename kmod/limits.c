// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: every resource limit of the module, as module parameters
 * (/sys/module/hzc/parameters/).  Root may change them at run time; a new
 * value applies to the next request.  Per-context limits answer ENOSPC,
 * per-user limits EDQUOT (as the keyring quotas do), pins ENOMEM (as
 * RLIMIT_MEMLOCK does).
 */
#include <linux/cred.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/sched.h>

#include "hzc.h"

unsigned int hzc_max_ranges = 65536;
module_param_named(max_ranges, hzc_max_ranges, uint, 0644);
MODULE_PARM_DESC(max_ranges, "Max ranges per context (ENOSPC beyond)");

unsigned int hzc_max_user_ranges = 262144;
module_param_named(max_user_ranges, hzc_max_user_ranges, uint, 0644);
MODULE_PARM_DESC(max_user_ranges, "Max ranges per user (EDQUOT beyond)");

/*
 * A range takes as much of the window space (2^63 bytes, shared by all) as
 * it covers: a user's ranges may cover 2^53 bytes, 64 ranges of the whole
 * 47-bit address space, so that no user can take more than 1/1024 of it.
 */
unsigned long long hzc_max_user_range_bytes = 1ULL << 53;
module_param_named(max_user_range_bytes, hzc_max_user_range_bytes, ullong, 0644);
MODULE_PARM_DESC(max_user_range_bytes,
		 "Max bytes the ranges of a user cover (EDQUOT beyond)");

unsigned int hzc_max_domains = 16384;
module_param_named(max_domains, hzc_max_domains, uint, 0644);
MODULE_PARM_DESC(max_domains,
		 "Max domains in the system, broken ones counted until freed (ENOSPC beyond)");

unsigned long long hzc_max_pinned_bytes;
module_param_named(max_pinned_bytes, hzc_max_pinned_bytes, ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes,
		 "Max pinned bytes per user, 0 = only RLIMIT_MEMLOCK (ENOMEM beyond)");

unsigned int hzc_max_memberships = 256;
module_param_named(max_memberships, hzc_max_memberships, uint, 0644);
MODULE_PARM_DESC(max_memberships, "Max domain memberships per context (ENOSPC beyond)");

unsigned int hzc_max_user_memberships = 1024;
module_param_named(max_user_memberships, hzc_max_user_memberships, uint, 0644);
MODULE_PARM_DESC(max_user_memberships, "Max domain memberships per user (EDQUOT beyond)");

unsigned int hzc_max_board_bytes = 4 << 20;
module_param_named(max_board_bytes, hzc_max_board_bytes, uint, 0644);
MODULE_PARM_DESC(max_board_bytes,
		 "Max bytes a context publishes on boards it is a member of (ENOSPC beyond)");

unsigned int hzc_max_user_board_bytes = 16 << 20;
module_param_named(max_user_board_bytes, hzc_max_user_board_bytes, uint, 0644);
MODULE_PARM_DESC(max_user_board_bytes,
		 "Max bytes of a user's blobs that exist, until their domains are freed (EDQUOT beyond)");

/* Log that a limit refused a request, at most a few times a second. */
int hzc_limit_hit(const char *param, int err)
{
	pr_notice_ratelimited("hzc: %s (pid %d, uid %u) reached the %s limit\n",
			      current->comm, task_tgid_nr(current),
			      from_kuid(&init_user_ns, current_uid()), param);
	return err;
}
