/*
 * e2b-snapshots.c - E2B snapshots: a sandbox's writable files kept on the
 * host, and new sandboxes made from them.
 *
 * A snapshot is files only, never memory or processes (sandbox/snapshot.h
 * says which directories and what is kept). It lives in
 * <state_dir>/snapshots/<id>/: info.json (id, names, the sandbox and
 * template it came from, when, how big) and root/ (the tree). It is made in
 * .tmp-<id> and renamed into place when complete; a delete renames it to
 * .del-<id> and removes it on the worker. Copies in both directions run on
 * one worker thread (workq), so abxd's loop never waits for them; the
 * sandbox being copied is frozen (cgroup freezer) meanwhile, so its
 * processes cannot change or swap paths under the copy.
 *
 * A sandbox made from a snapshot gets an e2b_restore: api.c calls
 * e2b_restore_ready() (from e2b_create_ready()) once the sandbox is ready, the files
 * are copied in, and only then is the create answered.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/e2b/e2b-internal.h"
#include "sandbox/snapshot.h"
#include "sandbox/vfs.h"
#include "template/set.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rand.h"
#include "util/timeutil.h"
#include "util/workq.h"

#define SNAP_LIST_MAX 100  /* snapshots per page */
#define SNAP_SCAN_MAX 4096 /* snapshots a listing reads */
#define SNAP_INFO_MAX 8192 /* bytes of one info.json */
#define SNAP_NAME_MAX 128

struct e2b_snaps {
    struct workq *wq;
    int dirfd; /* <state_dir>/snapshots */
    bool closing;
    struct list cold; /* struct e2b_cold */
};

/* What a->snaps points to once freed: nothing starts any more. */
static struct e2b_snaps closed = {.dirfd = -EBADF, .closing = true};

bool
e2b_snaps_closing(const struct api *a)
{
    return a->snaps && a->snaps->closing;
}

void
e2b_snaps_free(struct api *a)
{
    struct e2b_snaps *s = a->snaps;
    if (!s || s == &closed)
        return;
    s->closing = true;
    workq_free(s->wq); /* runs the pending done callbacks, which see closing */
    while (!list_empty(&s->cold)) {
        struct e2b_cold *c = list_entry(s->cold.next, struct e2b_cold, link);
        list_remove(&c->link);
        if (c->live)
            e2b_of(c->live)->cold = NULL;
        json_decref(c->meta);
        free(c);
    }
    if (s->dirfd >= 0)
        (void)close(s->dirfd);
    free(s);
    a->snaps = &closed;
}

static void remove_later(struct e2b_snaps *s, const char *name);
static json_t *read_info(struct e2b_snaps *s, const char *id);

/* What an earlier abxd left: half-made and half-deleted snapshots, and
 * hidden ones (a fork's, a pause's) whose sandboxes died with it. */
static void
sweep(struct e2b_snaps *s)
{
    int fd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    if (!d) {
        if (fd >= 0)
            (void)close(fd);
        return;
    }
    while ((de = readdir(d))) {
        bool stale = !strncmp(de->d_name, ".tmp-", 5) || !strncmp(de->d_name, ".del-", 5);
        if (!stale && de->d_name[0] != '.') {
            json_t *info = read_info(s, de->d_name);
            stale = info && json_is_true(json_object_get(info, "hidden"));
            json_decref(info);
        }
        if (stale)
            remove_later(s, de->d_name);
    }
    (void)closedir(d);
}

static int
snaps_get(struct api *a, struct e2b_snaps **ret, struct err *err)
{
    char path[4200];
    if (a->snaps) {
        if (a->snaps->closing)
            return err_set(err, ESHUTDOWN, "abxd is shutting down");
        *ret = a->snaps;
        return 0;
    }
    if (!a->cfg.state_dir || !*a->cfg.state_dir)
        return err_set(err, EOPNOTSUPP, "snapshots need a state directory");
    (void)snprintf(path, sizeof(path), "%s/snapshots", a->cfg.state_dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return err_set(err, errno, "cannot create '%s'", path);
    struct e2b_snaps *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    list_init(&s->cold);
    s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s->dirfd < 0) {
        int r = err_set(err, errno, "cannot open '%s'", path);
        free(s);
        return r;
    }
    int r = workq_new(a->loop, 1, &s->wq);
    if (r < 0) {
        (void)close(s->dirfd);
        free(s);
        return err_set(err, -r, "cannot start the snapshot worker");
    }
    a->snaps = s;
    *ret = s;
    sweep(s);
    return 0;
}

