// SPDX-License-Identifier: Apache-2.0
// Base fixture of every hzc test: fails a test that leaves file descriptors open.
#pragma once

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hzc/hzc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <string>

namespace hzc::test {

// fd number -> what it points at, for every open descriptor of this process.
inline std::map<int, std::string> OpenFds() {
  std::map<int, std::string> fds;
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return fds;
  }
  const int self = dirfd(dir);
  while (dirent *entry = readdir(dir)) {
    char *end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == self) {
      continue;
    }
    char target[PATH_MAX];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    fds[static_cast<int>(fd)] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
  }
  closedir(dir);
  return fds;
}

class Test : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = OpenFds(); }

  void TearDown() override {
    // The library keeps one descriptor of the device and one of its generation page (see
    // userspace/src/core/generation.h) per process by design.
    const std::string device = hzc_device_path();
    for (const auto &[fd, target] : OpenFds()) {
      auto it = fds_before_.find(fd);
      if ((it == fds_before_.end() || it->second != target) && target != device &&
          target.rfind("/memfd:hzc-generation", 0) != 0) {
        ADD_FAILURE() << "file descriptor " << fd << " (" << target << ") leaked by this test";
      }
    }
  }

 private:
  std::map<int, std::string> fds_before_;
};

}  // namespace hzc::test
