/*
 * test-nft.c - the sandboxes' nftables rules on real traffic, in
 * namespaces of our own (root only; see nstest.h): a host namespace with
 * an uplink to a "test internet" namespace (203.0.113.2, and on its
 * loopback 203.0.113.70 standing in for a private range and
 * 169.254.169.254), sandbox namespaces on veths from 198.51.100.0/24.
 * NAT (the far end sees the uplink's address, IPv4 and IPv6); the host's
 * own addresses, its loopback and other sandboxes unreachable; metadata
 * and private ranges dropped unless the operator allows the latter; DNS
 * only to the gateway; allow and deny sets replaced for new connections;
 * the proxy redirect; teardown and reclaim leaving nothing. Last, timings
 * (printed, not asserted).
 */
#include <nftables/libnftables.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/link.h"
#include "net/nft.h"
#include "nstest.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define DROP NSTEST_DROP_MS

struct world {
    struct net_link *host;
    struct net_nft *nft;
    int inet;
    struct net_pool pool;
    struct net_nft_config cfg;
};

static const struct net_block test_private[] = {
        {{AF_INET, {203, 0, 113, 64}}, 26}, /* stands for RFC 1918 here */
        {{AF_INET6, {0xfc}}, 7},
};

static int
world_setup(void **state)
{
    static struct world w;
    struct net_link *in = NULL;
    struct err e = {0};
    struct net_ip up4 = nstest_ip("203.0.113.1"), up6 = nstest_ip("2001:db8:ff::1");
    struct net_ip wan4 = nstest_ip("203.0.113.2"), wan6 = nstest_ip("2001:db8:ff::2");
    struct net_ip priv = nstest_ip("203.0.113.70"), meta = nstest_ip("169.254.169.254");
    struct net_block meta32 = {meta, 32};

    memset(&w, 0, sizeof(w));
    if (nstest_fresh_host() < 0)
        return -1;
    w.cfg = (struct net_nft_config){
            .uplink = "up0", .private_ranges = test_private, .n_private = ELEMENTSOF(test_private)};
    w.inet = nstest_ns_new();
    if (w.inet < 0 || net_link_open(-EBADF, &w.host, &e) < 0 ||
        net_link_veth_add(w.host, "up0", "wan0", w.inet, &e) < 0 ||
        net_link_addr_add(w.host, "up0", &up4, 24, &e) < 0 ||
        net_link_addr_add(w.host, "up0", &up6, 64, &e) < 0 || net_link_up(w.host, "up0", &e) < 0 ||
        net_link_up(w.host, "lo", &e) < 0 || net_link_open(w.inet, &in, &e) < 0 ||
        net_link_addr_add(in, "wan0", &wan4, 24, &e) < 0 ||
        net_link_addr_add(in, "wan0", &wan6, 64, &e) < 0 || net_link_up(in, "wan0", &e) < 0 ||
        net_link_up(in, "lo", &e) < 0 || net_link_addr_add(in, "lo", &priv, 32, &e) < 0 ||
        net_link_addr_add(in, "lo", &meta, 32, &e) < 0 ||
        net_link_route_add(w.host, "up0", &meta32, &wan4, &e) < 0 ||
        net_link_forwarding_on(true, &e) < 0 || net_nft_new(&w.cfg, &w.nft, &e) < 0) {
        fprintf(stderr, "setup: %s\n", e.msg);
        net_link_free(in);
        return -1;
    }
    net_link_free(in);
    w.pool = (struct net_pool){.v4 = nstest_block("198.51.100.0", 24),
                               .v4_slot = 30,
                               .v6 = nstest_block("2001:db8:1::", 48),
                               .v6_slot = 64};
    *state = &w;
    return 0;
}

static int
world_teardown(void **state)
{
    struct world *w = *state;
    net_nft_free(w->nft);
    net_link_free(w->host);
    close(w->inet);
    return 0;
}

/* A sandbox: rules first, then its links. */
struct sb {
    int ns;
    struct net_slot slot;
    char h[IFNAMSIZ], s[IFNAMSIZ];
    char ip[NET_IP_STR], gw[NET_IP_STR];
    struct net_nft_sandbox rules;
};

