// SPDX-License-Identifier: Apache-2.0
#include "cli.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <stdexcept>

#include "tool_cli.h"

namespace hzcctl {
namespace {

struct Syntax {
  const char *name;
  What what;
  const char *usage;    // the selectors
  const char *summary;  // for --help
};

constexpr Syntax kCommands[] = {
    {"range", What::kRange, "[show] [pid PID] [id ID]",
     "list registered ranges (of process PID, or the one with id ID)"},
    {"activation", What::kActivation, "[show] [range ID] [pid PID]",
     "list activations (pinned sub-ranges) of one range or process, or all"},
    {"domain", What::kDomain, "[show] [SEQ]", "list domains (or domain SEQ) with their members"},
    {"member", What::kMember, "[show] [domain SEQ]", "list domain members"},
    {"stat", What::kStat, "", "print the global counters"},
    {"monitor", What::kMonitor, "",
     "print events as they happen until interrupted (needs CAP_SYS_ADMIN)"},
};

uint64_t Number(const char *command, const std::string &keyword, const std::string &value) {
  uint64_t v = 0;
  const char *end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end) {
    throw std::invalid_argument(
        fmt::format("{}: {} '{}' is not a non-negative decimal number", command, keyword, value));
  }
  return v;
}

// The slot of @keyword for @what, or nullptr if @what takes no such keyword.
std::optional<uint64_t> *Slot(What what, const std::string &keyword, Command *cmd) {
  switch (what) {
    case What::kRange:
      return keyword == "pid" ? &cmd->pid : keyword == "id" ? &cmd->id : nullptr;
    case What::kActivation:
      return keyword == "pid" ? &cmd->pid : keyword == "range" ? &cmd->range : nullptr;
    case What::kMember:
      return keyword == "domain" ? &cmd->domain : nullptr;
    default:
      return nullptr;
  }
}

const Syntax &SyntaxOf(What what) {
  for (const Syntax &s : kCommands) {
    if (s.what == what) {
      return s;
    }
  }
  return kCommands[0];
}

Style StyleOf(bool json, bool pretty) {
  return pretty ? Style::kPretty : json ? Style::kJson : Style::kText;
}

}  // namespace

void ParseSelectors(What what, const std::vector<std::string> &words, Command *cmd) {
  const Syntax &syntax = SyntaxOf(what);
  size_t i = 0;
  if (i < words.size() && words[i] == "show" && *syntax.usage != '\0') {
    ++i;
  }
  if (what == What::kDomain && i < words.size()) {
    cmd->id = Number(syntax.name, "SEQ", words[i++]);
  }
  for (; i < words.size(); i += 2) {
    std::optional<uint64_t> *slot = Slot(what, words[i], cmd);
    if (slot == nullptr) {
      throw std::invalid_argument(
          *syntax.usage == '\0'
              ? fmt::format("{}: unexpected argument '{}' (it takes none)", syntax.name, words[i])
              : fmt::format("{}: unexpected argument '{}' (expected {})", syntax.name, words[i],
                            syntax.usage));
    }
    if (i + 1 >= words.size()) {
      throw std::invalid_argument(fmt::format("{}: {} needs a value", syntax.name, words[i]));
    }
    if (slot->has_value()) {
      throw std::invalid_argument(fmt::format("{}: {} given twice", syntax.name, words[i]));
    }
    *slot = Number(syntax.name, words[i], words[i + 1]);
  }
}

std::variant<Command, int> ParseCommandLine(int argc, char **argv) {
  CLI::App app{
      "Inspect and watch hzc.ko's ranges, activations and domains (generic netlink "
      "family \"hzc\").",
      "hzcctl"};
  app.footer(
      "Exit status: 0 on success, 1 on an error (one line on stderr), 2 on a usage error.\n"
      "See hzcctl(8).");
  hzc::tool::AddStandardFlags(app);
  bool json = false;
  bool pretty = false;
  app.add_flag("-j,--json", json, "JSON output (monitor: one object per line)");
  app.add_flag("-p,--pretty", pretty, "pretty-printed JSON output (implies -j)");
  app.require_subcommand(1);
  app.fallthrough();
  std::vector<std::string> words;
  std::optional<What> what;
  for (const Syntax &s : kCommands) {
    CLI::App *sub = app.add_subcommand(s.name, s.summary);
    if (*s.usage != '\0') {
      sub->add_option("selectors", words, s.usage);
    }
    sub->callback([&what, &s] { what = s.what; });
  }
  if (auto status = hzc::tool::Parse(app, argc, argv)) {
    return *status;
  }
  Command cmd;
  cmd.what = what.value_or(What::kStat);
  cmd.style = StyleOf(json, pretty);
  try {
    ParseSelectors(cmd.what, words, &cmd);
  } catch (const std::invalid_argument &e) {
    std::fprintf(stderr, "hzcctl: %s (see hzcctl --help)\n", e.what());
    return kExitUsage;
  }
  return cmd;
}

}  // namespace hzcctl
