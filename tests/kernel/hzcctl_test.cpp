// SPDX-License-Identifier: GPL-2.0
// hzcctl (HZCCTL_PATH) against the loaded module: objects made through the ioctls are listed
// with their values; -j parses and agrees with the text output and with sysfs; monitor sees
// a scripted sequence of events in order; an unprivileged user sees only its own objects,
// no addresses, and may not monitor.
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ktest.h"
#include "run_program.h"

namespace hzc::ktest {
namespace {

using json = nlohmann::json;
using test::Program;
using test::ProgramResult;
using Fields = std::map<std::string, std::string>;

constexpr size_t kMiB = 1 << 20;

// hzcctl as another user: a copy in a directory everyone may enter, since the build tree may
// lie where only its owner may (a clone in root's home, a `mktemp -d`); removed at exit.
char g_copy_dir[] = "/tmp/hzcctl-test-XXXXXX";

std::string HzcctlForAnyone() {
  static const std::string path = [] {
    if (mkdtemp(g_copy_dir) == nullptr || chmod(g_copy_dir, 0755) != 0) {
      return std::string(HZCCTL_PATH);
    }
    std::atexit([] { std::filesystem::remove_all(g_copy_dir); });
    const std::string copy = std::string(g_copy_dir) + "/hzcctl";
    std::ifstream in(HZCCTL_PATH, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
    out.close();
    if (!out || chmod(copy.c_str(), 0755) != 0) {
      return std::string(HZCCTL_PATH);
    }
    return copy;
  }();
  return path;
}

ProgramResult Hzcctl(std::vector<std::string> args, std::optional<uid_t> uid = std::nullopt) {
  args.insert(args.begin(), uid ? HzcctlForAnyone() : std::string(HZCCTL_PATH));
  return test::RunProgram(args, uid);
}

// Closes a file of the device at the end of a test, also one that ends at a failed ASSERT:
// the objects made through it must not outlive the test.
struct DeviceFile {
  int fd = OpenDevice();
  ~DeviceFile() {
    if (fd >= 0) {
      close(fd);
    }
  }
};

std::string Hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

// "key value ..." pairs of one line of text output.
Fields Pairs(const std::string &line) {
  std::istringstream in(line);
  Fields out;
  std::string key, value;
  while (in >> key >> value) {
    out[key] = value;
  }
  return out;
}

// The objects of text output: one per line that does not start with a space (a domain's
// member lines start with spaces and are left out).
std::vector<Fields> TextObjects(const std::string &text) {
  std::vector<Fields> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      out.push_back(Pairs(line));
    }
  }
  return out;
}

// The object whose @key is @value, or an empty one.
template <typename List>
auto Find(const List &list, const std::string &key, const std::string &value) {
  for (const auto &o : list) {
    if (o.contains(key) && o.at(key) == value) {
      return o;
    }
  }
  return typename List::value_type{};
}

json FindJson(const json &list, const std::string &key, uint64_t value) {
  for (const json &o : list) {
    if (o.contains(key) && o[key] == value) {
      return o;
    }
  }
  return json();
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

// The text line and the JSON object of one object carry the same keys and values (an empty
// domain list is absent from the text).
void ExpectSame(const Fields &text, const json &j, const std::string &what) {
  ASSERT_TRUE(j.is_object()) << what;
  for (const auto &[key, value] : text) {
    ASSERT_TRUE(j.contains(key)) << what << ": " << key;
    EXPECT_EQ(AsText(j[key]), value) << what << ": " << key;
  }
  for (const auto &[key, value] : j.items()) {
    if (key == "members" || (key == "domains" && value.empty())) {
      continue;
    }
    EXPECT_EQ(text.count(key), 1u) << what << ": " << key << " only in JSON";
  }
}

// A range's sysfs files against its JSON object.
void ExpectMatchesSysfs(const json &r) {
  const std::string dir = std::string(kSysfsRoot) + "/ranges/" + AsText(r["range"]);
  EXPECT_EQ(ReadNumber(dir + "/owner_pid"), r["pid"].get<long long>()) << dir;
  EXPECT_EQ(ReadNumber(dir + "/size"), r["size"].get<long long>()) << dir;
  EXPECT_EQ(ReadNumber(dir + "/activated_bytes"), r["activated"].get<long long>()) << dir;
  EXPECT_EQ(ReadNumber(dir + "/nr_activations"), r["nr_activations"].get<long long>()) << dir;
  EXPECT_EQ(ReadLine(dir + "/state"), r["state"].get<std::string>()) << dir;
  std::string domains;
  for (const json &d : r["domains"]) {
    domains += (domains.empty() ? "" : " ") + AsText(d);
  }
  EXPECT_EQ(ReadLine(dir + "/domains"), domains) << dir;
  if (r.contains("base")) {
    EXPECT_EQ(ReadLine(dir + "/base"), r["base"].get<std::string>()) << dir;
  }
}

json ParseJson(const ProgramResult &r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
  return j;
}

// The domain's seq: the name of its sysfs directory.
std::string DomainSeq(DomainId id) {
  const std::string dir = FindDomainDir(id);
  return dir.empty() ? "" : dir.substr(dir.rfind('/') + 1);
}

// One process's objects: two 2 MiB ranges, 128 KiB activated at 64 KiB into the first,
// rank 0 of a one-rank domain.
class HzcctlTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    ASSERT_NE(mem_.base(), nullptr);
    ASSERT_EQ(RegisterRange(fd_, mem_.base(), 2 * kMiB, &r1_), 0);
    ASSERT_EQ(RegisterRange(fd_, mem_.base() + 2 * kMiB, 2 * kMiB, &r2_), 0);
    ASSERT_EQ(Activate(fd_, act(), 128 * 1024, nullptr, kCookie), 0);
    ASSERT_EQ(Join(fd_, domain_, 0, 1), 0);
    seq_ = DomainSeq(domain_);
    ASSERT_NE(seq_, "");
  }
  char *act() const { return mem_.base() + 64 * 1024; }
  std::string id1() const { return std::to_string(r1_.out_id); }
  std::string id2() const { return std::to_string(r2_.out_id); }
  static constexpr uint64_t kCookie = 0xc00c1e;

