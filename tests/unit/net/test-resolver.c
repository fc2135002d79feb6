/*
 * test-resolver.c - the sandboxes' resolver against a test upstream server,
 * all on loopback and on one event loop: the upstream (UDP and TCP on
 * 127.0.0.1, random ports) answers a test zone under x.test, the resolver
 * listens on 127.0.0.1, and "sandboxes" are clients bound to 127.0.0.2..4,
 * which the lookup callback maps to their policies (127.0.0.9 is no
 * sandbox). Nothing leaves the machine, no root needed.
 *
 * The zone: a.x.test A 198.51.100.7 and AAAA 2001:db8::7; c.x.test CNAME
 * a.x.test; d.x.test CNAME evil.x.test (A 203.0.113.66); t.x.test TXT;
 * slow.x.test never answered; big.x.test truncated over UDP, A 203.0.113.9
 * over TCP; spoof.x.test answered first with a wrong id and a wrong
 * question (A 203.0.113.66), then rightly (A 198.51.100.8).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/dns.h"
#include "net/names.h"
#include "net/policy.h"
#include "net/resolver.h"
#include "util/loop.h"
#include "util/timeutil.h"

#define TIMEOUT_MS 200 /* the resolver's wait per upstream in these tests */
#define CAP        4   /* queries in flight per sandbox */
#define CAP_ALL    6   /* queries in flight in all */
#define CONNS      2   /* TCP connections per sandbox */
#define IDLE_MS    200 /* an idle TCP connection is closed */
#define SB         3   /* sandboxes */

struct sandbox {
    const char *addr;
    uint64_t id;
    struct net_policy *policy;
    struct net_names *names;
    struct resolver_stats stats;
    unsigned flags;
};

static struct loop *loop;
static struct resolver *res;
static struct sandbox sbs[SB];
static int up_udp = -1, up_tcp = -1;
static struct loop_io *up_udp_io, *up_tcp_io;
static unsigned asked_udp, asked_tcp, asked_slow, asked_evil, asked_txt;

/* The test upstream. */

static ldns_pkt *
zone_answer(const ldns_pkt *q, bool tcp, bool *ret_silent)
{
    ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(q), 0);
    char *owner = ldns_rdf2str(ldns_rr_owner(qr));
    ldns_rr_type t = ldns_rr_get_type(qr);
    ldns_pkt *p = ldns_pkt_new();
    const char *rrs[3] = {NULL};
    ldns_rr *rr = NULL;

    *ret_silent = false;
    for (char *c = owner; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    ldns_pkt_set_id(p, ldns_pkt_id(q));
    ldns_pkt_set_qr(p, true);
    ldns_pkt_set_rd(p, ldns_pkt_rd(q));
    ldns_pkt_set_ra(p, true);
    ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, ldns_rr_clone(qr));
    if (strcmp(owner, "a.x.test.") == 0 && t == LDNS_RR_TYPE_A) {
        rrs[0] = "a.x.test. 60 IN A 198.51.100.7";
    } else if (strcmp(owner, "a.x.test.") == 0 && t == LDNS_RR_TYPE_AAAA) {
        rrs[0] = "a.x.test. 60 IN AAAA 2001:db8::7";
    } else if (strcmp(owner, "c.x.test.") == 0) {
        rrs[0] = "c.x.test. 60 IN CNAME a.x.test.";
        rrs[1] = "a.x.test. 60 IN A 198.51.100.7";
    } else if (strcmp(owner, "d.x.test.") == 0) {
        rrs[0] = "d.x.test. 60 IN CNAME evil.x.test.";
        rrs[1] = "evil.x.test. 60 IN A 203.0.113.66";
    } else if (strcmp(owner, "evil.x.test.") == 0) {
        asked_evil++;
        rrs[0] = "evil.x.test. 60 IN A 203.0.113.66";
    } else if (strcmp(owner, "t.x.test.") == 0) {
        asked_txt++;
        rrs[0] = "t.x.test. 60 IN TXT \"hello\"";
    } else if (strcmp(owner, "slow.x.test.") == 0) {
        asked_slow++;
        *ret_silent = true;
    } else if (strcmp(owner, "big.x.test.") == 0 && !tcp) {
        ldns_pkt_set_tc(p, true);
    } else if (strcmp(owner, "big.x.test.") == 0) {
        rrs[0] = "big.x.test. 60 IN A 203.0.113.9";
    } else if (strcmp(owner, "spoof.x.test.") == 0) {
        rrs[0] = "spoof.x.test. 60 IN A 198.51.100.8";
    } else {
        ldns_pkt_set_rcode(p, LDNS_RCODE_NXDOMAIN);
    }
    for (size_t i = 0; i < 3 && rrs[i]; i++) {
        assert_int_equal(ldns_rr_new_frm_str(&rr, rrs[i], 0, NULL, NULL), LDNS_STATUS_OK);
        ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr);
    }
    free(owner);
    return p;
}

