// SPDX-License-Identifier: Apache-2.0
// Streams on the host: a stream is a validated handle and nothing more. Every hzc call that
// takes a stream is complete when it returns, so a stream never has pending work and
// aclrtSynchronizeStream returns at once.
#pragma once

#include <acl/acl_base.h>

namespace hzc::coll {

aclrtStream CreateStream();
// False when @stream is not a live stream of this process.
bool DestroyStream(aclrtStream stream);
bool IsStream(aclrtStream stream);
size_t StreamCount();

}  // namespace hzc::coll
