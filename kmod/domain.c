// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: domains and their board.
 *
 * A domain is the kernel side of a communicator on this host: a 128-bit
 * id, nranks member slots and a board where each member publishes one
 * opaque blob per key and waits until every rank has published that key.
 * The first joiner creates the domain.  When any member leaves (explicitly
 * or because its context is torn down) the domain breaks: it leaves the
 * table (a new join with the same id creates a new domain), its waiters get
 * ECONNRESET, peer mappings made under it are revoked, and it is freed when
 * the last member has left.  It counts against max_domains until freed.
 *
 * What a user can make the module hold here is bounded per context
 * (max_memberships, max_board_bytes) and per user (max_user_memberships,
 * max_user_board_bytes), and charged to the caller's memory cgroup.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
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
/* Domains that are not broken, by id. */
static DEFINE_HASHTABLE(hzc_domain_table, 8);
static atomic64_t hzc_last_domain_seq = ATOMIC64_INIT(0);
/*
 * Domains by seq, from the join that completes them until they are freed
 * (broken ones too, as in sysfs), for the netlink dumps.  A domain is
 * erased in its release, so a lookup under the xa_lock may meet it at a
 * zero count and must skip it.
 */
static DEFINE_XARRAY(hzc_domains_xa);

static bool hzc_id_eq(const u64 *a, const u64 *b)
{
	return a[0] == b[0] && a[1] == b[1];
}

static u32 hzc_id_hash(const u64 *id)
{
	return (u32)(id[0] ^ (id[0] >> 32) ^ id[1] ^ (id[1] >> 32));
}

static void hzc_domain_free(struct kref *kref)
{
	struct hzc_domain *dom = container_of(kref, struct hzc_domain, kref);
	struct hzc_board_slot *slot;
	u32 i;

	/* Also releases the slot a failed join reserved. */
	if (dom->seq)
		xa_erase(&hzc_domains_xa, dom->seq);
	hzc_sysfs_domain_del(dom);
	for (i = 0; i < dom->nranks * HZC_BOARD_KEYS; i++) {
		slot = &dom->board[i];
		if (!slot->user)
			continue;
		kfree(slot->blob);
		atomic64_sub(slot->len, &slot->user->board_bytes);
		hzc_user_put(slot->user);
	}
	kvfree(dom->board);
	kfree(dom->revoke);
	kfree(dom->members);
	/* Counted from the time it got its number. */
	if (dom->seq)
		atomic64_dec(&hzc_stats.nr_domains);
	kfree(dom);
}

void hzc_domain_put(struct hzc_domain *dom)
{
	kref_put(&dom->kref, hzc_domain_free);
}

/*
 * Takes a reference on the domain of the lowest seq >= *@seq, if any, and
 * sets *@seq to its seq.
 */
struct hzc_domain *hzc_domain_get_next(u64 *seq)
{
	unsigned long index = *seq;
	struct hzc_domain *dom;

	if (*seq > ULONG_MAX)
		return NULL;
	xa_lock(&hzc_domains_xa);
	for (;;) {
		dom = xa_find(&hzc_domains_xa, &index, ULONG_MAX, XA_PRESENT);
		if (!dom || kref_get_unless_zero(&dom->kref))
			break;
		/* Being freed: it waits for the xa_lock to erase itself. */
		if (index == ULONG_MAX) {
			dom = NULL;
			break;
		}
		index++;
	}
	xa_unlock(&hzc_domains_xa);
	*seq = index;
	return dom;
}

static struct hzc_domain *hzc_domain_alloc(const u64 *id, u32 nranks)
{
	struct hzc_domain *dom;

	dom = kzalloc(sizeof(*dom), GFP_KERNEL_ACCOUNT);
	if (!dom)
		return NULL;
	dom->members = kcalloc(nranks, sizeof(*dom->members),
			       GFP_KERNEL_ACCOUNT);
	dom->revoke = kcalloc(nranks, sizeof(*dom->revoke), GFP_KERNEL_ACCOUNT);
	/* nranks <= HZC_MAX_RANKS: the product cannot overflow. */
	dom->board = kvcalloc(nranks * HZC_BOARD_KEYS, sizeof(*dom->board),
			      GFP_KERNEL_ACCOUNT);
	if (!dom->members || !dom->revoke || !dom->board) {
		kvfree(dom->board);
		kfree(dom->revoke);
		kfree(dom->members);
		kfree(dom);
		return NULL;
	}
	kref_init(&dom->kref);
	INIT_HLIST_NODE(&dom->hnode);
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
	hash_for_each_possible(hzc_domain_table, dom, hnode, hzc_id_hash(id))
		if (hzc_id_eq(dom->id, id))
			return dom;
	return NULL;
}