static bool
valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 63 || id[0] == '.')
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

static bool
valid_name(const char *n)
{
    size_t l = strlen(n);
    if (l == 0 || l > SNAP_NAME_MAX)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("-_.:/", *p)))
            return false;
    return true;
}

/* info.json of snapshot id; NULL when missing or unreadable. */
static json_t *
read_info(struct e2b_snaps *s, const char *id)
{
    char path[128];
    struct buf b;
    json_t *j = NULL;
    (void)snprintf(path, sizeof(path), "%s/info.json", id);
    buf_init(&b, SNAP_INFO_MAX);
    if (read_file_at(s->dirfd, path, SNAP_INFO_MAX, &b) >= 0 &&
        json_parse(b.data, b.len, &j, NULL) >= 0 && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    buf_done(&b);
    return j;
}

static const char *
jstr(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

struct list *
e2b_cold_list(struct api *a)
{
    struct e2b_snaps *s;
    return snaps_get(a, &s, NULL) < 0 ? NULL : &s->cold;
}

struct entry *
e2b_lookup(struct api *a, const char *id)
{
    struct entry *e = table_find(a->table, id);
    if (e && e->state != E_DYING)
        return e;
    if (!a->snaps || a->snaps->closing)
        return NULL;
    list_foreach (l, &a->snaps->cold) {
        struct e2b_cold *c = list_entry(l, struct e2b_cold, link);
        if (!strcmp(c->id, id))
            return c->live;
    }
    return NULL;
}

/* --- removal --- */

struct rmjob {
    int dirfd;
    char name[96];
};

static void
rm_work(void *ud)
{
    struct rmjob *j = ud;
    (void)rm_rf_at(j->dirfd, j->name);
}

static void
rm_done(void *ud)
{
    struct rmjob *j = ud;
    (void)close(j->dirfd);
    free(j);
}

/* Removes dirfd/name (ours) on the worker. */
static void
remove_later(struct e2b_snaps *s, const char *name)
{
    struct rmjob *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->dirfd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    (void)snprintf(j->name, sizeof(j->name), "%s", name);
    if (j->dirfd < 0 || workq_submit(s->wq, rm_work, rm_done, j) < 0) {
        if (j->dirfd >= 0)
            (void)close(j->dirfd);
        free(j);
    }
}

int
e2b_snapshot_delete(struct api *a, const char *id)
{
    struct e2b_snaps *s;
    char del[96], tail[16];
    int r = snaps_get(a, &s, NULL);
    if (r < 0)
        return r;
    if (!valid_id(id))
        return -ENOENT;
    json_t *info = read_info(s, id);
    if (!info)
        return -ENOENT;
    json_decref(info);
    if ((r = rand_id(tail, 8)) < 0)
        return r;
    (void)snprintf(del, sizeof(del), ".del-%s-%s", id, tail);
    if (renameat(s->dirfd, id, s->dirfd, del) < 0)
        return -errno;
    remove_later(s, del);
    return 0;
}

/* --- taking one --- */

struct e2b_snapjob {
    struct api *api;
    struct entry *e; /* NULL once it went */
    char id[64];
    e2b_snap_fn then;
    void *ud;
    bool froze;
    /* the worker's */
    int dirfd;
    struct fileops *fo; /* as the sandbox's root */
    json_t *info;
    int r;
    struct err err;
    struct snapshot_stats st;
};

static void
snap_work(void *ud)
{
    struct e2b_snapjob *j = ud;
    char tmp[96];
    _cleanup_close_ int t = -EBADF, root = -EBADF;
    char *text = NULL;

    (void)snprintf(tmp, sizeof(tmp), ".tmp-%s", j->id);
    if (mkdirat(j->dirfd, tmp, 0700) < 0 ||
        (t = openat(j->dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        mkdirat(t, "root", 0700) < 0 ||
        (root = openat(t, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        j->r = err_set(&j->err, errno, "cannot create the snapshot directory");
        goto out;
    }
    j->r = fileops_snapshot_out(j->fo, root, SNAPSHOT_MAX_BYTES, &j->st, &j->err);
    if (j->r < 0)
        goto out;
    (void)json_set(j->info, "bytes", json_integer((json_int_t)j->st.bytes));
    (void)json_set(j->info, "entries", json_integer((json_int_t)j->st.entries));
    text = json_dumps(j->info, JSON_COMPACT);
    if (!text) {
        j->r = -ENOMEM;
        goto out;
    }
    if ((j->r = write_file_at(t, "info.json", text, 0600)) < 0) {
        (void)err_set(&j->err, -j->r, "cannot write info.json");
        goto out;
    }
    if (renameat(j->dirfd, tmp, j->dirfd, j->id) < 0)
        j->r = err_set(&j->err, errno, "cannot put the snapshot in place");
out:
    free(text);
    if (j->r < 0)
        (void)rm_rf_at(j->dirfd, tmp);
}

static void
snap_done(void *ud)
{
    struct e2b_snapjob *j = ud;
    struct api *a = j->api;
    bool closing = e2b_snaps_closing(a);

    if (j->e) {
        struct e2b_sb *x = e2b_of(j->e);
        x->snap = NULL;
        if (j->froze && x->snapshotting)
            (void)sandbox_freeze(j->e->sb, false, NULL);
        x->snapshotting = false;
    }
    if (j->r == 0 && !closing)
        log_info("snapshot=%s stored: %llu bytes, %llu entries, %llu skipped", j->id,
                 (unsigned long long)j->st.bytes, (unsigned long long)j->st.entries,
                 (unsigned long long)j->st.skipped);
    j->then(a, j->r, &j->err, j->id, closing, j->ud);
    (void)close(j->dirfd);
    fileops_unref(j->fo);
    json_decref(j->info);
    free(j);
}

int
e2b_snapshot_take(struct api *a, struct entry *e, const char *name, bool hidden, e2b_snap_fn then,
                  void *ud, struct err *err)
{
    struct e2b_snaps *s;
    struct e2b_snapjob *j = NULL;
    json_t *names = NULL;
    char rid[17];
    int r, view;

    if ((r = snaps_get(a, &s, err)) < 0)
        return r;
    if (name && !valid_name(name))
        return err_set(err, EINVAL,
                       "'name' must be 1 to %d characters of letters, digits and -_.:/",
                       SNAP_NAME_MAX);
    if (e2b_of(e)->snap)
        return err_set(err, EBUSY, "a snapshot of sandbox '%s' is already being taken", e->id);
    view = sandbox_view_fd(e->sb);
    if (view < 0)
        return err_set(err, -view, "sandbox '%s' has no view of its files", e->id);
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->dirfd = -EBADF;
    if ((r = rand_id(rid, 16)) < 0)
        goto fail;
    (void)snprintf(j->id, sizeof(j->id), "snap-%s", rid);
    j->api = a;
    j->e = e;
    j->then = then;
    j->ud = ud;
    if ((r = sandbox_fileops(e->sb, true, &j->fo, err)) < 0)
        goto fail;
    j->dirfd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    j->info = json_object();
    names = json_array();
    if (j->dirfd < 0 || !j->info || !names) {
        json_decref(names);
        r = j->dirfd < 0 ? -errno : -ENOMEM;
        goto fail;
    }
    if (name)
        (void)json_array_append_new(names, json_string(name));
    (void)json_set(j->info, "snapshotID", json_string(j->id));
    (void)json_set(j->info, "names", names);
    (void)json_set(j->info, "sandboxID", json_string(e->id));
    (void)json_set(j->info, "templateID", json_string(e->tmpl ? e->tmpl->name : "base"));
    (void)json_set(j->info, "alias", json_string(e2b_of(e)->alias));
    (void)json_set(j->info, "createdAt", json_integer((json_int_t)wall_msec()));
    (void)json_set(j->info, "hidden", json_boolean(hidden));
    /* Frozen while copied: nothing in it can change or swap paths. Without
     * a freezer (cgroup "none") the copy still only ever opens what it saw,
     * never follows a link. A paused sandbox is frozen already. */
    if (!e->paused && sandbox_freeze(e->sb, true, NULL) == 0) {
        j->froze = true;
        e2b_of(e)->snapshotting = true;
    }
    if ((r = workq_submit(s->wq, snap_work, snap_done, j)) < 0) {
        if (j->froze) {
            (void)sandbox_freeze(e->sb, false, NULL);
            e2b_of(e)->snapshotting = false;
        }
        goto fail;
    }
    e2b_of(e)->snap = j;
    return 0;
fail:
    if (j->dirfd >= 0)
        (void)close(j->dirfd);
    fileops_unref(j->fo);
    json_decref(j->info);
    free(j);
    return err_set(err, -r, "cannot start the snapshot");
}

/* --- finding and listing --- */

static bool
has_name(json_t *info, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(info, "names"), i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), name))
            return true;
    return false;
}

/* Every stored snapshot's info (hidden ones too), at most SNAP_SCAN_MAX. */
static json_t *
scan(struct e2b_snaps *s)
{
    json_t *all = json_array();
    int fd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            (void)close(fd);
        return all;
    }
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d)) && json_array_size(all) < SNAP_SCAN_MAX) {
        if (!valid_id(de->d_name))
            continue;
        json_t *info = read_info(s, de->d_name);
        if (info && !strcmp(jstr(info, "snapshotID"), de->d_name))
            (void)json_array_append_new(all, info);
        else
            json_decref(info);
    }
    (void)closedir(d);
    return all;
}

