// SPDX-License-Identifier: Apache-2.0
// Communication calls on a stream. With a NULL stream (the default stream) a call runs on the
// calling thread and is complete when it returns. With a stream from aclrtCreateStream the
// call is checked at once (bad arguments are its return value), then queued on the stream
// (runtime/stream.h): it runs after the work queued there before it, on the stream's worker,
// and the call returns without waiting. A queued call that fails records its error on the
// stream (aclrtSynchronizeStream returns it) and as the communicator's asynchronous error
// (HcclGetCommAsyncError), and logs one line naming the call. A queued call holds its
// communicator (@comm, captured) until the stream has run it: HcclCommDestroy waits for it.
#pragma once

#include <hccl/hccl_types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "base/log.h"
#include "base/status.h"
#include "core/comm.h"
#include "runtime/stream.h"

namespace hzc::api {

// A call counted among its communicator's queued calls (Communicator::QueuedCalls) until it has
// run or the stream discarded it.
class QueuedCount {
 public:
  explicit QueuedCount(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {
    comm_->CountQueued(1);
  }
  ~QueuedCount() { Drop(); }
  QueuedCount(const QueuedCount &) = delete;
  QueuedCount &operator=(const QueuedCount &) = delete;
  void Drop() {
    if (counted_.exchange(false)) {
      comm_->CountQueued(-1);
    }
  }

 private:
  std::shared_ptr<Communicator> comm_;
  std::atomic<bool> counted_{true};
};

// Run @work (the C function @name's work on @comm) now, or queue it on @stream.
inline Status OnStream(const char *name, const std::shared_ptr<Communicator> &comm,
                       aclrtStream stream, std::function<Status()> work) {
  if (stream == nullptr) {
    return work();
  }
  auto count = std::make_shared<QueuedCount>(comm);
  Status queued =
      runtime::Submit(stream, name, [name, comm, count, work = std::move(work)]() -> Status {
        Status st = work();
        count->Drop();
        if (!st.ok()) {
          comm->RecordAsyncError(static_cast<HcclResult>(st.code()));
          const LogRankScope rank_scope;
          LogError("{} (queued on a stream): {}", name, st.message());
        }
        return st;
      });
  if (!queued.ok()) {
    return Error(HCCL_E_PARA, "stream={}: cannot queue the call: {}", stream, queued.message());
  }
  return Status::Ok();
}

}  // namespace hzc::api
