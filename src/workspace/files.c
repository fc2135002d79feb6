/*
 * files.c - file operations on a workspace, routed by its state.
 *
 * Each operation settles the workspace, then goes warm to its sandbox or
 * cold to the store, never waking it (see files.h). Warm operations run
 * inline on the loop through the sandbox's file calls, except a put (the
 * staged upload is copied in) and a delete with a precondition (which may
 * hash the file): those run on a worker through a fileops handle as the
 * sandbox's user. Cold operations are store calls on a worker, with the
 * worker's own store connection. Every result comes back on the loop.
 */
#include "workspace/files.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"
#include "sync/sync.h"
#include "util/cleanup.h"
#include "util/path.h"

enum wf_op { WF_GET, WF_STAT, WF_PUT, WF_DELETE, WF_WALK, WF_MKDIR, WF_RMDIR, WF_RENAME };

struct wf_job {
    struct workspaces *w;
    enum wf_op op;
    char ws[65];
    char rel[PATH_MAX_LEN + 2], rel2[PATH_MAX_LEN + 2];
    char match[80];
    bool has_match, overwrite;
    uint64_t default_disk_bytes;
    struct store_writer *wr; /* put: the staged upload */
    struct fileops *fo;      /* warm: file work as the sandbox's user */
    size_t cap;              /* of res.entries */
    struct workspace_file_result res;
    workspace_file_fn cb;
    void *ud;
};

static void
wf_free(struct wf_job *j)
{
    safe_close(j->res.fd);
    for (size_t i = 0; i < j->res.n_entries; i++) {
        free(j->res.entries[i].path);
        free(j->res.entries[i].target);
    }
    free(j->res.entries);
    fileops_unref(j->fo);
    store_writer_abort(j->wr);
    free(j);
}

/* Answers and frees. */
static void
wf_finish(struct wf_job *j)
{
    j->cb(j->ud, &j->res);
    wf_free(j);
}

static void
wf_done(void *ud)
{
    wf_finish(ud);
}

static void
wf_fail(struct wf_job *j, int r)
{
    j->res.r = r;
    wf_finish(j);
}

/* A new entry at the end of the walk's entries, or NULL. */
static struct workspace_file_entry *
wf_entry_add(struct wf_job *j, const char *path, const char *target)
{
    struct workspace_file_result *res = &j->res;
    if (res->n_entries == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        struct workspace_file_entry *n = NULL;
        if (cap <= SIZE_MAX / sizeof(*n))
            n = realloc(res->entries, cap * sizeof(*n));
        if (!n)
            return NULL;
        res->entries = n;
        j->cap = cap;
    }
    struct workspace_file_entry *e = &res->entries[res->n_entries];
    *e = (struct workspace_file_entry){.path = strdup(path),
                                       .target = target ? strdup(target) : NULL};
    if (!e->path || (target && !e->target)) {
        free(e->path);
        free(e->target);
        return NULL;
    }
    res->n_entries++;
    return e;
}

/* --- warm preconditions (run on a worker: may hash a file) --- */

static int
warm_check(struct wf_job *j, struct err *err)
{
    struct files_stat st;
    if (!j->has_match)
        return 0;
    int r = fileops_stat(j->fo, j->rel, &st, NULL);
    if (r == 0 && st.type == FILES_DIR)
        return err_set(err, EISDIR, "'/%s' is a directory", j->rel);
    if (!j->match[0])
        return r == -ENOENT ? 0 : err_set(err, ESTALE, "'/%s' exists (expected none)", j->rel);
    if (r < 0)
        return err_set(err, ESTALE, "'/%s' does not exist", j->rel);
    if (!strcmp(st.version, j->match))
        return 0;
    if (strlen(j->match) == STORE_HASH_LEN && st.type == FILES_FILE) {
        _cleanup_close_ int fd = -EBADF;
        struct files_stat st2;
        char hash[STORE_HASH_LEN + 1];
        if (fileops_open_read(j->fo, j->rel, &fd, &st2, NULL) == 0 &&
            store_hash_fd(fd, hash, NULL) == 0 && !strcmp(hash, j->match))
            return 0;
    }
    return err_set(err, ESTALE, "'/%s' changed since version '%.64s'", j->rel, j->match);
}

