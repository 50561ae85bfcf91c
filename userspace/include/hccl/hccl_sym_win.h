/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hccl/hccl_sym_win.h: the peers' side of HCCL's symmetric memory windows
 * (HcclCommSymWinRegister in hccl/hccl.h).
 */
#ifndef HCCL_HCCL_SYM_WIN_H_
#define HCCL_HCCL_SYM_WIN_H_

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * *@ptr = where this process reaches byte @offset of rank @peerRank's memory in window
 * @winHandle (its own rank: its own memory): load and store through it until the window is
 * deregistered; bytes [*ptr, *ptr + window size - offset) belong to the window.  A peer's
 * memory is mapped into this process at the first call for that peer.  HCCL_E_PTR for a NULL
 * @winHandle or @ptr; HCCL_E_PARA for a handle that is not a registered window, @offset not
 * below the window's size, or @peerRank not below the rank count; HCCL_E_REMOTE when the peer
 * died.  Called on the host (HCCL calls it on the device).
 */
HcclResult HcclSymWinGetPeerPointer(HcclCommSymWindow winHandle, size_t offset, uint32_t peerRank,
                                    void **ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HCCL_HCCL_SYM_WIN_H_ */
