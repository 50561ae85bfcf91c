// SPDX-License-Identifier: Apache-2.0
// What the guest's RDMA side looks like to the communicator tests: whether an RDMA device
// exists (soft-RoCE rxe0 under scripts/vm-run) and which RDMA objects `rdma resource show`
// lists.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace hzc::test {

// True when /sys/class/infiniband lists a device and HZC_RDMA_DEVICE is unset, i.e. when
// the library's links include RDMA queue pairs.
inline bool RdmaLinksExpected() {
  if (std::getenv("HZC_RDMA_DEVICE") != nullptr) {
    return false;
  }
  DIR *dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) {
    return false;
  }
  bool found = false;
  while (dirent *e = readdir(dir)) {
    found |= e->d_name[0] != '.';
  }
  closedir(dir);
  return found;
}

// Number of objects of @kind ("qp", "cq", "pd", "mr") that `rdma -j resource show` lists and
// @match accepts; -1 when the tool fails or prints something else than its JSON (one array
// per line, one line per device).
inline int CountRdmaObjects(const std::string &kind,
                            const std::function<bool(const nlohmann::json &)> &match) {
  const std::string cmd = "rdma -j resource show " + kind + " 2>/dev/null";
  FILE *f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    return -1;
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
  }
  if (pclose(f) != 0) {
    return -1;
  }
  int count = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    const auto json = nlohmann::json::parse(line, nullptr, false);
    if (!json.is_array()) {
      return -1;
    }
    for (const auto &obj : json) {
      count += obj.is_object() && match(obj) ? 1 : 0;
    }
  }
  return count;
}

// Objects of @kind of task @pid. The kernel files each object under the thread that made it:
// objects made by another thread carry its thread id, and none once that thread has exited.
inline int RdmaObjects(const std::string &kind, pid_t pid) {
  return CountRdmaObjects(kind, [&](const nlohmann::json &o) {
    return o.contains("pid") && o["pid"].is_number() && o["pid"].get<pid_t>() == pid;
  });
}

// Objects of @kind made by user processes, including those whose thread has exited (kernel
// objects carry the owner's name in "comm" but no "pid").
inline int RdmaUserObjects(const std::string &kind) {
  return CountRdmaObjects(
      kind, [](const nlohmann::json &o) { return o.contains("pid") || !o.contains("comm"); });
}

}  // namespace hzc::test
