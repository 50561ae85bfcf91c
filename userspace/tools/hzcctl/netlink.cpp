// SPDX-License-Identifier: Apache-2.0
#include "netlink.h"

#include <fmt/format.h>
#include <linux/genetlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

namespace hzcctl {
namespace {

// Large enough for any datagram: the kernel fills dump replies up to 32 KiB.
constexpr size_t kBufferSize = 64 * 1024;
// Events may come in bursts (a context's teardown); root may have this much.
constexpr int kEventBuffer = 4 * 1024 * 1024;

std::string Errno(int err) {
  return std::strerror(err);
}

// The NLMSGERR_ATTR_MSG of the TLVs that start @offset bytes into @h, or "".
std::string ExtAckAt(const nlmsghdr *h, size_t offset) {
  if (!(h->nlmsg_flags & NLM_F_ACK_TLVS) || NLMSG_ALIGN(offset) >= h->nlmsg_len) {
    return "";
  }
  auto *head = reinterpret_cast<nlattr *>(const_cast<char *>(reinterpret_cast<const char *>(h)) +
                                          NLMSG_ALIGN(offset));
  const int len = static_cast<int>(h->nlmsg_len - NLMSG_ALIGN(offset));
  nlattr *nla = nullptr;
  int rem = 0;
  nla_for_each_attr(nla, head, len, rem) {
    if (nla_type(nla) == NLMSGERR_ATTR_MSG && nla_len(nla) > 0) {
      return std::string(
          static_cast<const char *>(nla_data(nla)),
          strnlen(static_cast<const char *>(nla_data(nla)), static_cast<size_t>(nla_len(nla))));
    }
  }
  return "";
}

std::string ExtAckOfError(const nlmsghdr *h, const nlmsgerr *e) {
  size_t offset = NLMSG_HDRLEN + sizeof(nlmsgerr);
  if (!(h->nlmsg_flags & NLM_F_CAPPED)) {
    offset += e->msg.nlmsg_len - NLMSG_HDRLEN;  // the request echoed after the error
  }
  return ExtAckAt(h, offset);
}

[[noreturn]] void ThrowError(const nlmsghdr *h) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) {
    throw Failure("truncated error message from the kernel");
  }
  const auto *e = static_cast<const nlmsgerr *>(NLMSG_DATA(h));
  throw NetlinkError(-e->error, ExtAckOfError(h, e));
}

std::string WithExtAck(int err, const std::string &extack) {
  return extack.empty() ? Errno(err) : fmt::format("{} ({})", Errno(err), extack);
}

}  // namespace

NetlinkError::NetlinkError(int err, std::string extack)
    : Failure(WithExtAck(err, extack)), err_(err), extack_(std::move(extack)) {}

bool DispatchReplies(const void *buf, size_t len, uint16_t family, uint32_t seq, bool dump,
                     const MessageHandler &on_message) {
  int rem = static_cast<int>(len);
  for (auto *h = static_cast<const nlmsghdr *>(buf); NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem)) {
    if (seq != 0 && h->nlmsg_seq != seq) {
      continue;  // a reply to an earlier request
    }
    switch (h->nlmsg_type) {
      case NLMSG_NOOP:
        continue;
      case NLMSG_ERROR: {
        if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr)) &&
            static_cast<const nlmsgerr *>(NLMSG_DATA(h))->error == 0) {
          return true;  // an ACK
        }
        ThrowError(h);
      }
      case NLMSG_DONE: {
        int err = 0;
        if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
          std::memcpy(&err, NLMSG_DATA(h), sizeof(err));
        }
        if (err < 0) {
          throw NetlinkError(-err, ExtAckAt(h, NLMSG_HDRLEN + sizeof(int)));
        }
        return true;
      }
      case NLMSG_OVERRUN:
        throw Failure("the kernel reported a netlink overrun (NLMSG_OVERRUN)");
      default:
        if (h->nlmsg_type != family) {
          continue;
        }
        on_message(h);
        if (!dump) {
          return true;
        }
    }
  }
  return false;
}

FamilyIds ParseFamily(const nlmsghdr *msg) {
  FamilyIds ids;
  auto *hdr = const_cast<nlmsghdr *>(msg);
  if (msg->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) {
    throw Failure("malformed reply of the generic netlink controller");
  }
  nlattr *nla = nullptr;
  int rem = 0;
  nla_for_each_attr(nla, nlmsg_attrdata(hdr, GENL_HDRLEN), nlmsg_attrlen(hdr, GENL_HDRLEN), rem) {
    if (nla_type(nla) == CTRL_ATTR_FAMILY_ID && nla_len(nla) >= 2) {
      ids.family = nla_get_u16(nla);
    } else if (nla_type(nla) == CTRL_ATTR_MCAST_GROUPS) {
      nlattr *group = nullptr;
      int grem = 0;
      nla_for_each_nested(group, nla, grem) {
        nlattr *name = nla_find(static_cast<nlattr *>(nla_data(group)), nla_len(group),
                                CTRL_ATTR_MCAST_GRP_NAME);
        nlattr *id = nla_find(static_cast<nlattr *>(nla_data(group)), nla_len(group),
                              CTRL_ATTR_MCAST_GRP_ID);
        if (name != nullptr && id != nullptr && nla_len(id) >= 4 &&
            nla_strcmp(name, HZC_GENL_MCGRP_EVENTS) == 0) {
          ids.events_group = nla_get_u32(id);
        }
      }
    }
  }
  if (ids.family == 0) {
    throw Failure("the generic netlink controller's reply has no family id");
  }
  return ids;
}

