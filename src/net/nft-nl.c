/*
 * nft-nl.c - the hot path's transactions as netlink batches built with
 * libnftnl: a sandbox's chains and map entries added and removed, its
 * lists replaced, its redirect rewritten; the bytecode libnftables makes
 * of nft.c's text for the same call, written out.
 *
 * Why not the text: before running any command libnftables fills its
 * cache from the kernel, and for these commands that means the elements
 * of every set, one dump request per set, each of which the kernel finds
 * by a linear scan of the table's sets: with 1,000 sandboxes an add took
 * ~0.6 s. Nothing here reads the kernel's state; the kernel checks what
 * it must (names exist or not) and the batch is all or nothing. Only the
 * table's set-up and the operator's allowed ranges stay text.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/nft-internal.h"
#include "util/cleanup.h"
#include "util/parse.h"

/* nftables' datatype numbers (src/datatype.h), which the kernel keeps for
 * listing only. */
#define TYPE_IPADDR  7
#define TYPE_IP6ADDR 8

#define CT_ESTABLISHED_RELATED 0x6u /* NF_CT_STATE_BIT(ESTABLISHED) | ..(RELATED) */
#define CT_INVALID             0x1u
#define CT_STATUS_DNAT         0x20u /* IPS_DST_NAT */
/* Set elements (at most 40 bytes each) in one message: the nest holding
 * them has a 16-bit length. */
#define ELEMS_PER_MSG 512u

/* One batch being built: the buffer, its messages' sequence numbers and
 * the first failure (a full buffer, an allocation). */
struct batch {
    struct mnl_nlmsg_batch *b;
    uint32_t *seq;
    uint32_t first_seq, last_seq;
    uint32_t set_id; /* sets made so far: the last one's id */
    int r;
};

int
net_nft_nl_open(struct mnl_socket **ret, struct err *err)
{
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (!nl)
        return err_set(err, errno, "cannot open a netfilter netlink socket");
    if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = errno;
        (void)mnl_socket_close(nl);
        return err_set(err, r, "cannot bind a netfilter netlink socket");
    }
    /* A failed message's answer without the message (a list's can be tens
     * of KiB, past our read buffer), and room to send a lists batch in one
     * sendmsg(): the default send buffer (~208 KiB) is smaller. FORCE
     * needs CAP_NET_ADMIN, which nftables needs too; without it the plain
     * option gets what net.core.wmem_max allows. */
    int one = 1, size = (int)NET_NFT_NL_BATCH_MAX, rsize = (int)NET_NFT_NL_ACKS_MAX;
    int fd = mnl_socket_get_fd(nl);
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    /* Every message's ack is queued before we read one, each counted at
     * its skb's size (~1 KiB): an overflow would lose the answers of a
     * batch the kernel committed. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rsize, sizeof(rsize)) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rsize, sizeof(rsize));
    *ret = nl;
    return 0;
}

static char *
batch_next(struct batch *t)
{
    if (t->r < 0)
        return NULL;
    return mnl_nlmsg_batch_current(t->b);
}

static void
batch_done(struct batch *t)
{
    if (t->r >= 0 && !mnl_nlmsg_batch_next(t->b))
        t->r = -EMSGSIZE;
}

/* The header of one message of the batch, with an ack asked for (the
 * kernel then answers every message, so a failure names its sequence). */
static struct nlmsghdr *
batch_msg(struct batch *t, uint16_t type, uint16_t flags)
{
    char *p = batch_next(t);
    if (!p)
        return NULL;
    t->last_seq = (*t->seq)++;
    return nftnl_nlmsg_build_hdr(p, type, NFPROTO_INET, flags | NLM_F_ACK, t->last_seq);
}

