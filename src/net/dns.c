/*
 * dns.c - DNS queries from sandboxes and answers from upstream, on ldns.
 *
 * ldns decodes and encodes the wire format (compression, record data,
 * EDNS); before it sees a message we check the header's counts and size
 * ourselves, so that its allocations stay within DNS_RRS_MAX records of at
 * most DNS_ANSWER_MAX bytes, and for queries we walk the question by hand
 * too: ldns does not refuse trailing bytes or a compressed question name,
 * and we want the name's exact bytes for the echo.
 */
#include "net/dns.h"

#include <errno.h>
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "util/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(ldns_pkt *, ldns_pkt_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ldns_rr *, ldns_rr_free)

static uint16_t
be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* A name in uncompressed wire form (len bytes at w) as a normalised host
 * name: labels may not hold '.', and net_name_normalize() checks the rest. */
static int
wire_name(const uint8_t *w, size_t len, char ret[static NET_NAME_MAX + 1])
{
    char text[DNS_NAME_WIRE];
    size_t at = 0, out = 0;

    while (at < len && w[at] != 0) {
        size_t l = w[at++];
        if (l > NET_LABEL_MAX || at + l > len)
            return -EINVAL;
        if (out)
            text[out++] = '.';
        if (memchr(w + at, '.', l) || out + l >= sizeof(text))
            return -EINVAL;
        memcpy(text + out, w + at, l);
        out += l;
        at += l;
    }
    return net_name_normalize(text, out, NET_NAME_UNDERSCORE, ret, NULL);
}

static int
rdf_name(const ldns_rdf *d, char ret[static NET_NAME_MAX + 1])
{
    if (!d || ldns_rdf_get_type(d) != LDNS_RDF_TYPE_DNAME)
        return -EINVAL;
    return wire_name(ldns_rdf_data(d), ldns_rdf_size(d), ret);
}

int
dns_query_parse(const void *msg, size_t len, struct dns_query *ret, struct err *err)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
    const uint8_t *m = msg;
    struct dns_query q = {0};
    size_t at = DNS_HEADER_LEN;
    ldns_status st;
    uint16_t qclass;

    if (len < DNS_HEADER_LEN)
        return err_set(err, EPROTO, "DNS query of %zu bytes is shorter than a header", len);
    if (m[2] & 0x80)
        return err_set(err, EPROTO, "DNS message is a response, not a query");
    if (len > DNS_QUERY_MAX)
        return err_set(err, EMSGSIZE, "DNS query of %zu bytes is longer than %d", len,
                       DNS_QUERY_MAX);
    if (((m[2] >> 3) & 0xf) != LDNS_PACKET_QUERY)
        return err_set(err, EOPNOTSUPP, "DNS opcode %u is not QUERY", (m[2] >> 3) & 0xf);
    if (m[2] & 0x02)
        return err_set(err, EBADMSG, "DNS query is marked truncated");
    if (be16(m + 4) != 1)
        return err_set(err, EBADMSG, "DNS query has %u questions, not 1", be16(m + 4));
    if (be16(m + 6) || be16(m + 8))
        return err_set(err, EBADMSG, "DNS query carries answer or authority records");
    if (be16(m + 10) > 1)
        return err_set(err, EBADMSG, "DNS query carries %u additional records", be16(m + 10));

    /* The question by hand: uncompressed labels, then type and class. */
    while (at < len && m[at] != 0) {
        if (m[at] & 0xc0)
            return err_set(err, EBADMSG, "DNS query name is compressed or has a bad label");
        at += 1 + m[at];
        if (at - DNS_HEADER_LEN >= DNS_NAME_WIRE)
            return err_set(err, EBADMSG, "DNS query name is longer than %d bytes", DNS_NAME_WIRE);
    }
    if (at + 5 > len)
        return err_set(err, EBADMSG, "DNS query is cut short in its question");
    q.qname_len = at + 1 - DNS_HEADER_LEN;
    memcpy(q.qname_wire, m + DNS_HEADER_LEN, q.qname_len);
    at++;
    q.qtype = be16(m + at);
    qclass = be16(m + at + 2);
    at += 4;
    /* An OPT record: root name, type 41, and its data; nothing after it. */
    if (be16(m + 10) == 1) {
        if (at + 11 > len || m[at] != 0 || be16(m + at + 1) != LDNS_RR_TYPE_OPT)
            return err_set(err, EBADMSG, "DNS query's additional record is not EDNS OPT");
        at += 11 + be16(m + at + 9);
    }
    if (at != len)
        return err_set(err, EBADMSG, "DNS query has %zd bytes past its end",
                       (ssize_t)len - (ssize_t)at);

    st = ldns_wire2pkt(&pkt, m, len);
    if (st == LDNS_STATUS_MEM_ERR)
        return -ENOMEM;
    if (st != LDNS_STATUS_OK)
        return err_set(err, EBADMSG, "malformed DNS query: %s", ldns_get_errorstr_by_id(st));
    if (ldns_rr_list_rr_count(ldns_pkt_question(pkt)) != 1 ||
        ldns_rr_list_rr_count(ldns_pkt_additional(pkt)) != 0)
        return err_set(err, EBADMSG, "DNS query's records are not one question and EDNS");
    if (ldns_pkt_edns(pkt) && ldns_pkt_edns_version(pkt) != 0)
        return err_set(err, EBADMSG, "DNS query asks for EDNS version %u",
                       ldns_pkt_edns_version(pkt));
    if (qclass != LDNS_RR_CLASS_IN)
        return err_set(err, EOPNOTSUPP, "DNS query class %u is not IN", qclass);
    if (wire_name(q.qname_wire, q.qname_len, q.name) < 0)
        return err_set(err, EPERM, "DNS query name is not a host name");

    q.id = be16(m);
    q.rd = m[2] & 0x01;
    q.cd = m[3] & 0x10;
    q.edns = be16(m + 10) == 1;
    q.dnssec_ok = q.edns && ldns_pkt_edns_do(pkt);
    q.udp_size = q.edns ? MIN(MAX(ldns_pkt_edns_udp_size(pkt), 512), DNS_UDP_MAX) : 512;
    *ret = q;
    return 0;
}