int
e2b_snapshot_find(struct api *a, const char *id, struct e2b_snap_info *ret)
{
    struct e2b_snaps *s;
    json_t *info = NULL;
    if (snaps_get(a, &s, NULL) < 0)
        return -ENOENT;
    if (valid_id(id))
        info = read_info(s, id);
    if (!info && valid_name(id)) {
        json_t *all = scan(s);
        size_t i;
        json_t *v;
        json_int_t best = -1;
        json_array_foreach (all, i, v) {
            json_int_t at = json_integer_value(json_object_get(v, "createdAt"));
            if (has_name(v, id) && at > best) {
                json_decref(info);
                info = json_incref(v);
                best = at;
            }
        }
        json_decref(all);
    }
    if (!info)
        return -ENOENT;
    (void)snprintf(ret->id, sizeof(ret->id), "%s", jstr(info, "snapshotID"));
    (void)snprintf(ret->tmpl, sizeof(ret->tmpl), "%s", jstr(info, "templateID"));
    (void)snprintf(ret->alias, sizeof(ret->alias), "%s", jstr(info, "alias"));
    json_decref(info);
    return 0;
}

static int
cmp_info(const void *pa, const void *pb)
{
    json_t *x = *(json_t *const *)pa, *y = *(json_t *const *)pb;
    json_int_t ax = json_integer_value(json_object_get(x, "createdAt"));
    json_int_t ay = json_integer_value(json_object_get(y, "createdAt"));
    if (ax != ay)
        return ax > ay ? -1 : 1; /* newest first */
    return strcmp(jstr(x, "snapshotID"), jstr(y, "snapshotID"));
}

