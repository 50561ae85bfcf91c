// SPDX-License-Identifier: Apache-2.0
// UniqueMapping: owns an mmap'd region and unmaps it exactly once.
#include "base/unique_mapping.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "hzc_test.h"

namespace hzc {
namespace {

using UniqueMappingTest = test::Test;

// Whether [p, p + len) is mapped (msync fails with ENOMEM on unmapped pages).
bool Mapped(void *p, size_t len) {
  return msync(p, len, MS_ASYNC) == 0;
}

size_t Page() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

UniqueMapping Anonymous(size_t len) {
  return UniqueMapping::Map(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
}

TEST_F(UniqueMappingTest, UnmapsOnDestruction) {
  void *p = nullptr;
  {
    UniqueMapping m = Anonymous(2 * Page());
    ASSERT_TRUE(m.valid());
    EXPECT_EQ(m.size(), 2 * Page());
    p = m.get();
    m.as<char>()[0] = 1;
    EXPECT_TRUE(Mapped(p, m.size()));
  }
  EXPECT_FALSE(Mapped(p, 2 * Page()));
}

TEST_F(UniqueMappingTest, MoveTransfersOwnership) {
  UniqueMapping a = Anonymous(Page());
  void *p = a.get();
  UniqueMapping b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from state is defined
  EXPECT_EQ(a.size(), 0U);
  EXPECT_EQ(b.get(), p);
  UniqueMapping c = Anonymous(Page());
  void *q = c.get();
  c = std::move(b);  // unmaps c's old region
  EXPECT_EQ(c.get(), p);
  EXPECT_FALSE(Mapped(q, Page()));
  EXPECT_TRUE(Mapped(p, Page()));
}

TEST_F(UniqueMappingTest, ReleaseAndReset) {
  UniqueMapping m = Anonymous(Page());
  void *p = m.release();
  EXPECT_FALSE(m.valid());
  EXPECT_TRUE(Mapped(p, Page()));
  m.reset(p, Page());
  EXPECT_EQ(m.get(), p);
  m.reset();
  EXPECT_FALSE(Mapped(p, Page()));
  EXPECT_FALSE(m.valid());
}

TEST_F(UniqueMappingTest, FailedMapIsInvalidWithErrno) {
  errno = 0;
  UniqueMapping m = UniqueMapping::Map(Page(), PROT_READ, MAP_SHARED, -1);
  EXPECT_FALSE(m.valid());
  EXPECT_EQ(m.size(), 0U);
  EXPECT_EQ(errno, EBADF);
  UniqueMapping failed(MAP_FAILED, Page());
  EXPECT_FALSE(failed.valid());
}

}  // namespace
}  // namespace hzc
