// SPDX-License-Identifier: Apache-2.0
#include "coll/kinds.h"

#include <iterator>

#include "coll/exchange.h"
#include "coll/inline.h"
#include "coll/span.h"
#include "coll/staging.h"
#include "coll/zero_copy.h"

namespace hzc::coll {

namespace {

constexpr KindInfo kKinds[] = {
    {.kind = Kind::kAllGather,
     .name = "AllGather",
     .recv_per_rank = true,
     .inlined = InlineAllGather,
     .staging = StagingAllGather,
     .zero_copy = ZeroCopyAllGather,
     .across = AcrossAllGather},
    {.kind = Kind::kBroadcast,
     .name = "Broadcast",
     .rooted = true,
     .inlined = InlineBroadcast,
     .staging = StagingBroadcast,
     .zero_copy = ZeroCopyBroadcast,
     .across = AcrossBroadcast},
    {.kind = Kind::kReduceScatter,
     .name = "ReduceScatter",
     .reduces = true,
     .send_per_rank = true,
     .inlined = InlineReduceScatter,
     .staging = StagingReduceScatter,
     .zero_copy = ZeroCopyReduceScatter,
     .across = AcrossReduceScatter},
    {.kind = Kind::kAllReduce,
     .name = "AllReduce",
     .reduces = true,
     .inlined = InlineAllReduce,
     .staging = StagingAllReduce,
     .zero_copy = ZeroCopyAllReduce,
     .across = AcrossAllReduce},
    // The arrival barrier of the call is all of it inside one server.
    {.kind = Kind::kBarrier, .name = "Barrier", .across = AcrossBarrier},
    {.kind = Kind::kReduce,
     .name = "Reduce",
     .reduces = true,
     .rooted = true,
     .plan = PlanReduce,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossReduce},
    {.kind = Kind::kScatter,
     .name = "Scatter",
     .rooted = true,
     .plan = PlanScatter,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossScatter},
    {.kind = Kind::kAllGatherV,
     .name = "AllGatherV",
     .vector = true,
     .shared = Shared::kRecvArrays,
     .plan = PlanAllGatherV,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossRegions},
    {.kind = Kind::kReduceScatterV,
     .name = "ReduceScatterV",
     .reduces = true,
     .vector = true,
     .shared = Shared::kSendArrays,
     .plan = PlanReduceScatterV,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossReduceScatterV},
    {.kind = Kind::kAlltoAll,
     .name = "AlltoAll",
     .plan = PlanAlltoAll,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossPairwise},
    {.kind = Kind::kAlltoAllV,
     .name = "AlltoAllV",
     .vector = true,
     .plan = PlanAlltoAllV,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossPairwise},
    {.kind = Kind::kAlltoAllVC,
     .name = "AlltoAllVC",
     .vector = true,
     .shared = Shared::kCountMatrix,
     .plan = PlanAlltoAllVC,
     .inlined = ExchangeInline,
     .staging = ExchangeStaging,
     .zero_copy = ExchangeZeroCopy,
     .across = AcrossPairwise},
};

const KindInfo kUnknown{};

}  // namespace

const KindInfo *Find(Kind kind) {
  for (const KindInfo &k : kKinds) {
    if (k.kind == kind) {
      return &k;
    }
  }
  return nullptr;
}

const KindInfo &Info(Kind kind) {
  const KindInfo *k = Find(kind);
  return k != nullptr ? *k : kUnknown;
}

const char *KindName(Kind kind) {
  return Info(kind).name;
}

bool Reduces(Kind kind) {
  return Info(kind).reduces;
}

bool HasRoot(Kind kind) {
  return Info(kind).rooted;
}

bool IsExchange(Kind kind) {
  return Info(kind).plan != nullptr;
}

bool IsVector(Kind kind) {
  return Info(kind).vector;
}

bool RunsAcrossServers(Kind kind) {
  return Info(kind).across != nullptr;
}

uint64_t SharedArgsHash(const Call &c, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
  auto mix = [&h](const uint64_t *a, size_t words) {
    for (size_t i = 0; i < words; ++i) {
      h = (h ^ a[i]) * 0x100000001b3ull;
    }
  };
  switch (Info(c.kind).shared) {
    case Shared::kRecvArrays:
      mix(c.recv_counts, n), mix(c.recv_displs, n);
      return h;
    case Shared::kSendArrays:
      mix(c.send_counts, n), mix(c.send_displs, n);
      return h;
    case Shared::kCountMatrix:
      mix(c.count_matrix, size_t{n} * n);
      return h;
    case Shared::kNone:
      break;
  }
  return 0;
}

}  // namespace hzc::coll
