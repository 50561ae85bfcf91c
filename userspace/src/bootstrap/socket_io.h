// SPDX-License-Identifier: Apache-2.0
// The TCP sockets of the bootstrap (the rendezvous, Group): addresses, listening sockets and
// whole-buffer transfers until a deadline. Internal to the bootstrap layer.
#pragma once

#include <hccl/hccl_types.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace hzc::bootstrap {

socklen_t AddrLen(const sockaddr_storage &addr);

// An IPv4 or IPv6 literal, port 0; HCCL_E_PARA naming @text otherwise.
Expected<sockaddr_storage> ParseAddress(const std::string &text);
// "1.2.3.4:5678" or "[::1]:5678" (as EndpointString writes them); HCCL_E_PARA otherwise.
Expected<sockaddr_storage> ParseEndpoint(const std::string &text);
// "1.2.3.4:5678" or "[::1]:5678".
std::string EndpointString(const sockaddr_storage &addr);

// The first up non-loopback IPv4 interface's address, else "127.0.0.1".
std::string DefaultAddress();
// @address if not empty, else HCCL_IF_IP if set, else DefaultAddress().
std::string ChooseAddress(const std::string &address);

// A close-on-exec socket listening on @addr (port 0: an ephemeral one; @reuse: SO_REUSEADDR, for
// a fixed port that recent connections may still hold); *@bound: the address it is bound to.
// HCCL_E_TCP_CONNECT naming @addr when it cannot be made; *@in_use tells EADDRINUSE apart.
Expected<UniqueFd> ListenOn(const sockaddr_storage &addr, bool reuse, sockaddr_storage *bound,
                            bool *in_use = nullptr);

// Send or receive @len bytes at @data, waiting for the socket until @deadline (HCCL_E_TIMEOUT);
// HCCL_E_TCP_TRANSFER when the peer closed the connection or another socket error. Blocking and
// non-blocking sockets alike.
Status SendAll(int fd, const void *data, size_t len,
               std::chrono::steady_clock::time_point deadline);
Status RecvAll(int fd, void *data, size_t len, std::chrono::steady_clock::time_point deadline);

}  // namespace hzc::bootstrap
