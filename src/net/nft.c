/*
 * nft.c - abx's nftables table: the text of each transaction, generated
 * from C structs, run through libnftables for the set-up and the
 * operator's allowed ranges; the other calls check their input here and
 * send nft-nl.c's batches. See nft.h for the layout and why it is so.
 */
#include "net/nft.h"

#include <assert.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/nft-internal.h"
#include "util/cleanup.h"

#define T "inet " NET_NFT_TABLE

struct net_nft {
    struct nft_ctx *ctx;   /* the text's transactions */
    struct mnl_socket *nl; /* the batches of nft-nl.c */
    uint32_t seq;          /* of nl's messages */
};

static const struct net_block never_ranges[] = {
        {{AF_INET, {0}}, 8},                   /* "this network" 0.0.0.0/8 */
        {{AF_INET, {127}}, 8},                 /* loopback */
        {{AF_INET, {169, 254}}, 16},           /* link-local, cloud metadata */
        {{AF_INET, {224}}, 4},                 /* multicast */
        {{AF_INET, {240}}, 4},                 /* reserved and broadcast */
        {{AF_INET6, {0}}, 127},                /* :: and ::1 */
        {{AF_INET6, {[10] = 0xff, 0xff}}, 96}, /* v4-mapped */
        {{AF_INET6, {0xfe, 0x80}}, 10},        /* link-local */
        {{AF_INET6, {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, 0x54}}, 128}, /* fd00:ec2::254, metadata */
        {{AF_INET6, {0xff}}, 8},                                     /* multicast */
};

static const struct net_block private_ranges[] = {
        {{AF_INET, {10}}, 8},
        {{AF_INET, {100, 64}}, 10}, /* CGNAT, shared address space */
        {{AF_INET, {172, 16}}, 12},
        {{AF_INET, {192, 168}}, 16},
        {{AF_INET6, {0xfc}}, 7},                 /* ULA */
        {{AF_INET6, {0, 0x64, 0xff, 0x9b}}, 96}, /* NAT64: reaches IPv4 */
};

static int
check_ifname(const char *name, struct err *err)
{
    assert(name);
    if (!net_ifname_valid(name))
        return err_set(err, EINVAL, "'%.32s' is no interface name of ours ([a-z0-9]{1,15})", name);
    return 0;
}

int
net_nft_block_cmp(const void *a, const void *b)
{
    const struct net_block *x = a, *y = b;
    if (x->ip.family != y->ip.family)
        return x->ip.family < y->ip.family ? -1 : 1;
    int c = memcmp(x->ip.bytes, y->ip.bytes, sizeof(x->ip.bytes));
    if (c)
        return c;
    return (int)x->prefix - (int)y->prefix;
}

int
net_nft_blocks_normal(const struct net_block *blocks, size_t n, const char *what,
                      struct net_block **ret, size_t *ret_n, struct err *err)
{
    _cleanup_free_ struct net_block *v = NULL;
    size_t m = 0;
    int r;

    if (n > NET_NFT_LIST_MAX)
        return err_set(err, E2BIG, "%zu address blocks for %s, more than %u", n, what,
                       NET_NFT_LIST_MAX);
    if (n > 0) {
        v = calloc(n, sizeof(*v));
        if (!v)
            return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        r = net_block_check(&blocks[i], err);
        if (r < 0)
            return r;
        v[i] = blocks[i];
    }
    if (n > 0)
        qsort(v, n, sizeof(*v), net_nft_block_cmp);
    /* Sorted by family, address, then prefix, a block inside another
     * comes after it, with nothing between them that is not inside it
     * too. */
    const struct net_block *kept = NULL;
    for (size_t i = 0; i < n; i++) {
        if (kept && net_block_contains(kept, &v[i]))
            continue;
        v[m] = v[i];
        kept = &v[m++];
    }
    *ret = TAKE_PTR(v);
    *ret_n = m;
    return 0;
}

/* Appends "add element T set { ... }" of the blocks of family, leaving out
 * those inside another. Nothing when there are none. */
