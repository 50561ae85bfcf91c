// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: every resource limit of the module, as module parameters
 * (/sys/module/hzc/parameters/).  Root may change them at run time; a new
 * value applies to the next request.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "hzc.h"

unsigned int hzc_max_ranges = 65536;
module_param_named(max_ranges, hzc_max_ranges, uint, 0644);
MODULE_PARM_DESC(max_ranges, "Max ranges per context (ENOSPC beyond)");

unsigned int hzc_max_domains = 1024;
module_param_named(max_domains, hzc_max_domains, uint, 0644);
MODULE_PARM_DESC(max_domains, "Max domains in the system (ENOSPC beyond)");

unsigned long long hzc_max_pinned_bytes;
module_param_named(max_pinned_bytes, hzc_max_pinned_bytes, ullong, 0644);
MODULE_PARM_DESC(max_pinned_bytes,
		 "Max pinned bytes per context, 0 = only RLIMIT_MEMLOCK (ENOMEM beyond)");
