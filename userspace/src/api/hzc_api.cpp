// SPDX-License-Identifier: Apache-2.0
// hzc_* extension API.
#pragma GCC visibility push(default)
#include <hzc/hzc.h>
#pragma GCC visibility pop

#include <cstddef>
#include <cstdio>

#include "api/boundary.h"
#include "api/checks.h"
#include "base/config.h"
#include "bootstrap/group.h"
#include "core/comm.h"
#include "core/peer_access.h"
#include "device/device.h"

#ifndef HZC_VERSION_STRING
#error "HZC_VERSION_STRING must be defined by the build"
#endif

namespace api = hzc::api;
using hzc::Status;

namespace {

// The module's feature bits (Device::Feature) and the public HZC_DEVICE_FEATURE_* of each.
constexpr struct {
  uint64_t device;
  uint64_t bit;
  const char *name;
} kFeatures[] = {
    {hzc::Device::kFeatureInfo, HZC_DEVICE_FEATURE_INFO, "info"},
    {hzc::Device::kFeatureRanges, HZC_DEVICE_FEATURE_RANGES, "ranges"},
    {hzc::Device::kFeatureActivations, HZC_DEVICE_FEATURE_ACTIVATIONS, "activations"},
    {hzc::Device::kFeatureDomains, HZC_DEVICE_FEATURE_DOMAINS, "domains"},
    {hzc::Device::kFeaturePeerMap, HZC_DEVICE_FEATURE_PEER_MAP, "peer_map"},
    {hzc::Device::kFeatureActivationCookie, HZC_DEVICE_FEATURE_ACTIVATION_COOKIE,
     "activation_cookie"},
};

uint64_t PublicFeatures(uint64_t device) {
  uint64_t out = 0;
  for (const auto &feature : kFeatures) {
    out |= (device & feature.device) != 0 ? feature.bit : 0;
  }
  return out;
}

}  // namespace

HcclResult hzc_get_device_info(struct hzc_device_info *info) {
  return api::HcclGuard("hzc_get_device_info", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(info, "info"));
    auto device = hzc::Device::Process();
    if (!device.ok()) {
      return device.status();
    }
    auto raw = (*device)->QueryInfo();
    if (!raw.ok()) {
      return raw.status();
    }
    *info = hzc_device_info{
        .abi_version = raw->abi_version,
        .page_size = raw->page_size,
        .features = PublicFeatures(raw->features),
        .max_pinned_bytes = raw->max_pinned_bytes,
        .max_ranges = raw->max_ranges,
        .max_domains = raw->max_domains,
        .max_ranks = raw->max_ranks,
        .max_blob_size = raw->max_blob_size,
    };
    return Status::Ok();
  });
}

const char *hzc_feature_name(uint64_t feature_bit) {
  for (const auto &feature : kFeatures) {
    if (feature.bit == feature_bit) {
      return feature.name;
    }
  }
  return nullptr;
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

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

}  // namespace

HcclResult hzc_comm_peer_ptr(HcclComm comm, uint32_t rank, const void *peer_va, size_t size,
                             void **local) {
  return api::HcclGuard("hzc_comm_peer_ptr", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(peer_va, "peer_va"));
    HZC_RETURN_IF_ERROR(api::NotNull(local, "local"));
    HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
    return api::WithComm(comm, [&](const auto &c) -> Status {
      auto p = hzc::PeerPointer(comm, *c, rank, Addr(peer_va), size);
      if (!p.ok()) {
        return p.status();
      }
      *local = *p;
      return Status::Ok();
    });
  });
}

namespace {

// hzc_comm_peer_activations under the name @name (the old name logs as itself).
HcclResult PeerActivations(const char *name, HcclComm comm, uint32_t rank,
                           struct hzc_peer_activation *activations, uint32_t *count) {
  return api::HcclGuard(name, [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(count, "count"));
    if (activations == nullptr && *count != 0) {
      return hzc::Error(HCCL_E_PTR, "activations is null with count={}", *count);
    }
    return api::WithComm(comm, [&](const auto &c) -> Status {
      auto list = hzc::PeerActivations(comm, *c, rank);
      if (!list.ok()) {
        return list.status();
      }
      for (size_t i = 0; i < list->size() && i < *count; ++i) {
        activations[i] = hzc_peer_activation{.va = (*list)[i].va, .size = (*list)[i].size};
      }
      *count = static_cast<uint32_t>(list->size());
      return Status::Ok();
    });
  });
}

}  // namespace

HcclResult hzc_comm_peer_activations(HcclComm comm, uint32_t rank,
                                     struct hzc_peer_activation *activations, uint32_t *count) {
  return PeerActivations("hzc_comm_peer_activations", comm, rank, activations, count);
}