static int
put_elements(struct buf *b, const char *set, const struct net_block *blocks, size_t n, int family,
             struct err *err)
{
    _cleanup_free_ struct net_block *v = NULL;
    size_t m = 0;
    bool first = true;
    int r;

    r = net_nft_blocks_normal(blocks, n, set, &v, &m, err);
    if (r < 0)
        return r;
    r = 0;
    for (size_t i = 0; i < m && r >= 0; i++) {
        char s[NET_BLOCK_STR];
        if (v[i].ip.family != family)
            continue;
        if (first)
            r = buf_printf(b, "add element " T " %s { ", set);
        if (r >= 0)
            r = net_block_format(&v[i], s);
        if (r >= 0)
            r = buf_printf(b, "%s%s", first ? "" : ", ", s);
        first = false;
    }
    if (r >= 0 && !first)
        r = buf_puts(b, " }\n");
    return r < 0 ? err_set(err, -r, "cannot build the elements of set %s", set) : 0;
}

int
net_nft_gen_allowed(const struct net_block *allowed, size_t n_allowed, struct buf *b,
                    struct err *err)
{
    int r = buf_puts(b, "flush set " T " allowed4\nflush set " T " allowed6\n");
    if (r < 0)
        return err_set(err, -r, "cannot build the allowed sets");
    r = put_elements(b, "allowed4", allowed, n_allowed, AF_INET, err);
    if (r < 0)
        return r;
    return put_elements(b, "allowed6", allowed, n_allowed, AF_INET6, err);
}

int
net_nft_gen_init(const struct net_nft_config *c, struct buf *b, struct err *err)
{
    const struct net_block *priv = c->private_ranges ? c->private_ranges : private_ranges;
    size_t n_priv = c->private_ranges ? c->n_private : ELEMENTSOF(private_ranges);
    char out[40];
    int r;

    if (c->uplink) {
        r = check_ifname(c->uplink, err);
        if (r < 0)
            return r;
        (void)snprintf(out, sizeof(out), "oifname \"%s\"", c->uplink);
    } else {
        (void)snprintf(out, sizeof(out), "oifname != \"" NET_NFT_PREFIX "*\"");
    }
    /* "add" then "delete" of the table cannot fail on a missing one: what
     * a crashed run left goes in the same transaction that builds anew. */
    r = buf_printf(
            b,
            "add table " T "\n"
            "delete table " T "\n"
            "add table " T "\n"
            "add set " T " never4 { type ipv4_addr; flags interval; }\n"
            "add set " T " never6 { type ipv6_addr; flags interval; }\n"
            "add set " T " private4 { type ipv4_addr; flags interval; }\n"
            "add set " T " private6 { type ipv6_addr; flags interval; }\n"
            "add set " T " allowed4 { type ipv4_addr; flags interval; }\n"
            "add set " T " allowed6 { type ipv6_addr; flags interval; }\n"
            "add set " T " dnsproto { type inet_proto; }\n"
            "add element " T " dnsproto { tcp, udp }\n"
            "add set " T " nd6 { type icmpv6_type; }\n"
            "add element " T " nd6 { nd-neighbor-solicit, nd-neighbor-advert, "
            "nd-router-solicit }\n"
            "add map " T " egress { type ifname : verdict; }\n"
            "add map " T " ingress { type ifname : verdict; }\n"
            "add map " T " redir { type ifname : verdict; }\n"
            "add chain " T " forward { type filter hook forward priority filter; policy accept; }\n"
            "add rule " T " forward iifname vmap @egress\n"
            "add rule " T " forward iifname \"" NET_NFT_PREFIX "*\" drop\n"
            "add rule " T " forward oifname \"" NET_NFT_PREFIX
            "*\" ct state established,related accept\n"
            "add rule " T " forward oifname \"" NET_NFT_PREFIX "*\" drop\n"
            "add chain " T " input { type filter hook input priority filter; policy accept; }\n"
            "add rule " T " input iifname vmap @ingress\n"
            "add rule " T " input iifname \"" NET_NFT_PREFIX "*\" drop\n"
            "add chain " T
            " prerouting { type nat hook prerouting priority dstnat; policy accept; }\n"
            "add rule " T " prerouting iifname vmap @redir\n"
            "add chain " T
            " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n"
            "add rule " T " postrouting iifname \"" NET_NFT_PREFIX "*\" %s masquerade\n",
            out);
    if (r < 0)
        return err_set(err, -r, "cannot build the table");
    r = put_elements(b, "never4", never_ranges, ELEMENTSOF(never_ranges), AF_INET, err);
    if (r >= 0)
        r = put_elements(b, "never6", never_ranges, ELEMENTSOF(never_ranges), AF_INET6, err);
    if (r >= 0)
        r = put_elements(b, "private4", priv, n_priv, AF_INET, err);
    if (r >= 0)
        r = put_elements(b, "private6", priv, n_priv, AF_INET6, err);
    if (r >= 0)
        r = put_elements(b, "allowed4", c->allowed, c->n_allowed, AF_INET, err);
    if (r >= 0)
        r = put_elements(b, "allowed6", c->allowed, c->n_allowed, AF_INET6, err);
    return r;
}

