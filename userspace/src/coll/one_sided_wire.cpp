// SPDX-License-Identifier: Apache-2.0
#include "coll/one_sided_wire.h"

#include <algorithm>
#include <cstring>

namespace hzc::coll {

std::optional<Desc> ParseDesc(const HcclMemDesc &d) {
  Desc out;
  std::memcpy(&out, d.desc, sizeof(out));
  if (std::memcmp(out.magic, Desc::kMagic, sizeof(out.magic)) != 0 ||
      out.version != Desc::kVersion) {
    return std::nullopt;
  }
  return out;
}

Status CheckRemoteDesc(const Desc &d, uint64_t tag, uint32_t me, uint32_t nranks) {
  if (d.comm_tag != tag) {
    return Error(HCCL_E_PARA, "remoteMemDesc: a descriptor of another communicator");
  }
  if (d.owner >= nranks || d.owner == me || d.peer != me) {
    return Error(HCCL_E_PARA, "remoteMemDesc: registered by rank {} for rank {}, not for this rank",
                 d.owner, d.peer);
  }
  if (d.size == 0 || d.addr > UINT64_MAX - d.size) {
    return Error(HCCL_E_PARA, "remoteMemDesc: {} bytes at {:#x} is not a span", d.size, d.addr);
  }
  return Status::Ok();
}

Expected<std::vector<HcclMemDesc>> ParseDescMessage(std::span<const std::byte> blob,
                                                    uint32_t peer) {
  ExchangeHeader h;
  if (blob.size() < sizeof(h)) {
    return Error(HCCL_E_REMOTE, "rank {} sent {} bytes that are not its descriptors", peer,
                 blob.size());
  }
  std::memcpy(&h, blob.data(), sizeof(h));
  if (h.magic == ExchangeHeader::kMagic && h.has_link == ExchangeHeader::kGiveUp &&
      blob.size() == sizeof(h)) {
    return Error(HCCL_E_REMOTE, "rank {} gave up the exchange (its log says why)", peer);
  }
  if (h.magic != ExchangeHeader::kMagic || h.has_link != 0 || h.count > kDescsPerMessage ||
      blob.size() != sizeof(h) + size_t{h.count} * sizeof(HcclMemDesc)) {
    return Error(HCCL_E_REMOTE, "rank {} sent {} bytes that are not its descriptors", peer,
                 blob.size());
  }
  std::vector<HcclMemDesc> out(h.count);
  if (h.count != 0) {
    std::memcpy(out.data(), blob.data() + sizeof(h), size_t{h.count} * sizeof(HcclMemDesc));
  }
  return out;
}

Expected<LinkCard> ParseLinkCard(std::span<const std::byte> blob, uint32_t peer, bool rdma) {
  LinkCard card{};
  ExchangeHeader &h = card.header;
  if (blob.size() < sizeof(h)) {
    return Error(HCCL_E_REMOTE, "rank {} sent {} bytes that are not its link card", peer,
                 blob.size());
  }
  std::memcpy(&h, blob.data(), sizeof(h));
  const uint32_t want = rdma ? ExchangeHeader::kRdmaCard : ExchangeHeader::kSocketCard;
  if (h.magic == ExchangeHeader::kMagic && h.has_link == ExchangeHeader::kGiveUp) {
    return Error(HCCL_E_REMOTE, "rank {} could not make its side of the link (its log says why)",
                 peer);
  }
  if (h.magic == ExchangeHeader::kMagic && h.has_link != want &&
      (h.has_link == ExchangeHeader::kRdmaCard || h.has_link == ExchangeHeader::kSocketCard)) {
    return Error(HCCL_E_REMOTE, "rank {} sent a card for a link over {}, not the {} link agreed on",
                 peer, rdma ? "TCP" : "RDMA", rdma ? "RDMA" : "TCP");
  }
  if (rdma) {
    if (blob.size() != sizeof(h) || h.magic != ExchangeHeader::kMagic || h.has_link != want ||
        h.port.magic != verbs::EndpointHeader::kMagic ||
        h.port.state != verbs::EndpointHeader::kReady) {
      return Error(HCCL_E_REMOTE,
                   "rank {} sent no queue pair for this rank (it linked with it before, or its "
                   "RDMA device failed)",
                   peer);
    }
    return card;
  }
  if (blob.size() != sizeof(h) + sizeof(card.socket) || h.magic != ExchangeHeader::kMagic ||
      h.has_link != want) {
    return Error(HCCL_E_REMOTE, "rank {} sent {} bytes that are not its TCP link card", peer,
                 blob.size());
  }
  std::memcpy(&card.socket, blob.data() + sizeof(h), sizeof(card.socket));
  if (card.socket.magic != transport::SocketWindows::Card::kMagic || card.socket.port == 0) {
    return Error(HCCL_E_REMOTE, "rank {} sent a TCP link card without a port", peer);
  }
  return card;
}

std::vector<std::byte> Message(const ExchangeHeader &h, std::span<const std::byte> tail) {
  std::vector<std::byte> out(sizeof(h) + tail.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::copy(tail.begin(), tail.end(), out.begin() + sizeof(h));
  return out;
}

std::vector<std::byte> Offer(uint32_t kinds) {
  ExchangeHeader h;
  h.has_link = ExchangeHeader::kOffer;
  h.kinds = kinds;
  return Message(h);
}

std::vector<std::byte> GiveUp() {
  ExchangeHeader h;
  h.has_link = ExchangeHeader::kGiveUp;
  return Message(h);
}

Expected<uint32_t> ParseOffer(std::span<const std::byte> blob, uint32_t peer) {
  ExchangeHeader h;
  if (blob.size() == sizeof(h)) {
    std::memcpy(&h, blob.data(), sizeof(h));
  }
  if (blob.size() != sizeof(h) || h.magic != ExchangeHeader::kMagic ||
      h.has_link != ExchangeHeader::kOffer || h.kinds == 0 ||
      (h.kinds & ~(kOverRdma | kOverTcp)) != 0) {
    return Error(HCCL_E_REMOTE, "rank {} sent {} bytes that are not its offer of a link", peer,
                 blob.size());
  }
  return h.kinds;
}

namespace {

const char *Kinds(uint32_t kinds) {
  switch (kinds) {
    case kOverRdma:
      return "RDMA only (HZC_NET=rdma)";
    case kOverTcp:
      return "TCP only (HZC_NET=socket, or no RDMA device)";
    default:
      return "RDMA or TCP";
  }
}

}  // namespace

Expected<uint32_t> ChooseLink(uint32_t mine, uint32_t theirs, uint32_t peer) {
  const uint32_t both = mine & theirs;
  if ((both & kOverRdma) != 0) {
    return kOverRdma;
  }
  if ((both & kOverTcp) != 0) {
    return kOverTcp;
  }
  return Error(HCCL_E_PARA,
               "rank {} links over {} and this rank over {}: no kind in common (HZC_NET, RDMA "
               "devices)",
               peer, Kinds(theirs), Kinds(mine));
}

}  // namespace hzc::coll
