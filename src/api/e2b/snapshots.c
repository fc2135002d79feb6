/*
 * snapshots.c - E2B snapshots: a sandbox's writable files kept on the
 * host, and new sandboxes made from them.
 *
 * The store itself (the layout in <state_dir>/snapshots/, info.json, the
 * worker that copies, removal, lookup) is snapshot/snapstore.c's; this file
 * freezes the sandbox being copied (cgroup freezer), so its processes
 * cannot change or swap paths under the copy, keeps the cold records,
 * lists with E2B's filters and pages, and restores into new sandboxes.
 *
 * A sandbox made from a snapshot gets an e2b_restore: api.c calls
 * e2b_restore_ready() (from e2b_create_ready()) once the sandbox is ready, the files
 * are copied in, and only then is the create answered.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/e2b/e2b-internal.h"
#include "sandbox/snapshot.h"
#include "sandbox/vfs.h"
#include "snapshot/snapstore.h"
#include "template/set.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

#define SNAP_LIST_MAX 100 /* snapshots per page */

struct e2b_snaps {
    struct snapstore *store; /* <state_dir>/snapshots */
    bool closing;
    struct list cold; /* struct e2b_cold */
};

/* What a->snaps points to once freed: nothing starts any more. */
static struct e2b_snaps closed = {.closing = true};

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
    s->store = snapstore_free(s->store); /* runs the pending done callbacks, which see closing */
    while (!list_empty(&s->cold)) {
        struct e2b_cold *c = list_entry(s->cold.next, struct e2b_cold, link);
        list_remove(&c->link);
        if (c->live)
            e2b_of(c->live)->cold = NULL;
        json_decref(c->meta);
        free(c);
    }
    free(s);
    a->snaps = &closed;
}

