/*
 * dns.h - the sandbox resolver's message handling: a query from a sandbox
 * read strictly, the answers we make up (refusals, errors), the query we
 * send upstream, and the upstream answer checked and cut down to what the
 * sandbox may see. The wire format is ldns's (libldns, Debian's
 * libldns-dev); the rules are ours. No sockets, no clock, no randomness:
 * the resolver loop (later) owns those and calls these on buffers.
 *
 * A query (dns_query_parse()) is at most DNS_QUERY_MAX bytes with QR clear,
 * opcode QUERY, exactly one question of class IN, no answer or authority
 * records and no additional record but one EDNS OPT; its name must be a
 * host name (LDH and '_', net_name_normalize()), else REFUSED. Errors say
 * which answer the sandbox gets (dns_rcode_of()):
 *   -EPROTO      none: shorter than a header, or a response (QR set; never
 *                answer those, a loop between resolvers waits there)
 *   -EBADMSG     FORMERR: malformed, counts wrong, two questions, trailing
 *                bytes, compression loops or pointers out of range
 *   -EMSGSIZE    FORMERR: longer than DNS_QUERY_MAX
 *   -EOPNOTSUPP  NOTIMP: opcode other than QUERY, class other than IN
 *   -EPERM       REFUSED: a name that is no host name
 * The type is the caller's to check (dns_type_allowed()), so that its
 * REFUSED can echo the question (dns_answer_rcode()).
 *
 * Query types (dns_type_allowed()): A, AAAA, CNAME, HTTPS, SVCB, MX, SRV,
 * NS, SOA, PTR, CAA and DS are answered. TXT, NULL and every type not
 * listed are REFUSED unless the caller passes DNS_ALL_TYPES: they carry
 * arbitrary data and are how DNS tunnels (iodine, dnscat2) move it; the
 * listed ones are what programs ask while connecting somewhere. Meta types
 * (ANY, AXFR, IXFR, MAILA, MAILB, OPT, TSIG, TKEY) are always REFUSED.
 *
 * A denied name (policy_check_name()) is answered NXDOMAIN without an SOA:
 * programs report "no such host" at once instead of retrying (REFUSED makes
 * glibc try the next server and then fail with a temporary error, which
 * reads as an outage), and with no SOA the sandbox's own caches keep no
 * negative entry (RFC 2308), so an updated policy holds at once. Stub
 * resolvers are what sandboxes run; a validating resolver inside one that
 * applies RFC 8020 would read NXDOMAIN for example.com (under an allowed
 * *.example.com) as "nothing below exists": allow the apex too then.
 *
 * An upstream answer (dns_answer_filter()) must be a response to exactly
 * what we sent: same id, opcode QUERY, the one question equal to ours
 * (names compared case-insensitively), else -EPROTO (drop it and keep
 * waiting: a spoofed or stray packet). TC set: -EAGAIN, ask again over TCP.
 * At most DNS_ANSWER_MAX bytes and DNS_RRS_MAX records in all sections
 * (-EMSGSIZE), malformed -EBADMSG. Then: the CNAME chain from the question
 * is followed inside the answer section (at most DNS_CHAIN_MAX links); a
 * link to a name a deny rule matches makes the whole answer NXDOMAIN; what
 * the sandbox gets is the chain's CNAMEs and the records of the asked type
 * owned by its last name (at most DNS_ADDRS_MAX A/AAAA), every other record
 * (other owners, authority, additional, DNSSEC signatures) dropped, TTLs
 * capped at NET_NAMES_TTL_MAX (so the sandbox never keeps an address
 * longer than the resolver record vouches for it), AD cleared. SERVFAIL,
 * REFUSED and other upstream errors become SERVFAIL. An answer too large
 * for the sandbox's UDP size is sent with TC and no records.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/names.h"
#include "net/net.h"
#include "net/policy.h"
#include "util/err.h"

#define DNS_HEADER_LEN 12
#define DNS_QUERY_MAX  1232  /* bytes of a query from a sandbox (EDNS's common size) */
#define DNS_ANSWER_MAX 65535 /* bytes of an upstream answer (TCP's limit) */
#define DNS_UDP_MAX    1232  /* bytes of a UDP answer we send with EDNS; 512 without */
#define DNS_RRS_MAX    256   /* records in an upstream answer, all sections */
#define DNS_CHAIN_MAX  8     /* CNAME links followed */
#define DNS_ADDRS_MAX  64    /* A/AAAA records kept from one answer */
#define DNS_NAME_WIRE  255   /* bytes of a name in wire form */

