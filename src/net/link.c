/*
 * link.c - rtnetlink requests for a sandbox's veth pair, addresses and
 * routes, over libmnl. One request at a time per socket, each waited for
 * until its ACK; see link.h.
 */
#include "net/link.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "util/cleanup.h"
#include "util/fd.h"

struct net_link {
    struct mnl_socket *nl;
    uint32_t portid;
    uint32_t seq;
    /* Replies land here: a dump's datagrams are at most this big. */
    _Alignas(struct nlmsghdr) char buf[32768];
};

/* A request: the few attributes we send fit easily. */
#define REQ_SIZE 1024
struct req {
    _Alignas(struct nlmsghdr) char b[REQ_SIZE];
};

struct open_ns {
    int nsfd;
    struct mnl_socket *nl;
    int errnum;
};

/* Runs on a thread of its own: it enters the namespace, opens the socket
 * (which stays in that namespace for good) and ends; the caller's thread
 * never changes namespace. */
static void *
open_in_ns(void *p)
{
    struct open_ns *o = p;
    if (setns(o->nsfd, CLONE_NEWNET) < 0) {
        o->errnum = errno;
        return NULL;
    }
    o->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!o->nl)
        o->errnum = errno;
    return NULL;
}

struct net_link *
net_link_free(struct net_link *l)
{
    if (l) {
        if (l->nl)
            (void)mnl_socket_close(l->nl);
        free(l);
    }
    return NULL;
}

int
net_link_open(int netns_fd, struct net_link **ret, struct err *err)
{
    _cleanup_(net_link_freep) struct net_link *l = NULL;

    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    if (netns_fd < 0) {
        l->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!l->nl)
            return err_setx(err, errno, "cannot open an rtnetlink socket");
    } else {
        struct open_ns o = {.nsfd = netns_fd};
        pthread_t t;
        int r = pthread_create(&t, NULL, open_in_ns, &o);
        if (r != 0)
            return err_setx(err, r, "cannot start a thread to enter a network namespace");
        (void)pthread_join(t, NULL);
        if (!o.nl)
            return err_setx(err, o.errnum, "cannot open an rtnetlink socket in namespace fd %d",
                            netns_fd);
        l->nl = o.nl;
    }
    int one = 1;
    struct timeval tv = {.tv_sec = NET_LINK_TIMEOUT_MS / 1000,
                         .tv_usec = (NET_LINK_TIMEOUT_MS % 1000) * 1000};
    int fd = mnl_socket_get_fd(l->nl);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
        return err_setx(err, errno, "cannot set a timeout on the rtnetlink socket");
    /* Extended ACKs carry the kernel's reason ("Nexthop has invalid
     * gateway"); capped ACKs leave our request out of them. Both are
     * best-effort: old kernels reply without. */
    (void)mnl_socket_setsockopt(l->nl, NETLINK_EXT_ACK, &one, sizeof(one));
    (void)mnl_socket_setsockopt(l->nl, NETLINK_CAP_ACK, &one, sizeof(one));
    if (mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0)
        return err_setx(err, errno, "cannot bind the rtnetlink socket");
    l->portid = mnl_socket_get_portid(l->nl);
    *ret = TAKE_PTR(l);
    return 0;
}

/* The kernel's message in an extended ACK, or NULL. */
static const char *
ack_message(const struct nlmsghdr *h)
{
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
    if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
        return NULL;
    size_t off = sizeof(*e);
    if (!(h->nlmsg_flags & NLM_F_CAPPED))
        off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
    off = MNL_ALIGN(off);
    size_t payload = mnl_nlmsg_get_payload_len(h);
    if (off >= payload)
        return NULL;
    const struct nlattr *a = (const struct nlattr *)((const char *)e + off);
    int left = (int)(payload - off);
    for (; mnl_attr_ok(a, left); a = mnl_attr_next(a)) {
        left -= (int)MNL_ALIGN(a->nla_len);
        if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG &&
            mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
            return mnl_attr_get_str(a);
    }
    return NULL;
}

typedef int (*reply_fn)(const struct nlmsghdr *h, void *data);

/* Sends nlh and reads until its ACK (or a dump's end), handing every
 * other reply to cb. Replies to an earlier request that timed out are
 * skipped by their sequence number. */