static void
put_chain(struct batch *t, uint16_t type, uint16_t flags, const char *prefix, const char *x)
{
    char name[NET_IFNAME_MAX + 8];
    struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c) {
        t->r = -ENOMEM;
        return;
    }
    (void)snprintf(name, sizeof(name), "%s_%s", prefix, x);
    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NET_NFT_TABLE);
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
    struct nlmsghdr *h = batch_msg(t, type, flags);
    if (h) {
        nftnl_chain_nlmsg_build_payload(h, c);
        batch_done(t);
    }
    nftnl_chain_free(c);
}

/* A set by name, for its elements' messages or its deletion. */
static struct nftnl_set *
set_new(const char *name)
{
    struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return NULL;
    nftnl_set_set_str(s, NFTNL_SET_TABLE, NET_NFT_TABLE);
    nftnl_set_set_str(s, NFTNL_SET_NAME, name);
    nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    return s;
}

static void
put_set(struct batch *t, uint16_t type, uint16_t flags, struct nftnl_set *s)
{
    struct nlmsghdr *h = batch_msg(t, type, flags);
    if (h) {
        nftnl_set_nlmsg_build_payload(h, s);
        batch_done(t);
    }
}

/* A sandbox's list set X_suffix (a4, a6, d4, d6): made (NFT_MSG_NEWSET,
 * interval, of addresses of family) or deleted (NFT_MSG_DELSET). */
static void
put_list_set(struct batch *t, uint16_t type, const char *x, const char *suffix, int family)
{
    char name[NET_IFNAME_MAX + 8];
    (void)snprintf(name, sizeof(name), "%s_%s", x, suffix);
    struct nftnl_set *s = set_new(name);
    if (!s) {
        t->r = -ENOMEM;
        return;
    }
    if (type == NFT_MSG_NEWSET) {
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, family == AF_INET ? TYPE_IPADDR : TYPE_IP6ADDR);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, family == AF_INET ? 4 : 16);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL);
        /* The kernel wants an id on every new set, named or not. */
        nftnl_set_set_u32(s, NFTNL_SET_ID, ++t->set_id);
    }
    put_set(t, type, type == NFT_MSG_NEWSET ? NLM_F_CREATE : 0, s);
    nftnl_set_free(s);
}

static void
put_elems(struct batch *t, uint16_t type, uint16_t flags, struct nftnl_set *s)
{
    struct nlmsghdr *h = batch_msg(t, type, flags);
    if (h) {
        nftnl_set_elems_nlmsg_build_payload(h, s);
        batch_done(t);
    }
}

/* A rule being built: expressions appended in order, a failed
 * allocation remembered and reported once by put_rule(). */
struct rule {
    struct nftnl_rule *r;
    bool oom;
};

static void
add_expr(struct rule *u, struct nftnl_expr *e)
{
    if (!e)
        u->oom = true;
    else
        nftnl_rule_add_expr(u->r, e);
}

static void
e_meta(struct rule *u, uint32_t key)
{
    struct nftnl_expr *e = nftnl_expr_alloc("meta");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
    }
    add_expr(u, e);
}

/* Loads into dreg (no match on it yet). */
static void
e_payload_to(struct rule *u, uint32_t dreg, uint32_t base, uint32_t offset, uint32_t len)
{
    struct nftnl_expr *e = nftnl_expr_alloc("payload");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    }
    add_expr(u, e);
}

static void
e_cmp(struct rule *u, uint32_t op, const void *data, uint32_t len)
{
    struct nftnl_expr *e = nftnl_expr_alloc("cmp");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
        nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
    }
    add_expr(u, e);
}

static void
e_payload(struct rule *u, uint32_t base, uint32_t offset, uint32_t len)
{
    e_payload_to(u, NFT_REG_1, base, offset, len);
}

/* ct state (or status) & mask != 0. */
static void
e_ct(struct rule *u, uint32_t key, uint32_t mask)
{
    uint32_t zero = 0;
    struct nftnl_expr *e = nftnl_expr_alloc("ct");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
    }
    add_expr(u, e);
    e = nftnl_expr_alloc("bitwise");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof(mask));
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
        nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof(zero));
    }
    add_expr(u, e);
    e_cmp(u, NFT_CMP_NEQ, &zero, sizeof(zero));
}

