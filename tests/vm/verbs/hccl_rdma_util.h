// SPDX-License-Identifier: Apache-2.0
// Helpers of the HCCL-level RDMA guest tests (hccl_rdma_vm_test.cpp and its rank program
// hccl_rdma_rank.cpp): whether the machine has an RDMA device, and the RDMA objects a process
// holds according to iproute2's `rdma resource show`. Public headers only: the rank program
// links nothing but libhzc.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "rdma_tool.h"

namespace hzc::hccl_rdma_test {

// Thread ids of process @pid (the kernel files each RDMA object under the thread that made
// it, so objects a library thread made carry that thread's id).
inline std::set<pid_t> Tasks(pid_t pid) {
  std::set<pid_t> out = {pid};
  const std::string path = "/proc/" + std::to_string(pid) + "/task";
  DIR *dir = opendir(path.c_str());
  if (dir == nullptr) {
    return out;
  }
  while (dirent *e = readdir(dir)) {
    if (e->d_name[0] != '.') {
      out.insert(static_cast<pid_t>(std::atoi(e->d_name)));
    }
  }
  closedir(dir);
  return out;
}

// Count the objects of the threads of process @pid in `rdma -j resource show KIND` output
// @text; -1 when it is not the tool's JSON (one array per line, one line per device; objects
// of user threads carry "pid").
inline int CountForPid(const std::string &text, pid_t pid) {
  const std::set<pid_t> tasks = Tasks(pid);
  return test::CountRdmaObjects(text, [&](const nlohmann::json &obj) {
    return obj.contains("pid") && obj["pid"].is_number() &&
           tasks.count(obj["pid"].get<pid_t>()) != 0;
  });
}

// Number of RDMA objects of @kind ("qp", "cq", "pd", "mr") that `rdma -j resource show KIND`
// lists for the threads of process @pid; -1 when the tool fails. (Objects of a thread that
// has exited carry no pid and are not counted.)
inline int RdmaResources(const std::string &kind, pid_t pid) {
  std::string text;
  if (!test::RunTool("rdma -j resource show " + kind + " 2>/dev/null", &text)) {
    return -1;
  }
  return CountForPid(text, pid);
}

// "" when process @pid holds no QP, CQ, MR or PD; else what it holds ("qp 2, cq 1"). One
// shell runs the tool once per kind; a line "#KIND" precedes each output, "#failed" follows a
// failed run.
inline std::string RdmaLeftovers(pid_t pid) {
  const std::vector<std::string> kinds = {"qp", "cq", "mr", "pd"};
  std::string cmd = "for k in";
  for (const auto &k : kinds) {
    cmd += " " + k;
  }
  cmd += "; do echo \"#$k\"; rdma -j resource show $k 2>/dev/null || echo '#failed'; done";
  std::string text;
  const bool ran = test::RunTool(cmd, &text);
  std::vector<std::string> outputs(kinds.size());
  std::vector<bool> seen(kinds.size()), failed(kinds.size());
  size_t current = kinds.size();
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line == "#failed" && current < kinds.size()) {
      failed[current] = true;
      continue;
    }
    bool header = false;
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (line == "#" + kinds[i]) {
        current = i;
        seen[i] = header = true;
      }
    }
    if (!header && current < kinds.size()) {
      outputs[current] += line + "\n";
    }
  }
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const int n = ran && seen[i] && !failed[i] ? CountForPid(outputs[i], pid) : -1;
    if (n != 0) {
      out += (out.empty() ? "" : ", ") + kinds[i] + " " +
             (n < 0 ? std::string("? (rdma resource show failed)") : std::to_string(n));
    }
  }
  return out;
}

}  // namespace hzc::hccl_rdma_test