static void
send_pkt(int fd, const ldns_pkt *p, const struct sockaddr_storage *to, socklen_t tl)
{
    uint8_t *wire = NULL;
    size_t n = 0;

    assert_int_equal(ldns_pkt2wire(&wire, p, &n), LDNS_STATUS_OK);
    assert_int_equal(sendto(fd, wire, n, 0, (const struct sockaddr *)to, tl), (ssize_t)n);
    free(wire);
}

static void
up_udp_cb(struct loop_io *io, uint32_t revents, void *userdata)
{
    uint8_t buf[4096];
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    ldns_pkt *q = NULL, *a;
    bool silent;
    ssize_t n;

    (void)io;
    (void)revents;
    (void)userdata;
    n = recvfrom(up_udp, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&ss, &sl);
    if (n <= 0)
        return;
    asked_udp++;
    assert_int_equal(ldns_wire2pkt(&q, buf, (size_t)n), LDNS_STATUS_OK);
    a = zone_answer(q, false, &silent);
    if (!silent) {
        char *owner = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(q), 0)));
        if (strcasecmp(owner, "spoof.x.test.") == 0) {
            /* A wrong id, then a wrong question, from the right address. */
            ldns_pkt *bad = ldns_pkt_clone(a);
            ldns_rr *rr = NULL;
            ldns_pkt_set_id(bad, (uint16_t)(ldns_pkt_id(q) ^ 0x5555));
            send_pkt(up_udp, bad, &ss, sl);
            ldns_pkt_free(bad);
            bad = ldns_pkt_new();
            ldns_pkt_set_id(bad, ldns_pkt_id(q));
            ldns_pkt_set_qr(bad, true);
            assert_int_equal(ldns_rr_new_question_frm_str(&rr, "other.x.test. IN A", NULL, NULL),
                             LDNS_STATUS_OK);
            ldns_pkt_push_rr(bad, LDNS_SECTION_QUESTION, rr);
            assert_int_equal(
                    ldns_rr_new_frm_str(&rr, "other.x.test. 60 IN A 203.0.113.66", 0, NULL, NULL),
                    LDNS_STATUS_OK);
            ldns_pkt_push_rr(bad, LDNS_SECTION_ANSWER, rr);
            send_pkt(up_udp, bad, &ss, sl);
            ldns_pkt_free(bad);
        }
        free(owner);
        send_pkt(up_udp, a, &ss, sl);
    }
    ldns_pkt_free(a);
    ldns_pkt_free(q);
}

struct up_conn {
    int fd;
    struct loop_io *io;
    uint8_t buf[2 + 4096];
    size_t len;
};

static void
up_conn_cb(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct up_conn *c = userdata;
    ldns_pkt *q = NULL, *a;
    uint8_t *wire = NULL;
    size_t n = 0, want;
    bool silent;
    ssize_t k;

    (void)io;
    (void)revents;
    k = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
    if (k > 0)
        c->len += (size_t)k;
    want = c->len >= 2 ? 2 + ((size_t)c->buf[0] << 8 | c->buf[1]) : SIZE_MAX;
    if (k > 0 && c->len < want)
        return;
    if (c->len == want) {
        asked_tcp++;
        assert_int_equal(ldns_wire2pkt(&q, c->buf + 2, c->len - 2), LDNS_STATUS_OK);
        a = zone_answer(q, true, &silent);
        assert_int_equal(ldns_pkt2wire(&wire, a, &n), LDNS_STATUS_OK);
        uint8_t len2[2] = {(uint8_t)(n >> 8), (uint8_t)n};
        assert_int_equal(write(c->fd, len2, 2), 2);
        assert_int_equal(write(c->fd, wire, n), (ssize_t)n);
        free(wire);
        ldns_pkt_free(a);
        ldns_pkt_free(q);
    }
    loop_io_free(c->io);
    close(c->fd);
    free(c);
}