static int
talk(struct net_link *l, struct nlmsghdr *nlh, reply_fn cb, void *data, const char *what,
     struct err *err)
{
    uint32_t seq = ++l->seq;
    unsigned msgs = 0;

    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
        return err_setx(err, errno, "%s: cannot send the request", what);
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(l->nl, l->buf, sizeof(l->buf));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return err_set(err, ETIMEDOUT, "%s: no answer from the kernel in %u ms", what,
                               NET_LINK_TIMEOUT_MS);
            return err_setx(err, errno, "%s: cannot read the answer", what);
        }
        size_t len = (size_t)n;
        for (const struct nlmsghdr *h = (const void *)l->buf; mnl_nlmsg_ok(h, (int)len);
             h = mnl_nlmsg_next(h, (int *)&len)) {
            if (h->nlmsg_seq != seq || h->nlmsg_pid != l->portid)
                continue;
            if (++msgs > NET_LINK_DUMP_MAX)
                return err_set(err, E2BIG, "%s: more than %u messages in the answer", what,
                               NET_LINK_DUMP_MAX);
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                if (h->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
                    return err_set(err, EBADMSG, "%s: a truncated answer", what);
                if (e->error == 0)
                    return 0;
                const char *why = ack_message(h);
                if (why)
                    return err_setx(err, -e->error, "%s (%s)", what, why);
                return err_setx(err, -e->error, "%s", what);
            }
            if (h->nlmsg_type == NLMSG_DONE)
                return 0;
            if (cb) {
                int r = cb(h, data);
                if (r < 0)
                    return err_setx(err, -r, "%s", what);
            }
        }
    }
}

static struct nlmsghdr *
req_link(struct req *q, uint16_t type, uint16_t flags, const char *name)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(q->b);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
    ifi->ifi_family = AF_UNSPEC;
    if (name)
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    return nlh;
}

static int
check_name(const char *name, struct err *err)
{
    assert(name);
    if (!net_ifname_valid(name))
        return err_set(err, EINVAL, "'%.32s' is no interface name of ours ([a-z0-9]{1,15})", name);
    return 0;
}

static int
index_reply(const struct nlmsghdr *h, void *data)
{
    if (h->nlmsg_type == RTM_NEWLINK && mnl_nlmsg_get_payload_len(h) >= sizeof(struct ifinfomsg)) {
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(h);
        *(int *)data = ifi->ifi_index;
    }
    return 0;
}

int
net_link_index(struct net_link *l, const char *name, int *ret_index, struct err *err)
{
    struct req q;
    char what[64];
    int idx = 0;
    int r = check_name(name, err);
    if (r < 0)
        return r;
    (void)snprintf(what, sizeof(what), "cannot find link '%s'", name);
    r = talk(l, req_link(&q, RTM_GETLINK, 0, name), index_reply, &idx, what, err);
    if (r < 0)
        return r;
    if (idx <= 0)
        return err_set(err, ENODEV, "%s: no index in the answer", what);
    *ret_index = idx;
    return 0;
}

int
net_link_veth_add(struct net_link *l, const char *name, const char *peer, int peer_netns_fd,
                  struct err *err)
{
    struct req q;
    char what[96];
    int r = check_name(name, err);
    if (r < 0)
        return r;
    r = check_name(peer, err);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = req_link(&q, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, name);
    struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr *pinfo = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifi));
    pifi->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
    if (peer_netns_fd >= 0)
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
    mnl_attr_nest_end(nlh, pinfo);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, linkinfo);
    (void)snprintf(what, sizeof(what), "cannot create veth pair '%s'/'%s'", name, peer);
    return talk(l, nlh, NULL, NULL, what, err);
}

int
net_link_move(struct net_link *l, const char *name, int netns_fd, struct err *err)
{
    struct req q;
    char what[64];
    int r = check_name(name, err);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = req_link(&q, RTM_NEWLINK, 0, name);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
    (void)snprintf(what, sizeof(what), "cannot move link '%s' to another namespace", name);
    return talk(l, nlh, NULL, NULL, what, err);
}

int
net_link_up(struct net_link *l, const char *name, struct err *err)
{
    struct req q;
    char what[64];
    int r = check_name(name, err);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = req_link(&q, RTM_NEWLINK, 0, name);
    struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
    ifi->ifi_flags = IFF_UP;
    ifi->ifi_change = IFF_UP;
    (void)snprintf(what, sizeof(what), "cannot bring link '%s' up", name);
    return talk(l, nlh, NULL, NULL, what, err);
}

static int
ip_len(const struct net_ip *ip, unsigned prefix, struct err *err)
{
    if (ip->family == AF_INET && prefix <= 32)
        return 4;
    if (ip->family == AF_INET6 && prefix <= 128)
        return 16;
    return err_set(err, EINVAL, "not an IPv4 or IPv6 address with a prefix of its family");
}

