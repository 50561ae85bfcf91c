// SPDX-License-Identifier: Apache-2.0
// hzcctl's object model and reply handling on messages built by hand with libnl: every
// attribute lands in its field, a missing or malformed attribute is refused by name, unknown
// attributes are ignored; replies, errors (with extended ACKs) and the controller's answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/genetlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "netlink.h"
#include "objects.h"

namespace hzcctl {
namespace {

using ::testing::HasSubstr;

constexpr uint16_t kFamily = 0x1c;

// One generic netlink message of the family, built attribute by attribute.
class Msg {
 public:
  explicit Msg(uint8_t cmd, uint16_t type = kFamily, uint32_t seq = 0, int flags = 0) {
    msg_ = nlmsg_alloc();
    genlmsg_put(msg_, 0, seq, type, 0, flags, cmd, HZC_GENL_VERSION);
  }
  ~Msg() { nlmsg_free(msg_); }
  Msg(const Msg &) = delete;
  Msg &operator=(const Msg &) = delete;
  Msg &U32(int type, uint32_t v) {
    EXPECT_EQ(nla_put_u32(msg_, type, v), 0);
    return *this;
  }
  Msg &U64(int type, uint64_t v) {
    EXPECT_EQ(nla_put_u64(msg_, type, v), 0);
    return *this;
  }
  Msg &Str(int type, const char *s) {
    EXPECT_EQ(nla_put_string(msg_, type, s), 0);
    return *this;
  }
  Msg &Raw(int type, const void *data, int len) {
    EXPECT_EQ(nla_put(msg_, type, len, data), 0);
    return *this;
  }
  nl_msg *msg() { return msg_; }
  const nlmsghdr *hdr() { return nlmsg_hdr(msg_); }
  std::vector<char> Bytes() {
    const char *p = reinterpret_cast<const char *>(hdr());
    return std::vector<char>(p, p + NLMSG_ALIGN(hdr()->nlmsg_len));
  }

 private:
  nl_msg *msg_;
};

Msg &FullRange(Msg &m, uint64_t id, bool privileged) {
  m.U64(HZC_NLA_RANGE_ID, id)
      .U32(HZC_NLA_PID, 345)
      .U32(HZC_NLA_UID, 1000)
      .U64(HZC_NLA_RANGE_SIZE, 2097152)
      .U64(HZC_NLA_RANGE_ACTIVATED_BYTES, 1048576)
      .U32(HZC_NLA_RANGE_NR_ACTIVATIONS, 1)
      .Str(HZC_NLA_RANGE_STATE, "active");
  if (privileged) {
    m.U64(HZC_NLA_RANGE_BASE, 0x7f0000200000ULL);
  }
  return m;
}

TEST(HzcctlObjects, RangeWithEveryAttribute) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  FullRange(m, 12, true);
  nlattr *nest = nla_nest_start(m.msg(), HZC_NLA_RANGE_DOMAINS);
  nla_put_u64(m.msg(), HZC_NLA_DOMAIN_SEQ, 3);
  nla_put_u64(m.msg(), HZC_NLA_DOMAIN_SEQ, 5);
  nla_nest_end(m.msg(), nest);
  const Range r = ParseRange(m.hdr());
  EXPECT_EQ(r.id, 12u);
  EXPECT_EQ(r.pid, 345u);
  EXPECT_EQ(r.uid, 1000u);
  ASSERT_TRUE(r.base.has_value());
  EXPECT_EQ(*r.base, 0x7f0000200000ULL);
  EXPECT_EQ(r.size, 2097152u);
  EXPECT_EQ(r.activated, 1048576u);
  EXPECT_EQ(r.nr_activations, 1u);
  EXPECT_EQ(r.state, "active");
  EXPECT_EQ(r.domains, (std::vector<uint64_t>{3, 5}));
}

TEST(HzcctlObjects, RangeOfAnUnprivilegedCallerHasNoBase) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  FullRange(m, 7, false);
  const Range r = ParseRange(m.hdr());
  EXPECT_EQ(r.id, 7u);
  EXPECT_FALSE(r.base.has_value());
  EXPECT_TRUE(r.domains.empty());
}

