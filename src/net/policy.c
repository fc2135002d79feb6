/*
 * policy.c - the egress policy's entries and its three checks. The lists are
 * small (POLICY_RULES_MAX) and checked once per connection or query, so
 * they are scanned in order; the first matching rule is the one reported.
 */
#include "net/policy.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

struct rules {
    size_t n, cap;
    struct policy_rule *v;
};

struct net_policy {
    bool internet;
    struct rules list[_POLICY_LIST_MAX];
};

int
policy_new(struct net_policy **ret)
{
    struct net_policy *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->internet = true;
    *ret = p;
    return 0;
}

struct net_policy *
policy_free(struct net_policy *p)
{
    if (p)
        for (size_t i = 0; i < _POLICY_LIST_MAX; i++)
            free(p->list[i].v);
    free(p);
    return NULL;
}

void
policy_set_internet(struct net_policy *p, bool on)
{
    p->internet = on;
}

bool
policy_internet(const struct net_policy *p)
{
    return p->internet;
}

int
policy_rule_parse(const char *s, struct policy_rule *ret, struct err *err)
{
    struct policy_rule r = {0};
    size_t len = strnlen(s, POLICY_RULE_LEN + 1);
    int q;

    if (len == 0)
        return err_set(err, EINVAL, "empty network rule");
    if (len > POLICY_RULE_LEN)
        return err_set(err, EINVAL, "network rule '%.32s...' is longer than %d bytes", s,
                       POLICY_RULE_LEN);
    if (strchr(s, '/')) {
        q = net_cidr_parse(s, &r.cidr, err);
        if (q < 0)
            return q;
        r.kind = POLICY_CIDR;
    } else if (net_addr_parse(s, &r.cidr.addr, NULL) == 0) {
        r.kind = POLICY_ADDR;
        r.cidr.prefix = r.cidr.addr.family == AF_INET ? 32 : 128;
    } else if (s[0] == '*') {
        if (s[1] != '.' || s[2] == '\0')
            return err_set(err, EINVAL,
                           "network rule '%s': a wildcard is '*.' and a domain ('*.example.com')",
                           s);
        q = net_name_normalize(s + 2, len - 2, 0, r.name, err);
        if (q < 0)
            return q;
        r.kind = POLICY_WILDCARD;
    } else {
        if (strchr(s, ':'))
            return err_set(err, EINVAL, "network rule '%s' is not an IPv6 address", s);
        q = net_name_normalize(s, len, 0, r.name, err);
        if (q < 0)
            return q;
        r.kind = POLICY_NAME;
    }
    *ret = r;
    return 0;
}

void
policy_rule_format(const struct policy_rule *r, char buf[static POLICY_RULE_STR])
{
    switch (r->kind) {
    case POLICY_ADDR:
        net_addr_format(&r->cidr.addr, buf);
        break;
    case POLICY_CIDR:
        net_cidr_format(&r->cidr, buf);
        break;
    case POLICY_NAME:
        (void)snprintf(buf, POLICY_RULE_STR, "%s", r->name);
        break;
    case POLICY_WILDCARD:
        (void)snprintf(buf, POLICY_RULE_STR, "*.%s", r->name);
        break;
    default:
        (void)snprintf(buf, POLICY_RULE_STR, "?");
        break;
    }
}

static bool
is_addr_rule(const struct policy_rule *r)
{
    return r->kind == POLICY_ADDR || r->kind == POLICY_CIDR;
}

static bool
rule_equal(const struct policy_rule *a, const struct policy_rule *b)
{
    if (a->kind != b->kind)
        return false;
    if (is_addr_rule(a))
        return a->cidr.prefix == b->cidr.prefix && net_addr_equal(&a->cidr.addr, &b->cidr.addr);
    return strcmp(a->name, b->name) == 0;
}

