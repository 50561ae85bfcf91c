// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: domains and their board.
 *
 * A domain is the kernel side of a communicator on this host: a 128-bit
 * id, nranks member slots and a board where each member publishes one
 * opaque blob per key and waits until every rank has published that key.
 * The first joiner creates the domain.  When any member leaves (explicitly
 * or because its file is closed) the domain breaks: it is unlinked (a new
 * join with the same id creates a new domain), its waiters get ECONNRESET,
 * and it is freed when the last member has left.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/jiffies.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "hzc.h"

/* Domains, memberships and boards. */
DEFINE_MUTEX(hzc_domains_lock);
static LIST_HEAD(hzc_domains);
static unsigned int hzc_nr_live_domains;

static bool hzc_id_eq(const u64 *a, const u64 *b)
{
	return a[0] == b[0] && a[1] == b[1];
}

static void hzc_domain_free(struct kref *kref)
{
	struct hzc_domain *dom = container_of(kref, struct hzc_domain, kref);
	u32 i;

	for (i = 0; i < dom->nranks * HZC_BOARD_KEYS; i++)
		kfree(dom->board[i].blob);
	kvfree(dom->board);
	kfree(dom->members);
	kfree(dom);
}

static void hzc_domain_put(struct hzc_domain *dom)
{
	kref_put(&dom->kref, hzc_domain_free);
}

static struct hzc_domain *hzc_domain_alloc(const u64 *id, u32 nranks)
{
	struct hzc_domain *dom;

	dom = kzalloc(sizeof(*dom), GFP_KERNEL_ACCOUNT);
	if (!dom)
		return NULL;
	dom->members = kcalloc(nranks, sizeof(*dom->members),
			       GFP_KERNEL_ACCOUNT);
	/* nranks <= HZC_MAX_RANKS: the product cannot overflow. */
	dom->board = kvcalloc(nranks * HZC_BOARD_KEYS, sizeof(*dom->board),
			      GFP_KERNEL_ACCOUNT);
	if (!dom->members || !dom->board) {
		kvfree(dom->board);
		kfree(dom->members);
		kfree(dom);
		return NULL;
	}
	kref_init(&dom->kref);
	INIT_LIST_HEAD(&dom->list);
	init_waitqueue_head(&dom->wq);
	dom->id[0] = id[0];
	dom->id[1] = id[1];
	dom->nranks = nranks;
	dom->euid = current_euid();
	return dom;
}

static struct hzc_domain *hzc_domain_find(const u64 *id)
{
	struct hzc_domain *dom;

	lockdep_assert_held(&hzc_domains_lock);
	list_for_each_entry(dom, &hzc_domains, list)
		if (hzc_id_eq(dom->id, id))
			return dom;
	return NULL;
}

static struct hzc_member *hzc_member_find(struct hzc_ctx *ctx, const u64 *id,
					  u32 rank)
{
	struct hzc_member *m;

	lockdep_assert_held(&hzc_domains_lock);
	list_for_each_entry(m, &ctx->members, ctx_node)
		if (m->rank == rank && hzc_id_eq(m->dom->id, id))
			return m;
	return NULL;
}

/* Unlink a domain so no one finds it again; wake its waiters. */
static void hzc_domain_break(struct hzc_domain *dom)
{
	u32 r;

	lockdep_assert_held(&hzc_domains_lock);
	if (dom->broken)
		return;
	WRITE_ONCE(dom->broken, true);
	list_del_init(&dom->list);
	hzc_nr_live_domains--;
	atomic64_dec(&hzc_stats.nr_domains);
	for (r = 0; r < dom->nranks; r++)
		if (dom->members[r])
			hzc_sysfs_member_del(dom->members[r]);
	hzc_sysfs_domain_del(dom);
	wake_up_all(&dom->wq);
}

static void hzc_member_leave(struct hzc_member *m)
{
	struct hzc_domain *dom = m->dom;
	struct hzc_ctx *ctx = m->ctx;

	lockdep_assert_held(&hzc_domains_lock);
	hzc_sysfs_member_del(m);
	spin_lock(&ctx->members_lock);
	list_del(&m->ctx_node);
	spin_unlock(&ctx->members_lock);
	dom->members[m->rank] = NULL;
	WRITE_ONCE(dom->nr_joined, dom->nr_joined - 1);
	/*
	 * The member's blobs stay on the board: ranks woken by a key that
	 * every rank published still read it after this rank is gone.
	 */
	hzc_domain_break(dom);
	kfree(m);
	hzc_domain_put(dom);
}

