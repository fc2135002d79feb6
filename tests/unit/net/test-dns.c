/*
 * test-dns.c - the resolver's message handling: good queries (with and
 * without EDNS, the name's case kept in the echo), hostile ones (every
 * truncation, two questions, answers in a query, compressed names and
 * pointers out of range, trailing bytes, oversize, wrong class and opcode,
 * binary labels, EDNS versions), the type policy, the refusals we make,
 * and upstream answers: mismatched ids and questions, truncation, CNAME
 * chains followed and cut at a denied name, loops, records for other names
 * dropped, TTLs capped, compression loops, the UDP size limit, and what is
 * recorded for the policy's connection checks.
 */
#include <errno.h>
#include <ldns/ldns.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "net/dns.h"
#include "net/names.h"
#include "net/policy.h"

/* "Api.X.Test" A IN, id 0x1234, RD. */
static const uint8_t query_a[] = {
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* header */
        3,    'A',  'p',  'i',  1,    'X',  4,    'T',  'e',  's',  't',  0,    /* name */
        0x00, 0x01, 0x00, 0x01,                                                 /* A IN */
};

/* The same with an OPT record: UDP size 4096, DO set. */
static const uint8_t query_edns[] = {
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 3,    'a', 'p',
        'i',  1,    'x',  4,    't',  'e',  's',  't',  0,    0x00, 0x1c, 0x00, 0x01, /* AAAA IN */
        0x00, 0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
};

static size_t
copy(uint8_t *dst, const uint8_t *src, size_t n)
{
    memcpy(dst, src, n);
    return n;
}

static void
parse_ok(const uint8_t *m, size_t len, struct dns_query *q)
{
    struct err err = {0};
    int r = dns_query_parse(m, len, q, &err);
    if (r != 0)
        fail_msg("%d: %s", r, err.msg);
}

static int
parse_err(const uint8_t *m, size_t len)
{
    struct dns_query q;
    struct err err = {0};
    int r = dns_query_parse(m, len, &q, &err);
    assert_true(r < 0);
    assert_true(err.msg[0] != '\0');
    return r;
}

static void
test_query_good(void **state)
{
    struct dns_query q;

    parse_ok(query_a, sizeof(query_a), &q);
    assert_int_equal(q.id, 0x1234);
    assert_int_equal(q.qtype, LDNS_RR_TYPE_A);
    assert_string_equal(q.name, "api.x.test");
    assert_true(q.rd);
    assert_false(q.edns);
    assert_int_equal(q.udp_size, 512);
    assert_int_equal(q.qname_len, 12);
    assert_memory_equal(q.qname_wire, query_a + 12, 12);

    parse_ok(query_edns, sizeof(query_edns), &q);
    assert_int_equal(q.qtype, LDNS_RR_TYPE_AAAA);
    assert_true(q.edns);
    assert_true(q.dnssec_ok);
    assert_int_equal(q.udp_size, DNS_UDP_MAX);

    /* _service._tcp names are host names for DNS. */
    uint8_t m[64];
    size_t n = copy(m, query_a, 12);
    n += copy(m + n, (const uint8_t *)"\x04_sip\x04_tcp\x01x\x04test\x00\x00\x21\x00\x01", 22);
    parse_ok(m, n, &q);
    assert_string_equal(q.name, "_sip._tcp.x.test");
}

