// SPDX-License-Identifier: Apache-2.0
// hzcctl's text and JSON output (the same keys and values in both), its command line and its
// exit statuses, the last by running the built hzcctl (HZCCTL_PATH) on the host, where hzc.ko
// is not loaded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "format.h"
#include "run_program.h"

namespace hzcctl {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

Range SampleRange(bool privileged) {
  Range r;
  r.id = 12;
  r.pid = 345;
  r.uid = 1000;
  r.size = 2097152;
  r.activated = 1048576;
  r.nr_activations = 1;
  r.state = "active";
  r.domains = {3, 5};
  if (privileged) {
    r.base = 0x7f0000200000ULL;
  }
  return r;
}

// "key value key value ..." of one text line, as strings.
std::map<std::string, std::string> Pairs(const std::string &line) {
  std::istringstream in(line);
  std::map<std::string, std::string> out;
  std::string key, value;
  while (in >> key >> value) {
    EXPECT_EQ(out.count(key), 0u) << "key " << key << " twice in: " << line;
    out[key] = value;
  }
  return out;
}

// A JSON value as the text output writes it.
std::string AsText(const json &v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_array()) {
    std::string s;
    for (const json &e : v) {
      s += (s.empty() ? "" : ",") + AsText(e);
    }
    return s;
  }
  return v.dump();
}

// Every key of the text line is in the JSON object with the same value, and every JSON key
// except @json_only is in the text line.
void ExpectSameFields(const std::string &text, const json &j,
                      const std::vector<std::string> &json_only = {}) {
  const auto pairs = Pairs(text);
  for (const auto &[key, value] : pairs) {
    ASSERT_TRUE(j.contains(key)) << key << " missing from " << j.dump();
    EXPECT_EQ(AsText(j[key]), value) << key;
  }
  for (const auto &[key, value] : j.items()) {
    const bool skip = std::find(json_only.begin(), json_only.end(), key) != json_only.end();
    if (!skip) {
      EXPECT_EQ(pairs.count(key), 1u) << key << " missing from " << text;
    }
  }
}

TEST(HzcctlFormat, RangeText) {
  EXPECT_EQ(ToText(SampleRange(true)),
            "range 12 pid 345 uid 1000 size 2097152 activated 1048576 nr_activations 1 "
            "state active domains 3,5 base 0x7f0000200000");
  Range r = SampleRange(false);
  r.domains.clear();
  EXPECT_EQ(ToText(r),
            "range 12 pid 345 uid 1000 size 2097152 activated 1048576 nr_activations 1 "
            "state active");
}

TEST(HzcctlFormat, RangeJsonMatchesText) {
  const json j = json::parse(ToJson(SampleRange(true)).dump());
  EXPECT_EQ(j["range"], 12);
  EXPECT_EQ(j["base"], "0x7f0000200000");
  EXPECT_EQ(j["domains"], json::array({3, 5}));
  ExpectSameFields(ToText(SampleRange(true)), j);
  const json unpriv = json::parse(ToJson(SampleRange(false)).dump());
  EXPECT_FALSE(unpriv.contains("base"));
  ExpectSameFields(ToText(SampleRange(false)), unpriv);
}

TEST(HzcctlFormat, ActivationMemberStat) {
  Activation a{.range = 4,
               .pid = 10,
               .uid = 0,
               .offset = 8192,
               .size = 4096,
               .addr = 0x7f0000202000ULL,
               .cookie = 0xab};
  EXPECT_EQ(ToText(a),
            "range 4 offset 8192 size 4096 pid 10 uid 0 cookie 0xab addr 0x7f0000202000");
  ExpectSameFields(ToText(a), json::parse(ToJson(a).dump()));
  a.addr.reset();
  EXPECT_FALSE(json::parse(ToJson(a).dump()).contains("addr"));
  ExpectSameFields(ToText(a), json::parse(ToJson(a).dump()));

  const Member m{.domain = 3, .rank = 1, .pid = 77, .uid = 65534};
  EXPECT_EQ(ToText(m), "domain 3 rank 1 pid 77 uid 65534");
  ExpectSameFields(ToText(m), json::parse(ToJson(m).dump()));

  const Stat s{2, 1, 3, 1, 1, 1048576};
  EXPECT_EQ(ToText(s),
            "abi_version 2 nr_contexts 1 nr_ranges 3 nr_activations 1 nr_domains 1 "
            "pinned_bytes 1048576");
  ExpectSameFields(ToText(s), json::parse(FormatOne(s, Style::kJson)));
}

