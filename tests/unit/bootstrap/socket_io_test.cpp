// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/socket_io.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

int IntOption(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  EXPECT_EQ(getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

// This host's first IPv4 address that is up and not loopback, if it has one.
std::optional<in_addr> OwnAddress() {
  ifaddrs *all = nullptr;
  if (getifaddrs(&all) != 0) {
    return std::nullopt;
  }
  std::optional<in_addr> found;
  for (const ifaddrs *i = all; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
        (i->ifa_flags & IFF_UP) != 0 && (i->ifa_flags & IFF_LOOPBACK) == 0) {
      found = reinterpret_cast<const sockaddr_in *>(i->ifa_addr)->sin_addr;
    }
  }
  freeifaddrs(all);
  return found;
}

// A connection to a listener on @ip (this host): WatchPeer leaves it without keepalive probes
// or a user timeout (no link between its ends to lose).
void ExpectUnwatched(in_addr ip) {
  sockaddr_storage addr{};
  auto &in = reinterpret_cast<sockaddr_in &>(addr);
  in.sin_family = AF_INET;
  in.sin_addr = ip;
  sockaddr_storage bound{};
  auto listener = ListenOn(addr, false, &bound);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  auto fd = Dial(bound, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  WatchPeer(fd->get());
  EXPECT_EQ(IntOption(fd->get(), SOL_SOCKET, SO_KEEPALIVE), 0);
  EXPECT_EQ(IntOption(fd->get(), IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
}

TEST(WatchPeerTest, ConnectionsWithinThisHostAreNotProbed) {
  ExpectUnwatched({htonl(INADDR_LOOPBACK)});
  if (const auto own = OwnAddress()) {
    SCOPED_TRACE(inet_ntoa(*own));
    ExpectUnwatched(*own);
  }
}

TEST(WatchPeerTest, ASocketThatIsNotConnectedIsLeftAlone) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  WatchPeer(fd);
  EXPECT_EQ(IntOption(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
  close(fd);
}

}  // namespace
}  // namespace hzc::bootstrap
