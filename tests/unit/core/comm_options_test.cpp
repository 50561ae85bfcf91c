// SPDX-License-Identifier: Apache-2.0
// HcclCommConfig as the library reads it: the header HcclCommConfigInit writes, the fields a
// shorter (older) structure lacks, and every range check.
#include "core/comm_options.h"

#include <hccl/hccl.h>

#include <cstring>

#include "hzc_test.h"

namespace {

using hzc::CommOptions;

struct Header {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t reserved;
};

HcclCommConfig Initialised() {
  HcclCommConfig c;
  std::memset(&c, 0x5a, sizeof(c));  // garbage HcclCommConfigInit must overwrite
  HcclCommConfigInit(&c);
  return c;
}

HcclResult Code(const HcclCommConfig &c) {
  return static_cast<HcclResult>(CommOptions::FromConfig(&c).status().code());
}

TEST(CommOptionsTest, NoConfigAndFreshConfigSetNothing) {
  for (const HcclCommConfig *c : {static_cast<const HcclCommConfig *>(nullptr)}) {
    auto o = CommOptions::FromConfig(c);
    ASSERT_TRUE(o.ok());
    EXPECT_FALSE(o->buffer_mb.has_value());
  }
  const HcclCommConfig c = Initialised();
  auto o = CommOptions::FromConfig(&c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->buffer_mb.has_value());
  EXPECT_FALSE(o->exec_timeout.has_value());
  EXPECT_EQ(o->name, "");
  Header h;
  std::memcpy(&h, c.reserved, sizeof(h));
  EXPECT_EQ(h.size, sizeof(HcclCommConfig));
  EXPECT_EQ(h.magic, HCCL_COMM_CONFIG_MAGIC_WORD);
  EXPECT_EQ(h.version, HCCL_COMM_CONFIG_VERSION);
  EXPECT_EQ(c.hcclBufferSize, HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET);
  EXPECT_EQ(c.hcclExecTimeOut, HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET);
}

TEST(CommOptionsTest, ValuesAreTaken) {
  HcclCommConfig c = Initialised();
  c.hcclBufferSize = 3;
  c.hcclExecTimeOut = 42;
  c.hcclDeterministic = 1;
  std::strcpy(c.hcclCommName, "comm_1");
  std::strcpy(c.hcclUdi, "mine");
  auto o = CommOptions::FromConfig(&c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->buffer_mb, 3U);
  EXPECT_EQ(o->exec_timeout, std::chrono::seconds(42));
  EXPECT_EQ(o->deterministic, 1U);
  EXPECT_EQ(o->name, "comm_1");
  EXPECT_EQ(o->udi, "mine");
}

TEST(CommOptionsTest, HeaderNotFromHcclCommConfigInitIsRefused) {
  HcclCommConfig c;
  std::memset(&c, 0, sizeof(c));
  EXPECT_EQ(Code(c), HCCL_E_PARA);  // no magic word
  c = Initialised();
  Header h;
  std::memcpy(&h, c.reserved, sizeof(h));
  h.version = 0;
  std::memcpy(c.reserved, &h, sizeof(h));
  EXPECT_EQ(Code(c), HCCL_E_PARA);
  h.version = 1;
  h.size = 8;  // shorter than the header and the first fields
  std::memcpy(c.reserved, &h, sizeof(h));
  EXPECT_EQ(Code(c), HCCL_E_PARA);
}

TEST(CommOptionsTest, FieldsBeyondAnOlderStructuresSizeAreNotRead) {
  HcclCommConfig c = Initialised();
  c.hcclExecTimeOut = 0;  // invalid, but beyond the recorded size
  c.hcclQos = 99;
  Header h;
  std::memcpy(&h, c.reserved, sizeof(h));
  h.size = offsetof(HcclCommConfig, hcclOpExpansionMode);  // a version-1 structure
  h.version = 1;
  std::memcpy(c.reserved, &h, sizeof(h));
  auto o = CommOptions::FromConfig(&c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->exec_timeout.has_value());
}

TEST(CommOptionsTest, EveryRangeIsChecked) {
  struct Case {
    const char *what;
    void (*set)(HcclCommConfig *);
  };
  const Case cases[] = {
      {"buffer 0", [](HcclCommConfig *c) { c->hcclBufferSize = 0; }},
      {"deterministic 3", [](HcclCommConfig *c) { c->hcclDeterministic = 3; }},
      {"timeout 0", [](HcclCommConfig *c) { c->hcclExecTimeOut = 0; }},
      {"timeout -5", [](HcclCommConfig *c) { c->hcclExecTimeOut = -5; }},
      {"traffic class 5", [](HcclCommConfig *c) { c->hcclRdmaTrafficClass = 5; }},
      {"traffic class 256", [](HcclCommConfig *c) { c->hcclRdmaTrafficClass = 256; }},
      {"service level 8", [](HcclCommConfig *c) { c->hcclRdmaServiceLevel = 8; }},
      {"qos 8", [](HcclCommConfig *c) { c->hcclQos = 8; }},
      {"zero copy 2", [](HcclCommConfig *c) { c->aclGraphZeroCopyEnable = 2; }},
      {"window GB 0", [](HcclCommConfig *c) { c->hcclSymWinMaxMemSizePerRank = 0; }},
      {"window GB 2^20 + 1",
       [](HcclCommConfig *c) { c->hcclSymWinMaxMemSizePerRank = (uint64_t{1} << 20) + 1; }},
      {"name without NUL",
       [](HcclCommConfig *c) { std::memset(c->hcclCommName, 'a', COMM_NAME_MAX_LENGTH); }},
      {"udi without NUL", [](HcclCommConfig *c) { std::memset(c->hcclUdi, 'u', UDI_MAX_LENGTH); }},
  };
  for (const Case &k : cases) {
    HcclCommConfig c = Initialised();
    k.set(&c);
    EXPECT_EQ(Code(c), HCCL_E_PARA) << k.what;
  }
  HcclCommConfig c = Initialised();
  c.hcclRdmaTrafficClass = 132;
  c.hcclRdmaServiceLevel = 4;
  c.hcclQos = 7;
  EXPECT_EQ(Code(c), HCCL_SUCCESS);
}

TEST(CommOptionsTest, SymmetricWindowLimitInGigabytes) {
  EXPECT_EQ(CommOptions{}.sym_win_bytes, uint64_t{16} << 30);  // HCCL's default
  HcclCommConfig c = Initialised();
  EXPECT_EQ(c.hcclSymWinMaxMemSizePerRank, 16U);
  c.hcclSymWinMaxMemSizePerRank = 3;
  auto o = CommOptions::FromConfig(&c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->sym_win_bytes, uint64_t{3} << 30);
}

}  // namespace