TEST(HzcctlFormat, DomainWithMembers) {
  Domain d;
  d.seq = 3;
  d.id = std::array<uint64_t, 2>{0x1122334455667788ULL, 0x99aabbccddeeff00ULL};
  d.state = "live";
  d.nranks = 2;
  d.joined = 2;
  d.creator_uid = 1000;
  std::vector<Domain> domains{d};
  AttachMembers(&domains, {{.domain = 3, .rank = 0, .pid = 10, .uid = 1000},
                           {.domain = 4, .rank = 0, .pid = 11, .uid = 1000},
                           {.domain = 3, .rank = 1, .pid = 12, .uid = 1000}});
  ASSERT_EQ(domains[0].members.size(), 2u) << "the member of domain 4 is not domain 3's";
  const std::string text = ToText(domains[0]);
  EXPECT_EQ(text,
            "domain 3 state live nranks 2 joined 2 creator_uid 1000 "
            "id 99aabbccddeeff001122334455667788\n"
            "    rank 0 pid 10 uid 1000\n"
            "    rank 1 pid 12 uid 1000");
  const json j = json::parse(ToJson(domains[0]).dump());
  ExpectSameFields(text.substr(0, text.find('\n')), j, {"members"});
  ASSERT_EQ(j["members"].size(), 2u);
  EXPECT_EQ(j["members"][1]["rank"], 1);
  EXPECT_EQ(j["members"][1]["pid"], 12);
}

