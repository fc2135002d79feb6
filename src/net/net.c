/*
 * net.c - addresses, CIDRs and host names as text and bytes, and the fixed
 * forbidden ranges. inet_pton()/inet_ntop() do the address syntax (pure
 * libc functions, no resolver); the rest is ours.
 */
#include "net/net.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "util/parse.h"

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int
net_addr_from_bytes(const void *bytes, size_t len, struct net_addr *ret)
{
    struct net_addr a = {0};

    if (len == 4) {
        a.family = AF_INET;
        memcpy(a.bytes, bytes, 4);
    } else if (len == 16) {
        if (memcmp(bytes, v4mapped, sizeof(v4mapped)) == 0) {
            a.family = AF_INET;
            memcpy(a.bytes, (const uint8_t *)bytes + 12, 4);
        } else {
            a.family = AF_INET6;
            memcpy(a.bytes, bytes, 16);
        }
    } else {
        return -EINVAL;
    }
    *ret = a;
    return 0;
}

int
net_addr_parse(const char *s, struct net_addr *ret, struct err *err)
{
    uint8_t b[16];

    if (strlen(s) >= NET_ADDR_STR)
        return err_set(err, EINVAL, "'%.*s...' is too long for an IP address", 16, s);
    if (inet_pton(AF_INET, s, b) == 1)
        return net_addr_from_bytes(b, 4, ret);
    if (inet_pton(AF_INET6, s, b) == 1)
        return net_addr_from_bytes(b, 16, ret);
    return err_set(err, EINVAL, "'%s' is not an IPv4 or IPv6 address", s);
}

void
net_addr_format(const struct net_addr *a, char buf[static NET_ADDR_STR])
{
    if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->bytes, buf, NET_ADDR_STR))
        strscpy(buf, "?", NET_ADDR_STR);
}

bool
net_addr_equal(const struct net_addr *a, const struct net_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16) == 0;
}

static unsigned
addr_bits(const struct net_addr *a)
{
    return a->family == AF_INET ? 32 : 128;
}

static void
cidr_mask(struct net_cidr *c)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned lo = i * 8;
        if (lo >= c->prefix)
            c->addr.bytes[i] = 0;
        else if (lo + 8 > c->prefix)
            c->addr.bytes[i] &= (uint8_t)(0xff << (lo + 8 - c->prefix));
    }
}

int
net_cidr_parse(const char *s, struct net_cidr *ret, struct err *err)
{
    char host[NET_ADDR_STR];
    struct net_cidr c = {0};
    uint32_t prefix;
    const char *slash = strchr(s, '/');
    int r;

    if (!slash)
        return err_set(err, EINVAL, "'%s' is not a CIDR (no '/')", s);
    if ((size_t)(slash - s) >= sizeof(host))
        return err_set(err, EINVAL, "'%.*s...' is too long for a CIDR", 16, s);
    memcpy(host, s, (size_t)(slash - s));
    host[slash - s] = '\0';
    r = net_addr_parse(host, &c.addr, NULL);
    if (r < 0)
        return err_set(err, EINVAL, "'%s' is not a CIDR: '%s' is not an IP address", s, host);
    /* parse_u32() takes "007"; a prefix is written without leading zeros. */
    if ((slash[1] == '0' && slash[2] != '\0') || parse_u32(slash + 1, &prefix) < 0)
        return err_set(err, EINVAL, "'%s' is not a CIDR: bad prefix length", s);
    /* An IPv4-mapped block is given in IPv6 bits; keep it as its IPv4 block. */
    if (c.addr.family == AF_INET && strchr(host, ':')) {
        if (prefix < 96)
            return err_set(err, EINVAL, "'%s': an IPv4-mapped block needs a prefix of at least 96",
                           s);
        prefix -= 96;
    }
    if (prefix > addr_bits(&c.addr))
        return err_set(err, EINVAL, "'%s' is not a CIDR: prefix longer than %u bits", s,
                       addr_bits(&c.addr));
    c.prefix = (uint8_t)prefix;
    cidr_mask(&c);
    *ret = c;
    return 0;
}

void
net_cidr_format(const struct net_cidr *c, char buf[static NET_CIDR_STR])
{
    char a[NET_ADDR_STR];

    net_addr_format(&c->addr, a);
    (void)snprintf(buf, NET_CIDR_STR, "%s/%u", a, c->prefix);
}

bool
net_cidr_contains(const struct net_cidr *c, const struct net_addr *a)
{
    struct net_cidr masked = {.addr = *a, .prefix = c->prefix};

    if (c->addr.family != a->family)
        return false;
    cidr_mask(&masked);
    return memcmp(masked.addr.bytes, c->addr.bytes, 16) == 0;
}

static bool
is_ldh(char c, unsigned flags)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           (c == '_' && (flags & NET_NAME_UNDERSCORE));
}

int
net_name_normalize(const char *s, size_t len, unsigned flags, char ret[static NET_NAME_MAX + 1],
                   struct err *err)
{
    char out[NET_NAME_MAX + 1];
    size_t label = 0;
    bool digits_only = true;

