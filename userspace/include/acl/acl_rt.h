/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl/acl_rt.h: the subset of the ACL runtime that libhzc implements on host memory:
 * the virtual-memory calls (reserve a VA range, allocate "physical" memory, map it), devices,
 * contexts, streams run by host threads, events and memory calls.
 *
 * Host semantics: a reservation is a PROT_NONE mapping; physical memory is a memfd
 * (hugetlb or transparent huge pages for the huge-page attributes); aclrtMapMem maps the
 * memfd MAP_SHARED|MAP_FIXED into a reservation; aclrtUnmapMem restores PROT_NONE.
 */
#ifndef ACL_ACL_RT_H_
#define ACL_ACL_RT_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtDrvMemHandle;

typedef enum aclrtMemAttr {
  ACL_DDR_MEM,
  ACL_HBM_MEM,
  ACL_DDR_MEM_HUGE,
  ACL_DDR_MEM_NORMAL,
  ACL_HBM_MEM_HUGE,
  ACL_HBM_MEM_NORMAL,
  ACL_DDR_MEM_P2P_HUGE,
  ACL_DDR_MEM_P2P_NORMAL,
  ACL_HBM_MEM_P2P_HUGE,
  ACL_HBM_MEM_P2P_NORMAL,
  ACL_HBM_MEM_HUGE1G,
  ACL_HBM_MEM_P2P_HUGE1G,
} aclrtMemAttr;

typedef enum aclrtMemLocationType {
  ACL_MEM_LOCATION_TYPE_HOST = 0,
  ACL_MEM_LOCATION_TYPE_DEVICE,
  ACL_MEM_LOCATION_TYPE_UNREGISTERED,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id;
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
  ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
  ACL_MEM_HANDLE_TYPE_NONE = 0,
} aclrtMemHandleType;

typedef struct aclrtPhysicalMemProp {
  aclrtMemHandleType handleType;
  aclrtMemAllocationType allocationType;
  aclrtMemAttr memAttr;
  aclrtMemLocation location;
  uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
  ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
  ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
  ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
} aclrtMemGranularityOptions;

/**
 * Reserve @size bytes of virtual address space (no memory behind it).  @alignment is
 * reserved (0).  @expectPtr NULL lets the library choose, and it chooses an address where
 * any allocation that fits can be mapped at the base: aligned to 1 GiB when @size is at
 * least 1 GiB (ACL_HBM_MEM_HUGE1G pages), else to 2 MiB (huge pages), whatever @flags.
 * Otherwise @expectPtr must be aligned to the granularity of @flags and free, else
 * ACL_ERROR_RT_PARAM_INVALID / ACL_ERROR_RT_MEMORY_ALLOCATION.
 * @flags: 0 normal pages (size rounded up to the page), 1 huge pages (to 2 MiB).
 */
aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags);
/** Release a reservation; everything mapped into it must have been unmapped first. */
aclError aclrtReleaseMemAddress(void *virPtr);
/** Allocate @size bytes (a multiple of the granularity of @prop); @flags must be 0. */
aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags);
/** Drop the handle; the memory lives until its last mapping is unmapped. */
aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
/** Map the whole allocation at @virPtr inside a reservation; @offset and @flags must be 0. */
aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags);
/** Unmap what aclrtMapMem mapped at @virPtr; the range returns to the reservation. */
aclError aclrtUnmapMem(void *virPtr);
/** Granularity of allocations with @prop (page size, or 2 MiB for huge-page attributes). */
aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity);

/*
 * Devices and contexts.  A device is a slot of this host backed by host memory and host
 * threads; there are HZC_DEVICE_COUNT of them (1..1024), else max(online CPUs, 8): a CANN
 * server has 8 NPUs, and one rank per core must find a device.  aclrtSetDevice binds the
 * calling thread to the device's default context, made at the first aclrtSetDevice of the
 * device and counted per call; aclrtResetDevice drops one count (the context goes at 0).  A
 * bad id is ACL_ERROR_RT_INVALID_DEVICEID.
 */
