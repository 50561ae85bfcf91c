// SPDX-License-Identifier: Apache-2.0
#include "commands.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <string>

#include "format.h"
#include "netlink.h"

namespace hzcctl {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnStopSignal(int) {
  g_stop = 1;
}

void Write(std::FILE *out, const std::string &text) {
  if (std::fwrite(text.data(), 1, text.size(), out) != text.size() || std::fflush(out) != 0) {
    throw Failure(fmt::format("cannot write the output: {}", std::strerror(errno)));
  }
}

// What a refused request means for the object it named.
[[noreturn]] void Refused(const NetlinkError &e, const std::string &what) {
  if (e.err() == ENOENT) {
    throw Failure(fmt::format("{}: no such object, or not visible to this user", what));
  }
  if (e.err() == EOPNOTSUPP) {
    throw Failure(
        fmt::format("{}: the loaded hzc.ko does not support this request: {}", what, e.what()));
  }
  throw Failure(fmt::format("{}: {}", what, e.what()));
}

template <typename T, typename Parse>
std::vector<T> Fetch(Netlink &nl, uint8_t cmd, bool dump, const std::vector<RequestAttr> &attrs,
                     const std::string &what, Parse parse) {
  std::vector<T> items;
  try {
    nl.Request(cmd, dump, attrs, [&](const nlmsghdr *msg) { items.push_back(parse(msg)); });
  } catch (const NetlinkError &e) {
    Refused(e, what);
  }
  return items;
}

std::vector<RequestAttr> Filters(std::initializer_list<std::pair<int, std::optional<uint64_t>>> f) {
  std::vector<RequestAttr> attrs;
  for (const auto &[type, value] : f) {
    if (value) {
      attrs.push_back({type, *value, type != HZC_NLA_PID});
    }
  }
  return attrs;
}

std::string ShowRanges(Netlink &nl, const Command &cmd) {
  std::vector<Range> ranges;
  if (cmd.id) {
    ranges = Fetch<Range>(nl, HZC_NL_CMD_RANGE_GET, false, Filters({{HZC_NLA_RANGE_ID, cmd.id}}),
                          fmt::format("range {}", *cmd.id), ParseRange);
    if (cmd.pid && !ranges.empty() && ranges[0].pid != *cmd.pid) {
      ranges.clear();  // both selectors given: the range must match both
    }
  } else {
    ranges = Fetch<Range>(nl, HZC_NL_CMD_RANGE_GET, true, Filters({{HZC_NLA_PID, cmd.pid}}),
                          "range show", ParseRange);
  }
  return FormatList(ranges, cmd.style);
}

std::string ShowActivations(Netlink &nl, const Command &cmd) {
  const auto acts =
      Fetch<Activation>(nl, HZC_NL_CMD_ACTIVATION_GET, true,
                        Filters({{HZC_NLA_RANGE_ID, cmd.range}, {HZC_NLA_PID, cmd.pid}}),
                        "activation show", ParseActivation);
  return FormatList(acts, cmd.style);
}

std::vector<Member> FetchMembers(Netlink &nl, std::optional<uint64_t> seq) {
  return Fetch<Member>(nl, HZC_NL_CMD_MEMBER_GET, true, Filters({{HZC_NLA_DOMAIN_SEQ, seq}}),
                       "member show", ParseMember);
}

std::string ShowDomains(Netlink &nl, const Command &cmd) {
  std::vector<Domain> domains;
  if (cmd.id) {
    domains =
        Fetch<Domain>(nl, HZC_NL_CMD_DOMAIN_GET, false, Filters({{HZC_NLA_DOMAIN_SEQ, cmd.id}}),
                      fmt::format("domain {}", *cmd.id), ParseDomain);
  } else {
    domains = Fetch<Domain>(nl, HZC_NL_CMD_DOMAIN_GET, true, {}, "domain show", ParseDomain);
  }
  AttachMembers(&domains, FetchMembers(nl, cmd.id));
  return FormatList(domains, cmd.style);
}

std::string ShowStat(Netlink &nl, const Command &cmd) {
  const auto stats = Fetch<Stat>(nl, HZC_NL_CMD_STAT_GET, false, {}, "stat", ParseStat);
  if (stats.empty()) {
    throw Failure("stat: the kernel sent no reply");
  }
  return FormatOne(stats[0], cmd.style);
}

// Until SIGINT, SIGTERM or SIGHUP: those are blocked except while waiting, so one that
// arrives while an event is printed ends the loop at the next wait.
int Monitor(Netlink &nl, const Command &cmd, std::FILE *out) {
  nl.JoinEvents();
  sigset_t stop, orig;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    sigaddset(&stop, sig);
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
  sigprocmask(SIG_BLOCK, &stop, &orig);
  EventSeq seqs;
  while (g_stop == 0) {
    pollfd p{nl.fd(), POLLIN, 0};
    if (ppoll(&p, 1, nullptr, &orig) < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Failure(fmt::format("monitor: poll: {}", std::strerror(errno)));
    }
    const bool complete = nl.ReceiveEvents([&](const nlmsghdr *msg) {
      const Event e = ParseEvent(msg);
      if (const uint64_t lost = seqs.Lost(e.seq)) {
        Write(out, FormatLost(lost, cmd.style));
      }
      Write(out, FormatOne(e, cmd.style));
    });
    if (!complete) {
      Write(out, FormatLost(0, cmd.style));
    }
  }
  return kExitOk;
}

int RunOrThrow(const Command &cmd, std::FILE *out) {
  Netlink nl;
  nl.Resolve();
  switch (cmd.what) {
    case What::kRange:
      Write(out, ShowRanges(nl, cmd));
      break;
    case What::kActivation:
      Write(out, ShowActivations(nl, cmd));
      break;
    case What::kDomain:
      Write(out, ShowDomains(nl, cmd));
      break;
    case What::kMember:
      Write(out, FormatList(FetchMembers(nl, cmd.domain), cmd.style));
      break;
    case What::kStat:
      Write(out, ShowStat(nl, cmd));
      break;
    case What::kMonitor:
      return Monitor(nl, cmd, out);
  }
  return kExitOk;
}

}  // namespace

void AttachMembers(std::vector<Domain> *domains, const std::vector<Member> &members) {
  std::map<uint64_t, Domain *> by_seq;
  for (Domain &d : *domains) {
    by_seq[d.seq] = &d;
  }
  for (const Member &m : members) {
    if (auto it = by_seq.find(m.domain); it != by_seq.end()) {
      it->second->members.push_back(m);
    }
  }
}

int Run(const Command &cmd, std::FILE *out) {
  try {
    return RunOrThrow(cmd, out);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "hzcctl: %s\n", e.what());
    return kExitError;
  }
}

}  // namespace hzcctl
