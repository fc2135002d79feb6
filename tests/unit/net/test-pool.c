/*
 * test-pool.c - the address pool's arithmetic (pure): the default pool,
 * slot -> gateway and sandbox addresses for /30, /31, /64 and /127 slots,
 * carries across bytes, the slot bound (the smaller family's, capped at
 * NET_POOL_SLOTS_MAX), refusal of bad pools, blocks and names.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "net/pool.h"

static struct net_block
v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t prefix)
{
    return (struct net_block){{AF_INET, {a, b, c, d}}, prefix};
}

static struct net_block
v6(const char *s, uint8_t prefix)
{
    struct net_block blk = {{AF_INET6, {0}}, prefix};
    assert_int_equal(inet_pton(AF_INET6, s, blk.ip.bytes), 1);
    return blk;
}

static void
assert_ip(const struct net_ip *ip, const char *want)
{
    char s[NET_IP_STR];
    assert_int_equal(net_ip_format(ip, s), 0);
    assert_string_equal(s, want);
}

static void
test_default(void **state)
{
    (void)state;
    struct net_pool p;
    struct net_slot s;
    net_pool_default(&p);
    assert_int_equal(net_pool_check(&p, NULL), 0);
    assert_int_equal(net_pool_slots(&p), 16384);
    assert_int_equal(net_pool_slot(&p, 0, &s, NULL), 0);
    assert_ip(&s.gw4, "10.200.0.1");
    assert_ip(&s.sb4, "10.200.0.2");
    assert_int_equal(s.prefix4, 30);
    assert_true(s.has6);
    assert_ip(&s.gw6, "fd61:6278::1");
    assert_ip(&s.sb6, "fd61:6278::2");
    assert_int_equal(s.prefix6, 64);
    assert_int_equal(net_pool_slot(&p, 16383, &s, NULL), 0);
    assert_ip(&s.gw4, "10.200.255.253");
    assert_ip(&s.sb4, "10.200.255.254");
    assert_ip(&s.gw6, "fd61:6278:0:3fff::1");
    struct err e = {0};
    assert_int_equal(net_pool_slot(&p, 16384, &s, &e), -ERANGE);
    assert_non_null(strstr(e.msg, "16384"));
}

static void
test_slots(void **state)
{
    (void)state;
    struct net_pool p = {.v4 = v4(198, 51, 100, 0, 24), .v4_slot = 30};
    struct net_slot s;
    assert_int_equal(net_pool_slots(&p), 64);
    assert_int_equal(net_pool_slot(&p, 1, &s, NULL), 0);
    assert_ip(&s.gw4, "198.51.100.5");
    assert_ip(&s.sb4, "198.51.100.6");
    assert_false(s.has6);
    assert_int_equal(net_pool_slot(&p, 63, &s, NULL), 0);
    assert_ip(&s.sb4, "198.51.100.254");
    assert_int_equal(net_pool_slot(&p, 64, &s, NULL), -ERANGE);

    /* /31: no network or broadcast address to skip. */
    p.v4_slot = 31;
    assert_int_equal(net_pool_slots(&p), 128);
    assert_int_equal(net_pool_slot(&p, 3, &s, NULL), 0);
    assert_ip(&s.gw4, "198.51.100.6");
    assert_ip(&s.sb4, "198.51.100.7");

    /* Carries from one byte into the next, and the family with fewer
     * slots bounds the pool. */
    p = (struct net_pool){.v4 = v4(203, 0, 112, 0, 22),
                          .v4_slot = 30,
                          .v6 = v6("2001:db8:ab::", 120),
                          .v6_slot = 127};
    assert_int_equal(net_pool_check(&p, NULL), 0);
    assert_int_equal(net_pool_slots(&p), 128);
    assert_int_equal(net_pool_slot(&p, 127, &s, NULL), 0);
    assert_ip(&s.gw4, "203.0.113.253");
    assert_ip(&s.gw6, "2001:db8:ab::fe");
    assert_ip(&s.sb6, "2001:db8:ab::ff");
    assert_int_equal(s.prefix6, 127);

    /* A huge pool is capped at NET_POOL_SLOTS_MAX. */
    p = (struct net_pool){.v4 = v4(10, 0, 0, 0, 8), .v4_slot = 31};
    assert_int_equal(net_pool_slots(&p), NET_POOL_SLOTS_MAX);
    assert_int_equal(net_pool_slot(&p, NET_POOL_SLOTS_MAX - 1, &s, NULL), 0);
    assert_ip(&s.sb4, "10.1.255.255");
}

static void
test_bad(void **state)
{
    (void)state;
    struct err e = {0};
    struct net_slot s;
    struct net_pool p = {.v4 = v4(198, 51, 100, 1, 24), .v4_slot = 30};
    assert_int_equal(net_pool_check(&p, &e), -EINVAL);
    assert_string_equal(e.msg, "198.51.100.1/24 has bits set past its prefix");
    p.v4 = v4(198, 51, 100, 0, 24);
    p.v4_slot = 29;
    assert_int_equal(net_pool_check(&p, NULL), -EINVAL);
    p.v4_slot = 30;
    p.v4.prefix = 31;
    assert_int_equal(net_pool_check(&p, NULL), -EINVAL);
    p.v4.prefix = 33;
    assert_int_equal(net_pool_check(&p, NULL), -EINVAL);
    p.v4 = v6("2001:db8::", 32);
    assert_int_equal(net_pool_check(&p, NULL), -EINVAL);
    p.v4 = v4(198, 51, 100, 0, 24);
    p.v6 = v6("2001:db8::", 32);
    p.v6_slot = 96;
    assert_int_equal(net_pool_check(&p, NULL), -EINVAL);
    p.v6_slot = 64;
    assert_int_equal(net_pool_check(&p, NULL), 0);
    p.v6 = v4(203, 0, 113, 0, 24);
    assert_int_equal(net_pool_slot(&p, 0, &s, NULL), -EINVAL);
}

static void
test_blocks_and_names(void **state)
{
    (void)state;
    char s[NET_BLOCK_STR];
    struct net_block a = v4(198, 51, 100, 0, 24), b = v4(198, 51, 100, 128, 25);
    assert_true(net_block_contains(&a, &b));
    assert_false(net_block_contains(&b, &a));
    assert_true(net_block_contains(&a, &a));
    struct net_block c = v6("2001:db8::", 32);
    assert_false(net_block_contains(&a, &c));
    assert_int_equal(net_block_format(&c, s), 0);
    assert_string_equal(s, "2001:db8::/32");
    struct net_block z = {{0, {0}}, 0};
    assert_int_equal(net_block_check(&z, NULL), -EAFNOSUPPORT);

    char h[IFNAMSIZ], sb[IFNAMSIZ];
    net_pool_ifnames(7, h, sb);
    assert_string_equal(h, "abx7h");
    assert_string_equal(sb, "abx7s");
    net_pool_ifnames(UINT32_MAX, h, sb);
    assert_string_equal(h, "abx4294967295h");
    assert_true(net_ifname_valid(h));
    assert_true(net_ifname_valid("eth0"));
    assert_false(net_ifname_valid(""));
    assert_false(net_ifname_valid("abcdefghijklmnop")); /* 16 bytes */
    assert_true(net_ifname_valid("abcdefghijklmno"));
    assert_false(net_ifname_valid("Eth0"));
    assert_false(net_ifname_valid("br-lan"));
    assert_false(net_ifname_valid("a\"b"));
    assert_false(net_ifname_valid("a b"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_default),
            cmocka_unit_test(test_slots),
            cmocka_unit_test(test_bad),
            cmocka_unit_test(test_blocks_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
