// SPDX-License-Identifier: Apache-2.0
// The table of collective kinds (kinds.cpp): per kind its name, its argument rules (what
// Validate checks and what the ranks compare before a call) and its entry points, all of one
// signature: the inline protocol of small calls (coll/inline.h, coll/exchange.h), the staging
// path (coll/staging.h, coll/exchange.h), the zero-copy path (coll/zero_copy.h,
// coll/exchange.h) and the hierarchical schedule across servers (coll/span.h). Includes only
// coll/call.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "coll/call.h"

namespace hzc::coll {

// An entry point: run @call (validated, agreed by every rank) as @ctx says.
using Entry = Status (*)(Context &ctx, const Call &call);
// An exchange's plan of @c for rank @me of @n, elements of @es bytes, into @p (empty):
// HCCL_E_PARA naming the argument when a count or displacement overflows.
using PlanFn = Status (*)(const Call &c, uint32_t n, uint32_t me, size_t es, Plan *p);

// The arrays of a call that must be the same on every rank (hashed into what ranks compare).
enum class Shared : uint8_t { kNone, kRecvArrays, kSendArrays, kCountMatrix };

struct KindInfo {
  Kind kind{};
  const char *name = "unknown";
  // Argument rules.
  bool reduces = false;        // combines the ranks' inputs with an HcclReduceOp
  bool rooted = false;         // has a root rank
  bool send_per_rank = false;  // the input holds one count-sized block per rank
  bool recv_per_rank = false;  // the output holds one count-sized block per rank
  bool vector = false;  // counts differ between ranks legitimately: the count is not compared
  Shared shared = Shared::kNone;  // the arrays every rank must share
  PlanFn plan = nullptr;          // an exchange (coll/exchange.h): this rank's plan; else null
  // Entry points (null: nothing to run after the arrival barrier, or no such path): inline
  // (coll/inline.h; small calls), staging, zero-copy, across servers.
  Entry inlined = nullptr;
  Entry staging = nullptr;
  Entry zero_copy = nullptr;
  Entry across = nullptr;  // across servers (coll/span.h)
};

// The kind's row of the table; null for a value that is no Kind (a peer's word).
const KindInfo *Find(Kind kind);
// The row of @kind; for a value that is no Kind, one named "unknown" with no rules and no
// entry points.
const KindInfo &Info(Kind kind);

const char *KindName(Kind kind);  // "unknown" for a value that is no Kind
bool Reduces(Kind kind);
bool HasRoot(Kind kind);
bool IsExchange(Kind kind);
// Whether the arguments of @kind differ between ranks legitimately (per-rank counts), so that
// the count is not compared.
bool IsVector(Kind kind);
// The kinds RunAcrossServers runs (all of Kind; point-to-point transfers, coll/p2p.h, stay
// HCCL_E_NOT_SUPPORT across servers).
bool RunsAcrossServers(Kind kind);

// A hash of @c's array arguments that must be the same on every rank of @nranks (0 when it has
// none); the arrays are read, so @c must have passed the null checks.
uint64_t SharedArgsHash(const Call &c, uint32_t nranks);

}  // namespace hzc::coll
