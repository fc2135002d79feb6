/*
 * e2b-internal.h - what the files of the E2B surface share.
 *
 * The E2B surface is an adapter: its sandboxes are ordinary entries of the
 * api's table (created by api_create()), its processes are the sandbox's
 * process table, its files go through the sandbox's view of its own root.
 * An entry made through E2B carries a struct e2b_sb with the envd access
 * token and the streams that must be cut when the sandbox goes.
 *
 * Wire facts: ../shared/specs/e2b-surface.md (the SDK 2.51 fact sheet).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api-internal.h"
#include "api/e2b/e2b.h"
#include "util/list.h"

#define E2B_ENVD_VERSION "0.6.4"
#define E2B_TOKEN_LEN    40                /* hex characters of an envd access token */
#define E2B_RPC_MAX      (4 * 1024 * 1024) /* bytes of one RPC request body */

struct e2b_sb {
    char token[E2B_TOKEN_LEN + 1]; /* envdAccessToken, for the sandbox's whole life */
    char alias[128];               /* the template name the caller asked for */
    bool snapshotting;             /* cgroup frozen while its files are copied */
    struct list streams;           /* struct e2b_stream: envd streams open on it */
    struct e2b_snapjob *snap;      /* the snapshot being taken of it, NULL = none */
    struct e2b_restore *restore;   /* the snapshot its files come from, until restored */
    struct e2b_cold *cold;         /* its E2B identity when resumed from a cold pause */
};

/* The E2B state of e (its ext slot), NULL for sandboxes made natively. */
static inline unsigned
e2b_slot(const struct entry *e)
{
    return ((const struct api *)table_owner(e->table))->e2b_slot;
}
static inline struct e2b_sb *
e2b_of(const struct entry *e)
{
    return e->ext[e2b_slot(e)];
}
/* sandbox-json.c: the template e runs, by name ("base" for none). */
const char *e2b_template_id(const struct entry *e);
/* sandboxes.c: cuts e's envd streams (also when it is paused); when e is dying, it is
 * no longer frozen (the kill thaws it). */
void e2b_entry_dying(struct entry *e);
/* api_create_req.ready of every E2B create: answers req with the Sandbox
 * (e2b_create_answer()) once ready, restoring a snapshot's files first
 * when the create attached one; 500 when the create failed. */
void e2b_create_ready(struct api *a, struct entry *e, int r, const struct err *err,
                      struct http_req *req);
/* sandbox-json.c: the Sandbox object create, connect and fork answer with. */
json_t *e2b_create_answer(struct api *a, struct entry *e);

/* A sandbox paused without memory ({"memory": false}): its files are a
 * hidden snapshot, its processes and jail are gone. It keeps its E2B id,
 * token and metadata; resume (connect) makes a new sandbox (a new internal
 * id, live) from the snapshot and answers for it under id. The record goes
 * with the last sandbox that ran as it, or when it is killed paused. */
struct e2b_cold {
    struct list link;
    char id[API_ID_LEN + 1]; /* the E2B sandboxID, for its whole life */
    char token[E2B_TOKEN_LEN + 1];
    char alias[128];
    const struct template *t;
    const struct api_scope *scope;
    json_t *meta;
    uint64_t created_wall_ms, timeout_s;
    struct sandbox_limits lim;
    char snap[64];      /* its files while paused, "" while it runs */
    struct entry *live; /* the sandbox it runs as, NULL while paused */
    bool resuming;
};
/* The records, kept with the snapshot store (NULL before its first use). */
struct list *e2b_cold_list(struct api *a);
/* The E2B id of e (its cold record's when it has one). */
static inline const char *
e2b_public_id(const struct entry *e)
{
    return e2b_of(e) && e2b_of(e)->cold ? e2b_of(e)->cold->id : e->id;
}
/* The entry an E2B id names, not dying (a resumed sandbox by its E2B id);
 * NULL when none, also when it is paused without memory. */
struct entry *e2b_lookup(struct api *a, const char *id);

/* An open envd stream (process output, watch) of a sandbox: cut when the
 * sandbox is killed or paused (the SDK then probes /health). */
struct e2b_stream {
    struct list link;
    void (*cut)(struct e2b_stream *s);
};

/* snapshots.c: file-system snapshots (sandbox/snapshot.h) stored in
 * <state_dir>/snapshots/<id>/{info.json,root/}, copied on a worker thread.
 * A sandbox is frozen while it is copied. */
#define E2B_FORK_MAX 10 /* sandboxes one fork may create */
struct e2b_snap_info {
    char id[64];
    char tmpl[128];  /* the template the snapshotted sandbox ran */
    char alias[128]; /* what it was created as */
};
/* Takes a snapshot of e; then(a, r, err, snap_id, ud) runs on the loop when
 * it is stored (r = 0) or failed (-EFBIG / -E2BIG over the limits), also
 * when e went meanwhile; closing is set when abxd is shutting down (free
 * ud, answer nothing). name may be NULL. hidden: kept out of lists. */
