// SPDX-License-Identifier: Apache-2.0
// runtime/stream: each stream's worker runs its tasks in submission order, failures are kept
// until Synchronize, ACL_STOP_ON_FAILURE discards, destroy waits for queued work.
#include "runtime/stream.h"

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hzc_test.h"

namespace hzc::runtime {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class StreamTest : public test::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(StreamCount(), before_) << "test left streams";
    test::Test::TearDown();
  }
  size_t before_ = StreamCount();
};

// A task that fails with @code.
Task Failing(int code, const char *message) {
  return [code, message]() { return Status(static_cast<HcclResult>(code), message); };
}

TEST_F(StreamTest, TasksRunInOrderOnTheWorker) {
  aclrtStream s = CreateStream();
  ASSERT_TRUE(IsStream(s));
  constexpr int kTasks = 2000;
  std::vector<int> order;
  std::atomic<bool> on_caller{false};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(Submit(s, "append", [&order, &on_caller, caller, i]() {
                  on_caller = on_caller || std::this_thread::get_id() == caller;
                  order.push_back(i);
                  return Status::Ok();
                }).ok());
  }
  ASSERT_TRUE(Synchronize(s).ok());
  ASSERT_EQ(order.size(), static_cast<size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_EQ(order[i], i);
  }
  EXPECT_FALSE(on_caller) << "a task ran on the submitting thread";
  EXPECT_TRUE(DestroyStream(s).ok());
  EXPECT_FALSE(IsStream(s));
}

