/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hzc/hzc.h: hzc's own extension API (inspection of the kernel module through libhzc).
 */
#ifndef HZC_HZC_H_
#define HZC_HZC_H_

#include <stdint.h>

#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What the loaded hzc.ko reports about itself (its INFO ioctl). */
struct hzc_device_info {
  uint32_t abi_version;      /* ABI version of the module */
  uint32_t page_size;        /* PAGE_SIZE of the running kernel */
  uint64_t features;         /* HZC_FEATURE_* bits of <linux/hzc.h> */
  uint64_t max_pinned_bytes; /* per-context pin limit, 0 = unlimited */
  uint32_t max_ranges;       /* ranges per context */
  uint32_t max_domains;      /* domains in the system */
  uint32_t max_ranks;        /* ranks per domain */
  uint32_t max_blob_size;    /* bytes per published endpoint blob */
};

/**
 * Fill @info from the module behind HZC_DEVICE (default /dev/hzc).
 * HCCL_E_PTR for NULL; HCCL_E_DRV when the device cannot be opened, is not hzc, or speaks
 * another ABI version.
 */
HcclResult hzc_get_device_info(struct hzc_device_info *info);

/** Name of one feature bit ("info", ...), or NULL for a bit this library does not know. */
const char *hzc_feature_name(uint64_t feature_bit);

/** The device path the library uses (HZC_DEVICE, default "/dev/hzc"). */
const char *hzc_device_path(void);

/** The library version, "MAJOR.MINOR.PATCH". */
const char *hzc_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HZC_HZC_H_ */