  Reservation mem_{4 * kMiB, PROT_READ | PROT_WRITE};
  hzc_range_register r1_{};
  hzc_range_register r2_{};
  DomainId domain_ = NewDomainId();
  std::string seq_;
};

TEST_F(HzcctlTest, RangeShowListsThemWithTheirValues) {
  const ProgramResult r = Hzcctl({"range", "show", "pid", std::to_string(getpid())});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<Fields> ranges = TextObjects(r.out);
  ASSERT_EQ(ranges.size(), 2u) << r.out;
  const Fields a = Find(ranges, "range", id1());
  EXPECT_EQ(a.at("pid"), std::to_string(getpid()));
  EXPECT_EQ(a.at("uid"), std::to_string(getuid()));
  EXPECT_EQ(a.at("size"), "2097152");
  EXPECT_EQ(a.at("activated"), "131072");
  EXPECT_EQ(a.at("nr_activations"), "1");
  EXPECT_EQ(a.at("state"), "active");
  EXPECT_EQ(a.at("domains"), seq_);
  EXPECT_EQ(a.at("base"), Hex(reinterpret_cast<uintptr_t>(mem_.base())));
  const Fields b = Find(ranges, "range", id2());
  EXPECT_EQ(b.at("activated"), "0");
  EXPECT_EQ(b.at("nr_activations"), "0");
  EXPECT_EQ(b.at("state"), "registered");
  EXPECT_EQ(b.at("base"), Hex(reinterpret_cast<uintptr_t>(mem_.base() + 2 * kMiB)));

  const ProgramResult one = Hzcctl({"range", "show", "id", id2()});
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(TextObjects(one.out).size(), 1u) << one.out;
  EXPECT_EQ(TextObjects(one.out)[0], b);
  const ProgramResult none = Hzcctl({"range", "show", "id", "999999999"});
  EXPECT_EQ(none.status, 1);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "hzcctl: range 999999999: no such object, or not visible to this user\n");
}

