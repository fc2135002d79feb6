/*
 * test-policy.c - the egress policy and its words: addresses, CIDRs and names
 * accepted and refused (with their messages), every rule kind, allow over
 * deny, wildcard depth and apex, IPv6 and IPv4-mapped addresses, internet
 * off, closed policies for names, the spoofed-SNI case (an allowed name on
 * an address it never resolved to), the resolver record's bounds and
 * expiry, the forbidden ranges with operator exceptions, the list bounds,
 * and serialising back to strings.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "net/names.h"
#include "net/net.h"
#include "net/policy.h"

static struct net_addr
A(const char *s) {
    struct net_addr a;
    assert_int_equal(net_addr_parse(s, &a, NULL), 0);
    return a;
}

static struct net_policy *
make(bool internet, const char *const *allow, const char *const *deny)
{
    struct net_policy *p = NULL;
    struct err err = {0};

    assert_int_equal(policy_new(&p), 0);
    policy_set_internet(p, internet);
    for (; allow && *allow; allow++)
        assert_int_equal(policy_add(p, POLICY_ALLOW, *allow, 0, &err), 0);
    for (; deny && *deny; deny++)
        assert_int_equal(policy_add(p, POLICY_DENY, *deny, 0, &err), 0);
    return p;
}

static void
test_addresses(void **state)
{
    struct net_addr a;
    struct net_cidr c;
    struct err err = {0};
    char buf[NET_CIDR_STR];

    a = A("198.51.100.4");
    assert_int_equal(a.family, AF_INET);
    a = A("::ffff:169.254.169.254");
    assert_int_equal(a.family, AF_INET);
    net_addr_format(&a, buf);
    assert_string_equal(buf, "169.254.169.254");
    a = A("2001:DB8::1");
    net_addr_format(&a, buf);
    assert_string_equal(buf, "2001:db8::1");
    const char *bad[] = {"",      "198.51.100",  "198.51.100.04", "198.51.100.4 ", "fe80::1%eth0",
                         "[::1]", "256.0.113.1", "0x7f.0.0.1",    "198.51.100.4.5"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        assert_int_equal(net_addr_parse(bad[i], &a, NULL), -EINVAL);
    assert_int_equal(net_addr_parse("nope", &a, &err), -EINVAL);
    assert_string_equal(err.msg, "'nope' is not an IPv4 or IPv6 address");

    assert_int_equal(net_cidr_parse("10.1.2.3/8", &c, NULL), 0);
    net_cidr_format(&c, buf);
    assert_string_equal(buf, "10.0.0.0/8");
    assert_int_equal(net_cidr_parse("2001:db8:ffff::/33", &c, NULL), 0);
    net_cidr_format(&c, buf);
    assert_string_equal(buf, "2001:db8:8000::/33");
    assert_int_equal(net_cidr_parse("::ffff:10.0.0.0/104", &c, NULL), 0);
    net_cidr_format(&c, buf);
    assert_string_equal(buf, "10.0.0.0/8");
    const char *badc[] = {"10.0.0.0",    "10.0.0.0/33",        "::/129",       "10.0.0.0/",
                          "10.0.0.0/08", "10.0.0.0/-1",        "10.0.0.0/8/8", "x/8",
                          "/8",          "::ffff:10.0.0.0/95", "10.0.0.0/ 8"};
    for (size_t i = 0; i < ELEMENTSOF(badc); i++)
        assert_int_equal(net_cidr_parse(badc[i], &c, NULL), -EINVAL);
    assert_int_equal(net_cidr_parse("10.0.0.0/0", &c, NULL), 0);
    a = A("10.0.0.1");
    assert_true(net_cidr_contains(&c, &a));
    a = A("::1");
    assert_false(net_cidr_contains(&c, &a)); /* never across families */
}

