/*
 * test-link.c - a sandbox's links over rtnetlink, in namespaces of our own
 * (root only; see nstest.h): the veth pair with its peer made in the
 * sandbox's namespace, addresses, loopback and default routes (IPv4 and
 * IPv6), shown by a TCP connection from the sandbox to a "test internet"
 * namespace (routed, no NAT: the peer sees the sandbox's own address);
 * listing by prefix; teardown leaving no link on either side; errors
 * (taken names, missing links, bad names) with messages; reclaim of what
 * a crashed run left, sparing links not ours.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/link.h"
#include "nstest.h"
#include "util/cleanup.h"

struct world {
    struct net_link *host; /* rtnetlink in the test's host namespace */
    int inet;              /* the "test internet" namespace */
    struct net_pool pool;
};

/* A fresh host namespace with an uplink "up0" 203.0.113.1/24 and
 * 2001:db8:ff::1/64 to the test internet's "wan0" (.2, ::2), which routes
 * the pools back to the host. */
static int
world_setup(void **state)
{
    static struct world w;
    struct net_link *in = NULL;
    struct err e = {0};
    struct net_ip up4 = nstest_ip("203.0.113.1"), up6 = nstest_ip("2001:db8:ff::1");
    struct net_ip wan4 = nstest_ip("203.0.113.2"), wan6 = nstest_ip("2001:db8:ff::2");
    struct net_block back4 = nstest_block("198.51.100.0", 24);
    struct net_block back6 = nstest_block("2001:db8:1::", 48);

    memset(&w, 0, sizeof(w));
    if (nstest_fresh_host() < 0)
        return -1;
    w.inet = nstest_ns_new();
    if (w.inet < 0 || net_link_open(-EBADF, &w.host, &e) < 0 ||
        net_link_veth_add(w.host, "up0", "wan0", w.inet, &e) < 0 ||
        net_link_addr_add(w.host, "up0", &(struct net_ip){0}, 24, NULL) != -EINVAL)
        goto fail;
    if (net_link_addr_add(w.host, "up0", &up4, 24, &e) < 0 ||
        net_link_addr_add(w.host, "up0", &up6, 64, &e) < 0 || net_link_up(w.host, "up0", &e) < 0 ||
        net_link_open(w.inet, &in, &e) < 0 || net_link_addr_add(in, "wan0", &wan4, 24, &e) < 0 ||
        net_link_addr_add(in, "wan0", &wan6, 64, &e) < 0 || net_link_up(in, "wan0", &e) < 0 ||
        net_link_up(in, "lo", &e) < 0 || net_link_route_add(in, "wan0", &back4, &up4, &e) < 0 ||
        net_link_route_add(in, "wan0", &back6, &up6, &e) < 0 ||
        net_link_forwarding_on(true, &e) < 0)
        goto fail;
    net_link_free(in);
    w.pool = (struct net_pool){
            .v4 = nstest_block("198.51.100.0", 24), .v4_slot = 30, .v6 = back6, .v6_slot = 64};
    *state = &w;
    return 0;
fail:
    fprintf(stderr, "setup: %s\n", e.msg);
    net_link_free(in);
    return -1;
}

static int
world_teardown(void **state)
{
    struct world *w = *state;
    net_link_free(w->host);
    close(w->inet);
    return 0;
}

static void
sandbox_up(struct world *w, uint32_t slot, int ns, struct net_slot *s)
{
    char h[IFNAMSIZ], sb[IFNAMSIZ];
    struct err e = {0};
    assert_int_equal(net_pool_slot(&w->pool, slot, s, NULL), 0);
    net_pool_ifnames(slot, h, sb);
    struct net_link_sandbox spec = {
            .host_ifname = h, .sandbox_ifname = sb, .netns_fd = ns, .slot = s};
    int r = net_link_sandbox_up(w->host, &spec, &e);
    if (r < 0)
        fprintf(stderr, "sandbox_up: %s\n", e.msg);
    assert_int_equal(r, 0);
}

