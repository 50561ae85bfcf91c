// SPDX-License-Identifier: Apache-2.0
// libhzc exports the C API and nothing else, under SONAME libhzc.so.0.
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "hzc_test.h"

namespace {

std::vector<std::string> RunLines(const std::string &command) {
  std::vector<std::string> lines;
  FILE *p = popen(command.c_str(), "r");
  if (p == nullptr) {
    return lines;
  }
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.pop_back();
    }
    lines.push_back(line);
  }
  pclose(p);
  return lines;
}

class ExportsTest : public hzc::test::Test {};

TEST_F(ExportsTest, OnlyApiSymbolsAreExported) {
  const auto symbols =
      RunLines(std::string("nm -D --defined-only --format=posix ") + HZC_LIB_PATH + " 2>&1");
  ASSERT_FALSE(symbols.empty()) << "nm printed nothing for " << HZC_LIB_PATH;
  const std::regex api("^(Hccl[A-Za-z]+|acl[A-Za-z]+|hzc_[a-z_]+)@@HZC_0 T .*");
  const std::regex version_node("^HZC_0 A.*");
  int functions = 0;
  for (const auto &line : symbols) {
    if (std::regex_match(line, version_node)) {
      continue;
    }
    EXPECT_TRUE(std::regex_match(line, api)) << "unexpected export: " << line;
    ++functions;
  }
  EXPECT_GE(functions, 4);
}

// The ACL runtime calls a CANN program may bind at start-up (-Wl,-z,now) are all there.
TEST_F(ExportsTest, AclRuntimeCallsAreExported) {
  std::set<std::string> exported;
  for (const auto &line :
       RunLines(std::string("nm -D --defined-only --format=posix ") + HZC_LIB_PATH + " 2>&1")) {
    exported.insert(line.substr(0, line.find('@')));
  }
  for (const char *name : {"aclInit",
                           "aclFinalize",
                           "aclGetRecentErrMsg",
                           "aclrtGetSocName",
                           "aclrtSetDevice",
                           "aclrtResetDevice",
                           "aclrtGetDevice",
                           "aclrtGetDeviceCount",
                           "aclrtCreateContext",
                           "aclrtDestroyContext",
                           "aclrtSetCurrentContext",
                           "aclrtGetCurrentContext",
                           "aclrtSetDeviceSatMode",
                           "aclrtGetDeviceSatMode",
                           "aclrtCreateStream",
                           "aclrtCreateStreamWithConfig",
                           "aclrtDestroyStream",
                           "aclrtSynchronizeStream",
                           "aclrtSynchronizeStreamWithTimeout",
                           "aclrtSetStreamFailureMode",
                           "aclrtStreamWaitEvent",
                           "aclrtCreateEvent",
                           "aclrtCreateEventWithFlag",
                           "aclrtCreateEventExWithFlag",
                           "aclrtDestroyEvent",
                           "aclrtRecordEvent",
                           "aclrtResetEvent",
                           "aclrtSynchronizeEvent",
                           "aclrtSynchronizeEventWithTimeout",
                           "aclrtQueryEvent",
                           "aclrtQueryEventStatus",
                           "aclrtQueryEventWaitStatus",
                           "aclrtEventElapsedTime",
                           "aclrtMalloc",
                           "aclrtFree",
                           "aclrtMallocHost",
                           "aclrtFreeHost",
                           "aclrtMemcpy",
                           "aclrtMemcpyAsync",
                           "aclrtMemset",
                           "aclrtMemsetAsync",
                           "aclrtGetMemInfo"}) {
    EXPECT_TRUE(exported.contains(name)) << name << " is not exported";
  }
}

TEST_F(ExportsTest, Soname) {
  bool found = false;
  for (const auto &line : RunLines(std::string("readelf -d ") + HZC_LIB_PATH)) {
    if (line.find("(SONAME)") != std::string::npos) {
      found = true;
      EXPECT_NE(line.find("[libhzc.so.0]"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(found) << "no SONAME in " << HZC_LIB_PATH;
}

}  // namespace