/* Linear, but bounded by max_memberships. */
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

/*
 * Take the domain out of reach and wake its waiters.  The members'
 * contexts are kept in @dom->revoke for hzc_domain_revoke(), which the
 * caller runs after dropping hzc_domains_lock.
 */
static void hzc_domain_break(struct hzc_domain *dom)
{
	u32 r;

	lockdep_assert_held(&hzc_domains_lock);
	WRITE_ONCE(dom->broken, true);
	hash_del(&dom->hnode);
	for (r = 0; r < dom->nranks; r++) {
		if (!dom->members[r])
			continue;
		kref_get(&dom->members[r]->ctx->kref);
		dom->revoke[r] = dom->members[r]->ctx;
	}
	wake_up_all(&dom->wq);
}

/*
 * Check the grants of every range of the contexts that were members when
 * @dom broke (a grant dies unless another domain still allows it) and zap
 * those ranges' peer mappings.  Drops the caller's reference on @dom.
 */
static void hzc_domain_revoke(struct hzc_domain *dom)
{
	u32 r;

	for (r = 0; r < dom->nranks; r++) {
		if (!dom->revoke[r])
			continue;
		hzc_ctx_revoke(dom->revoke[r]);
		hzc_ctx_put(dom->revoke[r]);
		dom->revoke[r] = NULL;
	}
	hzc_domain_put(dom);
}

/*
 * Leave @m.  Returns the domain, referenced, if this broke it: the caller
 * must hzc_domain_revoke() it after dropping hzc_domains_lock, and send the
 * @event noted in @note then.
 */
static struct hzc_domain *hzc_member_leave(struct hzc_member *m, u8 event,
					   struct hzc_nl_member_note *note)
{
	struct hzc_domain *dom = m->dom;
	struct hzc_ctx *ctx = m->ctx;
	struct hzc_domain *broke = NULL;

	lockdep_assert_held(&hzc_domains_lock);
	if (!dom->broken) {
		kref_get(&dom->kref);
		hzc_domain_break(dom);
		broke = dom;
	}
	hzc_sysfs_member_del(m);
	spin_lock(&ctx->members_lock);
	list_del(&m->ctx_node);
	spin_unlock(&ctx->members_lock);
	ctx->nr_members--;
	ctx->board_bytes -= m->board_bytes;
	atomic_dec(&ctx->hu->nr_members);
	dom->members[m->rank] = NULL;
	WRITE_ONCE(dom->nr_joined, dom->nr_joined - 1);
	hzc_nl_note_member(note, event, m);
	/*
	 * The member's blobs stay on the board: ranks woken by a key that
	 * every rank published still read it after this rank is gone.
	 */
	kfree(m);
	hzc_domain_put(dom);
	return broke;
}

/* Count a membership against the context's and the user's limits. */
static int hzc_member_charge(struct hzc_ctx *ctx)
{
	lockdep_assert_held(&hzc_domains_lock);
	if (ctx->nr_members >= READ_ONCE(hzc_max_memberships))
		return hzc_limit_hit("max_memberships", -ENOSPC);
	if (atomic_inc_return(&ctx->hu->nr_members) >
	    READ_ONCE(hzc_max_user_memberships)) {
		atomic_dec(&ctx->hu->nr_members);
		return hzc_limit_hit("max_user_memberships", -EDQUOT);
	}
	ctx->nr_members++;
	return 0;
}

/*
 * Insert @m after the context's other members of its domain: the list is
 * ordered by domain seq, so sysfs and netlink list the domains ascending.
 */
static void hzc_member_link(struct hzc_ctx *ctx, struct hzc_member *m)
{
	struct list_head *pos = &ctx->members;
	struct hzc_member *other;

	list_for_each_entry(other, &ctx->members, ctx_node) {
		if (other->dom->seq > m->dom->seq) {
			pos = &other->ctx_node;
			break;
		}
	}
	spin_lock(&ctx->members_lock);
	list_add_tail(&m->ctx_node, pos);
	spin_unlock(&ctx->members_lock);
}

/*
 * May @cmd's rank join @dom?  Permission first: a stranger learns nothing of
 * the domain.
 */
