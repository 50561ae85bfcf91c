// SPDX-License-Identifier: Apache-2.0
#include "objects.h"

#include <fmt/format.h>
#include <linux/genetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cstring>

namespace hzcctl {
namespace {

enum class Kind { kNone, kU32, kU64, kString, kNested, kDomainId };

struct AttrInfo {
  const char *name;
  Kind kind;
};

// Every attribute of the family: its name (for messages) and its type.
constexpr std::array<AttrInfo, HZC_NLA_MAX + 1> kAttrs = [] {
  std::array<AttrInfo, HZC_NLA_MAX + 1> a{};
  a.fill({"HZC_NLA_UNSPEC", Kind::kNone});
  a[HZC_NLA_PAD] = {"HZC_NLA_PAD", Kind::kNone};
  a[HZC_NLA_ABI_VERSION] = {"HZC_NLA_ABI_VERSION", Kind::kU32};
  a[HZC_NLA_STAT_NR_CONTEXTS] = {"HZC_NLA_STAT_NR_CONTEXTS", Kind::kU64};
  a[HZC_NLA_STAT_NR_RANGES] = {"HZC_NLA_STAT_NR_RANGES", Kind::kU64};
  a[HZC_NLA_STAT_NR_ACTIVATIONS] = {"HZC_NLA_STAT_NR_ACTIVATIONS", Kind::kU64};
  a[HZC_NLA_STAT_NR_DOMAINS] = {"HZC_NLA_STAT_NR_DOMAINS", Kind::kU64};
  a[HZC_NLA_STAT_PINNED_BYTES] = {"HZC_NLA_STAT_PINNED_BYTES", Kind::kU64};
  a[HZC_NLA_PID] = {"HZC_NLA_PID", Kind::kU32};
  a[HZC_NLA_UID] = {"HZC_NLA_UID", Kind::kU32};
  a[HZC_NLA_RANGE_ID] = {"HZC_NLA_RANGE_ID", Kind::kU64};
  a[HZC_NLA_RANGE_BASE] = {"HZC_NLA_RANGE_BASE", Kind::kU64};
  a[HZC_NLA_RANGE_SIZE] = {"HZC_NLA_RANGE_SIZE", Kind::kU64};
  a[HZC_NLA_RANGE_ACTIVATED_BYTES] = {"HZC_NLA_RANGE_ACTIVATED_BYTES", Kind::kU64};
  a[HZC_NLA_RANGE_NR_ACTIVATIONS] = {"HZC_NLA_RANGE_NR_ACTIVATIONS", Kind::kU32};
  a[HZC_NLA_RANGE_STATE] = {"HZC_NLA_RANGE_STATE", Kind::kString};
  a[HZC_NLA_RANGE_DOMAINS] = {"HZC_NLA_RANGE_DOMAINS", Kind::kNested};
  a[HZC_NLA_ACT_OFFSET] = {"HZC_NLA_ACT_OFFSET", Kind::kU64};
  a[HZC_NLA_ACT_SIZE] = {"HZC_NLA_ACT_SIZE", Kind::kU64};
  a[HZC_NLA_ACT_ADDR] = {"HZC_NLA_ACT_ADDR", Kind::kU64};
  a[HZC_NLA_ACT_COOKIE] = {"HZC_NLA_ACT_COOKIE", Kind::kU64};
  a[HZC_NLA_DOMAIN_SEQ] = {"HZC_NLA_DOMAIN_SEQ", Kind::kU64};
  a[HZC_NLA_DOMAIN_ID] = {"HZC_NLA_DOMAIN_ID", Kind::kDomainId};
  a[HZC_NLA_DOMAIN_STATE] = {"HZC_NLA_DOMAIN_STATE", Kind::kString};
  a[HZC_NLA_DOMAIN_NRANKS] = {"HZC_NLA_DOMAIN_NRANKS", Kind::kU32};
  a[HZC_NLA_DOMAIN_JOINED] = {"HZC_NLA_DOMAIN_JOINED", Kind::kU32};
  a[HZC_NLA_DOMAIN_CREATOR_UID] = {"HZC_NLA_DOMAIN_CREATOR_UID", Kind::kU32};
  a[HZC_NLA_MEMBER_RANK] = {"HZC_NLA_MEMBER_RANK", Kind::kU32};
  a[HZC_NLA_EVENT_SEQ] = {"HZC_NLA_EVENT_SEQ", Kind::kU64};
  return a;
}();

bool LengthFits(Kind kind, const nlattr *nla) {
  const int len = nla_len(nla);
  switch (kind) {
    case Kind::kU32:
      return len == 4;
    case Kind::kU64:
      return len == 8;
    case Kind::kString:
      return len > 0 && static_cast<const char *>(nla_data(nla))[len - 1] == '\0';
    case Kind::kDomainId:
      return len == 16;
    case Kind::kNested:
    case Kind::kNone:
      return true;
  }
  return false;
}

// The attributes of one message, each checked against its type.
class Attrs {
 public:
  Attrs(const nlmsghdr *msg, const char *object) : object_(object) {
    auto *hdr = const_cast<nlmsghdr *>(msg);
    if (msg->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) {
      throw Failure(
          fmt::format("malformed {} message from the kernel: {} bytes", object_, msg->nlmsg_len));
    }
    nlattr *head = nlmsg_attrdata(hdr, GENL_HDRLEN);
    const int len = nlmsg_attrlen(hdr, GENL_HDRLEN);
    nlattr *nla = nullptr;
    int rem = 0;
    nla_for_each_attr(nla, head, len, rem) {
      const int type = nla_type(nla);
      if (type <= 0 || type > HZC_NLA_MAX) {
        continue;  // a newer module's attribute
      }
      if (!LengthFits(kAttrs[type].kind, nla)) {
        throw Failure(fmt::format("malformed {} message from the kernel: {} has {} bytes", object_,
                                  kAttrs[type].name, nla_len(nla)));
      }
      tb_[type] = nla;
    }
  }