typedef void (*e2b_snap_fn)(struct api *a, int r, const struct err *err, const char *snap_id,
                            bool closing, void *ud);
int e2b_snapshot_take(struct api *a, struct entry *e, const char *name, bool hidden,
                      e2b_snap_fn then, void *ud, struct err *err);
/* The snapshot named id (or, failing that, the newest one named so). */
int e2b_snapshot_find(struct api *a, const char *id, struct e2b_snap_info *ret);
/* Removes snapshot id (the rest happens on the worker). -ENOENT. */
int e2b_snapshot_delete(struct api *a, const char *id);
void e2b_snapshot_list(struct api *a, struct http_req *req);
/* Makes the entry e, created with api_create() and not ready yet, get the
 * files of snapshot snap_id before it is answered: req (at ready) is then
 * answered by the restore; with report set, report(a, e or NULL, r, err,
 * ud) is called instead (fork), exactly once. */
typedef void (*e2b_restored_fn)(struct api *a, struct entry *e, int r, const struct err *err,
                                void *ud);
int e2b_restore_attach(struct api *a, struct entry *e, const char *snap_id, e2b_restored_fn report,
                       void *ud);
/* From e2b_create_ready(): e, with a restore attached, is ready; takes over req. */
void e2b_restore_ready(struct api *a, struct entry *e, struct http_req *req);
/* Whether api_free() stopped the snapshot worker: answer nothing more. */
bool e2b_snaps_closing(const struct api *a);
/* e2b_entry_free(): e goes; its snapshot or restore carries on without it. */
void e2b_snapshots_entry_gone(struct entry *e);

/* platform-list.c: a listing's ?metadata= filter: "k=v&k2=v2", each side
 * form-decoded and then percent-decoded once more (as E2B's SDKs send it).
 * keys[i] and vals[i] point into buf. -EINVAL with err when too long, past
 * 32 pairs or a pair has no '='. */
struct e2b_meta_filter {
    char buf[2048];
    const char *keys[32], *vals[32];
    size_t n;
};
int e2b_meta_filter_parse(struct e2b_meta_filter *m, const char *v, struct err *err);

/* platform-list.c: the order and pages of a listing. A row is a live
 * entry or a sandbox paused without memory (c). */
#define E2B_LIST_MAX       100 /* rows of a page, and its default */
#define E2B_PAGE_TOKEN_MAX 48  /* bytes of an X-Next-Token, with the NUL */
struct e2b_item {
    uint64_t created; /* wall ms */
    const char *id;   /* the E2B id */
    struct entry *e;
    struct e2b_cold *c;
};
struct e2b_page {
    uint64_t limit;
    bool asc;
    bool after; /* a nextToken: start after (after_ms, after_id) */
    uint64_t after_ms;
    char after_id[API_ID_LEN + 1];
};
/* The query's limit, order and nextToken (each NULL when absent); -EINVAL
 * with err saying which is bad. */
int e2b_page_decode(const char *limit, const char *order, const char *token, struct e2b_page *p,
                    struct err *err);
/* A listing's filter from the query (each NULL when absent): state
 * ("running", "paused" or both; absent = both), startedAfter (RFC 3339),
 * template, metadata. -EINVAL with err saying which is bad. */
struct e2b_filter {
    struct e2b_meta_filter meta;
    bool running, paused;
    uint64_t started_after; /* wall ms */
    const char *tmpl;       /* borrowed from the query; NULL or "" = any */
};
int e2b_filter_decode(const char *state, const char *started_after, const char *tmpl,
                      const char *metadata, struct e2b_filter *f, struct err *err);
/* Whether row it is listed: live and ready (or paused without memory),
 * the caller's when scope is a scoped key, and as f asks. */
struct template_set;
bool e2b_filter_matches(const struct template_set *ts, const struct e2b_item *it,
                        const struct e2b_filter *f, const struct api_scope *scope);
/* Sorts all (n rows) and gives the page's rows [*ret_start, *ret_end). */
void e2b_page_cut(struct e2b_item *all, size_t n, const struct e2b_page *p, size_t *ret_start,
                  size_t *ret_end);
/* The X-Next-Token that continues after last, into buf of n bytes. */
void e2b_page_token(const struct e2b_item *last, char *buf, size_t n);

/* platform.c: the platform REST API (X-API-KEY). */
void e2b_platform(struct api *a, struct http_req *req, const char *path);
/* The rest of this block is sandboxes.c's. */
#define E2B_DEFAULT_TIMEOUT_S 300
#define E2B_V1_TIMEOUT_S      15
/* A platform request waiting for its body. */
struct e2b_preq {
    struct api *api;
    const struct api_scope *scope;
    char id[API_ID_LEN + 8];
    bool v1;
};
/* The entry the caller may see: live, and created with its key when that
 * is a scoped key (the full key sees every sandbox); else answers 404
 * (when req is not NULL) and returns NULL. */
struct entry *e2b_find(struct api *a, struct http_req *req, const char *id,
                       const struct api_scope *scope);
