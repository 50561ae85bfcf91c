// SPDX-License-Identifier: Apache-2.0
// Helpers of the verbs guest tests: ranks as forked processes, a kernel domain per test,
// activated buffers, and the RDMA resources a process holds per `rdma resource show`.
#pragma once

#include <fcntl.h>
#include <linux/hzc.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/errno_string.h"
#include "device/device.h"
#include "rdma_tool.h"
#include "verbs/board.h"
#include "verbs/links.h"

namespace hzc::verbs::test {

inline std::array<uint64_t, 2> RandomDomainId() {
  std::array<uint64_t, 2> id{};
  while (id[0] == 0 && id[1] == 0) {
    if (getrandom(id.data(), sizeof(id), 0) != sizeof(id)) {
      id = {static_cast<uint64_t>(getpid()), static_cast<uint64_t>(time(nullptr))};
    }
  }
  return id;
}

// A rank's membership of a kernel domain through its own /dev/hzc; leaves and closes on
// destruction.
class Member {
 public:
  // Empty error() on success.
  Member(Device::DomainId id, uint32_t rank, uint32_t nranks)
      : id_(id), rank_(rank), nranks_(nranks) {
    auto device = Device::Open("/dev/hzc");
    if (!device.ok()) {
      error_ = device.status().message();
      return;
    }
    device_ = std::move(*device);
    if (Status st = device_->JoinDomain(id, rank, nranks); !st.ok()) {
      error_ = st.message();
    }
  }
  const Device &device() const { return *device_; }
  const Device::DomainId &domain() const { return id_; }
  uint32_t rank() const { return rank_; }
  uint32_t nranks() const { return nranks_; }
  // The board of the membership, for the tests' own exchanges.
  Board board() const { return Board(*device_, id_, rank_, nranks_); }
  // Links::Establish for this member.
  Expected<std::unique_ptr<Links>> Establish(const LinkOptions &options) const {
    return Links::Establish(*device_, id_, rank_, nranks_, options);
  }
  const std::string &error() const { return error_; }
  int fd() const { return device_->fd(); }

 private:
  std::unique_ptr<Device> device_;
  Device::DomainId id_;
  uint32_t rank_;
  uint32_t nranks_;
  std::string error_;
};

// Shared anonymous memory registered as an hzc range and activated (pinned, published).
class ActivatedBuffer {
 public:
  ActivatedBuffer(int fd, size_t length) : fd_(fd), length_(length) {
    void *p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      error_ = "mmap: " + ErrnoString(errno);
      return;
    }
    base_ = static_cast<uint8_t *>(p);
    hzc_range_register reg{};
    reg.size = sizeof(reg);
    reg.base = reinterpret_cast<uintptr_t>(base_);
    reg.length = length;
    if (ioctl(fd, HZC_IOC_RANGE_REGISTER, &reg) != 0) {
      error_ = "range register: " + ErrnoString(errno);
      return;
    }
    registered_ = true;
    hzc_activate act{};
    act.size = sizeof(act);
    act.va = reg.base;
    act.length = length;
    if (ioctl(fd, HZC_IOC_ACTIVATE, &act) != 0) {
      error_ = "activate: " + ErrnoString(errno);
      return;
    }
    activated_ = true;
  }
  ~ActivatedBuffer() {
    if (activated_) {
      hzc_deactivate arg{};
      arg.size = sizeof(arg);
      arg.va = reinterpret_cast<uintptr_t>(base_);
      ioctl(fd_, HZC_IOC_DEACTIVATE, &arg);
    }
    if (registered_) {
      hzc_range_unregister arg{};
      arg.size = sizeof(arg);
      arg.base = reinterpret_cast<uintptr_t>(base_);
      ioctl(fd_, HZC_IOC_RANGE_UNREGISTER, &arg);
    }
    if (base_ != nullptr) {
      munmap(base_, length_);
    }
  }
  ActivatedBuffer(const ActivatedBuffer &) = delete;
  ActivatedBuffer &operator=(const ActivatedBuffer &) = delete;

  uint8_t *data() const { return base_; }
  size_t length() const { return length_; }
  const std::string &error() const { return error_; }