bool
dns_type_allowed(uint16_t type, unsigned flags)
{
    switch (type) {
    case LDNS_RR_TYPE_A:
    case LDNS_RR_TYPE_AAAA:
    case LDNS_RR_TYPE_CNAME:
    case LDNS_RR_TYPE_HTTPS:
    case LDNS_RR_TYPE_SVCB:
    case LDNS_RR_TYPE_MX:
    case LDNS_RR_TYPE_SRV:
    case LDNS_RR_TYPE_NS:
    case LDNS_RR_TYPE_SOA:
    case LDNS_RR_TYPE_PTR:
    case LDNS_RR_TYPE_CAA:
    case LDNS_RR_TYPE_DS:
        return true;
    /* Meta types: never a question for a sandbox's stub resolver. */
    case LDNS_RR_TYPE_OPT:
    case LDNS_RR_TYPE_TSIG:
    case LDNS_RR_TYPE_TKEY:
    case LDNS_RR_TYPE_IXFR:
    case LDNS_RR_TYPE_AXFR:
    case LDNS_RR_TYPE_MAILA:
    case LDNS_RR_TYPE_MAILB:
    case LDNS_RR_TYPE_ANY:
    case 0:
        return false;
    default:
        return flags & DNS_ALL_TYPES;
    }
}

int
dns_rcode_of(int error)
{
    switch (error) {
    case 0:
        return DNS_NOERROR;
    case -EPROTO:
        return -1;
    case -EBADMSG:
    case -EMSGSIZE:
        return DNS_FORMERR;
    case -EOPNOTSUPP:
        return DNS_NOTIMP;
    case -EPERM:
    case -EACCES:
        return DNS_REFUSED;
    case -ENOENT:
        return DNS_NXDOMAIN;
    default:
        return DNS_SERVFAIL;
    }
}