static void
test_query_hostile(void **state)
{
    uint8_t m[DNS_QUERY_MAX + 16];
    size_t n;

    /* Every truncation: none parses, none reads past its end. */
    for (size_t i = 0; i < sizeof(query_edns); i++) {
        int r = parse_err(query_edns, i);
        assert_true(r == (i < 12 ? -EPROTO : -EBADMSG));
    }
    /* A trailing byte. */
    n = copy(m, query_a, sizeof(query_a));
    m[n++] = 0;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* Two questions; an answer record; two additional records. */
    n = copy(m, query_a, sizeof(query_a));
    m[5] = 2;
    n += copy(m + n, query_a + 12, sizeof(query_a) - 12);
    assert_int_equal(parse_err(m, n), -EBADMSG);
    n = copy(m, query_a, sizeof(query_a));
    m[5] = 0;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    m[5] = 1;
    m[7] = 1;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    m[7] = 0;
    m[11] = 2;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* An additional record that is not OPT. */
    n = copy(m, query_edns, sizeof(query_edns));
    m[sizeof(query_edns) - 9] = 0x10; /* type 41 -> 16 (TXT) */
    m[sizeof(query_edns) - 10] = 0x00;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* EDNS version 1. */
    n = copy(m, query_edns, sizeof(query_edns));
    m[sizeof(query_edns) - 5] = 1;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* A compressed question name: to itself (a loop), out of range, to the header. */
    const uint8_t ptrs[][2] = {{0xc0, 0x0c}, {0xc0, 0xff}, {0xc0, 0x00}, {0x80, 0x00}};
    for (size_t i = 0; i < ELEMENTSOF(ptrs); i++) {
        n = copy(m, query_a, 12);
        m[n++] = ptrs[i][0];
        m[n++] = ptrs[i][1];
        n += copy(m + n, (const uint8_t *)"\x00\x01\x00\x01", 4);
        assert_int_equal(parse_err(m, n), -EBADMSG);
    }
    /* A label running past the end, and a name past 255 bytes. */
    n = copy(m, query_a, 12);
    m[n++] = 63;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    n = copy(m, query_a, 12);
    for (int i = 0; i < 5; i++) {
        m[n++] = 63;
        memset(m + n, 'a', 63);
        n += 63;
    }
    m[n++] = 0;
    n += copy(m + n, (const uint8_t *)"\x00\x01\x00\x01", 4);
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* Oversize. */
    memset(m, 0, sizeof(m));
    n = copy(m, query_a, sizeof(query_a));
    assert_int_equal(parse_err(m, DNS_QUERY_MAX + 1), -EMSGSIZE);
    /* Class CH; opcode STATUS; a response; TC in a query. */
    n = copy(m, query_a, sizeof(query_a));
    m[n - 1] = 3;
    assert_int_equal(parse_err(m, n), -EOPNOTSUPP);
    n = copy(m, query_a, sizeof(query_a));
    m[2] = 0x10;
    assert_int_equal(parse_err(m, n), -EOPNOTSUPP);
    m[2] = 0x81;
    assert_int_equal(parse_err(m, n), -EPROTO);
    m[2] = 0x03;
    assert_int_equal(parse_err(m, n), -EBADMSG);
    /* Names that are no host names: a binary byte, a dot in a label, the root. */
    n = copy(m, query_a, sizeof(query_a));
    m[13] = 0x01;
    assert_int_equal(parse_err(m, n), -EPERM);
    m[13] = '.';
    assert_int_equal(parse_err(m, n), -EPERM);
    n = copy(m, query_a, 12);
    n += copy(m + n, (const uint8_t *)"\x00\x00\x02\x00\x01", 5);
    assert_int_equal(parse_err(m, n), -EPERM);
    assert_int_equal(dns_rcode_of(-EPERM), DNS_REFUSED);
    assert_int_equal(dns_rcode_of(-EBADMSG), DNS_FORMERR);
    assert_int_equal(dns_rcode_of(-EOPNOTSUPP), DNS_NOTIMP);
    assert_int_equal(dns_rcode_of(-EPROTO), -1);
    assert_int_equal(dns_rcode_of(-ENOENT), DNS_NXDOMAIN);
    assert_int_equal(dns_rcode_of(-ELOOP), DNS_SERVFAIL);
}

static void
test_types(void **state)
{
    const uint16_t yes[] = {LDNS_RR_TYPE_A,     LDNS_RR_TYPE_AAAA, LDNS_RR_TYPE_CNAME,
                            LDNS_RR_TYPE_HTTPS, LDNS_RR_TYPE_SVCB, LDNS_RR_TYPE_MX,
                            LDNS_RR_TYPE_SRV,   LDNS_RR_TYPE_PTR,  LDNS_RR_TYPE_CAA};
    const uint16_t tunnel[] = {LDNS_RR_TYPE_TXT, LDNS_RR_TYPE_NULL, 99, 65280};
    const uint16_t meta[] = {LDNS_RR_TYPE_ANY, LDNS_RR_TYPE_AXFR, LDNS_RR_TYPE_IXFR,
                             LDNS_RR_TYPE_OPT, LDNS_RR_TYPE_TSIG, 0};

    for (size_t i = 0; i < ELEMENTSOF(yes); i++)
        assert_true(dns_type_allowed(yes[i], 0));
    for (size_t i = 0; i < ELEMENTSOF(tunnel); i++) {
        assert_false(dns_type_allowed(tunnel[i], 0));
        assert_true(dns_type_allowed(tunnel[i], DNS_ALL_TYPES));
    }
    for (size_t i = 0; i < ELEMENTSOF(meta); i++)
        assert_false(dns_type_allowed(meta[i], DNS_ALL_TYPES));
}

static ldns_pkt *
wire_parse(const uint8_t *m, size_t n)
{
    ldns_pkt *p = NULL;
    assert_int_equal(ldns_wire2pkt(&p, m, n), LDNS_STATUS_OK);
    return p;
}