/* --- cold: on a worker, against the store --- */

/* A cold write may not take the workspace's files past its disk bound,
 * or its next wake could not restore them into the bounded sandbox. Sizes
 * as the store counts them (file system overhead in the sandbox comes on
 * top); two uploads racing may each pass: the kernel's bound on the wake
 * is the exact one, and its 507 names the file that did not fit. */
static int
cold_bound_check(struct store *s, struct wf_job *j, const struct store_entry *prev, bool existed)
{
    struct store_usage u;
    struct store_ws meta;
    struct err *err = &j->res.err;
    uint64_t size = store_writer_size(j->wr);
    int r = store_ws_get(s, j->ws, &meta, err);
    if (r < 0)
        return r;
    uint64_t bound = workspace_disk_bound(&meta, j->default_disk_bytes);
    if (!bound)
        return 0;
    if ((r = store_usage(s, j->ws, &u, err)) < 0)
        return r;
    uint64_t other = u.bytes - (existed && prev->type == STORE_FILE ? MIN(prev->size, u.bytes) : 0);
    if (size <= bound && other <= bound - size)
        return 0;
    return err_set(err, EDQUOT,
                   "'/%s' does not fit: workspace '%s' would hold %llu MiB, more than its disk "
                   "bound (disk_mb %llu)",
                   j->rel, j->ws, (unsigned long long)((other + size + (1u << 20) - 1) >> 20),
                   (unsigned long long)(bound >> 20));
}

static void
run_put_cold(struct store *s, struct wf_job *j)
{
    struct workspace_file_result *res = &j->res;
    struct store_entry prev;
    struct err e = {0};
    /* Only for created (201 new, 200 replaced); the write itself is
     * atomic whatever happens in between. */
    bool existed = store_stat(s, j->ws, j->rel, &prev, &e) == 0;
    res->r = cold_bound_check(s, j, &prev, existed);
    if (res->r < 0)
        return;
    res->r = store_writer_commit(s, j->wr, j->ws, j->rel, 0644, j->has_match ? j->match : NULL,
                                 &res->e, &res->err);
    j->wr = NULL;
    res->created = !existed;
}

static void
run_get_cold(struct store *s, struct wf_job *j)
{
    struct workspace_file_result *res = &j->res;
    if (j->op == WF_STAT) {
        res->r = store_stat(s, j->ws, j->rel, &res->e, &res->err);
        if (res->r == 0 && res->e.type == STORE_FILE)
            res->r = store_read(s, j->ws, j->rel, &res->fd, &res->e, &res->err);
        return;
    }
    res->r = store_read(s, j->ws, j->rel, &res->fd, &res->e, &res->err);
}

static void
run_delete_cold(struct store *s, struct wf_job *j)
{
    j->res.r = store_delete(s, j->ws, j->rel, j->has_match ? j->match : NULL, &j->res.err);
}

static int
walk_cold_one(const struct store_entry *se, void *ud)
{
    struct wf_job *j = ud;
    char p[sizeof(se->path) + 1];
    (void)snprintf(p, sizeof(p), "/%s", path_is_root(se->path) ? "" : se->path);
    struct workspace_file_entry *e = wf_entry_add(j, p, NULL);
    if (!e)
        return -ENOMEM;
    e->type = se->type == STORE_DIR ? FILES_DIR : FILES_FILE;
    e->size = se->size;
    e->mode = se->mode;
    if (se->type == STORE_FILE) {
        (void)snprintf(e->version, sizeof(e->version), "%s", se->hash);
        (void)snprintf(e->hash, sizeof(e->hash), "%s", se->hash);
    }
    return 0;
}

static void
run_walk_cold(struct store *s, struct wf_job *j)
{
    j->res.r = store_walk(s, j->ws, j->rel, walk_cold_one, j, &j->res.err);
}

