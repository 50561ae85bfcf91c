// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/host_id.h"

#include <unistd.h>

#include <climits>
#include <fstream>

#include "base/config.h"

namespace hzc::bootstrap {

std::string HostIdentity() {
  const Config &config = GetConfig();
  if (!config.host_id.empty()) {
    return config.host_id;
  }
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!(in >> boot_id)) {
    boot_id = "no-boot-id";
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) {
    host[0] = '\0';
  }
  return boot_id + "/" + host;
}

}  // namespace hzc::bootstrap
