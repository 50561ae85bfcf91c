// SPDX-License-Identifier: Apache-2.0
// hzcctl's command line (CLI11; the conventions of the hzc tools, ../common/tool_cli.h):
//   hzcctl [-j] [-p] range [show] [pid PID] [id ID]
//   hzcctl [-j] [-p] activation [show] [range ID] [pid PID]
//   hzcctl [-j] [-p] domain [show] [SEQ]
//   hzcctl [-j] [-p] member [show] [domain SEQ]
//   hzcctl [-j] [-p] stat
//   hzcctl [-j] [-p] monitor
// Objects are selected iproute2-style, by keyword and value; -j and -p may also follow the
// command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "format.h"

namespace hzcctl {

enum class What { kRange, kActivation, kDomain, kMember, kStat, kMonitor };

struct Command {
  What what = What::kStat;
  Style style = Style::kText;
  std::optional<uint64_t> pid;     // range, activation
  std::optional<uint64_t> id;      // range: its id; domain: its seq
  std::optional<uint64_t> range;   // activation
  std::optional<uint64_t> domain;  // member
};

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// The command of @argv, or the exit status after --help, --version (0) or a usage error (2:
// one line on stderr naming the problem).
std::variant<Command, int> ParseCommandLine(int argc, char **argv);

// The iproute2-style selectors of one command ("show", then keyword-value pairs), checked:
// throws std::invalid_argument with the message for a usage error.
void ParseSelectors(What what, const std::vector<std::string> &words, Command *cmd);

}  // namespace hzcctl
