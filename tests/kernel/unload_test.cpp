// SPDX-License-Identifier: GPL-2.0
// rmmod is refused while a file (or a peer mapping) is open and works once none is; the
// module is loaded again from the same file afterwards so later tests find it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <cstdlib>

#include "ktest.h"

namespace hzc::ktest {
namespace {

int DeleteModule() {
  return syscall(SYS_delete_module, "hzc", O_NONBLOCK) == 0 ? 0 : errno;
}

int LoadModule(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno;
  }
  int err = syscall(SYS_finit_module, fd, "", 0) == 0 ? 0 : errno;
  close(fd);
  return err;
}

std::string ModulePath() {
  const char *env = getenv("HZC_MODULE");
  return env != nullptr ? env : HZC_SOURCE_DIR "/kmod/hzc.ko";
}

TEST(Unload, RefusedWhileOpenThenWorksAndReloads) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root";
  }
  const std::string path = ModulePath();
  ASSERT_EQ(access(path.c_str(), R_OK), 0) << path;
  int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  EXPECT_NE(DeleteModule(), 0) << "unloaded while a file is open";
  EXPECT_EQ(access(kSysfsRoot, F_OK), 0);

  // A peer-style mapping alone also keeps the module.
  Reservation res(4 * PageSize(), PROT_READ | PROT_WRITE);
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd, res.base(), res.size(), &reg), 0);
  void *m =
      mmap(nullptr, PageSize(), PROT_READ, MAP_SHARED, fd, static_cast<off_t>(reg.out_mmap_offset));
  ASSERT_NE(m, MAP_FAILED);
  close(fd);
  EXPECT_NE(DeleteModule(), 0) << "unloaded while a mapping exists";
  munmap(m, PageSize());

  ASSERT_EQ(DeleteModule(), 0);
  EXPECT_NE(access(kSysfsRoot, F_OK), 0);
  ASSERT_EQ(LoadModule(path), 0) << path;
  fd = OpenDevice();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(Counter("nr_contexts"), 1);
  close(fd);
}

}  // namespace
}  // namespace hzc::ktest
