// SPDX-License-Identifier: Apache-2.0
// Ranks as threads of the test, each with its own TCP group (bootstrap/group.h) on loopback:
// for the layers that run over a group (the group board, the wire between servers) without
// processes or servers. Tests that use it link the library's bootstrap layer.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap/group.h"
#include "bootstrap/root_info.h"

namespace hzc::test {

// @n ranks, each a thread running @body(rank, group) on its group, connected within @timeout;
// returns when every thread has returned. A listener that cannot open fails the test before
// any thread starts; a rank whose group does not connect fails the test and skips @body.
inline void RunGroupRanks(uint32_t n, const std::function<void(uint32_t, bootstrap::Group &)> &body,
                          std::chrono::seconds timeout = std::chrono::seconds(20)) {
  std::vector<std::optional<bootstrap::Listener>> listeners(n);
  std::vector<std::string> addresses(n);
  for (uint32_t r = 0; r < n; ++r) {
    auto l = bootstrap::Listener::Open("127.0.0.1");
    ASSERT_TRUE(l.ok()) << l.status().message();
    addresses[r] = l->address();
    listeners[r] = std::move(*l);
  }
  auto id = bootstrap::RandomId();
  ASSERT_TRUE(id.ok());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto group = bootstrap::Group::Connect(std::move(*listeners[r]), *id, r, addresses, deadline);
      ASSERT_TRUE(group.ok()) << "rank " << r << ": " << group.status().message();
      body(r, **group);
    });
  }
  for (auto &t : threads) {
    t.join();
  }
}

}  // namespace hzc::test
