// SPDX-License-Identifier: Apache-2.0
// Fuzzer: what a peer sends to a process's fd hand-off socket (bootstrap/fd_handoff.h), and the
// descriptor names it decides on. A request is accepted exactly when it is one well-formed
// record; a name is given exactly when it is one of the four published memfds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "bootstrap/fd_handoff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace hzc::bootstrap;
  auto fd = ParseFdRequest(std::span(reinterpret_cast<const std::byte *>(data), size));
  FdRequest r{};
  const bool well_formed = size == sizeof(r) && (std::memcpy(&r, data, sizeof(r)), true) &&
                           r.magic == kFdRequestMagic && r.fd >= 0;
  if (fd.ok() != well_formed || (fd.ok() && fd.value() != r.fd)) {
    std::abort();
  }
  const std::string link(reinterpret_cast<const char *>(data), size);
  if (GivenMemfd(link) && link != "/memfd:hzc-physical (deleted)" &&
      link != "/memfd:hzc-directory (deleted)" && link != "/memfd:hzc-mailbox (deleted)" &&
      link != "/memfd:hzc-generation (deleted)") {
    std::abort();
  }
  return 0;
}
