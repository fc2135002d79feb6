/*
 * test-nft-gen.c - the text of abx's nftables transactions (pure, no
 * kernel): what a sandbox's struct becomes, line for line where it
 * matters; blocks inside others left out of a set; refusal of bad names,
 * blocks, slots and bounds before any text is run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/nft.h"
#include "nstest.h"

static struct net_slot
slot0(void)
{
    struct net_pool p = {.v4 = nstest_block("198.51.100.0", 24), .v4_slot = 30};
    struct net_slot s;
    assert_int_equal(net_pool_slot(&p, 0, &s, NULL), 0);
    return s;
}

static void
test_sandbox_text(void **state)
{
    (void)state;
    struct net_slot s = slot0();
    struct net_nft_sandbox sb = {.ifname = "abx0h",
                                 .slot = &s,
                                 .default_drop = true,
                                 .proxy_port = 3128,
                                 .proxy_dports = {80, 443},
                                 .n_proxy_dports = 2};
    struct buf b;
    buf_init(&b, NET_NFT_CMD_MAX);
    assert_int_equal(net_nft_gen_sandbox_add(&sb, &b, NULL), 0);
    static const char *const want[] = {
            "create chain inet abx sb_abx0h\n",
            "add set inet abx abx0h_a4 { type ipv4_addr; flags interval; }\n",
            "add rule inet abx sb_abx0h ip saddr != 198.51.100.2 drop\n",
            "add rule inet abx sb_abx0h meta nfproto ipv6 drop\n",
            "add rule inet abx sb_abx0h oifname \"abx*\" drop\n",
            "add rule inet abx sb_abx0h meta l4proto @dnsproto th dport 53 drop\n",
            "add rule inet abx sb_abx0h ip daddr @never4 drop\n",
            "add rule inet abx sb_abx0h ip daddr @private4 ip daddr != @allowed4 drop\n",
            "add rule inet abx sb_abx0h ip daddr @abx0h_d4 drop\n",
            "add rule inet abx sb_abx0h ip daddr @abx0h_a4 accept\n",
            "add rule inet abx sb_abx0h drop\n",
            ("add rule inet abx in_abx0h ip daddr 198.51.100.1 meta l4proto @dnsproto th dport 53 "
             "accept\n"),
            "add rule inet abx in_abx0h tcp dport 3128 ct status dnat accept\n",
            "add rule inet abx nat_abx0h tcp dport 80 redirect to :3128\n",
            "add rule inet abx nat_abx0h tcp dport 443 redirect to :3128\n",
            "add rule inet abx in_abx0h drop\n",
            "add element inet abx egress { \"abx0h\" : jump sb_abx0h }\n",
    };
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        if (!strstr(b.data, want[i]))
            fail_msg("missing: %s\nin:\n%s", want[i], b.data);
    /* Deny before allow, and the default last; no anonymous sets (every
     * set of the table costs a scan on each new set and lookup). */
    assert_true(strstr(b.data, "@abx0h_d4 drop") < strstr(b.data, "@abx0h_a4 accept"));
    assert_true(strstr(b.data, "@abx0h_a6 accept") < strstr(b.data, "sb_abx0h drop\n"));
    assert_null(strstr(b.data, "{ tcp"));
    buf_done(&b);

    buf_init(&b, NET_NFT_CMD_MAX);
    assert_int_equal(net_nft_gen_sandbox_remove("abx0h", &b, NULL), 0);
    assert_non_null(strstr(b.data, "delete element inet abx egress { \"abx0h\" }\n"));
    assert_true(strstr(b.data, "delete element") < strstr(b.data, "delete chain"));
    assert_true(strstr(b.data, "delete chain") < strstr(b.data, "delete set"));
    buf_done(&b);
}

