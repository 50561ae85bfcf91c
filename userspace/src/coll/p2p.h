// SPDX-License-Identifier: Apache-2.0
// Point-to-point transfers (HcclSend, HcclRecv, HcclBatchSendRecv) between ranks of one server
// (below); items whose peer is on another server go over RDMA (coll/p2p_wire.h), at the same
// time as the call's other items. The pair channels are coll/p2p_channel.h, the matching of
// messages on them coll/p2p_match.h, the batches coll/p2p_batch.h.
//
// Channels. Only the two ranks of a transfer call, so the collectives' control area (opened by
// every rank together) cannot carry them. Each unordered pair of ranks {lo, hi} has its own
// shared area, made lazily by the pair's first transfer: rank lo creates a memfd and hands it
// to rank hi over an abstract Unix socket named after the communicator and the pair
// (bootstrap/local_exchange.h, lo as its rank 0); nobody keeps the descriptor, so the memory
// goes with the last mapping (the communicator's destruction, or a rank's death). A call opens
// each channel it lacks in a thread of its own while its other items progress: the peer of a
// batch item may come only after this rank's other items moved (it waits for one of them),
// so opening the channels one after the other could deadlock a valid program. (A call that
// fails returns once its openings end too, which is at the latest its deadline.) The area
// holds a header (the two ranks' wake-up words and a "broken" word), one direction block per
// ordered pair (sender -> receiver), one staging slot per direction of the communicator's
// staging size (hcclBufferSize, else HCCL_BUFFSIZE) but at most 4 MiB, split in two halves, and
// a ring of 16 boxes per direction of HZC_P2P_BUFFERED_MAX bytes each (rank lo's setting).
//
// Sequence numbers. Each direction numbers its messages from 1 on both sides, independently
// of the collectives' call numbers and of other pairs; the n-th send of a to b meets the n-th
// receive of b from a. A message of at most HZC_P2P_BUFFERED_MAX bytes goes buffered, in the
// manner of Open MPI's fast boxes:
//   sender:   wait for a free box (the receiver took the message 16 boxes before out: a sender
//             rarely waits); copy the bytes, count and dataType into it, then n; done (its
//             buffer is reusable at once; no answer is waited for).
//   receiver: wait until the next box holds n (or message n is posted: it is not buffered);
//             copy the bytes out, free the box and mark n done. A mismatch fails the receive
//             (HCCL_E_PARA, nothing moved); the sender's call succeeded already and is not told.
// Any other message:
//   sender:   wait until the receiver finished message n-1; post (n, count, dtype, address,
//             whether its buffer lies in activated memory); wait for the receiver's answer.
//   receiver: wait for post n; answer it: mismatch (count or dataType differ: HCCL_E_PARA on
//             both sides, nothing moved), zero-copy (both buffers activated and the sender's
//             buffer maps: the receiver copies straight from it through the peer mapping,
//             inside a guarded region, then marks the message done), or staging (the sender
//             writes chunks into the slot's halves in turn, the receiver copies them out; a
//             half is written again only after the receiver drained it). The sender returns
//             when the receiver marked message n done, so its buffer is reusable then.
// A batch runs every item as a small state machine and polls them all until every one is done
// (post every send, serve every receive, wait for the answers), so a ring exchange in one
// batch on every rank progresses; items of one direction of one pair keep their list order.
//
// Waiting. Each side of a pair has a 32-bit wake-up word in the header that the other side
// bumps (and FUTEX_WAKEs, only when it sleeps) after every change it makes. A waiter spins first
// (base/spin.h), unless the peer last wrote from this rank's CPU; then it sleeps on the word of one
// of the channels it waits on in short slices (10 ms with one channel, 1 ms with several) and
// checks, each slice: the "broken" word, the peer's process (bootstrap/peer_process.h, a
// dead peer is HCCL_E_REMOTE at once) and the call's deadline (the communicator's
// hcclExecTimeOut, else HCCL_EXEC_TIMEOUT:
// HCCL_E_TIMEOUT naming the peer and what it did not do). A peer that dies before the pair's
// channel exists is noticed only by the timeout of the hand-off.
//
// Failures. A mismatch, or a rank that refuses a call because its own arguments are bad (it
// posts "refused" on an open channel: the peer fails the matching call at once with
// HCCL_E_PARA naming it), leaves the channel usable. A buffered send learns of neither: on a
// mismatch only the receive fails, and a box sent to a receive that was refused is dropped by
// the receiver's next receive on the pair. A buffered send to a peer that died succeeds while
// a box is free; the next one that waits for a box fails with HCCL_E_REMOTE. A failure half-way
// (timeout, dead peer, peer memory revoked) breaks the channel, and those of the call's other
// unfinished items: both sides' later transfers on such a pair fail with HCCL_E_REMOTE; the other
// pairs and the collectives are unaffected. A refusal before the pair's channel exists reaches
// nobody: the peer times out. The two sides never disagree on the path: the receiver alone chooses
// it for each message and tells the sender in its answer.
//
// Semantics taken from CANN: an item of count 0 is no transfer (no message, and its buffer,
// dataType and rank are not looked at); a rank cannot send to or receive from itself
// (HCCL_E_NOT_SUPPORT, in batches too: CANN's batches may copy locally, hzc's do not). hzc
// allows several items of one direction of one pair in a batch (CANN forbids them) and
// matches them in list order.
//
// A rank that destroys its communicator (or dies) breaks the kernel domain of its peer
// mappings for every rank (transport/transport.h): zero-copy transfers between the remaining
// ranks are then staged (their buffers no longer map), or fail with HCCL_E_REMOTE if that
// happens during the copy.
#pragma once

#include <hccl/hccl_types.h>

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "coll/p2p_item.h"
#include "core/comm.h"

namespace hzc::coll {

// Check @item's own arguments (direction, dataType, peer, size) without touching the peer.
Status ValidateP2p(const Communicator &comm, const P2pItem &item);

// Run @items together (ValidateP2p's errors go through RefuseP2p).
Status RunP2p(Communicator &comm, const std::vector<P2pItem> &items);

// This rank refuses @items for @why (its own argument checks failed): every item whose peer's
// channel is open is posted as refused, so the peer fails the matching call at once. @why.
Status RefuseP2p(Communicator &comm, const std::vector<P2pItem> &items, const Status &why);

}  // namespace hzc::coll
