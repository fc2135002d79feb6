/*
 * build.c - the template build pipeline (see build.h): extraction, the
 * checks, the build sandbox and its steps, the layer's install and its
 * copy out of a bounded area. Not the HTTP: progress goes out as events.
 */
#include "template/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sandbox/proc.h"
#include "sandbox/sandbox.h"
#include "sandbox/vfs.h"
#include "template/command.h"
#include "template/layer.h"
#include "template/set.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/tar.h"
#include "util/timeutil.h"

#define BUILD_STEP_TIMEOUT_MS (60 * 60 * 1000) /* one step */
#define BUILD_LINE_MAX        4096             /* a longer output line is split */
#define BUILD_ENV_MAX         (TEMPLATE_ENV_MAX * 4 + TEMPLATE_STEPS_MAX)

struct template_build {
    struct template_build_host host;
    const struct template_build_ops *ops;
    void *ud;
    unsigned refs;
    char id[24];
    char dir[PATH_MAX + 512]; /* <state>/templates/.build-<id>, then the layer's */
    char tdir[PATH_MAX];      /* <state>/templates */
    char display[300];        /* how errors name the template directory */
    int tfd;                  /* dir/template */
    struct tar_extract *x;
    struct err err;
    char digest[LAYER_DIGEST_LEN + 1];
    struct template *t;
    const struct template *base;
    const char *lowers[TEMPLATE_LAYERS_MAX];
    size_t n_lowers;
    struct sandbox *sb;
    uid_t first;
    size_t step; /* the next step to run */
    char *env[BUILD_ENV_MAX + 1];
    size_t n_env;
    char *workdir;
    struct proc_reader *rd;
    struct buf line; /* a partial output line */
    bool failed, succeeded, installed;
    bool layer_made; /* the host installed the layer (its name is id) */
    char area[32];   /* build-<id> beside the sandboxes holds the writable layer */
};