int hzc_domain_join(struct hzc_ucmd *ucmd)
{
	struct hzc_domain_join *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct hzc_domain *dom, *new_dom;
	struct hzc_member *m;
	bool created = false;
	int ret;

	if (cmd->flags)
		return -EOPNOTSUPP;
	if ((!cmd->domain_id[0] && !cmd->domain_id[1]) || !cmd->nranks ||
	    cmd->nranks > HZC_MAX_RANKS || cmd->rank >= cmd->nranks)
		return -EINVAL;

	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return -ENOMEM;
	new_dom = hzc_domain_alloc(cmd->domain_id, cmd->nranks);
	if (!new_dom) {
		ret = -ENOMEM;
		goto out_free_member;
	}

	mutex_lock(&hzc_domains_lock);
	if (hzc_member_find(ctx, cmd->domain_id, cmd->rank)) {
		ret = -EBUSY;
		goto out_unlock;
	}
	dom = hzc_domain_find(cmd->domain_id);
	if (dom) {
		if (dom->nranks != cmd->nranks) {
			ret = -EINVAL;
			goto out_unlock;
		}
		if (!uid_eq(dom->euid, current_euid()) &&
		    !capable(CAP_SYS_ADMIN)) {
			ret = -EPERM;
			goto out_unlock;
		}
		if (dom->members[cmd->rank]) {
			ret = -EBUSY;
			goto out_unlock;
		}
		kref_get(&dom->kref);
	} else {
		if (hzc_nr_live_domains >= READ_ONCE(hzc_max_domains)) {
			ret = -ENOSPC;
			goto out_unlock;
		}
		dom = new_dom;
		new_dom = NULL;
		created = true;
		ret = hzc_sysfs_domain_add(dom);
		if (ret)
			goto out_put_domain;
		list_add_tail(&dom->list, &hzc_domains);
		hzc_nr_live_domains++;
		atomic64_inc(&hzc_stats.nr_domains);
	}

	m->dom = dom;
	m->ctx = ctx;
	m->rank = cmd->rank;
	m->pid = task_tgid_nr(current);
	ret = hzc_sysfs_member_add(m);
	if (ret)
		goto out_put_domain;
	dom->members[cmd->rank] = m;
	WRITE_ONCE(dom->nr_joined, dom->nr_joined + 1);
	spin_lock(&ctx->members_lock);
	list_add_tail(&m->ctx_node, &ctx->members);
	spin_unlock(&ctx->members_lock);
	mutex_unlock(&hzc_domains_lock);
	/* Allocated in case the domain had to be created; it existed. */
	if (new_dom)
		hzc_domain_put(new_dom);
	return 0;

out_put_domain:
	if (created && !list_empty(&dom->list)) {
		/* Nobody else can have found it: we still hold the lock. */
		list_del(&dom->list);
		hzc_nr_live_domains--;
		atomic64_dec(&hzc_stats.nr_domains);
	}
	if (created)
		hzc_sysfs_domain_del(dom);
	hzc_domain_put(dom);
out_unlock:
	mutex_unlock(&hzc_domains_lock);
	if (new_dom)
		hzc_domain_put(new_dom);
out_free_member:
	kfree(m);
	return ret;
}

int hzc_domain_leave(struct hzc_ucmd *ucmd)
{
	struct hzc_domain_leave *cmd = ucmd->cmd;
	struct hzc_member *m;
	int ret = 0;

	if (cmd->flags || cmd->__reserved)
		return -EOPNOTSUPP;

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ucmd->ctx, cmd->domain_id, cmd->rank);
	if (m)
		hzc_member_leave(m);
	else
		ret = -ENOENT;
	mutex_unlock(&hzc_domains_lock);
	return ret;
}

void hzc_domains_leave_all(struct hzc_ctx *ctx)
{
	mutex_lock(&hzc_domains_lock);
	while (!list_empty(&ctx->members))
		hzc_member_leave(list_first_entry(&ctx->members,
						  struct hzc_member, ctx_node));
	mutex_unlock(&hzc_domains_lock);
}

