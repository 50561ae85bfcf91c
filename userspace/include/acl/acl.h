/* SPDX-License-Identifier: Apache-2.0 */
/* acl/acl.h: the ACL subset implemented by libhzc. */
#ifndef ACL_ACL_H_
#define ACL_ACL_H_

#include <acl/acl_base.h>
#include <acl/acl_rt.h>

#endif /* ACL_ACL_H_ */
