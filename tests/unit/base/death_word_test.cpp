// SPDX-License-Identifier: Apache-2.0
#include "base/death_word.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc {
namespace {

using DeathWordTest = test::Test;

// A shared page for the word (as the memory directory holds it).
struct SharedWord {
  SharedWord() {
    void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    word = p == MAP_FAILED ? nullptr : static_cast<uint32_t *>(p);
  }
  ~SharedWord() {
    if (word != nullptr) {
      munmap(word, 4096);
    }
  }
  uint32_t load() const { return std::atomic_ref<uint32_t>(*word).load(); }
  uint32_t *word = nullptr;
};

TEST_F(DeathWordTest, UnarmedWordIsNotDeath) {
  EXPECT_FALSE(DeathWordSaysDead(0));
}

// Killed, the child's word says so at once (when waitpid returns), and not before: not while
// it lives, nor when its other threads (the one that armed it among them) exit.
TEST_F(DeathWordTest, KilledProcessIsSeenDeadLiveOneIsNot) {
  SharedWord shared;
  ASSERT_NE(shared.word, nullptr);
  test::ForkedChild child([&](test::ForkedChild::Pipes pipes) {
    Status armed;
    std::thread([&] { armed = ArmDeathWord(shared.word); }).join();  // the arming thread exits
    test::ForkedChild::Write(pipes.out, armed.ok() ? 1 : 0);
    pause();
    return 0;
  });
  uint64_t armed = 0;
  ASSERT_TRUE(child.Receive(&armed));
  ASSERT_EQ(armed, 1u);
  EXPECT_NE(shared.load(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(DeathWordSaysDead(shared.load()));
  kill(child.pid(), SIGKILL);
  ASSERT_TRUE(child.WaitExited());
  EXPECT_TRUE(DeathWordSaysDead(shared.load()));
}

// A process that exits normally (its keeper thread still running) is seen dead too.
TEST_F(DeathWordTest, ExitedProcessIsSeenDead) {
  SharedWord shared;
  ASSERT_NE(shared.word, nullptr);
  test::ForkedChild child(
      [&](test::ForkedChild::Pipes) { return ArmDeathWord(shared.word).ok() ? 0 : 1; });
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_TRUE(DeathWordSaysDead(shared.load()));
}

}  // namespace
}  // namespace hzc