static void
test_lists_text(void **state)
{
    (void)state;
    struct net_block allow[] = {
            nstest_block("203.0.113.0", 26),  nstest_block("203.0.113.0", 24),
            nstest_block("203.0.113.64", 26), nstest_block("198.51.100.7", 32),
            nstest_block("2001:db8::", 32),   nstest_block("2001:db8:5::", 48),
    };
    struct buf b;
    buf_init(&b, NET_NFT_CMD_MAX);
    assert_int_equal(net_nft_gen_lists("abx3h", allow, ELEMENTSOF(allow), NULL, 0, &b, NULL), 0);
    assert_string_equal(b.data,
                        "flush set inet abx abx3h_a4\n"
                        "flush set inet abx abx3h_a6\n"
                        "flush set inet abx abx3h_d4\n"
                        "flush set inet abx abx3h_d6\n"
                        "add element inet abx abx3h_a4 { 198.51.100.7/32, 203.0.113.0/24 }\n"
                        "add element inet abx abx3h_a6 { 2001:db8::/32 }\n");
    buf_done(&b);
}

static void
test_refusals(void **state)
{
    (void)state;
    struct net_slot s = slot0();
    struct buf b;
    struct err e = {0};
    buf_init(&b, NET_NFT_CMD_MAX);
    static const char *const bad[] = {"",    "abx0h;",          "abx\"h", "ABX0H", "abx0h flush",
                                      "a-b", "abcdefghijklmnop"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct net_nft_sandbox sb = {.ifname = bad[i], .slot = &s};
        assert_int_equal(net_nft_gen_sandbox_add(&sb, &b, NULL), -EINVAL);
        assert_int_equal(net_nft_gen_sandbox_remove(bad[i], &b, NULL), -EINVAL);
        assert_int_equal(net_nft_gen_lists(bad[i], NULL, 0, NULL, 0, &b, NULL), -EINVAL);
    }
    struct net_nft_config c = {.uplink = "eth0; flush ruleset"};
    assert_int_equal(net_nft_gen_init(&c, &b, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "no interface name of ours"));
    assert_int_equal(b.len, 0);

    struct net_block host_bits = nstest_block("203.0.113.1", 24);
    assert_int_equal(net_nft_gen_lists("abx0h", &host_bits, 1, NULL, 0, &b, NULL), -EINVAL);
    struct net_block long_prefix = {nstest_ip("203.0.113.0"), 33};
    buf_reset(&b);
    assert_int_equal(net_nft_gen_allowed(&long_prefix, 1, &b, NULL), -EINVAL);
    assert_int_equal(
            net_nft_gen_lists("abx0h", &host_bits, NET_NFT_LIST_MAX + 1, NULL, 0, &b, NULL),
            -E2BIG);

    struct net_nft_sandbox sb = {.ifname = "abx0h", .slot = NULL};
    assert_int_equal(net_nft_gen_sandbox_add(&sb, &b, NULL), -EINVAL);
    sb.slot = &s;
    sb.proxy_port = 3128; /* but no port to redirect */
    assert_int_equal(net_nft_gen_sandbox_add(&sb, &b, NULL), -EINVAL);
    sb.n_proxy_dports = NET_NFT_DPORTS_MAX + 1;
    assert_int_equal(net_nft_gen_redirect(&sb, &b, NULL), -E2BIG);
    buf_done(&b);

    /* The default table: the never-open ranges and the masquerade. */
    struct net_nft_config d = {0};
    buf_init(&b, NET_NFT_CMD_MAX);
    assert_int_equal(net_nft_gen_init(&d, &b, NULL), 0);
    assert_non_null(strstr(b.data, "169.254.0.0/16"));
    assert_non_null(strstr(b.data, "fd00:ec2::254/128"));
    assert_non_null(strstr(b.data, "add element inet abx private4 { 10.0.0.0/8, 100.64.0.0/10, "
                                   "172.16.0.0/12, 192.168.0.0/16 }\n"));
    assert_non_null(strstr(b.data, "iifname \"abx*\" oifname != \"abx*\" masquerade\n"));
    buf_done(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sandbox_text),
            cmocka_unit_test(test_lists_text),
            cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
