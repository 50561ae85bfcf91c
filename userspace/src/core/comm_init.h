// SPDX-License-Identifier: Apache-2.0
// Making communicators, after the argument checks of the C entry points: a new rendezvous
// (HcclGetRootInfo), joining one (HcclCommInitRootInfo) or reading a rank table
// (HcclCommInitClusterInfo). Each new communicator is added to the process's CommRegistry.
#pragma once

#include <hccl/hccl_types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "bootstrap/rendezvous.h"
#include "core/comm_options.h"

namespace hzc {

class Communicator;

// Start the rendezvous of a new communicator (this process serves it) and describe it.
Status NewRootInfo(HcclRootInfo *out);

// Rank @rank of @nranks (@rank < @nranks) of the communicator whose rendezvous @root_info
// describes: waits until every rank has joined. Ranks that span servers then connect to each
// other (bootstrap::Group, Communicator::group()) within the connect timeout; every rank listens
// for that (on HCCL_IF_IP, else the first up interface) from before the rendezvous.
Expected<HcclComm> FromRootInfo(const HcclRootInfo &root_info, uint32_t nranks, uint32_t rank,
                                CommOptions options = {});

// Rank @rank of the communicator the rank table at @path describes; HCCL_E_PARA when the
// table has no such rank. The ranks meet at a rendezvous that the table's rank 0 serves on @port
// (default HCCL_IF_BASE_PORT) at its server's address (server_id, else host_ip, if an IP address;
// 127.0.0.1 for a table of one server without one; HCCL_E_PARA naming the field for a table of
// more servers); the other ranks retry until the connect timeout. Every rank's identity comes
// from that rendezvous: HCCL_E_PARA when the table's server count differs from the number of
// servers the ranks run on. A second rank table's communicator set up at once in one server on
// the same port waits for the port (its rank 0 for the first rendezvous to end, its other ranks
// retry while the port serves the other communicator), at most the connect timeout.
Expected<HcclComm> FromRankTable(const char *path, uint32_t rank, CommOptions options = {},
                                 std::optional<uint16_t> port = std::nullopt);

// @n ranks in this process (HcclCommInitAll): a new unique id, every rank this process.
Expected<std::vector<HcclComm>> AllInProcess(uint32_t n);

// The communicator of ranks @members (ascending, distinct, ranks of @parent) of @parent, as
// member @position (@members[@position] is @parent's own rank), @sub_id telling apart the
// communicators made from one parent (HCCL_E_PARA when used before with @parent). Its id derives
// from @parent's id, @sub_id and @members, so every member makes the same one without exchanging
// anything. When its members span servers it talks over a view of @parent's connections
// (Group::Subgroup) in a space that derives from its id, so its messages never meet those of
// @parent or of another sub-communicator; the view keeps them open if @parent goes first.
Expected<HcclComm> SubCommunicator(HcclComm parent, const std::vector<uint32_t> &members,
                                   uint64_t sub_id, uint32_t position, CommOptions options);

// The servers of a communicator's ranks (the ranks of one host identity), ordered by their
// lowest rank, as one of its ranks sees them.
struct ServerLayout {
  std::vector<std::vector<uint32_t>> servers;  // ranks of each server, ascending
  std::vector<uint32_t> leaders;               // each server's first rank
  std::vector<uint32_t> server_of;             // [rank]
  uint32_t server = 0;                         // the seeing rank's

  // The position of @rank among the ranks of its server.
  uint32_t pos(uint32_t rank) const;
};

// The servers of @ranks as rank @rank (< @ranks.size()) sees them.
ServerLayout LayOutServers(const std::vector<bootstrap::RankIdentity> &ranks, uint32_t rank);

// The server-local communicator of @comm's rank, whose ranks span servers as @layout says: the
// ranks of its server, numbered from 0 in rank order, with @comm's options and an id derived from
// @comm's id and the server's index (so every rank of the server makes the same one without
// exchanging anything). When it has more than one rank it is linked over the process's transport
// (waits for the server's other ranks), so that its collectives take the zero-copy path whenever
// the buffers lie in activated memory, whichever communicator activated them; a failure to link
// is logged, and its ranks then meet through the staging path.
std::shared_ptr<Communicator> MakeServerLocal(const Communicator &comm, const ServerLayout &layout);

}  // namespace hzc