TEST(HzcctlFormat, Events) {
  Event e;
  e.seq = 41;
  e.cmd = HZC_NL_CMD_EVENT_RANGE_SET;
  e.range = SampleRange(true);
  const std::string text = ToText(e);
  EXPECT_EQ(text.rfind("seq 41 event range_set range 12 pid 345", 0), 0u) << text;
  ExpectSameFields(text, json::parse(FormatOne(e, Style::kJson)));

  Event broken;
  broken.seq = 42;
  broken.cmd = HZC_NL_CMD_EVENT_MEMBER_BROKEN;
  broken.member = Member{.domain = 2, .rank = 1, .pid = 99, .uid = 0};
  broken.domain_state = "broken";
  EXPECT_EQ(ToText(broken), "seq 42 event member_broken domain 2 rank 1 pid 99 uid 0 state broken");
  ExpectSameFields(ToText(broken), json::parse(FormatOne(broken, Style::kJson)));

  Event release;
  release.seq = 43;
  release.cmd = HZC_NL_CMD_EVENT_CONTEXT_RELEASE;
  release.pid = 99;
  release.uid = 1;
  EXPECT_EQ(ToText(release), "seq 43 event context_release pid 99 uid 1");
  // One line per event with -j.
  const std::string line = FormatOne(release, Style::kJson);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST(HzcctlFormat, Lists) {
  const std::vector<Range> none;
  EXPECT_EQ(FormatList(none, Style::kText), "");
  EXPECT_EQ(FormatList(none, Style::kJson), "[]\n");
  const std::vector<Range> two{SampleRange(false), SampleRange(true)};
  const std::string text = FormatList(two, Style::kText);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  const std::string one_line = FormatList(two, Style::kJson);
  EXPECT_EQ(std::count(one_line.begin(), one_line.end(), '\n'), 1);
  const std::string pretty = FormatList(two, Style::kPretty);
  EXPECT_GT(std::count(pretty.begin(), pretty.end(), '\n'), 10);
  EXPECT_EQ(json::parse(one_line), json::parse(pretty));
  EXPECT_EQ(json::parse(one_line).size(), 2u);
}

TEST(HzcctlFormat, LostEvents) {
  EXPECT_EQ(FormatLost(3, Style::kText), "lost 3 events\n");
  EXPECT_THAT(FormatLost(0, Style::kText), HasSubstr("ENOBUFS"));
  EXPECT_EQ(json::parse(FormatLost(3, Style::kJson))["lost"], 3);
  EXPECT_EQ(json::parse(FormatLost(0, Style::kJson))["reason"], "ENOBUFS");
}

// ---- command line

std::variant<Command, int> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hzcctl");
  std::vector<char *> argv;
  for (std::string &a : args) {
    argv.push_back(a.data());
  }
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

Command ParseOk(const std::vector<std::string> &args) {
  auto r = Parse(args);
  if (const int *status = std::get_if<int>(&r)) {
    ADD_FAILURE() << "exit status " << *status;
    return {};
  }
  return std::get<Command>(r);
}

int ParseStatus(const std::vector<std::string> &args, std::string *err = nullptr) {
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  auto r = Parse(args);
  const std::string e = testing::internal::GetCapturedStderr();
  testing::internal::GetCapturedStdout();
  if (err != nullptr) {
    *err = e;
  }
  const int *status = std::get_if<int>(&r);
  return status != nullptr ? *status : -1;
}

TEST(HzcctlCli, Commands) {
  Command c = ParseOk({"range", "show", "pid", "345", "id", "12"});
  EXPECT_EQ(c.what, What::kRange);
  EXPECT_EQ(c.style, Style::kText);
  EXPECT_EQ(c.pid, 345u);
  EXPECT_EQ(c.id, 12u);
  c = ParseOk({"-j", "range"});
  EXPECT_EQ(c.style, Style::kJson);
  EXPECT_FALSE(c.pid.has_value());
  c = ParseOk({"activation", "range", "4", "-p"});
  EXPECT_EQ(c.what, What::kActivation);
  EXPECT_EQ(c.range, 4u);
  EXPECT_EQ(c.style, Style::kPretty);
  c = ParseOk({"domain", "show", "7", "--json"});
  EXPECT_EQ(c.what, What::kDomain);
  EXPECT_EQ(c.id, 7u);
  c = ParseOk({"member", "domain", "2"});
  EXPECT_EQ(c.what, What::kMember);
  EXPECT_EQ(c.domain, 2u);
  EXPECT_EQ(ParseOk({"stat"}).what, What::kStat);
  EXPECT_EQ(ParseOk({"monitor", "-j"}).what, What::kMonitor);
}

TEST(HzcctlCli, UsageErrorsExit2WithOneLine) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"range", "pid"},
      {"range", "pid", "12x"},
      {"range", "pid", "-1"},
      {"range", "pid", "1", "pid", "2"},
      {"range", "range", "1"},
      {"activation", "id", "1"},
      {"domain", "show", "3", "4"},
      {"domain", "seq"},
      {"stat", "now"},
      {"monitor", "show"},
      {"--frobnicate", "stat"},
  };
  for (const auto &args : bad) {
    std::string err;
    EXPECT_EQ(ParseStatus(args, &err), kExitUsage) << testing::PrintToString(args);
    EXPECT_EQ(err.rfind("hzcctl: ", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  std::string err;
  ParseStatus({"range", "pid", "12x"}, &err);
  EXPECT_THAT(err, HasSubstr("pid '12x'"));
}

TEST(HzcctlCli, HelpAndVersionExit0) {
  EXPECT_EQ(ParseStatus({"--help"}), kExitOk);
  EXPECT_EQ(ParseStatus({"range", "--help"}), kExitOk);
  EXPECT_EQ(ParseStatus({"--version"}), kExitOk);
}

// ---- the program itself

bool ModuleLoaded() {
  struct stat st {};
  return stat("/sys/kernel/hzc", &st) == 0 || stat("/sys/module/hzc", &st) == 0;
}

TEST(HzcctlProgram, WithoutTheModuleEveryCommandExits1) {
  if (ModuleLoaded()) {
    GTEST_SKIP() << "hzc.ko is loaded on this machine";
  }
  for (const std::vector<std::string> &args :
       std::vector<std::vector<std::string>>{{"stat"},
                                             {"range", "show"},
                                             {"-j", "range", "show", "id", "1"},
                                             {"activation"},
                                             {"domain", "show", "1"},
                                             {"member"},
                                             {"monitor"}}) {
    std::vector<std::string> argv{HZCCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const hzc::test::ProgramResult r = hzc::test::RunProgram(argv);
    EXPECT_EQ(r.status, kExitError) << testing::PrintToString(args);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "hzcctl: the hzc generic netlink family is not registered: is hzc.ko loaded? "
              "(modprobe hzc)\n");
  }
}

TEST(HzcctlProgram, UsageHelpVersion) {
  hzc::test::ProgramResult r = hzc::test::RunProgram({HZCCTL_PATH, "range", "show", "pid"});
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("pid needs a value"));
  r = hzc::test::RunProgram({HZCCTL_PATH});
  EXPECT_EQ(r.status, kExitUsage);
  r = hzc::test::RunProgram({HZCCTL_PATH, "--version"});
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("hzcctl "));
  r = hzc::test::RunProgram({HZCCTL_PATH, "--help"});
  EXPECT_EQ(r.status, kExitOk);
  for (const char *cmd : {"range", "activation", "domain", "member", "stat", "monitor"}) {
    EXPECT_THAT(r.out, HasSubstr(cmd));
  }
}

}  // namespace
}  // namespace hzcctl
