// SPDX-License-Identifier: GPL-2.0
// The generic netlink family "hzc" (include/uapi/linux/hzc.h, "Generic netlink family"):
// dumps and gets agree with sysfs field by field, dumps resume across many reads, events
// arrive once and in order, an unprivileged user sees only its own objects, malformed
// requests get the documented errors, and the family goes away with the module.
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <sys/syscall.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>

#include "ktest.h"

namespace hzc::ktest {
namespace {

// One received message: its command, flags and top-level attributes.
struct NlMsg {
  uint16_t msg_type = 0;
  uint16_t flags = 0;
  uint8_t cmd = 0;
  std::map<int, std::vector<uint8_t>> attrs;

  bool Has(int type) const { return attrs.count(type) != 0; }
  uint64_t U64(int type) const {
    uint64_t v = 0;
    auto it = attrs.find(type);
    if (it != attrs.end() && it->second.size() == 8) {
      std::memcpy(&v, it->second.data(), 8);
    }
    return v;
  }
  uint32_t U32(int type) const {
    uint32_t v = 0;
    auto it = attrs.find(type);
    if (it != attrs.end() && it->second.size() == 4) {
      std::memcpy(&v, it->second.data(), 4);
    }
    return v;
  }
  std::string Str(int type) const {
    auto it = attrs.find(type);
    if (it == attrs.end() || it->second.empty()) {
      return "<absent>";
    }
    return std::string(reinterpret_cast<const char *>(it->second.data()));
  }
  // The DOMAIN_SEQs nested in RANGE_DOMAINS, as sysfs' domains file shows them.
  std::string Domains() const {
    auto it = attrs.find(HZC_NLA_RANGE_DOMAINS);
    if (it == attrs.end()) {
      return "<absent>";
    }
    std::string out;
    size_t off = 0;
    const auto &b = it->second;
    while (off + NLA_HDRLEN <= b.size()) {
      nlattr a;
      std::memcpy(&a, b.data() + off, sizeof(a));
      if (a.nla_len < NLA_HDRLEN || off + a.nla_len > b.size()) {
        return "<bad nest>";
      }
      uint64_t seq = 0;
      if ((a.nla_type & NLA_TYPE_MASK) != HZC_NLA_DOMAIN_SEQ || a.nla_len != NLA_HDRLEN + 8) {
        return "<bad nest entry>";
      }
      std::memcpy(&seq, b.data() + off + NLA_HDRLEN, 8);
      out += (out.empty() ? "" : " ") + std::to_string(seq);
      off += NLA_ALIGN(a.nla_len);
    }
    return out;
  }
};

// What a request got back: the messages, the errno (0 = ok) and the extended ACK.
struct NlResult {
  std::vector<NlMsg> msgs;
  int err = 0;
  int reads = 0;
  uint32_t bad_attr_offset = 0;  // NLMSGERR_ATTR_OFFS, 0 if absent
  int64_t missing_type = -1;     // NLMSGERR_ATTR_MISS_TYPE, -1 if absent
  std::string ext_msg;
};

// An attribute for a request: raw bytes, so tests can send malformed ones.
struct Attr {
  uint16_t type;
  std::vector<uint8_t> data;
  static Attr U64(uint16_t t, uint64_t v) {
    std::vector<uint8_t> d(8);
    std::memcpy(d.data(), &v, 8);
    return {t, d};
  }
  static Attr U32(uint16_t t, uint32_t v) {
    std::vector<uint8_t> d(4);
    std::memcpy(d.data(), &v, 4);
    return {t, d};
  }
};

int ResolveFamily(int *group) {
  nl_sock *sk = nl_socket_alloc();
  if (sk == nullptr) {
    return -1;
  }
  int id = -1;
  if (genl_connect(sk) == 0) {
    id = genl_ctrl_resolve(sk, HZC_GENL_NAME);
    if (group != nullptr) {
      *group = genl_ctrl_resolve_grp(sk, HZC_GENL_NAME, HZC_GENL_MCGRP_EVENTS);
    }
  }
  nl_socket_free(sk);
  return id;
}

// A raw NETLINK_GENERIC socket talking to the family, with extended ACKs on.
class Genl {
 public:
  Genl() {
    family_ = ResolveFamily(&group_);
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    sockaddr_nl addr{};
    addr.nl_family = AF_NETLINK;
    const int one = 1;
    if (fd_ >= 0 && (bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
                     setsockopt(fd_, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) != 0 ||
                     setsockopt(fd_, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one)) != 0)) {
      close(fd_);
      fd_ = -1;
    }
    timeval tv{30, 0};
    if (fd_ >= 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
  }
  ~Genl() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  Genl(const Genl &) = delete;
  Genl &operator=(const Genl &) = delete;

  bool ok() const { return fd_ >= 0 && family_ > 0; }
  int fd() const { return fd_; }
  int family() const { return family_; }
  int group() const { return group_; }

  // Joins the events group: 0 or the errno.
  int JoinEvents() {
    return setsockopt(fd_, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group_, sizeof(group_)) == 0
               ? 0
               : errno;
  }

  // Sends raw bytes as one message of @type with a genl header for @cmd.
  bool SendRaw(uint16_t flags, uint8_t cmd, const std::vector<uint8_t> &payload, uint16_t type = 0,
               size_t len_override = 0) {
    std::vector<uint8_t> buf(NLMSG_HDRLEN + GENL_HDRLEN + payload.size());
    auto *nlh = reinterpret_cast<nlmsghdr *>(buf.data());
    nlh->nlmsg_len = len_override ? len_override : buf.size();
    nlh->nlmsg_type = type ? type : family_;
    nlh->nlmsg_flags = NLM_F_REQUEST | flags;
    nlh->nlmsg_seq = ++seq_;
    auto *gh = reinterpret_cast<genlmsghdr *>(buf.data() + NLMSG_HDRLEN);
    gh->cmd = cmd;
    gh->version = HZC_GENL_VERSION;
    std::memcpy(buf.data() + NLMSG_HDRLEN + GENL_HDRLEN, payload.data(), payload.size());
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    return sendto(fd_, buf.data(), std::min(buf.size(), static_cast<size_t>(nlh->nlmsg_len)), 0,
                  reinterpret_cast<sockaddr *>(&kernel), sizeof(kernel)) ==
           static_cast<ssize_t>(std::min(buf.size(), size_t{nlh->nlmsg_len}));
  }

