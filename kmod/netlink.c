// SPDX-License-Identifier: GPL-2.0
/*
 * hzc: the generic netlink family "hzc" (include/uapi/linux/hzc.h, section
 * "Generic netlink family"): dumps and gets of ranges, activations, domains
 * and members, the global counters, and the "events" multicast group.
 *
 * Who sees what is decided per request: a sender with CAP_SYS_ADMIN in the
 * initial user namespace sees everything, with addresses and domain ids;
 * any other sender sees the objects of its own real uid (the uid of the
 * netlink credentials of the request, compared with the real uid of the
 * process that opened /dev/hzc) and no address or id.
 *
 * Dumps walk the objects in key order (ranges by id, domains by seq, from
 * the xarrays of range.c and domain.c) and keep the key to resume at in
 * the callback, so that each dumpit() call starts after the last object it
 * sent.  Objects are referenced while a message is built, never built under
 * a spinlock of an xarray.
 *
 * Events are numbered under hzc_events_lock and sent under it, so their
 * HZC_NLA_EVENT_SEQ follows the order listeners receive them in.  An event
 * that cannot be allocated or built is dropped, its number spent.  Member
 * events are noted under hzc_domains_lock and built and sent after it (no
 * allocation under the global lock), so the events of two threads may be
 * numbered in the other order than their changes were made.
 */
#include <linux/capability.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/uidgid.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include <net/sock.h>

#include "hzc.h"

enum {
	HZC_NL_GRP_EVENTS,
};

/* Innermost mutex: numbers and sends events. */
static DEFINE_MUTEX(hzc_events_lock);
static u64 hzc_event_seq;

static struct genl_family hzc_genl_family;

/* Who asked: privileged, or the real uid the objects must belong to. */
struct hzc_nl_who {
	bool priv;
	kuid_t uid;
};

/**
 * struct hzc_nl_dump - a dump's state, kept in netlink_callback.ctx
 * @key: range id or domain seq to resume at
 * @key2: activation address or member rank to resume at within @key
 * @filter: with @filter_key, the one key to dump
 * @filter_key: dump only @filter (HZC_NLA_RANGE_ID, HZC_NLA_DOMAIN_SEQ)
 * @filter_pid: dump only objects of this owner pid
 * @has_filter_pid: @filter_pid is set
 * @who: who asked (decided when the dump starts)
 */
struct hzc_nl_dump {
	u64 key;
	u64 key2;
	u64 filter;
	bool filter_key;
	bool has_filter_pid;
	u32 filter_pid;
	struct hzc_nl_who who;
};

static struct hzc_nl_dump *hzc_nl_dump_ctx(struct netlink_callback *cb)
{
	BUILD_BUG_ON(sizeof(struct hzc_nl_dump) > sizeof(cb->ctx));
	return (struct hzc_nl_dump *)cb->ctx;
}

static struct hzc_nl_who hzc_nl_who(const struct sk_buff *skb)
{
	struct hzc_nl_who who = {
		.priv = netlink_capable(skb, CAP_SYS_ADMIN),
		.uid = NETLINK_CB(skb).creds.uid,
	};

	return who;
}

static u32 hzc_nl_uid(kuid_t uid)
{
	return from_kuid_munged(&init_user_ns, uid);
}

static bool hzc_nl_range_visible(const struct hzc_nl_who *who,
				 const struct hzc_range *range)
{
	return who->priv || uid_eq(range->ctx->uid, who->uid);
}

/* Called with hzc_domains_lock held: does a member belong to @who? */
static bool hzc_nl_domain_visible(const struct hzc_nl_who *who,
				  const struct hzc_domain *dom)
{
	u32 r;

	lockdep_assert_held(&hzc_domains_lock);
	if (who->priv)
		return true;
	for (r = 0; r < dom->nranks; r++)
		if (dom->members[r] &&
		    uid_eq(dom->members[r]->ctx->uid, who->uid))
			return true;
	return false;
}

static int hzc_nl_put_u64(struct sk_buff *skb, int type, u64 value)
{
	return nla_put_u64_64bit(skb, type, value, HZC_NLA_PAD);
}

