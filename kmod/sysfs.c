// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: the sysfs tree under /sys/kernel/hzc/ (documented in
 * Documentation/ABI/testing/sysfs-kernel-hzc).
 */
#include <linux/kobject.h>
#include <linux/pid.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "hzc.h"

static struct kobject *hzc_root;
static struct kobject *hzc_ranges_dir;
static struct kobject *hzc_domains_dir;

/* A sysfs directory of one object (range, domain or member). */
struct hzc_kobj {
	struct kobject kobj;
	void *obj;
};

static void *hzc_kobj_obj(struct kobject *kobj)
{
	return container_of(kobj, struct hzc_kobj, kobj)->obj;
}

static void hzc_kobj_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct hzc_kobj, kobj));
}

static ssize_t abi_version_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", HZC_ABI_VERSION);
}

static struct kobj_attribute abi_version_attr = __ATTR_RO(abi_version);

/* A global counter: one read-only file showing one atomic64_t. */
struct hzc_counter_attr {
	struct kobj_attribute attr;
	atomic64_t *counter;
};

static ssize_t hzc_counter_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	struct hzc_counter_attr *ca =
		container_of(attr, struct hzc_counter_attr, attr);

	return sysfs_emit(buf, "%lld\n", atomic64_read(ca->counter));
}

#define HZC_COUNTER_ATTR(_name, _counter)				\
	{ .attr = __ATTR(_name, 0444, hzc_counter_show, NULL),		\
	  .counter = (_counter) }

static struct hzc_counter_attr hzc_counters[] = {
	HZC_COUNTER_ATTR(nr_contexts, &hzc_stats.nr_contexts),
	HZC_COUNTER_ATTR(nr_ranges, &hzc_stats.nr_ranges),
	HZC_COUNTER_ATTR(nr_activations, &hzc_stats.nr_activations),
	HZC_COUNTER_ATTR(nr_domains, &hzc_stats.nr_domains),
	HZC_COUNTER_ATTR(pinned_bytes, &hzc_stats.pinned_bytes),
};

static struct attribute *hzc_root_attrs[] = {
	&abi_version_attr.attr,
	&hzc_counters[0].attr.attr,
	&hzc_counters[1].attr.attr,
	&hzc_counters[2].attr.attr,
	&hzc_counters[3].attr.attr,
	&hzc_counters[4].attr.attr,
	NULL,
};

static const struct attribute_group hzc_root_group = {
	.attrs = hzc_root_attrs,
};

/*
 * /sys/kernel/hzc/ranges/<id>/
 *
 * The files of ranges, domains and members show every user's objects (pids,
 * sizes, uids), which the netlink family shows each user only for its own:
 * they are root's (mode 0400).  The counters above are for everyone.
 */

static ssize_t owner_pid_show(struct kobject *kobj, struct kobj_attribute *attr,
			      char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%d\n", pid_nr(range->ctx->tgid));
}

static ssize_t base_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "0x%lx\n", hzc_range_base(range));
}

static ssize_t size_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%lu\n", hzc_range_size(range));
}

static ssize_t activated_bytes_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%llu\n", READ_ONCE(range->activated_bytes));
}

static ssize_t nr_activations_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%u\n", READ_ONCE(range->nr_acts));
}

static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%s\n", READ_ONCE(range->nr_acts) ?
			  "active" : "registered");
}

/*
 * The numbers of the domains the owner is a member of.  A context's
 * memberships of one domain are next to each other in its list.
 */
static ssize_t domains_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct hzc_range *range = hzc_kobj_obj(kobj);
	struct hzc_ctx *ctx = range->ctx;
	struct hzc_domain *prev = NULL;
	struct hzc_member *m;
	int len = 0;

	spin_lock(&ctx->members_lock);
	list_for_each_entry(m, &ctx->members, ctx_node) {
		if (m->dom == prev)
			continue;
		prev = m->dom;
		len += sysfs_emit_at(buf, len, "%s%llu", len ? " " : "",
				     m->dom->seq);
	}
	spin_unlock(&ctx->members_lock);
	len += sysfs_emit_at(buf, len, "\n");
	return len;
}

static struct kobj_attribute range_owner_pid_attr = __ATTR_RO_MODE(owner_pid, 0400);
static struct kobj_attribute range_base_attr = __ATTR_RO_MODE(base, 0400);
static struct kobj_attribute range_size_attr = __ATTR_RO_MODE(size, 0400);
static struct kobj_attribute range_activated_bytes_attr =
	__ATTR_RO_MODE(activated_bytes, 0400);
static struct kobj_attribute range_nr_activations_attr =
	__ATTR_RO_MODE(nr_activations, 0400);
static struct kobj_attribute range_state_attr = __ATTR_RO_MODE(state, 0400);
static struct kobj_attribute range_domains_attr = __ATTR_RO_MODE(domains, 0400);

static struct attribute *hzc_range_attrs[] = {
	&range_owner_pid_attr.attr,
	&range_base_attr.attr,
	&range_size_attr.attr,
	&range_activated_bytes_attr.attr,
	&range_nr_activations_attr.attr,
	&range_state_attr.attr,
	&range_domains_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(hzc_range);

static const struct kobj_type hzc_range_ktype = {
	.release = hzc_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = hzc_range_groups,
};

/* /sys/kernel/hzc/domains/<seq>/ */

/* The id is a capability (whoever knows it and the uid may join): root only. */
static ssize_t id_show(struct kobject *kobj, struct kobj_attribute *attr,
		       char *buf)
{
	struct hzc_domain *dom = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%016llx%016llx\n", dom->id[1], dom->id[0]);
}

static ssize_t state_dom_show(struct kobject *kobj, struct kobj_attribute *attr,
			      char *buf)
{
	struct hzc_domain *dom = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%s\n", READ_ONCE(dom->broken) ? "broken" : "live");
}

static ssize_t nranks_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct hzc_domain *dom = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%u\n", dom->nranks);
}