  static std::vector<uint8_t> Encode(const std::vector<Attr> &attrs) {
    std::vector<uint8_t> out;
    for (const Attr &a : attrs) {
      nlattr h{static_cast<uint16_t>(NLA_HDRLEN + a.data.size()), a.type};
      const size_t at = out.size();
      out.resize(at + NLA_ALIGN(h.nla_len), 0);
      std::memcpy(out.data() + at, &h, sizeof(h));
      std::memcpy(out.data() + at + NLA_HDRLEN, a.data.data(), a.data.size());
    }
    return out;
  }

  NlResult Request(uint8_t cmd, const std::vector<Attr> &attrs, bool dump, size_t bufsize = 32768) {
    return RequestRaw(cmd, Encode(attrs), dump, bufsize);
  }

  // Sends a request and reads until its end: the reply (doit), NLMSG_DONE (dump) or an
  // error.  Each recv() reads at most @bufsize bytes.
  NlResult RequestRaw(uint8_t cmd, const std::vector<uint8_t> &payload, bool dump,
                      size_t bufsize = 32768, size_t len_override = 0) {
    NlResult r;
    if (!SendRaw(dump ? NLM_F_DUMP : 0, cmd, payload, 0, len_override)) {
      r.err = errno ? errno : EIO;
      return r;
    }
    return Collect(dump, bufsize);
  }

  NlResult Collect(bool dump, size_t bufsize = 32768, bool stop_after_first_read = false) {
    NlResult r;
    std::vector<uint8_t> buf(bufsize);
    for (;;) {
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n < 0) {
        r.err = errno;
        return r;
      }
      ++r.reads;
      bool end = !dump;
      if (Parse(buf.data(), static_cast<size_t>(n), &r, &end) || end) {
        return r;
      }
      if (stop_after_first_read) {
        r.err = EINPROGRESS;
        return r;
      }
    }
  }

  // Reads the next event (nullopt on timeout).
  std::optional<NlMsg> NextEvent(int timeout_ms = 20000) {
    if (!pending_.empty()) {
      NlMsg m = pending_.front();
      pending_.erase(pending_.begin());
      return m;
    }
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) {
      return std::nullopt;
    }
    std::vector<uint8_t> buf(65536);
    const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) {
      return std::nullopt;
    }
    NlResult r;
    bool end = false;
    Parse(buf.data(), static_cast<size_t>(n), &r, &end);
    pending_ = r.msgs;
    return NextEvent(timeout_ms);
  }

 private:
  // Appends the messages of one read to @r; true if an error ended the request.
  static bool Parse(const uint8_t *data, size_t len, NlResult *r, bool *end) {
    for (auto *nlh = reinterpret_cast<const nlmsghdr *>(data); NLMSG_OK(nlh, len);
         nlh = NLMSG_NEXT(nlh, len)) {
      if (nlh->nlmsg_type == NLMSG_DONE) {
        // A dump that failed midway ends with its errno in NLMSG_DONE.
        int error = 0;
        if (nlh->nlmsg_len >= NLMSG_LENGTH(sizeof(error))) {
          std::memcpy(&error, NLMSG_DATA(nlh), sizeof(error));
        }
        r->err = -error;
        *end = true;
        return error != 0;
      }
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        ParseError(nlh, r);
        *end = true;
        return r->err != 0;
      }
      NlMsg m;
      m.msg_type = nlh->nlmsg_type;
      m.flags = nlh->nlmsg_flags;
      const auto *gh = static_cast<const genlmsghdr *>(NLMSG_DATA(nlh));
      m.cmd = gh->cmd;
      const uint8_t *p = reinterpret_cast<const uint8_t *>(gh) + GENL_HDRLEN;
      size_t left = nlh->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
      while (left >= NLA_HDRLEN) {
        nlattr a;
        std::memcpy(&a, p, sizeof(a));
        if (a.nla_len < NLA_HDRLEN || a.nla_len > left) {
          break;
        }
        const int type = a.nla_type & NLA_TYPE_MASK;
        if (m.attrs.count(type) != 0) {
          m.attrs[-1] = {};  // a duplicate attribute: tests check -1 is absent
        }
        m.attrs[type].assign(p + NLA_HDRLEN, p + a.nla_len);
        const size_t step = std::min<size_t>(NLA_ALIGN(a.nla_len), left);
        p += step;
        left -= step;
      }
      r->msgs.push_back(std::move(m));
    }
    return false;
  }

  static void ParseError(const nlmsghdr *nlh, NlResult *r) {
    const auto *e = static_cast<const nlmsgerr *>(NLMSG_DATA(nlh));
    r->err = -e->error;
    if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) {
      return;
    }
    // NETLINK_CAP_ACK: only the request's header follows struct nlmsgerr.
    const uint8_t *p = reinterpret_cast<const uint8_t *>(e) + sizeof(*e);
    const uint8_t *end = reinterpret_cast<const uint8_t *>(nlh) + nlh->nlmsg_len;
    while (p + NLA_HDRLEN <= end) {
      nlattr a;
      std::memcpy(&a, p, sizeof(a));
      if (a.nla_len < NLA_HDRLEN || p + a.nla_len > end) {
        break;
      }
      const uint8_t *v = p + NLA_HDRLEN;
      if (a.nla_type == NLMSGERR_ATTR_OFFS) {
        std::memcpy(&r->bad_attr_offset, v, 4);
      } else if (a.nla_type == NLMSGERR_ATTR_MISS_TYPE) {
        uint32_t t;
        std::memcpy(&t, v, 4);
        r->missing_type = t;
      } else if (a.nla_type == NLMSGERR_ATTR_MSG) {
        r->ext_msg.assign(reinterpret_cast<const char *>(v));
      }
      p += NLA_ALIGN(a.nla_len);
    }
  }

  int fd_ = -1;
  int family_ = -1;
  int group_ = -1;
  uint32_t seq_ = 0;
  std::vector<NlMsg> pending_;
};

// Offset of the first attribute of a request from its nlmsghdr (extended ACKs count it so).
constexpr uint32_t kFirstAttr = NLMSG_HDRLEN + GENL_HDRLEN;

std::string RangeDir(uint64_t id) {
  return std::string(kSysfsRoot) + "/ranges/" + std::to_string(id);
}

