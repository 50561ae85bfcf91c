// SPDX-License-Identifier: GPL-2.0
// HZC_IOC_INFO and the rules common to every ioctl (size, flags, mm binding).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ktest.h"

namespace hzc::ktest {
namespace {

using InfoTest = DeviceTest;

TEST_F(InfoTest, ReportsVersionPageSizeAndLimits) {
  hzc_info info{};
  info.size = sizeof(info);
  ASSERT_EQ(Ioctl(fd_, HZC_IOC_INFO, &info), 0);
  EXPECT_EQ(info.out_abi_version, static_cast<uint32_t>(HZC_ABI_VERSION));
  EXPECT_EQ(info.out_abi_version, 2u) << "ABI version 2: commands must encode @size";
  EXPECT_EQ(static_cast<long long>(info.out_abi_version), Counter("abi_version"));
  EXPECT_EQ(info.out_page_size, static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_NE(info.out_features & HZC_FEATURE_INFO, 0u);
  EXPECT_NE(info.out_features & HZC_FEATURE_ACTIVATION_COOKIE, 0u);
  EXPECT_EQ(static_cast<long long>(info.out_max_ranges),
            ReadNumber("/sys/module/hzc/parameters/max_ranges"));
  EXPECT_EQ(static_cast<long long>(info.out_max_domains),
            ReadNumber("/sys/module/hzc/parameters/max_domains"));
  EXPECT_EQ(static_cast<long long>(info.out_max_pinned_bytes),
            ReadNumber("/sys/module/hzc/parameters/max_pinned_bytes"));
  EXPECT_GE(info.out_max_ranks, 2u);
  EXPECT_EQ(info.out_max_blob_size, 4096u);
  EXPECT_EQ(info.size, sizeof(info));
  EXPECT_EQ(info.flags, 0u);
}

TEST_F(InfoTest, UnknownCommandIsEnotty) {
  hzc_info info{};
  info.size = sizeof(info);
  EXPECT_EQ(Ioctl(fd_, _IOWR(HZC_IOCTL_TYPE, 0x7f, struct hzc_info), &info), ENOTTY);
  EXPECT_EQ(Ioctl(fd_, _IOWR(HZC_IOCTL_TYPE + 1, HZC_CMD_INFO, struct hzc_info), &info), ENOTTY);
  EXPECT_EQ(Ioctl(fd_, _IOWR(HZC_IOCTL_TYPE, 0xff, struct hzc_info), &info), ENOTTY);
  // The whole command is matched, not only its number.
  EXPECT_EQ(Ioctl(fd_, _IO(HZC_IOCTL_TYPE, HZC_CMD_INFO), &info), ENOTTY) << "_IO";
  EXPECT_EQ(Ioctl(fd_, _IOR(HZC_IOCTL_TYPE, HZC_CMD_INFO, struct hzc_info), &info), ENOTTY)
      << "_IOR";
  EXPECT_EQ(Ioctl(fd_, _IOW(HZC_IOCTL_TYPE, HZC_CMD_INFO, struct hzc_info), &info), ENOTTY)
      << "_IOW";
}

TEST_F(InfoTest, EncodedSizeMustEqualSizeField) {
  Sized<hzc_info> arg(sizeof(hzc_info) + 8);
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_INFO, arg.Get()), EINVAL) << "encodes sizeof, @size is 8 more";
  EXPECT_EQ(arg.Get()->out_abi_version, 0u) << "no output on error";
  hzc_info info{};
  info.size = sizeof(info);
  EXPECT_EQ(Ioctl(fd_, CmdWithSize(HZC_IOC_INFO, sizeof(info) - 8), &info), EINVAL);
  EXPECT_EQ(Ioctl(fd_, CmdWithSize(HZC_IOC_INFO, sizeof(info) + 8), &info), EINVAL);
  EXPECT_EQ(Ioctl(fd_, CmdWithSize(HZC_IOC_INFO, 0), &info), EINVAL);
  EXPECT_EQ(info.out_abi_version, 0u) << "no output on error";
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg.Get()), 0) << "both say sizeof + 8";
}

