/*
 * sync.c - restore (store -> sandbox, verified) and mirror (sandbox ->
 * store, pull-only, deletions detected), with ignore rules.
 */
#include "sync/sync.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "util/cleanup.h"
#include "util/hashmap.h"
#include "util/path.h"
#include "util/timeutil.h"

static const char *const default_ignores[] = {
        ".venv/",
        "venv/",
        "node_modules/",
        "__pycache__/",
        ".git/",
        ".hg/",
        ".svn/",
        ".mypy_cache/",
        ".pytest_cache/",
        ".ruff_cache/",
        ".tox/",
        ".cache/",
        ".npm/",
        ".local/", /* pip --user installs: like a .venv, they belong to one sandbox */
        ".ipynb_checkpoints/",
        "*.pyc",
        "*.pyo",
        ".DS_Store",
        "*.swp",
        NULL,
};

/* --- ignore rules --- */

void
sync_ignore_done(struct sync_ignore *ig)
{
    for (size_t i = 0; i < ig->n; i++)
        free(ig->patterns[i]);
    ig->n = 0;
}

static int
add_pattern(struct sync_ignore *ig, const char *p, size_t n)
{
    if (ig->n >= SYNC_IGNORE_MAX)
        return -E2BIG;
    bool dir = n && p[n - 1] == '/';
    char *s = strndup(p, dir ? n - 1 : n);
    if (!s)
        return -ENOMEM;
    ig->dir_only[ig->n] = dir;
    ig->glob[ig->n] = strpbrk(s, "*?[\\") != NULL;
    ig->patterns[ig->n++] = s;
    return 0;
}

/* Whether one name (a path component) matches a rule. */
static bool
name_ignored(const struct sync_ignore *ig, const char *name, bool is_dir)
{
    for (size_t i = 0; i < ig->n; i++) {
        if (ig->dir_only[i] && !is_dir)
            continue;
        if (ig->glob[i] ? fnmatch(ig->patterns[i], name, FNM_PERIOD) == 0
                        : strcmp(ig->patterns[i], name) == 0)
            return true;
    }
    return false;
}

int
sync_ignore_default(struct sync_ignore *ig)
{
    memset(ig, 0, sizeof(*ig));
    ig->max_file_bytes = (uint64_t)SYNC_DEFAULT_MAX_MB << 20;
    for (const char *const *p = default_ignores; *p; p++) {
        int r = add_pattern(ig, *p, strlen(*p));
        if (r < 0) {
            sync_ignore_done(ig);
            return r;
        }
    }
    return 0;
}

int
sync_ignore_parse(struct sync_ignore *ig, const char *list, struct err *err)
{
    uint64_t cap = ig->max_file_bytes;
    sync_ignore_done(ig);
    ig->max_file_bytes = cap;
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && *p == ' ') {
            p++;
            n--;
        }
        while (n && p[n - 1] == ' ')
            n--;
        if (n) {
            if (n > 255 || memchr(p, '/', n - 1))
                return err_set(err, EINVAL,
                               "ignore pattern '%.*s': a name or glob, with '/' only at the end",
                               (int)(n > 64 ? 64 : n), p);
            int r = add_pattern(ig, p, n);
            if (r < 0)
                return err_set(err, -r, "more than %d ignore patterns", SYNC_IGNORE_MAX);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

bool
sync_ignored(const struct sync_ignore *ig, const char *path, bool is_dir, uint64_t size)
{
    if (!is_dir && ig->max_file_bytes && size > ig->max_file_bytes)
        return true;
    char name[256];
    for (const char *c = path;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n >= sizeof(name))
            n = sizeof(name) - 1;
        memcpy(name, c, n);
        name[n] = '\0';
        if (name_ignored(ig, name, slash != NULL || is_dir))
            return true;
        if (!slash)
            return false;
        c = slash + 1;
    }
}

/* --- state: path -> version --- */

struct sv {
    char *path;
    bool dir;
    bool skipped;   /* the store could not hold it: never stored, nothing to delete */
    int skip_error; /* why (a struct sync_skip error) */
    uint64_t seen;  /* when it was skipped: the mirror (gen) that saw it last */
    char version[FILES_VERSION_LEN + 1];
};

struct sync_state {
    struct hashmap *map;
    uint64_t gen; /* mirrors run on this state */
};

int
sync_state_new(struct sync_state **ret)
{
    struct sync_state *st = calloc(1, sizeof(*st));
    if (!st || hashmap_new(&st->map) < 0) {
        free(st);
        return -ENOMEM;
    }
    *ret = st;
    return 0;
}