aclError aclrtSetDevice(int32_t deviceId);
/** Drop one aclrtSetDevice of @deviceId; a device not set is no error. */
aclError aclrtResetDevice(int32_t deviceId);
/** The device of the calling thread's context; ACL_ERROR_RT_CONTEXT_NULL when it has none. */
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtGetDeviceCount(uint32_t *count);
/** A new context on @deviceId, which becomes the calling thread's current context. */
aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
/** Destroy a context of aclrtCreateContext (not a default one); threads using it lose it. */
aclError aclrtDestroyContext(aclrtContext context);
aclError aclrtSetCurrentContext(aclrtContext context);
/** ACL_ERROR_RT_CONTEXT_NULL when the calling thread has no context. */
aclError aclrtGetCurrentContext(aclrtContext *context);

typedef enum aclrtFloatOverflowMode {
  ACL_RT_OVERFLOW_MODE_SATURATION = 0,
  ACL_RT_OVERFLOW_MODE_INFNAN,
  ACL_RT_OVERFLOW_MODE_UNDEF,
} aclrtFloatOverflowMode;

/**
 * Stored for aclrtGetDeviceSatMode and nothing else: the host's reductions compute in IEEE
 * arithmetic (inf and NaN propagate) whatever the mode.  Default ACL_RT_OVERFLOW_MODE_SATURATION.
 */
aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode);
aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode);

/*
 * Streams.  A stream of aclrtCreateStream owns a host worker thread that runs the work queued
 * on it (aclrtMemcpyAsync, aclrtMemsetAsync, event records and waits, and the collectives that
 * take the stream) one after the other in the order it was queued.  NULL is the default
 * stream: work queued on it runs at once, on the calling thread.  A task's failure is kept on
 * the stream and returned by the next aclrtSynchronizeStream (an aclError a task failed with,
 * else ACL_ERROR_RT_INTERNAL_ERROR), which logs it and clears it.  A handle that is not a live
 * stream is ACL_ERROR_RT_INVALID_HANDLE.
 */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE 0x00000001U

aclError aclrtCreateStream(aclrtStream *stream);
/** @priority and @flag are accepted and ignored (every stream is one FIFO worker). */
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);
/** Waits for the work queued on @stream, then destroys it (its failure, if any, is dropped). */
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
/** @timeout in ms, -1 = none; ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when it passes. */
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/**
 * ACL_STOP_ON_FAILURE: after a task fails, the tasks that follow it are discarded (not run)
 * until the next aclrtSynchronizeStream.  ACL_CONTINUE_ON_FAILURE (default): they run.  NULL
 * (the default stream, whose work runs in the call that queues it) is accepted, no effect.
 */
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);
/**
 * @stream's later work waits until @event's last record (as of this call) has completed; an
 * event never recorded is no wait.  NULL stream: the call itself waits.
 */
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

/*
 * Events.  A record completes when its stream's worker reaches it (at once on the NULL
 * stream) and takes its timestamp then (steady clock).  A handle that is not a live event is
 * ACL_ERROR_RT_INVALID_HANDLE.
 */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE 0x00000008U
#define ACL_EVENT_DEVICE_USE_ONLY 0x00000010U
#define ACL_EVENT_EXTERNAL 0x00000020U
#define ACL_EVENT_IPC 0x00000040U

typedef enum aclrtEventStatus {
  ACL_EVENT_STATUS_COMPLETE = 0,
  ACL_EVENT_STATUS_NOT_READY = 1,
  ACL_EVENT_STATUS_RESERVED = 2,
} aclrtEventStatus;

typedef enum aclrtEventRecordedStatus {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
} aclrtEventRecordedStatus;

typedef enum aclrtEventWaitStatus {
  ACL_EVENT_WAIT_STATUS_COMPLETE = 0,
  ACL_EVENT_WAIT_STATUS_NOT_READY = 1,
  ACL_EVENT_WAIT_STATUS_RESERVED = 0xFFFF,
} aclrtEventWaitStatus;