TEST(HzcctlObjects, MissingAttributeIsNamed) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  m.U64(HZC_NLA_RANGE_ID, 1).U32(HZC_NLA_PID, 2).U32(HZC_NLA_UID, 3);
  try {
    ParseRange(m.hdr());
    FAIL() << "a range without HZC_NLA_RANGE_SIZE was accepted";
  } catch (const Failure &e) {
    EXPECT_THAT(e.what(), HasSubstr("range"));
    EXPECT_THAT(e.what(), HasSubstr("no HZC_NLA_RANGE_SIZE"));
  }
}

TEST(HzcctlObjects, WrongLengthIsNamed) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  m.U32(HZC_NLA_RANGE_ID, 1);  // a u64 attribute sent as 4 bytes
  try {
    ParseRange(m.hdr());
    FAIL() << "a 4-byte HZC_NLA_RANGE_ID was accepted";
  } catch (const Failure &e) {
    EXPECT_THAT(e.what(), HasSubstr("HZC_NLA_RANGE_ID has 4 bytes"));
  }
}

TEST(HzcctlObjects, UnterminatedStringIsRefused) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  m.U64(HZC_NLA_RANGE_ID, 1).Raw(HZC_NLA_RANGE_STATE, "active", 6);
  EXPECT_THROW(ParseRange(m.hdr()), Failure);
}

TEST(HzcctlObjects, UnknownAttributesAreIgnored) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  FullRange(m, 9, false);
  m.U64(HZC_NLA_MAX + 1, 42).U32(HZC_NLA_MAX + 20, 1);
  EXPECT_EQ(ParseRange(m.hdr()).id, 9u);
}

TEST(HzcctlObjects, DomainListWithAStrangerIsRefused) {
  Msg m(HZC_NL_CMD_RANGE_GET);
  FullRange(m, 1, false);
  nlattr *nest = nla_nest_start(m.msg(), HZC_NLA_RANGE_DOMAINS);
  nla_put_u32(m.msg(), HZC_NLA_PID, 3);
  nla_nest_end(m.msg(), nest);
  EXPECT_THROW(ParseRange(m.hdr()), Failure);
}

TEST(HzcctlObjects, TruncatedMessageIsRefused) {
  nlmsghdr h{};
  h.nlmsg_len = NLMSG_HDRLEN;  // no genlmsghdr
  h.nlmsg_type = kFamily;
  EXPECT_THROW(ParseRange(&h), Failure);
  EXPECT_EQ(GenlCommand(&h), -1);
}

TEST(HzcctlObjects, Activation) {
  Msg m(HZC_NL_CMD_ACTIVATION_GET);
  m.U64(HZC_NLA_RANGE_ID, 4)
      .U32(HZC_NLA_PID, 10)
      .U32(HZC_NLA_UID, 0)
      .U64(HZC_NLA_ACT_OFFSET, 8192)
      .U64(HZC_NLA_ACT_SIZE, 4096)
      .U64(HZC_NLA_ACT_ADDR, 0x1000 + 8192)
      .U64(HZC_NLA_ACT_COOKIE, 0xabcdef);
  const Activation a = ParseActivation(m.hdr());
  EXPECT_EQ(a.range, 4u);
  EXPECT_EQ(a.pid, 10u);
  EXPECT_EQ(a.offset, 8192u);
  EXPECT_EQ(a.size, 4096u);
  ASSERT_TRUE(a.addr.has_value());
  EXPECT_EQ(*a.addr, 0x1000u + 8192u);
  EXPECT_EQ(a.cookie, 0xabcdefu);
}