void
e2b_snapshot_list(struct api *a, struct http_req *req)
{
    struct e2b_snaps *s;
    struct err err = {0};
    const char *sbid = http_req_query(req, "sandboxID");
    const char *name = http_req_query(req, "name");
    const char *v;
    uint64_t limit = SNAP_LIST_MAX;
    int r;

    if ((v = http_req_query(req, "limit")) && *v) {
        char *end;
        unsigned long long l = strtoull(v, &end, 10);
        if (*end || l < 1 || l > SNAP_LIST_MAX) {
            e2b_error(req, 400, "'limit' must be between 1 and %d", SNAP_LIST_MAX);
            return;
        }
        limit = l;
    }
    if ((r = snaps_get(a, &s, &err)) < 0) {
        api_json(req, 200, json_array());
        return;
    }
    json_t *all = scan(s);
    size_t n = 0, i;
    json_t *it;
    json_t **sel = calloc(json_array_size(all) + 1, sizeof(*sel));
    if (!sel) {
        json_decref(all);
        e2b_error(req, 500, "out of memory");
        return;
    }
    json_array_foreach (all, i, it) {
        if (json_is_true(json_object_get(it, "hidden")))
            continue;
        if (sbid && *sbid && strcmp(jstr(it, "sandboxID"), sbid))
            continue;
        if (name && *name && !has_name(it, name))
            continue;
        sel[n++] = it;
    }
    qsort(sel, n, sizeof(*sel), cmp_info);
    size_t start = 0;
    /* The token is the last item sent, "<created ms>.<id>". */
    if ((v = http_req_query(req, "nextToken")) && *v) {
        long long ms;
        char id[64];
        if (sscanf(v, "%lld.%63[a-z0-9-]", &ms, id) != 2) {
            free(sel);
            json_decref(all);
            e2b_error(req, 400, "'nextToken' is not a token this server gave");
            return;
        }
        json_t *key = json_object();
        (void)json_set(key, "createdAt", json_integer(ms));
        (void)json_set(key, "snapshotID", json_string(id));
        while (start < n && cmp_info(&sel[start], &key) <= 0)
            start++;
        json_decref(key);
    }
    json_t *arr = json_array();
    size_t end = start + limit < n ? start + limit : n;
    for (i = start; i < end; i++) {
        json_t *o = json_object();
        (void)json_set(o, "snapshotID", json_string(jstr(sel[i], "snapshotID")));
        json_t *names = json_object_get(sel[i], "names");
        (void)json_set(o, "names", json_is_array(names) ? json_incref(names) : json_array());
        (void)json_array_append_new(arr, o);
    }
    if (end < n) {
        char tok[96];
        (void)snprintf(tok, sizeof(tok), "%lld.%s",
                       (long long)json_integer_value(json_object_get(sel[end - 1], "createdAt")),
                       jstr(sel[end - 1], "snapshotID"));
        http_req_add_header(req, "X-Next-Token", tok);
    }
    free(sel);
    json_decref(all);
    api_json(req, 200, arr);
}

