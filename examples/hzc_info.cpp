// SPDX-License-Identifier: Apache-2.0
// hzc-info: print what the loaded hzc.ko reports, read through libhzc.
//
// Usage: hzc-info [--help] [--version]      (the device is HZC_DEVICE, default /dev/hzc)
#include <hccl/hccl.h>
#include <hzc/hzc.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "tool_cli.h"

namespace {

std::string FeatureList(uint64_t features) {
  std::string out;
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t mask = 1ULL << bit;
    if ((features & mask) == 0) {
      continue;
    }
    if (!out.empty()) {
      out += ' ';
    }
    const char *name = hzc_feature_name(mask);
    out += name != nullptr ? name : "bit" + std::to_string(bit);
  }
  return out.empty() ? "(none)" : out;
}

std::string Limit(uint64_t value, const char *unit) {
  return value == 0 ? "unlimited" : std::to_string(value) + unit;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "Print the ABI version, features and limits of the loaded hzc.ko, and the version "
      "of libhzc.",
      "hzc-info"};
  app.footer(
      "Environment: HZC_DEVICE (default /dev/hzc), HZC_LOG, HZC_LOG_FILE.\n"
      "Exit status: 0, 1 if the device cannot be queried, 2 on a usage error.");
  hzc::tool::AddStandardFlags(app);
  if (auto status = hzc::tool::Parse(app, argc, argv)) {
    return *status;
  }
  hzc_device_info info{};
  const HcclResult rc = hzc_get_device_info(&info);
  if (rc != HCCL_SUCCESS) {
    std::fprintf(stderr, "hzc-info: cannot query %s: %s (%d)\n", hzc_device_path(),
                 HcclGetErrorString(rc), rc);
    return 1;
  }
  std::printf("libhzc version     %s\n", hzc_version());
  std::printf("device             %s\n", hzc_device_path());
  std::printf("abi version        %" PRIu32 "\n", info.abi_version);
  std::printf("page size          %" PRIu32 "\n", info.page_size);
  std::printf("features           %#" PRIx64 " (%s)\n", info.features,
              FeatureList(info.features).c_str());
  std::printf("max pinned bytes   %s\n", Limit(info.max_pinned_bytes, " bytes").c_str());
  std::printf("max ranges         %s\n", Limit(info.max_ranges, " per context").c_str());
  std::printf("max domains        %s\n", Limit(info.max_domains, "").c_str());
  std::printf("max ranks          %" PRIu32 "\n", info.max_ranks);
  std::printf("max blob size      %" PRIu32 " bytes\n", info.max_blob_size);
  return 0;
}