/** An event with ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE. */
aclError aclrtCreateEvent(aclrtEvent *event);
/**
 * @flag: any of ACL_EVENT_SYNC, _CAPTURE_STREAM_PROGRESS, _TIME_LINE, _DEVICE_USE_ONLY,
 * _EXTERNAL (accepted; only _TIME_LINE changes anything: the timestamp); ACL_EVENT_IPC is
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 */
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
/** The same as aclrtCreateEventWithFlag. */
aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag);
/** Records and waits already queued still complete. */
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
/** The event is "not recorded" again once @stream reaches this point. */
aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
/** Blocks until the event's last record has completed (returns at once if never recorded). */
aclError aclrtSynchronizeEvent(aclrtEvent event);
/** @timeout in ms, -1 = none; ACL_ERROR_RT_EVENT_SYNC_TIMEOUT when it passes. */
aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);
/** COMPLETE when recorded and reached; NOT_READY when not recorded or not yet reached. */
aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status);
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
/** COMPLETE when every aclrtStreamWaitEvent on the event has passed. */
aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status);
/**
 * Milliseconds between the completions of two recorded, complete events with
 * ACL_EVENT_TIME_LINE: ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID for an event without the flag or
 * not recorded, ACL_ERROR_RT_EVENT_NOT_COMPLETE for one not complete,
 * ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL when @endEvent completed before @startEvent.
 */
aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);

/*
 * Memory.  Device memory is what aclrtMalloc returns and what aclrtMapMem maps; host memory is
 * everything else (aclrtMallocHost's included).  aclrtMalloc maps anonymous memory: huge pages
 * from the hugetlb pool (MAP_HUGETLB) for HUGE_ONLY, else a 2 MiB-aligned mapping with
 * MADV_HUGEPAGE (transparent huge pages) for HUGE_FIRST above 1 MiB when the pool has no
 * pages, and normal pages for NORMAL_ONLY.
 */
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST,
  ACL_MEM_MALLOC_HUGE_ONLY,
  ACL_MEM_MALLOC_NORMAL_ONLY,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
  ACL_MEM_MALLOC_HUGE1G_ONLY,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
  ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
  ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
  ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,
} aclrtMemMallocPolicy;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST,
  ACL_MEMCPY_HOST_TO_DEVICE,
  ACL_MEMCPY_DEVICE_TO_HOST,
  ACL_MEMCPY_DEVICE_TO_DEVICE,
  ACL_MEMCPY_DEFAULT,
  ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
  ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
  ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

/**
 * @size bytes of device memory (@size > 0).  @policy: one of the page policies (the _P2P ones
 * as their plain kind; HUGE1G_ONLY from the 1 GiB hugetlb pool), optionally with
 * ACL_MEM_TYPE_LOW/HIGH_BAND_WIDTH (ignored); ACL_MEM_ACCESS_USER_SPACE_READONLY is not
 * supported.  No memory: ACL_ERROR_RT_MEMORY_ALLOCATION.
 */
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
/** Free what aclrtMalloc returned (the start of the block), else ACL_ERROR_RT_PARAM_INVALID. */
aclError aclrtFree(void *devPtr);
/** @size bytes of host memory (anonymous pages). */
aclError aclrtMallocHost(void **hostPtr, size_t size);
/** Free what aclrtMallocHost returned, else ACL_ERROR_RT_PARAM_INVALID. */
aclError aclrtFreeHost(void *hostPtr);
/**
 * Copy @count bytes (count <= destMax, else ACL_ERROR_INVALID_PARAM).  @kind: HOST_TO_HOST,
 * HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE (INNER_ and INTER_DEVICE_TO_DEVICE alike),
 * HOST_TO_BUF_TO_DEVICE (as HOST_TO_DEVICE) or DEFAULT (the sides are what the addresses are);
 * anything else is ACL_ERROR_INVALID_PARAM.  Each device side must lie in device memory for the
 * whole @count and each host side outside it, else ACL_ERROR_RT_INVALID_MEMORY_TYPE naming the
 * argument (a device side: the whole range inside one aclrtMalloc block or contiguous
 * aclrtMapMem mappings; a host side: no byte in an aclrtMalloc block and neither end in a
 * mapping).  @count 0 copies nothing; overlapping ranges are copied as by memmove.
 */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind);
/** aclrtMemcpy checked now and run on @stream's worker. */
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream);
/** Set @count bytes (count <= maxCount) of device memory at @devPtr to (uint8_t)@value. */
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
/** aclrtMemset checked now and run on @stream's worker. */
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream);
/**
 * Free and total memory of the host (sysinfo(2): free RAM and total RAM), whatever @attr
 * (any aclrtMemAttr).
 */
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_RT_H_ */
