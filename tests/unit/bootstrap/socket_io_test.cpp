// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/socket_io.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "stderr_lines.h"

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

// A listener on loopback served by a HelloReader whose hellos are 8 bytes, each connection given
// 100 ms; a connection to it.
struct ReaderAndPeer {
  ReaderAndPeer() {
    sockaddr_storage addr{};
    auto &in = reinterpret_cast<sockaddr_in &>(addr);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sockaddr_storage bound{};
    auto l = ListenOn(addr, false, &bound);
    EXPECT_TRUE(l.ok()) << l.status().message();
    listener = std::move(*l);
    HelloReader::Options o;
    o.where = "test";
    o.hello_time = kHelloTime;
    o.max_pending = 4;
    o.header = 8;
    o.size = [](std::span<const std::byte>) -> Expected<size_t> { return size_t{8}; };
    auto r = HelloReader::Open(listener.get(), std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().message();
    reader.emplace(std::move(*r));
    auto fd = Dial(bound, Clock::now() + std::chrono::seconds(5));
    EXPECT_TRUE(fd.ok()) << fd.status().message();
    peer = std::move(*fd);
    // The reader accepts the connection; nothing has come on it yet.
    auto none = reader->Next(Clock::now() + std::chrono::milliseconds(20));
    EXPECT_TRUE(none.ok() && !*none);
  }
  using Clock = HelloReader::Clock;
  static constexpr std::chrono::milliseconds kHelloTime{100};
  UniqueFd listener;
  std::optional<HelloReader> reader;
  UniqueFd peer;
};

TEST(HelloReaderTest, AHelloThatWaitsInTheSocketPastItsDeadlineIsTaken) {
  ReaderAndPeer t;
  const std::array<std::byte, 8> hello{std::byte{1}, std::byte{2}};
  ASSERT_TRUE(SendAll(t.peer.get(), hello.data(), hello.size(),
                      ReaderAndPeer::Clock::now() + std::chrono::seconds(1))
                  .ok());
  // The reader's thread does not run (a loaded host) until the deadline has long passed.
  std::this_thread::sleep_for(3 * ReaderAndPeer::kHelloTime);
  auto got = t.reader->Next(ReaderAndPeer::Clock::now() + std::chrono::milliseconds(500));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value()) << "the hello was dropped";
  EXPECT_EQ((*got)->data.size(), hello.size());
  EXPECT_EQ((*got)->data[1], std::byte{2});
}

TEST(HelloReaderTest, ASilentConnectionIsDroppedAtItsDeadline) {
  ReaderAndPeer t;
  std::this_thread::sleep_for(3 * ReaderAndPeer::kHelloTime);
  auto got = t.reader->Next(ReaderAndPeer::Clock::now() + std::chrono::milliseconds(50));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  std::byte b{};
  const Status st =
      RecvAll(t.peer.get(), &b, 1, ReaderAndPeer::Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(st.code(), HCCL_E_TCP_TRANSFER) << st.message();  // closed, not still waiting
}

// A thread waiting in Next for a long time returns at once when the listener is shut down (how
// the bootstrap's listener thread is stopped, rather than waking it every few milliseconds).
TEST(HelloReaderTest, AWaitEndsOnceTheListenerIsShutDown) {
  ReaderAndPeer t;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    shutdown(t.listener.get(), SHUT_RDWR);
  });
  const auto start = ReaderAndPeer::Clock::now();
  auto got = t.reader->Next(start + std::chrono::seconds(60));
  stopper.join();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->has_value());
  EXPECT_LT(ReaderAndPeer::Clock::now() - start, std::chrono::seconds(30));
}

// A deadline that has passed still takes a hello that is there: one look, no wait.
TEST(HelloReaderTest, APassedDeadlineTakesWhatIsThere) {
  ReaderAndPeer t;
  const std::array<std::byte, 8> hello{std::byte{7}};
  ASSERT_TRUE(SendAll(t.peer.get(), hello.data(), hello.size(),
                      ReaderAndPeer::Clock::now() + std::chrono::seconds(1))
                  .ok());
  std::optional<HelloReader::Hello> got;
  // The bytes may take a moment on loopback: looks, each with a deadline already passed.
  for (int i = 0; i < 1000 && !got; ++i) {
    auto next = t.reader->Next(ReaderAndPeer::Clock::now() - std::chrono::seconds(1));
    ASSERT_TRUE(next.ok()) << next.status().message();
    got = std::move(*next);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data[0], std::byte{7});
}