static void
sb_add(struct world *w, struct sb *x, uint32_t slot, bool default_drop)
{
    struct err e = {0};
    memset(x, 0, sizeof(*x));
    x->ns = nstest_ns_new();
    assert_true(x->ns >= 0);
    assert_int_equal(net_pool_slot(&w->pool, slot, &x->slot, NULL), 0);
    net_pool_ifnames(slot, x->h, x->s);
    (void)net_ip_format(&x->slot.sb4, x->ip);
    (void)net_ip_format(&x->slot.gw4, x->gw);
    x->rules = (struct net_nft_sandbox){
            .ifname = x->h, .slot = &x->slot, .default_drop = default_drop};
    int r = net_nft_sandbox_add(w->nft, &x->rules, &e);
    if (r < 0)
        fprintf(stderr, "nft: %s\n", e.msg);
    assert_int_equal(r, 0);
    struct net_link_sandbox spec = {
            .host_ifname = x->h, .sandbox_ifname = x->s, .netns_fd = x->ns, .slot = &x->slot};
    r = net_link_sandbox_up(w->host, &spec, &e);
    if (r < 0)
        fprintf(stderr, "link: %s\n", e.msg);
    assert_int_equal(r, 0);
}

static void
sb_del(struct world *w, struct sb *x)
{
    assert_int_equal(net_link_sandbox_down(w->host, x->h, NULL), 0);
    assert_int_equal(net_nft_sandbox_remove(w->nft, x->h, NULL), 0);
    close(x->ns);
}

static void
test_nat(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int l4 = nstest_listen(w->inet, SOCK_STREAM, "203.0.113.2", 8080);
    _cleanup_close_ int l6 = nstest_listen(w->inet, SOCK_STREAM, "2001:db8:ff::2", 8080);
    char peer[NET_IP_STR];
    struct sb a;

    sb_add(w, &a, 0, false);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 8080, 2000, NULL), 0);
    assert_int_equal(nstest_accept_peer(l4, peer), 0);
    assert_string_equal(peer, "203.0.113.1");
    /* See test-link.c for why the first IPv6 attempt may take a second. */
    assert_int_equal(nstest_tcp(a.ns, "2001:db8:ff::2", 8080, 4000, NULL), 0);
    assert_int_equal(nstest_accept_peer(l6, peer), 0);
    assert_string_equal(peer, "2001:db8:ff::1");
    sb_del(w, &a);
}