static void
test_refusals(void **state)
{
    struct dns_query q;
    uint8_t out[512];
    size_t n = 0;
    ldns_pkt *p;

    parse_ok(query_a, sizeof(query_a), &q);
    assert_int_equal(dns_answer_rcode(&q, DNS_NXDOMAIN, out, sizeof(out), &n), 0);
    p = wire_parse(out, n);
    assert_int_equal(ldns_pkt_id(p), 0x1234);
    assert_true(ldns_pkt_qr(p) && ldns_pkt_rd(p) && ldns_pkt_ra(p));
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
    assert_int_equal(ldns_pkt_ancount(p) + ldns_pkt_nscount(p) + ldns_pkt_arcount(p), 0);
    /* The question as sent, case and all (some stubs check 0x20 case). */
    assert_memory_equal(out + 12, query_a + 12, sizeof(query_a) - 12);
    ldns_pkt_free(p);
    assert_int_equal(dns_answer_rcode(&q, DNS_NXDOMAIN, out, 20, &n), -ENOBUFS);

    /* With EDNS the answer carries OPT. */
    parse_ok(query_edns, sizeof(query_edns), &q);
    assert_int_equal(dns_answer_rcode(&q, DNS_REFUSED, out, sizeof(out), &n), 0);
    p = wire_parse(out, n);
    assert_true(ldns_pkt_edns(p));
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_REFUSED);
    ldns_pkt_free(p);

    /* A refused query: id, opcode, RD, no question. */
    uint8_t bad[sizeof(query_a)];
    memcpy(bad, query_a, sizeof(bad));
    bad[5] = 2;
    assert_int_equal(dns_answer_error(bad, sizeof(bad), DNS_FORMERR, out, sizeof(out), &n), 0);
    assert_int_equal(n, 12);
    p = wire_parse(out, n);
    assert_int_equal(ldns_pkt_id(p), 0x1234);
    assert_int_equal(ldns_pkt_get_rcode(p), LDNS_RCODE_FORMERR);
    assert_int_equal(ldns_pkt_qdcount(p), 0);
    ldns_pkt_free(p);
    assert_int_equal(dns_answer_error(bad, 11, DNS_FORMERR, out, sizeof(out), &n), -EPROTO);
    bad[2] |= 0x80;
    assert_int_equal(dns_answer_error(bad, sizeof(bad), DNS_FORMERR, out, sizeof(out), &n),
                     -EPROTO);

    /* What we send upstream: our id, the normalised name, RD, EDNS. */
    parse_ok(query_a, sizeof(query_a), &q);
    assert_int_equal(dns_upstream_query(&q, 0xbeef, out, sizeof(out), &n), 0);
    p = wire_parse(out, n);
    assert_int_equal(ldns_pkt_id(p), 0xbeef);
    assert_false(ldns_pkt_qr(p));
    assert_true(ldns_pkt_rd(p) && ldns_pkt_edns(p));
    ldns_pkt_free(p);
    assert_memory_equal(out + 12,
                        "\x03"
                        "api\x01x\x04test",
                        11);
}

/* An upstream answer to q with id and the records given as text. */
static size_t
answer(const struct dns_query *q, uint16_t id, int rcode, const char *const *rrs, uint8_t *out,
       size_t cap)
{
    ldns_pkt *p = NULL;
    uint8_t *w = NULL;
    size_t n = 0;
    ldns_rr *qr = NULL;
    char qs[300];

    (void)snprintf(qs, sizeof(qs), "%s. IN %s", q->name,
                   q->qtype == LDNS_RR_TYPE_A      ? "A"
                   : q->qtype == LDNS_RR_TYPE_AAAA ? "AAAA"
                                                   : "CNAME");
    p = ldns_pkt_new();
    assert_non_null(p);
    ldns_pkt_set_id(p, id);
    ldns_pkt_set_qr(p, true);
    ldns_pkt_set_rcode(p, (uint8_t)rcode);
    assert_int_equal(ldns_rr_new_question_frm_str(&qr, qs, NULL, NULL), LDNS_STATUS_OK);
    assert_true(ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, qr));
    for (; rrs && *rrs; rrs++) {
        ldns_rr *rr = NULL;
        ldns_pkt_section sec = LDNS_SECTION_ANSWER;
        const char *s = *rrs;
        if (s[0] == '+') {
            sec = LDNS_SECTION_ADDITIONAL;
            s++;
        }
        assert_int_equal(ldns_rr_new_frm_str(&rr, s, 0, NULL, NULL), LDNS_STATUS_OK);
        assert_true(ldns_pkt_push_rr(p, sec, rr));
    }
    assert_int_equal(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
    assert_true(n <= cap);
    memcpy(out, w, n);
    free(w);
    ldns_pkt_free(p);
    return n;
}

