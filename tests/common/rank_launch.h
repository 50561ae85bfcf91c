// SPDX-License-Identifier: Apache-2.0
// Starting ranks as fresh processes: a test forks and execs one rank binary per rank (the root
// info on the command line as hex, root_info_hex.h) and collects the exit statuses.
#pragma once

#include <gtest/gtest.h>
#include <hccl/hccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "root_info_hex.h"

namespace hzc::test {

// Fork one process per rank; in the child, @prepare(rank) (may setenv) and then exec @argv(rank).
// Returns the pids in rank order (a failed fork fails the test and returns what was started).
inline std::vector<pid_t> StartRanks(uint32_t nranks,
                                     const std::function<std::vector<std::string>(uint32_t)> &argv,
                                     const std::function<void(uint32_t)> &prepare = nullptr) {
  std::vector<pid_t> pids;
  for (uint32_t r = 0; r < nranks; ++r) {
    const std::vector<std::string> args = argv(r);
    std::vector<char *> cargs;
    for (const std::string &a : args) {
      cargs.push_back(const_cast<char *>(a.c_str()));
    }
    cargs.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      break;
    }
    if (pid == 0) {
      if (prepare) {
        prepare(r);
      }
      execv(cargs[0], cargs.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Wait for every pid; the exit status of each (-signal when killed, -1000 if waitpid failed).
inline std::vector<int> WaitRanks(const std::vector<pid_t> &pids) {
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
      statuses.push_back(-1000);
    } else if (WIFEXITED(status)) {
      statuses.push_back(WEXITSTATUS(status));
    } else {
      statuses.push_back(WIFSIGNALED(status) ? -WTERMSIG(status) : -1000);
    }
  }
  return statuses;
}

// Run @nranks processes of @binary (ROOT_INFO_HEX NRANKS RANK, then @more) on a fresh root info,
// each after @prepare(rank) (may setenv) in its child; every rank's exit status, as WaitRanks.
inline std::vector<int> RunRankProcesses(const char *binary, uint32_t nranks,
                                         const std::vector<std::string> &more,
                                         const std::function<void(uint32_t)> &prepare = nullptr) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = RootInfoToHex(root);
  const auto pids = StartRanks(
      nranks,
      [&](uint32_t r) {
        std::vector<std::string> argv{binary, hex, std::to_string(nranks), std::to_string(r)};
        argv.insert(argv.end(), more.begin(), more.end());
        return argv;
      },
      prepare);
  std::vector<int> statuses = WaitRanks(pids);
  // HcclGetRootInfo's root thread closes its socket just after serving the last rank: let it
  // finish before the test fixture looks for leaked descriptors.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return statuses;
}

// tests/unit/api/rank_main.cpp's ranks (ROOT_HEX NRANKS RANK): @nranks of them in one
// communicator, on two simulated servers (HZC_HOST_ID, odd ranks on the second) when
// @two_servers; every rank must exit with @expect. @transport (optional): HZC_TRANSPORT of the
// ranks.
inline void RunRankMain(const char *binary, uint32_t nranks, bool two_servers, int expect,
                        const char *transport = nullptr) {
  const std::vector<int> statuses = RunRankProcesses(binary, nranks, {}, [&](uint32_t r) {
    setenv("HZC_HOST_ID", two_servers && r % 2 ? "server-b" : "server-a", 1);
    if (transport != nullptr) {
      setenv("HZC_TRANSPORT", transport, 1);
    }
  });
  for (int status : statuses) {
    EXPECT_EQ(status, expect);
  }
  EXPECT_EQ(statuses.size(), nranks);
}

// The last lines of the log at @path of rank @rank on stderr (CI shows the output, not the
// files).
inline void PrintLogTail(const std::string &path, uint32_t rank) {
  constexpr size_t kLines = 20;
  std::ifstream in(path);
  std::vector<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > kLines) {
      tail.erase(tail.begin());
    }
  }
  std::fprintf(stderr, "--- the last %zu lines of rank %u's log:\n", tail.size(), rank);
  for (const auto &line : tail) {
    std::fprintf(stderr, "rank %u: %s\n", rank, line.c_str());
  }
}

}  // namespace hzc::test