TEST_F(HzcctlTest, JsonMatchesTextAndSysfs) {
  const std::string pid = std::to_string(getpid());
  const ProgramResult text = Hzcctl({"range", "show", "pid", pid});
  const ProgramResult j = Hzcctl({"-j", "range", "show", "pid", pid});
  const ProgramResult pretty = Hzcctl({"range", "show", "pid", pid, "-p"});
  ASSERT_EQ(j.status, 0) << j.err;
  const json ranges = ParseJson(j);
  ASSERT_TRUE(ranges.is_array());
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ParseJson(pretty), ranges);
  const std::vector<Fields> lines = TextObjects(text.out);
  for (const json &r : ranges) {
    ExpectSame(Find(lines, "range", AsText(r["range"])), r, "range " + AsText(r["range"]));
    ExpectMatchesSysfs(r);
  }

  const ProgramResult acts = Hzcctl({"-j", "activation", "show", "range", id1()});
  ASSERT_EQ(acts.status, 0) << acts.err;
  const json a = ParseJson(acts);
  ASSERT_EQ(a.size(), 1u) << acts.out;
  EXPECT_EQ(a[0]["offset"], 64 * 1024);
  EXPECT_EQ(a[0]["size"], 128 * 1024);
  EXPECT_EQ(a[0]["cookie"], Hex(kCookie));
  EXPECT_EQ(a[0]["addr"], Hex(reinterpret_cast<uintptr_t>(act())));
  const ProgramResult act_text = Hzcctl({"activation", "range", id1()});
  ASSERT_EQ(TextObjects(act_text.out).size(), 1u) << act_text.out;
  ExpectSame(TextObjects(act_text.out)[0], a[0], "activation");
}

TEST_F(HzcctlTest, DomainWithItsMembers) {
  const ProgramResult text = Hzcctl({"domain", "show", seq_});
  ASSERT_EQ(text.status, 0) << text.err;
  const std::string pid = std::to_string(getpid());
  EXPECT_EQ(text.out, "domain " + seq_ + " state live nranks 1 joined 1 creator_uid " +
                          std::to_string(geteuid()) + " id " + DomainIdHex(domain_) +
                          "\n    rank 0 pid " + pid + " uid " + std::to_string(getuid()) + "\n");
  const ProgramResult j = Hzcctl({"-j", "domain"});
  ASSERT_EQ(j.status, 0) << j.err;
  const json d = FindJson(ParseJson(j), "domain", std::stoull(seq_));
  ExpectSame(TextObjects(text.out)[0], d, "domain");
  ASSERT_EQ(d["members"].size(), 1u);
  EXPECT_EQ(d["members"][0]["pid"], getpid());
  const ProgramResult members = Hzcctl({"member", "show", "domain", seq_});
  EXPECT_EQ(members.out,
            "domain " + seq_ + " rank 0 pid " + pid + " uid " + std::to_string(getuid()) + "\n");
}

