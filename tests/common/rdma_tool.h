// SPDX-License-Identifier: Apache-2.0
// The guest's RDMA devices for the tests: their names, and iproute2's `rdma -j resource show
// KIND`, run and its objects visited (one JSON array per line, one line per device).
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hzc::test {

// Names of the RDMA devices in /sys/class/infiniband (soft-RoCE's rxe0 on lo under
// scripts/vm-run; none under scripts/vm-run --no-rxe).
inline std::vector<std::string> RdmaDevices() {
  std::vector<std::string> out;
  DIR *dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) {
    return out;
  }
  while (dirent *e = readdir(dir)) {
    if (e->d_name[0] != '.') {
      out.emplace_back(e->d_name);
    }
  }
  closedir(dir);
  return out;
}

inline bool HaveRdmaDevice() {
  return !RdmaDevices().empty();
}

// Run @cmd through the shell, appending its output to @out; false when it cannot run or exits
// non-zero.
inline bool RunTool(const std::string &cmd, std::string *out) {
  FILE *f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    return false;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    out->append(buf, n);
  }
  return pclose(f) == 0;
}

// Number of objects in the tool's output @text that @match accepts; -1 when a non-blank line
// is not a JSON array.
inline int CountRdmaObjects(const std::string &text,
                            const std::function<bool(const nlohmann::json &)> &match) {
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

// Run `rdma -j resource show @kind` and count the objects @match accepts; -1 when the tool
// fails or prints something else than its JSON.
inline int ShowAndCountRdmaObjects(const std::string &kind,
                                   const std::function<bool(const nlohmann::json &)> &match) {
  std::string text;
  if (!RunTool("rdma -j resource show " + kind + " 2>/dev/null", &text)) {
    return -1;
  }
  return CountRdmaObjects(text, match);
}

// Whether the object names task @pid in its "pid" field.
inline bool RdmaObjectOf(const nlohmann::json &obj, pid_t pid) {
  return obj.contains("pid") && obj["pid"].is_number() && obj["pid"].get<pid_t>() == pid;
}

}  // namespace hzc::test
