// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace hzc::bootstrap {

// This server's identity: HZC_HOST_ID if set, else "<boot id>/<hostname>". Ranks with the same
// identity are on one server.
std::string HostIdentity();

}  // namespace hzc::bootstrap
