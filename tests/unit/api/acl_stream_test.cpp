// SPDX-License-Identifier: Apache-2.0
// The ACL stream and event entry points (api/stream_api.cpp over runtime/stream and
// runtime/event): argument checks, codes and log lines, and work queued through the C API.
#include <acl/acl.h>
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "hzc_test.h"
#include "runtime/event.h"
#include "runtime/stream.h"

namespace {

using hzc::runtime::EventCount;
using hzc::runtime::StreamCount;

class AclStreamTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(StreamCount(), streams_) << "test left streams";
    EXPECT_EQ(EventCount(), events_) << "test left events";
    hzc::test::Test::TearDown();
  }
  size_t streams_ = StreamCount();
  size_t events_ = EventCount();
};

// A handle that was never a stream or event.
void *const kBogus = reinterpret_cast<void *>(0x1000);

TEST_F(AclStreamTest, StreamLifecycle) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_NE(s, nullptr);
  aclrtStream t = nullptr;
  ASSERT_EQ(aclrtCreateStreamWithConfig(&t, 3, 0x8), ACL_SUCCESS);
  EXPECT_NE(s, t);
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(s, -1), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(s, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetStreamFailureMode(nullptr, ACL_CONTINUE_ON_FAILURE), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(t), ACL_SUCCESS);
}