// A connection to @to from source address @from (any of 127/8 is this host's).
UniqueFd DialFrom(const char *from, const sockaddr_storage &to) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, from, &src.sin_addr);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr *>(&src), sizeof(src)), 0);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<const sockaddr *>(&to), sizeof(sockaddr_in)), 0);
  return fd;
}

// A loopback listener whose HelloReader has 4 places for 8-byte hellos, 30 s each, and knows
// 127.0.0.1 as a peer's host when @known.
struct FourPlaces {
  explicit FourPlaces(bool known) {
    sockaddr_storage addr{};
    auto &in = reinterpret_cast<sockaddr_in &>(addr);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    auto l = ListenOn(addr, false, &bound);
    EXPECT_TRUE(l.ok()) << l.status().message();
    if (!l.ok()) {
      return;
    }
    listener = std::move(*l);
    HelloReader::Options o;
    o.where = "test";
    o.hello_time = std::chrono::seconds(30);
    o.max_pending = 4;
    o.header = 8;
    o.size = [](std::span<const std::byte>) -> Expected<size_t> { return size_t{8}; };
    if (known) {
      o.known.push_back(addr);
    }
    auto r = HelloReader::Open(listener.get(), std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) {
      reader.emplace(std::move(*r));
    }
  }
  // A short wait in which nobody has said anything.
  void Look() {
    auto next = reader->Next(HelloReader::Clock::now() + std::chrono::milliseconds(20));
    EXPECT_TRUE(next.ok() && !*next);
  }
  sockaddr_storage bound{};
  UniqueFd listener;
  std::optional<HelloReader> reader;
};

// A host that is not a peer's (127.0.0.2) opens many silent connections while a peer's
// (127.0.0.1) waits before its hello: with the peers' hosts known, the stranger's connections
// push out only each other and the peer's hello is read; without, the peer's connection, the
// oldest, is pushed out (so the test tells the two apart).
TEST(HelloReaderTest, AnotherHostsConnectionsPushOutOnlyEachOther) {
  for (bool known : {true, false}) {
    SCOPED_TRACE(known ? "the peers' hosts known" : "no hosts known");
    FourPlaces t(known);
    ASSERT_TRUE(t.reader.has_value());
    auto &reader = t.reader;
    const sockaddr_storage &bound = t.bound;
    using Clock = HelloReader::Clock;
    const auto look = [&] { t.Look(); };
    UniqueFd peer = DialFrom("127.0.0.1", bound);
    look();
    std::vector<UniqueFd> flood;
    for (int i = 0; i < 12; ++i) {
      flood.push_back(DialFrom("127.0.0.2", bound));
      look();
    }
    const std::array<std::byte, 8> hello{std::byte{9}};
    // (Where the reader closed it, the bytes still leave; its reset comes after.)
    (void)SendAll(peer.get(), hello.data(), hello.size(), Clock::now() + std::chrono::seconds(1));
    auto got = reader->Next(Clock::now() + std::chrono::milliseconds(500));
    ASSERT_TRUE(got.ok()) << got.status().message();
    if (known) {
      ASSERT_TRUE(got->has_value()) << "the peer's connection was pushed out";
      EXPECT_EQ((*got)->data[0], std::byte{9});
      EXPECT_TRUE((*got)->known);
    } else {
      EXPECT_FALSE(got->has_value());
    }
  }
}

// Every place taken by a peer's host's connection: a new one from another host is the one
// turned away, and every peer's hello is still read.
TEST(HelloReaderTest, WhenEveryWaitingConnectionIsAPeersAStrangersNewOneIsTurnedAway) {
  FourPlaces t(true);
  ASSERT_TRUE(t.reader.has_value());
  auto &reader = t.reader;
  const sockaddr_storage &bound = t.bound;
  using Clock = HelloReader::Clock;
  const auto look = [&] { t.Look(); };
  std::vector<UniqueFd> peers;
  for (int i = 0; i < 4; ++i) {
    peers.push_back(DialFrom("127.0.0.1", bound));
    look();
  }
  UniqueFd stranger = DialFrom("127.0.0.2", bound);
  look();
  pollfd p{stranger.get(), POLLIN, 0};
  char c = 0;
  EXPECT_TRUE(poll(&p, 1, 5000) == 1 && recv(stranger.get(), &c, 1, 0) == 0)
      << "the stranger's connection was kept";
  for (auto &peer : peers) {
    const std::array<std::byte, 8> hello{std::byte{5}};
    ASSERT_TRUE(
        SendAll(peer.get(), hello.data(), hello.size(), Clock::now() + std::chrono::seconds(1))
            .ok());
    auto got = reader->Next(Clock::now() + std::chrono::seconds(2));
    ASSERT_TRUE(got.ok() && got->has_value()) << "a peer's connection was pushed out";
  }
}

