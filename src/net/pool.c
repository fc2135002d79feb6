/*
 * pool.c - slot arithmetic of the address pool and the formatting of
 * addresses and blocks. Pure functions; see pool.h.
 */
#include "net/pool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

void
net_pool_default(struct net_pool *ret)
{
    *ret = (struct net_pool){
            .v4 = {.ip = {.family = AF_INET, .bytes = {10, 200, 0, 0}}, .prefix = 16},
            .v4_slot = 30,
            .v6 = {.ip = {.family = AF_INET6, .bytes = {0xfd, 0x61, 0x62, 0x78}}, .prefix = 48},
            .v6_slot = 64,
    };
}

static unsigned
family_bits(int family)
{
    return family == AF_INET ? 32 : family == AF_INET6 ? 128 : 0;
}

int
net_block_check(const struct net_block *b, struct err *err)
{
    unsigned bits = family_bits(b->ip.family);
    if (!bits)
        return err_set(err, EAFNOSUPPORT, "address family %d is neither IPv4 nor IPv6",
                       b->ip.family);
    if (b->prefix > bits)
        return err_set(err, EINVAL, "prefix /%u is longer than %u bits", b->prefix, bits);
    for (unsigned i = b->prefix; i < bits; i++)
        if (b->ip.bytes[i / 8] & (0x80u >> (i % 8))) {
            char s[NET_IP_STR];
            (void)net_ip_format(&b->ip, s);
            return err_set(err, EINVAL, "%s/%u has bits set past its prefix", s, b->prefix);
        }
    return 0;
}

bool
net_block_contains(const struct net_block *outer, const struct net_block *inner)
{
    if (outer->ip.family != inner->ip.family || outer->prefix > inner->prefix)
        return false;
    for (unsigned i = 0; i < outer->prefix; i++) {
        uint8_t m = 0x80u >> (i % 8);
        if ((outer->ip.bytes[i / 8] & m) != (inner->ip.bytes[i / 8] & m))
            return false;
    }
    return true;
}

int
net_ip_format(const struct net_ip *ip, char buf[static NET_IP_STR])
{
    if (!family_bits(ip->family) || !inet_ntop(ip->family, ip->bytes, buf, NET_IP_STR)) {
        buf[0] = '\0';
        return -EAFNOSUPPORT;
    }
    return 0;
}

int
net_block_format(const struct net_block *b, char buf[static NET_BLOCK_STR])
{
    char s[NET_IP_STR];
    int r = net_ip_format(&b->ip, s);
    if (r < 0)
        return r;
    int n = snprintf(buf, NET_BLOCK_STR, "%s/%u", s, b->prefix);
    return n > 0 && n < NET_BLOCK_STR ? 0 : -EOVERFLOW;
}

bool
net_ifname_valid(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= NET_IFNAME_MAX || !((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9')))
            return false;
    return n > 0;
}

void
net_pool_ifnames(uint32_t slot, char host[static IFNAMSIZ], char sb[static IFNAMSIZ])
{
    /* "abx" + at most 10 digits + 1 letter = 14 bytes < IFNAMSIZ. */
    (void)snprintf(host, IFNAMSIZ, "abx%uh", slot);
    (void)snprintf(sb, IFNAMSIZ, "abx%us", slot);
}

/* log2 of the slots a block of prefix holds at slot_prefix, capped. */
static unsigned
slot_bits(uint8_t prefix, uint8_t slot_prefix)
{
    unsigned b = (unsigned)slot_prefix - prefix;
    return b > 16 ? 16 : b; /* 2^16 = NET_POOL_SLOTS_MAX */
}

int
net_pool_check(const struct net_pool *p, struct err *err)
{
    int r;
    if (p->v4.ip.family != AF_INET)
        return err_set(err, EINVAL, "the pool needs an IPv4 block");
    r = net_block_check(&p->v4, err);
    if (r < 0)
        return r;
    if (p->v4_slot != 30 && p->v4_slot != 31)
        return err_set(err, EINVAL, "an IPv4 slot is a /30 or a /31, not a /%u", p->v4_slot);
    if (p->v4.prefix > p->v4_slot)
        return err_set(err, EINVAL, "the IPv4 pool /%u is smaller than one /%u slot", p->v4.prefix,
                       p->v4_slot);
    if (p->v6.ip.family == 0)
        return 0;
    if (p->v6.ip.family != AF_INET6)
        return err_set(err, EINVAL, "the pool's second block must be IPv6");
    r = net_block_check(&p->v6, err);
    if (r < 0)
        return r;
    if (p->v6_slot != 64 && p->v6_slot != 127)
        return err_set(err, EINVAL, "an IPv6 slot is a /64 or a /127, not a /%u", p->v6_slot);
    if (p->v6.prefix > p->v6_slot)
        return err_set(err, EINVAL, "the IPv6 pool /%u is smaller than one /%u slot", p->v6.prefix,
                       p->v6_slot);
    return 0;
}

uint32_t
net_pool_slots(const struct net_pool *p)
{
    unsigned b = slot_bits(p->v4.prefix, p->v4_slot);
    if (p->v6.ip.family == AF_INET6)
        b = MIN(b, slot_bits(p->v6.prefix, p->v6_slot));
    return 1u << b;
}

/* Adds v * 2^shift to the big-endian number of n bytes at b. The caller
 * keeps the sum inside the pool's block, so nothing carries out of b. */
static void
add_shifted(uint8_t *b, size_t n, uint32_t v, unsigned shift)
{
    uint64_t acc = (uint64_t)v << (shift % 8);
    unsigned carry = 0;
    for (size_t k = shift / 8; k < n && (acc || carry); k++) {
        size_t i = n - 1 - k;
        unsigned s = b[i] + (unsigned)(acc & 0xff) + carry;
        b[i] = (uint8_t)s;
        carry = s >> 8;
        acc >>= 8;
    }
}

/* The gateway and sandbox addresses of slot in block at slot_prefix. */
static void
slot_addrs(const struct net_block *block, uint8_t slot_prefix, uint32_t slot, struct net_ip *gw,
           struct net_ip *sb)
{
    unsigned bits = family_bits(block->ip.family);
    size_t n = bits / 8;
    *gw = block->ip;
    add_shifted(gw->bytes, n, slot, bits - slot_prefix);
    /* A block of two (/31, /127) has no network or broadcast address to
     * skip; a /30 skips .0, a /64 skips the subnet-router anycast ::0. */
    if (slot_prefix != bits - 1)
        add_shifted(gw->bytes, n, 1, 0);
    *sb = *gw;
    add_shifted(sb->bytes, n, 1, 0);
}

int
net_pool_slot(const struct net_pool *p, uint32_t slot, struct net_slot *ret, struct err *err)
{
    int r = net_pool_check(p, err);
    if (r < 0)
        return r;
    if (slot >= net_pool_slots(p))
        return err_set(err, ERANGE, "slot %u is past the pool's %u", slot, net_pool_slots(p));
    struct net_slot s = {.slot = slot, .prefix4 = p->v4_slot};
    slot_addrs(&p->v4, p->v4_slot, slot, &s.gw4, &s.sb4);
    if (p->v6.ip.family == AF_INET6) {
        s.has6 = true;
        s.prefix6 = p->v6_slot;
        slot_addrs(&p->v6, p->v6_slot, slot, &s.gw6, &s.sb6);
    }
    *ret = s;
    return 0;
}
