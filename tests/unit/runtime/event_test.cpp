// SPDX-License-Identifier: Apache-2.0
// runtime/event: records complete when their stream reaches them, timestamps measure the
// stream's work, waits hold a stream until another one reaches a record.
#include "runtime/event.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "hzc_test.h"
#include "runtime/stream.h"

namespace hzc::runtime {
namespace {

using namespace std::chrono_literals;

class EventTest : public test::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(EventCount(), events_before_) << "test left events";
    EXPECT_EQ(StreamCount(), streams_before_) << "test left streams";
    test::Test::TearDown();
  }

  aclrtEvent NewEvent(uint32_t flags = kDefaultEventFlags) {
    aclrtEvent e = nullptr;
    EXPECT_TRUE(CreateEvent(flags, &e).ok());
    return e;
  }

  size_t events_before_ = EventCount();
  size_t streams_before_ = StreamCount();
};

// A task that blocks its stream until the promise is set.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  Task Blocker() {
    return [f = opened]() {
      f.wait();
      return Status::Ok();
    };
  }
};

bool Complete(aclrtEvent e) {
  bool complete = false;
  EXPECT_TRUE(QueryEvent(e, &complete).ok());
  return complete;
}

TEST_F(EventTest, ElapsedTimeMeasuresTheStreamsWork) {
  aclrtStream s = CreateStream();
  aclrtEvent start = NewEvent();
  aclrtEvent end = NewEvent(ACL_EVENT_TIME_LINE);
  ASSERT_TRUE(RecordEvent(start, s).ok());
  ASSERT_TRUE(Submit(s, "sleep", []() {
                std::this_thread::sleep_for(60ms);
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(RecordEvent(end, s).ok());
  std::this_thread::sleep_for(5ms);  // the caller's own time is not counted
  ASSERT_TRUE(SynchronizeEvent(end).ok());
  EXPECT_TRUE(Complete(end));
  float ms = 0;
  ASSERT_TRUE(ElapsedTime(&ms, start, end).ok());
  EXPECT_GE(ms, 55.0F);
  EXPECT_LT(ms, 5000.0F);
  float zero = -1;
  ASSERT_TRUE(ElapsedTime(&zero, end, end).ok());
  EXPECT_EQ(zero, 0.0F);
  EXPECT_TRUE(DestroyEvent(start).ok());
  EXPECT_TRUE(DestroyEvent(end).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(EventTest, CompleteOnlyWhenTheStreamReachesTheRecord) {
  aclrtStream s = CreateStream();
  aclrtEvent e = NewEvent();
  EXPECT_FALSE(Complete(e)) << "never recorded";
  EXPECT_TRUE(SynchronizeEvent(e).ok()) << "a never recorded event is no wait";
  Gate gate;
  ASSERT_TRUE(Submit(s, "blocked", gate.Blocker()).ok());
  ASSERT_TRUE(RecordEvent(e, s).ok());
  EXPECT_FALSE(Complete(e));
  EXPECT_EQ(SynchronizeEvent(e, 10).code(), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
  float ms = 0;
  EXPECT_EQ(ElapsedTime(&ms, e, e).code(), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
  gate.open.set_value();
  ASSERT_TRUE(SynchronizeEvent(e).ok());
  EXPECT_TRUE(Complete(e));
  // A reset on the stream makes it "not recorded" again once the stream gets there.
  ASSERT_TRUE(ResetEvent(e, s).ok());
  ASSERT_TRUE(Synchronize(s).ok());
  EXPECT_FALSE(Complete(e));
  EXPECT_EQ(ElapsedTime(&ms, e, e).code(), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  EXPECT_TRUE(DestroyEvent(e).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(EventTest, NullStreamRecordCompletesAtOnce) {
  aclrtEvent e = NewEvent();
  ASSERT_TRUE(RecordEvent(e, nullptr).ok());
  EXPECT_TRUE(Complete(e));
  ASSERT_TRUE(ResetEvent(e, nullptr).ok());
  EXPECT_FALSE(Complete(e));
  EXPECT_TRUE(DestroyEvent(e).ok());
}

TEST_F(EventTest, StreamWaitsForAnEventOfAnotherStream) {
  aclrtStream producer = CreateStream();
  aclrtStream consumer = CreateStream();
  aclrtEvent e = NewEvent(ACL_EVENT_SYNC);
  Gate gate;
  std::atomic<bool> produced{false};
  std::atomic<bool> seen{false};
  ASSERT_TRUE(Submit(producer, "blocked", gate.Blocker()).ok());
  ASSERT_TRUE(Submit(producer, "produce", [&]() {
                std::this_thread::sleep_for(20ms);
                produced = true;
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(RecordEvent(e, producer).ok());
  ASSERT_TRUE(StreamWaitEvent(consumer, e).ok());
  ASSERT_TRUE(Submit(consumer, "consume", [&]() {
                seen = produced.load();
                return Status::Ok();
              }).ok());
  bool waits_done = true;
  ASSERT_TRUE(QueryEventWait(e, &waits_done).ok());
  EXPECT_FALSE(waits_done);
  EXPECT_EQ(Synchronize(consumer, 30).code(), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
      << "the consumer ran past the wait";
  gate.open.set_value();
  ASSERT_TRUE(Synchronize(consumer).ok());
  EXPECT_TRUE(seen) << "the consumer's task ran before the producer's record";
  ASSERT_TRUE(QueryEventWait(e, &waits_done).ok());
  EXPECT_TRUE(waits_done);
  // Waiting for an event whose record is complete (or that was never recorded) passes at once.
  ASSERT_TRUE(StreamWaitEvent(consumer, e).ok());
  ASSERT_TRUE(Synchronize(consumer, 5000).ok());
  EXPECT_TRUE(DestroyEvent(e).ok());
  EXPECT_TRUE(DestroyStream(producer).ok());
  EXPECT_TRUE(DestroyStream(consumer).ok());
}

TEST_F(EventTest, ElapsedTimeErrors) {
  aclrtEvent untimed = NewEvent(ACL_EVENT_SYNC);
  aclrtEvent a = NewEvent();
  aclrtEvent b = NewEvent();
  float ms = 0;
  ASSERT_TRUE(RecordEvent(untimed, nullptr).ok());
  EXPECT_EQ(ElapsedTime(&ms, untimed, untimed).code(), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
  EXPECT_EQ(ElapsedTime(&ms, a, a).code(), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID) << "not recorded";
  ASSERT_TRUE(RecordEvent(b, nullptr).ok());
  std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(RecordEvent(a, nullptr).ok());
  EXPECT_EQ(ElapsedTime(&ms, a, b).code(), ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL);
  ASSERT_TRUE(ElapsedTime(&ms, b, a).ok());
  EXPECT_GT(ms, 0.0F);
  EXPECT_TRUE(DestroyEvent(untimed).ok());
  EXPECT_EQ(ElapsedTime(&ms, untimed, a).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_TRUE(DestroyEvent(a).ok());
  EXPECT_TRUE(DestroyEvent(b).ok());
}

TEST_F(EventTest, FlagsAndHandles) {
  aclrtEvent e = nullptr;
  EXPECT_EQ(CreateEvent(ACL_EVENT_IPC, &e).code(), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(CreateEvent(0x4, &e).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(CreateEvent(0x80000000U, &e).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(e, nullptr);
  for (uint32_t flags : {0U, kEventFlags, uint32_t{ACL_EVENT_EXTERNAL}}) {
    ASSERT_TRUE(CreateEvent(flags, &e).ok()) << flags;
    EXPECT_TRUE(IsEvent(e));
    EXPECT_TRUE(DestroyEvent(e).ok());
    EXPECT_FALSE(IsEvent(e));
  }
  EXPECT_EQ(DestroyEvent(e).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(RecordEvent(e, nullptr).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(ResetEvent(e, nullptr).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(SynchronizeEvent(e).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(StreamWaitEvent(nullptr, e).code(), ACL_ERROR_RT_INVALID_HANDLE);
  bool b = false;
  EXPECT_EQ(QueryEvent(e, &b).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(QueryEventWait(e, &b).code(), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(EventTest, RecordOnADeadStreamChangesNothing) {
  aclrtStream s = CreateStream();
  ASSERT_TRUE(DestroyStream(s).ok());
  aclrtEvent e = NewEvent();
  ASSERT_TRUE(RecordEvent(e, nullptr).ok());
  EXPECT_EQ(RecordEvent(e, s).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_TRUE(Complete(e)) << "the refused record replaced the completed one";
  EXPECT_EQ(ResetEvent(e, s).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(StreamWaitEvent(s, e).code(), ACL_ERROR_RT_INVALID_HANDLE);
  bool waits_done = false;
  ASSERT_TRUE(QueryEventWait(e, &waits_done).ok());
  EXPECT_TRUE(waits_done);
  EXPECT_TRUE(DestroyEvent(e).ok());
}

TEST_F(EventTest, DestroyedWhileARecordIsPending) {
  aclrtStream s = CreateStream();
  aclrtEvent e = NewEvent();
  Gate gate;
  ASSERT_TRUE(Submit(s, "blocked", gate.Blocker()).ok());
  ASSERT_TRUE(RecordEvent(e, s).ok());
  ASSERT_TRUE(StreamWaitEvent(s, e).ok());
  EXPECT_TRUE(DestroyEvent(e).ok());
  gate.open.set_value();
  EXPECT_TRUE(Synchronize(s).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

// ACL_STOP_ON_FAILURE discards the tasks after a failure, but not event records and waits:
// a thread or another stream waiting for them would wait forever.
TEST_F(EventTest, EventsStillCompleteAfterAFailureOnAStopOnFailureStream) {
  aclrtStream s = CreateStream();
  aclrtStream other = CreateStream();
  ASSERT_TRUE(SetFailureMode(s, ACL_STOP_ON_FAILURE).ok());
  aclrtEvent e = NewEvent();
  std::atomic<bool> discarded_ran{false};
  ASSERT_TRUE(Submit(s, "fails", [] { return Status(HCCL_E_INTERNAL, "on purpose"); }).ok());
  ASSERT_TRUE(Submit(s, "discarded", [&] {
                discarded_ran = true;
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(RecordEvent(e, s).ok());
  ASSERT_TRUE(StreamWaitEvent(other, e).ok());
  EXPECT_TRUE(SynchronizeEvent(e, 5000).ok());
  EXPECT_TRUE(Synchronize(other, 5000).ok());
  bool waits_done = false;
  ASSERT_TRUE(QueryEventWait(e, &waits_done).ok());
  EXPECT_TRUE(waits_done);
  EXPECT_FALSE(discarded_ran);
  EXPECT_EQ(Synchronize(s).code(), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_TRUE(DestroyEvent(e).ok());
  EXPECT_TRUE(DestroyStream(other).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

}  // namespace
}  // namespace hzc::runtime
