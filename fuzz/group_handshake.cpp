// SPDX-License-Identifier: Apache-2.0
// Fuzzer: the handshake of a Group connection (bootstrap/handshake.h). A valid hello, answer
// and proof of a communicator are made, then changed by the input (a mask XORed over each);
// each check must accept a message exactly when the change left every byte it stands for
// unchanged: the hello's nonce and a sender below the size may change, nothing of an answer or a
// proof may (they are proved). Also any bytes as a message's header and as a proof.
#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "bootstrap/handshake.h"

namespace {

using namespace hzc::bootstrap;

constexpr uint32_t kSize = 8, kLower = 2, kUpper = 5;

// @len bytes of the input from @at (zeros past its end), advancing @at.
void Take(const uint8_t *data, size_t size, size_t *at, void *out, size_t len) {
  std::memset(out, 0, len);
  if (*at < size) {
    std::memcpy(out, data + *at, std::min(len, size - *at));
  }
  *at += len;
}

bool Zero(const uint8_t *p, size_t len) {
  return std::all_of(p, p + len, [](uint8_t b) { return b == 0; });
}

void Xor(void *to, const void *mask, size_t len) {
  auto *t = static_cast<uint8_t *>(to);
  const auto *m = static_cast<const uint8_t *>(mask);
  for (size_t i = 0; i < len; ++i) {
    t[i] ^= m[i];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  UniqueId id{};
  for (size_t i = 0; i < id.size(); ++i) {
    id[i] = static_cast<uint8_t>(i * 37 + 1);
  }
  const Nonce lower_nonce{1, 2, 3}, upper_nonce{4, 5, 6};
  const Hello mine = MakeHello(id, kLower, kUpper, kSize, lower_nonce);
  size_t at = 0;

  // The lower rank's hello, as the upper rank checks it.
  Hello h{}, hello_mask{};
  Take(data, size, &at, &hello_mask, sizeof(hello_mask));
  h = mine;
  Xor(&h, &hello_mask, sizeof(h));
  const bool hello_ok = CheckHello(h, id, kUpper, kSize).empty();
  const bool hello_same = hello_mask.magic == 0 && hello_mask.to == 0 && hello_mask.size == 0 &&
                          Zero(hello_mask.tag, sizeof(hello_mask.tag)) && ntohl(h.from) < kSize;
  if (hello_ok != hello_same) {
    std::abort();
  }

  // The upper rank's answer, as the lower rank checks it.
  Answer a = MakeAnswer(id, kUpper, kSize, mine, upper_nonce), answer_mask{};
  Take(data, size, &at, &answer_mask, sizeof(answer_mask));
  Xor(&a, &answer_mask, sizeof(a));
  const bool answer_ok = CheckAnswer(a, id, kLower, kUpper, kSize, mine).empty();
  if (answer_ok != Zero(reinterpret_cast<const uint8_t *>(&answer_mask), sizeof(answer_mask))) {
    std::abort();
  }

  // The lower rank's proof, as the upper rank checks it.
  ProofMessage p = MakeProof(id, mine, upper_nonce), proof_mask{};
  Take(data, size, &at, &proof_mask, sizeof(proof_mask));
  Xor(&p, &proof_mask, sizeof(p));
  const auto *pb = reinterpret_cast<const std::byte *>(&p);
  const bool proof_ok = CheckProof(std::span(pb, sizeof(p)), id, mine, upper_nonce).empty();
  if (proof_ok != Zero(reinterpret_cast<const uint8_t *>(&proof_mask), sizeof(proof_mask))) {
    std::abort();
  }

  // The rest, as a message's header and as a message after the answer.
  const auto *rest = reinterpret_cast<const std::byte *>(data + std::min(at, size));
  const size_t left = size - std::min(at, size);
  auto len = MessageSize(std::span(rest, left));
  if (len.ok() && *len != sizeof(Hello) && *len != sizeof(ProofMessage)) {
    std::abort();
  }
  if (CheckProof(std::span(rest, left), id, mine, upper_nonce).empty()) {
    std::abort();  // a forged proof: only the one made above holds
  }
  return 0;
}
