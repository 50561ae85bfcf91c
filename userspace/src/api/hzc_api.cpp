// SPDX-License-Identifier: Apache-2.0
// hzc_* extension API.
#pragma GCC visibility push(default)
#include <hzc/hzc.h>
#pragma GCC visibility pop

#include <linux/hzc.h>

#include "api/boundary.h"
#include "core/config.h"
#include "device/device.h"

#ifndef HZC_VERSION_STRING
#error "HZC_VERSION_STRING must be defined by the build"
#endif

HcclResult hzc_get_device_info(struct hzc_device_info *info) {
  return hzc::api::HcclGuard("hzc_get_device_info", [&]() -> hzc::Status {
    if (info == nullptr) {
      return hzc::Error(HCCL_E_PTR, "info is null");
    }
    auto device = hzc::Device::Process();
    if (!device.ok()) {
      return device.status();
    }
    hzc_info raw{};
    HZC_RETURN_IF_ERROR((*device)->Info(&raw));
    *info = hzc_device_info{
        .abi_version = raw.out_abi_version,
        .page_size = raw.out_page_size,
        .features = raw.out_features,
        .max_pinned_bytes = raw.out_max_pinned_bytes,
        .max_ranges = raw.out_max_ranges,
        .max_domains = raw.out_max_domains,
        .max_ranks = raw.out_max_ranks,
        .max_blob_size = raw.out_max_blob_size,
    };
    return hzc::Status::Ok();
  });
}

const char *hzc_feature_name(uint64_t feature_bit) {
  switch (feature_bit) {
    case HZC_FEATURE_INFO:
      return "info";
    case HZC_FEATURE_RANGES:
      return "ranges";
    case HZC_FEATURE_ACTIVATIONS:
      return "activations";
    case HZC_FEATURE_DOMAINS:
      return "domains";
    case HZC_FEATURE_PEER_MAP:
      return "peer_map";
    default:
      return nullptr;
  }
}

const char *hzc_device_path(void) {
  try {
    return hzc::GetConfig().device_path.c_str();
  } catch (...) {
    return hzc::Config::kDefaultDevice;
  }
}

const char *hzc_version(void) {
  return HZC_VERSION_STRING;
}
