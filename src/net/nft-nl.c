/*
 * nft-nl.c - a sandbox's chains, sets and map entries added and removed
 * as one netlink batch built with libnftnl: the bytecode libnftables
 * makes of net_nft_gen_sandbox_add()/_remove()'s text, written out.
 *
 * Why not the text: before running any command libnftables fills its
 * cache from the kernel, and for these commands that means the elements
 * of every set, one dump request per set, each of which the kernel finds
 * by a linear scan of the table's sets: with 1,000 sandboxes (4,000 sets)
 * an add took ~0.6 s. Nothing here reads the kernel's state; the kernel
 * checks what it must (names exist or not) and the batch is all or
 * nothing. Not for the rare, bigger transactions (set-up, lists,
 * redirect), which stay text.
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
#define TYPE_IPADDR        7
#define TYPE_IP6ADDR       8
#define TYPE_INET_PROTOCOL 12
#define TYPE_ICMP6_TYPE    29

#define CT_ESTABLISHED_RELATED 0x6u /* NF_CT_STATE_BIT(ESTABLISHED) | ..(RELATED) */
#define CT_INVALID             0x1u

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

static struct nftnl_set *
set_new(const char *name, uint32_t key_type, uint32_t key_len, uint32_t flags)
{
    struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return NULL;
    nftnl_set_set_str(s, NFTNL_SET_TABLE, NET_NFT_TABLE);
    nftnl_set_set_str(s, NFTNL_SET_NAME, name);
    nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    if (key_len) {
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
    }
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

static void
put_elems(struct batch *t, uint16_t type, uint16_t flags, struct nftnl_set *s)
{
    struct nlmsghdr *h = batch_msg(t, type, flags);
    if (h) {
        nftnl_set_elems_nlmsg_build_payload(h, s);
        batch_done(t);
    }
}

/* A sandbox's named set (X_a4 ...): interval, of addresses. */
static void
put_named_set(struct batch *t, const char *x, const char *suffix, int family)
{
    char name[NET_IFNAME_MAX + 8];
    (void)snprintf(name, sizeof(name), "%s_%s", x, suffix);
    struct nftnl_set *s = set_new(name, family == AF_INET ? TYPE_IPADDR : TYPE_IP6ADDR,
                                  family == AF_INET ? 4 : 16, NFT_SET_INTERVAL);
    if (!s) {
        t->r = -ENOMEM;
        return;
    }
    /* The kernel wants an id on every new set, named or not. */
    nftnl_set_set_u32(s, NFTNL_SET_ID, ++t->set_id);
    put_set(t, NFT_MSG_NEWSET, NLM_F_CREATE, s);
    nftnl_set_free(s);
}

/* An anonymous constant set of one-byte keys (protocols, ICMPv6 types),
 * for one lookup in the same batch; returns its id (0 on failure). */
static uint32_t
put_anon_set(struct batch *t, uint32_t key_type, const uint8_t *keys, size_t n)
{
    uint32_t id = ++t->set_id;
    struct nftnl_set *s = set_new("__set%d", key_type, 1, NFT_SET_ANONYMOUS | NFT_SET_CONSTANT);
    if (!s) {
        t->r = -ENOMEM;
        return 0;
    }
    nftnl_set_set_u32(s, NFTNL_SET_ID, id);
    nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, (uint32_t)n);
    put_set(t, NFT_MSG_NEWSET, NLM_F_CREATE, s);
    for (size_t i = 0; i < n && t->r >= 0; i++) {
        struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!e) {
            t->r = -ENOMEM;
            break;
        }
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &keys[i], 1);
        nftnl_set_elem_add(s, e);
    }
    put_elems(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, s);
    nftnl_set_free(s);
    return id;
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
    struct nftnl_expr *e = nftnl_expr_alloc("payload");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
        nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
    }
    add_expr(u, e);
}