static void
test_host_closed(void **state)
{
    struct world *w = *state;
    _cleanup_close_ _unused_ int api = nstest_listen(-1, SOCK_STREAM, "0.0.0.0", 8700);
    _cleanup_close_ _unused_ int lo = nstest_listen(-1, SOCK_STREAM, "127.0.0.1", 8701);
    struct sb a;

    sb_add(w, &a, 1, false);
    assert_int_equal(nstest_tcp(-1, a.gw, 8700, 2000, NULL), 0); /* it listens */
    assert_int_equal(nstest_tcp(a.ns, a.gw, 8700, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.1", 8700, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(a.ns, "2001:db8:ff::1", 8700, DROP, NULL), -ETIMEDOUT);
    /* 127.0.0.1 inside is the sandbox's own loopback, never the host's. */
    assert_int_equal(nstest_tcp(a.ns, "127.0.0.1", 8701, DROP, NULL), -ECONNREFUSED);
    sb_del(w, &a);
}

static void
test_sandboxes_apart(void **state)
{
    struct world *w = *state;
    struct sb a, b;

    sb_add(w, &a, 2, false);
    sb_add(w, &b, 3, false);
    _cleanup_close_ _unused_ int la = nstest_listen(a.ns, SOCK_STREAM, "0.0.0.0", 8080);
    _cleanup_close_ _unused_ int lb = nstest_listen(b.ns, SOCK_STREAM, "0.0.0.0", 8080);
    assert_int_equal(nstest_tcp(a.ns, b.ip, 8080, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(b.ns, a.ip, 8080, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(a.ns, b.gw, 8080, DROP, NULL), -ETIMEDOUT);
    /* Nor from the uplink's side. */
    assert_int_equal(nstest_tcp(w->inet, a.ip, 8080, DROP, NULL) < 0, true);
    sb_del(w, &a);
    sb_del(w, &b);
}

static void
test_metadata_private(void **state)
{
    struct world *w = *state;
    _cleanup_close_ _unused_ int l = nstest_listen(w->inet, SOCK_STREAM, "0.0.0.0", 80);
    struct net_block allow[] = {nstest_block("203.0.113.64", 26), nstest_block("169.254.0.0", 16)};
    struct sb a;

    sb_add(w, &a, 4, false);
    /* Both listen, as the host sees. */
    assert_int_equal(nstest_tcp(-1, "169.254.169.254", 80, 2000, NULL), 0);
    assert_int_equal(nstest_tcp(-1, "203.0.113.70", 80, 2000, NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "169.254.169.254", 80, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.70", 80, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 80, 2000, NULL), 0);
    /* The operator opens the private range; link-local stays shut. */
    assert_int_equal(net_nft_set_allowed(w->nft, allow, ELEMENTSOF(allow), NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.70", 80, 2000, NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "169.254.169.254", 80, DROP, NULL), -ETIMEDOUT);
    /* A sandbox's allow list cannot open what the operator closes. */
    assert_int_equal(net_nft_set_allowed(w->nft, NULL, 0, NULL), 0);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, a.h, allow, 2, NULL, 0, NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.70", 80, DROP, NULL), -ETIMEDOUT);
    sb_del(w, &a);
}

static void
test_dns(void **state)
{
    struct world *w = *state;
    struct sb a;

    sb_add(w, &a, 5, false);
    _cleanup_close_ int gw_udp = nstest_listen(-1, SOCK_DGRAM, a.gw, 53);
    _cleanup_close_ int gw_tcp = nstest_listen(-1, SOCK_STREAM, a.gw, 53);
    _cleanup_close_ int far_udp = nstest_listen(w->inet, SOCK_DGRAM, "203.0.113.2", 53);
    _cleanup_close_ int far_tcp = nstest_listen(w->inet, SOCK_STREAM, "203.0.113.2", 53);
    assert_true(gw_udp >= 0 && gw_tcp >= 0 && far_udp >= 0 && far_tcp >= 0);
    assert_true(nstest_udp(a.ns, a.gw, 53, gw_udp, 2000));
    assert_int_equal(nstest_tcp(a.ns, a.gw, 53, 2000, NULL), 0);
    assert_false(nstest_udp(a.ns, "203.0.113.2", 53, far_udp, DROP));
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 53, DROP, NULL), -ETIMEDOUT);
    /* The host itself may ask there (the resolver's upstream). */
    assert_true(nstest_udp(-1, "203.0.113.2", 53, far_udp, 2000));
    sb_del(w, &a);
}

static void
test_lists(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int l = nstest_listen(w->inet, SOCK_STREAM, "0.0.0.0", 8080);
    _cleanup_close_ _unused_ int l6 = nstest_listen(w->inet, SOCK_STREAM, "::", 8080);
    struct net_block deny[] = {nstest_block("203.0.113.2", 32)};
    struct net_block allow[] = {nstest_block("203.0.113.0", 25), nstest_block("203.0.113.0", 26),
                                nstest_block("2001:db8:ff::", 64)};
    struct sb a, b;
    int keep = -1, fd;
    char c = 'x';
    struct err e = {0};

    sb_add(w, &a, 6, false);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 8080, 2000, &keep), 0);
    fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, a.h, NULL, 0, deny, 1, &e), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 8080, DROP, NULL), -ETIMEDOUT);
    /* The connection made before goes on. */
    assert_int_equal(write(keep, &c, 1), 1);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2000), 1);
    close(fd);
    close(keep);
    /* Replaced: the deny list is empty again. */
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, a.h, allow, 3, NULL, 0, &e), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 8080, 2000, NULL), 0);

    /* Allow lists only: nothing until listed. */
    sb_add(w, &b, 7, true);
    assert_int_equal(nstest_tcp(b.ns, "203.0.113.2", 8080, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, b.h, allow, 3, NULL, 0, &e), 0);
    assert_int_equal(nstest_tcp(b.ns, "203.0.113.2", 8080, 2000, NULL), 0);
    assert_int_equal(nstest_tcp(b.ns, "2001:db8:ff::2", 8080, 4000, NULL), 0);
    /* Deny wins over allow. */
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, b.h, allow, 3, deny, 1, &e), 0);
    assert_int_equal(nstest_tcp(b.ns, "203.0.113.2", 8080, DROP, NULL), -ETIMEDOUT);
    /* One sandbox's lists are not another's (the sets are shared). */
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 8080, 2000, NULL), 0);
    /* Too many, or a bad block: refused, nothing changed. */
    assert_int_equal(
            net_nft_sandbox_set_lists(w->nft, b.h, allow, NET_NFT_LIST_MAX + 1, NULL, 0, NULL),
            -E2BIG);
    struct net_block bad = nstest_block("203.0.113.1", 24);
    err_clear(&e);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, b.h, &bad, 1, NULL, 0, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "bits set past its prefix"));
    err_clear(&e);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, "abx99h", allow, 1, NULL, 0, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "abx99h"));
    /* The longest lists fit one batch (past the socket's default send
     * buffer): 2 * NET_NFT_LIST_MAX blocks, each two elements. */
    static struct net_block big_allow[NET_NFT_LIST_MAX], big_deny[NET_NFT_LIST_MAX];
    for (uint32_t i = 0; i < NET_NFT_LIST_MAX; i++) {
        big_allow[i] = nstest_block("2001:db8::", 48);
        big_allow[i].ip.bytes[4] = (uint8_t)(0x10 + (i >> 8));
        big_allow[i].ip.bytes[5] = (uint8_t)i;
        big_deny[i] = nstest_block("2001:db8::", 64);
        big_deny[i].ip.bytes[6] = (uint8_t)(i >> 8);
        big_deny[i].ip.bytes[7] = (uint8_t)i;
    }
    err_clear(&e);
    int r = net_nft_sandbox_set_lists(w->nft, b.h, big_allow, NET_NFT_LIST_MAX, big_deny,
                                      NET_NFT_LIST_MAX, &e);
    if (r < 0)
        fprintf(stderr, "nft: %s\n", e.msg);
    assert_int_equal(r, 0);
    assert_int_equal(nstest_tcp(b.ns, "203.0.113.2", 8080, DROP, NULL), -ETIMEDOUT);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, b.h, allow, 3, NULL, 0, &e), 0);
    assert_int_equal(nstest_tcp(b.ns, "203.0.113.2", 8080, 2000, NULL), 0);
    sb_del(w, &a);
    sb_del(w, &b);
}

