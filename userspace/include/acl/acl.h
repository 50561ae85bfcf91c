/* SPDX-License-Identifier: Apache-2.0 */
/* acl/acl.h: the ACL subset implemented by libhzc. */
#ifndef ACL_ACL_H_
#define ACL_ACL_H_

#include <acl/acl_base.h>
#include <acl/acl_rt.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Initialise ACL.  @configPath: NULL or "" for no configuration, else a readable JSON file
 * (its content is checked to be JSON and otherwise unused): ACL_ERROR_INVALID_FILE when it
 * cannot be read, ACL_ERROR_PARSE_FILE when it is not JSON.  A second call before aclFinalize
 * is ACL_ERROR_REPEAT_INITIALIZE.  The other calls do not require aclInit on the host.
 */
aclError aclInit(const char *configPath);
/**
 * Destroy every stream (after its queued work), event and context, and end the
 * initialisation; ACL_ERROR_REPEAT_FINALIZE when not initialised.
 */
aclError aclFinalize(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_H_ */
