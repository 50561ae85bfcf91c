// SPDX-License-Identifier: Apache-2.0
// The proofs, names, job secret files and trust lists of bootstrap/auth.h.
#include "bootstrap/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using ::testing::HasSubstr;

std::span<const uint8_t> Of(const std::string &text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

TEST(AuthTest, ProofsDependOnKeyLabelAndEveryPart) {
  const UniqueId key{1, 2, 3};
  const Mac m = Prove(key, "label", {Of("ab"), Of("c")});
  EXPECT_TRUE(SameMac(m, Prove(key, "label", {Of("ab"), Of("c")})));
  EXPECT_FALSE(SameMac(m, Prove(UniqueId{1, 2, 4}, "label", {Of("ab"), Of("c")})));
  EXPECT_FALSE(SameMac(m, Prove(key, "other", {Of("ab"), Of("c")})));
  EXPECT_FALSE(SameMac(m, Prove(key, "label", {Of("a"), Of("bc")})));  // parts are delimited
  EXPECT_FALSE(SameMac(m, std::span(m).first(16)));
  // The names that go in the open tell nothing of the key, and differ from each other.
  EXPECT_NE(PublicId(key), IdString(key));
  EXPECT_NE(SecretName(key), PublicId(key));
  EXPECT_EQ(SecretName(key).size(), 32U);
  EXPECT_EQ(Hex(std::span(key).first(2)), "0102");
  EXPECT_EQ(Unhex("0aff", 2), std::string("\x0a\xff", 2));
  EXPECT_FALSE(Unhex("0aFF", 2));
  EXPECT_FALSE(Unhex("0a", 2));
  EXPECT_NE(*RandomNonce(), *RandomNonce());
}

class SecretFileTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    char name[] = "/tmp/hzc-secret-XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "s3cret\n", 7), 7);
    close(fd);
    path_ = name;
  }
  void TearDown() override {
    unlink(path_.c_str());
    test::Test::TearDown();
  }
  std::string path_;
};

TEST_F(SecretFileTest, OnlyAPrivateFileOfThisUserIsRead) {
  ASSERT_EQ(chmod(path_.c_str(), 0600), 0);
  auto ok = ReadSecretFile(path_);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "s3cret");
  ASSERT_EQ(chmod(path_.c_str(), 0640), 0);
  auto open = ReadSecretFile(path_);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), HCCL_E_PARA);
  EXPECT_THAT(open.status().message(), HasSubstr("mode 0640 lets others in"));
  EXPECT_EQ(ReadSecretFile("/nonexistent/secret").status().code(), HCCL_E_OPEN_FILE_FAILURE);
  if (geteuid() == 0) {  // another owner: only root can make one
    ASSERT_EQ(chmod(path_.c_str(), 0600), 0);
    ASSERT_EQ(chown(path_.c_str(), 1, 1), 0);
    auto theirs = ReadSecretFile(path_);
    ASSERT_FALSE(theirs.ok());
    EXPECT_THAT(theirs.status().message(), HasSubstr("owned by uid 1"));
  }
}

TEST(AuthTest, TrustListFollowsHcclsFormat) {
  auto list = ParseTrustList(R"({"host_ip": ["10.0.0.1", "::1"], "device_ip": []})", "w.json");
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->Why("10.0.0.1"), "");
  EXPECT_EQ(list->Why("::1"), "");
  EXPECT_EQ(list->Why("10.0.0.2"),
            "10.0.0.2 is not on the trust list (HCCL_WHITELIST_FILE w.json)");
  EXPECT_EQ(TrustList{}.Why("10.0.0.2"), "");  // off: anyone
  for (const auto &[text, why] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "not a JSON object"},
           {R"({"device_ip": []})", R"(no "host_ip" array)"},
           {R"({"host_ip": ["10.0.0.300"]})", R"(host_ip[0] is "10.0.0.300", not an IP address)"},
           {R"({"host_ip": [7]})", "host_ip[0] is 7, not an IP address"}}) {
    auto bad = ParseTrustList(text, "w.json");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), HCCL_E_PARA);
    EXPECT_EQ(bad.status().message(), "HCCL_WHITELIST_FILE w.json: " + why);
  }
}

TEST(AuthTest, LocalAddresses) {
  EXPECT_TRUE(IsLocalAddress("127.0.0.1"));
  EXPECT_TRUE(IsLocalAddress("127.0.0.2"));
  EXPECT_TRUE(IsLocalAddress("::1"));
  EXPECT_FALSE(IsLocalAddress("192.0.2.1"));  // TEST-NET-1
  EXPECT_FALSE(IsLocalAddress("nowhere"));
  EXPECT_EQ(HostOf("[::1]:5"), "::1");
  EXPECT_EQ(HostOf("1.2.3.4:5"), "1.2.3.4");
}

}  // namespace
}  // namespace hzc::bootstrap
