// SPDX-License-Identifier: Apache-2.0
// Fuzzer: what a peer sends the one-sided calls (coll/one_sided_wire.h): its exchange message,
// the descriptors in it as HcclEnableMemAccess checks them, its link offers and its link cards
// (RDMA, TCP). A descriptor that passes must be a span that does not wrap, from another rank, for
// this one; an offer that passes names one kind of link or both.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "coll/one_sided_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace hzc::coll;
  const auto blob = std::as_bytes(std::span(data, size));
  constexpr uint64_t kTag = 0x1234;
  constexpr uint32_t kMe = 1, kRanks = 4;
  if (auto descs = ParseDescMessage(blob, 2); descs.ok()) {
    if (sizeof(ExchangeHeader) + descs->size() * sizeof(HcclMemDesc) != size ||
        descs->size() > kDescsPerMessage) {
      std::abort();
    }
    for (const HcclMemDesc &d : *descs) {
      const std::optional<Desc> parsed = ParseDesc(d);
      if (parsed && CheckRemoteDesc(*parsed, kTag, kMe, kRanks).ok()) {
        if (parsed->size == 0 || parsed->addr + parsed->size < parsed->addr ||
            parsed->owner >= kRanks || parsed->owner == kMe || parsed->peer != kMe) {
          std::abort();
        }
      }
    }
  }
  if (auto card = ParseLinkCard(blob, 2, true); card.ok()) {
    if (size != sizeof(ExchangeHeader) || card->header.has_link != ExchangeHeader::kRdmaCard) {
      std::abort();
    }
  }
  if (auto card = ParseLinkCard(blob, 2, false); card.ok()) {
    if (size != sizeof(ExchangeHeader) + sizeof(card->socket) ||
        card->header.has_link != ExchangeHeader::kSocketCard || card->socket.port == 0) {
      std::abort();
    }
  }
  if (auto kinds = ParseOffer(blob, 2); kinds.ok()) {
    if (size != sizeof(ExchangeHeader) || *kinds == 0 || (*kinds & ~(kOverRdma | kOverTcp)) != 0) {
      std::abort();
    }
  }
  return 0;
}