static void
run_mkdir_cold(struct store *s, struct wf_job *j)
{
    struct workspace_file_result *res = &j->res;
    struct store_entry e;
    struct err e2 = {0};
    res->r = store_mkdir(s, j->ws, j->rel, &res->created, &res->err);
    /* As in a sandbox: a file at the path itself is a conflict; a file
     * among its ancestors is not_a_directory. */
    if (res->r == -ENOTDIR && store_stat(s, j->ws, j->rel, &e, &e2) == 0 && e.type == STORE_FILE) {
        err_clear(&res->err);
        res->r = err_set(&res->err, EEXIST, "'/%s' exists and is a file", j->rel);
    }
}

static void
run_rmdir_cold(struct store *s, struct wf_job *j)
{
    j->res.r = store_rmdir(s, j->ws, j->rel, &j->res.err);
}

static void
run_rename_cold(struct store *s, struct wf_job *j)
{
    struct workspace_file_result *res = &j->res;
    res->r = store_rename(s, j->ws, j->rel, j->rel2, j->overwrite, &res->err);
    if (res->r == 0)
        res->r = store_stat(s, j->ws, j->rel2, &res->e, &res->err);
}

/* --- warm: the sandbox's file calls (inline) or a worker (hashing) --- */

/* Copies the staged upload into the live sandbox, hashing it. */
static void
run_put_warm(struct store *s, struct wf_job *j)
{
    struct workspace_file_result *res = &j->res;
    (void)s;

    res->r = warm_check(j, &res->err);
    if (res->r < 0)
        return;
    struct sync_sandbox sb = {j->fo};
    res->r = sync_copy_in(&sb, j->rel, store_writer_fd(j->wr), NULL, res->hash, NULL, &res->st,
                          &res->created, &res->err);
}

static void
run_delete_warm(struct store *s, struct wf_job *j)
{
    (void)s;
    j->res.r = warm_check(j, &j->res.err);
    if (j->res.r == 0)
        j->res.r = fileops_delete(j->fo, j->rel, &j->res.err);
}

static int
walk_warm_one(const struct files_entry *fe, void *ud)
{
    struct wf_job *j = ud;
    struct workspace_file_entry *e = wf_entry_add(j, fe->path, fe->target);
    if (!e)
        return -ENOMEM;
    e->type = fe->st.type;
    e->size = fe->st.size;
    e->mode = fe->st.mode;
    (void)snprintf(e->version, sizeof(e->version), "%s", fe->st.version);
    return 0;
}

static void
wf_run(struct store *s, void *ud)
{
    static void (*const run[])(struct store *, struct wf_job *) = {
            [WF_GET] = run_get_cold,     [WF_STAT] = run_get_cold,
            [WF_PUT] = run_put_cold,     [WF_DELETE] = run_delete_cold,
            [WF_WALK] = run_walk_cold,   [WF_MKDIR] = run_mkdir_cold,
            [WF_RMDIR] = run_rmdir_cold, [WF_RENAME] = run_rename_cold,
    };
    struct wf_job *j = ud;
    if (j->res.warm)
        (j->op == WF_PUT ? run_put_warm : run_delete_warm)(s, j);
    else
        run[j->op](s, j);
}

static void
wf_submit(struct wf_job *j)
{
    if (workspaces_run(j->w, wf_run, wf_done, j) < 0)
        wf_fail(j, -ENOMEM);
}

/* The warm operations done inline on the loop; r. */
static int
warm_inline(struct wf_job *j, struct sandbox *sb)
{
    struct workspace_file_result *res = &j->res;
    struct err *err = &res->err;
    int r = 0;

    switch (j->op) {
    case WF_STAT:
        r = sandbox_file_stat(sb, j->rel, &res->st, err);
        if (r < 0 || res->st.type != FILES_FILE)
            return r;
        /* a file is opened, as in get */
        return sandbox_file_open_read(sb, j->rel, &res->fd, &res->st, err);
    case WF_GET:
        return sandbox_file_open_read(sb, j->rel, &res->fd, &res->st, err);
    case WF_DELETE:
        return sandbox_file_delete(sb, j->rel, err);
    case WF_WALK:
        return sandbox_walk(sb, j->rel, walk_warm_one, j, err);
    case WF_MKDIR:
        return sandbox_mkdir(sb, j->rel, &res->created, err);
    case WF_RMDIR:
        return sandbox_rmdir(sb, j->rel, err);
    case WF_RENAME:
        r = sandbox_rename(sb, j->rel, j->rel2, j->overwrite, err);
        if (r == 0)
            r = sandbox_file_stat(sb, j->rel2, &res->st, err);
        return r;
    case WF_PUT:
        break;
    }
    return -EINVAL;
}