int hzc_board_put(struct hzc_ucmd *ucmd)
{
	struct hzc_board_put *cmd = ucmd->cmd;
	struct hzc_board_slot *slot;
	struct hzc_domain *dom;
	struct hzc_member *m;
	void *blob;
	int ret = 0;

	if (cmd->flags || cmd->__reserved)
		return -EOPNOTSUPP;
	if (cmd->key >= HZC_BOARD_KEYS || cmd->blob_len > HZC_MAX_BLOB_SIZE)
		return -EINVAL;

	/* A zero-length blob is ZERO_SIZE_PTR: published, but empty. */
	blob = memdup_user(u64_to_user_ptr(cmd->blob), cmd->blob_len);
	if (IS_ERR(blob))
		return PTR_ERR(blob);

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ucmd->ctx, cmd->domain_id, cmd->rank);
	if (!m) {
		ret = -ENOENT;
		goto out_unlock;
	}
	dom = m->dom;
	if (dom->broken) {
		ret = -ECONNRESET;
		goto out_unlock;
	}
	slot = &dom->board[m->rank * HZC_BOARD_KEYS + cmd->key];
	if (slot->blob) {
		ret = -EEXIST;
		goto out_unlock;
	}
	slot->blob = blob;
	slot->len = cmd->blob_len;
	blob = NULL;
	WRITE_ONCE(dom->nr_published[cmd->key], dom->nr_published[cmd->key] + 1);
	if (dom->nr_published[cmd->key] == dom->nranks)
		wake_up_all(&dom->wq);
out_unlock:
	mutex_unlock(&hzc_domains_lock);
	kfree(blob);
	return ret;
}

static bool hzc_board_ready(struct hzc_domain *dom, u32 key)
{
	return READ_ONCE(dom->broken) ||
	       READ_ONCE(dom->nr_published[key]) == dom->nranks;
}

/* What BOARD_WAIT copies out, gathered under the lock. */
struct hzc_board_snapshot {
	u32 nranks;
	u32 stride;
	u32 nr_missing;
	bool too_long;
	u64 *missing;
	u32 *lens;
	u8 *blobs;
};

static void hzc_board_snapshot_free(struct hzc_board_snapshot *s)
{
	kfree(s->missing);
	kfree(s->lens);
	kvfree(s->blobs);
}

static int hzc_board_snapshot_alloc(struct hzc_board_snapshot *s, u32 nranks,
				    u32 stride, bool want_blobs)
{
	s->nranks = nranks;
	s->stride = min_t(u32, stride, HZC_MAX_BLOB_SIZE);
	s->missing = kcalloc(BITS_TO_U64(nranks), sizeof(u64), GFP_KERNEL);
	s->lens = kcalloc(nranks, sizeof(u32), GFP_KERNEL);
	if (want_blobs && s->stride)
		s->blobs = kvcalloc(nranks, s->stride, GFP_KERNEL);
	if (!s->missing || !s->lens || (want_blobs && s->stride && !s->blobs)) {
		hzc_board_snapshot_free(s);
		return -ENOMEM;
	}
	return 0;
}

static void hzc_board_snapshot_fill(struct hzc_board_snapshot *s,
				    struct hzc_domain *dom, u32 key)
{
	const struct hzc_board_slot *slot;
	u32 r;

	lockdep_assert_held(&hzc_domains_lock);
	for (r = 0; r < s->nranks; r++) {
		slot = &dom->board[r * HZC_BOARD_KEYS + key];
		if (!slot->blob) {
			s->missing[r / 64] |= 1ULL << (r % 64);
			s->nr_missing++;
			continue;
		}
		s->lens[r] = slot->len;
		if (slot->len > s->stride)
			s->too_long = true;
		if (s->blobs)
			memcpy(s->blobs + (size_t)r * s->stride, slot->blob,
			       min(slot->len, s->stride));
	}
}

static int hzc_board_snapshot_copy(struct hzc_board_snapshot *s,
				   struct hzc_board_wait *cmd)
{
	void __user *ublobs = u64_to_user_ptr(cmd->blobs);
	u32 r;

	if (cmd->missing &&
	    copy_to_user(u64_to_user_ptr(cmd->missing), s->missing,
			 BITS_TO_U64(s->nranks) * sizeof(u64)))
		return -EFAULT;
	if (cmd->blob_lens &&
	    copy_to_user(u64_to_user_ptr(cmd->blob_lens), s->lens,
			 s->nranks * sizeof(u32)))
		return -EFAULT;
	if (s->nr_missing || !s->blobs)
		return 0;
	for (r = 0; r < s->nranks; r++)
		if (copy_to_user(ublobs + (size_t)r * cmd->blob_stride,
				 s->blobs + (size_t)r * s->stride,
				 min(s->lens[r], s->stride)))
			return -EFAULT;
	return 0;
}