static void
test_redirect(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int proxy = nstest_listen(-1, SOCK_STREAM, "0.0.0.0", 3128);
    _cleanup_close_ int far = nstest_listen(w->inet, SOCK_STREAM, "0.0.0.0", 80);
    char peer[NET_IP_STR];
    struct sb a;

    sb_add(w, &a, 8, false);
    assert_int_equal(nstest_tcp(a.ns, a.gw, 3128, DROP, NULL), -ETIMEDOUT);
    a.rules.proxy_port = 3128;
    a.rules.proxy_dports[0] = 80;
    a.rules.proxy_dports[1] = 443;
    a.rules.n_proxy_dports = 2;
    assert_int_equal(net_nft_sandbox_redirect(w->nft, &a.rules, NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 80, 2000, NULL), 0);
    assert_int_equal(nstest_accept_peer(proxy, peer), 0);
    assert_string_equal(peer, a.ip);
    /* Dialling the proxy port itself stays shut: only redirected traffic. */
    assert_int_equal(nstest_tcp(a.ns, a.gw, 3128, DROP, NULL), -ETIMEDOUT);
    /* Off again: port 80 goes out. */
    a.rules.proxy_port = 0;
    a.rules.n_proxy_dports = 0;
    assert_int_equal(net_nft_sandbox_redirect(w->nft, &a.rules, NULL), 0);
    assert_int_equal(nstest_tcp(a.ns, "203.0.113.2", 80, 2000, NULL), 0);
    assert_int_equal(nstest_accept_peer(far, peer), 0);
    assert_string_equal(peer, "203.0.113.1");
    sb_del(w, &a);
}

/* Whether command succeeds (a context of the test's own). */
static bool
nft_ok(const char *command)
{
    struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
    assert_non_null(c);
    (void)nft_ctx_buffer_output(c);
    (void)nft_ctx_buffer_error(c);
    int r = nft_run_cmd_from_buffer(c, command);
    nft_ctx_free(c);
    return r == 0;
}

/* The listing of command's objects (a context of the test's own),
 * into out. */
static void
nft_list(const char *command, char *out, size_t size)
{
    struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
    assert_non_null(c);
    (void)nft_ctx_buffer_output(c);
    (void)nft_ctx_buffer_error(c);
    int r = nft_run_cmd_from_buffer(c, command);
    if (r != 0)
        fprintf(stderr, "nft: %s\n", nft_ctx_get_error_buffer(c));
    assert_int_equal(r, 0);
    assert_true(strscpy(out, nft_ctx_get_output_buffer(c), size) >= 0);
    nft_ctx_free(c);
}