static void
e_lookup(struct rule *u, const char *set, bool inv)
{
    struct nftnl_expr *e = nftnl_expr_alloc("lookup");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
        if (inv)
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
    }
    add_expr(u, e);
}

static void
e_verdict(struct rule *u, int verdict)
{
    struct nftnl_expr *e = nftnl_expr_alloc("immediate");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
        nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
    }
    add_expr(u, e);
}

/* meta nfproto == family: what libnftables puts before an ip/ip6
 * match in an inet table. */
static void
e_nfproto(struct rule *u, int family)
{
    uint8_t p = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
    e_meta(u, NFT_META_NFPROTO);
    e_cmp(u, NFT_CMP_EQ, &p, 1);
}

/* Loads the source (saddr) or destination address of family. */
static void
e_addr(struct rule *u, int family, bool saddr)
{
    e_nfproto(u, family);
    if (family == AF_INET)
        e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, saddr ? 12 : 16, 4);
    else
        e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, saddr ? 8 : 24, 16);
}

/* meta l4proto @dnsproto th dport 53 */
static void
e_dns(struct rule *u)
{
    uint16_t port = htons(53);
    e_meta(u, NFT_META_L4PROTO);
    e_lookup(u, "dnsproto", false);
    e_payload(u, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
    e_cmp(u, NFT_CMP_EQ, &port, sizeof(port));
}

/* tcp dport == port */
static void
e_tcp_dport(struct rule *u, uint16_t port)
{
    uint8_t tcp = IPPROTO_TCP;
    uint16_t p = htons(port);
    e_meta(u, NFT_META_L4PROTO);
    e_cmp(u, NFT_CMP_EQ, &tcp, 1);
    e_payload(u, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
    e_cmp(u, NFT_CMP_EQ, &p, sizeof(p));
}

static struct rule
rule_new(const char *chain_prefix, const char *x)
{
    char chain[NET_IFNAME_MAX + 8];
    struct rule u = {.r = nftnl_rule_alloc()};
    if (!u.r) {
        u.oom = true;
        return u;
    }
    (void)snprintf(chain, sizeof(chain), "%s_%s", chain_prefix, x);
    nftnl_rule_set_str(u.r, NFTNL_RULE_TABLE, NET_NFT_TABLE);
    nftnl_rule_set_str(u.r, NFTNL_RULE_CHAIN, chain);
    nftnl_rule_set_u32(u.r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    return u;
}

/* Appends the rule to the batch and frees it. */
static void
put_rule(struct batch *t, struct rule *u)
{
    if (u->oom && t->r >= 0)
        t->r = -ENOMEM;
    if (u->r) {
        struct nlmsghdr *h = batch_msg(t, NFT_MSG_NEWRULE, NLM_F_APPEND | NLM_F_CREATE);
        if (h) {
            nftnl_rule_nlmsg_build_payload(h, u->r);
            batch_done(t);
        }
        nftnl_rule_free(u->r);
    }
    u->r = NULL;
}

/* One rule "<match> verdict" in chain prefix_x, the match written by fn. */
#define RULE(t, prefix, x, verdict, ...)      \
    do {                                      \
        struct rule u_ = rule_new(prefix, x); \
        struct rule *u = &u_;                 \
        __VA_ARGS__;                          \
        e_verdict(u, verdict);                \
        put_rule(t, u);                       \
    } while (0)

/* A map entry "ifname : jump prefix_x" (verdict 0: the key only). */
static void
put_map_elem(struct batch *t, uint16_t type, uint16_t flags, const char *map, const char *x,
             const char *prefix)
{
    char key[IFNAMSIZ] = {0}, chain[NET_IFNAME_MAX + 8];
    struct nftnl_set *s = set_new(map);
    struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    if (!s || !e) {
        t->r = -ENOMEM;
        nftnl_set_elem_free(e);
        if (s)
            nftnl_set_free(s);
        return;
    }
    (void)strscpy(key, x, sizeof(key));
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
    if (prefix) {
        (void)snprintf(chain, sizeof(chain), "%s_%s", prefix, x);
        nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
        nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
    }
    nftnl_set_elem_add(s, e);
    put_elems(t, type, flags, s);
    nftnl_set_free(s);
}

/* The rules of in_X and nat_X (put_in_nat()). */
static void
put_in_nat(struct batch *t, const struct net_nft_sandbox *sb)
{
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    uint8_t icmp6 = IPPROTO_ICMPV6;

    RULE(t, "in", x, NF_ACCEPT, e_ct(u, NFT_CT_STATE, CT_ESTABLISHED_RELATED));
    RULE(t, "in", x, NF_DROP, e_addr(u, AF_INET, true), e_cmp(u, NFT_CMP_NEQ, s->sb4.bytes, 4));
    RULE(t, "in", x, NF_ACCEPT, e_addr(u, AF_INET, false), e_cmp(u, NFT_CMP_EQ, s->gw4.bytes, 4),
         e_dns(u));
    if (s->has6) {
        RULE(t, "in", x, NF_ACCEPT, e_nfproto(u, AF_INET6), e_meta(u, NFT_META_L4PROTO),
             e_cmp(u, NFT_CMP_EQ, &icmp6, 1), e_payload(u, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1),
             e_lookup(u, "nd6", false));
        RULE(t, "in", x, NF_DROP, e_addr(u, AF_INET6, true),
             e_cmp(u, NFT_CMP_NEQ, s->sb6.bytes, 16));
        RULE(t, "in", x, NF_ACCEPT, e_addr(u, AF_INET6, false),
             e_cmp(u, NFT_CMP_EQ, s->gw6.bytes, 16), e_dns(u));
    }
    if (sb->proxy_port) {
        RULE(t, "in", x, NF_ACCEPT, e_tcp_dport(u, sb->proxy_port),
             e_ct(u, NFT_CT_STATUS, CT_STATUS_DNAT));
        uint16_t to = htons(sb->proxy_port);
        for (size_t i = 0; i < sb->n_proxy_dports; i++) {
            /* tcp dport P redirect to :proxy_port (no verdict). */
            struct rule u = rule_new("nat", x);
            e_tcp_dport(&u, sb->proxy_dports[i]);
            struct nftnl_expr *e = nftnl_expr_alloc("immediate");
            if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
                nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &to, sizeof(to));
            }
            add_expr(&u, e);
            e = nftnl_expr_alloc("redir");
            if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
            }
            add_expr(&u, e);
            put_rule(t, &u);
        }
    }
    RULE(t, "in", x, NF_DROP, (void)0);
}