/* The cold record id names while paused (NULL when none or running). */
struct e2b_cold *e2b_find_cold(struct api *a, const char *id, const struct api_scope *scope);
/* "timeout" of a body (seconds, at most max_s when max_s): 1 and *ret, 0
 * absent, -EINVAL. */
int e2b_read_timeout(json_t *j, uint64_t max_s, uint64_t *ret, struct err *err);

/* lifecycle.c: the bodies of POST /sandboxes/{id}/connect, /pause,
 * /snapshots and /fork (a struct e2b_preq is the request's userdata). */
void e2b_connect_done(struct http_req *req, const char *body, size_t len);
void e2b_pause_done(struct http_req *req, const char *body, size_t len);
void e2b_snapshot_done(struct http_req *req, const char *body, size_t len);
void e2b_fork_done(struct http_req *req, const char *body, size_t len);
/* lifecycle.c: forgets a sandbox paused without memory, and its files. */
void e2b_cold_drop(struct api *a, struct e2b_cold *c);

/* envd.c: envd requests for the sandbox named by E2b-Sandbox-Id, and
 * signed /files URLs. */
void e2b_envd(struct api *a, struct http_req *req, const char *path);
/* sandboxes.c: e's streams cut when it goes. */
void e2b_stream_attach(struct entry *e, struct e2b_stream *s);
void e2b_stream_detach(struct e2b_stream *s);

/* errors.c: {"code": status, "message": ...} as the E2B SDK reads the
 * platform API's errors (it branches on the body's code); the object, and
 * the answer. */
json_t *e2b_error_json(unsigned status, const char *msg);
void e2b_error(struct http_req *req, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* errors.c: r (-errno) as the platform API's status; err's message when it has one. */
void e2b_fail(struct http_req *req, int r, const struct err *err);
/* errors.c: r (-errno) of a snapshot, restore or fork as a status, and
 * the answer. */
unsigned e2b_snap_status(int r);
void e2b_snap_fail(struct http_req *req, int r, const struct err *err);
/* errors.c: envd's 502 for a sandbox that is gone or paused (the SDK's
 * health probe reads it as the sandbox's end). */
void e2b_gone(struct http_req *req, const char *id);

/* Connect RPC answers (errors.c). code is a Connect code name. */
void e2b_rpc_error(struct http_req *req, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void e2b_rpc_ok(struct http_req *req, json_t *msg); /* steals msg; NULL = {} */
/* A stream's error before anything was sent: HTTP 200 and one end-stream
 * frame (the SDK reads stream errors only there). */
void e2b_stream_error(struct http_req *req, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
const char *e2b_code_for_errno(int neg_errno);

/* Who an envd request acts as. */
struct e2b_user {
    bool root;
    const char *name; /* "user" or "root" */
    const char *home; /* "/home/user" or "/root" */
};

/* sandboxes.c: the user called name ("user" or "root"; NULL or "" =
 * "user"): -ENOENT for any other. */
int e2b_user_named(const char *name, struct e2b_user *ret);

/* The context of one envd RPC: its sandbox and user. */
struct e2b_call {
    struct api *api;
    char id[API_ID_LEN + 1];
    struct e2b_user user;
    uint64_t timeout_ms;   /* Connect-Timeout-Ms, 0 = none */
    uint64_t keepalive_ms; /* Keepalive-Ping-Interval, 0 = none */
};

/* sandboxes.c: the live entry of call c (NULL when it is gone). */
struct entry *e2b_call_entry(const struct e2b_call *c);

/* process.c: process.Process/<method>. body is the request message
 * (JSON) for unary methods and the first envelope's payload for streams. */
void e2b_process(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg);
bool e2b_process_is_stream(const char *method);
/* process.c: process.Process/StreamInput, a client stream (start
 * {process}, then data {input} and keepalive messages) read as it comes. */
void e2b_stream_input(struct http_req *req, const struct e2b_call *c);

/* files.c: filesystem.Filesystem/<method> (envd.c sends WatchDir and the
 * watchers to watch.c) and /files. */
void e2b_filesystem(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg);
bool e2b_filesystem_is_stream(const char *method);
/* watch.c: filesystem.Filesystem/WatchDir (a server stream). */
void e2b_watch(struct http_req *req, struct e2b_call *c, json_t *msg);
/* watch.c: CreateWatcher / GetWatcherEvents / RemoveWatcher, envd's
 * polled watchers (unary), kept in the sandbox's stream list. */
void e2b_watcher(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg);
/* files.c: an EntryInfo of the vfs entry (also for watch events). */
struct vfs_entry;
json_t *e2b_entry_json(const struct vfs_entry *v);

/* /files for sandbox e; tok is the X-Access-Token header (NULL = absent:
 * then a signature must authorize it). */
void e2b_files(struct api *a, struct http_req *req, struct entry *e, const char *tok);
/* /files without a sandbox id: a signed URL, routed by its signature. */
void e2b_files_signed(struct api *a, struct http_req *req);