/* What nft_list() reads; one command per run (libnftables narrows its
 * cache to the last list command of a buffer). */
static const char *const list_cmds[] = {
        "list chain inet abx sb_abx11h",  "list chain inet abx in_abx11h",
        "list chain inet abx nat_abx11h", "list set inet abx abx11h_a4",
        "list set inet abx abx11h_d6",    "list map inet abx egress",
        "list map inet abx ingress",      "list map inet abx redir",
};

static void
list_all(char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < ELEMENTSOF(list_cmds); i++) {
        nft_list(list_cmds[i], out + k, size - k);
        k += strlen(out + k);
    }
}

/* The batch of nft-nl.c makes what the text says, as nft lists it. */
static void
test_batch_is_text(void **state)
{
    struct world *w = *state;
    static char by_batch[16384], by_text[16384];
    _cleanup_buf_ struct buf b;
    struct net_slot s;
    /* Both ends of the address space, prefixes short and long. */
    struct net_block allow[] = {nstest_block("203.0.113.0", 24), nstest_block("198.51.100.7", 32),
                                nstest_block("224.0.0.0", 3), nstest_block("0.0.0.0", 8),
                                nstest_block("2001:db8:ff::", 64)};
    struct net_block deny[] = {nstest_block("203.0.113.2", 32), nstest_block("2001:db8::", 32),
                               nstest_block("ff00::", 8)};

    buf_init(&b, NET_NFT_CMD_MAX);
    for (int drop = 0; drop < 2; drop++) {
        assert_int_equal(net_pool_slot(&w->pool, 11, &s, NULL), 0);
        struct net_nft_sandbox r = {.ifname = "abx11h", .slot = &s, .default_drop = drop};
        /* With a proxy once. */
        if (drop == 0)
            r = (struct net_nft_sandbox){.ifname = "abx11h",
                                         .slot = &s,
                                         .proxy_port = 3128,
                                         .proxy_dports = {80, 443},
                                         .n_proxy_dports = 2};
        assert_int_equal(net_nft_sandbox_add(w->nft, &r, NULL), 0);
        if (drop)
            assert_int_equal(net_nft_sandbox_set_lists(w->nft, "abx11h", allow, ELEMENTSOF(allow),
                                                       deny, ELEMENTSOF(deny), NULL),
                             0);
        list_all(by_batch, sizeof(by_batch));
        assert_int_equal(net_nft_sandbox_remove(w->nft, "abx11h", NULL), 0);
        buf_reset(&b);
        assert_int_equal(net_nft_gen_sandbox_add(&r, &b, NULL), 0);
        if (drop)
            assert_int_equal(net_nft_gen_lists("abx11h", allow, ELEMENTSOF(allow), deny,
                                               ELEMENTSOF(deny), &b, NULL),
                             0);
        assert_true(nft_ok(b.data));
        list_all(by_text, sizeof(by_text));
        assert_string_equal(by_batch, by_text);
        /* The batch removes what the text made. */
        assert_int_equal(net_nft_sandbox_remove(w->nft, "abx11h", NULL), 0);
        assert_false(nft_ok("list chain inet abx sb_abx11h"));
        /* Without IPv6 too. */
        w->pool.v6.ip.family = 0;
    }
    w->pool.v6.ip.family = AF_INET6;
}

