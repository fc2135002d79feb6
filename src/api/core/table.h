/*
 * table.h - the table of live sandboxes: create, find, kill, deadlines, the
 * idle backstop, drain and kill-all.
 *
 * The table owns each entry and its sandbox. It writes no HTTP and knows no
 * surface: the native wire, E2B and the port proxy keep their own state per
 * sandbox in e->ext[slot], a slot they get once from table_add_hooks()
 * together with the hooks that cut and free that state. Finding answers
 * nothing: a surface that finds no entry answers its own 404. Everything
 * runs on the loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "sandbox/sandbox.h"
#include "util/err.h"
#include "util/list.h"
#include "util/loop.h"

#define TABLE_ID_LEN  20 /* characters of a sandbox id */
#define TABLE_EXT_MAX 4  /* surfaces that may keep state per sandbox */

struct table;
struct template;
struct api_scope;

enum entry_state { E_CREATING, E_READY, E_DYING };

struct entry {
    struct list link;
    struct table *table;
    char id[TABLE_ID_LEN + 1];
    struct sandbox *sb;
    enum entry_state state;
    uint64_t created_wall_ms;
    uint64_t end_at_wall_ms; /* 0 = no deadline */
    uint64_t timeout_s;
    uint64_t last_active_ms; /* monotonic */
    unsigned streams;        /* output streams attached */
    bool paused;             /* frozen by a surface (E2B pause): no traffic reaches it */
    json_t *metadata;        /* string map, owned */
    struct loop_timer *deadline;
    const struct template *tmpl;   /* borrowed from the api's template set */
    unsigned caps;                 /* TEMPLATE_CAP_* the sandbox's routes allow */
    const struct api_scope *scope; /* the scoped key that created it, NULL = the full key */
    void *ext[TABLE_EXT_MAX];      /* per-surface state, by the slot of table_add_hooks() */
    json_t *env;                   /* the sandbox's env ("K=V" strings), owned: for its record */
    struct list kill_waiters;      /* table.c: told when the sandbox is gone */
    struct table_create_op *op;    /* table.c: the creator's callback until ready */
};

/* What a surface does with its e->ext[slot] (both optional): dying runs when
 * the table starts to kill the entry (kill, deadline, idle, kill-all); free
 * runs once, when the entry goes (also when the sandbox ended on its own,
 * without dying first). Hooks run in the order they were added. */
struct table_hooks {
    void (*dying)(struct entry *e, unsigned slot);
    void (*free)(struct entry *e, unsigned slot);
    /* The entry's record (table_record()): save adds what the surface
     * keeps to rec (an object of its own), load makes its state from one
     * when a later process takes the sandbox over; a negative return from
     * load refuses the sandbox (it is killed). Both optional. */
    void (*save)(struct entry *e, unsigned slot, json_t *rec);
    int (*load)(struct entry *e, unsigned slot, json_t *rec);
    const char *name; /* the key of save's object in the record ("e2b") */
};

struct table_config {
    uint32_t max_sandboxes;
    uint64_t idle_timeout_s; /* the idle backstop; 0 = off */
};

struct table_stats {
    uint64_t created, failed, ended;
    uint64_t create_us_sum, create_count;
};

/* sh is borrowed and outlives the table; owner is what table_owner()
 * gives back to the surfaces' hooks (the api). */
int table_new(struct loop *loop, struct sandbox_host *sh, void *owner, const struct table_config *c,
              struct table **ret);
void *table_owner(const struct table *t);
/* Frees every entry without calling its creator back (hooks run). */
void table_free(struct table *t);

/* Registers a surface's hooks; *ret_slot is its index into e->ext. Call at
 * start-up, before the first entry; -ENOSPC past TABLE_EXT_MAX. */
int table_add_hooks(struct table *t, const struct table_hooks *h, unsigned *ret_slot);

/* The entry named id in any state, or NULL. Writes nothing, touches nothing. */
struct entry *table_find(struct table *t, const char *id);
/* The entries in creation order (read-only for callers). */
const struct list *table_entries(const struct table *t);
uint32_t table_count(const struct table *t);
const struct table_stats *table_stats(const struct table *t);

