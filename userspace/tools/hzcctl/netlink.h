// SPDX-License-Identifier: Apache-2.0
// hzcctl's netlink I/O: one generic netlink socket (libnl-genl-3), the family "hzc" resolved
// through the controller, requests (doit or dump) and the events group.  Replies are walked
// by DispatchReplies, which is pure (a buffer in, messages out) and tested on its own.
#pragma once

#include <linux/netlink.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "objects.h"

struct nl_sock;

namespace hzcctl {

// The kernel refused a request: its errno and, when it sent one, the extended ACK message.
class NetlinkError : public Failure {
 public:
  NetlinkError(int err, std::string extack);
  int err() const { return err_; }
  const std::string &extack() const { return extack_; }

 private:
  int err_;
  std::string extack_;
};

// An attribute of a request (the filters): u32 or u64.
struct RequestAttr {
  int type;
  uint64_t value;
  bool u64;
};

using MessageHandler = std::function<void(const nlmsghdr *)>;

// Walks the messages of one datagram: messages of @family (seq @seq unless @seq is 0) go to
// @on_message, others are skipped.  An NLMSG_ERROR with an error, or an NLMSG_DONE whose
// payload is an error, throws NetlinkError (with the extended ACK's message, if any).
// Returns true once the exchange is over: NLMSG_DONE, an ACK, or (@dump false) the first
// message of the family.
bool DispatchReplies(const void *buf, size_t len, uint16_t family, uint32_t seq, bool dump,
                     const MessageHandler &on_message);

// The family id and the id of its "events" group from a CTRL_CMD_GETFAMILY reply (0 if
// the group is not listed).
struct FamilyIds {
  uint16_t family = 0;
  uint32_t events_group = 0;
};
FamilyIds ParseFamily(const nlmsghdr *msg);

class Netlink {
 public:
  // Opens the socket; throws Failure if the kernel refuses one.
  Netlink();
  ~Netlink();
  Netlink(const Netlink &) = delete;
  Netlink &operator=(const Netlink &) = delete;

  // Resolves the family "hzc"; throws Failure ("... is hzc.ko loaded?") when it is not
  // registered.
  void Resolve();
  // Sends @cmd (a dump if @dump) with @attrs and hands each reply to @on_message.
  void Request(uint8_t cmd, bool dump, const std::vector<RequestAttr> &attrs,
               const MessageHandler &on_message);
  // Joins the "events" group; throws Failure naming CAP_SYS_ADMIN on EPERM.
  void JoinEvents();
  // Receives what is queued (waits for it if @wait): each event to @on_message.  Returns
  // false if the socket's receive buffer overflowed (ENOBUFS: events were lost).
  bool ReceiveEvents(const MessageHandler &on_message);

  int fd() const;
  uint16_t family() const { return ids_.family; }

 private:
  uint32_t Send(uint16_t type, uint8_t cmd, uint8_t version, bool dump,
                const std::vector<RequestAttr> &attrs, int name_attr = 0,
                const char *name = nullptr);
  // recv() of one datagram into buf_; its length.
  size_t ReceiveOne();

  nl_sock *sock_ = nullptr;
  FamilyIds ids_;
  std::vector<char> buf_;
};

}  // namespace hzcctl
