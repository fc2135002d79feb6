/*
 * fuzz-template-set.c - the template set (template/set.c) on arbitrary
 * templates: up to six sandbox-template.yaml documents, separated by NUL
 * bytes, parsed with template_parse() and added one by one with
 * template_set_put() (as builds through the API do) to a set holding only
 * "base".
 *
 * After every put, accepted or not: every name and alias of the set finds
 * its template and no other; every base chain ends at "host" within as
 * many hops as there are templates (no cycle got in); a refused put (0 or
 * -EINVAL with a message, -E2BIG never here) left the set as it was, and
 * an accepted one made the template findable by all its names, replacing
 * the one of its name. template_effective_env() gives each key once, with
 * the value of the template nearest to t in its chain, and
 * template_effective_resources() the nearest settings.
 */
#include <errno.h>

#include "fuzz-common.h"
#include "template/set.h"

#define DOCS_MAX 6
#define ENV_MAX  512

static const char *
name_at(const struct template *t, size_t k)
{
    return k == 0 ? t->name : t->aliases[k - 1];
}

/* The chain from t to "host": its length, t first, or 0 on a cycle. */
static size_t
chain_of(const struct template_set *s, const struct template *t, const struct template **out,
         size_t max)
{
    size_t n = 0;
    while (n < max) {
        out[n++] = t;
        if (!strcmp(t->base, "host"))
            return n;
        t = template_set_find(s, t->base);
        if (!t)
            return 0;
    }
    return 0;
}

static void
check_env(const struct template_set *s, const struct template *t)
{
    const char *env[ENV_MAX];
    const struct template *c[TEMPLATE_SET_MAX + 1];
    size_t nc = chain_of(s, t, c, template_set_count(s) + 1);
    int n = template_effective_env(s, t, env, ENV_MAX);
    CHECK(nc > 0);
    if (n == -E2BIG)
        return;
    CHECK(n >= 0 && n <= ENV_MAX);
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(env[i], '=');
        CHECK(eq);
        size_t kl = (size_t)(eq - env[i]) + 1;
        for (int j = 0; j < i; j++)
            CHECK(strncmp(env[j], env[i], kl) != 0);
        /* the nearest template that sets the key, and its last setting */
        const char *want = NULL;
        for (size_t h = 0; h < nc && !want; h++)
            for (size_t k = 0; k < c[h]->n_env; k++)
                if (!strncmp(c[h]->env[k], env[i], kl))
                    want = c[h]->env[k];
        CHECK(want == env[i]);
    }
    double cpu;
    uint64_t mem, pids;
    template_effective_resources(s, t, &cpu, &mem, &pids);
    double wcpu = 0;
    uint64_t wmem = 0, wpids = 0;
    for (size_t h = nc; h-- > 0;) {
        if (c[h]->cpu > 0)
            wcpu = c[h]->cpu;
        if (c[h]->memory_mb)
            wmem = c[h]->memory_mb;
        if (c[h]->pids)
            wpids = c[h]->pids;
    }
    CHECK(cpu == wcpu && mem == wmem && pids == wpids);
}

static void
check_set(const struct template_set *s)
{
    size_t n = template_set_count(s);
    const struct template *c[TEMPLATE_SET_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        const struct template *t = template_set_at(s, i);
        for (size_t k = 0; k <= t->n_aliases; k++) {
            CHECK(template_set_find(s, name_at(t, k)) == t);
            for (size_t j = 0; j < n; j++)
                CHECK(j == i || !template_matches(template_set_at(s, j), name_at(t, k)));
        }
        CHECK(chain_of(s, t, c, n + 1) > 0);
        check_env(s, t);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct template_set *s = NULL;
    struct err err = {0};
    if (template_set_load(NULL, NULL, &s, &err) < 0)
        abort();
    const char *p = (const char *)data, *end = p + size;
    for (int d = 0; d < DOCS_MAX && p <= end; d++) {
        const char *e = memchr(p, '\0', (size_t)(end - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(end - p);
        struct template *t = NULL;
        if (template_parse(p, len, "t.yaml", &t, &err) == 0) {
            const struct template *before[DOCS_MAX + 2];
            size_t n = template_set_count(s);
            for (size_t i = 0; i < n; i++)
                before[i] = template_set_at(s, i);
            int r = template_set_put(s, t, &err);
            if (r < 0) {
                CHECK(r == -EINVAL && err.msg[0]);
                CHECK(template_set_count(s) == n);
                for (size_t i = 0; i < n; i++)
                    CHECK(template_set_at(s, i) == before[i]);
                template_free(t);
            } else {
                for (size_t k = 0; k <= t->n_aliases; k++)
                    CHECK(template_set_find(s, name_at(t, k)) == t);
                CHECK(template_set_count(s) == n || template_set_count(s) == n + 1);
            }
            check_set(s);
        }
        err_clear(&err);
        if (!e)
            break;
        p = e + 1;
    }
    template_set_free(s);
    return 0;
}