static void
state_clear(struct sync_state *st)
{
    size_t it = 0;
    struct sv *v;
    struct sv **all = calloc(hashmap_size(st->map) + 1, sizeof(*all));
    size_t n = 0;
    while ((v = hashmap_next(st->map, &it)))
        if (all)
            all[n++] = v;
    for (size_t i = 0; i < n; i++) {
        (void)hashmap_remove(st->map, all[i]->path);
        free(all[i]->path);
        free(all[i]);
    }
    free(all);
}

void
sync_state_free(struct sync_state *st)
{
    if (!st)
        return;
    state_clear(st);
    hashmap_free(st->map);
    free(st);
}

size_t
sync_state_size(const struct sync_state *st)
{
    return hashmap_size(st->map);
}

static int
state_set(struct sync_state *st, const char *path, bool dir, const char *version)
{
    struct sv *v = hashmap_get(st->map, path);
    if (!v) {
        v = calloc(1, sizeof(*v));
        if (!v)
            return -ENOMEM;
        v->path = strdup(path);
        if (!v->path || hashmap_put(st->map, v->path, v) < 0) {
            free(v->path);
            free(v);
            return -ENOMEM;
        }
    }
    v->dir = dir;
    v->skipped = false;
    (void)snprintf(v->version, sizeof(v->version), "%s", version ? version : "");
    return 0;
}

static void
state_del(struct sync_state *st, const char *path)
{
    struct sv *v = hashmap_remove(st->map, path);
    if (v) {
        free(v->path);
        free(v);
    }
}

/* --- restore --- */

struct restore_ctx {
    struct store *s;
    const char *ws;
    const struct sync_sandbox *sb;
    const struct sync_ignore *ig;
    struct sync_state *st;
    struct sync_report *rep;
    struct err *err;
    int bad;
    char first_why[160];
};

static void
note_bad(struct restore_ctx *c, const char *path, const char *why)
{
    size_t l = strlen(c->rep->bad_paths);
    if (l + strlen(path) + 4 < sizeof(c->rep->bad_paths))
        (void)snprintf(c->rep->bad_paths + l, sizeof(c->rep->bad_paths) - l, "%s/%s", l ? ", " : "",
                       path);
    if (!c->bad++)
        (void)snprintf(c->first_why, sizeof(c->first_why), "%s", why);
}

struct upload_sink {
    struct fileops_upload *up;
    struct err *err;
};

static int
upload_sink(void *ud, const void *data, size_t n)
{
    struct upload_sink *u = ud;
    return fileops_upload_write(u->up, data, n, u->err);
}

int
sync_copy_in(const struct sync_sandbox *sb, const char *path, int fd, const char *expect_hash,
             char hash[STORE_HASH_LEN + 1], uint64_t *ret_size, struct files_stat *ret_st,
             bool *ret_created, struct err *err)
{
    struct fileops_upload *up = NULL;
    uint64_t total = 0;
    bool created;
    int r = fileops_upload_begin(sb->fo, path, UINT64_MAX, &up, err);
    if (r < 0)
        return r;
    struct upload_sink u = {up, err};
    r = store_hash_copy(fd, upload_sink, &u, hash, &total);
    if (r < 0) {
        fileops_upload_abort(up);
        if (err_isset(err))
            return r;
        return err_set(err, EIO, "cannot read the source of '/%s': %s", path, strerror(-r));
    }
    if (expect_hash && strcmp(hash, expect_hash) != 0) {
        fileops_upload_abort(up);
        return err_set(err, EBADMSG, "'/%s' does not match its content hash", path);
    }
    r = fileops_upload_commit(up, ret_st, ret_created ? ret_created : &created, err);
    if (r < 0)
        return r;
    if (ret_size)
        *ret_size = total;
    return 0;
}

/* Copies one file from the store into the sandbox, hashing on the way. */
static int
restore_file(struct restore_ctx *c, const struct store_entry *e)
{
    struct store_entry se;
    struct err e2 = {0};
    struct files_stat fs;
    char hex[STORE_HASH_LEN + 1];
    uint64_t total = 0;

    _cleanup_close_ int fd = -EBADF;
    int r = store_read(c->s, c->ws, e->path, &fd, &se, &e2);
    if (r < 0) {
        note_bad(c, e->path, e2.msg);
        return 0;
    }
    err_clear(&e2);
    r = sync_copy_in(c->sb, e->path, fd, e->hash, hex, &total, &fs, NULL, &e2);
    if (r == -EIO || r == -EBADMSG || (r == 0 && total != e->size)) {
        /* The bytes are not what the store says they are: never hand them out. */
        store_note_damaged();
        note_bad(c, e->path, r < 0 ? e2.msg : "size differs from the record");
        return 0;
    }
    if (r < 0) {
        *c->err = e2; /* the sandbox side failed (full, over quota): the wake fails */
        return r;
    }
    c->rep->files++;
    c->rep->bytes += total;
    return state_set(c->st, e->path, false, fs.version);
}