static int hzc_nl_put_owner(struct sk_buff *skb, struct hzc_ctx *ctx)
{
	if (nla_put_u32(skb, HZC_NLA_PID, pid_nr(ctx->tgid)) ||
	    nla_put_u32(skb, HZC_NLA_UID, hzc_nl_uid(ctx->uid)))
		return -EMSGSIZE;
	return 0;
}

/* The domains the owner is a member of, as sysfs' domains file lists them. */
static int hzc_nl_put_range_domains(struct sk_buff *skb, struct hzc_ctx *ctx)
{
	struct hzc_domain *prev = NULL;
	struct hzc_member *m;
	struct nlattr *nest;
	int ret = 0;

	nest = nla_nest_start(skb, HZC_NLA_RANGE_DOMAINS);
	if (!nest)
		return -EMSGSIZE;
	spin_lock(&ctx->members_lock);
	list_for_each_entry(m, &ctx->members, ctx_node) {
		if (m->dom == prev)
			continue;
		prev = m->dom;
		ret = hzc_nl_put_u64(skb, HZC_NLA_DOMAIN_SEQ, m->dom->seq);
		if (ret)
			break;
	}
	spin_unlock(&ctx->members_lock);
	if (ret) {
		nla_nest_cancel(skb, nest);
		return ret;
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int hzc_nl_fill_range(struct sk_buff *skb, struct hzc_range *range,
			     bool priv)
{
	unsigned int nr_acts = READ_ONCE(range->nr_acts);

	if (hzc_nl_put_u64(skb, HZC_NLA_RANGE_ID, range->id) ||
	    hzc_nl_put_owner(skb, range->ctx) ||
	    (priv && hzc_nl_put_u64(skb, HZC_NLA_RANGE_BASE,
				    hzc_range_base(range))) ||
	    hzc_nl_put_u64(skb, HZC_NLA_RANGE_SIZE, hzc_range_size(range)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_RANGE_ACTIVATED_BYTES,
			   READ_ONCE(range->activated_bytes)) ||
	    nla_put_u32(skb, HZC_NLA_RANGE_NR_ACTIVATIONS, nr_acts) ||
	    nla_put_string(skb, HZC_NLA_RANGE_STATE,
			   nr_acts ? "active" : "registered"))
		return -EMSGSIZE;
	return hzc_nl_put_range_domains(skb, range->ctx);
}

static int hzc_nl_fill_act(struct sk_buff *skb, struct hzc_range *range,
			   const struct hzc_activation *act, bool priv)
{
	if (hzc_nl_put_u64(skb, HZC_NLA_RANGE_ID, range->id) ||
	    hzc_nl_put_owner(skb, range->ctx) ||
	    hzc_nl_put_u64(skb, HZC_NLA_ACT_OFFSET,
			   act->node.start - hzc_range_base(range)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_ACT_SIZE,
			   act->node.last - act->node.start + 1) ||
	    (priv && hzc_nl_put_u64(skb, HZC_NLA_ACT_ADDR, act->node.start)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_ACT_COOKIE, act->cookie))
		return -EMSGSIZE;
	return 0;
}

static const char *hzc_nl_domain_state(const struct hzc_domain *dom)
{
	return READ_ONCE(dom->broken) ? "broken" : "live";
}

/* Called with hzc_domains_lock held. */
static int hzc_nl_fill_domain(struct sk_buff *skb, struct hzc_domain *dom,
			      bool priv)
{
	lockdep_assert_held(&hzc_domains_lock);
	if (hzc_nl_put_u64(skb, HZC_NLA_DOMAIN_SEQ, dom->seq) ||
	    (priv && nla_put(skb, HZC_NLA_DOMAIN_ID, sizeof(dom->id), dom->id)) ||
	    nla_put_string(skb, HZC_NLA_DOMAIN_STATE, hzc_nl_domain_state(dom)) ||
	    nla_put_u32(skb, HZC_NLA_DOMAIN_NRANKS, dom->nranks) ||
	    nla_put_u32(skb, HZC_NLA_DOMAIN_JOINED, dom->nr_joined) ||
	    nla_put_u32(skb, HZC_NLA_DOMAIN_CREATOR_UID, hzc_nl_uid(dom->euid)))
		return -EMSGSIZE;
	return 0;
}

/* Called with hzc_domains_lock held. */
static int hzc_nl_fill_member(struct sk_buff *skb, const struct hzc_member *m)
{
	lockdep_assert_held(&hzc_domains_lock);
	if (hzc_nl_put_u64(skb, HZC_NLA_DOMAIN_SEQ, m->dom->seq) ||
	    nla_put_u32(skb, HZC_NLA_MEMBER_RANK, m->rank) ||
	    nla_put_u32(skb, HZC_NLA_PID, m->pid) ||
	    nla_put_u32(skb, HZC_NLA_UID, hzc_nl_uid(m->ctx->uid)))
		return -EMSGSIZE;
	return 0;
}

/* --- requests */

/* A dump's next message header; NULL if the skb is full. */
static void *hzc_nl_dump_put(struct sk_buff *skb, struct netlink_callback *cb,
			     u8 cmd)
{
	return genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			   &hzc_genl_family, NLM_F_MULTI, cmd);
}

/* Close a dump message: kept if @ret is 0, else taken back; returns @ret. */
static int hzc_nl_dump_close(struct sk_buff *skb, void *hdr, int ret)
{
	if (ret)
		genlmsg_cancel(skb, hdr);
	else
		genlmsg_end(skb, hdr);
	return ret;
}

/*
 * End a dumpit() call: what it added is sent; a message that did not fit
 * is sent by the next call, unless it does not fit an empty skb either.
 */
static int hzc_nl_dump_end(struct sk_buff *skb, int ret)
{
	if (ret == -EMSGSIZE && skb->len)
		return skb->len;
	return ret ? ret : skb->len;
}

/* Reject a filter attribute this dump (or doit) does not take. */
static int hzc_nl_reject(struct netlink_ext_ack *extack, struct nlattr **attrs,
			 int type)
{
	if (!attrs || !attrs[type])
		return 0;
	NL_SET_ERR_MSG_ATTR(extack, attrs[type],
			    "attribute not accepted by this request");
	return -EINVAL;
}

static int hzc_nl_dump_start(struct netlink_callback *cb, int key_type,
			     bool take_pid)
{
	struct nlattr **attrs = genl_dumpit_info(cb)->attrs;
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);

	memset(d, 0, sizeof(*d));
	d->who = hzc_nl_who(cb->skb);
	if (attrs && key_type && attrs[key_type]) {
		d->filter_key = true;
		d->filter = nla_get_u64(attrs[key_type]);
		d->key = d->filter;
	}
	if (!take_pid)
		return hzc_nl_reject(cb->extack, attrs, HZC_NLA_PID);
	if (attrs && attrs[HZC_NLA_PID]) {
		d->has_filter_pid = true;
		d->filter_pid = nla_get_u32(attrs[HZC_NLA_PID]);
	}
	return 0;
}