std::string DomainDir(uint64_t seq) {
  return std::string(kSysfsRoot) + "/domains/" + std::to_string(seq);
}

// Seq (directory name) of every domain in sysfs by its id as the `id` file shows it; one
// scan, where FindDomainDir() scans all domains per call.
std::map<std::string, uint64_t> DomainSeqs() {
  std::map<std::string, uint64_t> seqs;
  const std::string root = std::string(kSysfsRoot) + "/domains/";
  for (const std::string &name : ListDir(root)) {
    const uint64_t seq = std::stoull(name);
    uint64_t &at = seqs[ReadLine(root + name + "/id")];
    at = std::max(at, seq);
  }
  return seqs;
}

std::string Hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// "" if the range message equals the range's sysfs files, field by field.
std::string CompareRange(const NlMsg &m, bool priv) {
  const uint64_t id = m.U64(HZC_NLA_RANGE_ID);
  const std::string dir = RangeDir(id);
  std::string diff;
  auto check = [&](const std::string &what, const std::string &nl, const std::string &fs) {
    if (nl != fs) {
      diff += " " + what + ": netlink '" + nl + "' sysfs '" + fs + "';";
    }
  };
  check("owner_pid", std::to_string(m.U32(HZC_NLA_PID)), ReadLine(dir + "/owner_pid"));
  if (priv) {
    check("base", m.Has(HZC_NLA_RANGE_BASE) ? Hex(m.U64(HZC_NLA_RANGE_BASE)) : "<absent>",
          ReadLine(dir + "/base"));
  } else if (m.Has(HZC_NLA_RANGE_BASE)) {
    diff += " base shown to an unprivileged caller;";
  }
  check("size", std::to_string(m.U64(HZC_NLA_RANGE_SIZE)), ReadLine(dir + "/size"));
  check("activated_bytes", std::to_string(m.U64(HZC_NLA_RANGE_ACTIVATED_BYTES)),
        ReadLine(dir + "/activated_bytes"));
  check("nr_activations", std::to_string(m.U32(HZC_NLA_RANGE_NR_ACTIVATIONS)),
        ReadLine(dir + "/nr_activations"));
  check("state", m.Str(HZC_NLA_RANGE_STATE), ReadLine(dir + "/state"));
  check("domains", m.Domains(), ReadLine(dir + "/domains"));
  return diff.empty() ? "" : "range " + std::to_string(id) + ":" + diff;
}

std::string CompareDomain(const NlMsg &m, bool priv) {
  const uint64_t seq = m.U64(HZC_NLA_DOMAIN_SEQ);
  const std::string dir = DomainDir(seq);
  std::string diff;
  auto check = [&](const std::string &what, const std::string &nl, const std::string &fs) {
    if (nl != fs) {
      diff += " " + what + ": netlink '" + nl + "' sysfs '" + fs + "';";
    }
  };
  if (priv) {
    std::string id = "<absent>";
    auto it = m.attrs.find(HZC_NLA_DOMAIN_ID);
    if (it != m.attrs.end() && it->second.size() == 16) {
      DomainId d;
      std::memcpy(&d.lo, it->second.data(), 8);
      std::memcpy(&d.hi, it->second.data() + 8, 8);
      id = DomainIdHex(d);
    }
    check("id", id, ReadLine(dir + "/id"));
  } else if (m.Has(HZC_NLA_DOMAIN_ID)) {
    diff += " id shown to an unprivileged caller;";
  }
  check("state", m.Str(HZC_NLA_DOMAIN_STATE), ReadLine(dir + "/state"));
  check("nranks", std::to_string(m.U32(HZC_NLA_DOMAIN_NRANKS)), ReadLine(dir + "/nranks"));
  check("joined", std::to_string(m.U32(HZC_NLA_DOMAIN_JOINED)), ReadLine(dir + "/joined"));
  check("creator_uid", std::to_string(m.U32(HZC_NLA_DOMAIN_CREATOR_UID)),
        ReadLine(dir + "/creator_uid"));
  return diff.empty() ? "" : "domain " + std::to_string(seq) + ":" + diff;
}

// A context with @n one-page ranges, each activated (cookie = index), and @n domains of
// two ranks where this process holds rank 0: the first kOwnerDomains through that context
// (every range message lists them), the others through further contexts of kPerContext
// memberships each (within the default max_memberships).
struct Population {
  static constexpr size_t kOwnerDomains = 8;
  static constexpr size_t kPerContext = 200;
  int fd = -1;
  std::vector<int> member_fds;
  size_t page = PageSize();
  char *base = nullptr;
  size_t n = 0;
  std::vector<uint64_t> range_ids;
  std::vector<DomainId> domains;

  explicit Population(size_t count, bool with_domains = true) : n(count) {
    fd = OpenDevice();
    // Every other page: ranges do not touch, so each is its own object.
    void *p =
        mmap(nullptr, 2 * n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<char *>(p);
    if (fd < 0 || base == nullptr) {
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      hzc_range_register out{};
      char *at = base + 2 * i * page;
      if (RegisterRange(fd, at, page, &out) != 0 || Activate(fd, at, page, nullptr, i) != 0) {
        return;
      }
      range_ids.push_back(out.out_id);
      if (with_domains) {
        int join_fd = fd;
        if (i >= kOwnerDomains) {
          if ((i - kOwnerDomains) % kPerContext == 0) {
            member_fds.push_back(OpenDevice());
          }
          join_fd = member_fds.back();
        }
        domains.push_back(NewDomainId());
        if (join_fd < 0 || Join(join_fd, domains.back(), 0, 2) != 0) {
          return;
        }
      }
    }
  }
  bool ok() const { return range_ids.size() == n && (domains.empty() || domains.size() == n); }
  ~Population() {
    for (int f : member_fds) {
      if (f >= 0) {
        close(f);
      }
    }
    if (fd >= 0) {
      close(fd);
    }
    if (base != nullptr) {
      munmap(base, 2 * n * page);
    }
  }
};

// Raises a module parameter for the test's lifetime.
class ParamGuard {
 public:
  ParamGuard(std::string name, long long value) : name_(std::move(name)) {
    old_ = ReadParam(name_);
    if (old_ < value) {
      WriteParam(name_, value);
    }
  }
  ~ParamGuard() {
    if (old_ >= 0) {
      WriteParam(name_, old_);
    }
  }