static void
up_tcp_cb(struct loop_io *io, uint32_t revents, void *userdata)
{
    struct up_conn *c = calloc(1, sizeof(*c));

    (void)io;
    (void)revents;
    (void)userdata;
    assert_non_null(c);
    c->fd = accept4(up_tcp, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    assert_true(c->fd >= 0);
    assert_int_equal(loop_io_add(loop, c->fd, EPOLLIN, up_conn_cb, c, &c->io), 0);
}

/* Sockets. */

static socklen_t
sa(const char *addr, uint16_t port, struct sockaddr_in *a)
{
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, addr, &a->sin_addr), 1);
    return sizeof(*a);
}

/* A socket bound to addr:port, or -1 when that port is taken. */
static int
try_bound(int type, const char *addr, uint16_t port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    int one = 1;

    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sa(addr, port, &a)) < 0) {
        assert_int_equal(errno, EADDRINUSE);
        close(fd);
        return -1;
    }
    return fd;
}

static int
bound(int type, const char *addr, uint16_t port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    int one = 1;

    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sa(addr, port, &a)), 0);
    return fd;
}

static uint16_t
port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t n = sizeof(a);

    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
    return ntohs(a.sin_port);
}

static int
lookup(const struct net_addr *src, struct resolver_client *ret, void *userdata)
{
    char s[NET_ADDR_STR];

    (void)userdata;
    net_addr_format(src, s);
    for (size_t i = 0; i < SB; i++)
        if (strcmp(s, sbs[i].addr) == 0) {
            *ret = (struct resolver_client){sbs[i].id, sbs[i].policy, sbs[i].names, &sbs[i].stats,
                                            sbs[i].flags};
            return 0;
        }
    return -ENOENT;
}

static int
setup(void **state)
{
    struct resolver_upstream u[2] = {0};
    struct resolver_config c = {0};
    struct err err = {0};

    (void)state;
    asked_udp = asked_tcp = asked_slow = asked_evil = asked_txt = 0;
    assert_int_equal(loop_new(&loop), 0);
    /* TCP on the UDP port: another test's connection may hold it. */
    for (int i = 0; i < 10 && up_tcp < 0; i++) {
        if (up_udp >= 0)
            close(up_udp);
        up_udp = bound(SOCK_DGRAM, "127.0.0.1", 0);
        up_tcp = try_bound(SOCK_STREAM, "127.0.0.1", port_of(up_udp));
    }
    assert_true(up_tcp >= 0);
    assert_int_equal(listen(up_tcp, 16), 0);
    assert_int_equal(loop_io_add(loop, up_udp, EPOLLIN, up_udp_cb, NULL, &up_udp_io), 0);
    assert_int_equal(loop_io_add(loop, up_tcp, EPOLLIN, up_tcp_cb, NULL, &up_tcp_io), 0);

    sbs[0] = (struct sandbox){.addr = "127.0.0.2", .id = 1};
    sbs[1] = (struct sandbox){.addr = "127.0.0.3", .id = 2};
    sbs[2] = (struct sandbox){.addr = "127.0.0.4", .id = 3, .flags = DNS_ALL_TYPES};
    for (size_t i = 0; i < SB; i++) {
        assert_int_equal(policy_new(&sbs[i].policy), 0);
        assert_int_equal(net_names_new(64, &sbs[i].names), 0);
    }
    assert_int_equal(policy_add(sbs[0].policy, POLICY_DENY, "evil.x.test", 0, NULL), 0);
    assert_int_equal(policy_add(sbs[1].policy, POLICY_DENY, "0.0.0.0/0", 0, NULL), 0);
    assert_int_equal(policy_add(sbs[1].policy, POLICY_ALLOW, "a.x.test", 0, NULL), 0);

    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(net_addr_parse("127.0.0.1", &u[i].addr, NULL), 0);
        u[i].port = port_of(up_udp);
    }
    c.loop = loop;
    c.udp_fd = c.tcp_fd = -EBADF;
    assert_int_equal(net_addr_parse("127.0.0.1", &c.listen, NULL), 0);
    c.upstreams = u;
    c.n_upstreams = 2;
    c.lookup = lookup;
    c.timeout_ms = TIMEOUT_MS;
    c.inflight_sandbox_max = CAP;
    c.inflight_max = CAP_ALL;
    c.tcp_conns_sandbox_max = CONNS;
    c.tcp_idle_ms = IDLE_MS;
    /* Likewise for the resolver's TCP port. */
    int k = -EADDRINUSE;
    for (int i = 0; i < 10 && k == -EADDRINUSE; i++) {
        err = (struct err){0};
        k = resolver_new(&c, &res, &err);
    }
    if (k < 0)
        fail_msg("resolver_new: %s", err.msg);
    assert_int_equal(resolver_udp_port(res), resolver_tcp_port(res));
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    res = resolver_free(res);
    for (size_t i = 0; i < SB; i++) {
        sbs[i].policy = policy_free(sbs[i].policy);
        sbs[i].names = net_names_free(sbs[i].names);
    }
    loop_io_free(up_udp_io);
    loop_io_free(up_tcp_io);
    close(up_udp);
    close(up_tcp);
    up_udp = up_tcp = -1;
    /* Runs the graveyard and any upstream connection left. */
    (void)loop_run_once(loop, 0);
    loop = loop_free(loop);
    return 0;
}

