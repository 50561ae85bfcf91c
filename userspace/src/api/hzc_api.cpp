// SPDX-License-Identifier: Apache-2.0
// hzc_* extension API.
#pragma GCC visibility push(default)
#include <hzc/hzc.h>
#pragma GCC visibility pop

#include <linux/hzc.h>

#include "api/boundary.h"
#include "core/comm.h"
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

namespace {

// The linked communicator behind @comm, or why there is none.
hzc::Expected<std::shared_ptr<hzc::Communicator>> Linked(HcclComm comm) {
  auto c = hzc::CommRegistry::Process().Get(comm);
  if (!c.ok()) {
    return c.status();
  }
  if ((*c)->peer_memory() == nullptr) {
    return hzc::Error(HCCL_E_UNAVAIL,
                      "comm={}: no links yet (the first HcclCommSetMemoryRange makes them)", comm);
  }
  return c;
}

}  // namespace

HcclResult hzc_comm_peer_ptr(HcclComm comm, uint32_t rank, const void *peer_va, size_t size,
                             void **local) {
  return hzc::api::HcclGuard("hzc_comm_peer_ptr", [&]() -> hzc::Status {
    if (comm == nullptr) {
      return hzc::Error(HCCL_E_PTR, "comm is null");
    }
    if (peer_va == nullptr) {
      return hzc::Error(HCCL_E_PTR, "peer_va is null");
    }
    if (local == nullptr) {
      return hzc::Error(HCCL_E_PTR, "local is null");
    }
    if (size == 0) {
      return hzc::Error(HCCL_E_PARA, "size=0: must not be 0");
    }
    auto c = Linked(comm);
    if (!c.ok()) {
      return c.status();
    }
    auto p = (*c)->peer_memory()->Translate(rank, reinterpret_cast<uintptr_t>(peer_va), size);
    if (!p.ok()) {
      return p.status();
    }
    *local = *p;
    return hzc::Status::Ok();
  });
}

HcclResult hzc_comm_peer_blocks(HcclComm comm, uint32_t rank, struct hzc_peer_block *blocks,
                                uint32_t *count) {
  return hzc::api::HcclGuard("hzc_comm_peer_blocks", [&]() -> hzc::Status {
    if (comm == nullptr) {
      return hzc::Error(HCCL_E_PTR, "comm is null");
    }
    if (count == nullptr) {
      return hzc::Error(HCCL_E_PTR, "count is null");
    }
    if (blocks == nullptr && *count != 0) {
      return hzc::Error(HCCL_E_PTR, "blocks is null with count={}", *count);
    }
    auto c = Linked(comm);
    if (!c.ok()) {
      return c.status();
    }
    auto list = (*c)->peer_memory()->Blocks(rank);
    if (!list.ok()) {
      return list.status();
    }
    for (size_t i = 0; i < list->size() && i < *count; ++i) {
      blocks[i] = hzc_peer_block{.va = (*list)[i].va, .size = (*list)[i].size};
    }
    *count = static_cast<uint32_t>(list->size());
    return hzc::Status::Ok();
  });
}