 private:
  std::string name_;
  long long old_ = -1;
};

class Netlink : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root";
    }
    if (access(kDevice, R_OK | W_OK) != 0) {
      GTEST_SKIP() << "hzc.ko not loaded";
    }
    ASSERT_GT(ResolveFamily(nullptr), 0) << "family " << HZC_GENL_NAME << " not registered";
  }
};

// Dumps of @n objects of each kind, read 4 KiB at a time, equal sysfs field by field.
void CheckDumpsAgainstSysfs(size_t n) {
  ParamGuard user_members("max_user_memberships", static_cast<long long>(n) + 64);
  ParamGuard domains_limit("max_domains", static_cast<long long>(n) + 64);
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Population pop(n);
  ASSERT_TRUE(pop.ok()) << "could not create " << n << " ranges, activations and domains";
  if (n >= 1000) {
    std::cout << n << " ranges, activations and domains made: " << since() << " s\n";
  }
  Genl nl;
  ASSERT_TRUE(nl.ok());
  const uint32_t me = static_cast<uint32_t>(getpid());

  NlResult ranges = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U32(HZC_NLA_PID, me)}, true, 4096);
  ASSERT_EQ(ranges.err, 0) << ranges.ext_msg;
  ASSERT_EQ(ranges.msgs.size(), n);
  if (n >= 100) {
    EXPECT_GT(ranges.reads, 2) << "a dump of " << n << " ranges fit one 4 KiB read";
  }
  // The ranges' owner context holds the first kOwnerDomains domains.
  const std::map<std::string, uint64_t> seqs = DomainSeqs();
  std::string seq_list;
  for (size_t i = 0; i < std::min(n, Population::kOwnerDomains); ++i) {
    seq_list +=
        (seq_list.empty() ? "" : " ") + std::to_string(seqs.at(DomainIdHex(pop.domains[i])));
  }
  for (size_t i = 0; i < n; ++i) {
    const NlMsg &m = ranges.msgs[i];
    EXPECT_EQ(m.cmd, HZC_NL_CMD_RANGE_GET);
    EXPECT_TRUE(m.flags & NLM_F_MULTI);
    EXPECT_FALSE(m.Has(-1)) << "duplicate attribute";
    EXPECT_EQ(m.U64(HZC_NLA_RANGE_ID), pop.range_ids[i]) << "not in id order at " << i;
    EXPECT_EQ(m.U32(HZC_NLA_UID), 0u);
    EXPECT_EQ(m.U64(HZC_NLA_RANGE_BASE), reinterpret_cast<uintptr_t>(pop.base + 2 * i * pop.page));
    EXPECT_EQ(CompareRange(m, true), "");
    EXPECT_EQ(m.Domains(), seq_list) << "every range shows all of its owner's domains";
    EXPECT_EQ(m.U32(HZC_NLA_PID), me);
    if (::testing::Test::HasFailure()) {
      return;
    }
  }

  NlResult acts = nl.Request(HZC_NL_CMD_ACTIVATION_GET, {Attr::U32(HZC_NLA_PID, me)}, true, 4096);
  ASSERT_EQ(acts.err, 0) << acts.ext_msg;
  ASSERT_EQ(acts.msgs.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const NlMsg &m = acts.msgs[i];
    const NlMsg &r = ranges.msgs[i];
    EXPECT_EQ(m.cmd, HZC_NL_CMD_ACTIVATION_GET);
    EXPECT_EQ(m.U64(HZC_NLA_RANGE_ID), pop.range_ids[i]);
    EXPECT_EQ(m.U32(HZC_NLA_PID), me);
    EXPECT_EQ(m.U32(HZC_NLA_UID), 0u);
    EXPECT_EQ(m.U64(HZC_NLA_ACT_OFFSET), 0u);
    EXPECT_EQ(std::to_string(m.U64(HZC_NLA_ACT_SIZE)),
              ReadLine(RangeDir(pop.range_ids[i]) + "/activated_bytes"));
    EXPECT_EQ(m.U64(HZC_NLA_ACT_ADDR), r.U64(HZC_NLA_RANGE_BASE));
    EXPECT_EQ(m.U64(HZC_NLA_ACT_COOKIE), i);
    if (::testing::Test::HasFailure()) {
      return;
    }
  }

  // Domains and members: those of this process (the dump also shows other tests' leftovers).
  NlResult doms = nl.Request(HZC_NL_CMD_DOMAIN_GET, {}, true, 4096);
  ASSERT_EQ(doms.err, 0) << doms.ext_msg;
  std::map<uint64_t, const NlMsg *> by_seq;
  uint64_t last = 0;
  for (const NlMsg &m : doms.msgs) {
    const uint64_t seq = m.U64(HZC_NLA_DOMAIN_SEQ);
    EXPECT_GT(seq, last) << "domains not in seq order";
    last = seq;
    by_seq[seq] = &m;
  }
  NlResult members = nl.Request(HZC_NL_CMD_MEMBER_GET, {}, true, 4096);
  ASSERT_EQ(members.err, 0) << members.ext_msg;
  std::map<uint64_t, const NlMsg *> member_by_seq;
  for (const NlMsg &m : members.msgs) {
    member_by_seq[m.U64(HZC_NLA_DOMAIN_SEQ)] = &m;
  }
  for (const DomainId &d : pop.domains) {
    const uint64_t seq = seqs.at(DomainIdHex(d));
    const std::string dir = DomainDir(seq);
    ASSERT_EQ(by_seq.count(seq), 1u) << "domain " << seq << " missing from the dump";
    EXPECT_EQ(CompareDomain(*by_seq[seq], true), "");
    ASSERT_EQ(member_by_seq.count(seq), 1u) << "member of " << seq << " missing";
    const NlMsg &m = *member_by_seq[seq];
    EXPECT_EQ(m.U32(HZC_NLA_MEMBER_RANK), 0u);
    EXPECT_EQ(std::to_string(m.U32(HZC_NLA_PID)), ReadLine(dir + "/rank0/pid"));
    EXPECT_EQ(m.U32(HZC_NLA_UID), 0u);
    if (::testing::Test::HasFailure()) {
      return;
    }
  }
  if (n >= 1000) {
    std::cout << "dumps compared with sysfs: " << since() << " s\n";
  }
}

TEST_F(Netlink, DumpsAgreeWithSysfsOne) {
  CheckDumpsAgainstSysfs(1);
}