TEST_F(StreamTest, SubmittersOnSeveralThreadsKeepTheirOrder) {
  aclrtStream s = CreateStream();
  constexpr int kThreads = 4;
  constexpr int kTasks = 500;
  std::mutex mu;
  std::vector<std::pair<int, int>> ran;  // (thread, index); the worker alone appends
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      for (int i = 0; i < kTasks; ++i) {
        EXPECT_TRUE(Submit(s, "append", [&, t, i]() {
                      const std::lock_guard lock(mu);
                      ran.emplace_back(t, i);
                      return Status::Ok();
                    }).ok());
      }
    });
  }
  for (auto &th : threads) {
    th.join();
  }
  ASSERT_TRUE(Synchronize(s).ok());
  ASSERT_EQ(ran.size(), static_cast<size_t>(kThreads * kTasks));
  std::vector<int> next(kThreads, 0);
  for (const auto &[t, i] : ran) {
    ASSERT_EQ(i, next[t]) << "thread " << t << "'s tasks ran out of order";
    ++next[t];
  }
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, SynchronizeWaitsForQueuedWork) {
  aclrtStream s = CreateStream();
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Submit(s, "sleep", [&]() {
                  std::this_thread::sleep_for(20ms);
                  ++done;
                  return Status::Ok();
                }).ok());
  }
  EXPECT_LT(done.load(), 3) << "Submit waited for the work";
  ASSERT_TRUE(Synchronize(s).ok());
  EXPECT_EQ(done.load(), 3);
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, NullStreamRunsAtOnceOnTheCaller) {
  std::thread::id ran_on;
  Status st = Submit(nullptr, "now", [&]() {
    ran_on = std::this_thread::get_id();
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  st = Submit(nullptr, "fails", Failing(HCCL_E_PARA, "bad"));
  EXPECT_EQ(st.code(), HCCL_E_PARA);
  EXPECT_EQ(st.message(), "bad");
  EXPECT_TRUE(Synchronize(nullptr).ok());
  EXPECT_FALSE(IsStream(nullptr));
}

TEST_F(StreamTest, FailureIsKeptUntilSynchronize) {
  aclrtStream s = CreateStream();
  std::atomic<int> after{0};
  ASSERT_TRUE(Submit(s, "HcclAllReduce", Failing(HCCL_E_PARA, "rank 1 disagrees")).ok());
  ASSERT_TRUE(Submit(s, "second", Failing(HCCL_E_INTERNAL, "not reported")).ok());
  ASSERT_TRUE(Submit(s, "count", [&]() {
                ++after;
                return Status::Ok();
              }).ok());
  AclStatus st = Synchronize(s);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_THAT(st.message(), HasSubstr("HcclAllReduce"));
  EXPECT_THAT(st.message(), HasSubstr("rank 1 disagrees"));
  EXPECT_EQ(after.load(), 1) << "ACL_CONTINUE_ON_FAILURE runs the tasks after a failure";
  EXPECT_TRUE(Synchronize(s).ok()) << "the failure is cleared";
  // A task failing with an aclError returns that code.
  ASSERT_TRUE(Submit(s, "copy", Failing(ACL_ERROR_RT_INVALID_MEMORY_TYPE, "dst")).ok());
  EXPECT_EQ(Synchronize(s).code(), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, StopOnFailureDiscardsUntilSynchronize) {
  aclrtStream s = CreateStream();
  ASSERT_TRUE(SetFailureMode(s, ACL_STOP_ON_FAILURE).ok());
  std::atomic<int> ran{0};
  auto count = [&]() {
    ++ran;
    return Status::Ok();
  };
  ASSERT_TRUE(Submit(s, "first", count).ok());
  ASSERT_TRUE(Submit(s, "fails", Failing(HCCL_E_REMOTE, "peer died")).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Submit(s, "discarded", count).ok());
  }
  AclStatus st = Synchronize(s);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_THAT(st.message(), HasSubstr("peer died"));
  EXPECT_EQ(ran.load(), 1);
  ASSERT_TRUE(Submit(s, "runs again", count).ok());
  EXPECT_TRUE(Synchronize(s).ok());
  EXPECT_EQ(ran.load(), 2);
  // Back to continuing.
  ASSERT_TRUE(SetFailureMode(s, ACL_CONTINUE_ON_FAILURE).ok());
  ASSERT_TRUE(Submit(s, "fails", Failing(HCCL_E_REMOTE, "again")).ok());
  ASSERT_TRUE(Submit(s, "runs", count).ok());
  EXPECT_FALSE(Synchronize(s).ok());
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(SetFailureMode(s, 2).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_TRUE(SetFailureMode(nullptr, ACL_STOP_ON_FAILURE).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, ExceptionOfATaskIsAFailure) {
  aclrtStream s = CreateStream();
  ASSERT_TRUE(Submit(s, "throws", []() -> Status { throw std::runtime_error("oops"); }).ok());
  AclStatus st = Synchronize(s);
  EXPECT_EQ(st.code(), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_THAT(st.message(), HasSubstr("oops"));
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, DestroyWaitsForPendingWork) {
  aclrtStream s = CreateStream();
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Submit(s, "sleep", [&]() {
                  std::this_thread::sleep_for(10ms);
                  ++done;
                  return Status::Ok();
                }).ok());
  }
  EXPECT_TRUE(DestroyStream(s).ok());
  EXPECT_EQ(done.load(), 5);
  EXPECT_FALSE(IsStream(s));
  bool ran = false;
  Status st = Submit(s, "late", [&]() {
    ran = true;
    return Status::Ok();
  });
  EXPECT_EQ(static_cast<int>(st.code()), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_THAT(st.message(), HasSubstr("not a live stream"));
  EXPECT_FALSE(ran);
  EXPECT_EQ(DestroyStream(s).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(Synchronize(s).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(SetFailureMode(s, ACL_STOP_ON_FAILURE).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(DestroyStream(nullptr).code(), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(StreamTest, SynchronizeTimesOut) {
  aclrtStream s = CreateStream();
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  ASSERT_TRUE(Submit(s, "blocked", [gate]() {
                gate.wait();
                return Status::Ok();
              }).ok());
  EXPECT_EQ(Synchronize(s, 10).code(), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  go.set_value();
  EXPECT_TRUE(Synchronize(s, 10000).ok());
  EXPECT_TRUE(Synchronize(s, 0).ok());
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, ATaskCannotWaitForItsOwnStream) {
  aclrtStream s = CreateStream();
  AclStatus inner;
  ASSERT_TRUE(Submit(s, "sync self", [&]() {
                inner = Synchronize(s);
                return Status::Ok();
              }).ok());
  ASSERT_TRUE(Synchronize(s).ok());
  EXPECT_EQ(inner.code(), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_TRUE(DestroyStream(s).ok());
}

TEST_F(StreamTest, DestroyAllStreamsRunsTheirWork) {
  aclrtStream a = CreateStream();
  aclrtStream b = CreateStream();
  std::atomic<int> done{0};
  for (aclrtStream s : {a, b}) {
    ASSERT_TRUE(Submit(s, "sleep", [&]() {
                  std::this_thread::sleep_for(10ms);
                  ++done;
                  return Status::Ok();
                }).ok());
  }
  DestroyAllStreams();
  EXPECT_EQ(done.load(), 2);
  EXPECT_FALSE(IsStream(a));
  EXPECT_FALSE(IsStream(b));
  before_ = 0;
}

TEST_F(StreamTest, TaskFailureCodes) {
  EXPECT_EQ(TaskFailureCode(HCCL_E_PARA), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(TaskFailureCode(HCCL_E_RESERVED), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(TaskFailureCode(ACL_ERROR_INVALID_PARAM), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(TaskFailureCode(ACL_ERROR_RT_MEMORY_ALLOCATION), ACL_ERROR_RT_MEMORY_ALLOCATION);
}

}  // namespace
}  // namespace hzc::runtime