TEST_F(HzcctlTest, StatIsTheSysfsCounters) {
  const ProgramResult r = Hzcctl({"-j", "stat"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json s = ParseJson(r);
  EXPECT_EQ(s["abi_version"], Counter("abi_version"));
  for (const char *name :
       {"nr_contexts", "nr_ranges", "nr_activations", "nr_domains", "pinned_bytes"}) {
    EXPECT_EQ(s[name], Counter(name)) << name;
  }
  EXPECT_EQ(Pairs(Hzcctl({"stat"}).out).at("nr_ranges"), std::to_string(Counter("nr_ranges")));
}

// A scripted sequence seen by `hzcctl -j monitor`: set, activate, join (with a second member
// in a child), kill the child, deactivate, unset, leave.  Every event once, in order, with
// consecutive seqs.
TEST(HzcctlMonitor, SeesTheEventsInOrder) {
  Program monitor({HZCCTL_PATH, "-j", "monitor"});
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  Reservation mem(2 * kMiB, PROT_READ | PROT_WRITE);
  // The monitor has joined once it reports an event of ours: register and unregister a
  // probe until it does.
  hzc_range_register probe{};
  bool joined = false;
  for (int i = 0; i < 200 && !joined; ++i) {
    ASSERT_EQ(RegisterRange(fd, mem.base(), kMiB, &probe), 0);
    ASSERT_EQ(UnregisterRange(fd, mem.base()), 0);
    joined = monitor.WaitForOutput("\"range\":" + std::to_string(probe.out_id) + ",", 100);
  }
  ASSERT_TRUE(joined) << "monitor reported nothing: " << monitor.result().err;
  hzc_range_register reg{};
  ASSERT_EQ(RegisterRange(fd, mem.base(), 2 * kMiB, &reg), 0);
  ASSERT_EQ(Activate(fd, mem.base(), 64 * 1024), 0);
  const DomainId id = NewDomainId();
  ASSERT_EQ(Join(fd, id, 0, 2), 0);
  auto [mine, theirs] = Channel::Pair();
  const pid_t child = fork();
  if (child == 0) {
    const int cfd = OpenDevice();
    theirs.Send(std::to_string(Join(cfd, id, 1, 2)));
    pause();
    _exit(0);
  }
  ASSERT_EQ(mine.Receive(), "0");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(Deactivate(fd, mem.base()), 0);
  ASSERT_EQ(UnregisterRange(fd, mem.base()), 0);
  ASSERT_EQ(Leave(fd, id, 0), 0);
  const std::string last = "\"event\":\"member_leave\"";
  EXPECT_TRUE(monitor.WaitForOutput(last, 60000)) << monitor.result().out;
  const ProgramResult r = monitor.Stop(SIGINT);
  EXPECT_EQ(r.status, 0) << r.err;
  close(fd);

  std::vector<json> events;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    events.push_back(json::parse(line, nullptr, false));
    ASSERT_FALSE(events.back().is_discarded()) << "not one JSON object: " << line;
    ASSERT_NE(events.back()["event"], "lost") << r.out;
  }
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["seq"], events[i - 1]["seq"].get<uint64_t>() + 1) << r.out;
  }
  // From our range_set on, only our events (nothing else uses the module meanwhile).
  size_t i = 0;
  while (i < events.size() &&
         !(events[i]["event"] == "range_set" && events[i]["range"] == reg.out_id)) {
    ++i;
  }
  const std::vector<std::string> expected = {"range_set",   "activate",      "member_join",
                                             "member_join", "member_broken", "context_release",
                                             "deactivate",  "range_unset",   "member_leave"};
  std::vector<std::string> seen;
  for (; i < events.size(); ++i) {
    seen.push_back(events[i]["event"].get<std::string>());
  }
  EXPECT_EQ(seen, expected) << r.out;
  if (seen == expected) {
    const size_t base = events.size() - expected.size();
    EXPECT_EQ(events[base + 1]["range"], reg.out_id);
    EXPECT_EQ(events[base + 1]["addr"], Hex(reinterpret_cast<uintptr_t>(mem.base())));
    EXPECT_EQ(events[base + 3]["pid"], child);
    EXPECT_EQ(events[base + 4]["rank"], 1);
    EXPECT_EQ(events[base + 4]["pid"], child);
    EXPECT_EQ(events[base + 4]["state"], "broken");
    EXPECT_EQ(events[base + 5]["pid"], child);
  }
}