TEST_F(Netlink, DumpsAgreeWithSysfsHundred) {
  CheckDumpsAgainstSysfs(100);
}

TEST_F(Netlink, DumpsAgreeWithSysfsTenThousand) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckDumpsAgainstSysfs(10000);
  std::cout << "with the teardown: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

TEST_F(Netlink, GetOneObjectAndStats) {
  Population pop(3);
  ASSERT_TRUE(pop.ok());
  Genl nl;
  ASSERT_TRUE(nl.ok());
  NlResult r =
      nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U64(HZC_NLA_RANGE_ID, pop.range_ids[1])}, false);
  ASSERT_EQ(r.err, 0) << r.ext_msg;
  ASSERT_EQ(r.msgs.size(), 1u);
  EXPECT_EQ(r.msgs[0].U64(HZC_NLA_RANGE_ID), pop.range_ids[1]);
  EXPECT_EQ(CompareRange(r.msgs[0], true), "");

  const std::string dir = FindDomainDir(pop.domains[2]);
  const uint64_t seq = std::stoull(dir.substr(dir.rfind('/') + 1));
  r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {Attr::U64(HZC_NLA_DOMAIN_SEQ, seq)}, false);
  ASSERT_EQ(r.err, 0) << r.ext_msg;
  ASSERT_EQ(r.msgs.size(), 1u);
  EXPECT_EQ(CompareDomain(r.msgs[0], true), "");

  NlResult stat = nl.Request(HZC_NL_CMD_STAT_GET, {}, false);
  ASSERT_EQ(stat.err, 0) << stat.ext_msg;
  ASSERT_EQ(stat.msgs.size(), 1u);
  const NlMsg &s = stat.msgs[0];
  EXPECT_EQ(s.U32(HZC_NLA_ABI_VERSION),
            static_cast<uint32_t>(ReadNumber(std::string(kSysfsRoot) + "/abi_version")));
  EXPECT_EQ(static_cast<long long>(s.U64(HZC_NLA_STAT_NR_CONTEXTS)), Counter("nr_contexts"));
  EXPECT_EQ(static_cast<long long>(s.U64(HZC_NLA_STAT_NR_RANGES)), Counter("nr_ranges"));
  EXPECT_EQ(static_cast<long long>(s.U64(HZC_NLA_STAT_NR_ACTIVATIONS)), Counter("nr_activations"));
  EXPECT_EQ(static_cast<long long>(s.U64(HZC_NLA_STAT_NR_DOMAINS)), Counter("nr_domains"));
  EXPECT_EQ(static_cast<long long>(s.U64(HZC_NLA_STAT_PINNED_BYTES)), Counter("pinned_bytes"));
  EXPECT_GE(s.U64(HZC_NLA_STAT_NR_RANGES), 3u);

  // Gone: ENOENT.
  const uint64_t gone = pop.range_ids[0];
  ASSERT_EQ(Deactivate(pop.fd, pop.base), 0);
  ASSERT_EQ(UnregisterRange(pop.fd, pop.base), 0);
  r = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U64(HZC_NLA_RANGE_ID, gone)}, false);
  EXPECT_EQ(r.err, ENOENT);
  r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {Attr::U64(HZC_NLA_DOMAIN_SEQ, ~0ull >> 1)}, false);
  EXPECT_EQ(r.err, ENOENT);

  // Filters: one range's activations, one domain's members; each of the newest and of one
  // followed by others (the dump must stop at the filtered key, also on its second call).
  for (size_t i : {size_t{1}, size_t{2}}) {
    r = nl.Request(HZC_NL_CMD_ACTIVATION_GET, {Attr::U64(HZC_NLA_RANGE_ID, pop.range_ids[i])},
                   true);
    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.msgs.size(), 1u) << "range filter, range " << i;
    EXPECT_EQ(r.msgs[0].U64(HZC_NLA_RANGE_ID), pop.range_ids[i]);
    const std::string ddir = FindDomainDir(pop.domains[i - 1]);
    const uint64_t dseq = std::stoull(ddir.substr(ddir.rfind('/') + 1));
    r = nl.Request(HZC_NL_CMD_MEMBER_GET, {Attr::U64(HZC_NLA_DOMAIN_SEQ, dseq)}, true);
    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.msgs.size(), 1u) << "domain filter, domain " << i - 1;
    EXPECT_EQ(r.msgs[0].U64(HZC_NLA_DOMAIN_SEQ), dseq);
  }
}