static int
check_sandbox(const struct net_nft_sandbox *sb, struct err *err)
{
    int r = check_ifname(sb->ifname, err);
    if (r < 0)
        return r;
    if (!sb->slot || sb->slot->gw4.family != AF_INET || sb->slot->sb4.family != AF_INET ||
        (sb->slot->has6 && (sb->slot->gw6.family != AF_INET6 || sb->slot->sb6.family != AF_INET6)))
        return err_set(err, EINVAL, "sandbox '%s': no slot addresses of the right families",
                       sb->ifname);
    if (sb->n_proxy_dports > NET_NFT_DPORTS_MAX)
        return err_set(err, E2BIG, "sandbox '%s': %zu ports to redirect, more than %u", sb->ifname,
                       sb->n_proxy_dports, NET_NFT_DPORTS_MAX);
    if (sb->proxy_port != 0 && sb->n_proxy_dports == 0)
        return err_set(err, EINVAL, "sandbox '%s': a proxy port but no port to redirect",
                       sb->ifname);
    for (size_t i = 0; i < sb->n_proxy_dports; i++)
        if (sb->proxy_dports[i] == 0)
            return err_set(err, EINVAL, "sandbox '%s': port 0 cannot be redirected", sb->ifname);
    return 0;
}

/* The rules of in_X and nat_X, which a redirect rewrites. */
static int
put_in_nat(struct buf *b, const struct net_nft_sandbox *sb)
{
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    char gw4[NET_IP_STR], sb4[NET_IP_STR], gw6[NET_IP_STR], sb6[NET_IP_STR];
    int r;

    (void)net_ip_format(&s->gw4, gw4);
    (void)net_ip_format(&s->sb4, sb4);
    r = buf_printf(b,
                   "add rule " T " in_%s ct state established,related accept\n"
                   "add rule " T " in_%s ip saddr != %s drop\n"
                   "add rule " T " in_%s ip daddr %s meta l4proto @dnsproto th dport 53 accept\n",
                   x, x, sb4, x, gw4);
    if (r >= 0 && s->has6) {
        (void)net_ip_format(&s->gw6, gw6);
        (void)net_ip_format(&s->sb6, sb6);
        r = buf_printf(b,
                       "add rule " T " in_%s icmpv6 type @nd6 accept\n"
                       "add rule " T " in_%s ip6 saddr != %s drop\n"
                       "add rule " T " in_%s ip6 daddr %s meta l4proto @dnsproto th dport 53 "
                       "accept\n",
                       x, x, sb6, x, gw6);
    }
    if (r >= 0 && sb->proxy_port) {
        /* Redirected connections arrive at the gateway's address on
         * proxy_port; ct status dnat admits only those, not a sandbox
         * dialling the port itself. */
        r = buf_printf(b, "add rule " T " in_%s tcp dport %u ct status dnat accept\n", x,
                       sb->proxy_port);
        /* A rule per port rather than an anonymous set: every set of the
         * table costs a linear scan on each new set and set lookup. */
        for (size_t i = 0; i < sb->n_proxy_dports && r >= 0; i++)
            r = buf_printf(b, "add rule " T " nat_%s tcp dport %u redirect to :%u\n", x,
                           sb->proxy_dports[i], sb->proxy_port);
    }
    if (r >= 0)
        r = buf_printf(b, "add rule " T " in_%s drop\n", x);
    return r;
}