TEST(HzcctlObjects, DomainAndMember) {
  const uint64_t id[2] = {0x1122334455667788ULL, 0x99aabbccddeeff00ULL};
  Msg m(HZC_NL_CMD_DOMAIN_GET);
  m.U64(HZC_NLA_DOMAIN_SEQ, 3)
      .Raw(HZC_NLA_DOMAIN_ID, id, sizeof(id))
      .Str(HZC_NLA_DOMAIN_STATE, "broken")
      .U32(HZC_NLA_DOMAIN_NRANKS, 4)
      .U32(HZC_NLA_DOMAIN_JOINED, 3)
      .U32(HZC_NLA_DOMAIN_CREATOR_UID, 1000);
  const Domain d = ParseDomain(m.hdr());
  EXPECT_EQ(d.seq, 3u);
  ASSERT_TRUE(d.id.has_value());
  EXPECT_EQ((*d.id)[0], id[0]);
  EXPECT_EQ((*d.id)[1], id[1]);
  EXPECT_EQ(d.state, "broken");
  EXPECT_EQ(d.nranks, 4u);
  EXPECT_EQ(d.joined, 3u);
  EXPECT_EQ(d.creator_uid, 1000u);

  Msg short_id(HZC_NL_CMD_DOMAIN_GET);
  short_id.U64(HZC_NLA_DOMAIN_SEQ, 3).Raw(HZC_NLA_DOMAIN_ID, id, 8);
  EXPECT_THROW(ParseDomain(short_id.hdr()), Failure);

  Msg mm(HZC_NL_CMD_MEMBER_GET);
  mm.U64(HZC_NLA_DOMAIN_SEQ, 3)
      .U32(HZC_NLA_MEMBER_RANK, 2)
      .U32(HZC_NLA_PID, 77)
      .U32(HZC_NLA_UID, 65534);
  const Member mem = ParseMember(mm.hdr());
  EXPECT_EQ(mem.domain, 3u);
  EXPECT_EQ(mem.rank, 2u);
  EXPECT_EQ(mem.pid, 77u);
  EXPECT_EQ(mem.uid, 65534u);
}

TEST(HzcctlObjects, Stat) {
  Msg m(HZC_NL_CMD_STAT_GET);
  m.U32(HZC_NLA_ABI_VERSION, 2)
      .U64(HZC_NLA_STAT_NR_CONTEXTS, 5)
      .U64(HZC_NLA_STAT_NR_RANGES, 6)
      .U64(HZC_NLA_STAT_NR_ACTIVATIONS, 7)
      .U64(HZC_NLA_STAT_NR_DOMAINS, 8)
      .U64(HZC_NLA_STAT_PINNED_BYTES, 9);
  const Stat s = ParseStat(m.hdr());
  EXPECT_EQ(s.abi_version, 2u);
  EXPECT_EQ(s.nr_contexts, 5u);
  EXPECT_EQ(s.nr_ranges, 6u);
  EXPECT_EQ(s.nr_activations, 7u);
  EXPECT_EQ(s.nr_domains, 8u);
  EXPECT_EQ(s.pinned_bytes, 9u);
}

TEST(HzcctlObjects, Events) {
  Msg set(HZC_NL_CMD_EVENT_RANGE_SET);
  FullRange(set, 5, true).U64(HZC_NLA_EVENT_SEQ, 41);
  const Event e = ParseEvent(set.hdr());
  EXPECT_EQ(e.seq, 41u);
  EXPECT_STREQ(EventName(e.cmd), "range_set");
  ASSERT_TRUE(e.range.has_value());
  EXPECT_EQ(e.range->id, 5u);

  Msg broken(HZC_NL_CMD_EVENT_MEMBER_BROKEN);
  broken.U64(HZC_NLA_EVENT_SEQ, 42)
      .U64(HZC_NLA_DOMAIN_SEQ, 2)
      .U32(HZC_NLA_MEMBER_RANK, 1)
      .U32(HZC_NLA_PID, 99)
      .U32(HZC_NLA_UID, 0)
      .Str(HZC_NLA_DOMAIN_STATE, "broken");
  const Event b = ParseEvent(broken.hdr());
  ASSERT_TRUE(b.member.has_value());
  EXPECT_EQ(b.member->rank, 1u);
  EXPECT_EQ(b.domain_state, "broken");

  Msg release(HZC_NL_CMD_EVENT_CONTEXT_RELEASE);
  release.U64(HZC_NLA_EVENT_SEQ, 43).U32(HZC_NLA_PID, 99).U32(HZC_NLA_UID, 1);
  const Event r = ParseEvent(release.hdr());
  EXPECT_STREQ(EventName(r.cmd), "context_release");
  EXPECT_EQ(r.pid, 99u);
  EXPECT_EQ(r.uid, 1u);

  Msg unknown(HZC_NL_CMD_MAX + 1);
  unknown.U64(HZC_NLA_EVENT_SEQ, 44);
  EXPECT_EQ(EventName(ParseEvent(unknown.hdr()).cmd), nullptr);

  Msg no_seq(HZC_NL_CMD_EVENT_CONTEXT_RELEASE);
  no_seq.U32(HZC_NLA_PID, 99).U32(HZC_NLA_UID, 1);
  EXPECT_THROW(ParseEvent(no_seq.hdr()), Failure);
  for (int cmd = HZC_NL_CMD_UNSPEC; cmd <= HZC_NL_CMD_MAX; ++cmd) {
    EXPECT_EQ(EventName(static_cast<uint8_t>(cmd)) != nullptr, cmd >= HZC_NL_CMD_EVENT_RANGE_SET)
        << "command " << cmd;
  }
}