int
net_link_addr_add(struct net_link *l, const char *name, const struct net_ip *ip, unsigned prefix,
                  struct err *err)
{
    struct req q;
    char what[112], s[NET_IP_STR];
    int idx = 0;
    int len = ip_len(ip, prefix, err);
    if (len < 0)
        return len;
    int r = net_link_index(l, name, &idx, err);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(q.b);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = (uint8_t)ip->family;
    ifa->ifa_prefixlen = (uint8_t)prefix;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (unsigned)idx;
    mnl_attr_put(nlh, IFA_LOCAL, (size_t)len, ip->bytes);
    mnl_attr_put(nlh, IFA_ADDRESS, (size_t)len, ip->bytes);
    if (ip->family == AF_INET6)
        mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
    (void)net_ip_format(ip, s);
    (void)snprintf(what, sizeof(what), "cannot add address %s/%u to link '%s'", s, prefix, name);
    return talk(l, nlh, NULL, NULL, what, err);
}

int
net_link_route_add(struct net_link *l, const char *name, const struct net_block *dst,
                   const struct net_ip *gw, struct err *err)
{
    struct req q;
    char what[160], s[NET_IP_STR], d[NET_BLOCK_STR];
    int idx = 0;
    int len = ip_len(gw, dst->prefix, err);
    if (len < 0)
        return len;
    int r = net_block_check(dst, err);
    if (r < 0)
        return r;
    if (dst->ip.family != gw->family)
        return err_set(err, EINVAL, "a route's gateway must be of its destination's family");
    r = net_link_index(l, name, &idx, err);
    if (r < 0)
        return r;
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(q.b);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = (uint8_t)gw->family;
    rtm->rtm_dst_len = dst->prefix;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_STATIC;
    rtm->rtm_scope = RT_SCOPE_UNIVERSE;
    rtm->rtm_type = RTN_UNICAST;
    if (dst->prefix > 0)
        mnl_attr_put(nlh, RTA_DST, (size_t)len, dst->ip.bytes);
    mnl_attr_put(nlh, RTA_GATEWAY, (size_t)len, gw->bytes);
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)idx);
    (void)net_ip_format(gw, s);
    (void)net_block_format(dst, d);
    (void)snprintf(what, sizeof(what), "cannot add the route to %s via %s on '%s'", d, s, name);
    return talk(l, nlh, NULL, NULL, what, err);
}

int
net_link_route_default(struct net_link *l, const char *name, const struct net_ip *gw,
                       struct err *err)
{
    struct net_block any = {.ip = {.family = gw->family}, .prefix = 0};
    return net_link_route_add(l, name, &any, gw, err);
}

int
net_link_del(struct net_link *l, const char *name, struct err *err)
{
    struct req q;
    char what[64];
    int r = check_name(name, err);
    if (r < 0)
        return r;
    (void)snprintf(what, sizeof(what), "cannot delete link '%s'", name);
    return talk(l, req_link(&q, RTM_DELLINK, 0, name), NULL, NULL, what, err);
}

struct list_ctx {
    const char *prefix;
    size_t plen;
    char (*names)[IFNAMSIZ];
    size_t max;
    size_t n;
};