static bool hzc_nl_dump_wants(const struct hzc_nl_dump *d,
			      struct hzc_range *range)
{
	if (!hzc_nl_range_visible(&d->who, range))
		return false;
	return !d->has_filter_pid || pid_nr(range->ctx->tgid) == d->filter_pid;
}

static int hzc_nl_range_start(struct netlink_callback *cb)
{
	int ret;

	ret = hzc_nl_reject(cb->extack, genl_dumpit_info(cb)->attrs,
			    HZC_NLA_RANGE_ID);
	return ret ? ret : hzc_nl_dump_start(cb, 0, true);
}

static int hzc_nl_range_dumpit(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	struct hzc_range *range;
	void *hdr;
	int ret = 0;

	while ((range = hzc_range_get_next(&d->key))) {
		if (hzc_nl_dump_wants(d, range)) {
			hdr = hzc_nl_dump_put(skb, cb, HZC_NL_CMD_RANGE_GET);
			ret = hdr ? hzc_nl_dump_close(skb, hdr,
					hzc_nl_fill_range(skb, range, d->who.priv)) :
				    -EMSGSIZE;
		}
		hzc_range_put(range);
		if (ret)
			break;
		d->key++;
	}
	return hzc_nl_dump_end(skb, ret);
}

/* The activations of @range from address d->key2 on. */
static int hzc_nl_range_acts(struct sk_buff *skb, struct netlink_callback *cb,
			     struct hzc_range *range)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	struct interval_tree_node *node;
	struct hzc_activation *act;
	void *hdr;
	int ret = 0;

	down_read(&range->lock);
	for (node = interval_tree_iter_first(&range->acts, d->key2, ULONG_MAX);
	     node; node = interval_tree_iter_next(node, d->key2, ULONG_MAX)) {
		/* One made after the dump passed its address: skipped. */
		if (node->start < d->key2)
			continue;
		act = container_of(node, struct hzc_activation, node);
		hdr = hzc_nl_dump_put(skb, cb, HZC_NL_CMD_ACTIVATION_GET);
		ret = hdr ? hzc_nl_dump_close(skb, hdr,
				hzc_nl_fill_act(skb, range, act, d->who.priv)) :
			    -EMSGSIZE;
		if (ret)
			break;
		d->key2 = (u64)node->last + 1;
	}
	up_read(&range->lock);
	return ret;
}