/* A create, as the table needs it: what the sandbox gets (spec is used
 * during the call only) and what the entry records. */
struct table_create {
    const struct sandbox_spec *spec;
    const struct template *tmpl;
    unsigned caps;
    const struct api_scope *scope;
    json_t *meta; /* string map, copied; NULL = {} */
    uint64_t timeout_s;
};
/* Called once when the sandbox is ready (r == 0: e is E_READY and its
 * deadline armed) or failed (r < 0: e is freed when this returns). */
typedef void (*table_ready_fn)(struct entry *e, int r, const struct err *err, void *ud);
/* Called instead of ready when the entry is freed before it was ready
 * (table_free): releases ud. */
typedef void (*table_drop_fn)(void *ud);
/* Whether a create would be taken now: 0, or -ESHUTDOWN draining,
 * -EOPNOTSUPP no isolation, -EAGAIN full (err says why). */
int table_admits(const struct table *t, struct err *err);
/* Starts a sandbox. -ESHUTDOWN draining, -EOPNOTSUPP no isolation, -EAGAIN
 * full, or sandbox_create()'s error: nothing was called back, err says why.
 * On success ready (or drop) owns ud. */
int table_create(struct table *t, const struct table_create *c, table_ready_fn ready,
                 table_drop_fn drop, void *ud, struct entry **ret, struct err *err);

/* Sandboxes that outlive this process (sandbox_set_record()): writes e's
 * record - its times, template, scope, metadata, env, limits, pause and
 * the surfaces' state - for the process that takes it over. Called by the
 * table on ready and table_set_end(), and by surfaces whenever what they
 * save changes. Quiet where sandboxes do not outlive us. */
void table_record(struct entry *e);
/* How table_adopt() finds what a record names: the template (NULL = no
 * longer here: the sandbox is killed) and the scope (*ret NULL = the full
 * key; -ENOENT = that key is gone: killed too). */
struct table_resolve {
    const struct template *(*tmpl)(void *ud, const char *name);
    int (*scope)(void *ud, const char *key, const struct api_scope **ret);
    void *ud;
};
/* Takes over orphan (sandbox_host_orphans()'s name), left by an earlier
 * process with record rec (table_record()'s): an entry as its create
 * made it, with the id the record names, ready when its sandbox is.
 * -EINVAL for a record that does not parse, -ENOENT for one naming what
 * is gone (err says why): the caller kills such a sandbox. */
int table_adopt(struct table *t, const char *orphan, const void *rec, size_t len,
                const struct table_resolve *res, struct entry **ret, struct err *err);

/* Marks e active now (the idle backstop counts from here). */
void table_touch(struct entry *e);
/* One more (or one fewer) output stream keeps e from counting as idle. */
void table_stream_attached(struct entry *e, bool attached);
/* Moves e's deadline (0 = none), and records its timeout. */
void table_set_end(struct entry *e, uint64_t end_at_wall_ms);
/* Kills e's sandbox, asynchronously: the entry goes when it is gone. */
void table_kill(struct entry *e);
/* Like table_kill(), and calls done(ud) once the sandbox is gone (or drop
 * when the table is freed first). -ENOMEM: nothing was done. */
int table_kill_wait(struct entry *e, void (*done)(void *ud), void (*drop)(void *ud), void *ud);

/* Readiness: missing is "" when the configured isolation works; creates
 * fail with -EOPNOTSUPP otherwise. */
void table_set_missing(struct table *t, const char *missing);
const char *table_missing(const struct table *t);
/* Stops accepting new sandboxes. */
void table_drain(struct table *t);
bool table_draining(const struct table *t);
/* Kills ready sandboxes idle past the backstop, without streams; returns how many. */
int table_sweep_idle(struct table *t);
/* Kills every sandbox; done(ud) fires when all are gone (at once if none). */
void table_kill_all(struct table *t, void (*done)(void *ud), void *ud);