static void
test_names(void **state)
{
    char n[NET_NAME_MAX + 1];
    char longname[300];
    struct err err = {0};

    assert_int_equal(net_name_normalize("Api.Example.COM", 15, 0, n, NULL), 0);
    assert_string_equal(n, "api.example.com");
    assert_int_equal(net_name_normalize("x.test.", 7, NET_NAME_FINAL_DOT, n, NULL), 0);
    assert_string_equal(n, "x.test");
    assert_int_equal(net_name_normalize("x.test.", 7, 0, n, NULL), -EINVAL);
    assert_int_equal(net_name_normalize("_srv._tcp.x.test", 16, NET_NAME_UNDERSCORE, n, NULL), 0);
    const char *bad[] = {"",      ".",   "a..b", ".a",           "a.",          "-a.b",
                         "a-.b",  "a b", "a_b",  "198.51.100.4", "300.0.113.1", "2130706433",
                         "a.123", "::1", "a\0b", "a/b",          "é.x"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        assert_int_equal(net_name_normalize(bad[i], strlen(bad[i]) + (i == 14 ? 2 : 0), 0, n, NULL),
                         -EINVAL);
    assert_int_equal(net_name_normalize("198.51.100.4", 12, 0, n, &err), -EINVAL);
    assert_string_equal(err.msg, "'198.51.100.4' is an address, not a host name");
    /* 63-byte labels pass, 64 do not; 253 bytes pass, 254 do not. */
    memset(longname, 'a', sizeof(longname));
    assert_int_equal(net_name_normalize(longname, 63, 0, n, NULL), 0);
    assert_int_equal(net_name_normalize(longname, 64, 0, n, NULL), -EINVAL);
    for (size_t i = 63; i < sizeof(longname); i += 64)
        longname[i] = '.';
    assert_int_equal(net_name_normalize(longname, 253, 0, n, NULL), 0);
    assert_true(net_name_valid(n, 0));
    assert_int_equal(net_name_normalize(longname, 254, 0, n, NULL), -EINVAL);
    assert_true(net_name_in_domain("a.b.x.test", "x.test"));
    assert_true(net_name_in_domain("x.test", "x.test"));
    assert_false(net_name_in_domain("ax.test", "x.test"));
    assert_false(net_name_valid("A.test", 0));
    assert_false(net_name_valid("a_b.test", 0));
    assert_true(net_name_valid("a_b.test", NET_NAME_UNDERSCORE));
}

static void
test_rules(void **state)
{
    struct policy_rule r;
    struct err err = {0};
    char buf[POLICY_RULE_STR];
    const struct {
        const char *in, *out;
        enum policy_kind kind;
    } good[] = {
            {"198.51.100.4", "198.51.100.4", POLICY_ADDR},
            {"198.51.100.4/32", "198.51.100.4/32", POLICY_CIDR},
            {"2001:DB8::/32", "2001:db8::/32", POLICY_CIDR},
            {"::ffff:198.51.100.8", "198.51.100.8", POLICY_ADDR},
            {"0.0.0.0/0", "0.0.0.0/0", POLICY_CIDR},
            {"API.X.com", "api.x.com", POLICY_NAME},
            {"*.Y.com", "*.y.com", POLICY_WILDCARD},
            {"*.com", "*.com", POLICY_WILDCARD},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        assert_int_equal(policy_rule_parse(good[i].in, &r, NULL), 0);
        assert_int_equal(r.kind, good[i].kind);
        policy_rule_format(&r, buf);
        assert_string_equal(buf, good[i].out);
    }
    const char *bad[] = {"*",         "*.",      "**.x.com",     "a.*.com",   "x.*",
                         "*x.com",    " x.com",  "x.com ",       "",          "198.51.100.4/33",
                         "fe80::1%1", "x.com/8", "http://x.com", "x.com:443", "198.51.100",
                         "gggg::1"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        assert_int_equal(policy_rule_parse(bad[i], &r, NULL), -EINVAL);
    assert_int_equal(policy_rule_parse("*", &r, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "network rule '*': a wildcard is '*.' and a domain ('*.example.com')");
}

static void
test_lists(void **state)
{
    struct net_policy *p = make(true, NULL, NULL);
    struct err err = {0};
    char s[32];
    char longrule[POLICY_RULE_LEN + 2];

    /* E2B's denyOut refuses names; ours takes them. */
    assert_int_equal(policy_add(p, POLICY_DENY, "x.com", POLICY_E2B, &err), -EINVAL);
    assert_string_equal(err.msg, "denyOut takes IP addresses and CIDRs only, not 'x.com'");
    assert_int_equal(policy_add(p, POLICY_DENY, "x.com", 0, NULL), 0);
    assert_int_equal(policy_add(p, POLICY_DENY, "X.COM", 0, NULL), 0); /* a duplicate */
    assert_int_equal(policy_add(p, POLICY_DENY, "198.51.100.4", POLICY_E2B, NULL), 0);
    assert_int_equal(policy_count(p, POLICY_DENY), 2);
    assert_non_null(policy_rule(p, POLICY_DENY, 1));
    assert_null(policy_rule(p, POLICY_DENY, 2));
    for (int i = 0; i < POLICY_RULES_MAX; i++) {
        (void)snprintf(s, sizeof(s), "h%d.test", i);
        assert_int_equal(policy_add(p, POLICY_ALLOW, s, 0, NULL), 0);
    }
    err_clear(&err);
    assert_int_equal(policy_add(p, POLICY_ALLOW, "one-more.test", 0, &err), -E2BIG);
    assert_string_equal(err.msg, "more than 256 allow entries");
    assert_int_equal(policy_add(p, POLICY_ALLOW, "h0.test", 0, NULL), 0); /* a duplicate */
    assert_int_equal(policy_count(p, POLICY_ALLOW), POLICY_RULES_MAX);
    memset(longrule, 'a', sizeof(longrule));
    longrule[sizeof(longrule) - 1] = '\0';
    assert_int_equal(policy_add(p, POLICY_DENY, longrule, 0, NULL), -EINVAL);
    assert_int_equal(policy_count(p, POLICY_DENY), 2);
    assert_null(policy_free(p));
    assert_null(policy_free(NULL));
}

static void
test_check_addr(void **state)
{
    const char *allow[] = {"198.51.100.8", "10.9.0.0/16", "2001:db8:1::/48", NULL};
    const char *deny[] = {"0.0.0.0/0", NULL};
    struct net_policy *open = make(true, NULL, NULL);
    struct net_policy *closed = make(true, allow, deny);
    struct net_policy *off = make(false, allow, NULL);
    struct policy_decision d;
    struct net_addr a;
    char line[256];

    a = A("198.51.100.1");
    assert_true(policy_check_addr(open, &a, &d));
    assert_int_equal(d.why, POLICY_WHY_DEFAULT);
    assert_false(policy_check_addr(closed, &a, &d));
    assert_int_equal(d.why, POLICY_WHY_DENY);
    policy_decision_format(closed, &d, line, sizeof(line));
    assert_string_equal(line, "denied by deny rule '0.0.0.0/0'");
    assert_false(policy_check_addr(off, &a, &d));
    assert_int_equal(d.why, POLICY_WHY_INTERNET_OFF);
    /* Allow beats deny (E2B: deny all, allow 198.51.100.8 -> reachable). */
    a = A("198.51.100.8");
    assert_true(policy_check_addr(closed, &a, &d));
    assert_int_equal(d.why, POLICY_WHY_ALLOW);
    assert_int_equal(d.rule, 0);
    assert_true(policy_check_addr(off, &a, &d));
    a = A("::ffff:10.9.200.1");
    assert_true(policy_check_addr(closed, &a, &d));
    assert_int_equal(d.rule, 1);
    /* 0.0.0.0/0 is all traffic: IPv6 too. */
    a = A("2001:db8::1111");
    assert_false(policy_check_addr(closed, &a, &d));
    a = A("2001:db8:1::1");
    assert_true(policy_check_addr(closed, &a, &d));
    assert_int_equal(d.rule, 2);
    policy_free(open);
    policy_free(closed);
    policy_free(off);

    /* ::/0 is IPv6 only; a single denied address leaves the rest. */
    const char *deny6[] = {"::/0", "198.51.100.8", NULL};
    struct net_policy *p = make(true, NULL, deny6);
    a = A("2001:db8::1111");
    assert_false(policy_check_addr(p, &a, NULL));
    a = A("198.51.100.1");
    assert_true(policy_check_addr(p, &a, NULL));
    a = A("198.51.100.8");
    assert_false(policy_check_addr(p, &a, &d));
    assert_int_equal(d.rule, 1);
    /* Name rules never decide for a connection without a name. */
    assert_int_equal(policy_add(p, POLICY_ALLOW, "dns.google", 0, NULL), 0);
    assert_false(policy_check_addr(p, &a, NULL));
    policy_free(p);
}

static void
test_check_name(void **state)
{
    const char *allow[] = {"api.x.com", "*.y.com", NULL};
    const char *deny[] = {"bad.y.com", "*.z.com", NULL};
    struct net_policy *p = make(true, allow, deny);
    struct policy_decision d;
    char line[256];

    assert_true(policy_check_name(p, "api.x.com", &d));
    assert_int_equal(d.why, POLICY_WHY_ALLOW);
    assert_true(policy_check_name(p, "x.com", &d)); /* open policy: no rule */
    assert_int_equal(d.why, POLICY_WHY_DEFAULT);
    /* Any depth below the wildcard, not the apex. */
    assert_true(policy_check_name(p, "a.y.com", &d));
    assert_int_equal(d.rule, 1);
    assert_true(policy_check_name(p, "a.b.c.y.com", &d));
    assert_int_equal(d.why, POLICY_WHY_ALLOW);
    assert_true(policy_check_name(p, "y.com", &d));
    assert_int_equal(d.why, POLICY_WHY_DEFAULT);
    assert_true(policy_check_name(p, "xy.com", &d));
    assert_int_equal(d.why, POLICY_WHY_DEFAULT);
    /* Allow beats deny: bad.y.com is under the allowed *.y.com. */
    assert_true(policy_check_name(p, "bad.y.com", &d));
    assert_int_equal(d.why, POLICY_WHY_ALLOW);
    assert_false(policy_check_name(p, "a.z.com", &d));
    assert_int_equal(d.why, POLICY_WHY_DENY);
    assert_int_equal(d.rule, 1);
    policy_decision_format(p, &d, line, sizeof(line));
    assert_string_equal(line, "denied by deny rule '*.z.com'");
    assert_true(policy_check_name(p, "z.com", NULL));
    /* Closed: only allowed names resolve, even when an address is allowed. */
    assert_int_equal(policy_add(p, POLICY_DENY, "0.0.0.0/0", 0, NULL), 0);
    assert_int_equal(policy_add(p, POLICY_ALLOW, "203.0.113.0/24", 0, NULL), 0);
    assert_false(policy_check_name(p, "code.example.test", &d));
    assert_int_equal(d.why, POLICY_WHY_CLOSED);
    assert_int_equal(d.rule, 2);
    policy_decision_format(p, &d, line, sizeof(line));
    assert_string_equal(line,
                        "denied: deny rule '0.0.0.0/0' closes all traffic and no allow rule names "
                        "it");
    assert_true(policy_check_name(p, "q.y.com", NULL));
    policy_set_internet(p, false);
    assert_false(policy_internet(p));
    assert_false(policy_check_name(p, "code.example.test", &d));
    assert_int_equal(d.why, POLICY_WHY_INTERNET_OFF);
    assert_true(policy_check_name(p, "api.x.com", NULL));
    policy_free(p);
}

static void
test_check_conn(void **state)
{
    const char *allow[] = {"api.x.com", "*.y.com", "198.51.100.9", NULL};
    const char *deny[] = {"0.0.0.0/0", "evil.test", NULL};
    struct net_policy *p = make(true, allow, deny);
    struct net_names *names = NULL;
    struct policy_decision d;
    struct net_addr good = A("198.51.100.34"), other = A("203.0.113.9"), nine = A("198.51.100.9");
    char line[256];

    assert_int_equal(net_names_new(16, &names), 0);
    assert_int_equal(net_names_add(names, "api.x.com", &good, 60, 1000), 0);
    assert_true(policy_check_conn(p, names, &good, "api.x.com", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_ALLOW);
    assert_int_equal(d.rule, 0);
    /* The spoofed SNI: an allowed name on an address it did not resolve to. */
    assert_false(policy_check_conn(p, names, &other, "api.x.com", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_UNRESOLVED);
    policy_decision_format(p, &d, line, sizeof(line));
    assert_string_equal(line, "denied: allow rule 'api.x.com' matched the name, but the name did "
                              "not resolve to this address");
    /* A name allowed and resolved, but another name on the same address. */
    assert_false(policy_check_conn(p, names, &good, "www.x.com", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_DENY);
    /* No name: the address rules alone. */
    assert_false(policy_check_conn(p, names, &good, NULL, 1000, &d));
    assert_true(policy_check_conn(p, names, &nine, NULL, 1000, &d));
    /* An allowed address needs no name, whatever name it carries. */
    assert_true(policy_check_conn(p, names, &nine, "evil.test", 1000, &d));
    assert_int_equal(d.rule, 2);
    /* The record expires (TTL 60 clamped up to NET_NAMES_TTL_MIN). */
    assert_true(
            policy_check_conn(p, names, &good, "api.x.com", 1000 + NET_NAMES_TTL_MIN - 1, NULL));
    assert_false(policy_check_conn(p, names, &good, "api.x.com", 1000 + NET_NAMES_TTL_MIN, &d));
    assert_int_equal(d.why, POLICY_WHY_UNRESOLVED);
    /* Any matching allow rule grants, not only the first. */
    assert_int_equal(policy_add(p, POLICY_ALLOW, "*.x.com", 0, NULL), 0);
    assert_int_equal(net_names_add(names, "api.x.com", &other, 600, 1000), 0);
    assert_true(policy_check_conn(p, names, &other, "api.x.com", 1500, &d));
    assert_int_equal(d.rule, 0);
    /* Open policy: an unresolved name is judged by the address rules (allowed). */
    struct net_policy *open = make(true, allow, NULL);
    assert_true(policy_check_conn(open, names, &good, "a.y.com", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_DEFAULT);
    /* A deny name rule refuses the connection naming it. */
    assert_int_equal(policy_add(open, POLICY_DENY, "evil.test", 0, NULL), 0);
    assert_false(policy_check_conn(open, names, &good, "evil.test", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_DENY);
    /* Internet off with the name unresolved. */
    policy_set_internet(open, false);
    assert_false(policy_check_conn(open, names, &good, "a.y.com", 1000, &d));
    assert_int_equal(d.why, POLICY_WHY_UNRESOLVED);
    assert_false(policy_check_conn(open, NULL, &good, "api.x.com", 1000, &d));
    policy_free(open);
    policy_free(p);
    net_names_free(names);
}

static void
test_names_record(void **state)
{
    struct net_names *n = NULL;
    struct net_addr a = A("198.51.100.1"), b = A("2001:db8::1111");
    char s[32];

    assert_int_equal(net_names_new(0, &n), -EINVAL);
    assert_int_equal(net_names_new(NET_NAMES_MAX + 1, &n), -EINVAL);
    assert_int_equal(net_names_new(4, &n), 0);
    assert_int_equal(net_names_add(n, "Bad.Name", &a, 60, 0), -EINVAL);
    assert_int_equal(net_names_add(n, "198.51.100.4", &a, 60, 0), -EINVAL);
    assert_int_equal(net_names_add(n, "one.test", &a, 0, 0), 0);
    assert_int_equal(net_names_add(n, "one.test", &b, UINT32_MAX, 0), 0);
    assert_true(net_names_has(n, "one.test", &b, NET_NAMES_TTL_MAX - 1));
    assert_false(net_names_has(n, "one.test", &b, NET_NAMES_TTL_MAX));
    assert_false(net_names_has(n, "two.test", &a, 0));
    /* Again for a known pair: the later expiry wins, no second entry. */
    assert_int_equal(net_names_add(n, "one.test", &a, 1000, 100), 0);
    assert_int_equal(net_names_add(n, "one.test", &a, 300, 0), 0);
    assert_int_equal(net_names_count(n, 0), 2);
    assert_true(net_names_has(n, "one.test", &a, 1099));
    /* Full: the entry expiring first goes. */
    for (int i = 0; i < 3; i++) {
        (void)snprintf(s, sizeof(s), "n%d.test", i);
        assert_int_equal(net_names_add(n, s, &a, 5000, 0), 0);
    }
    assert_int_equal(net_names_count(n, 0), 4);
    assert_false(net_names_has(n, "one.test", &a, 0));
    assert_true(net_names_has(n, "one.test", &b, 0));
    assert_true(net_names_has(n, "n0.test", &a, 0));
    /* Far in the future the expiry saturates instead of wrapping. */
    assert_int_equal(net_names_add(n, "late.test", &a, 60, UINT64_MAX - 10), 0);
    assert_true(net_names_has(n, "late.test", &a, UINT64_MAX - 1));
    net_names_clear(n);
    assert_int_equal(net_names_count(n, 0), 0);
    assert_null(net_names_free(n));
}

/* The address one up from a. */
static void
next_addr(struct net_addr *a)
{
    for (size_t k = a->family == AF_INET ? 4 : 16; k-- > 0;)
        if (++a->bytes[k] != 0)
            break;
}

static void
test_forbidden(void **state)
{
    struct net_cidr ok[2];
    struct net_addr a;
    const char *no[] = {"127.0.0.1",
                        "10.1.2.3",
                        "172.31.255.255",
                        "192.168.1.1",
                        "169.254.169.254",
                        "100.64.0.1",
                        "0.0.0.0",
                        "224.0.0.1",
                        "255.255.255.255",
                        "::1",
                        "::",
                        "fe80::1",
                        "fd00:ec2::254",
                        "fc00::1",
                        "ff02::1",
                        "64:ff9b::a9fe:a9fe",
                        "2002:a9fe:a9fe::1",
                        "::ffff:127.0.0.1",
                        "198.18.0.1",
                        "192.0.0.170"};
    /* Allowed addresses are made from the ranges' edges, so that no test
     * names an address on the real network: a range's last address is
     * forbidden and the next one up is not; the address below a range is
     * allowed and the next one up is not. */
    const char *last[] = {"10.255.255.255", "100.127.255.255", "172.31.255.255", "192.168.255.255"};
    const char *below[] = {"9.255.255.255", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"};

    for (size_t i = 0; i < ELEMENTSOF(no); i++) {
        a = A(no[i]);
        assert_non_null(net_addr_forbidden(&a, NULL, 0));
    }
    for (size_t i = 0; i < ELEMENTSOF(last); i++) {
        a = A(last[i]);
        assert_non_null(net_addr_forbidden(&a, NULL, 0));
        next_addr(&a);
        assert_null(net_addr_forbidden(&a, NULL, 0));
    }
    for (size_t i = 0; i < ELEMENTSOF(below); i++) {
        a = A(below[i]);
        assert_null(net_addr_forbidden(&a, NULL, 0));
        next_addr(&a);
        assert_non_null(net_addr_forbidden(&a, NULL, 0));
    }
    a = A("169.254.169.254");
    assert_string_equal(net_addr_forbidden(&a, NULL, 0), "link-local and metadata 169.254.0.0/16");
    a = A("fd00:ec2::254");
    assert_string_equal(net_addr_forbidden(&a, NULL, 0), "unique local and metadata fc00::/7");
    /* The operator's exceptions open exactly their blocks. */
    assert_int_equal(net_cidr_parse("10.1.2.0/24", &ok[0], NULL), 0);
    assert_int_equal(net_cidr_parse("fd12::/16", &ok[1], NULL), 0);
    a = A("10.1.2.3");
    assert_null(net_addr_forbidden(&a, ok, 2));
    a = A("10.1.3.3");
    assert_non_null(net_addr_forbidden(&a, ok, 2));
    a = A("fd12::5");
    assert_null(net_addr_forbidden(&a, ok, 2));
    a = A("fd00:ec2::254");
    assert_non_null(net_addr_forbidden(&a, ok, 2));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_addresses),  cmocka_unit_test(test_names),
            cmocka_unit_test(test_rules),      cmocka_unit_test(test_lists),
            cmocka_unit_test(test_check_addr), cmocka_unit_test(test_check_name),
            cmocka_unit_test(test_check_conn), cmocka_unit_test(test_names_record),
            cmocka_unit_test(test_forbidden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