TEST_F(AclStreamTest, StreamBadArguments) {
  ExpectErrorLog("aclrtCreateStream: stream is null");
  EXPECT_EQ(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtCreateStreamWithConfig: stream is null");
  EXPECT_EQ(aclrtCreateStreamWithConfig(nullptr, 0, 0), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtDestroyStream: stream is null");
  EXPECT_EQ(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtDestroyStream: stream=0x1000: not a live stream");
  EXPECT_EQ(aclrtDestroyStream(kBogus), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtSynchronizeStream: stream=0x1000: not a live stream");
  EXPECT_EQ(aclrtSynchronizeStream(kBogus), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtSynchronizeStreamWithTimeout: timeout=-2: -1 (no limit) or a number of ms");
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(nullptr, -2), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtSynchronizeStreamWithTimeout: stream=0x1000: not a live stream");
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(kBogus, 1), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtSetStreamFailureMode: stream=0x1000: not a live stream");
  EXPECT_EQ(aclrtSetStreamFailureMode(kBogus, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtSetStreamFailureMode: mode=0x2: not ACL_CONTINUE_ON_FAILURE (0) nor");
  EXPECT_EQ(aclrtSetStreamFailureMode(nullptr, 2), ACL_ERROR_INVALID_PARAM);
  // A destroyed stream is as bad as a foreign one.
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  ExpectErrorLog(fmt::format("aclrtDestroyStream: stream={}: not a live stream", s));
  EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog(fmt::format("aclrtSynchronizeStream: stream={}: not a live stream", s));
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(AclStreamTest, EventLifecycleAndTiming) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent start = nullptr;
  aclrtEvent end = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&start), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC), ACL_SUCCESS);
  aclrtEventRecordedStatus recorded = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  ASSERT_EQ(aclrtQueryEventStatus(start, &recorded), ACL_SUCCESS);
  EXPECT_EQ(recorded, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  ASSERT_EQ(aclrtRecordEvent(start, s), ACL_SUCCESS);
  ASSERT_EQ(hzc::runtime::Submit(s, "sleep",
                                 []() {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(30));
                                   return hzc::Status::Ok();
                                 })
                .code(),
            HCCL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(end, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeEvent(end), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeEventWithTimeout(end, 0), ACL_SUCCESS);
  aclrtEventStatus status = ACL_EVENT_STATUS_RESERVED;
  ASSERT_EQ(aclrtQueryEvent(end, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_EVENT_STATUS_COMPLETE);
  ASSERT_EQ(aclrtQueryEventStatus(end, &recorded), ACL_SUCCESS);
  EXPECT_EQ(recorded, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  float ms = 0;
  ASSERT_EQ(aclrtEventElapsedTime(&ms, start, end), ACL_SUCCESS);
  EXPECT_GE(ms, 25.0F);
  EXPECT_LT(ms, 5000.0F);
  // A second stream waits for the first one's record.
  aclrtStream t = nullptr;
  ASSERT_EQ(aclrtCreateStream(&t), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(t, end), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(t), ACL_SUCCESS);
  aclrtEventWaitStatus wait = ACL_EVENT_WAIT_STATUS_RESERVED;
  ASSERT_EQ(aclrtQueryEventWaitStatus(end, &wait), ACL_SUCCESS);
  EXPECT_EQ(wait, ACL_EVENT_WAIT_STATUS_COMPLETE);
  ASSERT_EQ(aclrtResetEvent(end, t), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(t), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEvent(end, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_EVENT_STATUS_NOT_READY);
  EXPECT_EQ(aclrtDestroyEvent(start), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(end), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(t), ACL_SUCCESS);
}

TEST_F(AclStreamTest, EventBadArguments) {
  aclrtEvent e = nullptr;
  ExpectErrorLog("aclrtCreateEvent: event is null");
  EXPECT_EQ(aclrtCreateEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtCreateEventWithFlag: event is null");
  EXPECT_EQ(aclrtCreateEventWithFlag(nullptr, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtCreateEventWithFlag: flag=0x4: unknown bits 0x4");
  EXPECT_EQ(aclrtCreateEventWithFlag(&e, 0x4), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtCreateEventWithFlag: flag=0x40: ACL_EVENT_IPC is not supported");
  EXPECT_EQ(aclrtCreateEventWithFlag(&e, ACL_EVENT_IPC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  ExpectErrorLog("aclrtCreateEventExWithFlag: event is null");
  EXPECT_EQ(aclrtCreateEventExWithFlag(nullptr, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtCreateEventExWithFlag: flag=0x100: unknown bits");
  EXPECT_EQ(aclrtCreateEventExWithFlag(&e, 0x100), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(e, nullptr);
  ExpectErrorLog("aclrtDestroyEvent: event is null");
  EXPECT_EQ(aclrtDestroyEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtDestroyEvent: event=0x1000: not a live event");
  EXPECT_EQ(aclrtDestroyEvent(kBogus), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtRecordEvent: event is null");
  EXPECT_EQ(aclrtRecordEvent(nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtRecordEvent: event=0x1000: not a live event");
  EXPECT_EQ(aclrtRecordEvent(kBogus, nullptr), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtResetEvent: event is null");
  EXPECT_EQ(aclrtResetEvent(nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtSynchronizeEvent: event is null");
  EXPECT_EQ(aclrtSynchronizeEvent(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtSynchronizeEventWithTimeout: event is null");
  EXPECT_EQ(aclrtSynchronizeEventWithTimeout(nullptr, 1), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtStreamWaitEvent: event is null");
  EXPECT_EQ(aclrtStreamWaitEvent(nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtQueryEvent: status is null");
  ExpectErrorLog("aclrtQueryEventStatus: status is null");
  ExpectErrorLog("aclrtQueryEventWaitStatus: status is null");
  ExpectErrorLog("aclrtEventElapsedTime: ms is null");
  ExpectErrorLog("aclrtEventElapsedTime: startEvent is null");
  ExpectErrorLog("aclrtEventElapsedTime: endEvent is null");
  ExpectErrorLog("aclrtEventElapsedTime: startEvent=0x1000: not a live event");
  ExpectErrorLog("aclrtStreamWaitEvent: stream=0x1000: not a live stream");
  ExpectErrorLog("aclrtRecordEvent: stream=0x1000: not a live stream");
  ExpectErrorLog("aclrtSynchronizeEventWithTimeout: timeout=-5");
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  EXPECT_EQ(aclrtQueryEvent(e, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtQueryEventStatus(e, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtQueryEventWaitStatus(e, nullptr), ACL_ERROR_INVALID_PARAM);
  float ms = 0;
  EXPECT_EQ(aclrtEventElapsedTime(nullptr, e, e), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtEventElapsedTime(&ms, nullptr, e), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtEventElapsedTime(&ms, e, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtEventElapsedTime(&ms, kBogus, e), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtStreamWaitEvent(kBogus, e), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtRecordEvent(e, kBogus), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtSynchronizeEventWithTimeout(e, -5), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtEventElapsedTime: startEvent=");
  EXPECT_EQ(aclrtEventElapsedTime(&ms, e, e), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  ASSERT_EQ(aclrtDestroyEvent(e), ACL_SUCCESS);
  ExpectErrorLog("aclrtQueryEvent: event=");
  EXPECT_EQ(aclrtQueryEvent(e, reinterpret_cast<aclrtEventStatus *>(&ms)),
            ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(AclStreamTest, FailedTaskIsReportedBySynchronize) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(hzc::runtime::Submit(s, "HcclAllGather",
                                 []() { return hzc::Status(HCCL_E_REMOTE, "rank 2 died"); })
                .code(),
            HCCL_SUCCESS);
  ExpectErrorLog("aclrtSynchronizeStream: task HcclAllGather failed (code 21): rank 2 died");
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
}

}  // namespace
