/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl/acl_base.h: the ACL base types and the error codes libhzc returns, with ACL's values.
 */
#ifndef ACL_ACL_BASE_H_
#define ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;

#define ACL_SUCCESS 0
#define ACL_ERROR_NONE 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_INVALID_FILE 100003
#define ACL_ERROR_PARSE_FILE 100006
#define ACL_ERROR_REPEAT_FINALIZE 100037

/* Profiling (acl/acl_prof.h). */
#define ACL_ERROR_PROF_ALREADY_RUN 100042
#define ACL_ERROR_PROF_NOT_RUN 100043

/* Runtime codes: 107xxx parameter/feature, 207xxx resource, 507xxx internal. */
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006
#define ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL 107007
#define ACL_ERROR_RT_ADDR_UNALIGNED 107008
#define ACL_ERROR_RT_INVALID_MEMORY_TYPE 107016
#define ACL_ERROR_RT_INVALID_HANDLE 107017
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001
#define ACL_ERROR_RT_MEMORY_FREE 207002
#define ACL_ERROR_RT_NO_PERMISSION 207006
#define ACL_ERROR_RT_OVER_LIMIT 207012
#define ACL_ERROR_RT_INTERNAL_ERROR 507000
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE 507006
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT 507047

/**
 * The name of the SoC: "Ascend910B1", nominal (a device of libhzc is a slot of this host
 * backed by host memory and threads; the name is one CANN lists, for programs that branch on
 * it).
 */
const char *aclrtGetSocName(void);

/**
 * The message of the last failed ACL or HCCL call of the calling thread ("aclrtMemcpy:
 * count=...: ..."), or NULL when no call failed since the last aclGetRecentErrMsg: reading it
 * clears it. The string stays valid until the thread's next call of this function.
 */
const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_BASE_H_ */