TEST(HzcctlObjects, EventSeqCountsTheGaps) {
  EventSeq seq;
  EXPECT_EQ(seq.Lost(17), 0u);  // the first one seen
  EXPECT_EQ(seq.Lost(18), 0u);
  EXPECT_EQ(seq.Lost(21), 2u);
  EXPECT_EQ(seq.Lost(22), 0u);
}

// ---- replies

// A datagram of several messages.
std::vector<char> Concat(std::initializer_list<std::vector<char>> parts) {
  std::vector<char> out;
  for (const auto &p : parts) {
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// NLMSG_DONE (payload @err) or NLMSG_ERROR (@err, with an extended ACK message if given).
std::vector<char> Control(uint16_t type, uint32_t seq, int err, const char *extack = nullptr) {
  nl_msg *msg = nlmsg_alloc();
  nlmsghdr *h = nlmsg_put(msg, 0, seq, type, 0, extack ? NLM_F_CAPPED | NLM_F_ACK_TLVS : 0);
  if (type == NLMSG_ERROR) {
    auto *e = static_cast<nlmsgerr *>(nlmsg_reserve(msg, sizeof(nlmsgerr), NLMSG_ALIGNTO));
    e->error = err;
    e->msg.nlmsg_len = NLMSG_HDRLEN;
  } else {
    auto *p = static_cast<int *>(nlmsg_reserve(msg, sizeof(int), NLMSG_ALIGNTO));
    *p = err;
  }
  if (extack != nullptr) {
    nla_put_string(msg, NLMSGERR_ATTR_MSG, extack);
  }
  h = nlmsg_hdr(msg);
  const char *p = reinterpret_cast<const char *>(h);
  std::vector<char> out(p, p + NLMSG_ALIGN(h->nlmsg_len));
  nlmsg_free(msg);
  return out;
}

std::vector<char> RangeBytes(uint64_t id, uint32_t seq, uint16_t type = kFamily) {
  Msg m(HZC_NL_CMD_RANGE_GET, type, seq, NLM_F_MULTI);
  FullRange(m, id, false);
  return m.Bytes();
}

TEST(HzcctlReplies, DumpUntilDone) {
  const auto buf =
      Concat({RangeBytes(1, 9), RangeBytes(2, 8), RangeBytes(3, 9), RangeBytes(4, 9, kFamily + 1)});
  std::vector<uint64_t> ids;
  const auto collect = [&](const nlmsghdr *h) { ids.push_back(ParseRange(h).id); };
  EXPECT_FALSE(DispatchReplies(buf.data(), buf.size(), kFamily, 9, true, collect));
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 3})) << "other seqs and families are skipped";
  const auto last = Concat({RangeBytes(5, 9), Control(NLMSG_DONE, 9, 0)});
  EXPECT_TRUE(DispatchReplies(last.data(), last.size(), kFamily, 9, true, collect));
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 3, 5}));
}

