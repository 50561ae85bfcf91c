// SPDX-License-Identifier: Apache-2.0
// What base/status.h makes of the codes a peer reports (PeerCode: untrusted words).
#include "base/status.h"

#include <cstdint>

#include "hzc_test.h"

namespace hzc {
namespace {

TEST(StatusTest, APeersErrorCodeIsKept) {
  EXPECT_EQ(PeerCode(HCCL_E_PARA), HCCL_E_PARA);
  EXPECT_EQ(PeerCode(HCCL_E_TIMEOUT), HCCL_E_TIMEOUT);
  EXPECT_EQ(PeerCode(HCCL_E_OOM), HCCL_E_OOM);
  EXPECT_EQ(PeerCode(HCCL_E_IN_STATUS), HCCL_E_IN_STATUS);
}

TEST(StatusTest, AnythingElseAPeerReportsIsARemoteError) {
  EXPECT_EQ(PeerCode(0), HCCL_E_REMOTE);  // "failed" with success would read as ok
  EXPECT_EQ(PeerCode(HCCL_E_OOM + 1), HCCL_E_REMOTE);
  EXPECT_EQ(PeerCode(HCCL_E_IN_STATUS - 1), HCCL_E_REMOTE);
  EXPECT_EQ(PeerCode(HCCL_E_RESERVED), HCCL_E_REMOTE);
  EXPECT_EQ(PeerCode(uint64_t{1} << 32), HCCL_E_REMOTE);  // would truncate to 0
  EXPECT_EQ(PeerCode((uint64_t{1} << 32) | HCCL_E_PARA), HCCL_E_REMOTE);
  EXPECT_EQ(PeerCode(UINT64_MAX), HCCL_E_REMOTE);
}

}  // namespace
}  // namespace hzc