struct filtered {
    int r;
    struct dns_result res;
    ldns_pkt *pkt; /* the sandbox's answer */
    uint8_t out[DNS_ANSWER_MAX];
    size_t len;
};

static void
filter(const struct dns_query *q, const uint8_t *m, size_t n, const struct net_policy *p, bool tcp,
       struct filtered *f)
{
    struct err err = {0};

    f->pkt = NULL;
    f->r = dns_answer_filter(q, 0xbeef, m, n, p, tcp, f->out, sizeof(f->out), &f->len, &f->res,
                             &err);
    if (f->r == 0)
        f->pkt = wire_parse(f->out, f->len);
    else
        assert_true(err.msg[0] != '\0');
}

static void
test_upstream(void **state)
{
    struct net_policy *p = NULL;
    struct net_names *names = NULL;
    struct dns_query q;
    static struct filtered f;
    uint8_t m[4096];
    size_t n;

    assert_int_equal(policy_new(&p), 0);
    assert_int_equal(policy_add(p, POLICY_ALLOW, "api.x.test", 0, NULL), 0);
    assert_int_equal(policy_add(p, POLICY_DENY, "0.0.0.0/0", 0, NULL), 0);
    assert_int_equal(policy_add(p, POLICY_DENY, "*.evil.test", 0, NULL), 0);
    parse_ok(query_a, sizeof(query_a), &q);

    /* A CNAME chain; records for other names dropped; TTLs capped. */
    const char *chain[] = {"api.x.test. 30 IN CNAME edge.cdn.test.",
                           "edge.cdn.test. 999999 IN A 198.51.100.34",
                           "edge.cdn.test. 60 IN A 198.51.100.35",
                           "other.test. 60 IN A 10.0.0.1",
                           "api.x.test. 60 IN TXT \"x\"",
                           "+ns.test. 60 IN A 192.0.2.1",
                           NULL};
    n = answer(&q, 0xbeef, 0, chain, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    assert_int_equal(f.res.rcode, DNS_NOERROR);
    assert_int_equal(f.res.n_chain, 2);
    assert_string_equal(f.res.chain[1], "edge.cdn.test");
    assert_int_equal(f.res.n_addrs, 2);
    assert_int_equal(f.res.addrs[0].ttl, 30);
    assert_int_equal(ldns_pkt_id(f.pkt), 0x1234);
    assert_int_equal(ldns_pkt_ancount(f.pkt), 3);
    assert_int_equal(ldns_pkt_arcount(f.pkt), 0);
    assert_int_equal(ldns_rr_ttl(ldns_rr_list_rr(ldns_pkt_answer(f.pkt), 1)), NET_NAMES_TTL_MAX);
    assert_memory_equal(f.out + 12, query_a + 12, sizeof(query_a) - 12);
    ldns_pkt_free(f.pkt);
    /* What was recorded lets the connection to that address through, by name. */
    assert_int_equal(net_names_new(8, &names), 0);
    assert_int_equal(dns_result_record(&f.res, names, 0), 2);
    assert_true(policy_check_conn(p, names, &f.res.addrs[1].addr, "api.x.test", 10, NULL));
    assert_false(policy_check_conn(p, names, &f.res.addrs[1].addr, "edge.cdn.test", 10, NULL));

    /* A CNAME to a denied name: NXDOMAIN, nothing recorded. */
    const char *evil[] = {"api.x.test. 30 IN CNAME a.evil.test.",
                          "a.evil.test. 30 IN A 198.51.100.4", NULL};
    n = answer(&q, 0xbeef, 0, evil, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    assert_true(f.res.denied);
    assert_int_equal(f.res.rcode, DNS_NXDOMAIN);
    assert_int_equal(f.res.why.why, POLICY_WHY_DENY);
    assert_int_equal(f.res.n_addrs, 0);
    assert_int_equal(ldns_pkt_get_rcode(f.pkt), LDNS_RCODE_NXDOMAIN);
    assert_int_equal(ldns_pkt_ancount(f.pkt), 0);
    ldns_pkt_free(f.pkt);

    /* Mismatches: id, question name, type; a query instead of an answer. */
    n = answer(&q, 0xbeee, 0, chain, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EPROTO);
    struct dns_query other = q;
    strcpy(other.name, "api.y.test");
    n = answer(&other, 0xbeef, 0, chain, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EPROTO);
    other = q;
    other.qtype = LDNS_RR_TYPE_AAAA;
    n = answer(&other, 0xbeef, 0, chain, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EPROTO);
    n = answer(&q, 0xbeef, 0, chain, m, sizeof(m));
    m[2] &= 0x7f;
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EPROTO);
    /* Upper case in the answer's question is the same question. */
    n = answer(&q, 0xbeef, 0, chain, m, sizeof(m));
    m[13] = 'A';
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    ldns_pkt_free(f.pkt);
    /* Truncated upstream: ask again over TCP. */
    n = answer(&q, 0xbeef, 0, chain, m, sizeof(m));
    m[2] |= 0x02;
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EAGAIN);
    /* Every cut of an answer is refused cleanly. */
    n = answer(&q, 0xbeef, 0, chain, m, sizeof(m));
    for (size_t i = 0; i < n; i++) {
        filter(&q, m, i, p, false, &f);
        assert_true(f.r < 0);
    }

    /* SERVFAIL upstream: SERVFAIL, no records. */
    n = answer(&q, 0xbeef, LDNS_RCODE_REFUSED, chain, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    assert_int_equal(f.res.rcode, DNS_SERVFAIL);
    assert_int_equal(ldns_pkt_ancount(f.pkt), 0);
    ldns_pkt_free(f.pkt);

    /* A CNAME loop, a chain too long, two CNAMEs for one name. */
    const char *loop[] = {"api.x.test. 30 IN CNAME b.test.", "b.test. 30 IN CNAME api.x.test.",
                          NULL};
    n = answer(&q, 0xbeef, 0, loop, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -ELOOP);
    char rr[DNS_CHAIN_MAX + 2][64];
    const char *longc[DNS_CHAIN_MAX + 3];
    for (int i = 0; i <= DNS_CHAIN_MAX + 1; i++) {
        if (i == 0)
            (void)snprintf(rr[i], sizeof(rr[i]), "api.x.test. 30 IN CNAME c1.test.");
        else
            (void)snprintf(rr[i], sizeof(rr[i]), "c%d.test. 30 IN CNAME c%d.test.", i, i + 1);
        longc[i] = rr[i];
    }
    longc[DNS_CHAIN_MAX + 2] = NULL;
    n = answer(&q, 0xbeef, 0, longc, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -ELOOP);
    longc[DNS_CHAIN_MAX] = NULL; /* exactly DNS_CHAIN_MAX links */
    n = answer(&q, 0xbeef, 0, longc, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    assert_int_equal(f.res.n_chain, DNS_CHAIN_MAX + 1);
    ldns_pkt_free(f.pkt);
    const char *two[] = {"api.x.test. 30 IN CNAME b.test.", "api.x.test. 30 IN CNAME c.test.",
                         NULL};
    n = answer(&q, 0xbeef, 0, two, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EBADMSG);

    /* A compression pointer that loops, inside an answer record. */
    const char *one[] = {"api.x.test. 30 IN A 198.51.100.1", NULL};
    n = answer(&q, 0xbeef, 0, one, m, sizeof(m));
    m[n - 16] = 0xc0;
    m[n - 15] = (uint8_t)(n - 16);
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EBADMSG);
    /* Record counts past DNS_RRS_MAX are refused before parsing. */
    n = answer(&q, 0xbeef, 0, one, m, sizeof(m));
    m[6] = 0x01;
    m[7] = 0x01;
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, -EMSGSIZE);

    /* Too large for 512 bytes of UDP: TC, no records; over TCP all of it. */
    static char big[40][64];
    const char *many[41];
    for (int i = 0; i < 40; i++) {
        (void)snprintf(big[i], sizeof(big[i]), "api.x.test. 30 IN A 1.1.1.%d", i);
        many[i] = big[i];
    }
    many[40] = NULL;
    n = answer(&q, 0xbeef, 0, many, m, sizeof(m));
    filter(&q, m, n, p, false, &f);
    assert_int_equal(f.r, 0);
    assert_true(ldns_pkt_tc(f.pkt));
    assert_int_equal(ldns_pkt_ancount(f.pkt), 0);
    assert_int_equal(f.res.n_addrs, 0);
    ldns_pkt_free(f.pkt);
    filter(&q, m, n, p, true, &f);
    assert_int_equal(f.r, 0);
    assert_false(ldns_pkt_tc(f.pkt));
    assert_int_equal(ldns_pkt_ancount(f.pkt), 40);
    assert_int_equal(f.res.n_addrs, 40);
    ldns_pkt_free(f.pkt);

    net_names_free(names);
    policy_free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_query_good), cmocka_unit_test(test_query_hostile),
            cmocka_unit_test(test_types),      cmocka_unit_test(test_refusals),
            cmocka_unit_test(test_upstream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
