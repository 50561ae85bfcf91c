// SPDX-License-Identifier: Apache-2.0
// A forked child process for tests of what spans processes (pidfds, descriptor hand-offs,
// shared mappings): it runs a function and exits with its result; a pipe each way carries
// 64-bit words between it and the test. The destructor kills a child that is still running
// and reaps it, so a failed assertion never leaves one behind.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>

namespace hzc::test {

class ForkedChild {
 public:
  // The child's side: words from the test and to it.
  struct Pipes {
    int in = -1;
    int out = -1;
  };

  // Fork; the child runs @fn and _exits with its return value.
  explicit ForkedChild(const std::function<int(Pipes)> &fn) {
    int down[2] = {-1, -1};
    int up[2] = {-1, -1};
    if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0) {
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      close(down[1]);
      close(up[0]);
      _exit(fn(Pipes{.in = down[0], .out = up[1]}));
    }
    close(down[0]);
    close(up[1]);
    to_child_ = down[1];
    from_child_ = up[0];
  }
  ForkedChild(const ForkedChild &) = delete;
  ForkedChild &operator=(const ForkedChild &) = delete;
  ~ForkedChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    Close(&to_child_);
    Close(&from_child_);
  }

  pid_t pid() const { return pid_; }
  bool Send(uint64_t word) const { return Write(to_child_, word); }
  // A word from the child, or false after @timeout_ms or when it closed its end.
  bool Receive(uint64_t *word, int timeout_ms = 10000) const {
    return Read(from_child_, word, timeout_ms);
  }
  // Reap the child: its exit status (128 + signal number if a signal ended it).
  int Wait() {
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, 0) != pid_) {
      return -1;
    }
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // Wait until the child has exited without reaping it.
  bool WaitExited() const {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) == 0;
  }

  // For the child's side.
  static bool Write(int fd, uint64_t word) {
    return write(fd, &word, sizeof(word)) == sizeof(word);
  }
  static bool Read(int fd, uint64_t *word, int timeout_ms = 10000) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    return poll(&p, 1, timeout_ms) == 1 && read(fd, word, sizeof(*word)) == sizeof(*word);
  }

 private:
  static void Close(int *fd) {
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  }
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

}  // namespace hzc::test
