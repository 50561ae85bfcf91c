// SPDX-License-Identifier: Apache-2.0
// The logic of the RDMA-verbs links without a device: HZC_RDMA_DEVICE parsing, the GID
// choice, endpoint and ready blobs, and how failed board calls are reported.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "verbs/board.h"
#include "verbs/links.h"
#include "verbs/port.h"

namespace hzc::verbs {
namespace {

TEST(VerbsLogicTest, ParseRdmaDeviceSpec) {
  auto empty = ParseRdmaDeviceSpec("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->name, "");
  EXPECT_EQ(empty->port, 0);
  auto name = ParseRdmaDeviceSpec("rxe0");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->name, "rxe0");
  EXPECT_EQ(name->port, 0);
  auto port = ParseRdmaDeviceSpec("mlx5_1:2");
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(port->name, "mlx5_1");
  EXPECT_EQ(port->port, 2);
  for (const char *bad : {":1", "rxe0:", "rxe0:0", "rxe0:256", "rxe0:x", "rxe0:1:2", "rxe0:-1"}) {
    auto st = ParseRdmaDeviceSpec(bad);
    EXPECT_FALSE(st.ok()) << bad;
    if (!st.ok()) {
      EXPECT_EQ(st.status().code(), HCCL_E_PARA) << bad;
      EXPECT_NE(st.status().message().find("HZC_RDMA_DEVICE"), std::string::npos) << bad;
    }
  }
}

GidEntry Gid(uint32_t index, uint32_t type, bool v4) {
  GidEntry e{.index = index, .type = type};
  if (v4) {
    e.gid.raw[10] = 0xff;
    e.gid.raw[11] = 0xff;
    e.gid.raw[12] = 127;
    e.gid.raw[15] = 1;
  } else {
    e.gid.raw[0] = 0xfe;
    e.gid.raw[1] = 0x80;
    e.gid.raw[15] = static_cast<uint8_t>(index + 1);
  }
  return e;
}

TEST(VerbsLogicTest, ChooseGidIndex) {
  EXPECT_EQ(ChooseGidIndex({}), std::nullopt);
  // Typical RoCE table: v1/v2 link-local, then v1/v2 IPv4-mapped.
  const std::vector<GidEntry> roce = {
      Gid(0, IBV_GID_TYPE_ROCE_V1, false), Gid(1, IBV_GID_TYPE_ROCE_V2, false),
      Gid(2, IBV_GID_TYPE_ROCE_V1, true), Gid(3, IBV_GID_TYPE_ROCE_V2, true)};
  EXPECT_EQ(ChooseGidIndex(roce), 3U);
  EXPECT_EQ(ChooseGidIndex(std::span(roce).first(3)), 1U);
  EXPECT_EQ(ChooseGidIndex(std::vector<GidEntry>{roce[0], roce[2]}), 0U);
  EXPECT_EQ(ChooseGidIndex(std::vector<GidEntry>{Gid(5, IBV_GID_TYPE_IB, false),
                                                 Gid(2, IBV_GID_TYPE_IB, false)}),
            2U);
  EXPECT_TRUE(IsIpv4Mapped(roce[3].gid));
  EXPECT_FALSE(IsIpv4Mapped(roce[1].gid));
  EXPECT_EQ(GidString(roce[3].gid), "::ffff:127.0.0.1");
}

TEST(VerbsLogicTest, EndpointRoundTripAndChecks) {
  Endpoint ep;
  ep.header.rank = 1;
  ep.header.nranks = 3;
  ep.header.mtu = IBV_MTU_4096;
  ep.qps = {{.qpn = 0x11, .psn = 0x123}, {}, {.qpn = 0x13, .psn = 0xabcdef}};
  const auto blob = EncodeEndpoint(ep);
  ASSERT_EQ(blob.size(), sizeof(EndpointHeader) + 3 * sizeof(QpEndpoint));
  auto back = DecodeEndpoint(blob, 1, 3);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->qps[2].qpn, 0x13U);
  EXPECT_EQ(back->qps[2].psn, 0xabcdefU);
  EXPECT_EQ(back->header.mtu, static_cast<uint32_t>(IBV_MTU_4096));