TEST_F(InfoTest, ShortStructIsEinval) {
  for (uint32_t size : {0u, 4u, 8u, static_cast<uint32_t>(sizeof(hzc_info) - 4)}) {
    Sized<hzc_info> arg(size);
    EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg.Get()), EINVAL) << "size " << size;
    EXPECT_EQ(arg.Get()->out_abi_version, 0u) << "no output on error";
  }
}

TEST_F(InfoTest, LongStructWithGarbageIsE2big) {
  Sized<hzc_info> arg(sizeof(hzc_info) + 8, 0xa5);
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg.Get()), E2BIG);
  EXPECT_EQ(arg.Get()->out_abi_version, 0u);

  Sized<hzc_info> one(sizeof(hzc_info) + 8);
  one.Tail()[7] = 1;
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, one.Get()), E2BIG);
}

TEST_F(InfoTest, LongStructWithZeroTailWorksAndTailIsUntouched) {
  Sized<hzc_info> arg(sizeof(hzc_info) + 8);
  ASSERT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg.Get()), 0);
  EXPECT_EQ(arg.Get()->out_abi_version, static_cast<uint32_t>(HZC_ABI_VERSION));
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(arg.Tail()[i], 0) << "tail byte " << i << " written";
  }
}

// A @size above the page size is refused up front, however the tail looks,
// instead of having the kernel check up to 4 GiB of user memory for zeroes.
// A @size that the command's 14 size bits cannot hold never matches them: EINVAL.
TEST_F(InfoTest, SizeAbovePageSizeIsE2big) {
  const size_t page = PageSize();
  Reservation buf(4 * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(buf.base(), nullptr);
  auto *arg = reinterpret_cast<hzc_info *>(buf.base());
  arg->size = static_cast<uint32_t>(page);
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg), 0) << "a page, zero tail";
  arg->size = static_cast<uint32_t>(page + 1);
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg), E2BIG) << "one byte more than a page, zero tail";
  arg->size = _IOC_SIZEMASK;
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg), E2BIG) << "the largest encodable size";
  arg->size = ~0u;
  EXPECT_EQ(SizedIoctl(fd_, HZC_IOC_INFO, arg), EINVAL) << "4 GiB, not encodable";
}

TEST_F(InfoTest, NonZeroFlagsAreEopnotsupp) {
  for (uint32_t bit = 0; bit < 32; ++bit) {
    hzc_info info{};
    info.size = sizeof(info);
    info.flags = 1u << bit;
    EXPECT_EQ(Ioctl(fd_, HZC_IOC_INFO, &info), EOPNOTSUPP) << "flag bit " << bit;
  }
}

TEST_F(InfoTest, BadPointerIsEfault) {
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_INFO, nullptr), EFAULT);
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_INFO, reinterpret_cast<void *>(8)), EFAULT);
}

TEST_F(InfoTest, ForkedChildGetsEperm) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    hzc_info info{};
    info.size = sizeof(info);
    int err = Ioctl(fd_, HZC_IOC_INFO, &info);
    _exit(err == EPERM ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child's INFO on the parent's context was not EPERM";

  // The parent's context still works.
  hzc_info info{};
  info.size = sizeof(info);
  EXPECT_EQ(Ioctl(fd_, HZC_IOC_INFO, &info), 0);
}

TEST(InfoSysfs, ContextsAreCounted) {
  const long long before = Counter("nr_contexts");
  ASSERT_GE(before, 0) << kSysfsRoot << "/nr_contexts unreadable";
  int a = OpenDevice();
  int b = OpenDevice();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(Counter("nr_contexts"), before + 2);
  close(a);
  close(b);
  EXPECT_EQ(Counter("nr_contexts"), before);
}

TEST(InfoSysfs, DeviceIsWorldReadWrite) {
  struct stat st {};
  ASSERT_EQ(stat(kDevice, &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

}  // namespace
}  // namespace hzc::ktest
