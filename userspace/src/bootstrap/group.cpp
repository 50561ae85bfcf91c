// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/group.h"

namespace hzc::bootstrap {

struct Group::Impl {};

Group::Group(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Group::~Group() = default;

}  // namespace hzc::bootstrap