static ssize_t joined_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct hzc_domain *dom = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%u\n", READ_ONCE(dom->nr_joined));
}

static ssize_t creator_uid_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	struct hzc_domain *dom = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%u\n", from_kuid(&init_user_ns, dom->euid));
}

static struct kobj_attribute domain_id_attr = __ATTR_RO_MODE(id, 0400);
static struct kobj_attribute domain_state_attr =
	__ATTR(state, 0400, state_dom_show, NULL);
static struct kobj_attribute domain_nranks_attr = __ATTR_RO_MODE(nranks, 0400);
static struct kobj_attribute domain_joined_attr = __ATTR_RO_MODE(joined, 0400);
static struct kobj_attribute domain_creator_uid_attr = __ATTR_RO_MODE(creator_uid, 0400);

static struct attribute *hzc_domain_attrs[] = {
	&domain_id_attr.attr,
	&domain_state_attr.attr,
	&domain_nranks_attr.attr,
	&domain_joined_attr.attr,
	&domain_creator_uid_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(hzc_domain);

static const struct kobj_type hzc_domain_ktype = {
	.release = hzc_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = hzc_domain_groups,
};

/* /sys/kernel/hzc/domains/<id>/rank<N>/ */

static ssize_t pid_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	struct hzc_member *m = hzc_kobj_obj(kobj);

	return sysfs_emit(buf, "%d\n", m->pid);
}

static struct kobj_attribute member_pid_attr = __ATTR_RO_MODE(pid, 0400);

static struct attribute *hzc_member_attrs[] = {
	&member_pid_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(hzc_member);

static const struct kobj_type hzc_member_ktype = {
	.release = hzc_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = hzc_member_groups,
};

static struct hzc_kobj *hzc_kobj_add(const struct kobj_type *ktype,
				     struct kobject *parent, void *obj,
				     const char *name)
{
	struct hzc_kobj *hk;
	int ret;

	hk = kzalloc(sizeof(*hk), GFP_KERNEL_ACCOUNT);
	if (!hk)
		return ERR_PTR(-ENOMEM);
	hk->obj = obj;
	ret = kobject_init_and_add(&hk->kobj, ktype, parent, "%s", name);
	if (ret) {
		kobject_put(&hk->kobj);
		return ERR_PTR(ret);
	}
	return hk;
}

/* After this returns no show() runs or will run on the object. */
static void hzc_kobj_del(struct hzc_kobj **hkp)
{
	struct hzc_kobj *hk = *hkp;

	if (!hk)
		return;
	*hkp = NULL;
	kobject_del(&hk->kobj);
	kobject_put(&hk->kobj);
}

int hzc_sysfs_range_add(struct hzc_range *range)
{
	struct hzc_kobj *hk;
	char name[24];

	snprintf(name, sizeof(name), "%llu", range->id);
	hk = hzc_kobj_add(&hzc_range_ktype, hzc_ranges_dir, range, name);
	if (IS_ERR(hk))
		return PTR_ERR(hk);
	range->kobj = hk;
	return 0;
}

void hzc_sysfs_range_del(struct hzc_range *range)
{
	hzc_kobj_del(&range->kobj);
}

int hzc_sysfs_domain_add(struct hzc_domain *dom)
{
	struct hzc_kobj *hk;
	char name[24];

	snprintf(name, sizeof(name), "%llu", dom->seq);
	hk = hzc_kobj_add(&hzc_domain_ktype, hzc_domains_dir, dom, name);
	if (IS_ERR(hk))
		return PTR_ERR(hk);
	dom->kobj = hk;
	return 0;
}

void hzc_sysfs_domain_del(struct hzc_domain *dom)
{
	hzc_kobj_del(&dom->kobj);
}

int hzc_sysfs_member_add(struct hzc_member *m)
{
	struct hzc_kobj *hk;
	char name[16];

	snprintf(name, sizeof(name), "rank%u", m->rank);
	hk = hzc_kobj_add(&hzc_member_ktype, &m->dom->kobj->kobj, m, name);
	if (IS_ERR(hk))
		return PTR_ERR(hk);
	m->kobj = hk;
	return 0;
}

void hzc_sysfs_member_del(struct hzc_member *m)
{
	hzc_kobj_del(&m->kobj);
}

int hzc_sysfs_init(void)
{
	int ret;

	hzc_root = kobject_create_and_add(HZC_DEVICE_NAME, kernel_kobj);
	if (!hzc_root)
		return -ENOMEM;

	ret = sysfs_create_group(hzc_root, &hzc_root_group);
	if (ret)
		goto out_put_root;
	ret = -ENOMEM;
	hzc_ranges_dir = kobject_create_and_add("ranges", hzc_root);
	if (!hzc_ranges_dir)
		goto out_remove_group;
	hzc_domains_dir = kobject_create_and_add("domains", hzc_root);
	if (!hzc_domains_dir)
		goto out_put_ranges;
	return 0;

out_put_ranges:
	kobject_put(hzc_ranges_dir);
out_remove_group:
	sysfs_remove_group(hzc_root, &hzc_root_group);
out_put_root:
	kobject_put(hzc_root);
	return ret;
}

void hzc_sysfs_exit(void)
{
	kobject_put(hzc_domains_dir);
	kobject_put(hzc_ranges_dir);
	sysfs_remove_group(hzc_root, &hzc_root_group);
	kobject_put(hzc_root);
}