// A host that opens and closes connections as fast as it can gets at most kDroppedLines lines
// a second in the log; the next line after that second says how many more were dropped.
TEST(HelloReaderTest, AFloodOfDroppedConnectionsLogsAFewLinesASecond) {
  FourPlaces t(false);
  ASSERT_TRUE(t.reader.has_value());
  constexpr int kFlood = 60;
  // @count connections closed at once (no hello), then the reader's passes over them (well
  // within a second).
  const auto flood = [&](int count) {
    for (int i = 0; i < count; ++i) {
      DialFrom("127.0.0.2", t.bound).reset();
    }
    for (int i = 0; i < 2 + count / 8; ++i) {
      t.Look();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  const auto first = test::StderrLinesOf([&] { flood(kFlood); });
  const auto took = std::chrono::steady_clock::now() - t0;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto next = test::StderrLinesOf([&] { flood(1); });
  const std::string line = "dropped a connection from 127.0.0.2";
  const std::string more = "more connection(s) without a line each";
  const size_t lines = test::LinesContaining(first, line) + test::LinesContaining(next, line);
  const uint64_t skipped =
      test::SumOfCounts(first, "dropped ", more) + test::SumOfCounts(next, "dropped ", more);
  EXPECT_EQ(lines + skipped, static_cast<size_t>(kFlood + 1)) << "each drop logged or counted";
  EXPECT_EQ(test::LinesContaining(next, line), 1U);
  if (took < std::chrono::milliseconds(900)) {  // else the flood spanned seconds (a loaded host)
    EXPECT_EQ(test::LinesContaining(first, line), static_cast<size_t>(HelloReader::kDroppedLines));
    EXPECT_EQ(test::SumOfCounts(next, "dropped ", more),
              static_cast<uint64_t>(kFlood - HelloReader::kDroppedLines));
  } else {
    EXPECT_LT(test::LinesContaining(first, line), static_cast<size_t>(kFlood));
  }
}

}  // namespace
}  // namespace hzc::bootstrap

// SendToEach: a peer that never reads (its socket buffers fill) fails at the deadline alone;
// the others, read as they come, get every byte before it, and one whose peer closed fails at
// once.
TEST(SendToEachTest, APeerThatDoesNotReadDelaysNoOther) {
  std::array<std::array<int, 2>, 4> pairs{};
  for (auto &p : pairs) {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p.data()), 0);
  }
  close(pairs[3][1]);  // the closed peer
  std::vector<std::byte> data(8 << 20);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<std::byte>(i * 7);
  }
  std::array<std::vector<std::byte>, 2> got;
  std::array<std::thread, 2> readers;
  for (size_t r = 0; r < readers.size(); ++r) {
    readers[r] = std::thread([&, r] {
      got[r].resize(data.size());
      ASSERT_TRUE(
          hzc::bootstrap::RecvAll(pairs[r + 1][1], got[r].data(), got[r].size(),
                                  std::chrono::steady_clock::now() + std::chrono::seconds(30))
              .ok());
    });
  }
  const int fds[] = {pairs[0][0], pairs[1][0], pairs[2][0], pairs[3][0]};
  const auto start = std::chrono::steady_clock::now();
  const auto result =
      hzc::bootstrap::SendToEach(fds, data, start + std::chrono::milliseconds(1500));
  for (auto &t : readers) {
    t.join();
  }
  ASSERT_EQ(result.size(), 4u);
  EXPECT_EQ(result[0].code(), HCCL_E_TIMEOUT) << result[0].message();
  EXPECT_TRUE(result[1].ok()) << result[1].message();
  EXPECT_TRUE(result[2].ok()) << result[2].message();
  EXPECT_EQ(result[3].code(), HCCL_E_TCP_TRANSFER) << result[3].message();
  EXPECT_EQ(got[0], data);
  EXPECT_EQ(got[1], data);
  for (auto &p : pairs) {
    close(p[0]);
    if (&p != &pairs[3]) {
      close(p[1]);
    }
  }
}
