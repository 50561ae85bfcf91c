// SPDX-License-Identifier: Apache-2.0
#include "verbs/board.h"

#include <algorithm>
#include <string>

namespace hzc::verbs {

Status BoardPutError(const Status &failed, uint32_t key, uint32_t rank) {
  switch (failed.code()) {
    case HCCL_E_REMOTE:
      return Error(HCCL_E_REMOTE, "board key {}: the domain broke (a rank left or died)", key);
    case HCCL_E_INTERNAL:
      return Error(HCCL_E_INTERNAL, "board key {}: rank {} already published it in this domain",
                   key, rank);
    default:  // an errno the board does not document for a valid publish
      return Error(HCCL_E_DRV, "board key {}: {}", key, failed.message());
  }
}

Status BoardWaitError(const Status &failed, std::string_view what, uint32_t key, uint32_t stride,
                      std::span<const uint32_t> missing, uint32_t nranks) {
  switch (failed.code()) {
    case HCCL_E_TIMEOUT:
      return Error(HCCL_E_TIMEOUT, "{}: rank(s) {} of {} missing after the timeout", what,
                   RankList(missing), nranks);
    case HCCL_E_REMOTE:
      return Error(HCCL_E_REMOTE, "{}: the domain broke (a rank left or died)", what);
    case HCCL_E_INTERNAL:
      return Error(HCCL_E_INTERNAL, "{}: a rank published more than {} bytes under key {}", what,
                   stride, key);
    default:  // an errno the board does not document for a valid wait
      return Error(HCCL_E_DRV, "{}: {}", what, failed.message());
  }
}

Status Board::Put(uint32_t key, std::span<const std::byte> blob) const {
  Status st =
      device_.BoardPut(domain_, rank_, key, blob.data(), static_cast<uint32_t>(blob.size()));
  return st.ok() ? st : BoardPutError(st, key, rank_);
}

Expected<BoardBlobs> Board::Wait(uint32_t key, uint32_t stride,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::string_view what) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  BoardBlobs out(nranks_, stride);
  const auto left = duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  std::vector<uint32_t> missing;
  Status st =
      device_.BoardWait(domain_, rank_, nranks_, key,
                        static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 0, UINT32_MAX)),
                        &missing, out.data(), stride, out.lens());
  if (!st.ok()) {
    return BoardWaitError(st, what, key, stride, missing, nranks_);
  }
  return out;
}

}  // namespace hzc::verbs