static int
to_wire(const ldns_pkt *pkt, uint8_t *out, size_t cap, size_t *ret_len)
{
    uint8_t *w = NULL;
    size_t n = 0;
    ldns_status st = ldns_pkt2wire(&w, pkt, &n);

    if (st != LDNS_STATUS_OK) {
        free(w);
        return st == LDNS_STATUS_MEM_ERR ? -ENOMEM : -EINVAL;
    }
    if (n > cap) {
        free(w);
        return -ENOBUFS;
    }
    memcpy(out, w, n);
    free(w);
    *ret_len = n;
    return 0;
}

/* A question record of q's name (as sent, or normalised), type and class. */
static int
push_question(ldns_pkt *pkt, const struct dns_query *q, bool as_sent)
{
    _cleanup_(ldns_rr_freep) ldns_rr *rr = ldns_rr_new();
    ldns_rdf *owner;

    if (!rr)
        return -ENOMEM;
    owner = as_sent ? ldns_dname_new_frm_data((uint16_t)q->qname_len, q->qname_wire)
                    : ldns_dname_new_frm_str(q->name);
    if (!owner)
        return -ENOMEM;
    ldns_rr_set_owner(rr, owner);
    ldns_rr_set_type(rr, q->qtype);
    ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
    ldns_rr_set_question(rr, true);
    if (!ldns_pkt_push_rr(pkt, LDNS_SECTION_QUESTION, rr))
        return -ENOMEM;
    TAKE_PTR(rr);
    return 0;
}

/* The header and question of our answer to q. */
static int
answer_new(const struct dns_query *q, int rcode, ldns_pkt **ret)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = ldns_pkt_new();
    int r;

    if (!pkt)
        return -ENOMEM;
    ldns_pkt_set_id(pkt, q->id);
    ldns_pkt_set_qr(pkt, true);
    ldns_pkt_set_opcode(pkt, LDNS_PACKET_QUERY);
    ldns_pkt_set_rd(pkt, q->rd);
    ldns_pkt_set_ra(pkt, true);
    ldns_pkt_set_cd(pkt, q->cd);
    ldns_pkt_set_rcode(pkt, (uint8_t)rcode);
    r = push_question(pkt, q, true);
    if (r < 0)
        return r;
    if (q->edns) {
        ldns_pkt_set_edns_udp_size(pkt, DNS_UDP_MAX);
        ldns_pkt_set_edns_do(pkt, q->dnssec_ok);
    }
    *ret = TAKE_PTR(pkt);
    return 0;
}

int
dns_answer_rcode(const struct dns_query *q, int rcode, uint8_t *out, size_t cap, size_t *ret_len)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
    int r = answer_new(q, rcode, &pkt);
    if (r < 0)
        return r;
    return to_wire(pkt, out, cap, ret_len);
}

int
dns_answer_error(const void *msg, size_t len, int rcode, uint8_t *out, size_t cap, size_t *ret_len)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
    const uint8_t *m = msg;

    if (len < DNS_HEADER_LEN || (m[2] & 0x80) || rcode < 0)
        return -EPROTO;
    pkt = ldns_pkt_new();
    if (!pkt)
        return -ENOMEM;
    ldns_pkt_set_id(pkt, be16(m));
    ldns_pkt_set_qr(pkt, true);
    ldns_pkt_set_opcode(pkt, (ldns_pkt_opcode)((m[2] >> 3) & 0xf));
    ldns_pkt_set_rd(pkt, m[2] & 0x01);
    ldns_pkt_set_ra(pkt, true);
    ldns_pkt_set_rcode(pkt, (uint8_t)rcode);
    return to_wire(pkt, out, cap, ret_len);
}

int
dns_upstream_query(const struct dns_query *q, uint16_t id, uint8_t *out, size_t cap,
                   size_t *ret_len)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = ldns_pkt_new();
    int r;

    if (!pkt)
        return -ENOMEM;
    ldns_pkt_set_id(pkt, id);
    ldns_pkt_set_opcode(pkt, LDNS_PACKET_QUERY);
    ldns_pkt_set_rd(pkt, true);
    ldns_pkt_set_cd(pkt, q->cd);
    r = push_question(pkt, q, false);
    if (r < 0)
        return r;
    ldns_pkt_set_edns_udp_size(pkt, DNS_UDP_MAX);
    ldns_pkt_set_edns_do(pkt, q->dnssec_ok);
    return to_wire(pkt, out, cap, ret_len);
}

