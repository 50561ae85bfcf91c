// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: the sysfs tree under /sys/kernel/hzc/ (documented in
 * Documentation/ABI/testing/sysfs-kernel-hzc).
 */
#include <linux/kobject.h>
#include <linux/sysfs.h>

#include "hzc.h"

static struct kobject *hzc_root;

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

int hzc_sysfs_init(void)
{
	int ret;

	hzc_root = kobject_create_and_add(HZC_DEVICE_NAME, kernel_kobj);
	if (!hzc_root)
		return -ENOMEM;

	ret = sysfs_create_group(hzc_root, &hzc_root_group);
	if (ret)
		goto out_put;
	return 0;

out_put:
	kobject_put(hzc_root);
	return ret;
}

void hzc_sysfs_exit(void)
{
	sysfs_remove_group(hzc_root, &hzc_root_group);
	kobject_put(hzc_root);
}
