/*
 * policy.h - one sandbox's egress policy: the internet switch, the allow and
 * deny lists, and the three questions the resolver and the egress proxy ask
 * of them. It decides; it does not filter packets (the wiring's nftables
 * rules and proxy do, from these answers).
 *
 * Entries (policy_rule_parse(), at most POLICY_RULE_LEN bytes, at most
 * POLICY_RULES_MAX per list, duplicates kept once):
 *   1.2.3.4, 2001:db8::1     one address (IPv4-mapped IPv6 is its IPv4)
 *   10.0.0.0/8, 2001:db8::/32 a block; host bits are cleared ("10.1.2.3/8"
 *                            is 10.0.0.0/8)
 *   0.0.0.0/0                E2B's ALL_TRAFFIC: every address, IPv4 and
 *                            IPv6 (::/0 is every IPv6 address only)
 *   api.example.com          that name only
 *   *.example.com            any name below example.com, any depth, not
 *                            example.com itself; a bare "*" is refused
 * Names are LDH host names, lowercased (net_name_normalize()).
 *
 * The model (E2B's network.allowOut / denyOut / allow_internet_access):
 *   - An empty policy with the internet on allows everything. Deny entries
 *     take away, allow entries give back: allow beats deny.
 *   - Internet off is "deny everything": only allow entries get through
 *     (E2B's infrastructure keeps allowOut when allow_internet_access is
 *     false).
 *   - A name rule allows an address only through the name: a TCP connection
 *     whose SNI or Host matches an allowed name, to an address the
 *     resolver recorded for that name (names.h). A spoofed SNI or a
 *     hard-coded IP gets no further than the address rules let it.
 *   - Names and DNS: a name resolves when an allow name rule matches it;
 *     otherwise not when a deny name rule matches, not when the internet is
 *     off and not when the deny list holds 0.0.0.0/0 (a "closed" policy: a
 *     query for any other name would carry data to whoever serves it, so
 *     under a closed policy a host reached by an allowed CIDR must still
 *     have its name allowed to be looked up).
 *   - Deny name rules (our native API; E2B's denyOut takes addresses and
 *     CIDRs only, POLICY_E2B refuses names there): the name does not
 *     resolve and a connection naming it is refused. A connection to an
 *     address with no name, or naming another host, is not matched by
 *     them: to block addresses, deny addresses.
 *   - UDP other than DNS, and TCP the proxy cannot name, are judged by
 *     address rules alone (policy_check_addr()): refused under a closed
 *     policy unless an address rule allows them.
 *   - The operator's forbidden ranges (net_addr_forbidden()) are checked
 *     first by the caller and no allow rule opens them.
 *
 * Every decision says which rule decided, for the connection log. Pure:
 * no clocks, no I/O. Not thread-safe for writes; checks only read.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/names.h"
#include "net/net.h"
#include "util/cleanup.h"
#include "util/err.h"

#define POLICY_RULES_MAX 256 /* entries in each list */
#define POLICY_RULE_LEN  255 /* bytes of one entry ("*." and a longest name) */
#define POLICY_RULE_STR  (POLICY_RULE_LEN + 1)

enum policy_kind {
    POLICY_ADDR,     /* cidr with a full prefix, written without one */
    POLICY_CIDR,     /* cidr */
    POLICY_NAME,     /* name, exactly */
    POLICY_WILDCARD, /* names below name */
    _POLICY_KIND_MAX,
    _POLICY_KIND_INVALID = -EINVAL,
};

struct policy_rule {
    enum policy_kind kind;
    struct net_cidr cidr;        /* ADDR, CIDR */
    char name[NET_NAME_MAX + 1]; /* NAME; WILDCARD: the domain after "*." */
};

enum policy_list {
    POLICY_ALLOW,
    POLICY_DENY,
    _POLICY_LIST_MAX,
};

/* Flags of policy_add(). */
enum {
    POLICY_E2B = 1 << 0, /* E2B's denyOut: addresses and CIDRs only */
};

enum policy_why {
    POLICY_WHY_DEFAULT,      /* no rule matched, the internet is on: allowed */
    POLICY_WHY_ALLOW,        /* allow rule `rule` matched: allowed */
    POLICY_WHY_DENY,         /* deny rule `rule` matched: denied */
    POLICY_WHY_INTERNET_OFF, /* no allow rule matched, the internet is off: denied */
    POLICY_WHY_CLOSED,       /* a name no allow rule matches, deny rule `rule` is
                                0.0.0.0/0: denied */
    POLICY_WHY_UNRESOLVED,   /* allow name rule `rule` matched the connection's name
                                but the name did not resolve to its address, and
                                the address rules deny it: denied */
};

struct policy_decision {
    bool allow;
    enum policy_why why;
    size_t rule; /* index in the list `why` names; 0 for DEFAULT and INTERNET_OFF */
};

struct net_policy;

/* An empty policy, internet on. -ENOMEM. */
int policy_new(struct net_policy **ret);
struct net_policy *policy_free(struct net_policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct net_policy *, policy_free)

void policy_set_internet(struct net_policy *p, bool on);
bool policy_internet(const struct net_policy *p);

/* Parses one entry (the forms above; no blanks). -EINVAL with a message. */
int policy_rule_parse(const char *s, struct policy_rule *ret, struct err *err);

/* Writes r as policy_rule_parse() reads it, into buf of POLICY_RULE_STR. */
void policy_rule_format(const struct policy_rule *r, char buf[static POLICY_RULE_STR]);

/* Parses s and appends it to list (a duplicate is dropped). -EINVAL (bad
 * entry, or a name in the deny list with POLICY_E2B), -E2BIG (list full),
 * -ENOMEM; the policy is unchanged on failure. */
int policy_add(struct net_policy *p, enum policy_list list, const char *s, unsigned flags,
               struct err *err);

size_t policy_count(const struct net_policy *p, enum policy_list list);
/* The i-th entry of list in the order added, or NULL past the end. */
const struct policy_rule *policy_rule(const struct net_policy *p, enum policy_list list, size_t i);

/* A connection to addr with no name known (UDP, TCP the proxy cannot name). */
bool policy_check_addr(const struct net_policy *p, const struct net_addr *addr,
                       struct policy_decision *ret);

/* May name (normalised) be resolved for the sandbox? */
bool policy_check_name(const struct net_policy *p, const char *name, struct policy_decision *ret);

/* A TCP connection to addr whose name (normalised: sni.h's result), when not
 * NULL, came from TLS SNI or HTTP Host; names is the sandbox's resolver
 * record, now the caller's clock (names.h). NULL name: policy_check_addr(). */
bool policy_check_conn(const struct net_policy *p, const struct net_names *names,
                       const struct net_addr *addr, const char *name, uint64_t now,
                       struct policy_decision *ret);

/* One line for the connection log: "allowed by allow rule '*.x.com'",
 * "denied: internet off", ... into buf of n bytes (truncated). */
void policy_decision_format(const struct net_policy *p, const struct policy_decision *d, char *buf,
                            size_t n);
