/*
 * pool.h - the sandboxes' address pool: slot number -> (gateway address,
 * sandbox address), and the address words of the host data path.
 *
 * Each sandbox gets a slot; slot s owns the s-th block of the pool's IPv4
 * CIDR (a /30 or /31) and, when the pool has IPv6, the s-th /64 or /127 of
 * its IPv6 CIDR. The gateway (the host end of the sandbox's veth) and the
 * sandbox end take two addresses of that block. Pure arithmetic on C
 * structs: no sockets, no allocation, no text from clients. Functions
 * return 0 (or a count) on success and -errno on failure, never log, and
 * fill err when given one; ret_ parameters are written only on success.
 */
#pragma once

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

#define NET_POOL_SLOTS_MAX 65536u /* sandboxes one pool can address, whatever its size */
#define NET_IP_STR         46     /* bytes of an address in text form, with the NUL */
#define NET_BLOCK_STR      50     /* bytes of "address/prefix", with the NUL */
#define NET_IFNAME_MAX     15     /* bytes of an interface name we make (IFNAMSIZ - 1) */

/* An IPv4 or IPv6 address. */
struct net_ip {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

/* An address block: every bit past prefix is zero (net_block_check()). */
struct net_block {
    struct net_ip ip;
    uint8_t prefix; /* bits, 0..32 for IPv4, 0..128 for IPv6 */
};

/*
 * The pool. The default (net_pool_default()) is 10.200.0.0/16 in /30s
 * (16384 sandboxes) and fd61:6278::/48 in /64s ("abx" in ASCII, a ULA):
 * 10.200/16 is outside what home routers hand out (192.168.x, 10.0.x,
 * 10.1.x) and what Docker takes (172.17/16 and up); an operator whose LAN
 * uses it configures another block.
 */
struct net_pool {
    struct net_block v4; /* required */
    uint8_t v4_slot;     /* prefix of one slot's IPv4 block: 30 or 31 */
    struct net_block v6; /* ip.family 0 = no IPv6 */
    uint8_t v6_slot;     /* prefix of one slot's IPv6 block: 64 or 127 */
};

/* One slot's addresses. */
struct net_slot {
    uint32_t slot;
    struct net_ip gw4, sb4; /* gateway (host end) and sandbox end */
    uint8_t prefix4;        /* = the pool's v4_slot */
    bool has6;
    struct net_ip gw6, sb6;
    uint8_t prefix6;
};

void net_pool_default(struct net_pool *ret);

/* Checks a pool: families, a v4 block of at least one slot, slot prefixes
 * 30/31 and 64/127, no host bits. -EINVAL with a message. */
int net_pool_check(const struct net_pool *p, struct err *err);

/* Slots the pool holds: the fewest of its families, at most
 * NET_POOL_SLOTS_MAX. The pool must have passed net_pool_check(). */
uint32_t net_pool_slots(const struct net_pool *p);

/* The addresses of slot. -ERANGE past net_pool_slots(), -EINVAL for a bad
 * pool. For a /30: gateway .1, sandbox .2 of the block; for a /31 (and a
 * /127): the block's first and second address; for a /64: ::1 and ::2. */
int net_pool_slot(const struct net_pool *p, uint32_t slot, struct net_slot *ret, struct err *err);

/* The interface names of slot: "abx<slot>h" (host end) and "abx<slot>s"
 * (sandbox end), always shorter than IFNAMSIZ. */
void net_pool_ifnames(uint32_t slot, char host[static IFNAMSIZ], char sb[static IFNAMSIZ]);

/* Whether s is a name we put into netlink or nftables: [a-z0-9]{1,15}. */
bool net_ifname_valid(const char *s);

/* Checks family, prefix range and that no bit past the prefix is set. */
int net_block_check(const struct net_block *b, struct err *err);

/* Whether inner lies within outer (same family, prefix no shorter). */
bool net_block_contains(const struct net_block *outer, const struct net_block *inner);

/* inet_ntop into buf; -EAFNOSUPPORT for an unknown family. */
int net_ip_format(const struct net_ip *ip, char buf[static NET_IP_STR]);

/* "address/prefix" into buf; the block must have passed net_block_check(). */
int net_block_format(const struct net_block *b, char buf[static NET_BLOCK_STR]);