static int hzc_nl_act_start(struct netlink_callback *cb)
{
	return hzc_nl_dump_start(cb, HZC_NLA_RANGE_ID, true);
}

static int hzc_nl_act_dumpit(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	u64 paused = d->key;
	struct hzc_range *range;
	int ret = 0;

	while ((range = hzc_range_get_next(&d->key))) {
		if (d->filter_key && d->key != d->filter) {
			hzc_range_put(range);
			break;
		}
		/* The range the last call paused in is gone: this one from its start. */
		if (d->key != paused)
			d->key2 = 0;
		if (hzc_nl_dump_wants(d, range))
			ret = hzc_nl_range_acts(skb, cb, range);
		hzc_range_put(range);
		if (ret)
			break;
		d->key++;
		d->key2 = 0;
	}
	return hzc_nl_dump_end(skb, ret);
}

static int hzc_nl_domain_start(struct netlink_callback *cb)
{
	int ret;

	ret = hzc_nl_reject(cb->extack, genl_dumpit_info(cb)->attrs,
			    HZC_NLA_DOMAIN_SEQ);
	return ret ? ret : hzc_nl_dump_start(cb, 0, false);
}

static int hzc_nl_domain_dumpit(struct sk_buff *skb,
				struct netlink_callback *cb)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	struct hzc_domain *dom;
	void *hdr;
	int ret = 0;

	while ((dom = hzc_domain_get_next(&d->key))) {
		mutex_lock(&hzc_domains_lock);
		if (hzc_nl_domain_visible(&d->who, dom)) {
			hdr = hzc_nl_dump_put(skb, cb, HZC_NL_CMD_DOMAIN_GET);
			ret = hdr ? hzc_nl_dump_close(skb, hdr,
					hzc_nl_fill_domain(skb, dom, d->who.priv)) :
				    -EMSGSIZE;
		}
		mutex_unlock(&hzc_domains_lock);
		hzc_domain_put(dom);
		if (ret)
			break;
		d->key++;
	}
	return hzc_nl_dump_end(skb, ret);
}

/* The members of @dom from rank d->key2 on.  hzc_domains_lock held. */
static int hzc_nl_domain_members(struct sk_buff *skb,
				 struct netlink_callback *cb,
				 struct hzc_domain *dom)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	void *hdr;
	int ret;

	for (; d->key2 < dom->nranks; d->key2++) {
		if (!dom->members[d->key2])
			continue;
		hdr = hzc_nl_dump_put(skb, cb, HZC_NL_CMD_MEMBER_GET);
		if (!hdr)
			return -EMSGSIZE;
		ret = hzc_nl_dump_close(skb, hdr,
					hzc_nl_fill_member(skb,
							   dom->members[d->key2]));
		if (ret)
			return ret;
	}
	return 0;
}

