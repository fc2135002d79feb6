/*
 * workspace.h - durable workspaces whose sandboxes come and go.
 *
 * A workspace is a named file tree in the store. While it has a live
 * sandbox ("warm"), the sandbox is the truth and the store is a snapshot
 * kept fresh by mirroring; otherwise ("cold") the store is the truth. Only
 * something that needs a process (exec) wakes a workspace: create its
 * sandbox with the workspace's resources, then restore the snapshot into
 * it. File operations go to the sandbox when warm and to the store when
 * cold - a cold file operation never creates a sandbox.
 *
 * Mirrors run on a throttled sweep (every window, for workspaces touched or
 * with processes running since the last one), on explicit flush, before an
 * idle kill, on close, and for every warm workspace on drain. A sandbox
 * found dead is simply cold again; the next exec restores it, losing at
 * most one window.
 *
 * All blocking work (store queries, restore, mirror) runs on worker threads,
 * each with its own store connection; every callback is delivered on the
 * loop. Operations on one workspace are ordered by its state machine: a
 * wake or close in progress holds later requests until it is done.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sandbox/sandbox.h"
#include "store/store.h"
#include "sync/sync.h"
#include "util/err.h"
#include "util/loop.h"

struct workspaces;
struct wsx;

struct workspaces_config {
    const char *store;         /* postgres:// URL or a directory (SQLite) */
    const char *tmp_dir;       /* staging for uploads and PostgreSQL reads */
    unsigned workers;          /* threads (and store connections) */
    uint64_t mirror_window_ms; /* throttled sweep period */
    uint64_t idle_ms;          /* a warm workspace untouched this long is closed; 0 = never */
    const struct sync_ignore *ignore;
    struct sandbox_limits default_limits;
    uint64_t max_file_bytes; /* largest file written through the API */
    uint64_t floor_bytes;    /* free space the store's file system keeps (store_set_floor) */
    const char *holder;      /* this process's name for the GC lease */
};

int workspaces_new(struct loop *loop, struct sandbox_host *sh, const struct workspaces_config *c,
                   struct workspaces **ret, struct err *err);
void workspaces_free(struct workspaces *w);
const char *workspaces_store_kind(const struct workspaces *w);

enum ws_state { WS_COLD, WS_WAKING, WS_WARM, WS_SLEEPING };
const char *ws_state_name(enum ws_state s);

/* Asynchronous store work: fn runs on a worker with a store connection of
 * its own; done runs on the loop. */
typedef void (*ws_store_fn)(struct store *s, void *ud);
typedef void (*ws_done_fn)(void *ud);
int workspaces_run(struct workspaces *w, ws_store_fn fn, ws_done_fn done, void *ud);
/* A store handle for the loop thread's own cheap work (staging uploads). */
struct store *workspaces_loop_store(struct workspaces *w);

/* The current state of a workspace (WS_COLD if it is not in memory). */
enum ws_state workspaces_state(struct workspaces *w, const char *id);
/* The live sandbox of a warm workspace, or NULL; never wakes it. */
struct sandbox *workspaces_peek(struct workspaces *w, const char *id);
/* Notes activity (requests, attached streams) for the idle clock. */
void workspaces_touch(struct workspaces *w, const char *id);
void workspaces_stream_attached(struct workspaces *w, const char *id, bool attached);

/* Wakes the workspace if needed; cb gets its sandbox (r == 0) or why not.
 * meta is the workspace's record (resources). */
typedef void (*ws_ready_fn)(void *ud, int r, const struct err *err, struct sandbox *sb);
void workspaces_ensure(struct workspaces *w, const char *id, ws_ready_fn cb, void *ud);

/* Waits until the workspace is neither waking nor going to sleep, then
 * calls cb with its sandbox when warm or NULL when cold. */
typedef void (*ws_settled_fn)(void *ud, struct sandbox *sb_or_null);
void workspaces_settle(struct workspaces *w, const char *id, ws_settled_fn cb, void *ud);

/* Mirrors now (flush) or mirrors and puts to sleep (close); cb when done.
 * A flush succeeds only through a mirror that began after it was asked
 * for. Both succeed at once on a cold workspace, except one whose sandbox
 * died while warm: until its next wake they fail with -ENOTRECOVERABLE, since what
 * that sandbox wrote after its last mirror is lost. */
typedef void (*ws_result_fn)(void *ud, int r, const struct err *err, const struct sync_report *rep);
void workspaces_flush(struct workspaces *w, const char *id, ws_result_fn cb, void *ud);
/* -ENOTRECOVERABLE (and why in err) if the workspace is cold by losing its sandbox. */
int workspaces_lost(struct workspaces *w, const char *id, struct err *err);
void workspaces_close(struct workspaces *w, const char *id, ws_result_fn cb, void *ud);
/* Kills the sandbox without mirroring (the workspace is being deleted). */
void workspaces_discard(struct workspaces *w, const char *id, ws_result_fn cb, void *ud);

/* A sandbox a network process before this one left (sandbox_host_orphans()):
 * workspaces_is_record() tells whether its record is a workspace's, which
 * workspaces_adopt() takes it over for. The workspace is warm with it once
 * ready, and its first mirror (at once) copies every file, since nobody
 * knows which changed: what the sandbox wrote before the restart is saved
 * and what it deleted goes. Only a sandbox whose restore had finished has
 * such a record. -EEXIST if the workspace has a sandbox already. */
bool workspaces_is_record(const void *record, size_t len);
int workspaces_adopt(struct workspaces *w, const char *orphan, const void *record, size_t len,
                     struct err *err);

/* Mirrors warm workspaces whose window passed; closes idle ones. */
void workspaces_sweep(struct workspaces *w);
/* Closes every warm workspace (mirror, then kill); done when all are cold. */
void workspaces_drain(struct workspaces *w, void (*done)(void *ud), void *ud);
unsigned workspaces_warm_count(const struct workspaces *w);