  EXPECT_EQ(DecodeEndpoint(blob, 2, 3).status().code(), HCCL_E_ROCE_CONNECT);  // wrong rank
  EXPECT_EQ(DecodeEndpoint(blob, 1, 4).status().code(), HCCL_E_ROCE_CONNECT);  // wrong size
  EXPECT_FALSE(DecodeEndpoint(std::span(blob).first(10), 1, 3).ok());
  EXPECT_FALSE(DecodeEndpoint(std::span(blob).first(blob.size() - 1), 1, 3).ok());
  Endpoint bad_mtu = ep;
  bad_mtu.header.mtu = 9;
  EXPECT_EQ(DecodeEndpoint(EncodeEndpoint(bad_mtu), 1, 3).status().code(), HCCL_E_ROCE_CONNECT);
  auto bad = blob;
  bad[0] = std::byte{0};
  EXPECT_FALSE(DecodeEndpoint(bad, 1, 3).ok());

  // A rank without a device or with a failure publishes only the header.
  Endpoint none;
  none.header.state = EndpointHeader::kNoRdmaDevice;
  none.header.rank = 0;
  none.header.nranks = 3;
  auto decoded = DecodeEndpoint(EncodeEndpoint(none), 0, 3);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->header.state, EndpointHeader::kNoRdmaDevice);
  EXPECT_EQ(MaxRanksForBlob(4096), 506U);
}

// Blobs as the board returns them: rank r's @blobs[r] (empty: not published at all).
BoardBlobs Blobs(const std::vector<std::vector<std::byte>> &blobs, uint32_t stride) {
  BoardBlobs out(static_cast<uint32_t>(blobs.size()), stride);
  for (size_t r = 0; r < blobs.size(); ++r) {
    std::memcpy(out.data() + r * stride, blobs[r].data(), blobs[r].size());
    out.lens()[r] = static_cast<uint32_t>(blobs[r].size());
  }
  return out;
}

Endpoint ReadyEndpoint(uint32_t rank, uint32_t nranks) {
  Endpoint ep;
  ep.header.rank = rank;
  ep.header.nranks = nranks;
  ep.header.mtu = IBV_MTU_1024;
  ep.qps.resize(nranks);
  for (uint32_t p = 0; p < nranks; ++p) {
    if (p != rank) {
      ep.qps[p] = {.qpn = 0x100 * rank + p, .psn = 7 * p};
    }
  }
  return ep;
}

Endpoint StateEndpoint(uint32_t rank, uint32_t nranks, EndpointHeader::State state) {
  Endpoint ep;
  ep.header.rank = rank;
  ep.header.nranks = nranks;
  ep.header.state = state;
  return ep;
}

std::vector<std::byte> AsVector(std::span<const std::byte> bytes) {
  return {bytes.begin(), bytes.end()};
}

TEST(VerbsLogicTest, BoardBlobsHoldEachRanksBlobAtItsStride) {
  const std::vector<std::byte> a{std::byte{1}, std::byte{2}}, b{std::byte{3}};
  const BoardBlobs blobs = Blobs({a, {}, b}, 4);
  EXPECT_EQ(blobs.nranks(), 3U);
  EXPECT_EQ(blobs.stride(), 4U);
  EXPECT_EQ(AsVector(blobs.blob(0)), a);
  EXPECT_TRUE(blobs.blob(1).empty());
  EXPECT_EQ(AsVector(blobs.blob(2)), b);
}

TEST(VerbsLogicTest, DecodeEndpointsSortsRanksByState) {
  const uint32_t n = 4;
  const uint32_t stride = sizeof(EndpointHeader) + n * sizeof(QpEndpoint);
  auto peers =
      DecodeEndpoints(Blobs({EncodeEndpoint(ReadyEndpoint(0, n)),
                             EncodeEndpoint(StateEndpoint(1, n, EndpointHeader::kFailed)),
                             EncodeEndpoint(StateEndpoint(2, n, EndpointHeader::kNoRdmaDevice)),
                             EncodeEndpoint(ReadyEndpoint(3, n))},
                            stride));
  ASSERT_TRUE(peers.ok()) << peers.status().message();
  EXPECT_EQ(peers->failed, std::vector<uint32_t>{1});
  EXPECT_EQ(peers->no_device, std::vector<uint32_t>{2});
  ASSERT_EQ(peers->endpoints.size(), n);
  EXPECT_EQ(peers->endpoints[3].qps[1].qpn, 0x301U);
  EXPECT_EQ(peers->endpoints[0].qps[2].psn, 14U);

  // A blob that says it is another rank's is a connect error naming the rank.
  auto swapped = DecodeEndpoints(
      Blobs({EncodeEndpoint(ReadyEndpoint(1, 2)), EncodeEndpoint(ReadyEndpoint(0, 2))},
            sizeof(EndpointHeader) + 2 * sizeof(QpEndpoint)));
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().code(), HCCL_E_ROCE_CONNECT);
  EXPECT_NE(swapped.status().message().find("endpoint of rank 0"), std::string::npos);
}