static int hzc_nl_member_start(struct netlink_callback *cb)
{
	return hzc_nl_dump_start(cb, HZC_NLA_DOMAIN_SEQ, false);
}

static int hzc_nl_member_dumpit(struct sk_buff *skb,
				struct netlink_callback *cb)
{
	struct hzc_nl_dump *d = hzc_nl_dump_ctx(cb);
	u64 paused = d->key;
	struct hzc_domain *dom;
	int ret = 0;

	while ((dom = hzc_domain_get_next(&d->key))) {
		if (d->filter_key && d->key != d->filter) {
			hzc_domain_put(dom);
			break;
		}
		/* The domain the last call paused in is gone: this one from rank 0. */
		if (d->key != paused)
			d->key2 = 0;
		mutex_lock(&hzc_domains_lock);
		if (hzc_nl_domain_visible(&d->who, dom))
			ret = hzc_nl_domain_members(skb, cb, dom);
		mutex_unlock(&hzc_domains_lock);
		hzc_domain_put(dom);
		if (ret)
			break;
		d->key++;
		d->key2 = 0;
	}
	return hzc_nl_dump_end(skb, ret);
}

/* A doit's reply: a message of @cmd filled by @fill, or an errno. */
static int hzc_nl_reply(struct genl_info *info, u8 cmd,
			int (*fill)(struct sk_buff *skb, void *obj, bool priv),
			void *obj, bool priv)
{
	struct sk_buff *msg;
	void *hdr;
	int ret;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &hzc_genl_family, 0, cmd);
	if (!hdr) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	ret = fill(msg, obj, priv);
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static int hzc_nl_fill_stat(struct sk_buff *skb, void *obj, bool priv)
{
	if (nla_put_u32(skb, HZC_NLA_ABI_VERSION, HZC_ABI_VERSION) ||
	    hzc_nl_put_u64(skb, HZC_NLA_STAT_NR_CONTEXTS,
			   atomic64_read(&hzc_stats.nr_contexts)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_STAT_NR_RANGES,
			   atomic64_read(&hzc_stats.nr_ranges)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_STAT_NR_ACTIVATIONS,
			   atomic64_read(&hzc_stats.nr_activations)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_STAT_NR_DOMAINS,
			   atomic64_read(&hzc_stats.nr_domains)) ||
	    hzc_nl_put_u64(skb, HZC_NLA_STAT_PINNED_BYTES,
			   atomic64_read(&hzc_stats.pinned_bytes)))
		return -EMSGSIZE;
	return 0;
}

static int hzc_nl_stat_doit(struct sk_buff *skb, struct genl_info *info)
{
	return hzc_nl_reply(info, HZC_NL_CMD_STAT_GET, hzc_nl_fill_stat, NULL,
			    false);
}

static int hzc_nl_fill_range_obj(struct sk_buff *skb, void *obj, bool priv)
{
	return hzc_nl_fill_range(skb, obj, priv);
}

static int hzc_nl_range_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct hzc_nl_who who = hzc_nl_who(skb);
	struct hzc_range *range;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, HZC_NLA_RANGE_ID))
		return -EINVAL;
	ret = hzc_nl_reject(info->extack, info->attrs, HZC_NLA_PID);
	if (ret)
		return ret;
	range = hzc_range_get_by_id(nla_get_u64(info->attrs[HZC_NLA_RANGE_ID]));
	if (!range)
		return -ENOENT;
	if (hzc_nl_range_visible(&who, range))
		ret = hzc_nl_reply(info, HZC_NL_CMD_RANGE_GET,
				   hzc_nl_fill_range_obj, range, who.priv);
	else
		ret = -ENOENT;
	hzc_range_put(range);
	return ret;
}

