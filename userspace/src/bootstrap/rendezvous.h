// SPDX-License-Identifier: Apache-2.0
// TCP rendezvous of the ranks of one communicator at the root's address.
//
// HcclGetRootInfo starts a root thread that listens on an ephemeral port (for a rank table, rank 0
// starts one on the table's fixed port: StartRootAt). Every rank (HcclCommInitRootInfo) connects
// and sends a hello (unique id, nranks, rank, host identity, pid, listener address); once all
// nranks distinct ranks with the same id and nranks have arrived, the root sends every rank the
// table of all ranks and exits. It waits at most the connect timeout after the first hello; ranks
// that came get HCCL_E_TIMEOUT naming the missing ranks. A rank in the process that serves the
// rendezvous (usually rank 0, which called HcclGetRootInfo) returns from Join only once the root
// thread has answered every rank (or failed to: HCCL_E_TCP_TRANSFER naming the ranks), so that
// process can exit right after HcclCommInitRootInfo without cutting off the table on its way to the
// others. A process that serves a rendezvous without joining it must stay alive until the ranks
// have joined. Messages are a 4-byte big-endian length followed by JSON.
//
// Root and rank prove to each other that they hold the communicator's key, its id (bootstrap/
// auth.h): the rank's hello names the communicator by PublicId(id) only and carries a nonce; the
// root answers with its nonce and its proof; the rank checks it (a root that cannot prove is a
// stranger holding the address: HCCL_E_TCP_CONNECT saying so) and sends its own proof, over both
// nonces and its whole hello; only then does the root count it. A connection that fails its
// proof, comes from an address that the trust list (HCCL_WHITELIST_FILE) or Admission::check
// refuses, is dropped and logged at WARN naming its address and why, and never counts. The table
// the root sends carries a random session id, which the ranks of a rank table take as their
// communicator's id (a secret that only the ranks admitted know). Version 2 of the hello ("hzc":
// 2); a hello of another version is refused.
//
// Every byte that reaches the root's port is untrusted: the root reads the hellos of all the
// connections at once, each with its own deadline (5 s), at most 128 of them waiting at once (the
// oldest dropped beyond that, told to connect again: Join does), and checks the type of every
// field it reads. A connection that sends nothing, too little, garbage, or JSON of other fields
// or types is dropped and logged at WARN naming its address and why; it never delays or stops
// the rendezvous of the real ranks. Fields a hello does not know are ignored, so that later
// versions can add some (such as a proof of knowing the communicator's secret).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/root_info.h"

namespace hzc::bootstrap {

struct RankIdentity {
  std::string host;  // host identity (HostIdentity())
  uint32_t pid = 0;
  // The rank's Listener address (bootstrap/group.h), "ip:port"; empty when the rank has none.
  std::string address;
};

// Who the root takes besides proving the key.
struct Admission {
  // Why the connection from @ip (an address as inet_ntop writes it) may not be rank @rank; "" if
  // it may. Empty: any address.
  std::function<std::string(uint32_t rank, const std::string &ip)> check;
  // The trust list; nullopt: the process's (ProcessTrustList).
  std::optional<TrustList> trust;
};

// Listen on @address (IPv4/IPv6 literal; empty: HCCL_IF_IP, else the first up non-loopback
// IPv4 interface, else 127.0.0.1) and serve one rendezvous in a background thread.
Expected<RootInfo> StartRoot(const std::string &address, std::chrono::seconds timeout);

// Serve one rendezvous of communicator @id on @address (an IPv4/IPv6 literal) port @port (0: an
// ephemeral one), as StartRoot. A fixed port that another rendezvous (a rank table's, of this or
// another process) holds is waited for, at most @timeout: HCCL_E_TCP_CONNECT "... Address
// already in use (still in use after Ns)" then.
// The rendezvous of communicator @id served (by another process, usually) on @address (an IPv4/IPv6
// literal; HCCL_E_PARA naming it otherwise) port @port.
Expected<RootInfo> RootAt(const std::string &address, uint16_t port, const UniqueId &id);

// @admission: whom it takes besides the holders of @id. HCCL_E_PARA (or HCCL_E_OPEN_FILE_FAILURE)
// when the process's trust list is on and cannot be read.
Expected<RootInfo> StartRootAt(const std::string &address, uint16_t port, const UniqueId &id,
                               std::chrono::seconds timeout, Admission admission = {});

// Join the rendezvous described by @root as @rank of @nranks; the table of all ranks. In the
// process serving it, returns once every rank was answered (at most 5 s after the deadline of
// the rendezvous). @shared_port (a rank table's fixed port): a root that serves another
// communicator's rendezvous (it has the port first, this one's root waits for it) is retried
// until the deadline rather than an error, and so is a connection that ends without an answer.
// *@session (if not null): the random id the root chose for this communicator's ranks.
Expected<std::vector<RankIdentity>> Join(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                         const RankIdentity &self, std::chrono::seconds timeout,
                                         bool shared_port = false, UniqueId *session = nullptr);

// What the root makes of a rank's hello (@body: the bytes after its length word), and a rank
// of the root's answer to a hello for @nranks ranks: OK, or what is wrong with it, whatever @body
// holds. The rendezvous' own parsers, for the fuzzers (fuzz/).
Status CheckHello(std::string_view body);
Status CheckAnswer(std::string_view body, uint32_t nranks);

}  // namespace hzc::bootstrap
