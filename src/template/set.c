/*
 * set.c - load the templates directory strictly; look templates up.
 */
#include "template/set.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "template/command.h"
#include "template/layer.h"
#include "util/cleanup.h"
#include "util/fd.h"

struct template_set {
    struct template **v; /* v[0] is the built-in base */
    size_t n;
    struct template **retired; /* replaced by template_set_put(); sandboxes may still use them */
    size_t n_retired;
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
    for (size_t i = 0; i < s->n_retired; i++)
        template_free(s->retired[i]);
    free(s->retired);
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

/* Attaches the stored layer of t (<state>/templates/<name>/current) when
 * its digest is want (NULL = any). -ENOENT when there is none or it is of
 * other content. */
static int
attach_stored(struct template *t, const char *tdir, const char *want, struct err *err)
{
    char cur[4200], real[PATH_MAX], dg[LAYER_DIGEST_LEN + 2];
    _cleanup_(buf_donep) struct buf b = {0};
    char **stack = NULL;
    int r;

    (void)snprintf(cur, sizeof(cur), "%s/%s/current", tdir, t->name);
    if (!realpath(cur, real))
        return errno == ENOENT ? -ENOENT : err_set(err, errno, "cannot resolve '%s'", cur);
    buf_init(&b, 128);
    (void)snprintf(cur, sizeof(cur), "%s/digest", real);
    r = read_file_at(AT_FDCWD, cur, 128, &b);
    if (r < 0)
        return err_set(err, -r, "cannot read '%s'", cur);
    (void)snprintf(dg, sizeof(dg), "%.*s", LAYER_DIGEST_LEN, b.data);
    if (want && strcmp(dg, want) != 0)
        return -ENOENT;
    r = layer_read_stack(real, TEMPLATE_LAYERS_MAX, &stack, err);
    if (r < 0)
        return r;
    for (int i = 0; i < r; i++) {
        struct stat st;
        if (stat(stack[i], &st) < 0 || !S_ISDIR(st.st_mode)) {
            int e = err_set(err, ENOENT, "template '%s': its layer '%s' is missing", t->name,
                            stack[i]);
            for (int k = 0; k < r; k++)
                free(stack[k]);
            free(stack);
            return e;
        }
    }
    t->layers = stack;
    t->n_layers = (size_t)r;
    if (!(t->digest = strdup(dg)))
        return -ENOMEM;
    return 0;
}

/* Templates built through the API and stored in tdir, whose names the
 * templates directory does not use. */
static int
load_stored(struct template_set *s, const char *tdir, struct err *err)
{
    DIR *d = opendir(tdir);
    int r = 0;

    if (!d)
        return errno == ENOENT ? 0 : err_set(err, errno, "cannot list '%s'", tdir);
    struct dirent *de;
    while (r == 0 && (de = readdir(d))) {
        char where[4400];
        if (de->d_name[0] == '.') {
            /* an interrupted build or upload */
            if (strncmp(de->d_name, ".build-", 7) == 0 || strncmp(de->d_name, ".staging-", 9) == 0)
                (void)rm_rf_at(dirfd(d), de->d_name);
            continue;
        }
        if (template_set_find(s, de->d_name))
            continue;
        (void)snprintf(where, sizeof(where), "%s/%s/current/template", tdir, de->d_name);
        int tfd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tfd < 0)
            continue; /* a name whose build never finished */
        struct template *t = NULL;
        r = template_load(tfd, where, &t, err);
        close(tfd);
        if (r < 0)
            break;
        if (strcmp(t->name, de->d_name) != 0) {
            r = err_set(err, EINVAL, "'%s' holds template '%s'", where, t->name);
        } else if (s->n > TEMPLATE_SET_MAX) {
            r = err_set(err, E2BIG, "more than %d templates", TEMPLATE_SET_MAX);
        } else {
            r = attach_stored(t, tdir, NULL, err);
            if (r == -ENOENT)
                r = err_set(err, ENOENT, "'%s': no layer", where);
        }
        if (r == 0)
            r = check_unique(s, t, where, err);
        if (r < 0) {
            template_free(t);
            break;
        }
        s->v[s->n++] = t;
    }
    closedir(d);
    return r;
}