 private:
  int fd_;
  size_t length_;
  uint8_t *base_ = nullptr;
  bool registered_ = false;
  bool activated_ = false;
  std::string error_;
};

// Run @fn(rank) for each rank in @ranks, each in a forked child; a child's returned string
// ("" = success) comes back through a pipe. A child that runs past @limit is killed. Ranks
// that died without reporting get "killed by signal N" / "exited with N".
inline std::vector<std::string> RunRanks(const std::vector<uint32_t> &ranks,
                                         const std::function<std::string(uint32_t)> &fn,
                                         std::chrono::seconds limit) {
  std::vector<std::string> results(ranks.size());
  std::vector<pid_t> pids(ranks.size(), -1);
  std::vector<int> pipes(ranks.size(), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      results[i] = "pipe: " + ErrnoString(errno);
      continue;
    }
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string out;
      try {
        out = fn(ranks[i]);
      } catch (const std::exception &e) {
        out = std::string("exception: ") + e.what();
      }
      out = "R" + out;  // never empty, so a silent death is told apart
      ssize_t unused = write(fds[1], out.data(), out.size());
      (void)unused;
      _exit(0);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      results[i] = "fork: " + ErrnoString(errno);
      continue;
    }
    pids[i] = pid;
    pipes[i] = fds[0];
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (pipes[i] < 0) {
      continue;
    }
    std::string got;
    bool timed_out = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd pfd{.fd = pipes[i], .events = POLLIN, .revents = 0};
      const int n = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
      if (n == 0) {
        timed_out = true;
        break;
      }
      char buf[4096];
      const ssize_t r = n > 0 ? read(pipes[i], buf, sizeof(buf)) : -1;
      if (r < 0 && errno == EINTR) {
        continue;
      }
      if (r <= 0) {
        break;
      }
      got.append(buf, static_cast<size_t>(r));
    }
    close(pipes[i]);
    if (timed_out) {
      kill(pids[i], SIGKILL);
    }
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (timed_out) {
      results[i] = "rank " + std::to_string(ranks[i]) + " ran past the time limit (killed)";
    } else if (!got.empty()) {
      results[i] = got.substr(1);
    } else if (WIFSIGNALED(status)) {
      results[i] = "killed by signal " + std::to_string(WTERMSIG(status));
    } else {
      results[i] = "exited with " + std::to_string(WEXITSTATUS(status)) + " without a result";
    }
  }
  return results;
}

// RunRanks for ranks @ranks of a fresh domain of @nranks ranks: each child joins the domain
// and runs @fn(member).
inline std::vector<std::string> RunMembers(const std::vector<uint32_t> &ranks, uint32_t nranks,
                                           const std::function<std::string(const Member &)> &fn,
                                           std::chrono::seconds limit) {
  const auto id = RandomDomainId();
  return RunRanks(
      ranks,
      [&](uint32_t rank) -> std::string {
        Member member(id, rank, nranks);
        if (!member.error().empty()) {
          return member.error();
        }
        return fn(member);
      },
      limit);
}

inline std::vector<uint32_t> AllRanks(uint32_t n) {
  std::vector<uint32_t> r(n);
  for (uint32_t i = 0; i < n; ++i) {
    r[i] = i;
  }
  return r;
}

// Number of RDMA objects of @kind ("qp", "cq", "pd", "mr") that `rdma resource show` lists
// for process @pid; -1 when the tool fails.
inline int RdmaResources(const std::string &kind, pid_t pid) {
  return hzc::test::ShowAndCountRdmaObjects(
      kind, [&](const nlohmann::json &o) { return hzc::test::RdmaObjectOf(o, pid); });
}

// "" when process @pid holds no QP, CQ, PD or MR; else what it holds.
inline std::string Leftovers(pid_t pid) {
  std::string out;
  for (const char *kind : {"qp", "cq", "pd", "mr"}) {
    const int n = RdmaResources(kind, pid);
    if (n != 0) {
      out += std::string(out.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    }
  }
  return out;
}

// "" when this process holds no QP, CQ, PD or MR; else "left @when: " and what it holds.
inline std::string NoLeftovers(const std::string &when) {
  const std::string left = Leftovers(getpid());
  return left.empty() ? "" : "left " + when + ": " + left;
}

}  // namespace hzc::verbs::test