/* snapstore_emptier's fn (ud: the sandbox host), from the store's worker. */
static int
empty_tree(void *ud, int dirfd, struct err *err)
{
    return sandbox_host_tree_empty(ud, dirfd, err);
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
    struct e2b_snaps *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    list_init(&s->cold);
    int r = snapstore_open(a->loop, path, &s->store, err);
    if (r < 0) {
        free(s);
        return r;
    }
    /* Split, snapshot trees are the sandboxes' ids' to remove: the
     * privileged parent empties them. */
    const struct snapstore_emptier em = {.fn = empty_tree, .ud = a->sh};
    snapstore_set_emptier(s->store, &em);
    a->snaps = s;
    *ret = s;
    return 0;
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

int
e2b_snapshot_delete(struct api *a, const char *id)
{
    struct e2b_snaps *s;
    int r = snaps_get(a, &s, NULL);
    if (r < 0)
        return r;
    return snapstore_delete(s->store, id);
}

/* --- taking one --- */

struct e2b_snapjob {
    struct api *api;
    struct entry *e; /* NULL once it went */
    char id[SNAPSTORE_ID_MAX + 1];
    e2b_snap_fn then;
    void *ud;
    bool froze;
};

static void
snap_done(int r, const struct err *err, const char *id, const struct snapshot_stats *st, void *ud)
{
    struct e2b_snapjob *j = ud;
    struct api *a = j->api;
    bool closing = e2b_snaps_closing(a);

    (void)id;
    if (j->e) {
        struct e2b_sb *x = e2b_of(j->e);
        x->snap = NULL;
        if (j->froze && x->snapshotting)
            (void)sandbox_freeze(j->e->sb, false, NULL);
        x->snapshotting = false;
    }
    if (r == 0 && !closing)
        log_info("snapshot=%s stored: %llu bytes, %llu entries, %llu skipped", j->id,
                 (unsigned long long)st->bytes, (unsigned long long)st->entries,
                 (unsigned long long)st->skipped);
    j->then(a, r, err, j->id, closing, j->ud);
    free(j);
}

/* Why a sandbox without a view has none, as the status tells (404 or
 * 503, e2b_snap_status()): it is going, or its isolation gives it none. */
static int
view_errno(const struct entry *e)
{
    return sandbox_is_ready(e->sb) ? EOPNOTSUPP : ESRCH;
}

int
e2b_snapshot_take(struct api *a, struct entry *e, const char *name, bool hidden, e2b_snap_fn then,
                  void *ud, struct err *err)
{
    struct e2b_snaps *s;
    struct e2b_snapjob *j = NULL;
    struct fileops *fo = NULL;
    struct snap_spec spec = {.name = name, .sandbox_id = e->id, .hidden = hidden};
    int r;

    if ((r = snaps_get(a, &s, err)) < 0)
        return r;
    if (name && !snapstore_name_ok(name))
        return err_set(err, EINVAL,
                       "'name' must be 1 to %d characters of letters, digits and -_.:/",
                       SNAPSTORE_NAME_MAX);
    if (e2b_of(e)->snap)
        return err_set(err, EBUSY, "a snapshot of sandbox '%s' is already being taken", e->id);
    if (!sandbox_has_view(e->sb))
        return err_set(err, view_errno(e), "sandbox '%s' has no view of its files", e->id);
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->api = a;
    j->e = e;
    j->then = then;
    j->ud = ud;
    if ((r = sandbox_fileops(e->sb, true, &fo, err)) < 0)
        goto fail;
    /* Frozen while copied: nothing in it can change or swap paths. Without
     * a freezer (cgroup "none") the copy still only ever opens what it saw,
     * never follows a link. A paused sandbox is frozen already. */
    if (!e->paused && sandbox_freeze(e->sb, true, NULL) == 0) {
        j->froze = true;
        e2b_of(e)->snapshotting = true;
    }
    spec.template_id = e2b_template_id(e);
    spec.alias = e2b_of(e)->alias;
    if ((r = snapstore_take(s->store, fo, &spec, snap_done, j, j->id)) < 0) {
        if (j->froze) {
            (void)sandbox_freeze(e->sb, false, NULL);
            e2b_of(e)->snapshotting = false;
        }
        goto fail;
    }
    fileops_unref(fo);
    e2b_of(e)->snap = j;
    return 0;
fail:
    fileops_unref(fo);
    free(j);
    return err_set(err, -r, "cannot start the snapshot");
}

/* --- finding and listing --- */

int
e2b_snapshot_find(struct api *a, const char *id, struct e2b_snap_info *ret)
{
    struct e2b_snaps *s;
    struct snap_info info;
    if (snaps_get(a, &s, NULL) < 0)
        return -ENOENT;
    if (snapstore_find(s->store, id, &info) < 0)
        return -ENOENT;
    (void)snprintf(ret->id, sizeof(ret->id), "%s", info.id);
    (void)snprintf(ret->tmpl, sizeof(ret->tmpl), "%s", info.template_id);
    (void)snprintf(ret->alias, sizeof(ret->alias), "%s", info.alias);
    snap_info_done(&info);
    return 0;
}

/* Newest first, then by id. */
static int
cmp_key(const struct snap_info *x, long long ms, const char *id)
{
    long long ax = (long long)x->created_ms;
    if (ax != ms)
        return ax > ms ? -1 : 1;
    return strcmp(x->id, id);
}

static int
cmp_info(const void *pa, const void *pb)
{
    const struct snap_info *x = *(const struct snap_info *const *)pa;
    const struct snap_info *y = *(const struct snap_info *const *)pb;
    return cmp_key(x, (long long)y->created_ms, y->id);
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
    struct snap_info *all = NULL;
    size_t n_all = 0;
    (void)snapstore_list(s->store, &all, &n_all); /* on failure: an empty list */
    size_t n = 0, i;
    struct snap_info **sel = calloc(n_all + 1, sizeof(*sel));
    if (!sel) {
        snapstore_list_free(all, n_all);
        e2b_error(req, 500, "out of memory");
        return;
    }
    for (i = 0; i < n_all; i++) {
        struct snap_info *it = &all[i];
        if (it->hidden)
            continue;
        if (sbid && *sbid && strcmp(it->sandbox_id, sbid))
            continue;
        if (name && *name && !snap_info_has_name(it, name))
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
            snapstore_list_free(all, n_all);
            e2b_error(req, 400, "'nextToken' is not a token this server gave");
            return;
        }
        while (start < n && cmp_key(sel[start], ms, id) <= 0)
            start++;
    }
    json_t *arr = json_array();
    size_t end = start + limit < n ? start + limit : n;
    for (i = start; i < end; i++) {
        json_t *o = json_object();
        json_t *names = json_array();
        for (size_t k = 0; k < sel[i]->n_names; k++)
            (void)json_array_append_new(names, json_string(sel[i]->names[k]));
        (void)json_set(o, "snapshotID", json_string(sel[i]->id));
        (void)json_set(o, "names", names);
        (void)json_array_append_new(arr, o);
    }
    if (end < n) {
        char tok[96];
        (void)snprintf(tok, sizeof(tok), "%lld.%s", (long long)sel[end - 1]->created_ms,
                       sel[end - 1]->id);
        http_req_add_header(req, "X-Next-Token", tok);
    }
    free(sel);
    snapstore_list_free(all, n_all);
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
    int srcfd;          /* the snapshot's tree, until handed to the store */
    struct fileops *fo; /* as the new sandbox's root */
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
restore_done(int r, const struct err *err, void *ud)
{
    restore_finish(ud, r, err);
}

/* e2b_create_ready(): the sandbox is ready, its files are the template's. */
void
e2b_restore_ready(struct api *a, struct entry *e, struct http_req *req)
{
    struct e2b_restore *rs = e2b_of(e) ? e2b_of(e)->restore : NULL;
    struct e2b_snaps *s;
    struct err err = {0};
    int r;

    if (!rs) { /* cannot happen: attach set both */
        api_template_start(a, e, req, req ? e2b_create_answer(a, e) : NULL);
        return;
    }
    rs->req = req;
    rs->submitted = true;
    if ((r = snaps_get(a, &s, &err)) < 0)
        goto fail;
    if ((r = snapstore_open_root(s->store, rs->id, &rs->srcfd, &err)) < 0)
        goto fail;
    if (!sandbox_has_view(e->sb)) {
        r = err_set(&err, view_errno(e), "the new sandbox has no view of its files");
        goto fail;
    }
    if ((r = sandbox_fileops(e->sb, true, &rs->fo, &err)) < 0)
        goto fail;
    if ((r = snapstore_restore(s->store, TAKE_FD(rs->srcfd), rs->fo, restore_done, rs)) < 0)
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
