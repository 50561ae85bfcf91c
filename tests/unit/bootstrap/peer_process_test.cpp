// SPDX-License-Identifier: Apache-2.0
// PeerProcess with a forked child: its pidfd, a descriptor taken from it, its death.
#include "bootstrap/peer_process.h"

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using test::ForkedChild;
using PeerProcessTest = test::Test;

// A child that creates a memfd holding "hello", reports its number and waits for a word.
int HoldMemfd(ForkedChild::Pipes pipes) {
  const int fd = memfd_create("peer-process-test", MFD_CLOEXEC);
  if (fd < 0 || write(fd, "hello", 5) != 5 || !ForkedChild::Write(pipes.out, uint64_t(fd))) {
    return 1;
  }
  uint64_t word = 0;
  ForkedChild::Read(pipes.in, &word);
  return 0;
}

TEST_F(PeerProcessTest, TakesADescriptorAndSeesTheExit) {
  ForkedChild child(HoldMemfd);
  uint64_t remote_fd = 0;
  ASSERT_TRUE(child.Receive(&remote_fd));
  auto peer = PeerProcess::Open(child.pid());
  ASSERT_TRUE(peer.ok()) << peer.status().message();
  EXPECT_TRUE(peer->valid());
  EXPECT_EQ(peer->pid(), child.pid());
  EXPECT_FALSE(peer->Exited());
  auto fd = peer->TakeFd(static_cast<int>(remote_fd));
  if (!fd.ok()) {
    GTEST_SKIP() << "pidfd_getfd refused here: " << fd.status().message();
  }
  char buf[8] = {};
  EXPECT_EQ(pread(fd->get(), buf, sizeof(buf), 0), 5);
  EXPECT_STREQ(buf, "hello");
  EXPECT_GE(fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 1);

  ASSERT_TRUE(child.Send(0));
  ASSERT_TRUE(child.WaitExited());
  EXPECT_TRUE(peer->Exited());  // a zombie counts as exited
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_TRUE(peer->Exited());
}

TEST_F(PeerProcessTest, TakeFdOfANonDescriptor) {
  auto self = PeerProcess::Open(getpid());
  ASSERT_TRUE(self.ok()) << self.status().message();
  auto fd = self->TakeFd(4095);
  ASSERT_FALSE(fd.ok());
  // A descriptor the peer does not hold is the peer's fault (its listing named it).
  EXPECT_EQ(fd.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(fd.status().message(), ::testing::HasSubstr("pidfd_getfd of descriptor 4095"));
  EXPECT_THAT(fd.status().message(), ::testing::HasSubstr("holds no such descriptor"));
}

TEST_F(PeerProcessTest, OpenOfAnExitedProcessIsRemote) {
  ForkedChild child([](ForkedChild::Pipes) { return 0; });
  const pid_t pid = child.pid();
  ASSERT_EQ(child.Wait(), 0);
  auto peer = PeerProcess::Open(pid);
  ASSERT_FALSE(peer.ok());
  EXPECT_EQ(peer.status().code(), HCCL_E_REMOTE);
}

TEST_F(PeerProcessTest, FirstExitedSkipsNoneAndLivingOnes) {
  ForkedChild living(HoldMemfd);
  ForkedChild dying(HoldMemfd);
  uint64_t ignored = 0;
  ASSERT_TRUE(living.Receive(&ignored));
  ASSERT_TRUE(dying.Receive(&ignored));
  std::vector<PeerProcess> peers(3);  // [0] stays none
  auto a = PeerProcess::Open(living.pid());
  auto b = PeerProcess::Open(dying.pid());
  ASSERT_TRUE(a.ok() && b.ok());
  peers[1] = std::move(*a);
  peers[2] = std::move(*b);
  EXPECT_FALSE(PeerProcess::FirstExited(peers).has_value());
  EXPECT_FALSE(peers[0].Exited());
  ASSERT_TRUE(dying.Send(0));
  ASSERT_TRUE(dying.WaitExited());
  EXPECT_EQ(PeerProcess::FirstExited(peers), std::optional<size_t>(2));
  EXPECT_FALSE(PeerProcess::FirstExited({}).has_value());
}

}  // namespace
}  // namespace hzc::bootstrap