TEST(HzcctlReplies, DoitEndsWithItsReply) {
  const auto buf = Concat({RangeBytes(1, 4), RangeBytes(2, 4)});
  int calls = 0;
  EXPECT_TRUE(DispatchReplies(buf.data(), buf.size(), kFamily, 4, false,
                              [&](const nlmsghdr *) { ++calls; }));
  EXPECT_EQ(calls, 1);
  const auto ack = Control(NLMSG_ERROR, 4, 0);
  EXPECT_TRUE(DispatchReplies(ack.data(), ack.size(), kFamily, 4, false, [](const nlmsghdr *) {}));
}

TEST(HzcctlReplies, ErrorWithExtendedAck) {
  const auto buf = Control(NLMSG_ERROR, 3, -EINVAL, "missing attribute: HZC_NLA_RANGE_ID");
  try {
    DispatchReplies(buf.data(), buf.size(), kFamily, 3, false, [](const nlmsghdr *) {});
    FAIL() << "an error reply did not throw";
  } catch (const NetlinkError &e) {
    EXPECT_EQ(e.err(), EINVAL);
    EXPECT_EQ(e.extack(), "missing attribute: HZC_NLA_RANGE_ID");
    EXPECT_THAT(e.what(), HasSubstr(std::strerror(EINVAL)));
    EXPECT_THAT(e.what(), HasSubstr("HZC_NLA_RANGE_ID"));
  }
  const auto plain = Control(NLMSG_ERROR, 3, -ENOENT);
  try {
    DispatchReplies(plain.data(), plain.size(), kFamily, 3, false, [](const nlmsghdr *) {});
    FAIL() << "an error reply did not throw";
  } catch (const NetlinkError &e) {
    EXPECT_EQ(e.err(), ENOENT);
    EXPECT_EQ(e.extack(), "");
  }
}

TEST(HzcctlReplies, DumpThatFailsAtItsEnd) {
  const auto buf = Concat({RangeBytes(1, 5), Control(NLMSG_DONE, 5, -EPERM)});
  int calls = 0;
  try {
    DispatchReplies(buf.data(), buf.size(), kFamily, 5, true, [&](const nlmsghdr *) { ++calls; });
    FAIL() << "NLMSG_DONE with an error did not throw";
  } catch (const NetlinkError &e) {
    EXPECT_EQ(e.err(), EPERM);
  }
  EXPECT_EQ(calls, 1);
}

TEST(HzcctlReplies, ControllerReply) {
  Msg m(CTRL_CMD_NEWFAMILY, GENL_ID_CTRL);
  nla_put_string(m.msg(), CTRL_ATTR_FAMILY_NAME, HZC_GENL_NAME);
  nla_put_u16(m.msg(), CTRL_ATTR_FAMILY_ID, 0x23);
  nlattr *groups = nla_nest_start(m.msg(), CTRL_ATTR_MCAST_GROUPS);
  int index = 1;
  for (const auto &[name, id] : {std::pair{"other", 3u}, std::pair{HZC_GENL_MCGRP_EVENTS, 7u}}) {
    nlattr *g = nla_nest_start(m.msg(), index++);
    nla_put_string(m.msg(), CTRL_ATTR_MCAST_GRP_NAME, name);
    nla_put_u32(m.msg(), CTRL_ATTR_MCAST_GRP_ID, id);
    nla_nest_end(m.msg(), g);
  }
  nla_nest_end(m.msg(), groups);
  const FamilyIds ids = ParseFamily(m.hdr());
  EXPECT_EQ(ids.family, 0x23);
  EXPECT_EQ(ids.events_group, 7u);

  Msg none(CTRL_CMD_NEWFAMILY, GENL_ID_CTRL);
  nla_put_string(none.msg(), CTRL_ATTR_FAMILY_NAME, HZC_GENL_NAME);
  EXPECT_THROW(ParseFamily(none.hdr()), Failure);
}

}  // namespace
}  // namespace hzcctl