/* ct state & mask != 0. */
static void
e_ct_state(struct rule *u, uint32_t mask)
{
    uint32_t zero = 0;
    struct nftnl_expr *e = nftnl_expr_alloc("ct");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
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
e_lookup(struct rule *u, const char *set, uint32_t id, bool inv)
{
    struct nftnl_expr *e = nftnl_expr_alloc("lookup");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
        nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
        if (id)
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, id);
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

/* meta l4proto { tcp, udp } th dport 53 */
static void
e_dns(struct rule *u, uint32_t set_id)
{
    uint16_t port = htons(53);
    e_meta(u, NFT_META_L4PROTO);
    e_lookup(u, "__set%d", set_id, false);
    e_payload(u, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
    e_cmp(u, NFT_CMP_EQ, &port, sizeof(port));
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
    struct nftnl_set *s = set_new(map, 0, 0, 0);
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

/* The rules of in_X for a sandbox without a proxy (put_in_nat()). */
static void
put_in(struct batch *t, const struct net_nft_sandbox *sb)
{
    static const uint8_t l4[] = {IPPROTO_TCP, IPPROTO_UDP};
    static const uint8_t nd[] = {135, 136, 133}; /* neighbour solicit, advert, router solicit */
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    uint32_t est = CT_ESTABLISHED_RELATED;
    uint8_t icmp6 = IPPROTO_ICMPV6;

    RULE(t, "in", x, NF_ACCEPT, e_ct_state(u, est));
    RULE(t, "in", x, NF_DROP, e_addr(u, AF_INET, true), e_cmp(u, NFT_CMP_NEQ, s->sb4.bytes, 4));
    uint32_t id = put_anon_set(t, TYPE_INET_PROTOCOL, l4, ELEMENTSOF(l4));
    RULE(t, "in", x, NF_ACCEPT, e_addr(u, AF_INET, false), e_cmp(u, NFT_CMP_EQ, s->gw4.bytes, 4),
         e_dns(u, id));
    if (s->has6) {
        id = put_anon_set(t, TYPE_ICMP6_TYPE, nd, ELEMENTSOF(nd));
        RULE(t, "in", x, NF_ACCEPT, e_nfproto(u, AF_INET6), e_meta(u, NFT_META_L4PROTO),
             e_cmp(u, NFT_CMP_EQ, &icmp6, 1), e_payload(u, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1),
             e_lookup(u, "__set%d", id, false));
        RULE(t, "in", x, NF_DROP, e_addr(u, AF_INET6, true),
             e_cmp(u, NFT_CMP_NEQ, s->sb6.bytes, 16));
        id = put_anon_set(t, TYPE_INET_PROTOCOL, l4, ELEMENTSOF(l4));
        RULE(t, "in", x, NF_ACCEPT, e_addr(u, AF_INET6, false),
             e_cmp(u, NFT_CMP_EQ, s->gw6.bytes, 16), e_dns(u, id));
    }
    RULE(t, "in", x, NF_DROP, (void)0);
}

static void
put_sandbox_add(struct batch *t, const struct net_nft_sandbox *sb)
{
    static const uint8_t l4[] = {IPPROTO_TCP, IPPROTO_UDP};
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    char set[NET_IFNAME_MAX + 8];

    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "sb", x);
    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "in", x);
    put_chain(t, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, "nat", x);
    put_named_set(t, x, "a4", AF_INET);
    put_named_set(t, x, "a6", AF_INET6);
    put_named_set(t, x, "d4", AF_INET);
    put_named_set(t, x, "d6", AF_INET6);

    RULE(t, "sb", x, NF_ACCEPT, e_ct_state(u, CT_ESTABLISHED_RELATED));
    RULE(t, "sb", x, NF_DROP, e_ct_state(u, CT_INVALID));
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
    uint32_t id = put_anon_set(t, TYPE_INET_PROTOCOL, l4, ELEMENTSOF(l4));
    RULE(t, "sb", x, NF_DROP, e_dns(u, id));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, "never4", 0, false));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, "never6", 0, false));
    (void)snprintf(set, sizeof(set), "%s_d4", x);
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, set, 0, false));
    (void)snprintf(set, sizeof(set), "%s_d6", x);
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, set, 0, false));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET, false), e_lookup(u, "private4", 0, false),
         e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, 16, 4), e_lookup(u, "allowed4", 0, true));
    RULE(t, "sb", x, NF_DROP, e_addr(u, AF_INET6, false), e_lookup(u, "private6", 0, false),
         e_payload(u, NFT_PAYLOAD_NETWORK_HEADER, 24, 16), e_lookup(u, "allowed6", 0, true));
    (void)snprintf(set, sizeof(set), "%s_a4", x);
    RULE(t, "sb", x, NF_ACCEPT, e_addr(u, AF_INET, false), e_lookup(u, set, 0, false));
    (void)snprintf(set, sizeof(set), "%s_a6", x);
    RULE(t, "sb", x, NF_ACCEPT, e_addr(u, AF_INET6, false), e_lookup(u, set, 0, false));
    RULE(t, "sb", x, sb->default_drop ? NF_DROP : NF_ACCEPT, (void)0);

    put_in(t, sb);
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "egress", x, "sb");
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "ingress", x, "in");
    put_map_elem(t, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "redir", x, "nat");
}