static int
restore_one(const struct store_entry *e, void *ud)
{
    struct restore_ctx *c = ud;
    bool dir = e->type == STORE_DIR;

    if (sync_ignored(c->ig, e->path, dir, e->size)) {
        c->rep->ignored++;
        return 0;
    }
    if (dir) {
        bool created;
        int r = fileops_mkdir(c->sb->fo, e->path, &created, c->err);
        if (r < 0)
            return r;
        struct files_stat fs;
        r = fileops_stat(c->sb->fo, e->path, &fs, c->err);
        if (r < 0)
            return r;
        c->rep->dirs++;
        return state_set(c->st, e->path, true, fs.version);
    }
    return restore_file(c, e);
}

int
sync_restore(struct store *s, const char *ws, const struct sync_sandbox *sb,
             const struct sync_ignore *ig, struct sync_state *st, struct sync_report *rep,
             struct err *err)
{
    uint64_t t0 = now_usec();
    struct restore_ctx c = {s, ws, sb, ig, st, rep, err, 0};

    memset(rep, 0, sizeof(*rep));
    state_clear(st);
    int r = store_walk(s, ws, ".", restore_one, &c, err);
    rep->duration_us = now_usec() - t0;
    if (r < 0)
        return r;
    if (c.bad)
        return err_set(err, EBADMSG,
                       "restore of workspace '%s' failed for %d file(s): %s (first: %s)", ws, c.bad,
                       rep->bad_paths, c.first_why);
    return 0;
}

struct seed_ctx {
    struct sync_state *st;
    const struct sync_ignore *ig;
};

static int
seed_one(const struct store_entry *e, void *ud)
{
    struct seed_ctx *c = ud;
    bool dir = e->type == STORE_DIR;
    if (sync_ignored(c->ig, e->path, dir, e->size))
        return 0;
    return state_set(c->st, e->path, dir, ""); /* no live version is "" */
}

int
sync_state_seed(struct store *s, const char *ws, const struct sync_ignore *ig,
                struct sync_state *st, struct err *err)
{
    struct seed_ctx c = {st, ig};
    state_clear(st);
    int r = store_walk(s, ws, ".", seed_one, &c, err);
    if (r == -ENOMEM)
        (void)err_set(err, ENOMEM, "out of memory");
    return r;
}

/* --- mirror --- */

const char *
sync_skip_reason(int error)
{
    switch (error) {
    case ENAMETOOLONG:
        return "the path is too long for the store";
    case ELOOP:
        return "directories are nested too deep to be walked";
    case EACCES:
        return "the sandbox's user may not read it";
    default:
        return "the store cannot hold this name";
    }
}

/* Counts a skipped entry and names it in the report while there is room. */
static void
note_skip(struct sync_report *rep, const char *rel, int error, bool fresh)
{
    rep->skipped++;
    if (fresh)
        rep->fresh_skips++;
    if (rep->n_skips >= SYNC_SKIP_LIST_MAX)
        return;
    struct sync_skip *k = &rep->skips[rep->n_skips++];
    size_t n = strlen(rel);
    k->cut = n > SYNC_SKIP_PATH_MAX;
    memcpy(k->path, rel, k->cut ? SYNC_SKIP_PATH_MAX : n);
    k->path[k->cut ? SYNC_SKIP_PATH_MAX : n] = '\0';
    k->error = error;
    k->fresh = fresh;
}

/* Records that the store cannot hold rel (at this version). */
static int
state_skip(struct sync_state *st, const char *rel, bool dir, const char *version, int error)
{
    int r = state_set(st, rel, dir, version);
    if (r < 0)
        return r;
    struct sv *v = hashmap_get(st->map, rel);
    v->skipped = true;
    v->skip_error = error;
    v->seen = st->gen;
    return 0;
}

/* The walk's side of the ignore rules: an ignored file or directory is
 * left out and a directory never read (its ancestors were checked on the
 * way down). */