/* Removes the layers in tdir that no template of s stacks any more. */
static void
collect_layers(const struct template_set *s, const char *tdir)
{
    DIR *d = opendir(tdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        int nfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *ld = nfd >= 0 ? fdopendir(nfd) : NULL;
        if (!ld) {
            safe_close(nfd);
            continue;
        }
        struct dirent *le;
        while ((le = readdir(ld))) {
            char fs[4400];
            bool used = false;
            if (strncmp(le->d_name, "layer-", 6) != 0)
                continue;
            (void)snprintf(fs, sizeof(fs), "%s/%s/%s/fs", tdir, de->d_name, le->d_name);
            for (size_t i = 0; !used && i < s->n; i++)
                for (size_t k = 0; !used && k < s->v[i]->n_layers; k++)
                    used = !strcmp(s->v[i]->layers[k], fs);
            if (!used)
                (void)rm_rf_at(dirfd(ld), le->d_name);
        }
        closedir(ld);
    }
    closedir(d);
}

int
template_set_load(const char *dir, const char *state_dir, struct template_set **ret,
                  struct err *err)
{
    char tdir[4200] = "";
    _cleanup_(template_set_freep) struct template_set *s = calloc(1, sizeof(*s));
    int r;

    if (!s || !(s->v = calloc(TEMPLATE_SET_MAX + 1, sizeof(*s->v))))
        return -ENOMEM;
    if ((r = make_base(&s->v[0])) < 0)
        return r;
    s->n = 1;
    if (state_dir)
        (void)snprintf(tdir, sizeof(tdir), "%s/" TEMPLATE_LAYERS_DIR, state_dir);
    if (dir) {
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
                char dg[LAYER_DIGEST_LEN + 1];
                int tfd2 = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                r = tfd2 < 0 ? err_setx(err, errno, "cannot open '%s'", where)
                             : layer_digest(tfd2, dg, err);
                safe_close(tfd2);
                if (r == 0)
                    r = tdir[0] ? attach_stored(t, tdir, dg, err) : -ENOENT;
                if (r == -ENOENT)
                    r = err_set(
                            err, EOPNOTSUPP,
                            "%s/%s:%u: template '%s' has build steps, which need a built layer, "
                            "and there is none for this content; build it with 'abx template "
                            "build %s'",
                            where, TEMPLATE_FILE_NAME, t->steps[0].line, t->name, where);
                if (r < 0) {
                    template_free(t);
                    break;
                }
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
    }
    if (tdir[0] && (r = load_stored(s, tdir, err)) < 0)
        return r;
    if ((r = check_bases(s, err)) < 0)
        return r;
    if (tdir[0])
        collect_layers(s, tdir);
    *ret = TAKE_PTR(s);
    return 0;
}

int
template_set_put(struct template_set *s, struct template *t, struct err *err)
{
    size_t at = s->n;
    int r;

    if (!strcmp(t->name, TEMPLATE_BASE))
        return err_set(err, EINVAL, "template '%s' is built in and cannot be replaced", t->name);
    for (size_t i = 1; i < s->n; i++)
        if (!strcmp(s->v[i]->name, t->name))
            at = i;
    if (at == s->n && s->n > TEMPLATE_SET_MAX)
        return err_set(err, E2BIG, "there are %d templates already", TEMPLATE_SET_MAX);
    struct template **nr = realloc(s->retired, (s->n_retired + 1) * sizeof(*nr));
    if (!nr)
        return -ENOMEM;
    s->retired = nr;
    /* names and aliases: unique but for the template replaced */
    struct template *old = at < s->n ? s->v[at] : NULL;
    if (old)
        s->v[at] = t;
    for (size_t k = 0; k <= t->n_aliases; k++) {
        const char *n = k == 0 ? t->name : t->aliases[k - 1];
        for (size_t i = 0; i < s->n; i++)
            if (i != at && template_matches(s->v[i], n)) {
                r = err_set(err, EINVAL, "the name '%s' is taken by template '%s'", n,
                            s->v[i]->name);
                goto undo;
            }
    }
    if (!old)
        s->v[s->n++] = t;
    if ((r = check_bases(s, err)) < 0) {
        if (!old) {
            s->n--;
            return r;
        }
        goto undo;
    }
    if (old)
        s->retired[s->n_retired++] = old;
    return 0;
undo:
    if (old)
        s->v[at] = old;
    return r;
}

size_t
template_layers(const struct template_set *s, const struct template *t, const char **out,
                size_t max)
{
    size_t hops = 0;
    while (t && hops++ <= TEMPLATE_SET_MAX) {
        if (t->n_layers) {
            size_t n = t->n_layers < max ? t->n_layers : max;
            for (size_t i = 0; i < n; i++)
                out[i] = t->layers[i];
            return n;
        }
        if (!strcmp(t->base, TEMPLATE_BASE_HOST))
            break;
        t = template_set_find(s, t->base);
    }
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