TEST(VerbsLogicTest, RanksNotReady) {
  ReadyBlob failed;
  failed.state = EndpointHeader::kFailed;
  ReadyBlob foreign;
  foreign.magic = 0x1234;
  const uint32_t one = 1;
  auto bytes = [](const auto &v) { return AsVector(Bytes(v)); };
  const BoardBlobs blobs =
      Blobs({bytes(ReadyBlob{}), bytes(failed), bytes(foreign), bytes(one), bytes(ReadyBlob{})},
            sizeof(ReadyBlob));
  EXPECT_EQ(RanksNotReady(blobs), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_TRUE(RanksNotReady(Blobs({bytes(ReadyBlob{})}, sizeof(ReadyBlob))).empty());
}

TEST(VerbsLogicTest, BoardPutErrors) {
  const Status broke = BoardPutError(Error(HCCL_E_REMOTE, "x"), 2, 1);
  EXPECT_EQ(broke.code(), HCCL_E_REMOTE);
  EXPECT_EQ(broke.message(), "board key 2: the domain broke (a rank left or died)");
  const Status twice = BoardPutError(Error(HCCL_E_INTERNAL, "x"), 1, 3);
  EXPECT_EQ(twice.code(), HCCL_E_INTERNAL);
  EXPECT_EQ(twice.message(), "board key 1: rank 3 already published it in this domain");
  const Status other = BoardPutError(Error(HCCL_E_UNAVAIL, "no space"), 1, 0);
  EXPECT_EQ(other.code(), HCCL_E_DRV);  // the library chose the key: not the caller's error
  EXPECT_EQ(other.message(), "board key 1: no space");
}

TEST(VerbsLogicTest, BoardWaitErrors) {
  const std::vector<uint32_t> missing{2, 5};
  const Status late = BoardWaitError(Error(HCCL_E_TIMEOUT, "x"), "endpoints", 1, 64, missing, 6);
  EXPECT_EQ(late.code(), HCCL_E_TIMEOUT);
  EXPECT_EQ(late.message(), "endpoints: rank(s) 2,5 of 6 missing after the timeout");
  const Status broke = BoardWaitError(Error(HCCL_E_REMOTE, "x"), "barrier", 2, 8, {}, 2);
  EXPECT_EQ(broke.code(), HCCL_E_REMOTE);
  EXPECT_EQ(broke.message(), "barrier: the domain broke (a rank left or died)");
  const Status big = BoardWaitError(Error(HCCL_E_INTERNAL, "x"), "barrier", 2, 8, {}, 2);
  EXPECT_EQ(big.code(), HCCL_E_INTERNAL);
  EXPECT_EQ(big.message(), "barrier: a rank published more than 8 bytes under key 2");
  const Status other = BoardWaitError(Error(HCCL_E_PARA, "not a member"), "barrier", 2, 8, {}, 2);
  EXPECT_EQ(other.code(), HCCL_E_DRV);
  EXPECT_EQ(other.message(), "barrier: not a member");
}

// Between servers the queue pairs take HCCL_RDMA_TIMEOUT and HCCL_RDMA_RETRY_CNT, and the data
// path waits 10 s past the queue pair's retries (at least 30 s) before it gives up on a peer.
TEST(VerbsLogicTest, LinksBetweenServersTakeHcclsRetriesAndOutlastThem) {
  Config config;
  LinkOptions o = LinkOptions::BetweenServers(config);
  EXPECT_EQ(o.ack_timeout, 20U);
  EXPECT_EQ(o.retry_count, 7U);
  EXPECT_TRUE(o.domain_per_peer);
  // 8 x 4.096 us x 2^20 = 34.36 s.
  EXPECT_EQ(o.progress_timeout, std::chrono::milliseconds(44'360));
  config.rdma_timeout = 18;
  config.rdma_retry_cnt = 6;
  o = LinkOptions::BetweenServers(config);
  EXPECT_EQ(o.ack_timeout, 18U);
  EXPECT_EQ(o.retry_count, 6U);
  EXPECT_EQ(o.progress_timeout, std::chrono::milliseconds(30'000));
  config.rdma_timeout = 24;
  o = LinkOptions::BetweenServers(config);
  EXPECT_EQ(o.progress_timeout, std::chrono::milliseconds(491'037));
  // Inside a server the links keep their own short timeout.
  EXPECT_EQ(LinkOptions::FromConfig(config).ack_timeout, LinkOptions{}.ack_timeout);
  EXPECT_FALSE(LinkOptions::FromConfig(config).domain_per_peer);
}

}  // namespace
}  // namespace hzc::verbs
