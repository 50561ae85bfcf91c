// SPDX-License-Identifier: Apache-2.0
// Fuzzer: hzcctl's parsers of the module's generic netlink messages (userspace/tools/hzcctl/
// objects.h). The first byte picks the parser; the rest is the message after its netlink header
// (genlmsghdr, attributes), whose length the header states as the kernel does. A parser may
// refuse a message (Failure); anything else is a finding.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "objects.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 65536) {
    return 0;
  }
  std::vector<uint8_t> buf(NLMSG_HDRLEN + size - 1);
  auto *nlh = reinterpret_cast<nlmsghdr *>(buf.data());
  nlh->nlmsg_len = static_cast<uint32_t>(buf.size());
  std::memcpy(buf.data() + NLMSG_HDRLEN, data + 1, size - 1);
  try {
    switch (data[0] % 6) {
      case 0:
        (void)hzcctl::ParseRange(nlh);
        break;
      case 1:
        (void)hzcctl::ParseActivation(nlh);
        break;
      case 2:
        (void)hzcctl::ParseDomain(nlh);
        break;
      case 3:
        (void)hzcctl::ParseMember(nlh);
        break;
      case 4:
        (void)hzcctl::ParseStat(nlh);
        break;
      default:
        (void)hzcctl::ParseEvent(nlh);
        break;
    }
  } catch (const hzcctl::Failure &) {
  }
  return 0;
}
