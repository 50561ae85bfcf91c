// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/handshake.h"

#include <arpa/inet.h>

#include <cstring>
#include <string_view>

#include "base/log.h"

namespace hzc::bootstrap {

namespace {

constexpr std::string_view kAcceptProof = "hzc-group-accept";
constexpr std::string_view kConnectProof = "hzc-group-connect";

// What a handshake names communicator @id by.
UniqueId TagOf(const UniqueId &id) {
  return KeyedId(id, "hzc-group-tag");
}

std::span<const uint8_t> Bytes(const void *p, size_t len) {
  return {static_cast<const uint8_t *>(p), len};
}

}  // namespace

Hello MakeHello(const UniqueId &id, uint32_t from, uint32_t to, uint32_t size, const Nonce &nonce) {
  Hello h{htonl(kHelloMagic), htonl(from), htonl(to), htonl(size), {}, {}};
  const UniqueId tag = TagOf(id);
  std::memcpy(h.tag, tag.data(), sizeof(h.tag));
  std::memcpy(h.nonce, nonce.data(), sizeof(h.nonce));
  return h;
}

std::string CheckHello(const Hello &h, const UniqueId &id, uint32_t to, uint32_t size) {
  if (ntohl(h.magic) != kHelloMagic) {
    return "not a handshake of a communicator's ranks";
  }
  UniqueId other{};
  std::memcpy(other.data(), h.tag, sizeof(h.tag));
  if (other != TagOf(id) || ntohl(h.size) != size) {
    return fmt::format("handshake of another communicator ({} ranks), not of this one ({} of {})",
                       ntohl(h.size), PublicId(id), size);
  }
  if (ntohl(h.to) != to || ntohl(h.from) >= size) {
    return fmt::format("handshake from rank {} to rank {}, this is rank {}", ntohl(h.from),
                       ntohl(h.to), to);
  }
  return "";
}

Expected<size_t> MessageSize(std::span<const std::byte> header) {
  uint32_t magic = 0;
  if (header.size() < sizeof(magic)) {
    return Error(HCCL_E_TCP_TRANSFER, "a handshake's header is {} bytes", header.size());
  }
  std::memcpy(&magic, header.data(), sizeof(magic));
  magic = ntohl(magic);
  if (magic != kHelloMagic && magic != kProofMagic) {
    return Error(HCCL_E_TCP_TRANSFER,
                 "not a handshake of a communicator's ranks of this version (magic {:#x})", magic);
  }
  return magic == kHelloMagic ? sizeof(Hello) : sizeof(ProofMessage);
}

Answer MakeAnswer(const UniqueId &id, uint32_t rank, uint32_t size, const Hello &theirs,
                  const Nonce &nonce) {
  Answer a{MakeHello(id, rank, ntohl(theirs.from), size, nonce), {}};
  const Mac proof = Prove(id, kAcceptProof, {Bytes(&theirs, sizeof(theirs)), nonce});
  std::memcpy(a.proof, proof.data(), sizeof(a.proof));
  return a;
}

std::string CheckAnswer(const Answer &a, const UniqueId &id, uint32_t rank, uint32_t r,
                        uint32_t size, const Hello &mine) {
  std::string why = CheckHello(a.hello, id, rank, size);
  if (why.empty() && ntohl(a.hello.from) != r) {
    why = fmt::format("it says it is rank {}", ntohl(a.hello.from));
  }
  const auto theirs = Bytes(a.hello.nonce, sizeof(a.hello.nonce));
  if (why.empty() && !SameMac(Bytes(a.proof, sizeof(a.proof)),
                              Prove(id, kAcceptProof, {Bytes(&mine, sizeof(mine)), theirs}))) {
    why = "its proof does not hold: it does not know the communicator's key";
  }
  return why;
}

ProofMessage MakeProof(const UniqueId &id, const Hello &mine, std::span<const uint8_t> theirs) {
  ProofMessage m{htonl(kProofMagic), {}};
  const Mac proof = Prove(id, kConnectProof, {Bytes(&mine, sizeof(mine)), theirs});
  std::memcpy(m.proof, proof.data(), sizeof(m.proof));
  return m;
}

std::string CheckProof(std::span<const std::byte> message, const UniqueId &id, const Hello &theirs,
                       std::span<const uint8_t> nonce) {
  if (message.size() != sizeof(ProofMessage)) {
    return "a second handshake, not a proof";
  }
  ProofMessage m{};
  std::memcpy(&m, message.data(), sizeof(m));
  const Mac want = Prove(id, kConnectProof, {Bytes(&theirs, sizeof(theirs)), nonce});
  if (ntohl(m.magic) != kProofMagic || !SameMac(Bytes(m.proof, sizeof(m.proof)), want)) {
    return "its proof does not hold: it does not know the communicator's key";
  }
  return "";
}

}  // namespace hzc::bootstrap