static int
list_reply(const struct nlmsghdr *h, void *data)
{
    struct list_ctx *c = data;
    struct nlattr *a; /* not const: libmnl's mnl_attr_for_each casts it to char * */
    if (h->nlmsg_type != RTM_NEWLINK)
        return 0;
    mnl_attr_for_each(a, h, sizeof(struct ifinfomsg))
    {
        if (mnl_attr_get_type(a) != IFLA_IFNAME || mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
            continue;
        const char *name = mnl_attr_get_str(a);
        if (strncmp(name, c->prefix, c->plen) != 0 || strlen(name) >= IFNAMSIZ)
            continue;
        if (c->n < c->max)
            memcpy(c->names[c->n], name, strlen(name) + 1);
        c->n++;
    }
    return 0;
}

int
net_link_list(struct net_link *l, const char *prefix, char (*names)[IFNAMSIZ], size_t max,
              struct err *err)
{
    struct req q;
    struct list_ctx c = {.prefix = prefix, .plen = strlen(prefix), .names = names, .max = max};
    if (c.plen == 0 || c.plen > NET_IFNAME_MAX)
        return err_set(err, EINVAL, "a link name prefix is 1 to %d bytes", NET_IFNAME_MAX);
    int r = talk(l, req_link(&q, RTM_GETLINK, NLM_F_DUMP, NULL), list_reply, &c,
                 "cannot list links", err);
    if (r < 0)
        return r;
    if (c.n > max)
        return err_set(err, E2BIG, "%zu links start with '%s', more than %zu", c.n, prefix, max);
    return (int)c.n;
}

int
net_link_sandbox_up(struct net_link *host, const struct net_link_sandbox *sb, struct err *err)
{
    _cleanup_(net_link_freep) struct net_link *in = NULL;
    const struct net_slot *s = sb->slot;
    int r;

    if (sb->netns_fd < 0)
        return err_set(err, EBADF, "no network namespace for link '%s'", sb->host_ifname);
    r = net_link_veth_add(host, sb->host_ifname, sb->sandbox_ifname, sb->netns_fd, err);
    if (r < 0)
        return r;
    r = net_link_addr_add(host, sb->host_ifname, &s->gw4, s->prefix4, err);
    if (r < 0)
        goto undo;
    if (s->has6) {
        r = net_link_addr_add(host, sb->host_ifname, &s->gw6, s->prefix6, err);
        if (r < 0)
            goto undo;
    }
    r = net_link_up(host, sb->host_ifname, err);
    if (r < 0)
        goto undo;

    r = net_link_open(sb->netns_fd, &in, err);
    if (r < 0)
        goto undo;
    r = net_link_up(in, "lo", err);
    if (r < 0)
        goto undo;
    r = net_link_addr_add(in, sb->sandbox_ifname, &s->sb4, s->prefix4, err);
    if (r < 0)
        goto undo;
    if (s->has6) {
        r = net_link_addr_add(in, sb->sandbox_ifname, &s->sb6, s->prefix6, err);
        if (r < 0)
            goto undo;
    }
    /* Up before the routes: the gateway must be on a link that is up. */
    r = net_link_up(in, sb->sandbox_ifname, err);
    if (r < 0)
        goto undo;
    r = net_link_route_default(in, sb->sandbox_ifname, &s->gw4, err);
    if (r < 0)
        goto undo;
    if (s->has6) {
        r = net_link_route_default(in, sb->sandbox_ifname, &s->gw6, err);
        if (r < 0)
            goto undo;
    }
    return 0;

undo:
    (void)net_link_del(host, sb->host_ifname, NULL);
    return r;
}

int
net_link_sandbox_down(struct net_link *host, const char *host_ifname, struct err *err)
{
    return net_link_del(host, host_ifname, err);
}

#define RECLAIM_BATCH 256u /* links listed per round of net_link_reclaim() */

int
net_link_reclaim(struct net_link *host, const char *prefix, struct err *err)
{
    _cleanup_free_ char(*names)[IFNAMSIZ] = NULL;
    int total = 0;

    names = calloc(RECLAIM_BATCH, sizeof(*names));
    if (!names)
        return -ENOMEM;
    /* Deleting one end of a veth deletes the other, which may be on our
     * list too: -ENODEV for it is fine. Rounds until none is left, as
     * many as NET_POOL_SLOTS_MAX pairs could need. */
    for (unsigned round = 0; round <= 2 * NET_POOL_SLOTS_MAX / RECLAIM_BATCH; round++) {
        struct err e = {0};
        int n = net_link_list(host, prefix, names, RECLAIM_BATCH, &e);
        if (n == -E2BIG)
            n = (int)RECLAIM_BATCH; /* the first batch is filled in */
        else if (n < 0)
            return err_set(err, e.errnum, "%s", e.msg);
        if (n == 0)
            return total;
        for (int i = 0; i < n; i++) {
            err_clear(&e);
            int r = net_link_del(host, names[i], &e);
            if (r == 0)
                total++;
            else if (r != -ENODEV)
                return err_set(err, e.errnum, "%s", e.msg);
        }
    }
    return err_set(err, ELOOP, "links starting with '%s' keep coming back", prefix);
}

int
net_link_forwarding_on(bool ipv6, struct err *err)
{
    int r = write_existing_at(AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", "1");
    if (r < 0)
        return err_setx(err, -r, "cannot turn on IPv4 forwarding");
    if (ipv6) {
        r = write_existing_at(AT_FDCWD, "/proc/sys/net/ipv6/conf/all/forwarding", "1");
        if (r < 0)
            return err_setx(err, -r, "cannot turn on IPv6 forwarding");
    }
    return 0;
}