/* Clients. */

static size_t
query_wire(const char *name, ldns_rr_type t, uint16_t id, uint8_t *out, size_t cap)
{
    ldns_pkt *p = NULL;
    uint8_t *wire = NULL;
    size_t n = 0;

    assert_int_equal(ldns_pkt_query_new_frm_str(&p, name, t, LDNS_RR_CLASS_IN, LDNS_RD),
                     LDNS_STATUS_OK);
    ldns_pkt_set_id(p, id);
    assert_int_equal(ldns_pkt2wire(&wire, p, &n), LDNS_STATUS_OK);
    assert_true(n <= cap);
    memcpy(out, wire, n);
    free(wire);
    ldns_pkt_free(p);
    return n;
}

/* Runs the loop until fd is readable or ms pass. */
static bool
pump(int fd, int ms)
{
    uint64_t end = now_msec() + (uint64_t)ms;

    while (now_msec() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1)
            return true;
        (void)loop_run_once(loop, 5);
    }
    return false;
}

static void
send_raw(int fd, const void *m, size_t n)
{
    struct sockaddr_in a;

    assert_int_equal(
            sendto(fd, m, n, 0, (struct sockaddr *)&a, sa("127.0.0.1", resolver_udp_port(res), &a)),
            (ssize_t)n);
}

/* The answer on fd within ms, or NULL. */
static ldns_pkt *
receive(int fd, int ms)
{
    uint8_t buf[4096];
    ldns_pkt *p = NULL;
    ssize_t n;

    if (!pump(fd, ms))
        return NULL;
    n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    assert_true(n > 0);
    assert_int_equal(ldns_wire2pkt(&p, buf, (size_t)n), LDNS_STATUS_OK);
    return p;
}

/* Asks name/t from src over UDP; the answer, or NULL after 1 s. */
static ldns_pkt *
ask(const char *src, const char *name, ldns_rr_type t)
{
    uint8_t m[512];
    int fd = bound(SOCK_DGRAM, src, 0);
    size_t n = query_wire(name, t, 0x4242, m, sizeof(m));
    ldns_pkt *p;

    send_raw(fd, m, n);
    p = receive(fd, 1000);
    close(fd);
    if (p)
        assert_int_equal(ldns_pkt_id(p), 0x4242);
    return p;
}

static int
rcode(ldns_pkt *p)
{
    return (int)ldns_pkt_get_rcode(p);
}

static void
expect_addr(ldns_pkt *p, size_t i, const char *addr)
{
    ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_answer(p), i);
    char *s;

    assert_non_null(rr);
    s = ldns_rdf2str(ldns_rr_rdf(rr, 0));
    assert_string_equal(s, addr);
    free(s);
}

static bool
recorded(struct sandbox *sb, const char *name, const char *addr)
{
    struct net_addr a;

    assert_int_equal(net_addr_parse(addr, &a, NULL), 0);
    return net_names_has(sb->names, name, &a, now_msec() / 1000);
}

/* The tests. */

