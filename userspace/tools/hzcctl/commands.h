// SPDX-License-Identifier: Apache-2.0
// hzcctl's commands: each asks the kernel (Netlink), builds the objects and prints them.
#pragma once

#include <cstdio>
#include <vector>

#include "cli.h"
#include "objects.h"

namespace hzcctl {

class Netlink;

// Runs @cmd, printing to @out: the exit status.  A failure is one line on stderr,
// "hzcctl: <what failed>: <why>", and status 1.
int Run(const Command &cmd, std::FILE *out);

// Attaches each member to its domain (by seq); members of domains not in @domains are
// dropped.
void AttachMembers(std::vector<Domain> *domains, const std::vector<Member> &members);

}  // namespace hzcctl
