// SPDX-License-Identifier: Apache-2.0
// One rank of tests/unit/api/comm_api_test.cpp's sub-communicator test: ROOT_HEX NRANKS RANK.
// Joins the communicator, makes the sub-communicator of the ranks of its parity
// (HcclCreateSubCommConfig, no exchange), runs an AllReduce in it and in the parent, and
// checks names and sums. Exit 0 when everything matched, else the step that failed (10+).
#include <hccl/hccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "root_info_hex.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    return 2;
  }
  HcclRootInfo root;
  if (!hzc::test::RootInfoFromHex(argv[1], &root)) {
    return 3;
  }
  const uint32_t n = static_cast<uint32_t>(std::atoi(argv[2]));
  const uint32_t rank = static_cast<uint32_t>(std::atoi(argv[3]));
  HcclComm comm = nullptr, sub = nullptr;
  if (HcclCommInitRootInfo(n, &root, rank, &comm) != HCCL_SUCCESS) {
    return 10;
  }
  std::vector<uint32_t> members;
  for (uint32_t r = rank % 2; r < n; r += 2) {
    members.push_back(r);
  }
  const uint32_t position = rank / 2;
  if (HcclCreateSubCommConfig(&comm, static_cast<uint32_t>(members.size()), members.data(),
                              rank % 2, position, nullptr, &sub) != HCCL_SUCCESS) {
    return 11;
  }
  uint32_t size = 0, id = 0;
  if (HcclGetRankSize(sub, &size) != HCCL_SUCCESS || size != members.size() ||
      HcclGetRankId(sub, &id) != HCCL_SUCCESS || id != position) {
    return 12;
  }
  int64_t mine = rank + 1, sum = 0, want = 0;
  for (uint32_t m : members) {
    want += m + 1;
  }
  if (HcclAllReduce(&mine, &sum, 1, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, sub, nullptr) !=
          HCCL_SUCCESS ||
      sum != want) {
    std::fprintf(stderr, "rank %u: sub sum %lld, expected %lld\n", rank,
                 static_cast<long long>(sum), static_cast<long long>(want));
    return 13;
  }
  // The parent is still a communicator of every rank.
  if (HcclAllReduce(&mine, &sum, 1, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, comm, nullptr) !=
          HCCL_SUCCESS ||
      sum != static_cast<int64_t>(n) * (n + 1) / 2) {
    return 14;
  }
  char parent_name[COMM_NAME_MAX_LENGTH], sub_name[COMM_NAME_MAX_LENGTH];
  if (HcclGetCommName(comm, parent_name) != HCCL_SUCCESS ||
      HcclGetCommName(sub, sub_name) != HCCL_SUCCESS || std::strcmp(parent_name, sub_name) == 0) {
    return 15;
  }
  std::printf("rank %u: sub %s of %s\n", rank, sub_name, parent_name);
  if (HcclCommDestroy(sub) != HCCL_SUCCESS || HcclCommDestroy(comm) != HCCL_SUCCESS) {
    return 16;
  }
  return 0;
}