static int hzc_domain_admit(struct hzc_domain *dom,
			    const struct hzc_domain_join *cmd)
{
	lockdep_assert_held(&hzc_domains_lock);
	if (!uid_eq(dom->euid, current_euid()) && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (dom->nranks != cmd->nranks)
		return -EINVAL;
	if (dom->members[cmd->rank])
		return -EBUSY;
	return 0;
}

/*
 * The domain @cmd joins: the existing one, or @new_dom to create; NULL if
 * there is none and @new_dom is NULL (the caller allocates one unlocked and
 * looks again); or an ERR_PTR.
 */
static struct hzc_domain *hzc_domain_lookup(struct hzc_ctx *ctx,
					    const struct hzc_domain_join *cmd,
					    struct hzc_domain *new_dom)
{
	struct hzc_domain *dom;
	int ret;

	lockdep_assert_held(&hzc_domains_lock);
	if (hzc_member_find(ctx, cmd->domain_id, cmd->rank))
		return ERR_PTR(-EBUSY);
	dom = hzc_domain_find(cmd->domain_id);
	if (dom) {
		ret = hzc_domain_admit(dom, cmd);
		return ret ? ERR_PTR(ret) : dom;
	}
	if (!new_dom)
		return NULL;
	if (atomic64_read(&hzc_stats.nr_domains) >= READ_ONCE(hzc_max_domains))
		return ERR_PTR(hzc_limit_hit("max_domains", -ENOSPC));
	return new_dom;
}

/*
 * Number the domain a join creates, counting it, and give it its slot in
 * hzc_domains_xa and its sysfs directory.  On failure the caller's
 * hzc_domain_put() undoes what was done.
 */
static int hzc_domain_number(struct hzc_domain *dom)
{
	int ret;

	lockdep_assert_held(&hzc_domains_lock);
	dom->seq = atomic64_inc_return(&hzc_last_domain_seq);
	atomic64_inc(&hzc_stats.nr_domains);
	ret = xa_reserve(&hzc_domains_xa, dom->seq, GFP_KERNEL_ACCOUNT);
	if (ret)
		return ret;
	return hzc_sysfs_domain_add(dom);
}

/*
 * Complete: now @m, and @m->dom if the join @created it, may be found.  A
 * member holds a reference on its domain: of a created domain, the first.
 */
static void hzc_member_publish(struct hzc_member *m, bool created,
			       struct hzc_nl_member_note *note)
{
	struct hzc_domain *dom = m->dom;

	lockdep_assert_held(&hzc_domains_lock);
	if (created) {
		hash_add(hzc_domain_table, &dom->hnode, hzc_id_hash(dom->id));
		/* The slot is reserved: storing allocates nothing. */
		WARN_ON(xa_err(xa_store(&hzc_domains_xa, dom->seq, dom,
					GFP_KERNEL)));
	} else {
		kref_get(&dom->kref);
	}
	dom->members[m->rank] = m;
	WRITE_ONCE(dom->nr_joined, dom->nr_joined + 1);
	hzc_member_link(m->ctx, m);
	hzc_nl_note_member(note, HZC_NL_CMD_EVENT_MEMBER_JOIN, m);
}

int hzc_domain_join(struct hzc_ucmd *ucmd)
{
	struct hzc_domain_join *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
	struct hzc_domain *dom, *new_dom = NULL;
	struct hzc_nl_member_note note;
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

	mutex_lock(&hzc_domains_lock);
	for (;;) {
		dom = hzc_domain_lookup(ctx, cmd, new_dom);
		if (dom)
			break;
		/* Allocate only when the domain does not exist, unlocked. */
		mutex_unlock(&hzc_domains_lock);
		new_dom = hzc_domain_alloc(cmd->domain_id, cmd->nranks);
		if (!new_dom) {
			kfree(m);
			return -ENOMEM;
		}
		mutex_lock(&hzc_domains_lock);
	}
	if (IS_ERR(dom)) {
		ret = PTR_ERR(dom);
		goto out_unlock;
	}
	ret = hzc_member_charge(ctx);
	if (ret)
		goto out_unlock;

	if (dom == new_dom) {
		new_dom = NULL;
		created = true;
		ret = hzc_domain_number(dom);
		if (ret)
			goto out_uncharge;
	}

	m->dom = dom;
	m->ctx = ctx;
	m->rank = cmd->rank;
	m->pid = task_tgid_nr(current);
	ret = hzc_sysfs_member_add(m);
	if (ret)
		goto out_uncharge;
	hzc_member_publish(m, created, &note);
	mutex_unlock(&hzc_domains_lock);
	hzc_nl_event_member(&note);
	/* Allocated because the domain did not exist; it does now. */
	if (new_dom)
		hzc_domain_put(new_dom);
	return 0;

out_uncharge:
	ctx->nr_members--;
	atomic_dec(&ctx->hu->nr_members);
	/* Nobody else can have found a domain created here. */
	if (created)
		hzc_domain_put(dom);
out_unlock:
	mutex_unlock(&hzc_domains_lock);
	if (new_dom)
		hzc_domain_put(new_dom);
	kfree(m);
	return ret;
}

int hzc_domain_leave(struct hzc_ucmd *ucmd)
{
	struct hzc_domain_leave *cmd = ucmd->cmd;
	struct hzc_nl_member_note note = {};
	struct hzc_domain *broke = NULL;
	struct hzc_member *m;
	int ret = 0;

	if (cmd->flags || cmd->__reserved)
		return -EOPNOTSUPP;

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ucmd->ctx, cmd->domain_id, cmd->rank);
	if (m)
		broke = hzc_member_leave(m, HZC_NL_CMD_EVENT_MEMBER_LEAVE,
					 &note);
	else
		ret = -ENOENT;
	mutex_unlock(&hzc_domains_lock);
	hzc_nl_event_member(&note);
	if (broke)
		hzc_domain_revoke(broke);
	return ret;
}