/* Answer codes (RFC 1035, 2136). */
enum {
    DNS_NOERROR = 0,
    DNS_FORMERR = 1,
    DNS_SERVFAIL = 2,
    DNS_NXDOMAIN = 3,
    DNS_NOTIMP = 4,
    DNS_REFUSED = 5,
};

/* Flags of dns_type_allowed(). */
enum {
    DNS_ALL_TYPES = 1 << 0, /* answer TXT, NULL and unlisted types too (not meta types) */
};

struct dns_query {
    uint16_t id;
    uint16_t qtype;
    bool rd;                           /* recursion desired, echoed */
    bool cd;                           /* checking disabled, passed upstream */
    bool edns;                         /* the query had an OPT record */
    bool dnssec_ok;                    /* its DO bit */
    uint16_t udp_size;                 /* bytes the sandbox takes over UDP: 512..DNS_UDP_MAX */
    char name[NET_NAME_MAX + 1];       /* normalised: lowercase, no final dot */
    uint8_t qname_wire[DNS_NAME_WIRE]; /* the name as sent (case kept, for the echo) */
    size_t qname_len;                  /* bytes of qname_wire */
};

/* One address an answer gave for the question's name. */
struct dns_addr {
    struct net_addr addr;
    uint32_t ttl; /* seconds: the smallest along the CNAME chain */
};

struct dns_result {
    int rcode;                                       /* what the sandbox got */
    bool denied;                                     /* a chain link was denied: NXDOMAIN */
    struct policy_decision why;                      /* for denied: the rule */
    size_t n_chain;                                  /* names in chain, >= 1 */
    char chain[DNS_CHAIN_MAX + 1][NET_NAME_MAX + 1]; /* [0] the question, then CNAME targets */
    size_t n_addrs;
    struct dns_addr addrs[DNS_ADDRS_MAX]; /* A/AAAA the sandbox got, for net_names */
};

/* Parses a query of len bytes from a sandbox into ret (the rules above). */
int dns_query_parse(const void *msg, size_t len, struct dns_query *ret, struct err *err);

/* Whether a query for type is answered (see above). */
bool dns_type_allowed(uint16_t type, unsigned flags);

/* The answer code for an error of dns_query_parse() or of the resolver
 * (-ENOENT: NXDOMAIN), or -1 for "send nothing" (-EPROTO). */
int dns_rcode_of(int error);

/* An answer to q with rcode and no records (a denied name, a refused type),
 * id and question echoed, into out of cap bytes; sets *ret_len. -ENOBUFS
 * when cap is too small, -ENOMEM. */
int dns_answer_rcode(const struct dns_query *q, int rcode, uint8_t *out, size_t cap,
                     size_t *ret_len);

/* The answer to a query dns_query_parse() refused: its id, opcode and RD,
 * rcode, no question. -EPROTO when msg cannot be answered (see above). */
int dns_answer_error(const void *msg, size_t len, int rcode, uint8_t *out, size_t cap,
                     size_t *ret_len);

/* The query we send upstream for q: id (the caller's random one), RD,
 * CD as the sandbox asked, EDNS with DNS_UDP_MAX and its DO bit. */
int dns_upstream_query(const struct dns_query *q, uint16_t id, uint8_t *out, size_t cap,
                       size_t *ret_len);

/* Checks an upstream answer msg (len bytes) to the query q we sent with id,
 * and writes the sandbox's answer (q's id and question) into out of cap
 * bytes, sets *ret_len and fills ret. tcp: the sandbox asked over TCP (no
 * UDP size limit, cap still holds). p decides the chain's names. */
int dns_answer_filter(const struct dns_query *q, uint16_t id, const void *msg, size_t len,
                      const struct net_policy *p, bool tcp, uint8_t *out, size_t cap,
                      size_t *ret_len, struct dns_result *ret, struct err *err);

/* Records what r gave the sandbox in names: the question's name -> each
 * address, at now (the caller's clock, seconds). Returns the count. */
size_t dns_result_record(const struct dns_result *r, struct net_names *names, uint64_t now);
