// SPDX-License-Identifier: Apache-2.0
#include "format.h"

#include <fmt/format.h>

namespace hzcctl {
namespace {

using json = Json;

std::string Hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

// The domain id as sysfs' `id` file shows it: 32 hex digits, high half first.
std::string DomainIdHex(const std::array<uint64_t, 2> &id) {
  return fmt::format("{:016x}{:016x}", id[1], id[0]);
}

std::string Join(const std::vector<uint64_t> &values) {
  return fmt::format("{}", fmt::join(values, ","));
}

void AddRange(json &j, const Range &r) {
  j["range"] = r.id;
  j["pid"] = r.pid;
  j["uid"] = r.uid;
  j["size"] = r.size;
  j["activated"] = r.activated;
  j["nr_activations"] = r.nr_activations;
  j["state"] = r.state;
  j["domains"] = r.domains;
  if (r.base) {
    j["base"] = Hex(*r.base);
  }
}

void AddActivation(json &j, const Activation &a) {
  j["range"] = a.range;
  j["offset"] = a.offset;
  j["size"] = a.size;
  j["pid"] = a.pid;
  j["uid"] = a.uid;
  j["cookie"] = Hex(a.cookie);
  if (a.addr) {
    j["addr"] = Hex(*a.addr);
  }
}

void AddMember(json &j, const Member &m) {
  j["domain"] = m.domain;
  j["rank"] = m.rank;
  j["pid"] = m.pid;
  j["uid"] = m.uid;
}

}  // namespace

json ToJson(const Range &r) {
  json j = json::object();
  AddRange(j, r);
  return j;
}

json ToJson(const Activation &a) {
  json j = json::object();
  AddActivation(j, a);
  return j;
}

json ToJson(const Member &m) {
  json j = json::object();
  AddMember(j, m);
  return j;
}

json ToJson(const Domain &d) {
  json j = json::object();
  j["domain"] = d.seq;
  j["state"] = d.state;
  j["nranks"] = d.nranks;
  j["joined"] = d.joined;
  j["creator_uid"] = d.creator_uid;
  if (d.id) {
    j["id"] = DomainIdHex(*d.id);
  }
  json members = json::array();
  for (const Member &m : d.members) {
    members.push_back({{"rank", m.rank}, {"pid", m.pid}, {"uid", m.uid}});
  }
  j["members"] = std::move(members);
  return j;
}

json ToJson(const Stat &s) {
  return {{"abi_version", s.abi_version}, {"nr_contexts", s.nr_contexts},
          {"nr_ranges", s.nr_ranges},     {"nr_activations", s.nr_activations},
          {"nr_domains", s.nr_domains},   {"pinned_bytes", s.pinned_bytes}};
}

json ToJson(const Event &e) {
  json j = json::object();
  j["seq"] = e.seq;
  const char *name = EventName(e.cmd);
  j["event"] = name != nullptr ? std::string(name) : fmt::format("unknown_{}", e.cmd);
  if (e.range) {
    AddRange(j, *e.range);
  } else if (e.activation) {
    AddActivation(j, *e.activation);
  } else if (e.member) {
    AddMember(j, *e.member);
    if (e.domain_state) {
      j["state"] = *e.domain_state;
    }
  } else if (e.cmd == HZC_NL_CMD_EVENT_CONTEXT_RELEASE) {
    j["pid"] = e.pid;
    j["uid"] = e.uid;
  }
  return j;
}

std::string ToText(const Range &r) {
  std::string out =
      fmt::format("range {} pid {} uid {} size {} activated {} nr_activations {} state {}", r.id,
                  r.pid, r.uid, r.size, r.activated, r.nr_activations, r.state);
  if (!r.domains.empty()) {
    out += " domains " + Join(r.domains);
  }
  if (r.base) {
    out += " base " + Hex(*r.base);
  }
  return out;
}

std::string ToText(const Activation &a) {
  std::string out = fmt::format("range {} offset {} size {} pid {} uid {} cookie {}", a.range,
                                a.offset, a.size, a.pid, a.uid, Hex(a.cookie));
  if (a.addr) {
    out += " addr " + Hex(*a.addr);
  }
  return out;
}

std::string ToText(const Member &m) {
  return fmt::format("domain {} rank {} pid {} uid {}", m.domain, m.rank, m.pid, m.uid);
}

std::string ToText(const Domain &d) {
  std::string out = fmt::format("domain {} state {} nranks {} joined {} creator_uid {}", d.seq,
                                d.state, d.nranks, d.joined, d.creator_uid);
  if (d.id) {
    out += " id " + DomainIdHex(*d.id);
  }
  for (const Member &m : d.members) {
    out += fmt::format("\n    rank {} pid {} uid {}", m.rank, m.pid, m.uid);
  }
  return out;
}

std::string ToText(const Stat &s) {
  return fmt::format(
      "abi_version {} nr_contexts {} nr_ranges {} nr_activations {} nr_domains {} "
      "pinned_bytes {}",
      s.abi_version, s.nr_contexts, s.nr_ranges, s.nr_activations, s.nr_domains, s.pinned_bytes);
}

std::string ToText(const Event &e) {
  const char *name = EventName(e.cmd);
  std::string out =
      fmt::format("seq {} event {}", e.seq,
                  name != nullptr ? std::string(name) : fmt::format("unknown_{}", e.cmd));
  if (e.range) {
    out += ' ' + ToText(*e.range);
  } else if (e.activation) {
    out += ' ' + ToText(*e.activation);
  } else if (e.member) {
    out += ' ' + ToText(*e.member);
    if (e.domain_state) {
      out += " state " + *e.domain_state;
    }
  } else if (e.cmd == HZC_NL_CMD_EVENT_CONTEXT_RELEASE) {
    out += fmt::format(" pid {} uid {}", e.pid, e.uid);
  }
  return out;
}

std::string FormatLost(uint64_t count, Style style) {
  if (style == Style::kText) {
    return count > 0 ? fmt::format("lost {} events\n", count)
                     : "lost events: the socket's receive buffer overflowed (ENOBUFS)\n";
  }
  json j = {{"event", "lost"}};
  if (count > 0) {
    j["lost"] = count;
  } else {
    j["reason"] = "ENOBUFS";
  }
  return j.dump(style == Style::kPretty ? 2 : -1) + '\n';
}

}  // namespace hzcctl