static void
test_up_reach_down(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int ns = nstest_ns_new();
    _cleanup_close_ int l4 = nstest_listen(w->inet, SOCK_STREAM, "203.0.113.2", 8080);
    _cleanup_close_ int l6 = nstest_listen(w->inet, SOCK_STREAM, "2001:db8:ff::2", 8080);
    struct net_slot s;
    char names[4][IFNAMSIZ], peer[NET_IP_STR];
    struct net_link *in = NULL;

    assert_true(ns >= 0 && l4 >= 0 && l6 >= 0);
    sandbox_up(w, 3, ns, &s);
    assert_int_equal(net_link_list(w->host, "abx", names, 4, NULL), 1);
    assert_string_equal(names[0], "abx3h");

    assert_int_equal(nstest_tcp(ns, "203.0.113.2", 8080, 2000, NULL), 0);
    assert_int_equal(nstest_accept_peer(l4, peer), 0);
    assert_string_equal(peer, "198.51.100.14");
    /* The first IPv6 SYN of a fresh link is lost while the uplink's
     * link-local address is in duplicate address detection (not ours: the
     * sandbox's addresses skip it); the retry a second later gets through. */
    assert_int_equal(nstest_tcp(ns, "2001:db8:ff::2", 8080, 4000, NULL), 0);
    assert_int_equal(nstest_accept_peer(l6, peer), 0);
    assert_string_equal(peer, "2001:db8:1:3::2");
    /* The sandbox's loopback is up. */
    _cleanup_close_ int lo = nstest_listen(ns, SOCK_STREAM, "127.0.0.1", 9);
    assert_true(lo >= 0);
    assert_int_equal(nstest_tcp(ns, "127.0.0.1", 9, 2000, NULL), 0);

    assert_int_equal(net_link_sandbox_down(w->host, "abx3h", NULL), 0);
    assert_int_equal(net_link_list(w->host, "abx", names, 4, NULL), 0);
    assert_int_equal(net_link_open(ns, &in, NULL), 0);
    assert_int_equal(net_link_list(in, "abx", names, 4, NULL), 0);
    net_link_free(in);
    assert_int_equal(nstest_tcp(ns, "203.0.113.2", 8080, 200, NULL), -ENETUNREACH);
}

static void
test_errors(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int ns = nstest_ns_new();
    struct net_slot s;
    struct err e = {0};
    int idx;

    sandbox_up(w, 0, ns, &s);
    /* A second pair of the same names fails and leaves the first alone. */
    struct net_link_sandbox spec = {
            .host_ifname = "abx0h", .sandbox_ifname = "abx9s", .netns_fd = ns, .slot = &s};
    assert_int_equal(net_link_sandbox_up(w->host, &spec, &e), -EEXIST);
    assert_non_null(strstr(e.msg, "'abx0h'"));
    assert_int_equal(net_link_index(w->host, "abx0h", &idx, NULL), 0);

    err_clear(&e);
    assert_int_equal(net_link_del(w->host, "abx7h", &e), -ENODEV);
    assert_non_null(strstr(e.msg, "cannot delete link 'abx7h'"));
    err_clear(&e);
    assert_int_equal(net_link_up(w->host, "abx\"h", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "no interface name of ours"));
    assert_int_equal(net_link_veth_add(w->host, "abcdefghijklmnop", "x", -EBADF, NULL), -EINVAL);
    /* An address on a missing link; a gateway of the wrong family. */
    struct net_ip a = nstest_ip("198.51.100.200");
    assert_int_equal(net_link_addr_add(w->host, "nosuch0", &a, 24, NULL), -ENODEV);
    struct net_block dst = nstest_block("2001:db8:5::", 48);
    assert_int_equal(net_link_route_add(w->host, "abx0h", &dst, &a, NULL), -EINVAL);
    /* Too many to list. */
    char names[1][IFNAMSIZ];
    _cleanup_close_ int ns1 = nstest_ns_new();
    sandbox_up(w, 1, ns1, &s);
    assert_int_equal(net_link_list(w->host, "abx", names, 1, NULL), -E2BIG);
    assert_int_equal(net_link_reclaim(w->host, "abx", NULL), 2);
}

static void
test_reclaim(void **state)
{
    struct world *w = *state;
    _cleanup_close_ int ns1 = nstest_ns_new();
    _cleanup_close_ int ns2 = nstest_ns_new();
    struct net_slot s;
    char names[8][IFNAMSIZ];
    int idx;

    /* A crashed run: pairs and a half-made one (both ends on the host). */
    sandbox_up(w, 0, ns1, &s);
    sandbox_up(w, 1, ns2, &s);
    assert_int_equal(net_link_veth_add(w->host, "abx2h", "abx2s", -EBADF, NULL), 0);
    assert_int_equal(net_link_veth_add(w->host, "other0", "other1", -EBADF, NULL), 0);
    assert_int_equal(net_link_list(w->host, "abx", names, 8, NULL), 4);

    int n = net_link_reclaim(w->host, "abx", NULL);
    assert_true(n == 3 || n == 4); /* abx2s may go with abx2h first */
    assert_int_equal(net_link_list(w->host, "abx", names, 8, NULL), 0);
    assert_int_equal(net_link_index(w->host, "other0", &idx, NULL), 0);
    assert_int_equal(net_link_reclaim(w->host, "abx", NULL), 0);
    assert_int_equal(net_link_del(w->host, "other0", NULL), 0);
}

static int
tests(void)
{
    const struct CMUnitTest t[] = {
            cmocka_unit_test_setup_teardown(test_up_reach_down, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_errors, world_setup, world_teardown),
            cmocka_unit_test_setup_teardown(test_reclaim, world_setup, world_teardown),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}

int
main(void)
{
    return nstest_main(tests);
}