static void
ignore_prune(const struct sync_ignore *ig, struct files_prune *p)
{
    _Static_assert(SYNC_IGNORE_MAX <= FILES_PRUNE_MAX, "ignore rules fit a prune list");
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < ig->n && i < FILES_PRUNE_MAX; i++) {
        p->patterns[i] = ig->patterns[i];
        p->dir_only[i] = ig->dir_only[i];
        p->glob[i] = ig->glob[i];
    }
    p->n = ig->n < FILES_PRUNE_MAX ? ig->n : FILES_PRUNE_MAX;
    p->max_file_bytes = ig->max_file_bytes;
}

/* Entries the store cannot hold because of where they are - a path past
 * PATH_MAX_LEN, a directory at the walk's depth limit - come back from the
 * walk marked (files_entry.beyond) and not entered. They are reported and
 * taken out of the tree instead of failing the walk, and therefore the
 * whole mirror. */
static int
drop_unstorable(struct files_tree *t, struct sync_state *st, struct sync_report *rep)
{
    size_t w = 0;
    int r = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct files_entry *e = &t->v[i];
        bool dir = e->st.type == FILES_DIR;
        if (r < 0 || !e->beyond || (!dir && e->st.type != FILES_FILE)) {
            t->v[w++] = *e;
            continue;
        }
        const char *rel = e->path + 1;
        struct sv *v = hashmap_get(st->map, rel);
        bool fresh = !v || !v->skipped || v->dir != dir;
        note_skip(rep, rel, e->beyond, fresh);
        r = state_skip(st, rel, dir, "", e->beyond);
        free(e->path);
        free(e->target);
    }
    t->n = w;
    return r;
}

/* Whether a store call failed because of the path itself (its length, a
 * key too long to index, a name it refuses), not because of the store. */
static bool
name_error(int r)
{
    return r == -ENAMETOOLONG || r == -EINVAL;
}

static int
cmp_key_entry(const void *key, const void *elem)
{
    /* tree paths are "/a/b"; state paths "a/b" */
    return strcmp((const char *)key, ((const struct files_entry *)elem)->path + 1);
}

static const struct files_entry *
tree_find(const struct files_tree *t, const char *rel)
{
    return t->n ? bsearch(rel, t->v, t->n, sizeof(*t->v), cmp_key_entry) : NULL;
}

/* Whether an ancestor of rel is a directory the walk could not read. */
static bool
below_unread(const struct files_tree *t, const char *rel)
{
    char p[PATH_MAX_LEN + 1];
    size_t n = strlen(rel);
    if (n >= sizeof(p))
        return false;
    memcpy(p, rel, n + 1);
    for (char *slash = strrchr(p, '/'); slash; slash = strrchr(p, '/')) {
        *slash = '\0';
        const struct files_entry *e = tree_find(t, p);
        if (e && e->unread)
            return true;
    }
    return false;
}

static int
cmp_desc(const void *a, const void *b)
{
    return strcmp(*(char *const *)b, *(char *const *)a);
}

int
sync_mirror(struct store *s, const char *ws, const struct sync_sandbox *sb,
            const struct sync_ignore *ig, struct sync_state *st, struct sync_report *rep,
            struct err *err)
{
    uint64_t t0 = now_usec();
    struct files_tree t = {0};
    struct files_prune prune;
    struct files_walk_opts wo = {
            .prune = &prune, .max = SYNC_MIRROR_MAX, .limits_as_entries = true};
    char **gone = NULL;
    size_t ngone = 0;
    int r;

    memset(rep, 0, sizeof(*rep));
    st->gen++;
    ignore_prune(ig, &prune);
    r = fileops_tree_list(sb->fo, ".", &wo, &t, err);
    if (r < 0)
        goto out;
    rep->ignored += t.skipped;
    if ((r = drop_unstorable(&t, st, rep)) < 0) {
        r = err_set(err, -r, "out of memory");
        goto out;
    }