static_assert(sizeof(hzc_peer_block) == sizeof(hzc_peer_activation) &&
              offsetof(hzc_peer_block, va) == offsetof(hzc_peer_activation, va) &&
              offsetof(hzc_peer_block, size) == offsetof(hzc_peer_activation, size));

HcclResult hzc_comm_peer_blocks(HcclComm comm, uint32_t rank, struct hzc_peer_block *blocks,
                                uint32_t *count) {
  return PeerActivations("hzc_comm_peer_blocks", comm, rank,
                         reinterpret_cast<hzc_peer_activation *>(blocks), count);
}

HcclResult hzc_comm_link_info(HcclComm comm, struct hzc_link_info *info) {
  return api::HcclGuard("hzc_comm_link_info", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(info, "info"));
    return api::WithComm(comm, [&](const auto &c) {
      const hzc::LinkInfo links = hzc::DescribeLinks(*c);
      hzc_link_info out{};
      out.linked = links.linked ? 1 : 0;
      out.rdma = links.rdma ? 1 : 0;
      std::snprintf(out.device, sizeof(out.device), "%s", links.device.c_str());
      out.port = links.port;
      out.gid_index = links.gid_index;
      *info = out;
      return Status::Ok();
    });
  });
}

HcclResult hzc_comm_net_stats(HcclComm comm, struct hzc_net_stats *stats) {
  return api::HcclGuard("hzc_comm_net_stats", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(stats, "stats"));
    return api::WithComm(comm, [&](const auto &c) {
      hzc_net_stats out{};
      if (const hzc::bootstrap::Group *g = c->group(); g != nullptr) {
        const hzc::bootstrap::Group::Traffic &t = g->traffic();
        out.data_sent = t.wire_sent.load(std::memory_order_relaxed);
        out.data_received = t.wire_received.load(std::memory_order_relaxed);
        out.control_sent = t.sent.load(std::memory_order_relaxed);
        out.control_received = t.received.load(std::memory_order_relaxed);
      }
      *stats = out;
      return Status::Ok();
    });
  });
}

HcclResult hzc_comm_net_sends(HcclComm comm, struct hzc_net_sends *sends) {
  return api::HcclGuard("hzc_comm_net_sends", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(sends, "sends"));
    return api::WithComm(comm, [&](const auto &c) {
      hzc_net_sends out{};
      if (const hzc::bootstrap::Group *g = c->group(); g != nullptr) {
        out.staged = g->traffic().wire_staged.load(std::memory_order_relaxed);
        out.direct = g->traffic().wire_direct.load(std::memory_order_relaxed);
      }
      *sends = out;
      return Status::Ok();
    });
  });
}

HcclResult hzc_comm_net_receives(HcclComm comm, struct hzc_net_receives *receives) {
  return api::HcclGuard("hzc_comm_net_receives", [&]() -> Status {
    HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
    HZC_RETURN_IF_ERROR(api::NotNull(receives, "receives"));
    return api::WithComm(comm, [&](const auto &c) {
      hzc_net_receives out{};
      if (const hzc::bootstrap::Group *g = c->group(); g != nullptr) {
        out.landed = g->traffic().wire_landed.load(std::memory_order_relaxed);
        out.placed = g->traffic().wire_placed.load(std::memory_order_relaxed);
      }
      *receives = out;
      return Status::Ok();
    });
  });
}

namespace {

// hzc_comm_rdma_write (@write) or hzc_comm_rdma_read; see hzc/hzc.h.
Status Transfer(HcclComm comm, uint32_t rank, void *local, const void *peer_va, size_t size,
                bool write) {
  HZC_RETURN_IF_ERROR(api::NotNull(comm, "comm"));
  HZC_RETURN_IF_ERROR(api::NotNull(local, "local"));
  HZC_RETURN_IF_ERROR(api::NotNull(peer_va, "peer_va"));
  HZC_RETURN_IF_ERROR(api::NonZero(size, "size"));
  HZC_RETURN_IF_ERROR(api::NoWrap(local, size, "local", "wraps around"));
  HZC_RETURN_IF_ERROR(api::NoWrap(peer_va, size, "peer_va", "wraps around"));
  return api::WithComm(comm, [&](const auto &c) {
    return hzc::Transfer(comm, *c, rank, local, Addr(peer_va), size, write);
  });
}

}  // namespace

HcclResult hzc_comm_rdma_write(HcclComm comm, uint32_t rank, const void *local, void *peer_va,
                               size_t size) {
  return api::HcclGuard("hzc_comm_rdma_write", [&]() -> Status {
    return Transfer(comm, rank, const_cast<void *>(local), peer_va, size, true);
  });
}

HcclResult hzc_comm_rdma_read(HcclComm comm, uint32_t rank, void *local, const void *peer_va,
                              size_t size) {
  return api::HcclGuard("hzc_comm_rdma_read", [&]() -> Status {
    return Transfer(comm, rank, local, peer_va, size, false);
  });
}
