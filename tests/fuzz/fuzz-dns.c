/*
 * fuzz-dns.c - the resolver's parsers on arbitrary bytes. First byte even:
 * the rest is a query from a sandbox (dns_query_parse()); odd: an upstream
 * answer to "api.x.test" (A, or AAAA with bit 1) sent with id 0xbeef,
 * filtered under a closed policy that allows api.x.test and denies
 * *.evil.test (dns_answer_filter(), over UDP unless bit 2).
 * Contract: only the documented errors, each with a message; a parsed
 * query has a valid name, a question of at most 255 bytes and a UDP size
 * in 512..DNS_UDP_MAX, and every refusal we build for it or for a refused
 * query parses back with its id; a filtered answer is a response with the
 * sandbox's id and question, fits the UDP size, carries only a CNAME
 * chain of valid names within DNS_CHAIN_MAX and at most DNS_ADDRS_MAX
 * addresses of the asked family with capped TTLs, and none when a link
 * was denied.
 */
#include <errno.h>
#include <ldns/ldns.h>
#include <sys/socket.h>

#include "fuzz-common.h"
#include "net/dns.h"
#include "net/policy.h"

static struct net_policy *policy;

static void
check_answer(const uint8_t *out, size_t n, uint16_t id, int rcode)
{
    ldns_pkt *p = NULL;
    CHECK(n >= DNS_HEADER_LEN);
    CHECK(ldns_wire2pkt(&p, out, n) == LDNS_STATUS_OK);
    CHECK(ldns_pkt_id(p) == id && ldns_pkt_qr(p));
    CHECK((int)ldns_pkt_get_rcode(p) == rcode);
    ldns_pkt_free(p);
}

static void
query(const uint8_t *d, size_t n)
{
    struct dns_query q;
    struct err err = {0};
    uint8_t out[DNS_UDP_MAX];
    size_t len = 0;
    int r = dns_query_parse(d, n, &q, &err);

    CHECK(r == 0 || r == -EPROTO || r == -EBADMSG || r == -EMSGSIZE || r == -EOPNOTSUPP ||
          r == -EPERM);
    if (r < 0) {
        CHECK(err.msg[0] != '\0');
        int rc = dns_rcode_of(r);
        int e = dns_answer_error(d, n, rc, out, sizeof(out), &len);
        if (r == -EPROTO) {
            CHECK(rc == -1 && e == -EPROTO);
            return;
        }
        CHECK(e == 0 && len == DNS_HEADER_LEN);
        check_answer(out, len, (uint16_t)(d[0] << 8 | d[1]), rc);
        return;
    }
    CHECK(net_name_valid(q.name, NET_NAME_UNDERSCORE));
    CHECK(q.qname_len >= 2 && q.qname_len <= DNS_NAME_WIRE);
    CHECK(q.udp_size >= 512 && q.udp_size <= DNS_UDP_MAX);
    CHECK(q.edns || !q.dnssec_ok);
    CHECK(dns_answer_rcode(&q, DNS_NXDOMAIN, out, sizeof(out), &len) == 0);
    CHECK(len <= DNS_HEADER_LEN + q.qname_len + 4 + 11);
    check_answer(out, len, q.id, DNS_NXDOMAIN);
    CHECK(memcmp(out + DNS_HEADER_LEN, q.qname_wire, q.qname_len) == 0);
    CHECK(dns_upstream_query(&q, 1, out, sizeof(out), &len) == 0);
    (void)dns_type_allowed(q.qtype, 0);
}

static void
answer(uint8_t sel, const uint8_t *d, size_t n)
{
    static const uint8_t qa[] = {0x12, 0x34, 0x01, 0x00, 0, 1,   0,   0,   0,   0, 0, 0, 3, 'a',
                                 'p',  'i',  1,    'x',  4, 't', 'e', 's', 't', 0, 0, 1, 0, 1};
    uint8_t qm[sizeof(qa)];
    struct dns_query q;
    static struct dns_result res;
    static uint8_t out[DNS_ANSWER_MAX];
    struct err err = {0};
    size_t len = 0;
    bool tcp = sel & 4;
    int r;

    memcpy(qm, qa, sizeof(qa));
    if (sel & 2)
        qm[sizeof(qm) - 3] = 28;
    CHECK(dns_query_parse(qm, sizeof(qm), &q, NULL) == 0);
    r = dns_answer_filter(&q, 0xbeef, d, n, policy, tcp, out, sizeof(out), &len, &res, &err);
    CHECK(r == 0 || r == -EPROTO || r == -EAGAIN || r == -EMSGSIZE || r == -EBADMSG || r == -ELOOP);
    if (r < 0) {
        CHECK(err.msg[0] != '\0');
        return;
    }
    CHECK(res.rcode == DNS_NOERROR || res.rcode == DNS_NXDOMAIN || res.rcode == DNS_SERVFAIL);
    CHECK(tcp || len <= 512);
    check_answer(out, len, 0x1234, res.rcode);
    CHECK(memcmp(out + DNS_HEADER_LEN, q.qname_wire, q.qname_len) == 0);
    CHECK(res.n_chain >= 1 && res.n_chain <= DNS_CHAIN_MAX + 1);
    CHECK(strcmp(res.chain[0], "api.x.test") == 0);
    for (size_t i = 0; i < res.n_chain; i++)
        CHECK(net_name_valid(res.chain[i], NET_NAME_UNDERSCORE));
    CHECK(res.n_addrs <= DNS_ADDRS_MAX);
    if (res.denied)
        CHECK(res.rcode == DNS_NXDOMAIN && res.n_addrs == 0 && res.why.why == POLICY_WHY_DENY);
    for (size_t i = 0; i < res.n_addrs; i++) {
        CHECK(res.addrs[i].addr.family == (q.qtype == 1 ? AF_INET : AF_INET6));
        CHECK(res.addrs[i].ttl <= NET_NAMES_TTL_MAX);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!policy) {
        CHECK(policy_new(&policy) == 0);
        CHECK(policy_add(policy, POLICY_ALLOW, "api.x.test", 0, NULL) == 0);
        CHECK(policy_add(policy, POLICY_DENY, "*.evil.test", 0, NULL) == 0);
        CHECK(policy_add(policy, POLICY_DENY, "0.0.0.0/0", 0, NULL) == 0);
    }
    if (size < 1)
        return 0;
    if (data[0] & 1)
        answer(data[0], data + 1, size - 1);
    else
        query(data + 1, size - 1);
    return 0;
}
