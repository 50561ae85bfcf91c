// SPDX-License-Identifier: Apache-2.0
// ACL streams on the host. A stream made by aclrtCreateStream owns one worker thread that runs
// the tasks submitted to it one after the other, in the order they were submitted (from any
// thread). NULL is the default stream: a task submitted to it runs at once on the calling
// thread.
//
// A task's failing status is recorded on its stream (the first failure since the last
// synchronize) and returned by Synchronize, which clears it. With ACL_STOP_ON_FAILURE the
// tasks that reach the worker after a failure are discarded (not run) until the next
// Synchronize; with ACL_CONTINUE_ON_FAILURE (the default) they run.
#pragma once

#include <acl/acl_rt.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

// A task's status; its code is an HcclResult or an aclError (both 0 for success).
using Task = std::function<Status()>;

// A new stream with its worker thread.
aclrtStream CreateStream();

// Wait for the work queued on @stream, then stop its worker and forget the handle.
// ACL_ERROR_RT_INVALID_HANDLE when @stream is not a live stream (NULL included).
AclStatus DestroyStream(aclrtStream stream);

// Whether @stream is a live stream of this process (NULL is not).
bool IsStream(aclrtStream stream);

// Run @task on @stream after everything queued on it before. NULL stream (the default
// stream): run @task now on the calling thread and return its status. A stream that is not
// live: ACL_ERROR_RT_INVALID_HANDLE (as the code of the returned status), task not run.
// Otherwise returns Ok once queued; the task's failure is recorded on the stream.
// @always: the task runs even when ACL_STOP_ON_FAILURE discards the tasks around it (event
// records and waits, which other streams and threads wait for).
Status Submit(aclrtStream stream, const char *what, Task task, bool always = false);

// Wait until every live stream has run what was queued on it so far (failures stay recorded),
// except the calling task's own stream: before memory that queued work may use goes away.
void WaitAllStreams();

// Wait until every task queued on @stream so far has run (NULL: nothing to wait for), at most
// @timeout_ms milliseconds (-1: no limit; ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when it passes).
// Then return the recorded failure, if any, and clear it: an aclError a task failed with, or
// ACL_ERROR_RT_INTERNAL_ERROR for any other failure (an HcclResult); the message names the
// task (@what of Submit) and its own message.
AclStatus Synchronize(aclrtStream stream, int32_t timeout_ms = -1);

// ACL_CONTINUE_ON_FAILURE or ACL_STOP_ON_FAILURE for the tasks of @stream. NULL: checked, no
// effect (the default stream's tasks run in the call that submits them and fail it).
AclStatus SetFailureMode(aclrtStream stream, uint64_t mode);

// Destroy every live stream (each waits for its queued work): aclFinalize.
void DestroyAllStreams();

// For tests: the live streams.
size_t StreamCount();

// The code Synchronize returns for a task that failed with @code.
aclError TaskFailureCode(int code);

}  // namespace hzc::runtime