int
policy_add(struct net_policy *p, enum policy_list list, const char *s, unsigned flags,
           struct err *err)
{
    struct policy_rule r;
    struct rules *l;
    int q;

    assert(list >= 0 && list < _POLICY_LIST_MAX);
    l = &p->list[list];
    q = policy_rule_parse(s, &r, err);
    if (q < 0)
        return q;
    if (list == POLICY_DENY && (flags & POLICY_E2B) && !is_addr_rule(&r))
        return err_set(err, EINVAL, "denyOut takes IP addresses and CIDRs only, not '%s'", s);
    for (size_t i = 0; i < l->n; i++)
        if (rule_equal(&l->v[i], &r))
            return 0;
    if (l->n == POLICY_RULES_MAX)
        return err_set(err, E2BIG, "more than %d %s entries", POLICY_RULES_MAX,
                       list == POLICY_ALLOW ? "allow" : "deny");
    if (l->n == l->cap) {
        size_t cap = l->cap ? MIN(l->cap * 2, (size_t)POLICY_RULES_MAX) : 8;
        struct policy_rule *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = r;
    return 0;
}

size_t
policy_count(const struct net_policy *p, enum policy_list list)
{
    assert(list >= 0 && list < _POLICY_LIST_MAX);
    return p->list[list].n;
}

const struct policy_rule *
policy_rule(const struct net_policy *p, enum policy_list list, size_t i)
{
    assert(list >= 0 && list < _POLICY_LIST_MAX);
    return i < p->list[list].n ? &p->list[list].v[i] : NULL;
}

/* 0.0.0.0/0 is E2B's ALL_TRAFFIC: every address of either family. */
static bool
is_all_traffic(const struct policy_rule *r)
{
    return r->kind == POLICY_CIDR && r->cidr.prefix == 0 && r->cidr.addr.family == AF_INET;
}

static bool
addr_match(const struct policy_rule *r, const struct net_addr *a)
{
    return is_addr_rule(r) && (is_all_traffic(r) || net_cidr_contains(&r->cidr, a));
}

static bool
name_match(const struct policy_rule *r, const char *name)
{
    if (r->kind == POLICY_NAME)
        return strcmp(r->name, name) == 0;
    if (r->kind == POLICY_WILDCARD)
        return strlen(name) > strlen(r->name) && net_name_in_domain(name, r->name);
    return false;
}

/* The first rule of list matching addr (name NULL) or name; -1 if none. */
static ssize_t
find_rule(const struct net_policy *p, enum policy_list list, const struct net_addr *addr,
          const char *name)
{
    const struct rules *l = &p->list[list];
    for (size_t i = 0; i < l->n; i++)
        if (name ? name_match(&l->v[i], name) : addr_match(&l->v[i], addr))
            return (ssize_t)i;
    return -1;
}

static bool
decide(struct policy_decision *ret, bool allow, enum policy_why why, ssize_t rule)
{
    if (ret)
        *ret = (struct policy_decision){
                .allow = allow, .why = why, .rule = rule < 0 ? 0 : (size_t)rule};
    return allow;
}

/* The address rules after the allow list found nothing: deny, internet, default. */
static bool
check_addr_rest(const struct net_policy *p, const struct net_addr *addr, ssize_t unresolved,
                struct policy_decision *ret)
{
    ssize_t i = find_rule(p, POLICY_DENY, addr, NULL);
    if (unresolved >= 0 && (i >= 0 || !p->internet))
        return decide(ret, false, POLICY_WHY_UNRESOLVED, unresolved);
    if (i >= 0)
        return decide(ret, false, POLICY_WHY_DENY, i);
    if (!p->internet)
        return decide(ret, false, POLICY_WHY_INTERNET_OFF, -1);
    return decide(ret, true, POLICY_WHY_DEFAULT, -1);
}

bool
policy_check_addr(const struct net_policy *p, const struct net_addr *addr,
                  struct policy_decision *ret)
{
    ssize_t i = find_rule(p, POLICY_ALLOW, addr, NULL);
    if (i >= 0)
        return decide(ret, true, POLICY_WHY_ALLOW, i);
    return check_addr_rest(p, addr, -1, ret);
}

bool
policy_check_name(const struct net_policy *p, const char *name, struct policy_decision *ret)
{
    const struct rules *deny = &p->list[POLICY_DENY];
    ssize_t i = find_rule(p, POLICY_ALLOW, NULL, name);

    if (i >= 0)
        return decide(ret, true, POLICY_WHY_ALLOW, i);
    i = find_rule(p, POLICY_DENY, NULL, name);
    if (i >= 0)
        return decide(ret, false, POLICY_WHY_DENY, i);
    if (!p->internet)
        return decide(ret, false, POLICY_WHY_INTERNET_OFF, -1);
    for (size_t k = 0; k < deny->n; k++)
        if (is_all_traffic(&deny->v[k]))
            return decide(ret, false, POLICY_WHY_CLOSED, (ssize_t)k);
    return decide(ret, true, POLICY_WHY_DEFAULT, -1);
}

bool
policy_check_conn(const struct net_policy *p, const struct net_names *names,
                  const struct net_addr *addr, const char *name, uint64_t now,
                  struct policy_decision *ret)
{
    const struct rules *allow = &p->list[POLICY_ALLOW];
    ssize_t i, unresolved = -1;

