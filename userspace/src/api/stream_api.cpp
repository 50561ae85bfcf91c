// SPDX-License-Identifier: Apache-2.0
// ACL streams and events: argument checks, then runtime/stream and runtime/event (host worker
// threads that run each stream's work in order).
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "runtime/event.h"
#include "runtime/stream.h"

namespace rt = hzc::runtime;
using hzc::Error;
using hzc::api::AclGuard;
using hzc::api::NotNull;
using AclStatus = hzc::BasicStatus<aclError>;

namespace {

// A timeout in ms: -1 (none) or more.
AclStatus CheckTimeout(int32_t timeout) {
  if (timeout < -1) {
    return Error(ACL_ERROR_INVALID_PARAM, "timeout={}: -1 (no limit) or a number of ms", timeout);
  }
  return AclStatus::Ok();
}

}  // namespace

aclError aclrtCreateStream(aclrtStream *stream) {
  return AclGuard("aclrtCreateStream", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(stream, "stream"));
    *stream = rt::CreateStream();
    return AclStatus::Ok();
  });
}

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
  return AclGuard("aclrtCreateStreamWithConfig", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(stream, "stream"));
    (void)priority;  // one FIFO worker per stream: priorities and flags change nothing
    (void)flag;
    *stream = rt::CreateStream();
    return AclStatus::Ok();
  });
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return AclGuard("aclrtDestroyStream", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(stream, "stream"));
    return rt::DestroyStream(stream);
  });
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  return AclGuard("aclrtSynchronizeStream",
                  [&]() -> AclStatus { return rt::Synchronize(stream, -1); });
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  return AclGuard("aclrtSynchronizeStreamWithTimeout", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(CheckTimeout(timeout));
    return rt::Synchronize(stream, timeout);
  });
}

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
  return AclGuard("aclrtSetStreamFailureMode",
                  [&]() -> AclStatus { return rt::SetFailureMode(stream, mode); });
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return AclGuard("aclrtStreamWaitEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::StreamWaitEvent(stream, event);
  });
}

aclError aclrtCreateEvent(aclrtEvent *event) {
  return AclGuard("aclrtCreateEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::CreateEvent(rt::kDefaultEventFlags, event);
  });
}

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
  return AclGuard("aclrtCreateEventWithFlag", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::CreateEvent(flag, event);
  });
}

aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) {
  return AclGuard("aclrtCreateEventExWithFlag", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::CreateEvent(flag, event);
  });
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  return AclGuard("aclrtDestroyEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::DestroyEvent(event);
  });
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return AclGuard("aclrtRecordEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::RecordEvent(event, stream);
  });
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  return AclGuard("aclrtResetEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::ResetEvent(event, stream);
  });
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return AclGuard("aclrtSynchronizeEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    return rt::SynchronizeEvent(event, -1);
  });
}

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
  return AclGuard("aclrtSynchronizeEventWithTimeout", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    HZC_RETURN_IF_ERROR(CheckTimeout(timeout));
    return rt::SynchronizeEvent(event, timeout);
  });
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status) {
  return AclGuard("aclrtQueryEvent", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(status, "status"));
    bool complete = false;
    HZC_RETURN_IF_ERROR(rt::QueryEvent(event, &complete));
    *status = complete ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    return AclStatus::Ok();
  });
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
  return AclGuard("aclrtQueryEventStatus", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(status, "status"));
    bool complete = false;
    HZC_RETURN_IF_ERROR(rt::QueryEvent(event, &complete));
    *status = complete ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return AclStatus::Ok();
  });
}

aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status) {
  return AclGuard("aclrtQueryEventWaitStatus", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(event, "event"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(status, "status"));
    bool complete = false;
    HZC_RETURN_IF_ERROR(rt::QueryEventWait(event, &complete));
    *status = complete ? ACL_EVENT_WAIT_STATUS_COMPLETE : ACL_EVENT_WAIT_STATUS_NOT_READY;
    return AclStatus::Ok();
  });
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  return AclGuard("aclrtEventElapsedTime", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(ms, "ms"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(startEvent, "startEvent"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(endEvent, "endEvent"));
    return rt::ElapsedTime(ms, startEvent, endEvent);
  });
}
