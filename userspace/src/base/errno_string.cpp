// SPDX-License-Identifier: Apache-2.0
#include "base/errno_string.h"

#include <cstring>

namespace hzc {

std::string ErrnoString(int err) {
  char buf[128];
  // GNU strerror_r returns a pointer to the message, not necessarily into buf.
  return strerror_r(err, buf, sizeof(buf));
}

}  // namespace hzc