Netlink::Netlink() : buf_(kBufferSize) {
  sock_ = nl_socket_alloc();
  if (sock_ == nullptr) {
    throw Failure("cannot allocate a netlink socket: out of memory");
  }
  nl_socket_disable_auto_ack(sock_);
  if (const int err = genl_connect(sock_); err < 0) {
    nl_socket_free(sock_);
    sock_ = nullptr;
    throw Failure(fmt::format("cannot open a generic netlink socket: {}", nl_geterror(err)));
  }
  const int one = 1;
  // Best effort: without them errors carry no message, or echo the request.
  (void)setsockopt(fd(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  (void)setsockopt(fd(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
}

Netlink::~Netlink() {
  if (sock_ != nullptr) {
    nl_socket_free(sock_);
  }
}

int Netlink::fd() const {
  return nl_socket_get_fd(sock_);
}

uint32_t Netlink::Send(uint16_t type, uint8_t cmd, uint8_t version, bool dump,
                       const std::vector<RequestAttr> &attrs, int name_attr, const char *name) {
  nl_msg *msg = nlmsg_alloc();
  if (msg == nullptr) {
    throw Failure("cannot allocate a netlink message: out of memory");
  }
  bool ok = genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, type, 0, dump ? NLM_F_DUMP : 0, cmd,
                        version) != nullptr;
  for (const RequestAttr &a : attrs) {
    ok = ok && (a.u64 ? nla_put_u64(msg, a.type, a.value)
                      : nla_put_u32(msg, a.type, static_cast<uint32_t>(a.value))) == 0;
  }
  if (name != nullptr) {
    ok = ok && nla_put_string(msg, name_attr, name) == 0;
  }
  const int sent = ok ? nl_send_auto(sock_, msg) : -NLE_NOMEM;
  const uint32_t seq = nlmsg_hdr(msg)->nlmsg_seq;
  nlmsg_free(msg);
  if (sent < 0) {
    throw Failure(fmt::format("cannot send a netlink request: {}", nl_geterror(sent)));
  }
  return seq;
}

size_t Netlink::ReceiveOne() {
  for (;;) {
    sockaddr_nl from{};
    socklen_t from_len = sizeof(from);
    const ssize_t n = recvfrom(fd(), buf_.data(), buf_.size(), MSG_TRUNC,
                               reinterpret_cast<sockaddr *>(&from), &from_len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      throw Failure(fmt::format("receiving from the kernel: {}", Errno(errno)));
    }
    if (static_cast<size_t>(n) > buf_.size()) {
      throw Failure(fmt::format("a reply of {} bytes does not fit in {} bytes", n, buf_.size()));
    }
    if (from.nl_pid == 0) {
      return static_cast<size_t>(n);
    }
  }
}

void Netlink::Resolve() {
  const uint32_t seq =
      Send(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, false, {}, CTRL_ATTR_FAMILY_NAME, HZC_GENL_NAME);
  try {
    for (bool done = false; !done;) {
      const size_t n = ReceiveOne();
      done = DispatchReplies(buf_.data(), n, GENL_ID_CTRL, seq, false,
                             [this](const nlmsghdr *msg) { ids_ = ParseFamily(msg); });
    }
  } catch (const NetlinkError &e) {
    if (e.err() == ENOENT) {
      throw Failure(
          "the hzc generic netlink family is not registered: is hzc.ko loaded? (modprobe hzc)");
    }
    throw Failure(
        fmt::format("cannot resolve the generic netlink family {}: {}", HZC_GENL_NAME, e.what()));
  }
}

void Netlink::Request(uint8_t cmd, bool dump, const std::vector<RequestAttr> &attrs,
                      const MessageHandler &on_message) {
  const uint32_t seq = Send(ids_.family, cmd, HZC_GENL_VERSION, dump, attrs);
  for (bool done = false; !done;) {
    const size_t n = ReceiveOne();
    done = DispatchReplies(buf_.data(), n, ids_.family, seq, dump, on_message);
  }
}

void Netlink::JoinEvents() {
  if (ids_.events_group == 0) {
    throw Failure(fmt::format("the {} family has no \"{}\" multicast group", HZC_GENL_NAME,
                              HZC_GENL_MCGRP_EVENTS));
  }
  (void)nl_socket_set_buffer_size(sock_, kEventBuffer, 0);
  const uint32_t group = ids_.events_group;
  if (setsockopt(fd(), SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) != 0) {
    const int err = errno;
    if (err == EPERM || err == EACCES) {
      throw Failure(
          fmt::format("joining the {} events group needs CAP_SYS_ADMIN (events name every user's "
                      "objects): {}",
                      HZC_GENL_NAME, Errno(err)));
    }
    throw Failure(fmt::format("cannot join the {} events group: {}", HZC_GENL_NAME, Errno(err)));
  }
}

bool Netlink::ReceiveEvents(const MessageHandler &on_message) {
  const ssize_t n = recv(fd(), buf_.data(), buf_.size(), MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0) {
    if (errno == ENOBUFS) {
      return false;
    }
    if (errno == EAGAIN || errno == EINTR) {
      return true;
    }
    throw Failure(fmt::format("receiving events: {}", Errno(errno)));
  }
  if (static_cast<size_t>(n) > buf_.size()) {
    throw Failure(fmt::format("an event of {} bytes does not fit in {} bytes", n, buf_.size()));
  }
  DispatchReplies(buf_.data(), static_cast<size_t>(n), ids_.family, 0, true, on_message);
  return true;
}

}  // namespace hzcctl