/* snprintf for paths: -ENAMETOOLONG rather than a cut path. */
static int pathf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
pathf(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

static void
build_free(struct template_build *b)
{
    if (b->area[0])
        sandbox_host_area_destroy(b->host.sh, b->area);
    proc_reader_free(b->rd);
    tar_extract_free(b->x);
    safe_close(b->tfd);
    if (!b->installed && b->dir[0])
        (void)rm_rf_at(AT_FDCWD, b->dir);
    template_free(b->t);
    for (size_t i = 0; i < b->n_env; i++)
        free(b->env[i]);
    free(b->workdir);
    buf_done(&b->line);
    if (b->ops && b->ops->released)
        b->ops->released(b->ud);
    free(b);
}

void
template_build_ref(struct template_build *b)
{
    b->refs++;
}

void
template_build_unref(struct template_build *b)
{
    if (b && --b->refs == 0)
        build_free(b);
}

/* --- output --- */

static void
emit(struct template_build *b, const struct template_build_event *ev)
{
    b->ops->event(b->ud, ev);
}

static void
emit_line(struct template_build *b, const char *s, size_t n)
{
    struct template_build_event ev = {
            .kind = TEMPLATE_BUILD_LINE, .step = b->step, .text = s, .len = n};
    emit(b, &ev);
}

/* Ends the output once it is delivered. */
static void
end_stream(struct template_build *b)
{
    b->ops->end(b->ud);
}

static void fail(struct template_build *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void next_step(struct template_build *b);

static void
fail(struct template_build *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (b->failed)
        return;
    b->failed = true;
    log_warn("template=%s build failed: %s", b->t ? b->t->name : "?", msg);
    struct template_build_event ev = {
            .kind = TEMPLATE_BUILD_ERROR, .step = b->step, .text = msg, .len = strlen(msg)};
    emit(b, &ev);
    end_stream(b);
    if (b->sb)
        sandbox_kill(b->sb);
}

/* --- the steps --- */

static void
flush_line(struct template_build *b)
{
    if (b->line.len)
        emit_line(b, b->line.data, b->line.len);
    buf_reset(&b->line);
}

/* Reads the running step's output into the queue while there is room;
 * at its end, judges the step and goes on. */
static void
pump(struct template_build *b)
{
    struct proc_chunk ch;
    int r;

    while (b->rd && b->ops->room(b->ud)) {
        r = proc_reader_peek(b->rd, 65536, &ch);
        if (r == 0)
            return;
        if (r < 0) {
            flush_line(b);
            struct proc *p = proc_reader_proc(b->rd);
            const struct proc_result *res = p ? proc_get_result(p) : NULL;
            proc_reader_free(b->rd);
            b->rd = NULL;
            const struct template_step *st = &b->t->steps[b->step - 1];
            if (!res)
                fail(b, "step %zu (line %u): ended without an exit status", b->step, st->line);
            else if (res->timed_out)
                fail(b, "step %zu (line %u): took longer than %d s", b->step, st->line,
                     BUILD_STEP_TIMEOUT_MS / 1000);
            else if (res->exit_code != 0)
                fail(b, "step %zu (line %u): exited with %d", b->step, st->line, res->exit_code);
            else
                next_step(b);
            return;
        }
        if (ch.stream) {
            for (size_t i = 0; i < ch.len; i++) {
                if (ch.data[i] == '\n') {
                    emit_line(b, b->line.data ? b->line.data : "", b->line.len);
                    buf_reset(&b->line);
                    continue;
                }
                (void)buf_putc(&b->line, ch.data[i]);
                if (b->line.len >= BUILD_LINE_MAX)
                    flush_line(b);
            }
        }
        proc_reader_consume(b->rd, ch.len);
    }
}

void
template_build_pump(struct template_build *b)
{
    pump(b);
}

static void
reader_wake(void *ud)
{
    struct template_build *b = ud;
    b->ops->wake(b->ud);
}

void
template_build_abandon(struct template_build *b, bool loud)
{
    if (!b->failed && !b->succeeded) {
        b->failed = true;
        if (loud)
            log_info("template=%s build abandoned: the client went away", b->t->name);
        if (b->sb)
            sandbox_kill(b->sb);
    }
}

static void
exec_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct template_build *b = ud;
    (void)sb;
    if (b->failed)
        return;
    if (r < 0) {
        fail(b, "step %zu (line %u): cannot start: %s", b->step, b->t->steps[b->step - 1].line,
             err && err->msg[0] ? err->msg : strerror(-r));
        return;
    }
    r = proc_reader_new(p, 0, reader_wake, b, &b->rd);
    if (r < 0) {
        fail(b, "step %zu: cannot read its output", b->step);
        return;
    }
    reader_wake(b);
}

static int
exec_step(struct template_build *b, const char *const *argv)
{
    struct err err = {0};
    b->env[b->n_env] = NULL;
    struct sandbox_exec x = {
            .argv = argv,
            .env = (const char *const *)b->env,
            .cwd = b->workdir ? b->workdir : "/",
            .root = true,
            .timeout_ms = BUILD_STEP_TIMEOUT_MS,
    };
    int r = sandbox_exec(b->sb, &x, exec_started, b, &err);
    if (r < 0)
        fail(b, "step %zu: cannot start: %s", b->step, err.msg[0] ? err.msg : strerror(-r));
    return r;
}

static int
set_env(struct template_build *b, const char *k, const char *v)
{
    char *kv = NULL;
    if (asprintf(&kv, "%s=%s", k, v) < 0)
        return -ENOMEM;
    size_t kl = strlen(k) + 1;
    for (size_t i = 0; i < b->n_env; i++)
        if (!strncmp(b->env[i], kv, kl)) {
            free(b->env[i]);
            b->env[i] = kv;
            return 0;
        }
    if (b->n_env == BUILD_ENV_MAX) {
        free(kv);
        return -E2BIG;
    }
    b->env[b->n_env++] = kv;
    return 0;
}

/* A copy step: from the template directory into the sandbox's /usr, /etc or
 * /opt, through the sandbox's own view (so the overlay sees it), by the
 * build sandbox's root helper (fileops.h): with exactly the rights its root
 * has there. */
static int
copy_step(struct template_build *b, const struct template_step *st, struct err *err)
{
    char top[8];
    const char *d = st->b + 1;
    size_t tl = strcspn(d, "/");
    if (tl >= sizeof(top))
        return err_set(err, EPERM, "'%s' is not below /usr, /etc or /opt", st->b);
    memcpy(top, d, tl);
    top[tl] = '\0';
    if (strcmp(top, "usr") && strcmp(top, "etc") && strcmp(top, "opt"))
        return err_set(err, EPERM, "'%s' is not below /usr, /etc or /opt", st->b);
    _cleanup_(fileops_unrefp) struct fileops *fo = NULL;
    int r = sandbox_fileops(b->sb, true, &fo, err);
    if (r < 0)
        return r;
    return fileops_vcopy_in(fo, b->tfd, st->a, st->b, err);
}

static void succeed(struct template_build *b);
static void make_layer(struct template_build *b);

static void
next_step(struct template_build *b)
{
    while (!b->failed && b->step < b->t->n_steps) {
        const struct template_step *st = &b->t->steps[b->step++];
        static const char *const kinds[] = {"run", "env", "workdir", "copy"};
        struct template_build_event ev = {.kind = TEMPLATE_BUILD_STEP,
                                          .step = b->step,
                                          .start = kinds[st->kind],
                                          .line = st->line};
        emit(b, &ev);
        switch (st->kind) {
        case TEMPLATE_STEP_RUN: {
            const char *argv[] = {"/bin/sh", "-c", st->a, NULL};
            (void)exec_step(b, argv);
            return;
        }
        case TEMPLATE_STEP_WORKDIR: {
            free(b->workdir);
            b->workdir = strdup(st->a);
            const char *argv[] = {"/bin/mkdir", "-p", "--", st->a, NULL};
            if (!b->workdir) {
                fail(b, "out of memory");
                return;
            }
            /* made like Docker's WORKDIR; the exec's cwd is "/" for this one */
            char *w = b->workdir;
            b->workdir = NULL;
            (void)exec_step(b, argv);
            b->workdir = w;
            return;
        }
        case TEMPLATE_STEP_ENV:
            if (set_env(b, st->a, st->b) < 0)
                fail(b, "step %zu (line %u): too many variables", b->step, st->line);
            break;
        case TEMPLATE_STEP_COPY: {
            struct err cerr = {0};
            int r = copy_step(b, st, &cerr);
            if (r < 0)
                fail(b, "step %zu (line %u): cannot copy '%s' to '%s': %s", b->step, st->line,
                     st->a, st->b, cerr.msg[0] ? cerr.msg : strerror(-r));
            break;
        }
        }
    }
    if (!b->failed) {
        b->succeeded = true; /* pending install once the sandbox is gone */
        sandbox_kill(b->sb);
    }
}

/* --- install --- */

/* The layer's directory: its description beside a link to the layer the
 * host installed (layer.h), moved to templates/<name>/layer-<ms>. */
static int
install(struct template_build *b, char *ret_layer, size_t n)
{
    char ndir[PATH_MAX + 64], layer[PATH_MAX + 96], target[PATH_MAX + 32];
    _cleanup_(buf_donep) struct buf lw = {0};

    buf_init(&lw, BUF_UNLIMITED);
    for (size_t i = 0; i < b->n_lowers; i++)
        (void)buf_printf(&lw, "%s\n", b->lowers[i]);
    _cleanup_close_ int dfd = open(b->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *ldir = sandbox_host_layers_dir(b->host.sh);
    if (!ldir || pathf(target, sizeof(target), "%s/%s", ldir, b->id) < 0)
        return err_set(&b->err, EOPNOTSUPP, "this host keeps no layers");
    if (dfd < 0 || write_file_at(dfd, "lowers", lw.data ? lw.data : "", 0644) < 0 ||
        write_file_at(dfd, "digest", b->digest, 0644) < 0 || symlinkat(target, dfd, "fs") < 0)
        return err_set(&b->err, EIO, "cannot write the layer's description");
    (void)pathf(ndir, sizeof(ndir), "%s/%s", b->tdir, b->t->name);
    if (mkdir(ndir, 0700) < 0 && errno != EEXIST)
        return err_set(&b->err, errno, "cannot create '%s'", ndir);
    char lname[64];
    (void)pathf(lname, sizeof(lname), "layer-%llu", (unsigned long long)wall_msec());
    (void)pathf(layer, sizeof(layer), "%s/%s", ndir, lname);
    if (rename(b->dir, layer) < 0)
        return err_set(&b->err, errno, "cannot move the layer to '%s'", layer);
    (void)pathf(b->dir, sizeof(b->dir), "%s", layer); /* removed on failure from here */
    (void)pathf(ret_layer, n, "%s", layer);
    return 0;
}

static int
switch_current(struct template_build *b, const char *name, const char *layer)
{
    char ndir[PATH_MAX + 64], tmp[PATH_MAX + 96], cur[PATH_MAX + 96];
    (void)pathf(ndir, sizeof(ndir), "%s/%s", b->tdir, name);
    (void)pathf(tmp, sizeof(tmp), "%s/.current-%s", ndir, b->id);
    (void)pathf(cur, sizeof(cur), "%s/current", ndir);
    const char *slash = strrchr(layer, '/');
    const char *base = slash ? slash + 1 : layer;
    (void)unlink(tmp);
    if (symlink(base, tmp) < 0 || rename(tmp, cur) < 0) {
        (void)unlink(tmp);
        return err_set(&b->err, errno, "cannot point '%s' at the new layer", cur);
    }
    return 0;
}

static void
succeed(struct template_build *b)
{
    char layer[PATH_MAX + 96];
    char **stack = NULL;
    int r = install(b, layer, sizeof(layer));
    if (r == 0) {
        stack = calloc(b->n_lowers + 2, sizeof(*stack));
        char fs[PATH_MAX + 100];
        (void)pathf(fs, sizeof(fs), "%s/fs", layer);
        r = stack && (stack[0] = strdup(fs)) ? 0 : -ENOMEM;
        for (size_t i = 0; r == 0 && i < b->n_lowers; i++)
            if (!(stack[i + 1] = strdup(b->lowers[i])))
                r = -ENOMEM;
        if (r == 0) {
            b->t->layers = stack;
            b->t->n_layers = b->n_lowers + 1;
            stack = NULL;
            r = (b->t->digest = strdup(b->digest)) ? 0 : -ENOMEM;
        }
        for (size_t i = 0; stack && i < b->n_lowers + 2; i++)
            free(stack[i]);
        free(stack);
    }
    if (r == 0)
        r = template_set_put(b->host.set, b->t, &b->err);
    if (r < 0) {
        b->succeeded = false;
        fail(b, "cannot install the template: %s", b->err.msg[0] ? b->err.msg : strerror(-r));
        return;
    }
    const char *name = b->t->name;
    b->t = NULL; /* the set owns it */
    b->installed = true;
    if (switch_current(b, name, layer) < 0)
        log_warn("template=%s: %s; the next start will not find it", name, b->err.msg);
    log_info("template=%s built, layer '%s'", name, layer);
    struct template_build_event ev = {.kind = TEMPLATE_BUILD_DONE, .name = name, .layer = layer};
    emit(b, &ev);
    end_stream(b);
}

/* --- the layer out of the area --- */

static void
layer_made(int r, const struct err *err, void *ud)
{
    struct template_build *b = ud;
    sandbox_host_area_destroy(b->host.sh, b->area);
    b->area[0] = '\0';
    if (r == 0) {
        b->layer_made = true;
        succeed(b);
    } else {
        b->succeeded = false;
        fail(b, "cannot install the layer: %s", err && err->msg[0] ? err->msg : strerror(-r));
    }
    template_build_unref(b);
}

/* Asks the host to make the area's writable layer the template's layer,
 * if the state file system keeps its floor with the layer on it. */
static void
make_layer(struct template_build *b)
{
    struct statvfs sv;
    struct err err = {0};
    uint64_t used = 0;

    (void)sandbox_host_area_usage(b->host.sh, b->area, &used);
    if (statvfs(b->tdir, &sv) == 0 &&
        (uint64_t)sv.f_bavail * sv.f_frsize < used + b->host.disk_floor_bytes) {
        b->succeeded = false;
        fail(b,
             "no room for the layer (%llu MiB) on the state file system, which keeps %llu MiB "
             "free",
             (unsigned long long)(used >> 20),
             (unsigned long long)(b->host.disk_floor_bytes >> 20));
        return;
    }
    b->refs++; /* layer_made's */
    int r = sandbox_host_layer_install(b->host.sh, b->area, b->id, b->first, layer_made, b, &err);
    if (r < 0) {
        b->refs--;
        b->succeeded = false;
        fail(b, "cannot install the layer: %s", err.msg[0] ? err.msg : strerror(-r));
    }
}

/* --- the build sandbox --- */

static void
sb_gone(struct sandbox *sb, void *ud)
{
    struct template_build *b = ud;
    (void)sb;
    proc_reader_free(b->rd);
    b->rd = NULL;
    if (b->succeeded && !b->failed)
        make_layer(b);
    else if (!b->failed)
        fail(b, "the build sandbox ended on its own");
    sandbox_free(b->sb);
    b->sb = NULL;
    template_build_unref(b);
}

static void
sb_ready(struct sandbox *sb, int r, const struct err *err, void *ud)
{
    struct template_build *b = ud;
    if (r < 0) {
        fail(b, "cannot make the build sandbox: %s", err && err->msg[0] ? err->msg : strerror(-r));
        sandbox_free(sb);
        b->sb = NULL;
        template_build_unref(b);
        return;
    }
    sandbox_set_gone_handler(sb, sb_gone, b);
    struct vfs_ids ids;
    sandbox_vfs_ids(sb, &ids);
    b->first = ids.range_first;
    if (b->failed) {
        sandbox_kill(sb);
        return;
    }
    next_step(b);
}

/* Checks what can be checked before anything runs; 400 with the reason. */
static int
check_template(struct template_build *b, struct err *err)
{
    struct template *t = b->t;
    for (size_t c = 0; c < t->n_cmds; c++) {
        struct err cerr = {0};
        if (command_check(&t->cmds[c], &cerr) < 0)
            return err_set(err, EINVAL, "%s/%s:%u: custom_commands.%s: %s", b->display,
                           TEMPLATE_FILE_NAME, t->cmds[c].line, t->cmds[c].name, cerr.msg);
    }
    if (!strcmp(t->name, TEMPLATE_BASE))
        return err_set(err, EINVAL, "template '%s' is built in and cannot be built", t->name);
    if (!strcmp(t->base, TEMPLATE_BASE_HOST)) {
        b->base = NULL;
    } else {
        b->base = template_set_find(b->host.set, t->base);
        if (!b->base || !strcmp(b->base->name, t->name))
            return err_set(err, EINVAL, "template '%s': its base '%s' is no other template here",
                           t->name, t->base);
        b->n_lowers = template_layers(b->host.set, b->base, b->lowers, TEMPLATE_LAYERS_MAX);
        if (b->n_lowers >= TEMPLATE_LAYERS_MAX)
            return err_set(err, E2BIG, "template '%s' would stack more than %d layers", t->name,
                           TEMPLATE_LAYERS_MAX);
    }
    for (size_t k = 0; k <= t->n_aliases; k++) {
        const char *n = k == 0 ? t->name : t->aliases[k - 1];
        const struct template *o = template_set_find(b->host.set, n);
        if (o && strcmp(o->name, t->name) != 0)
            return err_set(err, EEXIST, "the name '%s' is taken by template '%s'", n, o->name);
    }
    for (size_t i = 0; i < t->n_steps; i++) {
        const struct template_step *st = &t->steps[i];
        if (st->kind != TEMPLATE_STEP_COPY)
            continue;
        struct stat sst;
        bool top = (!strncmp(st->b, "/usr", 4) || !strncmp(st->b, "/etc", 4) ||
                    !strncmp(st->b, "/opt", 4)) &&
                   (st->b[4] == '\0' || st->b[4] == '/');
        int fd = path_open(b->tfd, st->a, O_PATH | O_NOFOLLOW, 0);
        if (fd < 0 || fstat(fd, &sst) < 0) {
            safe_close(fd);
            return err_set(err, EINVAL,
                           "%s/%s:%u: steps[%zu].copy.src: '%s' is not in the template "
                           "directory",
                           b->display, TEMPLATE_FILE_NAME, st->line, i, st->a);
        }
        close(fd);
        if (top && (st->b[4] == '/' || S_ISDIR(sst.st_mode)))
            continue;
        return err_set(err, EINVAL,
                       "%s/%s:%u: steps[%zu].copy.dst: '%s' is not under /usr, /etc or /opt (the "
                       "parts of the file system a layer keeps)",
                       b->display, TEMPLATE_FILE_NAME, st->line, i, st->b);
    }
    return 0;
}

static int
start_sandbox(struct template_build *b, struct err *err)
{
    const struct template_build_host *a = &b->host;
    struct template *t = b->t;
    struct sandbox_limits lim = {a->default_memory_bytes, a->default_cpu_millis, a->default_pids};
    const char *tenv[TEMPLATE_ENV_MAX * 4];
    double cpu = 0;
    uint64_t mem = 0, pids = 0, disk = t->disk_mb;
    int r;

    if (b->base)
        template_effective_resources(a->set, b->base, &cpu, &mem, &pids);
    if (t->cpu > 0)
        cpu = t->cpu;
    if (t->memory_mb)
        mem = t->memory_mb;
    if (t->pids)
        pids = t->pids;
    for (const struct template *c = b->base; !disk && c;
         c = strcmp(c->base, TEMPLATE_BASE_HOST) ? template_set_find(a->set, c->base) : NULL)
        disk = c->disk_mb;
    if (cpu > 0)
        lim.cpu_millis = (uint32_t)(cpu * 1000.0 + 0.5);
    if (mem)
        lim.memory_bytes = mem << 20;
    if (pids)
        lim.pids = (uint32_t)pids;
    /* the env of the base chain, the template's own, then env steps */
    int nt = b->base ? template_effective_env(a->set, b->base, tenv, ELEMENTSOF(tenv)) : 0;
    if (nt < 0)
        return err_set(err, E2BIG, "too many env entries");
    for (int i = 0; i < nt; i++) {
        const char *eq = strchr(tenv[i], '=');
        char k[TEMPLATE_ENV_NAME_MAX + 1];
        (void)pathf(k, sizeof(k), "%.*s", (int)(eq - tenv[i]), tenv[i]);
        if ((r = set_env(b, k, eq + 1)) < 0)
            return r;
    }
    for (size_t i = 0; i < t->n_env; i++) {
        const char *eq = strchr(t->env[i], '=');
        char k[TEMPLATE_ENV_NAME_MAX + 1];
        (void)pathf(k, sizeof(k), "%.*s", (int)(eq - t->env[i]), t->env[i]);
        if ((r = set_env(b, k, eq + 1)) < 0)
            return r;
    }
    (void)pathf(b->area, sizeof(b->area), "build-%s", b->id);
    r = sandbox_host_area_create(a->sh, b->area, disk << 20, err);
    if (r < 0) {
        b->area[0] = '\0';
        return r;
    }
    if (disk && a->default_disk_bytes)
        lim.disk_bytes = disk << 20; /* its home too */
    struct sandbox_fs jfs = {.layers = b->lowers,
                             .nlayers = b->n_lowers,
                             .upper_area = b->area,
                             .disk_bytes = disk << 20};
    struct sandbox_spec spec = {.limits = lim, .fs = &jfs};
    b->refs++;
    r = sandbox_create(a->sh, b->id, &spec, sb_ready, b, &b->sb, err);
    if (r < 0) {
        b->refs--;
        b->sb = NULL;
    }
    return r;
}

/* --- the build --- */

const char *
template_build_name(const struct template_build *b)
{
    return b->t ? b->t->name : "?";
}

const char *
template_build_id(const struct template_build *b)
{
    return b->id;
}

size_t
template_build_steps(const struct template_build *b)
{
    return b->t ? b->t->n_steps : 0;
}

int
template_build_feed(struct template_build *b, const void *data, size_t len, struct err *err)
{
    int r = tar_extract_feed(b->x, data, len, &b->err);
    if (r < 0)
        return err_set(err, -r, "%s", b->err.msg[0] ? b->err.msg : strerror(-r));
    return 0;
}

int
template_build_untar_done(struct template_build *b, struct err *err)
{
    int r = tar_extract_finish(b->x, &b->err);
    if (r < 0)
        return err_set(err, -r, "%s", b->err.msg);
    return 0;
}

int
template_build_digest(struct template_build *b, struct err *err)
{
    return layer_digest(b->tfd, b->digest, err);
}

int
template_build_load(struct template_build *b, struct err *err)
{
    int r = template_load(b->tfd, b->display, &b->t, err);
    if (r == 0)
        r = check_template(b, err);
    return r;
}

int
template_build_start(struct template_build *b, struct err *err)
{
    return start_sandbox(b, err);
}

int
template_build_new(const struct template_build_host *host, const char *display,
                   const struct template_build_ops *ops, void *ud, struct template_build **ret)
{
    struct template_build *b = NULL;
    const char *jh_dir;
    int r;

    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->host = *host;
    b->tfd = -EBADF;
    b->refs = 1; /* the caller's */
    buf_init(&b->line, BUILD_LINE_MAX + 1);
    (void)snprintf(b->display, sizeof(b->display), "%s", display && *display ? display : ".");
    for (char *p = b->display; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    jh_dir = sandbox_host_state_dir(host->sh);
    (void)pathf(b->tdir, sizeof(b->tdir), "%s/%s", jh_dir, TEMPLATE_LAYERS_DIR);
    b->id[0] = 'b';
    r = rand_id(b->id + 1, 19);
    if (r == 0 && mkdir(b->tdir, 0700) < 0 && errno != EEXIST)
        r = -errno;
    if (r == 0) {
        (void)pathf(b->dir, sizeof(b->dir), "%s/.build-%s", b->tdir, b->id);
        char tpl[PATH_MAX + 16];
        (void)pathf(tpl, sizeof(tpl), "%s/template", b->dir);
        if (mkdir(b->dir, 0700) < 0 || mkdir(tpl, 0755) < 0)
            r = -errno;
        else if ((b->tfd = open(tpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            r = -errno;
    }
    if (r == 0)
        r = tar_extract_new(b->tfd, TAR_BYTES_MAX, TAR_ENTRIES_MAX, &b->x);
    if (r < 0) {
        build_free(b); /* ops not set yet: nothing is released */
        return r;
    }
    b->ops = ops;
    b->ud = ud;
    *ret = b;
    return 0;
}