static void
test_teardown_reclaim(void **state)
{
    struct world *w = *state;
    char names[4][IFNAMSIZ];
    struct err e = {0};
    struct sb a, b;

    static char listed[16384];
    struct net_block allow[] = {nstest_block("203.0.113.0", 25), nstest_block("2001:db8:ff::", 64)};

    sb_add(w, &a, 9, false);
    sb_add(w, &b, 10, false);
    assert_true(nft_ok("list chain inet abx sb_abx9h"));
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, a.h, allow, 2, allow, 1, NULL), 0);
    assert_int_equal(net_nft_sandbox_set_lists(w->nft, b.h, allow, 2, NULL, 0, NULL), 0);
    assert_int_equal(net_nft_sandbox_add(w->nft, &a.rules, &e), -EEXIST);
    assert_non_null(strstr(e.msg, "abx9h"));
    sb_del(w, &a);
    assert_false(nft_ok("list chain inet abx sb_abx9h"));
    assert_false(nft_ok("list set inet abx abx9h_a4"));
    nft_list("list set inet abx abx10h_a4", listed, sizeof(listed));
    assert_non_null(strstr(listed, "203.0.113.0/25"));
    assert_false(nft_ok("list chain inet abx in_abx9h"));
    assert_int_equal(net_nft_sandbox_remove(w->nft, a.h, NULL), -ENOENT);
    assert_true(nft_ok("list chain inet abx sb_abx10h"));

    /* A crash: b's links and rules stay. The next start replaces the
     * table and deletes the links. */
    w->nft = net_nft_free(w->nft);
    assert_int_equal(net_nft_new(&w->cfg, &w->nft, NULL), 0);
    assert_false(nft_ok("list chain inet abx sb_abx10h"));
    assert_true(nft_ok("list chain inet abx forward"));
    assert_int_equal(net_link_reclaim(w->host, "abx", NULL), 1);
    assert_int_equal(net_link_list(w->host, "abx", names, 4, NULL), 0);
    close(b.ns);

    assert_int_equal(net_nft_remove_all(w->nft, NULL), 0);
    assert_false(nft_ok("list table inet abx"));
    assert_int_equal(net_nft_remove_all(w->nft, NULL), 0);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#define ROUNDS 100

/* p50 of ROUNDS set-ups and tear-downs of one sandbox at slot. */
static void
measure(struct world *w, uint32_t slot, const char *label)
{
    uint64_t up[ROUNDS], down[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        struct sb x;
        uint64_t t0 = nstest_now_us();
        sb_add(w, &x, slot, false);
        uint64_t t1 = nstest_now_us();
        sb_del(w, &x);
        up[i] = t1 - t0;
        down[i] = nstest_now_us() - t1;
    }
    qsort(up, ROUNDS, sizeof(up[0]), cmp_u64);
    qsort(down, ROUNDS, sizeof(down[0]), cmp_u64);
    fprintf(stderr,
            "measure: %s: set-up p50 %llu us (p90 %llu), tear-down p50 %llu us (p90 %llu)\n", label,
            (unsigned long long)up[ROUNDS / 2], (unsigned long long)up[ROUNDS * 9 / 10],
            (unsigned long long)down[ROUNDS / 2], (unsigned long long)down[ROUNDS * 9 / 10]);
}

/* p50 and p90 of ROUNDS adds and removes of one sandbox's rules alone
 * (no links: what networking adds to a create). */
static void
measure_rules(struct world *w, uint32_t slot, const char *label)
{
    uint64_t up[ROUNDS], down[ROUNDS];
    struct net_slot s;
    char h[IFNAMSIZ], sb[IFNAMSIZ];

    assert_int_equal(net_pool_slot(&w->pool, slot, &s, NULL), 0);
    net_pool_ifnames(slot, h, sb);
    struct net_nft_sandbox r = {.ifname = h, .slot = &s};
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t t0 = nstest_now_us();
        assert_int_equal(net_nft_sandbox_add(w->nft, &r, NULL), 0);
        uint64_t t1 = nstest_now_us();
        assert_int_equal(net_nft_sandbox_remove(w->nft, h, NULL), 0);
        up[i] = t1 - t0;
        down[i] = nstest_now_us() - t1;
    }
    qsort(up, ROUNDS, sizeof(up[0]), cmp_u64);
    qsort(down, ROUNDS, sizeof(down[0]), cmp_u64);
    fprintf(stderr,
            "measure: rules only, %s: add p50 %llu us (p90 %llu), remove p50 %llu us (p90 %llu)\n",
            label, (unsigned long long)up[ROUNDS / 2], (unsigned long long)up[ROUNDS * 9 / 10],
            (unsigned long long)down[ROUNDS / 2], (unsigned long long)down[ROUNDS * 9 / 10]);
}

/* p50 and p90 of ROUNDS replacements of a sandbox's lists, alternating
 * between two lists of 8 blocks that share half. */
