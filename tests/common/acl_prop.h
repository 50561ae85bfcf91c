// SPDX-License-Identifier: Apache-2.0
// The physical-memory properties the ACL memory tests allocate with.
#pragma once

#include <acl/acl.h>

namespace hzc::test {

// Device memory of @attr on device 0, as aclrtMallocPhysical callers describe it.
inline aclrtPhysicalMemProp Prop(aclrtMemAttr attr = ACL_HBM_MEM_NORMAL) {
  aclrtPhysicalMemProp p{};
  p.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  p.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  p.memAttr = attr;
  p.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

}  // namespace hzc::test
