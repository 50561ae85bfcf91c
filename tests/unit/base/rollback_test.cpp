// SPDX-License-Identifier: Apache-2.0
#include "base/rollback.h"

#include <new>
#include <string>

#include "hzc_test.h"

namespace hzc {
namespace {

using RollbackTest = test::Test;

TEST_F(RollbackTest, UndoesNewestFirstWithoutCommit) {
  std::string undone;
  {
    Rollback rollback;
    rollback.Push([&] { undone += "a"; });
    rollback.Push([&] { undone += "b"; });
    rollback.Push([&] { undone += "c"; });
    EXPECT_EQ(undone, "");  // nothing before the scope ends
  }
  EXPECT_EQ(undone, "cba");
}

TEST_F(RollbackTest, CommitKeepsEveryStep) {
  int undone = 0;
  {
    Rollback rollback;
    rollback.Push([&] { ++undone; });
    rollback.Push([&] { ++undone; });
    rollback.Commit();
  }
  EXPECT_EQ(undone, 0);
}

TEST_F(RollbackTest, NothingToUndo) {
  Rollback rollback;  // a call that failed at its first step
}

// An undo that cannot be kept (here: copying it throws, as an allocation would) runs at once,
// so the step it belongs to is undone too, and before the steps pushed earlier.
struct ThrowingCopy {
  std::string *log;
  explicit ThrowingCopy(std::string *l) : log(l) {}
  ThrowingCopy(const ThrowingCopy &) { throw std::bad_alloc(); }
  void operator()() const { *log += "t"; }
};

TEST_F(RollbackTest, UndoThatCannotBeKeptRunsAtOnce) {
  std::string undone;
  {
    Rollback rollback;
    rollback.Push([&] { undone += "a"; });
    EXPECT_THROW(rollback.Push(ThrowingCopy(&undone)), std::bad_alloc);
    EXPECT_EQ(undone, "t");
  }
  EXPECT_EQ(undone, "ta");
}

}  // namespace
}  // namespace hzc