static void
test_allowed(void **state)
{
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 1);
    expect_addr(p, 0, "198.51.100.7");
    ldns_pkt_free(p);
    assert_true(recorded(&sbs[0], "a.x.test", "198.51.100.7"));

    p = ask("127.0.0.2", "A.x.Test", LDNS_RR_TYPE_AAAA);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    expect_addr(p, 0, "2001:db8::7");
    ldns_pkt_free(p);
    assert_true(recorded(&sbs[0], "a.x.test", "2001:db8::7"));

    p = ask("127.0.0.2", "c.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 2);
    expect_addr(p, 1, "198.51.100.7");
    ldns_pkt_free(p);
    assert_true(recorded(&sbs[0], "c.x.test", "198.51.100.7"));
    assert_false(recorded(&sbs[1], "a.x.test", "198.51.100.7"));

    assert_int_equal(sbs[0].stats.queries, 3);
    assert_int_equal(sbs[0].stats.forwarded, 3);
    assert_int_equal(sbs[0].stats.answered, 3);
    assert_int_equal(sbs[0].stats.inflight, 0);
}

static void
test_denied(void **state)
{
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "evil.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NXDOMAIN);
    ldns_pkt_free(p);
    assert_int_equal(asked_evil, 0);

    /* Denied at a link of the chain: asked, then NXDOMAIN, no address. */
    p = ask("127.0.0.2", "d.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NXDOMAIN);
    assert_int_equal(ldns_pkt_ancount(p), 0);
    ldns_pkt_free(p);
    assert_false(recorded(&sbs[0], "d.x.test", "203.0.113.66"));
    assert_int_equal(sbs[0].stats.denied, 2);

    /* A closed policy: only its allowed name is asked. */
    unsigned before = asked_udp;
    p = ask("127.0.0.3", "c.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NXDOMAIN);
    ldns_pkt_free(p);
    assert_int_equal(asked_udp, before);
    p = ask("127.0.0.3", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    ldns_pkt_free(p);
    assert_true(recorded(&sbs[1], "a.x.test", "198.51.100.7"));
}

static void
test_types(void **state)
{
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "t.x.test", LDNS_RR_TYPE_TXT);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_REFUSED);
    ldns_pkt_free(p);
    assert_int_equal(asked_txt, 0);
    assert_int_equal(sbs[0].stats.refused, 1);

    p = ask("127.0.0.4", "t.x.test", LDNS_RR_TYPE_TXT);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 1);
    ldns_pkt_free(p);
    assert_int_equal(asked_txt, 1);
}

static void
test_unknown(void **state)
{
    struct resolver_totals t;
    ldns_pkt *p;

    (void)state;
    int fd = bound(SOCK_DGRAM, "127.0.0.9", 0);
    uint8_t m[512];
    size_t n = query_wire("a.x.test", LDNS_RR_TYPE_A, 7, m, sizeof(m));
    send_raw(fd, m, n);
    p = receive(fd, 300);
    assert_null(p);
    close(fd);
    assert_int_equal(asked_udp, 0);

    /* Over TCP: closed at once. */
    struct sockaddr_in a;
    fd = bound(SOCK_STREAM, "127.0.0.9", 0);
    assert_int_equal(
            connect(fd, (struct sockaddr *)&a, sa("127.0.0.1", resolver_tcp_port(res), &a)), 0);
    assert_true(pump(fd, 1000));
    char c;
    assert_true(read(fd, &c, 1) <= 0);
    close(fd);

    resolver_totals(res, &t);
    assert_int_equal(t.unknown, 2);
}

static void
test_timeout(void **state)
{
    uint64_t t0 = now_msec();
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "slow.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_SERVFAIL);
    ldns_pkt_free(p);
    assert_true(now_msec() - t0 >= 2 * TIMEOUT_MS);
    assert_int_equal(asked_slow, 2);
    assert_int_equal(sbs[0].stats.upstream_failures, 2);
    assert_int_equal(sbs[0].stats.servfail, 1);
    assert_int_equal(sbs[0].stats.inflight, 0);
}

static void
test_truncated(void **state)
{
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "big.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    assert_false(ldns_pkt_tc(p));
    expect_addr(p, 0, "203.0.113.9");
    ldns_pkt_free(p);
    assert_int_equal(asked_tcp, 1);
    assert_int_equal(sbs[0].stats.tcp_fallbacks, 1);
    assert_true(recorded(&sbs[0], "big.x.test", "203.0.113.9"));
}

