/*
 * set.c - load the templates directory strictly; look templates up.
 */
#include "set.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "template/command.h"
#include "util/cleanup.h"

struct template_set {
    struct template **v; /* v[0] is the built-in base */
    size_t n;
};

static int
make_base(struct template **ret)
{
    struct template *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->name = strdup(TEMPLATE_BASE);
    t->base = strdup(TEMPLATE_BASE_HOST);
    t->description = strdup("the host's /usr read-only, a generated /etc; every capability");
    t->caps = TEMPLATE_CAPS_ALL;
    if (!t->name || !t->base || !t->description) {
        template_free(t);
        return -ENOMEM;
    }
    *ret = t;
    return 0;
}

const struct template *
template_set_find(const struct template_set *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (template_matches(s->v[i], name))
            return s->v[i];
    return NULL;
}

size_t
template_set_count(const struct template_set *s)
{
    return s ? s->n : 0;
}

const struct template *
template_set_at(const struct template_set *s, size_t i)
{
    return s && i < s->n ? s->v[i] : NULL;
}

struct template_set *
template_set_free(struct template_set *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        template_free(s->v[i]);
    free(s->v);
    free(s);
    return NULL;
}

/* Every name and alias of t is new to the set. */
static int
check_unique(const struct template_set *s, const struct template *t, const char *where,
             struct err *err)
{
    for (size_t k = 0; k <= t->n_aliases; k++) {
        const char *n = k == 0 ? t->name : t->aliases[k - 1];
        const struct template *o = template_set_find(s, n);
        if (o)
            return err_set(err, EINVAL, "%s: the name '%s' is taken by template '%s'", where, n,
                           o->name);
    }
    return 0;
}

static int
check_bases(const struct template_set *s, struct err *err)
{
    for (size_t i = 1; i < s->n; i++) {
        const struct template *t = s->v[i];
        size_t hops = 0;
        while (strcmp(t->base, TEMPLATE_BASE_HOST) != 0) {
            const struct template *b = template_set_find(s, t->base);
            if (!b)
                return err_set(err, EINVAL, "template '%s': its base '%s' is no template here",
                               s->v[i]->name, t->base);
            if (++hops > s->n)
                return err_set(err, EINVAL, "template '%s': its bases form a cycle", s->v[i]->name);
            t = b;
        }
    }
    return 0;
}

int
template_set_load(const char *dir, struct template_set **ret, struct err *err)
{
    _cleanup_(template_set_freep) struct template_set *s = calloc(1, sizeof(*s));
    int r;

    if (!s || !(s->v = calloc(TEMPLATE_SET_MAX + 1, sizeof(*s->v))))
        return -ENOMEM;
    if ((r = make_base(&s->v[0])) < 0)
        return r;
    s->n = 1;
    if (!dir) {
        *ret = TAKE_PTR(s);
        return 0;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_setx(err, errno, "templates directory '%s'", dir);
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -ENOMEM;
    }
    struct dirent *de;
    r = 0;
    while (r == 0 && (errno = 0, de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char where[4200];
        (void)snprintf(where, sizeof(where), "%s/%s", dir, de->d_name);
        if (s->n > TEMPLATE_SET_MAX) {
            r = err_set(err, E2BIG, "more than %d templates in '%s'", TEMPLATE_SET_MAX, dir);
            break;
        }
        int tfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0) {
            r = err_setx(err, errno, "'%s' is not a template directory", where);
            break;
        }
        struct template *t = NULL;
        r = template_load(tfd, where, &t, err);
        close(tfd);
        if (r == -ENOENT)
            r = err_set(err, ENOENT, "'%s' has no %s", where, TEMPLATE_FILE_NAME);
        if (r < 0)
            break;
        if (t->n_steps > 0) {
            r = err_set(err, EOPNOTSUPP,
                        "%s/%s:%u: template '%s' has build steps, which need a built layer; "
                        "this abxd does not build templates yet",
                        where, TEMPLATE_FILE_NAME, t->steps[0].line, t->name);
            template_free(t);
            break;
        }
        for (size_t c = 0; r == 0 && c < t->n_cmds; c++) {
            struct err cerr = {0};
            if (command_check(&t->cmds[c], &cerr) < 0)
                r = err_set(err, EINVAL, "%s/%s:%u: custom_commands.%s: %s", where,
                            TEMPLATE_FILE_NAME, t->cmds[c].line, t->cmds[c].name, cerr.msg);
        }
        if (r == 0)
            r = check_unique(s, t, where, err);
        if (r < 0) {
            template_free(t);
            break;
        }
        s->v[s->n++] = t;
    }
    if (r == 0 && errno)
        r = err_setx(err, errno, "cannot list '%s'", dir);
    closedir(d);
    if (r < 0)
        return r;
    if ((r = check_bases(s, err)) < 0)
        return r;
    *ret = TAKE_PTR(s);
    return 0;
}

/* The chain from the outermost base down to t. */
static size_t
chain(const struct template_set *s, const struct template *t, const struct template **out,
      size_t max)
{
    size_t n = 0;
    while (t && n < max) {
        out[n++] = t;
        if (!strcmp(t->base, TEMPLATE_BASE_HOST))
            break;
        t = template_set_find(s, t->base);
    }
    /* reverse: base first */
    for (size_t i = 0; i < n / 2; i++) {
        const struct template *x = out[i];
        out[i] = out[n - 1 - i];
        out[n - 1 - i] = x;
    }
    return n;
}

int
template_effective_env(const struct template_set *s, const struct template *t, const char **out,
                       size_t max)
{
    const struct template *c[TEMPLATE_SET_MAX + 1];
    size_t nc = chain(s, t, c, ELEMENTSOF(c)), n = 0;
    for (size_t i = 0; i < nc; i++) {
        for (size_t k = 0; k < c[i]->n_env; k++) {
            const char *kv = c[i]->env[k];
            size_t kl = (size_t)(strchr(kv, '=') - kv) + 1;
            size_t j = 0;
            for (; j < n; j++)
                if (!strncmp(out[j], kv, kl))
                    break;
            if (j == n) {
                if (n == max)
                    return -E2BIG;
                n++;
            }
            out[j] = kv;
        }
    }
    return (int)n;
}

void
template_effective_resources(const struct template_set *s, const struct template *t, double *cpu,
                             uint64_t *memory_mb, uint64_t *pids)
{
    const struct template *c[TEMPLATE_SET_MAX + 1];
    size_t nc = chain(s, t, c, ELEMENTSOF(c));
    *cpu = 0;
    *memory_mb = *pids = 0;
    for (size_t i = 0; i < nc; i++) {
        if (c[i]->cpu > 0)
            *cpu = c[i]->cpu;
        if (c[i]->memory_mb)
            *memory_mb = c[i]->memory_mb;
        if (c[i]->pids)
            *pids = c[i]->pids;
    }
}
