// SPDX-License-Identifier: Apache-2.0
// The hand-off of memfds over a process's socket (bootstrap/fd_handoff.h): its request parser,
// which memfds it gives, and between real processes: the given memfd to a process it was told
// of, a refusal for anything else and for a process it was not told of.
#include "bootstrap/fd_handoff.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

class FdHandoffTest : public test::Test {};

std::vector<std::byte> Request(uint32_t magic, int32_t fd, size_t extra = 0) {
  FdRequest r{magic, fd};
  std::vector<std::byte> b(sizeof(r) + extra);
  std::memcpy(b.data(), &r, sizeof(r));
  return b;
}

TEST_F(FdHandoffTest, RequestsAreExactlyOneWellFormedRecord) {
  auto ok = ParseFdRequest(Request(kFdRequestMagic, 7));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), 7);
  EXPECT_EQ(ParseFdRequest(Request(kFdRequestMagic, 7, 1)).status().code(), HCCL_E_REMOTE);
  const std::vector<std::byte> whole = Request(kFdRequestMagic, 7);
  EXPECT_EQ(ParseFdRequest(std::span(whole).first(7)).status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(ParseFdRequest(Request(kFdReplyMagic, 7)).status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(ParseFdRequest(Request(kFdRequestMagic, -1)).status().code(), HCCL_E_REMOTE);
}

TEST_F(FdHandoffTest, OnlyThePublishedMemfdsAreGiven) {
  EXPECT_TRUE(GivenMemfd("/memfd:hzc-physical (deleted)"));
  EXPECT_TRUE(GivenMemfd("/memfd:hzc-directory (deleted)"));
  EXPECT_TRUE(GivenMemfd("/memfd:hzc-mailbox (deleted)"));
  EXPECT_TRUE(GivenMemfd("/memfd:hzc-generation (deleted)"));
  EXPECT_FALSE(GivenMemfd("/memfd:hzc-coll (deleted)"));  // handed to its ranks otherwise
  EXPECT_FALSE(GivenMemfd("/memfd:hzc-physicalx (deleted)"));
  EXPECT_FALSE(GivenMemfd("/memfd:hzc-physical"));
  EXPECT_FALSE(GivenMemfd("/tmp/hzc-physical (deleted)"));
  EXPECT_FALSE(GivenMemfd("socket:[12345]"));
  EXPECT_FALSE(GivenMemfd(""));
}

// A child this process was told of takes its hzc-physical memfd (and sees its bytes); it is
// refused another memfd, a pipe and a number that is no descriptor; a child it was not told of
// is refused everything.
TEST_F(FdHandoffTest, GivesItsMemfdsToTheProcessesItWasToldOfOnly) {
  const int phys = memfd_create("hzc-physical", MFD_CLOEXEC);
  const int other = memfd_create("hzc-coll", MFD_CLOEXEC);
  ASSERT_GE(phys, 0);
  ASSERT_GE(other, 0);
  ASSERT_EQ(pwrite(phys, "hzc!", 4, 0), 4);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t parent = getpid();
  auto child = [&](bool told) {
    const pid_t pid = fork();
    if (pid == 0) {
      char c = 0;
      if (read(go[0], &c, 1) != 1) {
        _exit(10);
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      auto fd = RequestFd(parent, phys, deadline);
      if (!told) {
        _exit(fd.ok() ? 11 : fd.status().code() == HCCL_E_REMOTE ? 0 : 12);
      }
      char got[4] = {};
      if (!fd.ok() || pread(fd.value().get(), got, 4, 0) != 4 || std::memcmp(got, "hzc!", 4) != 0) {
        _exit(13);
      }
      for (int refused : {other, go[1], 999}) {
        auto r = RequestFd(parent, refused, deadline);
        if (r.ok() || r.status().code() != HCCL_E_REMOTE) {
          _exit(14);
        }
      }
      _exit(0);
    }
    return pid;
  };
  const pid_t told = child(true), stranger = child(false);
  ASSERT_TRUE(ServeFds({told}).ok());
  ASSERT_EQ(write(go[1], "gg", 2), 2);
  for (pid_t pid : {told, stranger}) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << ": " << status;
  }
  close(go[0]);
  close(go[1]);
  close(phys);
  close(other);
}

}  // namespace
}  // namespace hzc::bootstrap
