// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/root_info.h"

#include <arpa/inet.h>

#include <cstring>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using ::testing::HasSubstr;

class RootInfoTest : public test::Test {
 protected:
  RootInfo Sample(int family) {
    RootInfo info;
    if (family == AF_INET) {
      auto *a = reinterpret_cast<sockaddr_in *>(&info.addr);
      a->sin_family = AF_INET;
      a->sin_port = htons(40001);
      inet_pton(AF_INET, "10.1.2.3", &a->sin_addr);
    } else {
      auto *a = reinterpret_cast<sockaddr_in6 *>(&info.addr);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(40002);
      inet_pton(AF_INET6, "fe80::1", &a->sin6_addr);
    }
    for (size_t i = 0; i < info.id.size(); ++i) {
      info.id[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    return info;
  }
};

TEST_F(RootInfoTest, RoundTripIpv4AndIpv6) {
  for (int family : {AF_INET, AF_INET6}) {
    const RootInfo in = Sample(family);
    HcclRootInfo raw;
    std::memset(&raw, 0xee, sizeof(raw));
    Encode(in, &raw);
    auto out = Decode(raw);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(out->id, in.id);
    EXPECT_EQ(out->AddressString(), in.AddressString());
  }
  EXPECT_EQ(Sample(AF_INET).AddressString(), "10.1.2.3:40001");
  EXPECT_EQ(Sample(AF_INET6).AddressString(), "[fe80::1]:40002");
}

TEST_F(RootInfoTest, RejectsGarbage) {
  HcclRootInfo raw{};
  auto out = Decode(raw);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), HCCL_E_PARA);
  EXPECT_THAT(out.status().message(), HasSubstr("not made by HcclGetRootInfo"));
}

TEST_F(RootInfoTest, RejectsEachCorruption) {
  HcclRootInfo good;
  Encode(Sample(AF_INET), &good);
  struct Case {
    size_t offset;
    uint8_t value;
    const char *why;
  };
  // Offsets of the wire layout: magic 0, version 4, family 8, port 10, reserved 12, id 32.
  const Case cases[] = {{4, 2, "format version 2"},
                        {8, 99, "address family 99"},
                        {12, 1, "corrupt"},
                        {4000, 1, "byte 4000 is not zero"},
                        {4107, 1, "byte 4107 is not zero"}};
  for (const auto &c : cases) {
    HcclRootInfo bad = good;
    bad.internal[c.offset] = static_cast<char>(c.value);
    auto out = Decode(bad);
    ASSERT_FALSE(out.ok()) << c.why;
    EXPECT_EQ(out.status().code(), HCCL_E_PARA);
    EXPECT_THAT(out.status().message(), HasSubstr(c.why));
  }
  HcclRootInfo no_port = good;
  no_port.internal[10] = 0;
  no_port.internal[11] = 0;
  EXPECT_FALSE(Decode(no_port).ok());
  HcclRootInfo no_id = good;
  std::memset(no_id.internal + 32, 0, 16);
  auto out = Decode(no_id);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("unique id is zero"));
}

TEST_F(RootInfoTest, RandomIdsDiffer) {
  auto a = RandomId();
  auto b = RandomId();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(IdString(*a).size(), 32U);
}

}  // namespace
}  // namespace hzc::bootstrap