// A dump read 4 KiB at a time while ranges come and go between the reads: every range that
// exists during the whole dump appears exactly once, and ids only grow.
TEST_F(Netlink, DumpResumesAcrossReadsWhileObjectsChange) {
  const size_t n = 3000;
  Population stable(n, false);
  ASSERT_TRUE(stable.ok());
  Population churn(200, false);
  ASSERT_TRUE(churn.ok());
  Genl nl;
  ASSERT_TRUE(nl.ok());
  ASSERT_TRUE(nl.SendRaw(NLM_F_DUMP, HZC_NL_CMD_RANGE_GET, {}));
  NlResult all;
  std::vector<uint8_t> buf(4096);
  size_t churned = 0;
  for (bool done = false; !done;) {
    const ssize_t len = recv(nl.fd(), buf.data(), buf.size(), 0);
    ASSERT_GT(len, 0) << strerror(errno);
    ++all.reads;
    size_t left = static_cast<size_t>(len);
    for (auto *nlh = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(nlh, left);
         nlh = NLMSG_NEXT(nlh, left)) {
      ASSERT_NE(nlh->nlmsg_type, NLMSG_ERROR);
      if (nlh->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      uint64_t id = 0;
      auto *a = reinterpret_cast<nlattr *>(static_cast<char *>(NLMSG_DATA(nlh)) + GENL_HDRLEN);
      ASSERT_EQ(a->nla_type, HZC_NLA_RANGE_ID) << "RANGE_ID comes first";
      std::memcpy(&id, reinterpret_cast<char *>(a) + NLA_HDRLEN, 8);
      NlMsg m;
      m.attrs[HZC_NLA_RANGE_ID].assign(reinterpret_cast<uint8_t *>(&id),
                                       reinterpret_cast<uint8_t *>(&id) + 8);
      all.msgs.push_back(m);
    }
    // Between reads: remove one churn range, add one.
    if (churned < churn.n) {
      char *at = churn.base + 2 * churned * churn.page;
      ASSERT_EQ(Deactivate(churn.fd, at), 0);
      ASSERT_EQ(UnregisterRange(churn.fd, at), 0);
      ASSERT_EQ(RegisterRange(churn.fd, at, churn.page), 0);
      ++churned;
    }
  }
  EXPECT_GT(all.reads, 10);
  std::map<uint64_t, int> seen;
  uint64_t last = 0;
  for (const NlMsg &m : all.msgs) {
    const uint64_t id = m.U64(HZC_NLA_RANGE_ID);
    EXPECT_GT(id, last) << "ids went back: a range repeated";
    last = id;
    ++seen[id];
  }
  for (uint64_t id : stable.range_ids) {
    EXPECT_EQ(seen[id], 1) << "stable range " << id;
  }
}

// ACTIVATION_GET's dump keeps the range it paused in and the address to go on from there. When
// that range goes away between two reads, the next range's activations come from its start:
// here they all lie below that address, and a dump that kept it skipped every one of them.
TEST_F(Netlink, ActivationDumpGoesOnFromTheStartOfTheNextRange) {
  const size_t page = PageSize(), per = 1000;
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  Reservation res(4 * per * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(res.base(), nullptr);
  char *low = res.base(), *high = low + 2 * per * page;
  hzc_range_register first{}, second{};
  ASSERT_EQ(RegisterRange(fd, high, 2 * per * page, &first), 0);  // dumped first: lower id
  ASSERT_EQ(RegisterRange(fd, low, 2 * per * page, &second), 0);
  for (size_t i = 0; i < per; ++i) {
    ASSERT_EQ(Activate(fd, high + 2 * i * page, page), 0);
    ASSERT_EQ(Activate(fd, low + 2 * i * page, page), 0);
  }
  Genl nl;
  ASSERT_TRUE(nl.ok());
  ASSERT_TRUE(nl.SendRaw(NLM_F_DUMP, HZC_NL_CMD_ACTIVATION_GET, {}));
  std::map<uint64_t, size_t> seen;  // activations per range id
  std::vector<uint8_t> buf(4096);   // a few dozen activations per read
  bool removed = false;
  for (bool done = false; !done;) {
    const ssize_t len = recv(nl.fd(), buf.data(), buf.size(), 0);
    ASSERT_GT(len, 0) << strerror(errno);
    size_t left = static_cast<size_t>(len);
    for (auto *nlh = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(nlh, left);
         nlh = NLMSG_NEXT(nlh, left)) {
      ASSERT_NE(nlh->nlmsg_type, NLMSG_ERROR);
      if (nlh->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      auto *a = reinterpret_cast<nlattr *>(static_cast<char *>(NLMSG_DATA(nlh)) + GENL_HDRLEN);
      ASSERT_EQ(a->nla_type, HZC_NLA_RANGE_ID) << "RANGE_ID comes first";
      uint64_t id = 0;
      std::memcpy(&id, reinterpret_cast<char *>(a) + NLA_HDRLEN, 8);
      ++seen[id];
    }
    if (!removed && seen[first.out_id] > 0) {  // paused inside the first range: remove it
      for (size_t i = 0; i < per; ++i) {
        ASSERT_EQ(Deactivate(fd, high + 2 * i * page), 0);
      }
      ASSERT_EQ(UnregisterRange(fd, high), 0);
      removed = true;
    }
  }
  ASSERT_TRUE(removed);
  EXPECT_LT(seen[first.out_id], per) << "the dump did not pause inside the first range";
  EXPECT_EQ(seen[second.out_id], per) << "activations of the next range were skipped";
  close(fd);
}

void ExpectEvent(Genl &nl, uint64_t *seq, uint8_t cmd, const std::map<int, uint64_t> &want,
                 const std::string &state = "") {
  std::optional<NlMsg> e = nl.NextEvent();
  ASSERT_TRUE(e.has_value()) << "event " << int(cmd) << " did not arrive";
  EXPECT_EQ(e->cmd, cmd);
  if (*seq != 0) {
    EXPECT_EQ(e->U64(HZC_NLA_EVENT_SEQ), *seq + 1) << "event " << int(cmd) << " not consecutive";
  }
  *seq = e->U64(HZC_NLA_EVENT_SEQ);
  for (const auto &[type, value] : want) {
    auto it = e->attrs.find(type);
    ASSERT_NE(it, e->attrs.end()) << "event " << int(cmd) << " lacks attribute " << type;
    const uint64_t got = it->second.size() == 8 ? e->U64(type) : e->U32(type);
    EXPECT_EQ(got, value) << "event " << int(cmd) << " attribute " << type;
  }
  if (!state.empty()) {
    const int type = (cmd == HZC_NL_CMD_EVENT_RANGE_SET || cmd == HZC_NL_CMD_EVENT_RANGE_UNSET)
                         ? HZC_NLA_RANGE_STATE
                         : HZC_NLA_DOMAIN_STATE;
    EXPECT_EQ(e->Str(type), state) << "event " << int(cmd);
  }
}

TEST_F(Netlink, EventsArriveOnceInOrder) {
  Genl nl;
  ASSERT_TRUE(nl.ok());
  ASSERT_EQ(nl.JoinEvents(), 0);
  const size_t page = PageSize();
  const uint64_t me = static_cast<uint64_t>(getpid());
  Reservation mem(2 * page, PROT_READ | PROT_WRITE);
  int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd, mem.base(), 2 * page, &reg), 0);
  const uint64_t base = reinterpret_cast<uintptr_t>(mem.base());
  ASSERT_EQ(Activate(fd, mem.base() + page, page, nullptr, 42), 0);
  const DomainId d = NewDomainId();
  ASSERT_EQ(Join(fd, d, 0, 2), 0);
  const std::string ddir = FindDomainDir(d);
  const uint64_t dseq = std::stoull(ddir.substr(ddir.rfind('/') + 1));

  auto [mine, theirs] = Channel::Pair();
  const pid_t child = fork();
  if (child == 0) {
    const int cfd = OpenDevice();
    theirs.Send(cfd >= 0 && Join(cfd, d, 1, 2) == 0 ? "joined" : "failed");
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  ASSERT_TRUE(mine.Expect("joined"));
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);

  ASSERT_EQ(Deactivate(fd, mem.base() + page), 0);
  ASSERT_EQ(UnregisterRange(fd, mem.base()), 0);
  const DomainId e = NewDomainId();
  ASSERT_EQ(Join(fd, e, 0, 1), 0);
  const std::string edir = FindDomainDir(e);
  const uint64_t eseq = std::stoull(edir.substr(edir.rfind('/') + 1));
  ASSERT_EQ(Leave(fd, e, 0), 0);
  close(fd);

  uint64_t seq = 0;
  const uint64_t id = reg.out_id;
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_RANGE_SET,
              {{HZC_NLA_RANGE_ID, id},
               {HZC_NLA_PID, me},
               {HZC_NLA_UID, 0},
               {HZC_NLA_RANGE_BASE, base},
               {HZC_NLA_RANGE_SIZE, 2 * page},
               {HZC_NLA_RANGE_NR_ACTIVATIONS, 0}},
              "registered");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_ACTIVATE,
              {{HZC_NLA_RANGE_ID, id},
               {HZC_NLA_PID, me},
               {HZC_NLA_ACT_OFFSET, page},
               {HZC_NLA_ACT_SIZE, page},
               {HZC_NLA_ACT_ADDR, base + page},
               {HZC_NLA_ACT_COOKIE, 42}});
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_JOIN,
              {{HZC_NLA_DOMAIN_SEQ, dseq}, {HZC_NLA_MEMBER_RANK, 0}, {HZC_NLA_PID, me}}, "live");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_JOIN,
              {{HZC_NLA_DOMAIN_SEQ, dseq},
               {HZC_NLA_MEMBER_RANK, 1},
               {HZC_NLA_PID, static_cast<uint64_t>(child)}},
              "live");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_BROKEN,
              {{HZC_NLA_DOMAIN_SEQ, dseq},
               {HZC_NLA_MEMBER_RANK, 1},
               {HZC_NLA_PID, static_cast<uint64_t>(child)}},
              "broken");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_CONTEXT_RELEASE,
              {{HZC_NLA_PID, static_cast<uint64_t>(child)}, {HZC_NLA_UID, 0}});
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_DEACTIVATE,
              {{HZC_NLA_RANGE_ID, id}, {HZC_NLA_ACT_OFFSET, page}, {HZC_NLA_ACT_COOKIE, 42}});
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_RANGE_UNSET,
              {{HZC_NLA_RANGE_ID, id}, {HZC_NLA_RANGE_NR_ACTIVATIONS, 0}}, "registered");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_JOIN,
              {{HZC_NLA_DOMAIN_SEQ, eseq}, {HZC_NLA_MEMBER_RANK, 0}}, "live");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_LEAVE,
              {{HZC_NLA_DOMAIN_SEQ, eseq}, {HZC_NLA_MEMBER_RANK, 0}}, "broken");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_MEMBER_BROKEN,
              {{HZC_NLA_DOMAIN_SEQ, dseq}, {HZC_NLA_MEMBER_RANK, 0}, {HZC_NLA_PID, me}}, "broken");
  ExpectEvent(nl, &seq, HZC_NL_CMD_EVENT_CONTEXT_RELEASE, {{HZC_NLA_PID, me}});
  EXPECT_FALSE(nl.NextEvent(500).has_value()) << "an event arrived twice or unexpectedly";
}

