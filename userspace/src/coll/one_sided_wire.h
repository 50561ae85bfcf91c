// SPDX-License-Identifier: Apache-2.0
// What the one-sided calls (coll/one_sided.h) put on the wire and in descriptors, and the
// checks of what a peer sends (untrusted: fuzz/one_sided.cpp).
//
// HcclMemDesc (512 bytes): a Desc, then zeros. The exchange's messages: an ExchangeHeader, then
// (for descriptors) count HcclMemDescs. A link card (across servers, on the group's connections)
// is an ExchangeHeader with has_link kRdmaCard and the sender's port and queue pair for the
// receiver, or with has_link kSocketCard and then the sender's transport::SocketWindows::Card for
// the receiver (where to connect, and the token to connect with).
#pragma once

#include <hccl/hccl_one_sided_services.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "transport/socket_window.h"
#include "verbs/links.h"

namespace hzc::coll {

// The content of an HcclMemDesc.
struct Desc {
  static constexpr char kMagic[8] = {'h', 'z', 'c', '-', 'm', 'e', 'm', 'd'};
  static constexpr uint32_t kVersion = 1;
  char magic[8];
  uint32_t version;
  uint32_t owner;  // the registering rank
  uint32_t peer;   // the rank it is for
  uint32_t rkey;
  uint64_t comm_tag;
  uint64_t id;  // the registration's number at its owner
  uint64_t addr;
  uint64_t size;
};
static_assert(sizeof(Desc) <= sizeof(HcclMemDesc));

struct ExchangeHeader {
  static constexpr uint32_t kMagic = 0x687a6f73;  // "hzos"
  static constexpr uint32_t kRdmaCard = 1;
  static constexpr uint32_t kSocketCard = 2;
  static constexpr uint32_t kOffer = 3;
  static constexpr uint32_t kGiveUp = 4;  // the sender gives up the link or the exchange (GiveUp)
  uint32_t magic = kMagic;
  uint32_t count = 0;
  uint32_t has_link = 0;  // 0: descriptors; else the kind of link card, or kOffer
  uint32_t kinds = 0;     // an offer's: the kinds of link the sender can make (kOverRdma ...)
  verbs::EndpointHeader port;
  verbs::QpEndpoint qp;
};

// The kinds of link an offer names (bits).
inline constexpr uint32_t kOverRdma = 1;
inline constexpr uint32_t kOverTcp = 2;

// Descriptors per message at most.
inline constexpr uint32_t kDescsPerMessage = 256;

// The Desc in @d, if it is one (magic and version).
std::optional<Desc> ParseDesc(const HcclMemDesc &d);
// Whether @d, sent by a peer, is one this rank (@me of @nranks, communicator @tag) may enable:
// HCCL_E_PARA naming what is wrong (another communicator, not from another rank for this one,
// not a span).
Status CheckRemoteDesc(const Desc &d, uint64_t tag, uint32_t me, uint32_t nranks);
// Rank @peer's descriptors in its message @blob; HCCL_E_REMOTE when it is not such a message, or
// says the peer gave up.
Expected<std::vector<HcclMemDesc>> ParseDescMessage(std::span<const std::byte> blob, uint32_t peer);
// Rank @peer's link card @blob for a link over RDMA (@rdma) or TCP: HCCL_E_REMOTE when it says
// the peer gave up (GiveUp), or is not a ready port and queue pair, or a TCP card (a card
// of the other kind than the pair agreed on included).
struct LinkCard {
  ExchangeHeader header;
  transport::SocketWindows::Card socket;  // a TCP card's
};
Expected<LinkCard> ParseLinkCard(std::span<const std::byte> blob, uint32_t peer, bool rdma);

// A message of the exchange: @h, then @tail (descriptors, a TCP card).
std::vector<std::byte> Message(const ExchangeHeader &h, std::span<const std::byte> tail = {});
// Before the cards a pair offers each other the kinds of link it can make (HZC_NET, an RDMA
// device) and takes RDMA when both can, else TCP (Offer, ParseOffer, ChooseLink).
std::vector<std::byte> Offer(uint32_t kinds);
// What a rank sends in place of its card when it cannot make its side of the link the pair
// agreed on (or they agreed on none), or in place of its descriptors when HcclCommPrepare failed
// on its side: the peer fails at once instead of waiting for what never comes.
std::vector<std::byte> GiveUp();
// Rank @peer's offer @blob: its kinds; HCCL_E_REMOTE when it is not an offer of one or both.
Expected<uint32_t> ParseOffer(std::span<const std::byte> blob, uint32_t peer);
// The kind of link (kOverRdma or kOverTcp) between this rank, which can make @mine, and @peer,
// which can make @theirs: HCCL_E_PARA naming both when they have none in common.
Expected<uint32_t> ChooseLink(uint32_t mine, uint32_t theirs, uint32_t peer);

}  // namespace hzc::coll