  const nlattr *Get(int type) const { return tb_[type]; }
  const nlattr *Need(int type) const {
    if (tb_[type] == nullptr) {
      throw Failure(
          fmt::format("malformed {} message from the kernel: no {}", object_, kAttrs[type].name));
    }
    return tb_[type];
  }
  uint32_t U32(int type) const { return nla_get_u32(const_cast<nlattr *>(Need(type))); }
  uint64_t U64(int type) const { return nla_get_u64(const_cast<nlattr *>(Need(type))); }
  std::optional<uint64_t> OptionalU64(int type) const {
    if (tb_[type] == nullptr) {
      return std::nullopt;
    }
    return nla_get_u64(const_cast<nlattr *>(tb_[type]));
  }
  std::string String(int type) const {
    return static_cast<const char *>(nla_data(const_cast<nlattr *>(Need(type))));
  }
  const char *object() const { return object_; }

 private:
  const char *object_;
  std::array<const nlattr *, HZC_NLA_MAX + 1> tb_{};
};

std::vector<uint64_t> DomainList(const Attrs &a) {
  std::vector<uint64_t> seqs;
  const nlattr *nest = a.Get(HZC_NLA_RANGE_DOMAINS);
  if (nest == nullptr) {
    return seqs;
  }
  nlattr *nla = nullptr;
  int rem = 0;
  nla_for_each_nested(nla, const_cast<nlattr *>(nest), rem) {
    if (nla_type(nla) != HZC_NLA_DOMAIN_SEQ || nla_len(nla) != 8) {
      throw Failure(fmt::format(
          "malformed {} message from the kernel: HZC_NLA_RANGE_DOMAINS holds attribute {} "
          "of {} bytes",
          a.object(), nla_type(nla), nla_len(nla)));
    }
    seqs.push_back(nla_get_u64(nla));
  }
  return seqs;
}

Range RangeOf(const Attrs &a) {
  Range r;
  r.id = a.U64(HZC_NLA_RANGE_ID);
  r.pid = a.U32(HZC_NLA_PID);
  r.uid = a.U32(HZC_NLA_UID);
  r.base = a.OptionalU64(HZC_NLA_RANGE_BASE);
  r.size = a.U64(HZC_NLA_RANGE_SIZE);
  r.activated = a.U64(HZC_NLA_RANGE_ACTIVATED_BYTES);
  r.nr_activations = a.U32(HZC_NLA_RANGE_NR_ACTIVATIONS);
  r.state = a.String(HZC_NLA_RANGE_STATE);
  r.domains = DomainList(a);
  return r;
}

Activation ActivationOf(const Attrs &a) {
  Activation act;
  act.range = a.U64(HZC_NLA_RANGE_ID);
  act.pid = a.U32(HZC_NLA_PID);
  act.uid = a.U32(HZC_NLA_UID);
  act.offset = a.U64(HZC_NLA_ACT_OFFSET);
  act.size = a.U64(HZC_NLA_ACT_SIZE);
  act.addr = a.OptionalU64(HZC_NLA_ACT_ADDR);
  act.cookie = a.U64(HZC_NLA_ACT_COOKIE);
  return act;
}

Member MemberOf(const Attrs &a) {
  Member m;
  m.domain = a.U64(HZC_NLA_DOMAIN_SEQ);
  m.rank = a.U32(HZC_NLA_MEMBER_RANK);
  m.pid = a.U32(HZC_NLA_PID);
  m.uid = a.U32(HZC_NLA_UID);
  return m;
}

}  // namespace

const char *EventName(uint8_t cmd) {
  switch (cmd) {
    case HZC_NL_CMD_EVENT_RANGE_SET:
      return "range_set";
    case HZC_NL_CMD_EVENT_RANGE_UNSET:
      return "range_unset";
    case HZC_NL_CMD_EVENT_ACTIVATE:
      return "activate";
    case HZC_NL_CMD_EVENT_DEACTIVATE:
      return "deactivate";
    case HZC_NL_CMD_EVENT_MEMBER_JOIN:
      return "member_join";
    case HZC_NL_CMD_EVENT_MEMBER_LEAVE:
      return "member_leave";
    case HZC_NL_CMD_EVENT_MEMBER_BROKEN:
      return "member_broken";
    case HZC_NL_CMD_EVENT_CONTEXT_RELEASE:
      return "context_release";
    default:
      return nullptr;
  }
}

int GenlCommand(const nlmsghdr *msg) {
  if (msg->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) {
    return -1;
  }
  return static_cast<const genlmsghdr *>(NLMSG_DATA(msg))->cmd;
}

Range ParseRange(const nlmsghdr *msg) {
  return RangeOf(Attrs(msg, "range"));
}

Activation ParseActivation(const nlmsghdr *msg) {
  return ActivationOf(Attrs(msg, "activation"));
}

Member ParseMember(const nlmsghdr *msg) {
  return MemberOf(Attrs(msg, "member"));
}

Domain ParseDomain(const nlmsghdr *msg) {
  const Attrs a(msg, "domain");
  Domain d;
  d.seq = a.U64(HZC_NLA_DOMAIN_SEQ);
  if (const nlattr *id = a.Get(HZC_NLA_DOMAIN_ID)) {
    std::array<uint64_t, 2> words{};
    std::memcpy(words.data(), nla_data(const_cast<nlattr *>(id)), sizeof(words));
    d.id = words;
  }
  d.state = a.String(HZC_NLA_DOMAIN_STATE);
  d.nranks = a.U32(HZC_NLA_DOMAIN_NRANKS);
  d.joined = a.U32(HZC_NLA_DOMAIN_JOINED);
  d.creator_uid = a.U32(HZC_NLA_DOMAIN_CREATOR_UID);
  return d;
}

Stat ParseStat(const nlmsghdr *msg) {
  const Attrs a(msg, "stat");
  Stat s;
  s.abi_version = a.U32(HZC_NLA_ABI_VERSION);
  s.nr_contexts = a.U64(HZC_NLA_STAT_NR_CONTEXTS);
  s.nr_ranges = a.U64(HZC_NLA_STAT_NR_RANGES);
  s.nr_activations = a.U64(HZC_NLA_STAT_NR_ACTIVATIONS);
  s.nr_domains = a.U64(HZC_NLA_STAT_NR_DOMAINS);
  s.pinned_bytes = a.U64(HZC_NLA_STAT_PINNED_BYTES);
  return s;
}

Event ParseEvent(const nlmsghdr *msg) {
  Event e;
  const int cmd = GenlCommand(msg);
  e.cmd = static_cast<uint8_t>(cmd < 0 ? 0 : cmd);
  const char *name = EventName(e.cmd);
  const Attrs a(msg, name != nullptr ? name : "event");
  e.seq = a.U64(HZC_NLA_EVENT_SEQ);
  switch (e.cmd) {
    case HZC_NL_CMD_EVENT_RANGE_SET:
    case HZC_NL_CMD_EVENT_RANGE_UNSET:
      e.range = RangeOf(a);
      break;
    case HZC_NL_CMD_EVENT_ACTIVATE:
    case HZC_NL_CMD_EVENT_DEACTIVATE:
      e.activation = ActivationOf(a);
      break;
    case HZC_NL_CMD_EVENT_MEMBER_JOIN:
    case HZC_NL_CMD_EVENT_MEMBER_LEAVE:
    case HZC_NL_CMD_EVENT_MEMBER_BROKEN:
      e.member = MemberOf(a);
      if (a.Get(HZC_NLA_DOMAIN_STATE) != nullptr) {
        e.domain_state = a.String(HZC_NLA_DOMAIN_STATE);
      }
      break;
    case HZC_NL_CMD_EVENT_CONTEXT_RELEASE:
      e.pid = a.U32(HZC_NLA_PID);
      e.uid = a.U32(HZC_NLA_UID);
      break;
    default:
      break;
  }
  return e;
}

uint64_t EventSeq::Lost(uint64_t seq) {
  const uint64_t lost = last_ && seq > *last_ + 1 ? seq - *last_ - 1 : 0;
  last_ = seq;
  return lost;
}

}  // namespace hzcctl
