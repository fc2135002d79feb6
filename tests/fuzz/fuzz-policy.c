/*
 * fuzz-policy.c - the egress policy on arbitrary lines. Each line is a
 * command: "a<entry>" / "d<entry>" / "e<entry>" (allow, deny, E2B deny),
 * "i" (toggle the internet), "r<name> <addr> <ttl>" (a resolver answer),
 * "n<name>" (may it resolve?), "c<addr> <name>" or "c<addr>" (a
 * connection), "f<addr>" (forbidden?). Contract: additions succeed or
 * fail with -EINVAL/-E2BIG and a message, lists stay within
 * POLICY_RULES_MAX, every entry formats to text that parses back to the
 * same text; every decision names a rule inside its list and agrees with
 * its why; a connection without a name is judged as its address; an
 * address allowed by an address rule is allowed whatever name it
 * carries; a connection allowed by a name rule went to an address the
 * record holds for that name.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "net/names.h"
#include "net/net.h"
#include "net/policy.h"
#include "util/parse.h"

static void
check_decision(const struct net_policy *p, bool allowed, const struct policy_decision *d)
{
    char line[512];
    CHECK(allowed == d->allow);
    switch (d->why) {
    case POLICY_WHY_DEFAULT:
        CHECK(d->allow && policy_internet(p));
        break;
    case POLICY_WHY_ALLOW:
        CHECK(d->allow && d->rule < policy_count(p, POLICY_ALLOW));
        break;
    case POLICY_WHY_UNRESOLVED:
        CHECK(!d->allow && d->rule < policy_count(p, POLICY_ALLOW));
        break;
    case POLICY_WHY_DENY:
    case POLICY_WHY_CLOSED:
        CHECK(!d->allow && d->rule < policy_count(p, POLICY_DENY));
        break;
    case POLICY_WHY_INTERNET_OFF:
        CHECK(!d->allow && !policy_internet(p));
        break;
    default:
        CHECK(false);
    }
    policy_decision_format(p, d, line, sizeof(line));
    CHECK(line[0] != '\0');
}

static void
add(struct net_policy *p, enum policy_list l, const char *s, unsigned flags)
{
    struct err err = {0};
    size_t before = policy_count(p, l);
    int r = policy_add(p, l, s, flags, &err);

    CHECK(r == 0 || r == -EINVAL || r == -E2BIG);
    CHECK(policy_count(p, l) <= POLICY_RULES_MAX);
    if (r < 0) {
        CHECK(err.msg[0] != '\0');
        CHECK(policy_count(p, l) == before);
        return;
    }
    for (size_t i = 0; i < policy_count(p, l); i++) {
        char a[POLICY_RULE_STR], b[POLICY_RULE_STR];
        struct policy_rule back;
        policy_rule_format(policy_rule(p, l, i), a);
        CHECK(policy_rule_parse(a, &back, NULL) == 0);
        policy_rule_format(&back, b);
        CHECK(strcmp(a, b) == 0);
        if (l == POLICY_DENY && (flags & POLICY_E2B) && i == policy_count(p, l) - 1 &&
            policy_count(p, l) > before)
            CHECK(back.kind == POLICY_ADDR || back.kind == POLICY_CIDR);
    }
}

static void
conn(const struct net_policy *p, const struct net_names *names, char *arg)
{
    struct net_addr a;
    struct policy_decision d, da;
    char name[NET_NAME_MAX + 1];
    char *sp = strchr(arg, ' ');
    bool ok, oka;

    if (sp)
        *sp = '\0';
    if (net_addr_parse(arg, &a, NULL) < 0)
        return;
    oka = policy_check_addr(p, &a, &da);
    check_decision(p, oka, &da);
    ok = policy_check_conn(p, names, &a, NULL, 0, &d);
    CHECK(ok == oka && d.why == da.why && d.rule == da.rule);
    if (!sp || net_name_normalize(sp + 1, strlen(sp + 1), 0, name, NULL) < 0)
        return;
    ok = policy_check_conn(p, names, &a, name, 0, &d);
    check_decision(p, ok, &d);
    if (oka && da.why == POLICY_WHY_ALLOW)
        CHECK(ok && d.why == POLICY_WHY_ALLOW && d.rule == da.rule);
    if (ok && d.why == POLICY_WHY_ALLOW) {
        const struct policy_rule *r = policy_rule(p, POLICY_ALLOW, d.rule);
        if (r->kind == POLICY_NAME || r->kind == POLICY_WILDCARD)
            CHECK(net_names_has(names, name, &a, 0));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct net_policy *p = NULL;
    struct net_names *names = NULL;
    char *s = fuzz_string(data, size), *line, *next;

    CHECK(policy_new(&p) == 0);
    CHECK(net_names_new(8, &names) == 0);
    for (line = s; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *arg = line[0] ? line + 1 : line;
        switch (line[0]) {
        case 'a':
            add(p, POLICY_ALLOW, arg, 0);
            break;
        case 'd':
            add(p, POLICY_DENY, arg, 0);
            break;
        case 'e':
            add(p, POLICY_DENY, arg, POLICY_E2B);
            break;
        case 'i':
            policy_set_internet(p, !policy_internet(p));
            break;
        case 'n': {
            char name[NET_NAME_MAX + 1];
            struct policy_decision d;
            if (net_name_normalize(arg, strlen(arg), 0, name, NULL) < 0)
                break;
            CHECK(net_name_valid(name, 0));
            check_decision(p, policy_check_name(p, name, &d), &d);
            CHECK(d.why != POLICY_WHY_UNRESOLVED);
            break;
        }
        case 'r': {
            char *sp = strchr(arg, ' ');
            struct net_addr a;
            if (!sp)
                break;
            *sp = '\0';
            if (net_addr_parse(sp + 1, &a, NULL) < 0)
                break;
            int r = net_names_add(names, arg, &a, 60, 0);
            CHECK(r == 0 || r == -EINVAL);
            CHECK(r < 0 || net_names_has(names, arg, &a, 0));
            CHECK(net_names_count(names, 0) <= 8);
            break;
        }
        case 'c':
            conn(p, names, arg);
            break;
        case 'f': {
            struct net_addr a;
            if (net_addr_parse(arg, &a, NULL) == 0) {
                const char *why = net_addr_forbidden(&a, NULL, 0);
                CHECK(!why || why[0] != '\0');
            }
            break;
        }
        default:
            break;
        }
    }
    policy_free(p);
    net_names_free(names);
    free(s);
    return 0;
}
