/*
 * net.h - the network piece's shared words: IP addresses, CIDRs, host names
 * and the operator's always-forbidden address ranges.
 *
 * Everything here is a pure function on memory: no sockets, no resolver, no
 * allocation. The egress policy (policy.h), the resolver's record of names
 * (names.h), the DNS message handling (dns.h) and the SNI/Host extraction
 * (sni.h) are built on it. Functions return 0 (or a count) on success and
 * -errno on failure, never log, and fill err when given one; ret_
 * parameters are written only on success.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define NET_NAME_MAX  253 /* bytes of a host name in text form, without a final dot */
#define NET_LABEL_MAX 63  /* bytes of one label */
#define NET_ADDR_STR  46  /* bytes of an address in text form, with the NUL (INET6_ADDRSTRLEN) */
#define NET_CIDR_STR  50  /* bytes of a CIDR in text form, with the NUL */

/* An IPv4 or IPv6 address. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are
 * always stored as the IPv4 address they map, so a rule or a forbidden
 * range for 169.254.0.0/16 also holds for ::ffff:169.254.169.254. */
struct net_addr {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

/* An address block: the address with every bit past prefix cleared. */
struct net_cidr {
    struct net_addr addr;
    uint8_t prefix; /* bits, 0..32 for IPv4, 0..128 for IPv6 */
};

/* Flags of net_name_normalize(). */
enum {
    NET_NAME_UNDERSCORE = 1 << 0, /* allow '_' in labels (DNS query names: _srv._tcp) */
    NET_NAME_FINAL_DOT = 1 << 1,  /* accept (and drop) one final '.' (Host, DNS text) */
};

/* Parses a literal IPv4 (dotted quad, no leading zeros) or IPv6 address (no
 * zone, no brackets). -EINVAL with a message otherwise. */
int net_addr_parse(const char *s, struct net_addr *ret, struct err *err);

/* Writes a in text form (inet_ntop) into buf of at least NET_ADDR_STR bytes. */
void net_addr_format(const struct net_addr *a, char buf[static NET_ADDR_STR]);

/* Builds an address from 4 (AF_INET) or 16 (AF_INET6) network-order bytes,
 * folding IPv4-mapped IPv6 into IPv4. -EINVAL for any other length. */
int net_addr_from_bytes(const void *bytes, size_t len, struct net_addr *ret);

bool net_addr_equal(const struct net_addr *a, const struct net_addr *b);

/* Parses "ADDR/PREFIX" (prefix in decimal without leading zeros, at most 32
 * or 128). Bits past the prefix are cleared, so "10.1.2.3/8" is 10.0.0.0/8
 * (the form users write when they mean the block); net_cidr_format() shows
 * what was kept. -EINVAL with a message otherwise. */
int net_cidr_parse(const char *s, struct net_cidr *ret, struct err *err);

/* "ADDR/PREFIX" into buf of at least NET_CIDR_STR bytes. */
void net_cidr_format(const struct net_cidr *c, char buf[static NET_CIDR_STR]);

/* Whether a lies in c (never across families). */
bool net_cidr_contains(const struct net_cidr *c, const struct net_addr *a);

/* Checks and normalises a host name of len bytes (not NUL-terminated) into
 * ret (NUL-terminated, lowercase): labels of 1..NET_LABEL_MAX bytes of
 * letters, digits and inner hyphens ('_' too with NET_NAME_UNDERSCORE),
 * joined by single dots, at most NET_NAME_MAX bytes, and not an address: a
 * last label of digits only (1.2.3.4, 0x7f.1 aside, "300.1.1.1") and
 * anything with ':' are refused. -EINVAL with a message naming the reason. */
int net_name_normalize(const char *s, size_t len, unsigned flags, char ret[static NET_NAME_MAX + 1],
                       struct err *err);

/* Whether s (NUL-terminated) is what net_name_normalize() returns: the
 * fuzz targets' and tests' check of every name a parser hands out. */
bool net_name_valid(const char *s, unsigned flags);

/* Whether name equals suffix or ends in "." suffix (both normalised). */
bool net_name_in_domain(const char *name, const char *domain);

/*
 * The operator's fixed ranges no sandbox policy can open: unspecified,
 * loopback, private (RFC 1918, fc00::/7 and so fd00:ec2::254), shared
 * (100.64.0.0/10), link-local (169.254.0.0/16 with the cloud metadata
 * address, fe80::/10), benchmarking, documentation, IETF protocol
 * assignments, multicast, reserved and broadcast, the NAT64 well-known
 * prefix 64:ff9b::/96 (it reaches IPv4 ones) and 6to4/Teredo (ditto).
 * allowed lists the operator's exceptions (say, a private registry's
 * 10.1.2.0/24); n_allowed of them, which may be 0 with allowed NULL.
 *
 * Returns NULL when a may be reached, else a static description of the
 * range that forbids it ("link-local 169.254.0.0/16"), for the connection
 * log. The host's own addresses are not a fixed range: the wiring must
 * drop them too (nftables: fib daddr type local).
 */
const char *net_addr_forbidden(const struct net_addr *a, const struct net_cidr *allowed,
                               size_t n_allowed);
