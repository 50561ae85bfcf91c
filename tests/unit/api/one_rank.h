// SPDX-License-Identifier: Apache-2.0
// The fixture of the API tests that need a communicator: one rank, made from a fresh root
// info in SetUp and destroyed in TearDown.
#pragma once

#include <gtest/gtest.h>
#include <hccl/hccl.h>

#include <chrono>
#include <thread>

#include "hzc_test.h"

namespace hzc::test {

class OneRankTest : public Test {
 protected:
  void SetUp() override {
    Test::SetUp();
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    ASSERT_EQ(HcclCommInitRootInfo(1, &root, 0, &comm_), HCCL_SUCCESS);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(HcclCommDestroy(comm_), HCCL_SUCCESS);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
    Test::TearDown();
  }
  HcclComm comm_ = nullptr;
};

}  // namespace hzc::test