TEST_F(Netlink, UnprivilegedSeesOnlyItsOwn) {
  Population root_objs(2);
  ASSERT_TRUE(root_objs.ok());
  const uint64_t root_range = root_objs.range_ids[0];
  const std::string rdir = FindDomainDir(root_objs.domains[0]);
  const uint64_t root_seq = std::stoull(rdir.substr(rdir.rfind('/') + 1));
  const std::string outcome =
      AsUser(UserOptions{kNobody, rlim_t{1} << 24, ""}, [&]() -> std::string {
        Population mine(3);
        if (!mine.ok()) {
          return "cannot create objects as nobody";
        }
        Genl nl;
        if (!nl.ok()) {
          return "no netlink socket";
        }
        const std::set<uint64_t> own(mine.range_ids.begin(), mine.range_ids.end());
        NlResult r = nl.Request(HZC_NL_CMD_RANGE_GET, {}, true, 4096);
        if (r.err != 0 || r.msgs.size() != 3) {
          return Failed("range dump: " + std::to_string(r.msgs.size()) + " ranges", r.err);
        }
        for (const NlMsg &m : r.msgs) {
          if (own.count(m.U64(HZC_NLA_RANGE_ID)) == 0 || m.U32(HZC_NLA_UID) != kNobody) {
            return "saw a range of another user";
          }
          // (Its values against sysfs: DumpsAgreeWithSysfs*, as root; sysfs's object files
          // are root's.)
          if (m.Has(HZC_NLA_RANGE_BASE)) {
            return "range " + std::to_string(m.U64(HZC_NLA_RANGE_ID)) + ": base shown";
          }
        }
        r = nl.Request(HZC_NL_CMD_ACTIVATION_GET, {}, true);
        if (r.err != 0 || r.msgs.size() != 3) {
          return Failed("activation dump", r.err);
        }
        for (const NlMsg &m : r.msgs) {
          if (m.Has(HZC_NLA_ACT_ADDR) || own.count(m.U64(HZC_NLA_RANGE_ID)) == 0) {
            return "activation of another user or with its address";
          }
        }
        r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {}, true);
        if (r.err != 0 || r.msgs.size() != 3) {
          return Failed("domain dump: " + std::to_string(r.msgs.size()) + " domains", r.err);
        }
        for (const NlMsg &m : r.msgs) {
          if (m.Has(HZC_NLA_DOMAIN_ID) || m.U64(HZC_NLA_DOMAIN_SEQ) == root_seq) {
            return "domain " + std::to_string(m.U64(HZC_NLA_DOMAIN_SEQ)) +
                   ": root's, or its id shown";
          }
        }
        r = nl.Request(HZC_NL_CMD_MEMBER_GET, {}, true);
        if (r.err != 0 || r.msgs.size() != 3) {
          return Failed("member dump", r.err);
        }
        for (const NlMsg &m : r.msgs) {
          if (m.U32(HZC_NLA_UID) != kNobody) {
            return "member of another user";
          }
        }
        r = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U64(HZC_NLA_RANGE_ID, root_range)}, false);
        if (r.err != ENOENT) {
          return Failed("get of root's range", r.err);
        }
        r = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U64(HZC_NLA_RANGE_ID, mine.range_ids[0])},
                       false);
        if (r.err != 0 || r.msgs.size() != 1 || r.msgs[0].Has(HZC_NLA_RANGE_BASE)) {
          return Failed("get of its own range", r.err);
        }
        r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {Attr::U64(HZC_NLA_DOMAIN_SEQ, root_seq)}, false);
        if (r.err != ENOENT) {
          return Failed("get of root's domain", r.err);
        }
        r = nl.Request(HZC_NL_CMD_STAT_GET, {}, false);
        if (r.err != 0 || r.msgs.size() != 1) {
          return Failed("stat", r.err);
        }
        if (nl.JoinEvents() != EPERM) {
          return Failed("joining the events group", nl.JoinEvents());
        }
        return "";
      });
  EXPECT_EQ(outcome, "");
}

