/*
 * names.c - the resolver's bounded record of name -> address answers. A flat
 * array with a hash of each name in front of it: small enough that a
 * linear scan costs less than keeping an index right under eviction.
 */
#include "net/names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    uint64_t expires; /* seconds on the caller's clock; 0 = free */
    uint32_t hash;    /* of name */
    struct net_addr addr;
    char name[NET_NAME_MAX + 1];
};

struct net_names {
    size_t max;
    struct entry e[];
};

/* FNV-1a: only to skip most strcmp() calls, not a defence. */
static uint32_t
name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

int
net_names_new(size_t max, struct net_names **ret)
{
    struct net_names *n;

    if (max == 0 || max > NET_NAMES_MAX)
        return -EINVAL;
    n = calloc(1, sizeof(*n) + max * sizeof(n->e[0]));
    if (!n)
        return -ENOMEM;
    n->max = max;
    *ret = n;
    return 0;
}

struct net_names *
net_names_free(struct net_names *n)
{
    free(n);
    return NULL;
}

/* The index of (name, a), or n->max when it is not there. */
static size_t
find(const struct net_names *n, const char *name, uint32_t h, const struct net_addr *a)
{
    size_t i;
    for (i = 0; i < n->max; i++) {
        const struct entry *e = &n->e[i];
        if (e->expires && e->hash == h && net_addr_equal(&e->addr, a) && strcmp(e->name, name) == 0)
            break;
    }
    return i;
}

int
net_names_add(struct net_names *n, const char *name, const struct net_addr *a, uint32_t ttl,
              uint64_t now)
{
    uint32_t h;
    uint64_t expires;
    struct entry *e;
    size_t i;

    if (!net_name_valid(name, NET_NAME_UNDERSCORE))
        return -EINVAL;
    h = name_hash(name);
    ttl = MIN(MAX(ttl, (uint32_t)NET_NAMES_TTL_MIN), (uint32_t)NET_NAMES_TTL_MAX);
    expires = now > UINT64_MAX - ttl ? UINT64_MAX : now + ttl;
    i = find(n, name, h, a);
    if (i < n->max) {
        n->e[i].expires = MAX(n->e[i].expires, expires);
        return 0;
    }
    /* A free slot, else the one expiring first (an expired one if any). */
    e = &n->e[0];
    for (i = 0; i < n->max; i++) {
        if (!n->e[i].expires) {
            e = &n->e[i];
            break;
        }
        if (n->e[i].expires < e->expires)
            e = &n->e[i];
    }
    e->expires = expires;
    e->hash = h;
    e->addr = *a;
    memcpy(e->name, name, strlen(name) + 1);
    return 0;
}

bool
net_names_has(const struct net_names *n, const char *name, const struct net_addr *a, uint64_t now)
{
    size_t i = find(n, name, name_hash(name), a);
    return i < n->max && n->e[i].expires > now;
}

size_t
net_names_count(const struct net_names *n, uint64_t now)
{
    size_t c = 0;
    for (size_t i = 0; i < n->max; i++)
        c += n->e[i].expires > now;
    return c;
}

void
net_names_clear(struct net_names *n)
{
    memset(n->e, 0, n->max * sizeof(n->e[0]));
}