static void
wf_settled(void *ud, struct sandbox *sb)
{
    struct wf_job *j = ud;
    int r;

    if (!sb) {
        wf_submit(j);
        return;
    }
    j->res.warm = true;
    workspaces_touch(j->w, j->ws);
    if (j->op == WF_PUT || (j->op == WF_DELETE && j->has_match)) {
        /* A precondition may need hashing, a put copying: off the loop. */
        r = sandbox_fileops(sb, false, &j->fo, j->op == WF_PUT ? &j->res.err : NULL);
        if (r < 0) {
            wf_fail(j, j->op == WF_PUT ? r : -ENOMEM);
            return;
        }
        wf_submit(j);
        return;
    }
    wf_fail(j, warm_inline(j, sb));
}

static void
wf_start(struct workspaces *w, enum wf_op op, const struct workspace_file_req *q,
         struct store_writer *wr, workspace_file_fn cb, void *ud)
{
    struct wf_job *j = calloc(1, sizeof(*j));
    if (!j) {
        store_writer_abort(wr);
        struct workspace_file_result res = {.r = -ENOMEM, .fd = -EBADF};
        cb(ud, &res);
        return;
    }
    j->w = w;
    j->op = op;
    j->wr = wr;
    j->cb = cb;
    j->ud = ud;
    j->res.fd = -EBADF;
    (void)snprintf(j->ws, sizeof(j->ws), "%s", q->ws);
    (void)snprintf(j->rel, sizeof(j->rel), "%s", q->rel);
    if (q->rel2)
        (void)snprintf(j->rel2, sizeof(j->rel2), "%s", q->rel2);
    if (q->match)
        (void)snprintf(j->match, sizeof(j->match), "%s", q->match);
    j->has_match = q->match != NULL;
    j->overwrite = q->overwrite;
    j->default_disk_bytes = q->default_disk_bytes;
    workspaces_settle(w, j->ws, wf_settled, j);
}

void
workspace_file_get(struct workspaces *w, const struct workspace_file_req *q, workspace_file_fn cb,
                   void *ud)
{
    wf_start(w, WF_GET, q, NULL, cb, ud);
}

void
workspace_file_stat(struct workspaces *w, const struct workspace_file_req *q, workspace_file_fn cb,
                    void *ud)
{
    wf_start(w, WF_STAT, q, NULL, cb, ud);
}

void
workspace_file_put(struct workspaces *w, const struct workspace_file_req *q,
                   struct store_writer *wr, workspace_file_fn cb, void *ud)
{
    wf_start(w, WF_PUT, q, wr, cb, ud);
}

void
workspace_file_delete(struct workspaces *w, const struct workspace_file_req *q,
                      workspace_file_fn cb, void *ud)
{
    wf_start(w, WF_DELETE, q, NULL, cb, ud);
}

void
workspace_file_walk(struct workspaces *w, const struct workspace_file_req *q, workspace_file_fn cb,
                    void *ud)
{
    wf_start(w, WF_WALK, q, NULL, cb, ud);
}

void
workspace_file_mkdir(struct workspaces *w, const struct workspace_file_req *q, workspace_file_fn cb,
                     void *ud)
{
    wf_start(w, WF_MKDIR, q, NULL, cb, ud);
}

void
workspace_file_rmdir(struct workspaces *w, const struct workspace_file_req *q, workspace_file_fn cb,
                     void *ud)
{
    wf_start(w, WF_RMDIR, q, NULL, cb, ud);
}

void
workspace_file_rename(struct workspaces *w, const struct workspace_file_req *q,
                      workspace_file_fn cb, void *ud)
{
    wf_start(w, WF_RENAME, q, NULL, cb, ud);
}
