// SPDX-License-Identifier: Apache-2.0
// The lines a piece of code writes to fd 2 (the library's log), for tests that count them.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace hzc::test {

// The lines written to fd 2 while @run runs (fd 2 is restored afterwards).
inline std::vector<std::string> StderrLinesOf(const std::function<void()> &run) {
  std::fflush(stderr);
  const int capture = memfd_create("hzc-test-stderr-lines", MFD_CLOEXEC);
  const int saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
  const bool ok = capture >= 0 && saved >= 0 && dup2(capture, 2) == 2;
  run();
  std::fflush(stderr);
  std::string text;
  if (ok) {
    dup2(saved, 2);
    char buf[4096];
    ssize_t n = 0;
    for (off_t off = 0; (n = pread(capture, buf, sizeof(buf), off)) > 0; off += n) {
      text.append(buf, static_cast<size_t>(n));
    }
  }
  if (capture >= 0) {
    close(capture);
  }
  if (saved >= 0) {
    close(saved);
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

}  // namespace hzc::test