    if ((flags & NET_NAME_FINAL_DOT) && len > 1 && s[len - 1] == '.')
        len--;
    if (len == 0)
        return err_set(err, EINVAL, "empty host name");
    if (len > NET_NAME_MAX)
        return err_set(err, EINVAL, "host name of %zu bytes is longer than %d", len, NET_NAME_MAX);
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : '.';
        if (c == '.') {
            if (label == 0)
                return err_set(err, EINVAL, "host name '%.*s' has an empty label", (int)len, s);
            if (out[i - 1] == '-' || out[i - label] == '-')
                return err_set(err, EINVAL, "host name '%.*s': a label starts or ends with '-'",
                               (int)len, s);
            label = 0;
            if (i < len) {
                out[i] = '.';
                digits_only = true;
            }
            continue;
        }
        if (!is_ldh(c, flags))
            return err_set(err, EINVAL, "host name '%.*s' has a character that is not %s",
                           (int)MIN(len, 64), s,
                           flags & NET_NAME_UNDERSCORE ? "a letter, digit, '-' or '_'"
                                                       : "a letter, digit or '-'");
        if (++label > NET_LABEL_MAX)
            return err_set(err, EINVAL, "host name '%.*s...' has a label longer than %d",
                           (int)MIN(len, 64), s, NET_LABEL_MAX);
        if (c < '0' || c > '9')
            digits_only = false;
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    /* No top-level domain is numeric: such a "name" is an address literal
     * (1.2.3.4, or the 0177.1 and 2130706433 forms inet_aton takes). */
    if (digits_only)
        return err_set(err, EINVAL, "'%.*s' is an address, not a host name", (int)len, s);
    out[len] = '\0';
    memcpy(ret, out, len + 1);
    return 0;
}

bool
net_name_valid(const char *s, unsigned flags)
{
    char n[NET_NAME_MAX + 1];
    size_t len = strnlen(s, NET_NAME_MAX + 1);

    if (len > NET_NAME_MAX)
        return false;
    return net_name_normalize(s, len, flags & ~NET_NAME_FINAL_DOT, n, NULL) == 0 &&
           strcmp(n, s) == 0;
}

bool
net_name_in_domain(const char *name, const char *domain)
{
    size_t n = strlen(name), d = strlen(domain);

    if (n == d)
        return memcmp(name, domain, n) == 0;
    return n > d && name[n - d - 1] == '.' && memcmp(name + n - d, domain, d) == 0;
}

struct forbidden {
    const char *what;
    const char *cidr;
};

/* IANA's special-purpose registries (RFC 6890 and later), the parts a
 * sandbox has no business reaching from the host's network. */
static const struct forbidden forbidden_ranges[] = {
        {"unspecified 0.0.0.0/8", "0.0.0.0/8"},
        {"private 10.0.0.0/8", "10.0.0.0/8"},
        {"shared 100.64.0.0/10", "100.64.0.0/10"},
        {"loopback 127.0.0.0/8", "127.0.0.0/8"},
        {"link-local and metadata 169.254.0.0/16", "169.254.0.0/16"},
        {"private 172.16.0.0/12", "172.16.0.0/12"},
        {"IETF protocol 192.0.0.0/24", "192.0.0.0/24"},
        {"documentation 192.0.2.0/24", "192.0.2.0/24"},
        {"6to4 relay 192.88.99.0/24", "192.88.99.0/24"},
        {"private 192.168.0.0/16", "192.168.0.0/16"},
        {"benchmarking 198.18.0.0/15", "198.18.0.0/15"},
        {"documentation 198.51.100.0/24", "198.51.100.0/24"},
        {"documentation 203.0.113.0/24", "203.0.113.0/24"},
        {"multicast 224.0.0.0/4", "224.0.0.0/4"},
        {"reserved and broadcast 240.0.0.0/4", "240.0.0.0/4"},
        {"unspecified ::/128", "::/128"},
        {"loopback ::1/128", "::1/128"},
        {"IPv4-compatible ::/96", "::/96"},
        {"NAT64 64:ff9b::/96", "64:ff9b::/96"},
        {"local NAT64 64:ff9b:1::/48", "64:ff9b:1::/48"},
        {"discard 100::/64", "100::/64"},
        {"Teredo 2001::/32", "2001::/32"},
        {"documentation 2001:db8::/32", "2001:db8::/32"},
        {"6to4 2002::/16", "2002::/16"},
        {"unique local and metadata fc00::/7", "fc00::/7"},
        {"link-local fe80::/10", "fe80::/10"},
        {"multicast ff00::/8", "ff00::/8"},
};

/* The table parsed once (every connection and answer is checked). */
static struct net_cidr forbidden_cidrs[ELEMENTSOF(forbidden_ranges)];
static pthread_once_t forbidden_once = PTHREAD_ONCE_INIT;

static void
forbidden_parse(void)
{
    for (size_t i = 0; i < ELEMENTSOF(forbidden_ranges); i++) {
        int r = net_cidr_parse(forbidden_ranges[i].cidr, &forbidden_cidrs[i], NULL);
        assert(r == 0);
        (void)r;
    }
}

const char *
net_addr_forbidden(const struct net_addr *a, const struct net_cidr *allowed, size_t n_allowed)
{
    for (size_t i = 0; i < n_allowed; i++)
        if (net_cidr_contains(&allowed[i], a))
            return NULL;
    (void)pthread_once(&forbidden_once, forbidden_parse);
    for (size_t i = 0; i < ELEMENTSOF(forbidden_ranges); i++)
        if (net_cidr_contains(&forbidden_cidrs[i], a))
            return forbidden_ranges[i].what;
    return NULL;
}