static void
put_sandbox_add(struct batch *t, const struct net_nft_sandbox *sb)
{
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    char set[NET_IFNAME_MAX + 8];

    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "sb", x);
    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "in", x);
    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "nat", x);
    put_list_set(t, NFT_MSG_NEWSET, x, "a4", AF_INET);
    put_list_set(t, NFT_MSG_NEWSET, x, "a6", AF_INET6);
    put_list_set(t, NFT_MSG_NEWSET, x, "d4", AF_INET);
    put_list_set(t, NFT_MSG_NEWSET, x, "d6", AF_INET6);

    RULE(t, "sb", x, NF_ACCEPT, e_ct(u, NFT_CT_STATE, CT_ESTABLISHED_RELATED));
    RULE(t, "sb", x, NF_DROP, e_ct(u, NFT_CT_STATE, CT_INVALID));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, true), e_cmp(u, NFT_CMP_NEQ, s->sb4.bytes, 4));
    if (s->has6) {
        RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, true),
             e_cmp(u, NFT_CMP_NEQ, s->sb6.bytes, 16));
    } else {
        uint8_t p6 = NFPROTO_IPV6;
        RULE(t, "sb", x, NF_DROP, e_meta(u, NFT_META_NFPROTO), e_cmp(u, NFT_CMP_EQ, &p6, 1));
    }
    RULE(t, "sb", x, NF_DROP, e_meta(u, NFT_META_OIFNAME),
         e_cmp(u, NFT_CMP_EQ, NET_NFT_PREFIX, sizeof(NET_NFT_PREFIX) - 1));
    RULE(t, "sb", x, NF_DROP, e_dns(u));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, "never4", false));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, "never6", false));
    (void)snprintf(set, sizeof(set), "%s_d4", x);
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, set, false));
    (void)snprintf(set, sizeof(set), "%s_d6", x);
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, set, false));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, "private4", false),
         e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, 16, 4), e_lookup(u, "allowed4", true));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, "private6", false),
         e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, 24, 16), e_lookup(u, "allowed6", true));
    (void)snprintf(set, sizeof(set), "%s_a4", x);
    RULE(t, "sb", x, NF_ACCEPT, e_addr(u, AF_INET, false), e_lookup(u, set, false));
    (void)snprintf(set, sizeof(set), "%s_a6", x);
    RULE(t, "sb", x, NF_ACCEPT, e_addr(u, AF_INET6, false), e_lookup(u, set, false));
    RULE(t, "sb", x, sb->default_drop ? NF_DROP : NF_ACCEPT, (void)0);

    put_in_nat(t, sb);
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "egress", x, "sb");
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "ingress", x, "in");
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "redir", x, "nat");
}

