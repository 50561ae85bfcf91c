// SPDX-License-Identifier: Apache-2.0
// The lines a piece of code writes to fd 2 (the library's log), for tests that count them.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace hzc::test {

// The lines written to fd 2 while @run runs. They are written on to the real fd 2 afterwards
// (so a fixture that checks the log still sees them); fd 2 is restored however @run ends.
inline std::vector<std::string> StderrLinesOf(const std::function<void()> &run) {
  std::fflush(stderr);
  UniqueFd capture(memfd_create("hzc-test-stderr-lines", MFD_CLOEXEC));
  UniqueFd saved(fcntl(2, F_DUPFD_CLOEXEC, 3));
  if (!capture.valid() || !saved.valid() || dup2(capture.get(), 2) != 2) {
    ADD_FAILURE() << "cannot capture fd 2";
    run();
    return {};
  }
  struct Restore {
    int saved;
    ~Restore() {
      std::fflush(stderr);
      dup2(saved, 2);
    }
  };
  {
    const Restore restore{saved.get()};
    run();
  }
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  for (off_t off = 0; (n = pread(capture.get(), buf, sizeof(buf), off)) > 0; off += n) {
    text.append(buf, static_cast<size_t>(n));
  }
  if (!text.empty()) {
    (void)!write(2, text.data(), text.size());
  }
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// How many of @lines contain @text.
inline size_t LinesContaining(const std::vector<std::string> &lines, const std::string &text) {
  return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [&](const std::string &l) {
    return l.find(text) != std::string::npos;
  }));
}

// The sum of the numbers N in @lines' "<before>N<after>" (a summary of lines left out).
inline uint64_t SumOfCounts(const std::vector<std::string> &lines, const std::string &before,
                            const std::string &after) {
  uint64_t sum = 0;
  for (const std::string &l : lines) {
    const size_t at = l.find(before);
    if (at == std::string::npos) {
      continue;
    }
    const size_t from = at + before.size();
    const size_t end = l.find(after, from);
    if (end != std::string::npos && end > from) {
      sum += std::stoull(l.substr(from, end - from));
    }
  }
  return sum;
}

}  // namespace hzc::test