    /* What the store had from us and the sandbox no longer has (or has as
     * the other type). Deepest first, so files go before their
     * directories. */
    gone = calloc(sync_state_size(st) + 1, sizeof(*gone));
    if (!gone) {
        r = -ENOMEM;
        goto out;
    }
    {
        size_t it = 0;
        struct sv *v;
        while ((v = hashmap_next(st->map, &it))) {
            if (v->skipped && v->seen == st->gen)
                continue; /* the walk skipped it just now: still there */
            if (below_unread(&t, v->path))
                continue; /* not ours to read now: unknown, not gone */
            const struct files_entry *e = tree_find(&t, v->path);
            if (e && (e->st.type == FILES_DIR) == v->dir &&
                (e->st.type == FILES_DIR || e->st.type == FILES_FILE))
                continue; /* still there, same type */
            gone[ngone++] = v->path;
        }
    }
    qsort(gone, ngone, sizeof(*gone), cmp_desc);
    for (size_t i = 0; i < ngone; i++) {
        struct sv *v = hashmap_get(st->map, gone[i]);
        const struct files_entry *e = tree_find(&t, gone[i]);
        struct err e2 = {0};
        /* Ignored now, or no longer a file or directory (a symlink, a
         * FIFO): the store keeps its copy; we only stop tracking it. */
        bool keep = (e && e->st.type != FILES_DIR && e->st.type != FILES_FILE) ||
                    sync_ignored(ig, v->path, v->dir, 0);
        struct files_stat fs;
        if (v->skipped)
            keep = true; /* never stored: nothing to delete */
        if (!keep && !e && !v->dir && ig->max_file_bytes &&
            fileops_stat(sb->fo, v->path, &fs, NULL) == 0 && fs.type == FILES_FILE &&
            fs.size > ig->max_file_bytes)
            keep = true; /* grew past the size cap: ignored, not gone */
        if (!keep) {
            r = v->dir ? store_rmdir(s, ws, v->path, &e2) : store_delete(s, ws, v->path, NULL, &e2);
            if (r < 0 && !name_error(r) && r != -ENOENT && r != -ENOTDIR && r != -EISDIR) {
                (void)err_set(err, -r, "%s", e2.msg);
                goto out;
            }
            rep->deleted++;
        }
        state_del(st, gone[i]);
    }
    free(gone);
    gone = NULL;

    /* New directories and changed files, parents first. A directory only
     * has to exist: its own version changes with every entry in it. */
    for (size_t i = 0; i < t.n; i++) {
        const struct files_entry *x = &t.v[i];
        const char *rel = x->path + 1;
        bool dir = x->st.type == FILES_DIR;
        if (!dir && x->st.type != FILES_FILE)
            continue;
        struct sv *old = hashmap_get(st->map, rel);
        if (old && old->dir == dir && (dir || !strcmp(old->version, x->st.version))) {
            if (old->skipped)
                note_skip(rep, rel, old->skip_error, false);
            else
                rep->unchanged++;
            continue;
        }
        if (dir) {
            bool created;
            struct err e2 = {0};
            r = store_mkdir(s, ws, rel, &created, &e2);
            if (name_error(r)) {
                note_skip(rep, rel, -r, true);
                if ((r = state_skip(st, rel, true, x->st.version, -r)) < 0)
                    goto out;
                continue;
            }
            if (r < 0) {
                *err = e2;
                goto out;
            }
            rep->dirs++;
        } else {
            _cleanup_close_ int fd = -EBADF;
            struct files_stat fs;
            struct err e2 = {0};
            r = fileops_open_read(sb->fo, rel, &fd, &fs, &e2);
            if (r == -ENOENT || r == -ENOTDIR || r == -EXDEV || r == -ELOOP || r == -EINVAL ||
                r == -EISDIR)
                continue; /* changed under us: the next mirror sees what it became */
            if (r == -EACCES || r == -EPERM) {
                /* The sandbox user may not read it (sandbox root made it
                 * so): the store keeps what it had; reported until it
                 * changes again. */
                note_skip(rep, rel, EACCES, !old || !old->skipped);
                if ((r = state_skip(st, rel, false, x->st.version, EACCES)) < 0)
                    goto out;
                continue;
            }
            if (r < 0) {
                (void)err_set(err, -r, "%s", e2.msg);
                goto out;
            }
            struct store_entry se;
            err_clear(&e2);
            r = store_write(s, ws, rel, fd, fs.mode, ig->max_file_bytes, NULL, &se, &e2);
            if (r == -EFBIG) {
                rep->ignored++; /* it grew past the cap while we read it */
                continue;
            }
            if (name_error(r)) {
                note_skip(rep, rel, -r, true);
                if ((r = state_skip(st, rel, false, x->st.version, -r)) < 0)
                    goto out;
                continue;
            }
            if (r < 0) {
                *err = e2;
                goto out;
            }
            rep->files++;
            rep->bytes += se.size;
        }
        r = state_set(st, rel, dir, x->st.version);
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    free(gone);
    files_tree_free(&t);
    rep->duration_us = now_usec() - t0;
    return r;
}