static bool
owner_is(const ldns_rr *rr, const char *name)
{
    char n[NET_NAME_MAX + 1];
    return ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN && rdf_name(ldns_rr_owner(rr), n) == 0 &&
           strcmp(n, name) == 0;
}

/* Adds a copy of rr to pkt's answers with its TTL capped. */
static int
push_answer(ldns_pkt *pkt, const ldns_rr *rr)
{
    ldns_rr *c = ldns_rr_clone(rr);

    if (!c)
        return -ENOMEM;
    ldns_rr_set_ttl(c, MIN(ldns_rr_ttl(c), (uint32_t)NET_NAMES_TTL_MAX));
    if (!ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, c)) {
        ldns_rr_free(c);
        return -ENOMEM;
    }
    return 0;
}

/* Checks the upstream header and question; parses msg into *ret. */
static int
upstream_parse(const struct dns_query *q, uint16_t id, const uint8_t *m, size_t len, ldns_pkt **ret,
               struct err *err)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
    const ldns_rr *qr;
    char name[NET_NAME_MAX + 1];
    ldns_status st;
    size_t rrs;

    if (len < DNS_HEADER_LEN)
        return err_set(err, EPROTO, "DNS answer of %zu bytes is shorter than a header", len);
    if (be16(m) != id || !(m[2] & 0x80) || ((m[2] >> 3) & 0xf) != LDNS_PACKET_QUERY)
        return err_set(err, EPROTO, "DNS message is not an answer to our query (id, QR, opcode)");
    if (len > DNS_ANSWER_MAX)
        return err_set(err, EMSGSIZE, "DNS answer of %zu bytes is longer than %d", len,
                       DNS_ANSWER_MAX);
    if (be16(m + 4) != 1)
        return err_set(err, EPROTO, "DNS answer has %u questions, not 1", be16(m + 4));
    rrs = (size_t)be16(m + 6) + be16(m + 8) + be16(m + 10);
    if (rrs > DNS_RRS_MAX)
        return err_set(err, EMSGSIZE, "DNS answer has %zu records, more than %d", rrs, DNS_RRS_MAX);
    st = ldns_wire2pkt(&pkt, m, len);
    if (st == LDNS_STATUS_MEM_ERR)
        return -ENOMEM;
    if (st != LDNS_STATUS_OK)
        return err_set(err, EBADMSG, "malformed DNS answer: %s", ldns_get_errorstr_by_id(st));
    qr = ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
    if (!qr || ldns_rr_get_type(qr) != q->qtype || ldns_rr_get_class(qr) != LDNS_RR_CLASS_IN ||
        rdf_name(ldns_rr_owner(qr), name) < 0 || strcmp(name, q->name) != 0)
        return err_set(err, EPROTO, "DNS answer is for another question than '%s'", q->name);
    if (ldns_pkt_tc(pkt))
        return err_set(err, EAGAIN, "DNS answer for '%s' is truncated", q->name);
    *ret = TAKE_PTR(pkt);
    return 0;
}

int
dns_answer_filter(const struct dns_query *q, uint16_t id, const void *msg, size_t len,
                  const struct net_policy *p, bool tcp, uint8_t *out, size_t cap, size_t *ret_len,
                  struct dns_result *ret, struct err *err)
{
    _cleanup_(ldns_pkt_freep) ldns_pkt *up = NULL;
    _cleanup_(ldns_pkt_freep) ldns_pkt *pkt = NULL;
    const ldns_rr_list *an;
    struct dns_result res = {0};
    const char *cur;
    uint32_t chain_ttl = UINT32_MAX;
    size_t n, limit = tcp ? cap : q->udp_size;
    int r, rcode;

    r = upstream_parse(q, id, msg, len, &up, err);
    if (r < 0)
        return r;
    an = ldns_pkt_answer(up);
    n = ldns_rr_list_rr_count(an);
    rcode = ldns_pkt_get_rcode(up);
    if (rcode != DNS_NOERROR && rcode != DNS_NXDOMAIN)
        rcode = DNS_SERVFAIL;
    memcpy(res.chain[0], q->name, strlen(q->name) + 1);
    res.n_chain = 1;