/* --- restoring --- */

struct e2b_restore {
    struct api *api;
    struct entry *e; /* NULL once it went */
    char id[64];     /* the snapshot */
    e2b_restored_fn report;
    void *ud;
    struct http_req *req;
    bool submitted;
    /* the worker's */
    int srcfd;
    struct fileops *fo; /* as the new sandbox's root */
    int r;
    struct err err;
};

static void
restore_free(struct e2b_restore *rs)
{
    if (rs->srcfd >= 0)
        (void)close(rs->srcfd);
    fileops_unref(rs->fo);
    if (rs->req)
        http_req_unref(rs->req);
    free(rs);
}

/* The end of a restore: answers or reports, exactly once. */
static void
restore_finish(struct e2b_restore *rs, int r, const struct err *err)
{
    struct api *a = rs->api;
    struct entry *e = rs->e;
    bool closing = e2b_snaps_closing(a);

    if (e) {
        e2b_of(e)->restore = NULL;
        rs->e = NULL;
    }
    if (r == 0 && (!e || e->state != E_READY)) {
        r = err_set(&rs->err, ESRCH, "the sandbox went while its files were restored");
        err = &rs->err;
    }
    if (closing) {
        if (rs->report)
            rs->report(a, NULL, -ESHUTDOWN, NULL, rs->ud);
        restore_free(rs);
        return;
    }
    if (r < 0) {
        log_warn("snapshot=%s could not be restored into sandbox=%s: %s", rs->id, e ? e->id : "?",
                 err && err->msg[0] ? err->msg : strerror(-r));
        if (rs->req)
            e2b_error(rs->req, r == -ENOENT ? 404 : 500, "cannot restore snapshot '%s': %s", rs->id,
                      err && err->msg[0] ? err->msg : strerror(-r));
        if (rs->report)
            rs->report(a, NULL, r, err, rs->ud);
        if (e && e->state != E_DYING)
            table_kill(e);
        restore_free(rs);
        return;
    }
    log_info("sandbox=%s has the files of snapshot=%s", e->id, rs->id);
    if (rs->report)
        rs->report(a, e, 0, NULL, rs->ud);
    struct http_req *req = TAKE_PTR(rs->req);
    api_template_start(a, e, req, req ? e2b_create_answer(a, e) : NULL);
    restore_free(rs);
}