// uid 65534 sees its own range only, without base; root's range stays hidden; monitor is
// refused with the reason.
TEST(HzcctlUnprivileged, SeesOnlyItsOwnObjects) {
  const DeviceFile file;
  const int fd = file.fd;
  ASSERT_GE(fd, 0);
  Reservation mine(kMiB, PROT_READ | PROT_WRITE);
  hzc_range_register root_range{};
  ASSERT_EQ(RegisterRange(fd, mine.base(), kMiB, &root_range), 0);
  UserProcess user(kNobody, [](Channel &c) -> std::string {
    const int ufd = OpenDevice();
    Reservation mem(kMiB, PROT_READ | PROT_WRITE);
    hzc_range_register reg{};
    if (ufd < 0 || RegisterRange(ufd, mem.base(), kMiB, &reg) != 0) {
      return "cannot register a range as nobody";
    }
    c.Send(std::to_string(reg.out_id));
    c.Receive(-1);  // until the test is done
    return "";
  });
  const std::optional<std::string> id = user.channel().Receive();
  ASSERT_TRUE(id.has_value()) << user.Wait();

  const ProgramResult r = Hzcctl({"-j", "range", "show"}, kNobody);
  ASSERT_EQ(r.status, 0) << r.err;
  const json ranges = ParseJson(r);
  ASSERT_GE(ranges.size(), 1u);
  for (const json &o : ranges) {
    EXPECT_EQ(o["uid"], kNobody) << o.dump();
    EXPECT_FALSE(o.contains("base")) << o.dump();
    EXPECT_NE(o["range"], root_range.out_id) << o.dump();
  }
  EXPECT_FALSE(FindJson(ranges, "range", std::stoull(*id)).is_null()) << r.out;
  const ProgramResult text = Hzcctl({"range", "show", "id", *id}, kNobody);
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_EQ(text.out.find("base"), std::string::npos) << text.out;
  const ProgramResult hidden =
      Hzcctl({"range", "show", "id", std::to_string(root_range.out_id)}, kNobody);
  EXPECT_EQ(hidden.status, 1) << hidden.out;

  const ProgramResult monitor = Hzcctl({"monitor"}, kNobody);
  EXPECT_EQ(monitor.status, 1);
  EXPECT_NE(monitor.err.find("CAP_SYS_ADMIN"), std::string::npos) << monitor.err;
  EXPECT_EQ(std::count(monitor.err.begin(), monitor.err.end(), '\n'), 1) << monitor.err;
  user.channel().Send("done");
  EXPECT_EQ(user.Wait(), "");
}

// A dump over many datagrams: 10,000 ranges, each once, each as sysfs shows it.
TEST(HzcctlDump, TenThousandRangesAgreeWithSysfs) {
  constexpr size_t kRanges = 10000;
  const int fd = OpenDevice();
  ASSERT_GE(fd, 0);
  const size_t page = PageSize();
  Reservation mem(kRanges * page, PROT_NONE);
  for (size_t i = 0; i < kRanges; ++i) {
    ASSERT_EQ(RegisterRange(fd, mem.base() + i * page, page), 0) << i;
  }
  const ProgramResult r = Hzcctl({"-j", "range", "show", "pid", std::to_string(getpid())});
  ASSERT_EQ(r.status, 0) << r.err;
  const json ranges = ParseJson(r);
  ASSERT_EQ(ranges.size(), kRanges);
  std::set<uint64_t> ids;
  for (const json &o : ranges) {
    EXPECT_TRUE(ids.insert(o["range"].get<uint64_t>()).second) << "twice: " << o.dump();
  }
  EXPECT_TRUE(std::is_sorted(ranges.begin(), ranges.end(), [](const json &a, const json &b) {
    return a["range"].get<uint64_t>() < b["range"].get<uint64_t>();
  }));
  for (size_t i = 0; i < kRanges; i += 97) {
    ExpectMatchesSysfs(ranges[i]);
  }
  close(fd);
}

}  // namespace
}  // namespace hzc::ktest
