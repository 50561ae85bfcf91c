// SPDX-License-Identifier: Apache-2.0
// hzc_* extension API.
#pragma GCC visibility push(default)
#include <hzc/hzc.h>
#pragma GCC visibility pop

#include <linux/hzc.h>

#include <cstdio>

#include "api/boundary.h"
#include "core/activation_cookie.h"
#include "core/comm.h"
#include "core/config.h"
#include "device/device.h"
#include "verbs/links.h"

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
    case HZC_FEATURE_ACTIVATION_COOKIE:
      return "activation_cookie";
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

HcclResult hzc_comm_link_info(HcclComm comm, struct hzc_link_info *info) {
  return hzc::api::HcclGuard("hzc_comm_link_info", [&]() -> hzc::Status {
    if (comm == nullptr) {
      return hzc::Error(HCCL_E_PTR, "comm is null");
    }
    if (info == nullptr) {
      return hzc::Error(HCCL_E_PTR, "info is null");
    }
    auto c = hzc::CommRegistry::Process().Get(comm);
    if (!c.ok()) {
      return c.status();
    }
    hzc_link_info out{};
    out.linked = (*c)->linked() ? 1 : 0;
    if (const hzc::verbs::Links *links = (*c)->links(); links != nullptr) {
      const hzc::verbs::Port &port = links->port();
      out.rdma = 1;
      std::snprintf(out.device, sizeof(out.device), "%s", port.device.c_str());
      out.port = port.port_num;
      out.gid_index = port.gid_index;
    }
    *info = out;
    return hzc::Status::Ok();
  });
}

namespace {

uintptr_t Addr(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

// hzc_comm_rdma_write (@write) or hzc_comm_rdma_read between [local, local + size) and
// [peer_va, peer_va + size) of @rank; see hzc/hzc.h.
hzc::Status Transfer(HcclComm comm, uint32_t rank, void *local, const void *peer_va, size_t size,
                     bool write) {
  if (comm == nullptr) {
    return hzc::Error(HCCL_E_PTR, "comm is null");
  }
  if (local == nullptr) {
    return hzc::Error(HCCL_E_PTR, "local is null");
  }
  if (peer_va == nullptr) {
    return hzc::Error(HCCL_E_PTR, "peer_va is null");
  }
  if (size == 0) {
    return hzc::Error(HCCL_E_PARA, "size=0: must not be 0");
  }
  if (Addr(local) > UINTPTR_MAX - size) {
    return hzc::Error(HCCL_E_PARA, "local={} size={:#x}: wraps around", local, size);
  }
  if (Addr(peer_va) > UINTPTR_MAX - size) {
    return hzc::Error(HCCL_E_PARA, "peer_va={} size={:#x}: wraps around", peer_va, size);
  }
  auto c = hzc::CommRegistry::Process().Get(comm);
  if (!c.ok()) {
    return c.status();
  }
  hzc::Communicator &self = **c;
  if (rank >= self.size()) {
    return hzc::Error(HCCL_E_PARA, "rank={}: comm={} has {} ranks", rank, comm, self.size());
  }
  if (rank == self.rank()) {
    return hzc::Error(HCCL_E_PARA, "rank={}: the caller's own rank; RDMA needs another rank", rank);
  }
  hzc::PeerMemory *peers = self.peer_memory();
  if (peers == nullptr) {
    return hzc::Error(HCCL_E_UNAVAIL,
                      "comm={}: no links yet (the first HcclCommSetMemoryRange makes them)", comm);
  }
  hzc::verbs::Links *links = self.links();
  if (links == nullptr) {
    return hzc::Error(HCCL_E_UNAVAIL,
                      "comm={}: its links are kernel-only (some rank has no RDMA device)", comm);
  }
  const auto mr = self.FindMemory(local, size);
  if (mr == nullptr) {
    return hzc::Error(HCCL_E_PARA,
                      "local={} size={:#x}: not inside one block this process activated on comm={}",
                      local, size, comm);
  }
  auto block = peers->Activation(rank, Addr(peer_va), size);
  if (!block.ok()) {
    return block.status();
  }
  uint32_t rkey = 0;
  switch (hzc::ActivationCookie::Decode(block->cookie, self.CookieTag(rank), &rkey)) {
    case hzc::ActivationCookie::Match::kNone:
      return hzc::Error(HCCL_E_PARA,
                        "peer_va={}: the block [{:#x}, +{:#x}) of rank {} has no RDMA registration "
                        "(it was activated through a communicator without RDMA links)",
                        peer_va, block->va, block->size, rank);
    case hzc::ActivationCookie::Match::kOther:
      return hzc::Error(HCCL_E_PARA,
                        "peer_va={}: the block [{:#x}, +{:#x}) was not activated by rank {} on "
                        "comm={} (but through another communicator, or by another rank of that "
                        "process); RDMA reaches only memory activated on the same communicator",
                        peer_va, block->va, block->size, rank, comm);
    case hzc::ActivationCookie::Match::kOk:
      break;
  }
  return write ? links->Write(rank, *mr, local, size, Addr(peer_va), rkey)
               : links->Read(rank, *mr, local, size, Addr(peer_va), rkey);
}

}  // namespace

HcclResult hzc_comm_rdma_write(HcclComm comm, uint32_t rank, const void *local, void *peer_va,
                               size_t size) {
  return hzc::api::HcclGuard("hzc_comm_rdma_write", [&]() -> hzc::Status {
    return Transfer(comm, rank, const_cast<void *>(local), peer_va, size, true);
  });
}

HcclResult hzc_comm_rdma_read(HcclComm comm, uint32_t rank, void *local, const void *peer_va,
                              size_t size) {
  return hzc::api::HcclGuard("hzc_comm_rdma_read", [&]() -> hzc::Status {
    return Transfer(comm, rank, local, peer_va, size, false);
  });
}