    /* The CNAME chain, inside the answer section only. */
    cur = res.chain[0];
    while (rcode != DNS_SERVFAIL && q->qtype != LDNS_RR_TYPE_CNAME) {
        const ldns_rr *link = NULL;
        char target[NET_NAME_MAX + 1];
        for (size_t i = 0; i < n; i++) {
            const ldns_rr *rr = ldns_rr_list_rr(an, i);
            if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME || !owner_is(rr, cur))
                continue;
            if (link)
                return err_set(err, EBADMSG, "DNS answer has two CNAMEs for '%s'", cur);
            link = rr;
        }
        if (!link)
            break;
        if (rdf_name(ldns_rr_rdf(link, 0), target) < 0)
            return err_set(err, EBADMSG, "DNS answer's CNAME for '%s' is not a host name", cur);
        for (size_t k = 0; k < res.n_chain; k++)
            if (strcmp(res.chain[k], target) == 0)
                return err_set(err, ELOOP, "DNS answer's CNAMEs loop at '%s'", target);
        if (res.n_chain > DNS_CHAIN_MAX)
            return err_set(err, ELOOP, "DNS answer for '%s' has more than %d CNAMEs", q->name,
                           DNS_CHAIN_MAX);
        if (!policy_check_name(p, target, &res.why) && res.why.why == POLICY_WHY_DENY) {
            res.denied = true;
            rcode = DNS_NXDOMAIN;
        }
        memcpy(res.chain[res.n_chain], target, strlen(target) + 1);
        cur = res.chain[res.n_chain++];
        chain_ttl = MIN(chain_ttl, ldns_rr_ttl(link));
        if (res.denied)
            break;
    }

    r = answer_new(q, rcode, &pkt);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && !res.denied && rcode != DNS_SERVFAIL; i++) {
        const ldns_rr *rr = ldns_rr_list_rr(an, i);
        ldns_rr_type t = ldns_rr_get_type(rr);
        bool link = false, want;
        for (size_t k = 0; k + 1 < res.n_chain && t == LDNS_RR_TYPE_CNAME; k++)
            link = link || owner_is(rr, res.chain[k]);
        want = t == q->qtype && owner_is(rr, cur);
        if (!link && !want)
            continue;
        if (want && (t == LDNS_RR_TYPE_A || t == LDNS_RR_TYPE_AAAA)) {
            const ldns_rdf *d = ldns_rr_rdf(rr, 0);
            struct dns_addr *a = &res.addrs[res.n_addrs];
            if (res.n_addrs == DNS_ADDRS_MAX || !d ||
                net_addr_from_bytes(ldns_rdf_data(d), ldns_rdf_size(d), &a->addr) < 0 ||
                (a->addr.family == AF_INET) != (t == LDNS_RR_TYPE_A))
                continue;
            a->ttl = MIN(MIN(chain_ttl, ldns_rr_ttl(rr)), (uint32_t)NET_NAMES_TTL_MAX);
            res.n_addrs++;
        }
        r = push_answer(pkt, rr);
        if (r < 0)
            return r;
    }
    r = to_wire(pkt, out, MIN(cap, limit), ret_len);
    if (r == -ENOBUFS && !tcp) {
        /* Too large for the sandbox's UDP: TC and no records; it asks over TCP. */
        ldns_pkt_free(TAKE_PTR(pkt));
        r = answer_new(q, rcode, &pkt);
        if (r < 0)
            return r;
        ldns_pkt_set_tc(pkt, true);
        res.n_addrs = 0;
        r = to_wire(pkt, out, cap, ret_len);
    }
    if (r < 0)
        return r;
    res.rcode = rcode;
    *ret = res;
    return 0;
}

size_t
dns_result_record(const struct dns_result *r, struct net_names *names, uint64_t now)
{
    size_t c = 0;
    for (size_t i = 0; i < r->n_addrs; i++)
        c += net_names_add(names, r->chain[0], &r->addrs[i].addr, r->addrs[i].ttl, now) == 0;
    return c;
}
