// SPDX-License-Identifier: Apache-2.0
// hzcctl's object model: what the generic netlink family "hzc" reports (ranges, activations,
// domains, members, the global counters, events), parsed from its messages
// (include/uapi/linux/hzc.h, "Generic netlink family").  Pure: no socket here, so the parsing
// is tested on messages built by hand.
#pragma once

#include <linux/hzc.h>
#include <linux/netlink.h>

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hzcctl {

// A failure the tool reports on one line ("hzcctl: <what>") and exits 1 for.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Range {
  uint64_t id = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  std::optional<uint64_t> base;  // privileged callers only
  uint64_t size = 0;
  uint64_t activated = 0;  // activated_bytes
  uint32_t nr_activations = 0;
  std::string state;  // "registered" or "active"
  std::vector<uint64_t> domains;
};

struct Activation {
  uint64_t range = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::optional<uint64_t> addr;  // privileged callers only
  uint64_t cookie = 0;
};

struct Member {
  uint64_t domain = 0;  // the domain's seq
  uint32_t rank = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
};

struct Domain {
  uint64_t seq = 0;
  std::optional<std::array<uint64_t, 2>> id;  // privileged callers only; [0] low half
  std::string state;                          // "live" or "broken"
  uint32_t nranks = 0;
  uint32_t joined = 0;
  uint32_t creator_uid = 0;
  std::vector<Member> members;  // filled from the member dump, not the domain message
};

struct Stat {
  uint32_t abi_version = 0;
  uint64_t nr_contexts = 0;
  uint64_t nr_ranges = 0;
  uint64_t nr_activations = 0;
  uint64_t nr_domains = 0;
  uint64_t pinned_bytes = 0;
};

// One message of the "events" group: its seq, its command and the object it names.
struct Event {
  uint64_t seq = 0;
  uint8_t cmd = 0;  // HZC_NL_CMD_EVENT_*
  std::optional<Range> range;
  std::optional<Activation> activation;
  std::optional<Member> member;
  std::optional<std::string> domain_state;  // member events
  uint32_t pid = 0;                         // context release
  uint32_t uid = 0;
};

// The event's name in the output ("range_set", "member_broken", ...); nullptr if unknown.
const char *EventName(uint8_t cmd);

// Each parser takes one generic netlink message of the family (header, genlmsghdr,
// attributes), validates its attributes against the family's types and throws Failure
// naming the object and the attribute when one it needs is missing or malformed.
// Attributes it does not know (a newer module) are ignored.
Range ParseRange(const nlmsghdr *msg);
Activation ParseActivation(const nlmsghdr *msg);
Domain ParseDomain(const nlmsghdr *msg);
Member ParseMember(const nlmsghdr *msg);
Stat ParseStat(const nlmsghdr *msg);
// A message of an unknown command gives an Event whose EventName() is nullptr.
Event ParseEvent(const nlmsghdr *msg);

// The command of a generic netlink message (its genlmsghdr), or -1 if too short.
int GenlCommand(const nlmsghdr *msg);

// Tracks the seq of the events a listener sees: how many it lost before this one.
class EventSeq {
 public:
  // Events lost between the previous one and this one (0 for the first event seen).
  uint64_t Lost(uint64_t seq);

 private:
  std::optional<uint64_t> last_;
};

}  // namespace hzcctl
