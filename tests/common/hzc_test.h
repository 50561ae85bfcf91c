// SPDX-License-Identifier: Apache-2.0
// Base fixture of every hzc test: fails a test that leaves file descriptors open or that makes
// the library log an error it did not declare with ExpectErrorLog().
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hzc/hzc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace hzc::test {

// A POSIX regular expression of the prefix of the library's log lines (base/log.h), up to and
// including "hzc ": "host:pid:tid [rank] hzc " with rank a number or "-".
inline constexpr const char *kLogPrefixRe = "[^ :]+:[0-9]+:[0-9]+ \\[(-|[0-9]+)\\] hzc ";

// Whether @line is an error line of the library.
inline bool IsErrorLogLine(const std::string &line) {
  return line.find(" hzc ERROR ") != std::string::npos;
}

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

// Whether @fd is the socket the library hands its memfds out on (abstract "hzc-fd-...").
inline bool IsFdHandoffSocket(int fd) {
  sockaddr_un a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0 || a.sun_family != AF_UNIX ||
      len <= offsetof(sockaddr_un, sun_path) + 1 || a.sun_path[0] != '\0') {
    return false;
  }
  return std::string(a.sun_path + 1, len - offsetof(sockaddr_un, sun_path) - 1)
             .rfind("hzc-fd-", 0) == 0;
}

class Test : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = OpenFds();
    StartLogCapture();
  }

  void TearDown() override {
    CheckLog();
    // The library keeps one descriptor of the device, one of its generation page (see
    // userspace/src/transport/generation.h) and one each of its memory directory and mailbox
    // (userspace/src/transport/memfd_directory.h) per process by design, and the socket that
    // hands its memfds to peers (userspace/src/bootstrap/fd_handoff.h). The device path is the one
    // hzc_device_path() reports, spelled out here so that tests of the layers below the API
    // (which do not link it) share this fixture.
    const char *env_device = std::getenv("HZC_DEVICE");
    const std::string device =
        env_device != nullptr && *env_device != '\0' ? env_device : "/dev/hzc";
    for (const auto &[fd, target] : OpenFds()) {
      auto it = fds_before_.find(fd);
      if ((it == fds_before_.end() || it->second != target) && target != device &&
          target.rfind("/memfd:hzc-generation", 0) != 0 &&
          target.rfind("/memfd:hzc-directory", 0) != 0 &&
          target.rfind("/memfd:hzc-mailbox", 0) != 0 && !IsFdHandoffSocket(fd)) {
        ADD_FAILURE() << "file descriptor " << fd << " (" << target << ") leaked by this test";
      }
    }
  }

  // Declare that this test makes the library log error lines containing @text (for example
  // "HcclCommSetMemoryRange: "). Every error line the library logs (here or in child
  // processes that inherit stderr) must contain a declared text, and every declared text
  // must appear in at least one error line.
  void ExpectErrorLog(std::string text) { expected_errors_.push_back(std::move(text)); }

 private:
  // Send fd 2 to a memfd until TearDown, which copies it back to the real stderr.
  void StartLogCapture() {
    if (!GTEST_FLAG_GET(internal_run_death_test).empty()) {
      return;  // a death test's child: its stderr is what the death test examines
    }
    std::fflush(stderr);
    capture_fd_ = memfd_create("hzc-test-stderr", MFD_CLOEXEC);
    saved_stderr_ = fcntl(2, F_DUPFD_CLOEXEC, 3);
    // O_APPEND: child processes write through the same open file, and a memfd's shared file
    // offset is not updated atomically, so two lines written at once could land at the same
    // offset, the later one over the other (a lost log line).
    if (capture_fd_ < 0 || saved_stderr_ < 0 || fcntl(capture_fd_, F_SETFL, O_APPEND) != 0 ||
        dup2(capture_fd_, 2) < 0) {
      ADD_FAILURE() << "cannot capture stderr";
    }
  }

  void CheckLog() {
    if (capture_fd_ < 0 || saved_stderr_ < 0) {
      return;
    }
    std::fflush(stderr);
    dup2(saved_stderr_, 2);
    close(saved_stderr_);
    std::string log;
    char buf[4096];
    ssize_t n;
    off_t off = 0;
    while ((n = pread(capture_fd_, buf, sizeof(buf), off)) > 0) {
      log.append(buf, static_cast<size_t>(n));
      off += n;
    }
    close(capture_fd_);
    capture_fd_ = saved_stderr_ = -1;
    if (!log.empty() && write(2, log.data(), log.size()) < 0) {
      // nothing else to do: the log is also examined below
    }
    std::vector<bool> seen(expected_errors_.size());
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      if (!IsErrorLogLine(line)) {
        continue;
      }
      bool declared = false;
      for (size_t i = 0; i < expected_errors_.size(); ++i) {
        if (line.find(expected_errors_[i]) != std::string::npos) {
          seen[i] = declared = true;
        }
      }
      if (!declared) {
        ADD_FAILURE() << "unexpected error logged: " << line;
      }
    }
    for (size_t i = 0; i < expected_errors_.size() && !IsSkipped(); ++i) {
      if (!seen[i]) {
        ADD_FAILURE() << "expected an error log line containing \"" << expected_errors_[i] << "\"";
      }
    }
  }

  std::map<int, std::string> fds_before_;
  std::vector<std::string> expected_errors_;
  int capture_fd_ = -1;
  int saved_stderr_ = -1;
};

}  // namespace hzc::test