int
net_nft_gen_sandbox_add(const struct net_nft_sandbox *sb, struct buf *b, struct err *err)
{
    int r = check_sandbox(sb, err);
    if (r < 0)
        return r;
    const char *x = sb->ifname;
    const struct net_slot *s = sb->slot;
    char sb4[NET_IP_STR], sb6[NET_IP_STR];
    (void)net_ip_format(&s->sb4, sb4);

    r = buf_printf(b,
                   "create chain " T " sb_%s\n"
                   "create chain " T " in_%s\n"
                   "create chain " T " nat_%s\n"
                   "add set " T " %s_a4 { type ipv4_addr; flags interval; }\n"
                   "add set " T " %s_a6 { type ipv6_addr; flags interval; }\n"
                   "add set " T " %s_d4 { type ipv4_addr; flags interval; }\n"
                   "add set " T " %s_d6 { type ipv6_addr; flags interval; }\n"
                   "add rule " T " sb_%s ct state established,related accept\n"
                   "add rule " T " sb_%s ct state invalid drop\n"
                   "add rule " T " sb_%s ip saddr != %s drop\n",
                   x, x, x, x, x, x, x, x, x, x, sb4);
    if (r >= 0 && s->has6) {
        (void)net_ip_format(&s->sb6, sb6);
        r = buf_printf(b, "add rule " T " sb_%s ip6 saddr != %s drop\n", x, sb6);
    } else if (r >= 0) {
        r = buf_printf(b, "add rule " T " sb_%s meta nfproto ipv6 drop\n", x);
    }
    if (r >= 0)
        r = buf_printf(b,
                       "add rule " T " sb_%s oifname \"" NET_NFT_PREFIX "*\" drop\n"
                       "add rule " T " sb_%s meta l4proto @dnsproto th dport 53 drop\n"
                       "add rule " T " sb_%s ip daddr @never4 drop\n"
                       "add rule " T " sb_%s ip6 daddr @never6 drop\n"
                       "add rule " T " sb_%s ip daddr @%s_d4 drop\n"
                       "add rule " T " sb_%s ip6 daddr @%s_d6 drop\n"
                       "add rule " T " sb_%s ip daddr @private4 ip daddr != @allowed4 drop\n"
                       "add rule " T " sb_%s ip6 daddr @private6 ip6 daddr != @allowed6 drop\n"
                       "add rule " T " sb_%s ip daddr @%s_a4 accept\n"
                       "add rule " T " sb_%s ip6 daddr @%s_a6 accept\n"
                       "add rule " T " sb_%s %s\n",
                       x, x, x, x, x, x, x, x, x, x, x, x, x, x, x,
                       sb->default_drop ? "drop" : "accept");
    if (r >= 0)
        r = put_in_nat(b, sb);
    if (r >= 0)
        r = buf_printf(b,
                       "add element " T " egress { \"%s\" : jump sb_%s }\n"
                       "add element " T " ingress { \"%s\" : jump in_%s }\n"
                       "add element " T " redir { \"%s\" : jump nat_%s }\n",
                       x, x, x, x, x, x);
    return r < 0 ? err_set(err, -r, "cannot build the rules of sandbox '%s'", x) : 0;
}