static void
test_spoofed(void **state)
{
    ldns_pkt *p;

    (void)state;
    p = ask("127.0.0.2", "spoof.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    assert_int_equal(ldns_pkt_ancount(p), 1);
    expect_addr(p, 0, "198.51.100.8");
    ldns_pkt_free(p);
    assert_false(recorded(&sbs[0], "spoof.x.test", "203.0.113.66"));
    assert_int_equal(sbs[0].stats.upstream_failures, 0);
}

/* Reads one length-prefixed answer from a TCP client socket. */
static ldns_pkt *
tcp_receive(int fd)
{
    uint8_t buf[2 + 4096];
    size_t have = 0, want = 2;
    ldns_pkt *p = NULL;

    while (have < want) {
        if (!pump(fd, 1000))
            return NULL;
        ssize_t n = recv(fd, buf + have, want - have, MSG_DONTWAIT);
        if (n <= 0)
            return NULL;
        have += (size_t)n;
        if (have == 2)
            want = 2 + ((size_t)buf[0] << 8 | buf[1]);
    }
    assert_int_equal(ldns_wire2pkt(&p, buf + 2, want - 2), LDNS_STATUS_OK);
    return p;
}

static int
tcp_client(const char *src)
{
    struct sockaddr_in a;
    int fd = bound(SOCK_STREAM, src, 0);

    assert_int_equal(
            connect(fd, (struct sockaddr *)&a, sa("127.0.0.1", resolver_tcp_port(res), &a)), 0);
    return fd;
}

static void
test_tcp_client(void **state)
{
    uint8_t m[1024];
    size_t n;
    ldns_pkt *p;
    bool seen[3] = {false};

    (void)state;
    int fd = tcp_client("127.0.0.2");
    /* Two queries in one write, then a half-close: both answered, then
     * the resolver closes. */
    n = query_wire("a.x.test", LDNS_RR_TYPE_A, 1, m + 2, sizeof(m) - 2);
    m[0] = (uint8_t)(n >> 8), m[1] = (uint8_t)n;
    size_t n2 = query_wire("t.x.test", LDNS_RR_TYPE_TXT, 2, m + 4 + n, sizeof(m) - 4 - n);
    m[2 + n] = (uint8_t)(n2 >> 8), m[3 + n] = (uint8_t)n2;
    assert_int_equal(write(fd, m, 4 + n + n2), (ssize_t)(4 + n + n2));
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    for (int i = 0; i < 2; i++) {
        p = tcp_receive(fd);
        assert_non_null(p);
        assert_true(ldns_pkt_id(p) == 1 || ldns_pkt_id(p) == 2);
        seen[ldns_pkt_id(p)] = true;
        assert_int_equal(rcode(p), ldns_pkt_id(p) == 1 ? DNS_NOERROR : DNS_REFUSED);
        ldns_pkt_free(p);
    }
    assert_true(seen[1] && seen[2]);
    assert_null(tcp_receive(fd)); /* closed */
    close(fd);
    assert_true(recorded(&sbs[0], "a.x.test", "198.51.100.7"));
    assert_int_equal(sbs[0].stats.tcp_conns, 0);

    /* A length past DNS_QUERY_MAX closes the connection. */
    fd = tcp_client("127.0.0.2");
    m[0] = 0xff, m[1] = 0xff;
    assert_int_equal(write(fd, m, 2), 2);
    assert_null(tcp_receive(fd));
    close(fd);
    assert_int_equal(sbs[0].stats.tcp_conns, 0);
}

static void
test_cap(void **state)
{
    uint8_t m[512];
    size_t n;
    ldns_pkt *p;

    (void)state;
    int fd = bound(SOCK_DGRAM, "127.0.0.2", 0);
    for (uint16_t id = 1; id <= CAP; id++) {
        n = query_wire("slow.x.test", LDNS_RR_TYPE_A, id, m, sizeof(m));
        send_raw(fd, m, n);
    }
    for (int i = 0; i < 20 && sbs[0].stats.inflight < CAP; i++)
        (void)loop_run_once(loop, 5);
    assert_int_equal(sbs[0].stats.inflight, CAP);
    n = query_wire("a.x.test", LDNS_RR_TYPE_A, 99, m, sizeof(m));
    send_raw(fd, m, n);
    p = receive(fd, 100);
    assert_non_null(p);
    assert_int_equal(ldns_pkt_id(p), 99);
    assert_int_equal(rcode(p), DNS_REFUSED);
    ldns_pkt_free(p);
    assert_int_equal(sbs[0].stats.over_limit, 1);

    /* Another sandbox is not held up. */
    p = ask("127.0.0.3", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    ldns_pkt_free(p);

    /* All CAP unless a slow machine let some time out meanwhile. */
    size_t had = sbs[0].stats.inflight;
    assert_int_equal(resolver_forget(res, 1), had);
    assert_int_equal(sbs[0].stats.inflight, 0);
    assert_int_equal(sbs[0].stats.dropped, had);
    assert_null(receive(fd, 2 * TIMEOUT_MS + 100));
    close(fd);
}

static void
test_cap_all(void **state)
{
    uint8_t m[512];
    size_t n;
    ldns_pkt *p;

    (void)state;
    int fd = bound(SOCK_DGRAM, "127.0.0.2", 0);
    int fd4 = bound(SOCK_DGRAM, "127.0.0.4", 0);
    for (uint16_t id = 1; id <= CAP; id++) {
        n = query_wire("slow.x.test", LDNS_RR_TYPE_A, id, m, sizeof(m));
        send_raw(fd, m, n);
        if (id <= CAP_ALL - CAP)
            send_raw(fd4, m, n);
    }
    for (int i = 0; i < 20 && sbs[0].stats.inflight + sbs[2].stats.inflight < CAP_ALL; i++)
        (void)loop_run_once(loop, 5);
    assert_int_equal(sbs[0].stats.inflight + sbs[2].stats.inflight, CAP_ALL);

    /* A third sandbox, under its own cap, meets the resolver's. */
    p = ask("127.0.0.3", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_REFUSED);
    ldns_pkt_free(p);
    assert_int_equal(sbs[1].stats.over_limit, 1);

    /* Room again once one sandbox's queries are gone. */
    size_t had = sbs[2].stats.inflight;
    assert_int_equal(resolver_forget(res, 3), had);
    p = ask("127.0.0.3", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    ldns_pkt_free(p);
    close(fd);
    close(fd4);
}

/* Whether the resolver closed fd within ms. */
static bool
closed_within(int fd, int ms)
{
    char c;

    return pump(fd, ms) && read(fd, &c, 1) <= 0;
}

static void
test_tcp_limits(void **state)
{
    int fds[CONNS + 1];
    uint8_t m[512];
    size_t n;
    ldns_pkt *p;

    (void)state;
    uint64_t t0 = now_msec();
    for (size_t i = 0; i < CONNS + 1; i++) {
        fds[i] = tcp_client("127.0.0.2");
        for (int k = 0; k < 4; k++)
            (void)loop_run_once(loop, 5);
    }
    /* The one past the per-sandbox cap is closed at once; the others are
     * served. */
    assert_true(closed_within(fds[CONNS], 500));
    assert_int_equal(sbs[0].stats.tcp_conns, CONNS);
    assert_int_equal(sbs[0].stats.over_limit, 1);
    n = query_wire("a.x.test", LDNS_RR_TYPE_A, 3, m + 2, sizeof(m) - 2);
    m[0] = (uint8_t)(n >> 8), m[1] = (uint8_t)n;
    assert_int_equal(write(fds[0], m, 2 + n), (ssize_t)(2 + n));
    p = tcp_receive(fds[0]);
    assert_non_null(p);
    assert_int_equal(ldns_pkt_id(p), 3);
    ldns_pkt_free(p);

    /* Idle connections are closed; dribbling a message that never
     * completes does not keep one open. */
    bool gone = false;
    for (int k = 0; k < 3 * IDLE_MS / 50 && !gone; k++) {
        static const uint8_t one = 0x01;
        (void)send(fds[1], &one, 1, MSG_NOSIGNAL);
        gone = closed_within(fds[1], 50);
    }
    assert_true(gone);
    assert_true(now_msec() - t0 >= IDLE_MS);
    assert_true(closed_within(fds[0], 2 * IDLE_MS + 500));
    for (int k = 0; k < 4; k++)
        (void)loop_run_once(loop, 5);
    assert_int_equal(sbs[0].stats.tcp_conns, 0);
    for (size_t i = 0; i < CONNS + 1; i++)
        close(fds[i]);
}

/* A resolver on ::1: IPv6 sources and listeners take the same path. */
static void
test_ipv6(void **state)
{
    struct resolver_upstream u = {0};
    struct resolver_config c = {0};
    struct resolver *r6 = NULL;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    uint8_t m[512], buf[4096];
    ldns_pkt *p = NULL;
    struct err err = {0};
    int fd;

    (void)state;
    fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    a.sin6_addr = in6addr_loopback;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0)
            close(fd);
        skip(); /* no IPv6 loopback here */
    }
    sbs[2].addr = "::1";
    assert_int_equal(net_addr_parse("127.0.0.1", &u.addr, NULL), 0);
    u.port = port_of(up_udp);
    c.loop = loop;
    c.udp_fd = c.tcp_fd = -EBADF;
    assert_int_equal(net_addr_parse("::1", &c.listen, NULL), 0);
    c.upstreams = &u;
    c.n_upstreams = 1;
    c.lookup = lookup;
    c.timeout_ms = TIMEOUT_MS;
    if (resolver_new(&c, &r6, &err) < 0)
        fail_msg("resolver_new: %s", err.msg);

    size_t n = query_wire("a.x.test", LDNS_RR_TYPE_AAAA, 0x6666, m, sizeof(m));
    a.sin6_port = htons(resolver_udp_port(r6));
    assert_int_equal(sendto(fd, m, n, 0, (struct sockaddr *)&a, sizeof(a)), (ssize_t)n);
    assert_true(pump(fd, 1000));
    ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    assert_true(k > 0);
    assert_int_equal(ldns_wire2pkt(&p, buf, (size_t)k), LDNS_STATUS_OK);
    assert_int_equal(ldns_pkt_id(p), 0x6666);
    assert_int_equal(rcode(p), DNS_NOERROR);
    expect_addr(p, 0, "2001:db8::7");
    ldns_pkt_free(p);
    assert_true(recorded(&sbs[2], "a.x.test", "2001:db8::7"));
    close(fd);
    r6 = resolver_free(r6);
}

static void
test_malformed(void **state)
{
    static const uint8_t runt[] = {0x12, 0x34, 0x01};
    /* Two questions: FORMERR with the id. */
    static const uint8_t two[] = {0xab, 0xcd, 0x01, 0x00, 0x00, 0x02, 0, 0,   0, 0, 0, 0, 1,
                                  'a',  0,    0,    1,    0,    1,    1, 'b', 0, 0, 1, 0, 1};
    uint8_t m[1500];
    ldns_pkt *p;

    (void)state;
    int fd = bound(SOCK_DGRAM, "127.0.0.2", 0);
    send_raw(fd, runt, sizeof(runt));
    assert_null(receive(fd, 100));

    /* A response (QR set) is never answered. */
    size_t n = query_wire("a.x.test", LDNS_RR_TYPE_A, 5, m, sizeof(m));
    m[2] |= 0x80;
    send_raw(fd, m, n);
    assert_null(receive(fd, 100));

    send_raw(fd, two, sizeof(two));
    p = receive(fd, 500);
    assert_non_null(p);
    assert_int_equal(ldns_pkt_id(p), 0xabcd);
    assert_int_equal(rcode(p), DNS_FORMERR);
    ldns_pkt_free(p);

    /* Too long for a query. */
    n = query_wire("a.x.test", LDNS_RR_TYPE_A, 6, m, sizeof(m));
    memset(m + n, 0, sizeof(m) - n);
    send_raw(fd, m, sizeof(m));
    p = receive(fd, 500);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_FORMERR);
    ldns_pkt_free(p);

    /* Noise: whatever comes back, nothing breaks. */
    srand(1);
    for (int i = 0; i < 200; i++) {
        size_t len = (size_t)(rand() % 64) + 1;
        for (size_t j = 0; j < len; j++)
            m[j] = (uint8_t)rand();
        m[2] &= 0x7f;
        send_raw(fd, m, len);
        (void)loop_run_once(loop, 0);
        while (recv(fd, m, sizeof(m), MSG_DONTWAIT) > 0)
            ;
    }
    close(fd);
    (void)resolver_forget(res, 1);

    p = ask("127.0.0.2", "a.x.test", LDNS_RR_TYPE_A);
    assert_non_null(p);
    assert_int_equal(rcode(p), DNS_NOERROR);
    ldns_pkt_free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_allowed, setup, teardown),
            cmocka_unit_test_setup_teardown(test_denied, setup, teardown),
            cmocka_unit_test_setup_teardown(test_types, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unknown, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
            cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
            cmocka_unit_test_setup_teardown(test_spoofed, setup, teardown),
            cmocka_unit_test_setup_teardown(test_tcp_client, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cap_all, setup, teardown),
            cmocka_unit_test_setup_teardown(test_tcp_limits, setup, teardown),
            cmocka_unit_test_setup_teardown(test_ipv6, setup, teardown),
            cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
