// SPDX-License-Identifier: Apache-2.0
// hzcctl: inspect and watch hzc.ko's ranges, activations and domains over its generic
// netlink family (see hzcctl(8), Documentation/hzcctl.8).
#include <cstdio>
#include <variant>

#include "cli.h"
#include "commands.h"

int main(int argc, char **argv) {
  auto parsed = hzcctl::ParseCommandLine(argc, argv);
  if (const int *status = std::get_if<int>(&parsed)) {
    return *status;
  }
  return hzcctl::Run(std::get<hzcctl::Command>(parsed), stdout);
}