/* The message is made before hzc_domains_lock and sent after it. */
static int hzc_nl_domain_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct hzc_nl_who who = hzc_nl_who(skb);
	struct hzc_domain *dom;
	struct sk_buff *msg;
	u64 want, seq;
	void *hdr;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, HZC_NLA_DOMAIN_SEQ))
		return -EINVAL;
	want = nla_get_u64(info->attrs[HZC_NLA_DOMAIN_SEQ]);
	seq = want;
	dom = hzc_domain_get_next(&seq);
	if (!dom)
		return -ENOENT;
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	hdr = msg ? genlmsg_put_reply(msg, info, &hzc_genl_family, 0,
				      HZC_NL_CMD_DOMAIN_GET) : NULL;
	ret = !msg ? -ENOMEM : !hdr ? -EMSGSIZE : -ENOENT;
	if (hdr) {
		mutex_lock(&hzc_domains_lock);
		if (dom->seq == want && hzc_nl_domain_visible(&who, dom))
			ret = hzc_nl_fill_domain(msg, dom, who.priv);
		mutex_unlock(&hzc_domains_lock);
	}
	hzc_domain_put(dom);
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static const struct nla_policy hzc_nl_stat_policy[HZC_NLA_MAX + 1] = {};

static const struct nla_policy hzc_nl_range_policy[HZC_NLA_MAX + 1] = {
	[HZC_NLA_RANGE_ID] = { .type = NLA_U64 },
	[HZC_NLA_PID] = { .type = NLA_U32 },
};

static const struct nla_policy hzc_nl_act_policy[HZC_NLA_MAX + 1] = {
	[HZC_NLA_RANGE_ID] = { .type = NLA_U64 },
	[HZC_NLA_PID] = { .type = NLA_U32 },
};

static const struct nla_policy hzc_nl_domain_policy[HZC_NLA_MAX + 1] = {
	[HZC_NLA_DOMAIN_SEQ] = { .type = NLA_U64 },
};

static const struct genl_ops hzc_nl_ops[] = {
	{
		.cmd = HZC_NL_CMD_STAT_GET,
		.doit = hzc_nl_stat_doit,
		.policy = hzc_nl_stat_policy,
		.maxattr = HZC_NLA_MAX,
	},
	{
		.cmd = HZC_NL_CMD_RANGE_GET,
		.doit = hzc_nl_range_doit,
		.start = hzc_nl_range_start,
		.dumpit = hzc_nl_range_dumpit,
		.policy = hzc_nl_range_policy,
		.maxattr = HZC_NLA_MAX,
	},
	{
		.cmd = HZC_NL_CMD_ACTIVATION_GET,
		.start = hzc_nl_act_start,
		.dumpit = hzc_nl_act_dumpit,
		.policy = hzc_nl_act_policy,
		.maxattr = HZC_NLA_MAX,
	},
	{
		.cmd = HZC_NL_CMD_DOMAIN_GET,
		.doit = hzc_nl_domain_doit,
		.start = hzc_nl_domain_start,
		.dumpit = hzc_nl_domain_dumpit,
		.policy = hzc_nl_domain_policy,
		.maxattr = HZC_NLA_MAX,
	},
	{
		.cmd = HZC_NL_CMD_MEMBER_GET,
		.start = hzc_nl_member_start,
		.dumpit = hzc_nl_member_dumpit,
		.policy = hzc_nl_domain_policy,
		.maxattr = HZC_NLA_MAX,
	},
};

/* An event names objects of every user. */
static const struct genl_multicast_group hzc_nl_mcgrps[] = {
	[HZC_NL_GRP_EVENTS] = {
		.name = HZC_GENL_MCGRP_EVENTS,
		.flags = GENL_MCAST_CAP_SYS_ADMIN,
	},
};

static struct genl_family hzc_genl_family __ro_after_init = {
	.name = HZC_GENL_NAME,
	.version = HZC_GENL_VERSION,
	.maxattr = HZC_NLA_MAX,
	.netnsok = false,
	.parallel_ops = true,
	.module = THIS_MODULE,
	.ops = hzc_nl_ops,
	.n_ops = ARRAY_SIZE(hzc_nl_ops),
	.resv_start_op = HZC_NL_CMD_MEMBER_GET + 1,
	.mcgrps = hzc_nl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(hzc_nl_mcgrps),
};

/* --- events */

static void hzc_nl_event_lost(void)
{
	mutex_lock(&hzc_events_lock);
	hzc_event_seq++;
	mutex_unlock(&hzc_events_lock);
}

