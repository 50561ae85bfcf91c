// SPDX-License-Identifier: Apache-2.0
// ACL events on the host. Recording an event on a stream queues a marker task (runtime/stream);
// the event completes when the stream's worker reaches the marker, and takes its timestamp
// (steady clock) then, so the time between two events measures the work the stream ran between
// them. A record on the NULL (default) stream completes at once. aclrtStreamWaitEvent queues a
// task that blocks the stream until the event's last record, as of the call, has completed (an
// event never recorded is no wait).
#pragma once

#include <acl/acl_rt.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

// The flags aclrtCreateEventWithFlag accepts: ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS,
// ACL_EVENT_TIME_LINE, ACL_EVENT_DEVICE_USE_ONLY, ACL_EVENT_EXTERNAL (ACL_EVENT_IPC is not
// supported: events are not shared between processes).
inline constexpr uint32_t kEventFlags = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS |
                                        ACL_EVENT_TIME_LINE | ACL_EVENT_DEVICE_USE_ONLY |
                                        ACL_EVENT_EXTERNAL;
// The flags of aclrtCreateEvent's events.
inline constexpr uint32_t kDefaultEventFlags = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;

AclStatus CreateEvent(uint32_t flags, aclrtEvent *out);
// Pending records and waits still complete; the handle is dead at once.
AclStatus DestroyEvent(aclrtEvent event);
bool IsEvent(aclrtEvent event);

AclStatus RecordEvent(aclrtEvent event, aclrtStream stream);
// The event returns to "not recorded" when @stream reaches this point.
AclStatus ResetEvent(aclrtEvent event, aclrtStream stream);
// Block until the event's last record has completed (at once if never recorded).
AclStatus SynchronizeEvent(aclrtEvent event, int32_t timeout_ms = -1);
AclStatus StreamWaitEvent(aclrtStream stream, aclrtEvent event);

// Recorded and completed (true), or not recorded / not yet reached (false).
AclStatus QueryEvent(aclrtEvent event, bool *complete);
// Every wait queued on the event (aclrtStreamWaitEvent) has passed.
AclStatus QueryEventWait(aclrtEvent event, bool *complete);

// Milliseconds from @start's completion to @end's. Both must have ACL_EVENT_TIME_LINE, be
// recorded and complete.
AclStatus ElapsedTime(float *ms, aclrtEvent start, aclrtEvent end);

// Forget every event (aclFinalize).
void DestroyAllEvents();

// For tests: the live events.
size_t EventCount();

}  // namespace hzc::runtime
