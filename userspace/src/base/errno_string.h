// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace hzc {

// strerror(err) without the thread-safety problem of strerror().
std::string ErrnoString(int err);

}  // namespace hzc