TEST_F(Netlink, MalformedRequestsGetErrors) {
  Genl nl;
  ASSERT_TRUE(nl.ok());
  // Wrong length (a u32 where a u64 belongs): EINVAL naming the attribute.
  NlResult r = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U32(HZC_NLA_RANGE_ID, 1)}, false);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.bad_attr_offset, kFirstAttr) << r.ext_msg;
  // An attribute this command does not take, after a valid one.
  r = nl.Request(HZC_NL_CMD_RANGE_GET,
                 {Attr::U64(HZC_NLA_RANGE_ID, 1), Attr::U64(HZC_NLA_RANGE_BASE, 0)}, false);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.bad_attr_offset, kFirstAttr + NLA_HDRLEN + 8) << r.ext_msg;
  // An attribute type beyond HZC_NLA_MAX.
  r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {Attr::U64(HZC_NLA_MAX + 1, 1)}, true);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.bad_attr_offset, kFirstAttr) << r.ext_msg;
  // Anything given to STAT_GET.
  r = nl.Request(HZC_NL_CMD_STAT_GET, {Attr::U32(HZC_NLA_PID, 1)}, false);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.bad_attr_offset, kFirstAttr) << r.ext_msg;
  // A filter a dump does not take; a dump filter given to a doit.
  r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {Attr::U64(HZC_NLA_DOMAIN_SEQ, 1)}, true);
  EXPECT_EQ(r.err, EINVAL);
  r = nl.Request(HZC_NL_CMD_RANGE_GET, {Attr::U64(HZC_NLA_RANGE_ID, 1), Attr::U32(HZC_NLA_PID, 1)},
                 false);
  EXPECT_EQ(r.err, EINVAL);
  // Missing the required id.
  r = nl.Request(HZC_NL_CMD_RANGE_GET, {}, false);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.missing_type, HZC_NLA_RANGE_ID);
  r = nl.Request(HZC_NL_CMD_DOMAIN_GET, {}, false);
  EXPECT_EQ(r.err, EINVAL);
  EXPECT_EQ(r.missing_type, HZC_NLA_DOMAIN_SEQ);
  // A truncated attribute: its length runs past the message.
  std::vector<uint8_t> trunc = Genl::Encode({Attr::U64(HZC_NLA_RANGE_ID, 1)});
  const uint16_t too_long = NLA_HDRLEN + 16;
  std::memcpy(trunc.data(), &too_long, 2);
  r = nl.RequestRaw(HZC_NL_CMD_RANGE_GET, trunc, false);
  EXPECT_EQ(r.err, EINVAL);
  trunc.resize(6);  // header and half the value
  const uint16_t half = 6;
  std::memcpy(trunc.data(), &half, 2);
  r = nl.RequestRaw(HZC_NL_CMD_RANGE_GET, trunc, true);
  EXPECT_EQ(r.err, EINVAL);
  // Shorter than a genl header.
  r = nl.RequestRaw(HZC_NL_CMD_STAT_GET, {}, false, 32768, NLMSG_HDRLEN + 2);
  EXPECT_EQ(r.err, EINVAL);
  // Unknown commands, event commands as requests.
  for (uint8_t cmd :
       {uint8_t{HZC_NL_CMD_UNSPEC}, uint8_t{HZC_NL_CMD_EVENT_RANGE_SET},
        uint8_t{HZC_NL_CMD_EVENT_CONTEXT_RELEASE}, uint8_t{HZC_NL_CMD_MAX + 1}, uint8_t{200}}) {
    r = nl.Request(cmd, {}, false);
    EXPECT_EQ(r.err, EOPNOTSUPP) << "command " << int(cmd);
    r = nl.Request(cmd, {}, true);
    EXPECT_EQ(r.err, EOPNOTSUPP) << "command " << int(cmd) << " as a dump";
  }
  // doit/dump mismatch.
  r = nl.Request(HZC_NL_CMD_STAT_GET, {}, true);
  EXPECT_EQ(r.err, EOPNOTSUPP);
  r = nl.Request(HZC_NL_CMD_ACTIVATION_GET, {}, false);
  EXPECT_EQ(r.err, EOPNOTSUPP);
  r = nl.Request(HZC_NL_CMD_MEMBER_GET, {}, false);
  EXPECT_EQ(r.err, EOPNOTSUPP);
  // Still answering.
  r = nl.Request(HZC_NL_CMD_STAT_GET, {}, false);
  EXPECT_EQ(r.err, 0);
}

int DeleteModule() {
  return syscall(SYS_delete_module, "hzc", O_NONBLOCK) == 0 ? 0 : errno;
}

int LoadModule(const std::string &path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno;
  }
  const int err = syscall(SYS_finit_module, fd, "", 0) == 0 ? 0 : errno;
  close(fd);
  return err;
}

// Last: unloads the module (HZC_MODULE, else the checkout's kmod/hzc.ko) and loads it again.
TEST_F(Netlink, ZzFamilyGoesAwayWithTheModule) {
  const char *env = getenv("HZC_MODULE");
  const std::string path = env != nullptr ? env : HZC_SOURCE_DIR "/kmod/hzc.ko";
  if (access(path.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "no module file to reload: " << path;
  }
  ASSERT_EQ(DeleteModule(), 0);
  EXPECT_LT(ResolveFamily(nullptr), 0) << "family still registered after rmmod";
  ASSERT_EQ(LoadModule(path), 0);
  int group = -1;
  EXPECT_GT(ResolveFamily(&group), 0);
  EXPECT_GT(group, 0);
}

}  // namespace
}  // namespace hzc::ktest