static void
measure_lists(struct world *w, const char *ifname, const char *label)
{
    uint64_t t[ROUNDS];
    struct net_block l[2][8];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 8; i++) {
            char a[NET_IP_STR];
            (void)snprintf(a, sizeof(a), "203.0.113.%d", (i + 4 * k) * 8);
            l[k][i] = nstest_block(a, 29);
        }
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t t0 = nstest_now_us();
        assert_int_equal(
                net_nft_sandbox_set_lists(w->nft, ifname, l[i % 2], 8, l[1 - i % 2], 4, NULL), 0);
        t[i] = nstest_now_us() - t0;
    }
    qsort(t, ROUNDS, sizeof(t[0]), cmp_u64);
    fprintf(stderr, "measure: set_lists, %s: p50 %llu us (p90 %llu)\n", label,
            (unsigned long long)t[ROUNDS / 2], (unsigned long long)t[ROUNDS * 9 / 10]);
}

/* p50 and p90 of ROUNDS redirects of sandbox r, turning the proxy on and
 * off. */
static void
measure_redirect(struct world *w, struct net_nft_sandbox *r, const char *label)
{
    uint64_t t[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        r->proxy_port = i % 2 ? 0 : 3128;
        r->n_proxy_dports = i % 2 ? 0 : 2;
        r->proxy_dports[0] = 80;
        r->proxy_dports[1] = 443;
        uint64_t t0 = nstest_now_us();
        assert_int_equal(net_nft_sandbox_redirect(w->nft, r, NULL), 0);
        t[i] = nstest_now_us() - t0;
    }
    qsort(t, ROUNDS, sizeof(t[0]), cmp_u64);
    fprintf(stderr, "measure: redirect, %s: p50 %llu us (p90 %llu)\n", label,
            (unsigned long long)t[ROUNDS / 2], (unsigned long long)t[ROUNDS * 9 / 10]);
}

#define MANY (getenv("ABX_NET_MANY") ? 1000u : 200u)

static void
test_measure(void **state)
{
    struct world *w = *state;
    struct net_pool big = {.v4 = nstest_block("198.51.100.0", 24), .v4_slot = 30};
    struct net_slot s;
    char h[IFNAMSIZ], sb[IFNAMSIZ];

    measure_rules(w, 0, "no other sandbox");
    measure(w, 0, "1 sandbox");
    /* Rules of MANY more sandboxes (no links: their names are what the
     * rules key on), slots numbered past the test pool's, each with lists
     * of 8 blocks: the shared sets hold 8 * MANY elements. */
    struct net_block lists[8];
    for (int i = 0; i < 8; i++) {
        char a[NET_IP_STR];
        (void)snprintf(a, sizeof(a), "198.51.100.%d", i * 16);
        lists[i] = nstest_block(a, 28);
    }
    uint64_t t0 = nstest_now_us();
    assert_int_equal(net_pool_slot(&big, 1, &s, NULL), 0);
    for (uint32_t i = 0; i < MANY; i++) {
        net_pool_ifnames(1000 + i, h, sb);
        struct net_nft_sandbox r = {.ifname = h, .slot = &s};
        assert_int_equal(net_nft_sandbox_add(w->nft, &r, NULL), 0);
        assert_int_equal(net_nft_sandbox_set_lists(w->nft, h, lists, 6, lists + 6, 2, NULL), 0);
    }
    fprintf(stderr, "measure: adding %u sandboxes' rules and lists took %llu ms\n", MANY,
            (unsigned long long)(nstest_now_us() - t0) / 1000);
    char label[64];
    (void)snprintf(label, sizeof(label), "with %u sandboxes' rules present", MANY);
    measure_rules(w, 0, label);
    measure(w, 0, label);
    net_pool_ifnames(1000, h, sb);
    measure_lists(w, h, label);
    struct net_nft_sandbox r = {.ifname = h, .slot = &s};
    measure_redirect(w, &r, label);
    t0 = nstest_now_us();
    assert_int_equal(net_nft_new(&w->cfg, &(struct net_nft *){NULL}, NULL), 0);
    fprintf(stderr, "measure: reclaiming the table with %u sandboxes took %llu ms\n", MANY,
            (unsigned long long)(nstest_now_us() - t0) / 1000);
}

static int
tests(void)
{
    const struct CMUnitTest t[] = {
            cmocka_unit_test_setup_teardown(test_nat, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_host_closed, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_sandboxes_apart, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_metadata_private, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_dns, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_lists, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_redirect, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_batch_is_text, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_teardown_reclaim, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_measure, world_setup, world_teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}

int
main(void)
{
    return nstest_main(tests);
}
