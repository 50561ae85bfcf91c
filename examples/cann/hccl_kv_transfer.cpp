// SPDX-License-Identifier: Apache-2.0
// Moving a KV cache between servers with HCCL's one-sided calls, as disaggregated inference does
// (prefill on one server, decode on another).
//
//   hccl_kv_transfer RANK_TABLE RANK [STEPS]
//
// Every server of the rank table has the same number of ranks, L. The ranks of the first server
// hold a KV cache (prefill), rank r's for rank r + L of the second server (decode), each block
// of it 16, 64 or 256 KiB in one pool. Each pair registers its pool for the other and swaps
// the descriptors; prefill enables decode's pool, then per step ("layer") sends that layer's
// blocks to the same place in decode's pool with one HcclBatchPut on a stream. A barrier on the
// communicator tells decode that everything arrived; it checks every byte, then reads the
// first layer back from prefill's pool with one HcclBatchGet and checks it again. Exit 0 when
// every byte arrived, 1 otherwise (a line says which).
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_one_sided_services.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr uint32_t kBlocksPerLayer = 24;
constexpr size_t kBlockSizes[] = {16 << 10, 64 << 10, 256 << 10};

#define CHECK(call)                                                                           \
  do {                                                                                        \
    int rc_ = static_cast<int>(call);                                                         \
    if (rc_ != 0) {                                                                           \
      std::fprintf(stderr, "rank %u: %s failed: %d (line %d)\n", rank, #call, rc_, __LINE__); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

struct Block {
  size_t offset, size;
};

uint8_t Byte(uint32_t sender, size_t block, size_t i) {
  return static_cast<uint8_t>(sender * 131 + block * 17 + i * 3 + (i >> 10));
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RANK_TABLE RANK [STEPS]\n", argv[0]);
    return 2;
  }
  const uint32_t rank = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const uint32_t steps = argc > 3 ? static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)) : 4;
  HcclComm comm = nullptr;
  CHECK(aclInit(nullptr));
  CHECK(HcclCommInitClusterInfo(argv[1], rank, &comm));
  uint32_t n = 0;
  CHECK(HcclGetRankSize(comm, &n));
  const uint32_t per = n / 2;  // two servers of L ranks each
  const bool prefill = rank < per;
  const uint32_t peer = prefill ? rank + per : rank - per;
  const uint32_t sender = prefill ? rank : peer;

  // The layout of the cache: steps x kBlocksPerLayer blocks of mixed sizes, back to back.
  std::vector<Block> blocks;
  size_t pool_bytes = 0;
  for (size_t b = 0; b < size_t{steps} * kBlocksPerLayer; ++b) {
    const size_t size = kBlockSizes[b % 3];
    blocks.push_back({pool_bytes, size});
    pool_bytes += size;
  }
  std::vector<uint8_t> pool(pool_bytes, 0);
  if (prefill) {
    for (size_t b = 0; b < blocks.size(); ++b) {
      for (size_t i = 0; i < blocks[b].size; ++i) {
        pool[blocks[b].offset + i] = Byte(sender, b, i);
      }
    }
  }

  HcclMemDesc mine, theirs;
  CHECK(HcclRegisterMem(comm, peer, HCCL_MEM_TYPE_HOST, pool.data(), pool.size(), &mine));
  HcclMemDescs local = {&mine, 1}, remote = {&theirs, 1};
  uint32_t got = 0;
  CHECK(HcclExchangeMemDesc(comm, peer, &local, 0, &remote, &got));
  HcclMem peer_pool;
  CHECK(HcclEnableMemAccess(comm, &theirs, &peer_pool));
  auto *const base = static_cast<uint8_t *>(peer_pool.addr);
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));

  if (prefill) {
    std::vector<HcclOneSideOpDesc> ops(kBlocksPerLayer);
    for (uint32_t s = 0; s < steps; ++s) {
      for (uint32_t k = 0; k < kBlocksPerLayer; ++k) {
        const Block &b = blocks[s * kBlocksPerLayer + k];
        ops[k] = {pool.data() + b.offset, base + b.offset, b.size, HCCL_DATA_TYPE_INT8};
      }
      CHECK(HcclBatchPut(comm, peer, ops.data(), kBlocksPerLayer, stream));
    }
    CHECK(aclrtSynchronizeStream(stream));
  }
  CHECK(HcclBarrier(comm, nullptr));  // every layer has landed

  int bad = 0;
  if (!prefill) {
    for (size_t b = 0; b < blocks.size() && bad == 0; ++b) {
      for (size_t i = 0; i < blocks[b].size; ++i) {
        if (pool[blocks[b].offset + i] != Byte(sender, b, i)) {
          std::fprintf(stderr, "rank %u: block %zu byte %zu is %u, expected %u\n", rank, b, i,
                       pool[blocks[b].offset + i], Byte(sender, b, i));
          bad = 1;
          break;
        }
      }
    }
    // The first layer once more, read back from prefill's pool over what arrived.
    std::vector<HcclOneSideOpDesc> ops(kBlocksPerLayer);
    for (uint32_t k = 0; k < kBlocksPerLayer; ++k) {
      const Block &b = blocks[k];
      for (size_t i = 0; i < b.size; ++i) {
        pool[b.offset + i] = 0;
      }
      ops[k] = {pool.data() + b.offset, base + b.offset, b.size, HCCL_DATA_TYPE_INT8};
    }
    CHECK(HcclBatchGet(comm, peer, ops.data(), kBlocksPerLayer, stream));
    CHECK(aclrtSynchronizeStream(stream));
    for (uint32_t k = 0; k < kBlocksPerLayer && bad == 0; ++k) {
      for (size_t i = 0; i < blocks[k].size; ++i) {
        if (pool[blocks[k].offset + i] != Byte(sender, k, i)) {
          std::fprintf(stderr, "rank %u: read back: block %u byte %zu is wrong\n", rank, k, i);
          bad = 1;
          break;
        }
      }
    }
    if (bad == 0) {
      std::printf("rank %u: %zu blocks (%zu bytes) from rank %u in %u steps, every byte right\n",
                  rank, blocks.size(), pool_bytes, peer, steps);
    }
  }
  CHECK(HcclBarrier(comm, nullptr));  // prefill keeps its pool until decode has read it
  CHECK(HcclDisableMemAccess(comm, &theirs));
  CHECK(HcclDeregisterMem(comm, &mine));
  CHECK(aclrtDestroyStream(stream));
  CHECK(HcclCommDestroy(comm));
  CHECK(aclFinalize());
  return bad;
}
