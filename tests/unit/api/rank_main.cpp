// SPDX-License-Identifier: Apache-2.0
// One rank of a host multi-process test: init from a hex root info, query, set one range, meet
// the others in a barrier, unset the range, destroy. Exit status: the HcclResult of
// HcclCommSetMemoryRange, or 10+ on setup errors.
//
// Usage: hzc-test-rank ROOT_INFO_HEX NRANKS RANK [DELAY_MS_BEFORE_SET [RETRIES]]
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "root_info_hex.h"

int main(int argc, char **argv) {
  if (argc < 4 || argc > 6 || std::strlen(argv[1]) != 2 * sizeof(HcclRootInfo)) {
    return 2;
  }
  HcclRootInfo root;
  if (!hzc::test::RootInfoFromHex(argv[1], &root)) {
    return 2;
  }
  const auto nranks = static_cast<uint32_t>(std::atoi(argv[2]));
  const auto rank = static_cast<uint32_t>(std::atoi(argv[3]));
  HcclComm comm = nullptr;
  if (HcclCommInitRootInfo(nranks, &root, rank, &comm) != HCCL_SUCCESS) {
    return 10;
  }
  uint32_t n = 0, r = 0;
  if (HcclGetRankSize(comm, &n) != HCCL_SUCCESS || n != nranks ||
      HcclGetRankId(comm, &r) != HCCL_SUCCESS || r != rank) {
    return 11;
  }
  const size_t page = static_cast<size_t>(getpagesize());
  void *va = nullptr;
  if (aclrtReserveMemAddress(&va, page, 0, nullptr, 0) != ACL_SUCCESS) {
    return 12;
  }
  const int delay_ms = argc > 4 ? std::atoi(argv[4]) : 0;
  int retries = argc > 5 ? std::atoi(argv[5]) : 0;
  usleep(static_cast<useconds_t>(delay_ms) * 1000);
  HcclResult set = HcclCommSetMemoryRange(comm, va, page, 0, 0);
  while (set == HCCL_E_TIMEOUT && retries-- > 0) {
    set = HcclCommSetMemoryRange(comm, va, page, 0, 0);  // no half state: a retry starts afresh
  }
  // Link establishment completes on each rank by itself: a rank that left at once could be
  // gone before a slower one opened it. Programs meet in collectives after it; so do the ranks.
  if (set == HCCL_SUCCESS && HcclBarrier(comm, nullptr) != HCCL_SUCCESS) {
    return 15;
  }
  if (set == HCCL_SUCCESS && HcclCommUnsetMemoryRange(comm, va) != HCCL_SUCCESS) {
    return 13;
  }
  if (aclrtReleaseMemAddress(va) != ACL_SUCCESS || HcclCommDestroy(comm) != HCCL_SUCCESS) {
    return 14;
  }
  return set;
}