/* Deletes every rule of chain prefix_x (flush chain). */
static void
put_flush(struct batch *t, const char *prefix, const char *x)
{
    struct rule u = rule_new(prefix, x);
    if (!u.r) {
        t->r = -ENOMEM;
        return;
    }
    struct nlmsghdr *h = batch_msg(t, NFT_MSG_DELRULE, 0);
    if (h) {
        nftnl_rule_nlmsg_build_payload(h, u.r);
        batch_done(t);
    }
    nftnl_rule_free(u.r);
}

/* The elements of one set going into messages of at most ELEMS_PER_MSG
 * elements. */
struct elems {
    struct batch *t;
    char set[NET_IFNAME_MAX + 8];
    struct nftnl_set *s; /* the message being filled, NULL = none */
    size_t n;            /* elements in s */
};

static void
elems_flush(struct elems *q)
{
    if (!q->s)
        return;
    if (q->n)
        put_elems(q->t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, q->s);
    nftnl_set_free(q->s);
    q->s = NULL;
    q->n = 0;
}

static void
elems_one(struct elems *q, const uint8_t *key, uint32_t len, bool end)
{
    struct nftnl_set_elem *e;

    if (q->t->r < 0)
        return;
    if (!q->s) {
        q->s = set_new(q->set);
        if (!q->s) {
            q->t->r = -ENOMEM;
            return;
        }
    }
    e = nftnl_set_elem_alloc();
    if (!e) {
        q->t->r = -ENOMEM;
        return;
    }
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, len);
    if (end)
        nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
    nftnl_set_elem_add(q->s, e);
    if (++q->n == ELEMS_PER_MSG)
        elems_flush(q);
}

/* The block as an interval of the kernel's rbtree set: its first address,
 * and the one past its last flagged as the end (none when the block runs
 * to the end of the address space), as libnftables sends it. */
static void
elems_add(struct elems *q, const struct net_block *b)
{
    uint8_t end[16];
    uint32_t len = b->ip.family == AF_INET ? 4 : 16;

    elems_one(q, b->ip.bytes, len, false);
    memcpy(end, b->ip.bytes, len);
    for (unsigned i = b->prefix; i < len * 8; i++)
        end[i / 8] |= (uint8_t)(0x80u >> (i % 8));
    /* Plus one, carrying. */
    int i = (int)len - 1;
    for (; i >= 0 && end[i] == 0xff; i--)
        end[i] = 0;
    if (i < 0)
        return;
    end[i]++;
    elems_one(q, end, len, true);
}