/* A new event message, or NULL: nobody listens, or it was dropped. */
static struct sk_buff *hzc_nl_event_new(u8 cmd, void **hdr)
{
	struct sk_buff *skb;

	if (!genl_has_listeners(&hzc_genl_family, &init_net, HZC_NL_GRP_EVENTS))
		return NULL;
	skb = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!skb) {
		hzc_nl_event_lost();
		return NULL;
	}
	*hdr = genlmsg_put(skb, 0, 0, &hzc_genl_family, 0, cmd);
	if (!*hdr) {
		nlmsg_free(skb);
		hzc_nl_event_lost();
		return NULL;
	}
	return skb;
}

/* Number @skb and send it, or drop it if building it failed (@ret). */
static void hzc_nl_event_send(struct sk_buff *skb, void *hdr, int ret)
{
	mutex_lock(&hzc_events_lock);
	hzc_event_seq++;
	if (!ret)
		ret = hzc_nl_put_u64(skb, HZC_NLA_EVENT_SEQ, hzc_event_seq);
	if (ret) {
		nlmsg_free(skb);
	} else {
		genlmsg_end(skb, hdr);
		genlmsg_multicast(&hzc_genl_family, skb, 0, HZC_NL_GRP_EVENTS,
				  GFP_KERNEL);
	}
	mutex_unlock(&hzc_events_lock);
}

void hzc_nl_event_range(u8 cmd, struct hzc_range *range)
{
	struct sk_buff *skb;
	void *hdr;

	skb = hzc_nl_event_new(cmd, &hdr);
	if (skb)
		hzc_nl_event_send(skb, hdr, hzc_nl_fill_range(skb, range, true));
}

void hzc_nl_event_act(u8 cmd, struct hzc_range *range,
		      const struct hzc_activation *act)
{
	struct sk_buff *skb;
	void *hdr;

	skb = hzc_nl_event_new(cmd, &hdr);
	if (skb)
		hzc_nl_event_send(skb, hdr,
				  hzc_nl_fill_act(skb, range, act, true));
}

/* Called with hzc_domains_lock held; with the domain's state after it. */
void hzc_nl_note_member(struct hzc_nl_member_note *note, u8 cmd,
			const struct hzc_member *m)
{
	lockdep_assert_held(&hzc_domains_lock);
	note->cmd = cmd;
	note->rank = m->rank;
	note->pid = m->pid;
	note->uid = hzc_nl_uid(m->ctx->uid);
	note->seq = m->dom->seq;
	note->state = hzc_nl_domain_state(m->dom);
}

/* Called without hzc_domains_lock: nothing is allocated or sent under it. */
void hzc_nl_event_member(const struct hzc_nl_member_note *note)
{
	struct sk_buff *skb;
	void *hdr;
	int ret = -EMSGSIZE;

	if (!note->cmd)
		return;
	skb = hzc_nl_event_new(note->cmd, &hdr);
	if (!skb)
		return;
	if (!hzc_nl_put_u64(skb, HZC_NLA_DOMAIN_SEQ, note->seq) &&
	    !nla_put_u32(skb, HZC_NLA_MEMBER_RANK, note->rank) &&
	    !nla_put_u32(skb, HZC_NLA_PID, note->pid) &&
	    !nla_put_u32(skb, HZC_NLA_UID, note->uid) &&
	    !nla_put_string(skb, HZC_NLA_DOMAIN_STATE, note->state))
		ret = 0;
	hzc_nl_event_send(skb, hdr, ret);
}

void hzc_nl_event_ctx_release(struct hzc_ctx *ctx)
{
	struct sk_buff *skb;
	void *hdr;

	skb = hzc_nl_event_new(HZC_NL_CMD_EVENT_CONTEXT_RELEASE, &hdr);
	if (skb)
		hzc_nl_event_send(skb, hdr, hzc_nl_put_owner(skb, ctx));
}

int __init hzc_nl_init(void)
{
	return genl_register_family(&hzc_genl_family);
}

void hzc_nl_exit(void)
{
	genl_unregister_family(&hzc_genl_family);
}