static void
restore_work(void *ud)
{
    struct e2b_restore *rs = ud;
    rs->r = fileops_snapshot_in(rs->fo, rs->srcfd, &rs->err);
}

static void
restore_done(void *ud)
{
    struct e2b_restore *rs = ud;
    restore_finish(rs, rs->r, &rs->err);
}

/* e2b_create_ready(): the sandbox is ready, its files are the template's. */
void
e2b_restore_ready(struct api *a, struct entry *e, struct http_req *req)
{
    struct e2b_restore *rs = e2b_of(e) ? e2b_of(e)->restore : NULL;
    struct e2b_snaps *s;
    struct err err = {0};
    char path[96];
    int r, view;

    if (!rs) { /* cannot happen: attach set both */
        api_template_start(a, e, req, req ? e2b_create_answer(a, e) : NULL);
        return;
    }
    rs->req = req;
    rs->submitted = true;
    if ((r = snaps_get(a, &s, &err)) < 0)
        goto fail;
    (void)snprintf(path, sizeof(path), "%s/root", rs->id);
    rs->srcfd = openat(s->dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rs->srcfd < 0) {
        r = err_set(&err, errno == ENOENT ? ENOENT : errno, "snapshot '%s' is gone", rs->id);
        goto fail;
    }
    view = sandbox_view_fd(e->sb);
    if (view < 0) {
        r = err_set(&err, -view, "the new sandbox has no view of its files");
        goto fail;
    }
    if ((r = sandbox_fileops(e->sb, true, &rs->fo, &err)) < 0)
        goto fail;
    if ((r = workq_submit(s->wq, restore_work, restore_done, rs)) < 0)
        goto fail;
    return;
fail:
    restore_finish(rs, r, &err);
}

int
e2b_restore_attach(struct api *a, struct entry *e, const char *snap_id, e2b_restored_fn report,
                   void *ud)
{
    struct e2b_restore *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    rs->api = a;
    rs->e = e;
    rs->srcfd = -EBADF;
    rs->report = report;
    rs->ud = ud;
    (void)snprintf(rs->id, sizeof(rs->id), "%s", snap_id);
    e2b_of(e)->restore = rs;
    return 0;
}

/* From e2b_entry_free(): e goes. */
void
e2b_snapshots_entry_gone(struct entry *e)
{
    struct e2b_sb *x = e2b_of(e);
    if (x->snap) {
        x->snap->e = NULL;
        x->snap = NULL;
    }
    if (x->restore) {
        struct e2b_restore *rs = x->restore;
        x->restore = NULL;
        rs->e = NULL;
        if (!rs->submitted) {
            /* It never became ready: on_ready answered its request. */
            if (rs->report)
                rs->report(rs->api, NULL, -ECANCELED, NULL, rs->ud);
            restore_free(rs);
        }
    }
}
