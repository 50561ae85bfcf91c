// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: per-user accounting.  Every context of one (real) uid shares one
 * hzc_user, which counts what the per-user limits bound: pinned bytes,
 * memberships, board bytes, ranges and their bytes.  Pins are also charged to the kernel's own
 * user_struct (RLIMIT_MEMLOCK, see activation.c).
 */
#include <linux/hashtable.h>
#include <linux/slab.h>

#include "hzc.h"

static DEFINE_HASHTABLE(hzc_users, 6);
static DEFINE_SPINLOCK(hzc_users_lock);

/* The hzc_user of @uid, referenced; created on first use.  NULL: no memory. */
struct hzc_user *hzc_user_get(kuid_t uid)
{
	struct hzc_user *hu, *new = NULL;

	for (;;) {
		spin_lock(&hzc_users_lock);
		hash_for_each_possible(hzc_users, hu, node, __kuid_val(uid)) {
			if (uid_eq(hu->uid, uid) && refcount_inc_not_zero(&hu->ref)) {
				spin_unlock(&hzc_users_lock);
				kfree(new);
				return hu;
			}
		}
		if (new) {
			hash_add(hzc_users, &new->node, __kuid_val(uid));
			spin_unlock(&hzc_users_lock);
			return new;
		}
		spin_unlock(&hzc_users_lock);

		new = kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
		if (!new)
			return NULL;
		new->uid = uid;
		refcount_set(&new->ref, 1);
	}
}

/*
 * A getter that finds the entry at zero skips it and adds a new one; the
 * dead entry leaves the table here.
 */
void hzc_user_put(struct hzc_user *hu)
{
	if (!refcount_dec_and_test(&hu->ref))
		return;
	spin_lock(&hzc_users_lock);
	hash_del(&hu->node);
	spin_unlock(&hzc_users_lock);
	WARN_ON(atomic64_read(&hu->pinned_bytes) ||
		atomic_read(&hu->nr_members) ||
		atomic64_read(&hu->board_bytes) ||
		atomic_read(&hu->nr_ranges) ||
		atomic64_read(&hu->range_bytes));
	kfree(hu);
}