/* Flushes the sandbox's four list sets and fills them anew: one batch,
 * so new connections meet either the old lists or the new ones. */
static void
put_lists(struct batch *t, const char *x, const struct net_nft_lists *l)
{
    static const char *const suffixes[] = {"a4", "a6", "d4", "d6"};
    struct elems q[4];

    for (size_t i = 0; i < ELEMENTSOF(q); i++) {
        q[i] = (struct elems){.t = t};
        (void)snprintf(q[i].set, sizeof(q[i].set), "%s_%s", x, suffixes[i]);
        /* DELSETELEM without elements: flush. */
        struct nftnl_set *s = set_new(q[i].set);
        if (!s) {
            t->r = -ENOMEM;
            return;
        }
        put_elems(t, NFT_MSG_DELSETELEM, 0, s);
        nftnl_set_free(s);
    }
    for (size_t i = 0; i < l->n_allow; i++)
        elems_add(&q[l->allow[i].ip.family == AF_INET ? 0 : 1], &l->allow[i]);
    for (size_t i = 0; i < l->n_deny; i++)
        elems_add(&q[l->deny[i].ip.family == AF_INET ? 2 : 3], &l->deny[i]);
    for (size_t i = 0; i < ELEMENTSOF(q); i++)
        elems_flush(&q[i]);
}

static void
put_sandbox_remove(struct batch *t, const char *x)
{
    static const char *const chains[] = {"sb", "in", "nat"};

    /* In the text's order: the map entries hold references to the
     * chains, the rules to the sets. */
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "egress", x, NULL);
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "ingress", x, NULL);
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "redir", x, NULL);
    for (size_t i = 0; i < ELEMENTSOF(chains); i++)
        put_flush(t, chains[i], x);
    for (size_t i = 0; i < ELEMENTSOF(chains); i++)
        put_chain(t, NFT_MSG_DELCHAIN, 0, chains[i], x);
    put_list_set(t, NFT_MSG_DELSET, x, "a4", AF_INET);
    put_list_set(t, NFT_MSG_DELSET, x, "a6", AF_INET6);
    put_list_set(t, NFT_MSG_DELSET, x, "d4", AF_INET);
    put_list_set(t, NFT_MSG_DELSET, x, "d6", AF_INET6);
}

/* Reads the answers to the batch's messages up to its last: 0, or the
 * first failure's -errno. The kernel answers a batch before sendmsg()
 * returns, so the reads do not wait. */
