// SPDX-License-Identifier: Apache-2.0
// Running a program from a test without a shell: its argv, optionally as another user (uid =
// gid, no supplementary groups, set in the child before exec), its stdout and stderr
// captured and its exit status.  A Program runs in the background until Stop().
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hzc::test {

struct ProgramResult {
  int status = -1;  // exit status, 128 + signal if a signal ended it, -1 if it did not run
  std::string out;
  std::string err;
};

class Program {
 public:
  // Starts @argv (argv[0] is the path); as @uid if given.
  explicit Program(const std::vector<std::string> &argv, std::optional<uid_t> uid = std::nullopt) {
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    if (argv.empty() || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      if (uid && (setgroups(0, nullptr) != 0 || setresgid(*uid, *uid, *uid) != 0 ||
                  setresuid(*uid, *uid, *uid) != 0)) {
        _exit(126);
      }
      std::vector<char *> args;
      for (const std::string &a : argv) {
        args.push_back(const_cast<char *>(a.c_str()));
      }
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (int fd : {out_, err_}) {
      if (fd >= 0) {
        close(fd);
      }
    }
  }

  pid_t pid() const { return pid_; }

  // Reads what the program wrote so far (waits up to @wait_ms for more) into result().
  void Drain(int wait_ms = 0) {
    pollfd p[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    while (poll(p, 2, wait_ms) > 0) {
      bool any = false;
      for (int i = 0; i < 2; ++i) {
        if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP)) != 0) {
          char buf[4096];
          const ssize_t n = read(p[i].fd, buf, sizeof(buf));
          if (n > 0) {
            (i == 0 ? result_.out : result_.err).append(buf, static_cast<size_t>(n));
            any = true;
          } else {
            p[i].fd = -1;  // end of file
          }
        }
      }
      if (!any) {
        break;
      }
    }
  }

  // Waits until stdout holds @text (or @timeout_ms passes): true if it does.
  bool WaitForOutput(const std::string &text, int timeout_ms = 60000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (result_.out.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= end) {
        return false;
      }
      Drain(50);
    }
    return true;
  }

  // Sends @sig (unless 0), waits for the end (SIGKILL after @timeout_ms) and returns what
  // it wrote and its status.
  ProgramResult Stop(int sig = 0, int timeout_ms = 120000) {
    if (pid_ <= 0) {
      return result_;
    }
    if (sig != 0) {
      kill(pid_, sig);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int st = 0;
    for (;;) {
      Drain(20);
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_ || r < 0) {
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        kill(pid_, SIGKILL);
      }
    }
    pid_ = -1;
    Drain(0);
    result_.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return result_;
  }

  const ProgramResult &result() const { return result_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int err_ = -1;
  ProgramResult result_;
};

// Runs @argv to its end.
inline ProgramResult RunProgram(const std::vector<std::string> &argv,
                                std::optional<uid_t> uid = std::nullopt) {
  return Program(argv, uid).Stop();
}

}  // namespace hzc::test
