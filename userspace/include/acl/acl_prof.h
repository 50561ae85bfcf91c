/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl/acl_prof.h: the ACL profiling calls (aclprof*) with ACL's names, values and signatures.
 *
 * hzc collects no profiling data: the calls check their arguments and the order of the calls
 * (aclprofInit before aclprofStart/aclprofStop, a configuration that aclprofCreateConfig made
 * and aclprofDestroyConfig has not freed) and return ACL's codes, so a program written for
 * CANN runs unchanged; nothing is written to the result path.
 */
#ifndef ACL_ACL_PROF_H_
#define ACL_ACL_PROF_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What to collect: the dataTypeConfig bits of aclprofCreateConfig, or-ed together. */
#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_GE_API_L0 0x0200ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_TASK_TIME_L2 0x2000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_TASK_TIME_L3 0x8000ULL
#define ACL_PROF_GE_API_L1 0x01000000ULL
#define ACL_PROF_API_STATS 0x400000000ULL

/* The AI Core metrics a configuration asks for (ACL_AICORE_NONE: none). */
typedef enum {
  ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
  ACL_AICORE_PIPE_UTILIZATION = 1,
  ACL_AICORE_MEMORY_BANDWIDTH = 2,
  ACL_AICORE_L0B_AND_WIDTH = 3,
  ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
  ACL_AICORE_MEMORY_UB = 5,
  ACL_AICORE_L2_CACHE = 6,
  ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
  ACL_AICORE_MEMORY_ACCESS = 8,
  ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

/* Opaque: made by aclprofCreateConfig, freed by aclprofDestroyConfig. */
typedef struct aclprofConfig aclprofConfig;
/* Opaque; aclprofCreateConfig accepts only NULL, as in CANN. */
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

/*
 * Start a profiling session writing under @profilerResultPath, a string of @length characters
 * (strlen(profilerResultPath) == length, 1..4096).  ACL_ERROR_INVALID_PARAM for a null or
 * wrong-length path, ACL_ERROR_REPEAT_INITIALIZE when a session is already initialised.
 */
aclError aclprofInit(const char *profilerResultPath, size_t length);

/* End the session (stopping what was started); ACL_SUCCESS also when none was initialised. */
aclError aclprofFinalize(void);

/*
 * A configuration for @deviceNums devices listed in @deviceIdList (ids below aclrtGetDeviceCount's;
 * the list may be NULL only when deviceNums is 0), @aicoreMetrics, @aicoreEvents (must be NULL) and
 * the ACL_PROF_* bits @dataTypeConfig.  NULL, with one error log line, for an invalid argument.
 */
aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                   aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents,
                                   uint64_t dataTypeConfig);

/* Free @profilerConfig; ACL_ERROR_INVALID_PARAM if it is null or not a live configuration. */
aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);

/*
 * Start / stop collecting what @profilerConfig names: ACL_ERROR_INVALID_PARAM for a null or
 * dead configuration, ACL_ERROR_PROF_NOT_RUN before aclprofInit, ACL_ERROR_PROF_ALREADY_RUN
 * for a second start and ACL_ERROR_PROF_NOT_RUN for a stop of what was not started.
 */
aclError aclprofStart(const aclprofConfig *profilerConfig);
aclError aclprofStop(const aclprofConfig *profilerConfig);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_PROF_H_ */