int
net_nft_gen_sandbox_remove(const char *ifname, struct buf *b, struct err *err)
{
    int r = check_ifname(ifname, err);
    if (r < 0)
        return r;
    const char *x = ifname;
    /* The map entries first: they hold references to the chains, and the
     * rules to the sets. */
    r = buf_printf(b,
                   "delete element " T " egress { \"%s\" }\n"
                   "delete element " T " ingress { \"%s\" }\n"
                   "delete element " T " redir { \"%s\" }\n"
                   "flush chain " T " sb_%s\n"
                   "flush chain " T " in_%s\n"
                   "flush chain " T " nat_%s\n"
                   "delete chain " T " sb_%s\n"
                   "delete chain " T " in_%s\n"
                   "delete chain " T " nat_%s\n"
                   "delete set " T " %s_a4\n"
                   "delete set " T " %s_a6\n"
                   "delete set " T " %s_d4\n"
                   "delete set " T " %s_d6\n",
                   x, x, x, x, x, x, x, x, x, x, x, x, x);
    return r < 0 ? err_set(err, -r, "cannot build the removal of sandbox '%s'", x) : 0;
}

int
net_nft_gen_lists(const char *ifname, const struct net_block *allow, size_t n_allow,
                  const struct net_block *deny, size_t n_deny, struct buf *b, struct err *err)
{
    static const struct {
        const char *suffix;
        int family;
        bool deny;
    } sets[] = {
            {"a4", AF_INET, false},
            {"a6", AF_INET6, false},
            {"d4", AF_INET, true},
            {"d6", AF_INET6, true},
    };
    char set[NET_IFNAME_MAX + 4];
    int r = check_ifname(ifname, err);
    if (r < 0)
        return r;
    r = buf_printf(b,
                   "flush set " T " %s_a4\nflush set " T " %s_a6\n"
                   "flush set " T " %s_d4\nflush set " T " %s_d6\n",
                   ifname, ifname, ifname, ifname);
    if (r < 0)
        return err_set(err, -r, "cannot build the lists of sandbox '%s'", ifname);
    for (size_t i = 0; i < ELEMENTSOF(sets); i++) {
        (void)snprintf(set, sizeof(set), "%s_%s", ifname, sets[i].suffix);
        r = put_elements(b, set, sets[i].deny ? deny : allow, sets[i].deny ? n_deny : n_allow,
                         sets[i].family, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int
net_nft_gen_redirect(const struct net_nft_sandbox *sb, struct buf *b, struct err *err)
{
    int r = check_sandbox(sb, err);
    if (r < 0)
        return r;
    r = buf_printf(b, "flush chain " T " in_%s\nflush chain " T " nat_%s\n", sb->ifname,
                   sb->ifname);
    if (r >= 0)
        r = put_in_nat(b, sb);
    return r < 0 ? err_set(err, -r, "cannot build the redirect of sandbox '%s'", sb->ifname) : 0;
}

/* The errno a libnftables message names; EIO when it names none. */
static int
nft_errno(const char *msg)
{
    static const struct {
        const char *text;
        int errnum;
    } known[] = {
            {"No such file or directory", ENOENT}, {"File exists", EEXIST},
            {"Operation not permitted", EPERM},    {"Device or resource busy", EBUSY},
            {"Cannot allocate memory", ENOMEM},    {"Too many open files", EMFILE},
            {"Invalid argument", EINVAL},          {"Message too long", EMSGSIZE},
    };
    for (size_t i = 0; i < ELEMENTSOF(known); i++)
        if (strstr(msg, known[i].text))
            return known[i].errnum;
    return EIO;
}

/* Runs one transaction: all of text or nothing. */
static int
run(struct net_nft *n, const char *text, const char *what, struct err *err)
{
    int r = nft_run_cmd_from_buffer(n->ctx, text);
    /* Reading the buffers rewinds them, so they never grow past one run. */
    const char *msg = nft_ctx_get_error_buffer(n->ctx);
    (void)nft_ctx_get_output_buffer(n->ctx);
    if (r == 0)
        return 0;
    char line[ERR_MSG_MAX];
    size_t k = 0;
    /* The message, then the command it is about, on one line. */
    for (const char *p = msg ? msg : ""; *p && k + 3 < sizeof(line); p++) {
        if (*p == '\n') {
            if (p[1] == '\0' || p[1] == ' ' || p[1] == '^')
                break;
            line[k++] = ';';
            line[k++] = ' ';
            continue;
        }
        line[k++] = *p;
    }
    line[k] = '\0';
    return err_set(err, nft_errno(line), "%s: %s", what, line[0] ? line : "nftables failed");
}

static int
gen_run(struct net_nft *n, int gen_r, struct buf *b, const char *what, struct err *err)
{
    if (gen_r < 0)
        return gen_r;
    return run(n, b->data, what, err);
}

struct net_nft *
net_nft_free(struct net_nft *n)
{
    if (n) {
        if (n->ctx)
            nft_ctx_free(n->ctx);
        if (n->nl)
            (void)mnl_socket_close(n->nl);
        free(n);
    }
    return NULL;
}

int
net_nft_new(const struct net_nft_config *c, struct net_nft **ret, struct err *err)
{
    _cleanup_(net_nft_freep) struct net_nft *n = NULL;
    _cleanup_buf_ struct buf b;
    int r;

    buf_init(&b, NET_NFT_CMD_MAX);
    n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
    if (!n->ctx)
        return err_set(err, ENOMEM, "cannot make a libnftables context");
    if (nft_ctx_buffer_output(n->ctx) < 0 || nft_ctx_buffer_error(n->ctx) < 0)
        return err_set(err, ENOMEM, "cannot buffer libnftables' output");
    r = net_nft_nl_open(&n->nl, err);
    if (r < 0)
        return r;
    n->seq = 1;
    r = gen_run(n, net_nft_gen_init(c, &b, err), &b, "cannot set up table " T, err);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(n);
    return 0;
}

int
net_nft_remove_all(struct net_nft *n, struct err *err)
{
    return run(n, "add table " T "\ndelete table " T "\n", "cannot delete table " T, err);
}

int
net_nft_sandbox_add(struct net_nft *n, const struct net_nft_sandbox *sb, struct err *err)
{
    int r = check_sandbox(sb, err);
    if (r < 0)
        return r;
    /* One batch, no cache (nft-nl.c says why). */
    return net_nft_nl_sandbox_add(n->nl, &n->seq, sb, err);
}

int
net_nft_sandbox_remove(struct net_nft *n, const char *ifname, struct err *err)
{
    int r = check_ifname(ifname, err);
    if (r < 0)
        return r;
    return net_nft_nl_sandbox_remove(n->nl, &n->seq, ifname, err);
}

int
net_nft_sandbox_set_lists(struct net_nft *n, const char *ifname, const struct net_block *allow,
                          size_t n_allow, const struct net_block *deny, size_t n_deny,
                          struct err *err)
{
    _cleanup_free_ struct net_block *a = NULL, *d = NULL;
    size_t na = 0, nd = 0;
    int r = check_ifname(ifname, err);
    if (r < 0)
        return r;
    r = net_nft_blocks_normal(allow, n_allow, "the allow list", &a, &na, err);
    if (r >= 0)
        r = net_nft_blocks_normal(deny, n_deny, "the deny list", &d, &nd, err);
    if (r < 0)
        return r;
    struct net_nft_lists l = {.allow = a, .n_allow = na, .deny = d, .n_deny = nd};
    return net_nft_nl_lists(n->nl, &n->seq, ifname, &l, err);
}

int
net_nft_sandbox_redirect(struct net_nft *n, const struct net_nft_sandbox *sb, struct err *err)
{
    int r = check_sandbox(sb, err);
    if (r < 0)
        return r;
    return net_nft_nl_redirect(n->nl, &n->seq, sb, err);
}

int
net_nft_set_allowed(struct net_nft *n, const struct net_block *allowed, size_t n_allowed,
                    struct err *err)
{
    _cleanup_buf_ struct buf b;
    buf_init(&b, NET_NFT_CMD_MAX);
    return gen_run(n, net_nft_gen_allowed(allowed, n_allowed, &b, err), &b,
                   "cannot set the allowed private ranges", err);
}
