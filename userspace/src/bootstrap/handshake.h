// SPDX-License-Identifier: Apache-2.0
// The handshake of a Group connection (bootstrap/group.h), its messages and their checks apart
// from the sockets that carry them (so that they can be fuzzed: fuzz/group_handshake.cpp).
//
// The connecting (lower) rank sends a Hello naming itself, the rank it wants, the communicator
// (by a tag derived from its key, never the key: bootstrap/auth.h) and a nonce; the accepting
// rank checks it (CheckHello) and answers with its own Hello and its proof over the connecting
// rank's hello and its own nonce (MakeAnswer); the connecting rank checks that (CheckAnswer) and
// sends its own proof (MakeProof), which the accepting rank checks (CheckProof). The proofs are
// labelled by side, so that one side's proof is never the other's. Integers in network order.
// "HGZ3": frames carry a space since version 2, both ends prove the key since version 3; a rank
// of another version is refused at the handshake rather than misread. "HGZP": the proof.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/root_info.h"

namespace hzc::bootstrap {

inline constexpr uint32_t kHelloMagic = 0x48475a33;
inline constexpr uint32_t kProofMagic = 0x48475a50;

struct Hello {
  uint32_t magic;
  uint32_t from;
  uint32_t to;
  uint32_t size;
  uint8_t tag[16];
  uint8_t nonce[16];
};
static_assert(sizeof(Hello) == 48);

struct Answer {
  Hello hello;
  uint8_t proof[32];
};
static_assert(sizeof(Answer) == 80);

struct ProofMessage {
  uint32_t magic;
  uint8_t proof[32];
};
static_assert(sizeof(ProofMessage) == 36);

// Rank @from's hello to rank @to of communicator @id (@size ranks), with @nonce.
Hello MakeHello(const UniqueId &id, uint32_t from, uint32_t to, uint32_t size, const Nonce &nonce);

// Why @h is not the hello of a rank of communicator @id (of @size ranks) to rank @to; "" if it is.
std::string CheckHello(const Hello &h, const UniqueId &id, uint32_t to, uint32_t size);

// The size of the message whose first 4 bytes are @header (a Hello or a ProofMessage);
// HCCL_E_TCP_TRANSFER for anything else.
Expected<size_t> MessageSize(std::span<const std::byte> header);

// Rank @rank's answer to @theirs (checked) with its own @nonce.
Answer MakeAnswer(const UniqueId &id, uint32_t rank, uint32_t size, const Hello &theirs,
                  const Nonce &nonce);

// Why @a is not the answer of rank @r to @mine (this rank's hello to it, of communicator @id of
// @size ranks, this rank @rank); "" if it is.
std::string CheckAnswer(const Answer &a, const UniqueId &id, uint32_t rank, uint32_t r,
                        uint32_t size, const Hello &mine);

// The connecting rank's proof: over its hello @mine and the answer's nonce @theirs.
ProofMessage MakeProof(const UniqueId &id, const Hello &mine, std::span<const uint8_t> theirs);

// Why @message (what came after the answer) is not the proof of the rank whose hello was
// @theirs, answered with this rank's @nonce; "" if it is.
std::string CheckProof(std::span<const std::byte> message, const UniqueId &id, const Hello &theirs,
                       std::span<const uint8_t> nonce);

}  // namespace hzc::bootstrap