void hzc_domains_leave_all(struct hzc_ctx *ctx)
{
	struct hzc_nl_member_note note;
	struct hzc_domain *broke;

	mutex_lock(&hzc_domains_lock);
	while (!list_empty(&ctx->members)) {
		broke = hzc_member_leave(list_first_entry(&ctx->members,
							  struct hzc_member,
							  ctx_node),
					 HZC_NL_CMD_EVENT_MEMBER_BROKEN, &note);
		mutex_unlock(&hzc_domains_lock);
		hzc_nl_event_member(&note);
		if (broke)
			hzc_domain_revoke(broke);
		mutex_lock(&hzc_domains_lock);
	}
	mutex_unlock(&hzc_domains_lock);
}

int hzc_board_put(struct hzc_ucmd *ucmd)
{
	struct hzc_board_put *cmd = ucmd->cmd;
	struct hzc_ctx *ctx = ucmd->ctx;
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
	blob = kmalloc(cmd->blob_len, GFP_KERNEL_ACCOUNT);
	if (!blob)
		return -ENOMEM;
	if (copy_from_user(blob, u64_to_user_ptr(cmd->blob), cmd->blob_len)) {
		kfree(blob);
		return -EFAULT;
	}

	mutex_lock(&hzc_domains_lock);
	m = hzc_member_find(ctx, cmd->domain_id, cmd->rank);
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
	if (ctx->board_bytes + cmd->blob_len > READ_ONCE(hzc_max_board_bytes)) {
		ret = hzc_limit_hit("max_board_bytes", -ENOSPC);
		goto out_unlock;
	}
	if (atomic64_add_return(cmd->blob_len, &ctx->hu->board_bytes) >
	    READ_ONCE(hzc_max_user_board_bytes)) {
		atomic64_sub(cmd->blob_len, &ctx->hu->board_bytes);
		ret = hzc_limit_hit("max_user_board_bytes", -EDQUOT);
		goto out_unlock;
	}
	ctx->board_bytes += cmd->blob_len;
	m->board_bytes += cmd->blob_len;
	refcount_inc(&ctx->hu->ref);
	slot->user = ctx->hu;
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
	s->missing = kcalloc(BITS_TO_U64(nranks), sizeof(u64),
			     GFP_KERNEL_ACCOUNT);
	s->lens = kcalloc(nranks, sizeof(u32), GFP_KERNEL_ACCOUNT);
	if (want_blobs && s->stride)
		s->blobs = kvcalloc(nranks, s->stride, GFP_KERNEL_ACCOUNT);
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

	left = wait_event_interruptible_timeout(dom->wq,
						hzc_board_ready(dom, cmd->key),
						msecs_to_jiffies(cmd->timeout_ms));
	if (left < 0) {
		ret = -EINTR;
		goto out_put;
	}

	/* Allocated after the wait: nothing sleeps holding it. */
	ret = hzc_board_snapshot_alloc(&snap, dom->nranks, cmd->blob_stride,
				       cmd->blobs);
	if (ret)
		goto out_put;

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

/*
 * Do @a and @b hold ranks of a common (unbroken) domain?  Quadratic in the
 * memberships of the two contexts, which max_memberships bounds.
 */
bool hzc_ctx_share_domain(struct hzc_ctx *a, struct hzc_ctx *b)
{
	struct hzc_member *ma, *mb;
	bool shared = false;

	mutex_lock(&hzc_domains_lock);
	list_for_each_entry(ma, &a->members, ctx_node) {
		if (ma->dom->broken)
			continue;
		list_for_each_entry(mb, &b->members, ctx_node) {
			if (mb->dom == ma->dom) {
				shared = true;
				goto out_unlock;
			}
		}
	}
out_unlock:
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
