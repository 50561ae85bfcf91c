// SPDX-License-Identifier: GPL-2.0
// Helpers of the hzc.ko guest tests: raw ioctls, sysfs reads, struct-size sweeps.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/hzc.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace hzc::ktest {

inline constexpr const char *kDevice = "/dev/hzc";
inline constexpr const char *kSysfsRoot = "/sys/kernel/hzc";

// ioctl() returning 0 or the errno, so tests can EXPECT_EQ(Ioctl(...), EINVAL).
inline int Ioctl(int fd, unsigned long cmd, void *arg) {
  return ioctl(fd, cmd, arg) == 0 ? 0 : errno;
}

// First line of a sysfs (or procfs) file, without the newline; empty on error.
inline std::string ReadLine(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline long long ReadNumber(const std::string &path) {
  const std::string line = ReadLine(path);
  return line.empty() ? -1 : std::stoll(line, nullptr, 0);
}

inline long long Counter(const std::string &name) {
  return ReadNumber(std::string(kSysfsRoot) + "/" + name);
}

inline int OpenDevice() {
  return open(kDevice, O_RDWR | O_CLOEXEC);
}

// A struct of type T preceded by its size, followed by `extra` bytes of tail, as a
// future (or older) caller would pass it.
template <typename T>
class Sized {
 public:
  explicit Sized(uint32_t size, uint8_t tail = 0) : buf_(std::max<size_t>(size, sizeof(T)) + 8, 0) {
    std::memset(buf_.data() + sizeof(T), tail, buf_.size() - sizeof(T));
    Get()->size = size;
  }
  T *Get() { return reinterpret_cast<T *>(buf_.data()); }
  uint8_t *Tail() { return buf_.data() + sizeof(T); }
  size_t TailSize() const { return buf_.size() - sizeof(T) - 8; }

 private:
  std::vector<uint8_t> buf_;
};

// Fixture owning one open file of the device.
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = OpenDevice();
    ASSERT_GE(fd_, 0) << kDevice << ": " << strerror(errno) << " (is hzc.ko loaded?)";
  }
  void TearDown() override {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  int fd_ = -1;
};

}  // namespace hzc::ktest