/* Would a buffer of BOARD_WAIT for @nranks ranks wrap around? */
static bool hzc_board_buffers_overflow(const struct hzc_board_wait *cmd,
				       u32 nranks)
{
	u64 len, end;

	if (cmd->blobs &&
	    (check_mul_overflow((u64)nranks, (u64)cmd->blob_stride, &len) ||
	     check_add_overflow(cmd->blobs, len, &end)))
		return true;
	if (cmd->blob_lens &&
	    check_add_overflow(cmd->blob_lens, (u64)nranks * sizeof(u32), &end))
		return true;
	return cmd->missing &&
	       check_add_overflow(cmd->missing,
				  (u64)BITS_TO_U64(nranks) * sizeof(u64), &end);
}

int hzc_board_wait(struct hzc_ucmd *ucmd)
{
	struct hzc_board_wait *cmd = ucmd->cmd;
	struct hzc_board_snapshot snap = {};
	struct hzc_domain *dom;
	struct hzc_member *m;
	long left;
	int ret;

	if (cmd->flags || cmd->__reserved)
		return -EOPNOTSUPP;
	if (cmd->key >= HZC_BOARD_KEYS || (cmd->blobs && !cmd->blob_stride))
		return -EINVAL;

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ucmd->ctx, cmd->domain_id, cmd->rank);
	if (!m) {
		mutex_unlock(&hzc_domains_lock);
		return -ENOENT;
	}
	dom = m->dom;
	kref_get(&dom->kref);
	mutex_unlock(&hzc_domains_lock);

	/* Every user buffer must end inside the 64-bit address space. */
	if (hzc_board_buffers_overflow(cmd, dom->nranks)) {
		ret = -EOVERFLOW;
		goto out_put;
	}

	ret = hzc_board_snapshot_alloc(&snap, dom->nranks, cmd->blob_stride,
				       cmd->blobs);
	if (ret)
		goto out_put;

	left = wait_event_interruptible_timeout(dom->wq,
						hzc_board_ready(dom, cmd->key),
						msecs_to_jiffies(cmd->timeout_ms));
	if (left < 0) {
		ret = -EINTR;
		goto out_free;
	}

	mutex_lock(&hzc_domains_lock);
	/* A key every rank published is complete even if a rank left since. */
	if (dom->broken && dom->nr_published[cmd->key] != dom->nranks) {
		mutex_unlock(&hzc_domains_lock);
		ret = -ECONNRESET;
		goto out_free;
	}
	hzc_board_snapshot_fill(&snap, dom, cmd->key);
	mutex_unlock(&hzc_domains_lock);

	ret = hzc_board_snapshot_copy(&snap, cmd);
	if (ret)
		goto out_free;
	cmd->out_nr_missing = snap.nr_missing;
	if (snap.nr_missing) {
		ret = -ETIMEDOUT;
		ucmd->copy_out_on_error = true;
	} else if (snap.too_long && cmd->blobs) {
		ret = -EMSGSIZE;
		ucmd->copy_out_on_error = true;
	}
out_free:
	hzc_board_snapshot_free(&snap);
out_put:
	hzc_domain_put(dom);
	return ret;
}

/* Do @a and @b hold ranks of a common (unbroken) domain? */
bool hzc_ctx_share_domain(struct hzc_ctx *a, struct hzc_ctx *b)
{
	struct hzc_member *m;
	bool shared = false;
	u32 r;

	mutex_lock(&hzc_domains_lock);
	list_for_each_entry(m, &a->members, ctx_node) {
		if (m->dom->broken)
			continue;
		for (r = 0; r < m->dom->nranks && !shared; r++)
			shared = m->dom->members[r] &&
				 m->dom->members[r]->ctx == b;
		if (shared)
			break;
	}
	mutex_unlock(&hzc_domains_lock);
	return shared;
}

/*
 * The context holding @peer_rank of the domain where @ctx holds @rank,
 * referenced; or an ERR_PTR.
 */
struct hzc_ctx *hzc_domain_peer_get(struct hzc_ctx *ctx, const u64 *id,
				    u32 rank, u32 peer_rank, pid_t *pid)
{
	struct hzc_ctx *peer = ERR_PTR(-ENOENT);
	struct hzc_member *m;

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ctx, id, rank);
	if (!m)
		goto out_unlock;
	if (m->dom->broken) {
		peer = ERR_PTR(-ECONNRESET);
		goto out_unlock;
	}
	if (peer_rank >= m->dom->nranks) {
		peer = ERR_PTR(-EINVAL);
		goto out_unlock;
	}
	m = m->dom->members[peer_rank];
	if (!m)
		goto out_unlock;
	peer = m->ctx;
	*pid = m->pid;
	kref_get(&peer->kref);
out_unlock:
	mutex_unlock(&hzc_domains_lock);
	return peer;
}
