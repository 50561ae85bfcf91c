// SPDX-License-Identifier: Apache-2.0
#include "verbs/board.h"

#include <linux/hzc.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/errno_string.h"

namespace hzc::verbs {

Status BoardPut(const BoardRef &board, uint32_t key, std::span<const std::byte> blob) {
  hzc_board_put arg{};
  arg.size = sizeof(arg);
  arg.domain_id[0] = board.domain[0];
  arg.domain_id[1] = board.domain[1];
  arg.rank = board.rank;
  arg.key = key;
  arg.blob = reinterpret_cast<uintptr_t>(blob.data());
  arg.blob_len = static_cast<uint32_t>(blob.size());
  if (::ioctl(board.fd, HZC_IOC_BOARD_PUT, &arg) == 0) {
    return Status::Ok();
  }
  const int err = errno;
  switch (err) {
    case ECONNRESET:
      return Error(HCCL_E_REMOTE, "board key {}: the domain broke (a rank left or died)", key);
    case EEXIST:
      return Error(HCCL_E_INTERNAL, "board key {}: rank {} already published it in this domain",
                   key, board.rank);
    default:
      return Error(HCCL_E_DRV, "board key {}: publish as rank {} failed: {}", key, board.rank,
                   ErrnoString(err));
  }
}

Expected<BoardBlobs> BoardWait(const BoardRef &board, uint32_t key, uint32_t stride,
                               std::chrono::steady_clock::time_point deadline,
                               std::string_view what) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  BoardBlobs out(board.nranks, stride);
  std::vector<uint64_t> missing((board.nranks + 63) / 64);
  for (;;) {
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now()).count();
    hzc_board_wait arg{};
    arg.size = sizeof(arg);
    arg.domain_id[0] = board.domain[0];
    arg.domain_id[1] = board.domain[1];
    arg.rank = board.rank;
    arg.key = key;
    arg.timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 0, UINT32_MAX));
    arg.blob_stride = stride;
    arg.blobs = reinterpret_cast<uintptr_t>(out.data_.data());
    arg.blob_lens = reinterpret_cast<uintptr_t>(out.lens_.data());
    arg.missing = reinterpret_cast<uintptr_t>(missing.data());
    if (::ioctl(board.fd, HZC_IOC_BOARD_WAIT, &arg) == 0) {
      return out;
    }
    const int err = errno;
    switch (err) {
      case EINTR:
        continue;
      case ETIMEDOUT: {
        std::string list;
        for (uint32_t r = 0; r < board.nranks; ++r) {
          if (missing[r / 64] & (1ULL << (r % 64))) {
            list += (list.empty() ? "" : ",") + std::to_string(r);
          }
        }
        return Error(HCCL_E_TIMEOUT, "{}: rank(s) {} of {} missing after the timeout", what, list,
                     board.nranks);
      }
      case ECONNRESET:
        return Error(HCCL_E_REMOTE, "{}: the domain broke (a rank left or died)", what);
      case EMSGSIZE:
        return Error(HCCL_E_INTERNAL, "{}: a rank published more than {} bytes under key {}", what,
                     stride, key);
      default:
        return Error(HCCL_E_DRV, "{}: board wait on key {} failed: {}", what, key,
                     ErrnoString(err));
    }
  }
}

}  // namespace hzc::verbs