    if (!name)
        return policy_check_addr(p, addr, ret);
    i = find_rule(p, POLICY_ALLOW, addr, NULL);
    if (i >= 0)
        return decide(ret, true, POLICY_WHY_ALLOW, i);
    /* Every allow rule matching the name, not only the first: any of them
     * grants the address once the name resolved to it. */
    for (size_t k = 0; k < allow->n; k++) {
        if (!name_match(&allow->v[k], name))
            continue;
        if (names && net_names_has(names, name, addr, now))
            return decide(ret, true, POLICY_WHY_ALLOW, (ssize_t)k);
        if (unresolved < 0)
            unresolved = (ssize_t)k;
    }
    i = find_rule(p, POLICY_DENY, NULL, name);
    if (i >= 0)
        return decide(ret, false, POLICY_WHY_DENY, i);
    return check_addr_rest(p, addr, unresolved, ret);
}

void
policy_decision_format(const struct net_policy *p, const struct policy_decision *d, char *buf,
                       size_t n)
{
    char rule[POLICY_RULE_STR] = "?";
    const struct policy_rule *r = NULL;

    if (d->why == POLICY_WHY_ALLOW || d->why == POLICY_WHY_UNRESOLVED)
        r = policy_rule(p, POLICY_ALLOW, d->rule);
    else if (d->why == POLICY_WHY_DENY || d->why == POLICY_WHY_CLOSED)
        r = policy_rule(p, POLICY_DENY, d->rule);
    if (r)
        policy_rule_format(r, rule);
    switch (d->why) {
    case POLICY_WHY_DEFAULT:
        (void)snprintf(buf, n, "allowed: no rule matched");
        break;
    case POLICY_WHY_ALLOW:
        (void)snprintf(buf, n, "allowed by allow rule '%s'", rule);
        break;
    case POLICY_WHY_DENY:
        (void)snprintf(buf, n, "denied by deny rule '%s'", rule);
        break;
    case POLICY_WHY_INTERNET_OFF:
        (void)snprintf(buf, n, "denied: internet access is off and no allow rule matched");
        break;
    case POLICY_WHY_CLOSED:
        (void)snprintf(buf, n,
                       "denied: deny rule '%s' closes all traffic and no allow rule "
                       "names it",
                       rule);
        break;
    case POLICY_WHY_UNRESOLVED:
        (void)snprintf(buf, n,
                       "denied: allow rule '%s' matched the name, but the name did not "
                       "resolve to this address",
                       rule);
        break;
    }
}