static int
batch_answers(struct mnl_socket *nl, const struct batch *t, uint32_t *ret_failed)
{
    _cleanup_free_ char *buf = malloc(MNL_SOCKET_BUFFER_SIZE);
    uint32_t portid = mnl_socket_get_portid(nl);
    int first = 0;

    if (!buf)
        return -ENOMEM;
    /* At most one answer per message, and each read holds at least one. */
    for (uint32_t reads = 0; reads <= t->last_seq - t->first_seq; reads++) {
        ssize_t n = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
        if (n < 0)
            return -errno;
        int len = (int)n;
        for (const struct nlmsghdr *h = (const void *)buf; mnl_nlmsg_ok(h, len);
             h = mnl_nlmsg_next(h, &len)) {
            if (h->nlmsg_pid != portid || h->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (e->error < 0 && first == 0) {
                first = e->error;
                *ret_failed = h->nlmsg_seq - t->first_seq + 1;
            }
            if (h->nlmsg_seq == t->last_seq)
                return first;
        }
    }
    return first < 0 ? first : -EPROTO;
}

/* Builds with fn and sends one batch of at most size bytes; what is the
 * failure's prefix. */
static int
batch_run(struct mnl_socket *nl, uint32_t *seq, size_t size,
          void (*fn)(struct batch *, const void *), const void *arg, const char *what,
          struct err *err)
{
    _cleanup_free_ char *buf = NULL;
    struct batch t = {.seq = seq};
    uint32_t failed = 0;
    int r;

    if (size > NET_NFT_NL_BATCH_MAX)
        size = NET_NFT_NL_BATCH_MAX;
    buf = malloc(size);
    if (!buf)
        return -ENOMEM;
    /* The last message may run past the limit into the rest. */
    t.b = mnl_nlmsg_batch_start(buf, size / 2);
    if (!t.b)
        return -ENOMEM;
    nftnl_batch_begin(mnl_nlmsg_batch_current(t.b), (*seq)++);
    (void)mnl_nlmsg_batch_next(t.b);
    t.first_seq = *seq;
    fn(&t, arg);
    if (t.r >= 0) {
        nftnl_batch_end(mnl_nlmsg_batch_current(t.b), (*seq)++);
        if (!mnl_nlmsg_batch_next(t.b))
            t.r = -EMSGSIZE;
    }
    if (t.r < 0) {
        mnl_nlmsg_batch_stop(t.b);
        return err_set(err, -t.r, "%s: cannot build the batch", what);
    }
    ssize_t n = mnl_socket_sendto(nl, mnl_nlmsg_batch_head(t.b), mnl_nlmsg_batch_size(t.b));
    r = n < 0 ? -errno : batch_answers(nl, &t, &failed);
    mnl_nlmsg_batch_stop(t.b);
    if (r < 0)
        return err_set(err, -r, "%s: %s (message %u of %u)", what, strerror(-r), failed,
                       t.last_seq - t.first_seq + 1);
    return 0;
}

/* Bytes of a batch of rules and n list elements. */
static size_t
batch_size(size_t n)
{
    return 2u * (64u * 1024u + n * NET_NFT_NL_ELEM_MAX);
}

static void
fn_add(struct batch *t, const void *arg)
{
    put_sandbox_add(t, arg);
}

static void
fn_remove(struct batch *t, const void *arg)
{
    put_sandbox_remove(t, arg);
}

struct lists_arg {
    const char *ifname;
    const struct net_nft_lists *l;
};

static void
fn_lists(struct batch *t, const void *arg)
{
    const struct lists_arg *a = arg;
    put_lists(t, a->ifname, a->l);
}

static void
fn_redirect(struct batch *t, const void *arg)
{
    const struct net_nft_sandbox *sb = arg;
    put_flush(t, "in", sb->ifname);
    put_flush(t, "nat", sb->ifname);
    put_in_nat(t, sb);
}

int
net_nft_nl_sandbox_add(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                       struct err *err)
{
    char what[64];
    (void)snprintf(what, sizeof(what), "cannot add the rules of '%.16s'", sb->ifname);
    return batch_run(nl, seq, batch_size(0), fn_add, sb, what, err);
}

int
net_nft_nl_sandbox_remove(struct mnl_socket *nl, uint32_t *seq, const char *ifname, struct err *err)
{
    char what[64];
    (void)snprintf(what, sizeof(what), "cannot remove the rules of '%.16s'", ifname);
    return batch_run(nl, seq, batch_size(0), fn_remove, ifname, what, err);
}

int
net_nft_nl_lists(struct mnl_socket *nl, uint32_t *seq, const char *ifname,
                 const struct net_nft_lists *l, struct err *err)
{
    struct lists_arg a = {.ifname = ifname, .l = l};
    char what[64];
    (void)snprintf(what, sizeof(what), "cannot set the lists of '%.16s'", ifname);
    return batch_run(nl, seq, batch_size(2 * (l->n_allow + l->n_deny)), fn_lists, &a, what, err);
}

int
net_nft_nl_redirect(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                    struct err *err)
{
    char what[64];
    (void)snprintf(what, sizeof(what), "cannot set the redirect of '%.16s'", sb->ifname);
    return batch_run(nl, seq, batch_size(0), fn_redirect, sb, what, err);
}