static void
put_sandbox_remove(struct batch *t, const char *x)
{
    static const char *const chains[] = {"sb", "in", "nat"};
    static const char *const sets[] = {"a4", "a6", "d4", "d6"};
    char name[NET_IFNAME_MAX + 8];

    /* In the text's order: the map entries hold references to the
     * chains, the rules to the sets. */
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "egress", x, NULL);
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "ingress", x, NULL);
    put_map_elem(t, NFT_MSG_DELSETELEM, 0, "redir", x, NULL);
    for (size_t i = 0; i < ELEMENTSOF(chains); i++) {
        struct rule u = rule_new(chains[i], x);
        if (u.r) {
            struct nlmsghdr *h = batch_msg(t, NFT_MSG_DELRULE, 0);
            if (h) {
                nftnl_rule_nlmsg_build_payload(h, u.r);
                batch_done(t);
            }
            nftnl_rule_free(u.r);
        } else {
            t->r = -ENOMEM;
        }
    }
    for (size_t i = 0; i < ELEMENTSOF(chains); i++)
        put_chain(t, NFT_MSG_DELCHAIN, 0, chains[i], x);
    for (size_t i = 0; i < ELEMENTSOF(sets); i++) {
        (void)snprintf(name, sizeof(name), "%s_%s", x, sets[i]);
        struct nftnl_set *s = set_new(name, 0, 0, 0);
        if (!s) {
            t->r = -ENOMEM;
            break;
        }
        put_set(t, NFT_MSG_DELSET, 0, s);
        nftnl_set_free(s);
    }
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

/* Builds with fn and sends one batch; what is the failure's prefix. */
static int
batch_run(struct mnl_socket *nl, uint32_t *seq, void (*fn)(struct batch *, const void *),
          const void *arg, const char *what, struct err *err)
{
    _cleanup_free_ char *buf = malloc(NET_NFT_NL_BATCH_MAX);
    struct batch t = {.seq = seq};
    uint32_t failed = 0;
    int r;

    if (!buf)
        return -ENOMEM;
    /* The last message may run past the page size into the rest. */
    t.b = mnl_nlmsg_batch_start(buf, NET_NFT_NL_BATCH_MAX / 2);
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

int
net_nft_nl_sandbox_add(struct mnl_socket *nl, uint32_t *seq, const struct net_nft_sandbox *sb,
                       struct err *err)
{
    char what[64];
    if (sb->proxy_port)
        return -EOPNOTSUPP;
    (void)snprintf(what, sizeof(what), "cannot add the rules of '%.16s'", sb->ifname);
    return batch_run(nl, seq, fn_add, sb, what, err);
}

int
net_nft_nl_sandbox_remove(struct mnl_socket *nl, uint32_t *seq, const char *ifname, struct err *err)
{
    char what[64];
    (void)snprintf(what, sizeof(what), "cannot remove the rules of '%.16s'", ifname);
    return batch_run(nl, seq, fn_remove, ifname, what, err);
}
