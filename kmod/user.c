// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: per-user accounting.  Every context of one (real) uid shares one
 * hzc_user, which counts what the per-user limits bound: pinned bytes,
 * memberships, board bytes, ranges and their bytes.  Pins are also charged to the kernel's own
 * user_struct (RLIMIT_MEMLOCK, see activation.c).
 */
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/user_namespace.h>
#include <linux/slab.h>

#include "hzc.h"

static DEFINE_HASHTABLE(hzc_users, 6);
static DEFINE_SPINLOCK(hzc_users_lock);

/*
 * Whom the per-user limits charge for the calling task: its real uid, or,
 * in a user namespace, the owner of its outermost one below the initial
 * namespace.  Whoever creates a user namespace may map many uids into it
 * (a subordinate range through newuidmap); charged apart, each would have
 * limits of its own, and together they could take what is global
 * (max_domains).  So the uids of a namespace share its creator's limits.
 */
kuid_t hzc_account_uid(void)
{
	const struct user_namespace *ns = current_user_ns();

	if (ns == &init_user_ns)
		return current_uid();
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	return ns->owner;
}

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
