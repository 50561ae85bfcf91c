// SPDX-License-Identifier: Apache-2.0
#include "base/process_id.h"

#include <unistd.h>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc {
namespace {

using ProcessIdTest = test::Test;

TEST_F(ProcessIdTest, IsThisProcessAndAChildsOwn) {
  EXPECT_EQ(ProcessId(), getpid());
  EXPECT_EQ(ProcessId(), getpid());  // kept
  test::ForkedChild child([](test::ForkedChild::Pipes) { return ProcessId() == getpid() ? 0 : 1; });
  EXPECT_EQ(child.Wait(), 0);
  // A grandchild too: the child's value was forgotten at its fork, then kept again.
  test::ForkedChild twice([](test::ForkedChild::Pipes) {
    if (ProcessId() != getpid()) {
      return 1;
    }
    test::ForkedChild inner(
        [](test::ForkedChild::Pipes) { return ProcessId() == getpid() ? 0 : 1; });
    return inner.Wait();
  });
  EXPECT_EQ(twice.Wait(), 0);
  EXPECT_EQ(ProcessId(), getpid());
}

}  // namespace
}  // namespace hzc
