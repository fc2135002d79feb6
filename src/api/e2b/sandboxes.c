/*
 * sandboxes.c - the E2B record of a sandbox (struct e2b_sb in the entry's
 * ext slot): the table hooks that cut its streams and free it, the streams
 * list, finding a sandbox or a cold record for a caller, the create's
 * ready step, and who an envd call acts for. What the platform API, envd
 * and the lifecycle routes share, below all three.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b/e2b-internal.h"
#include "util/json.h"

/* --- the table --- */

void
e2b_entry_dying(struct entry *e)
{
    struct e2b_sb *x = e2b_of(e);
    if (!x)
        return;
    if (e->state == E_DYING) {
        /* The kill thaws a frozen sandbox (sandbox.h). */
        e->paused = false;
        x->snapshotting = false;
    }
    /* Cut every stream without an end frame: the SDK's health probe then
     * sees 502 and reports the sandbox's end. */
    while (!list_empty(&x->streams)) {
        struct e2b_stream *s = list_entry(x->streams.next, struct e2b_stream, link);
        list_remove(&s->link);
        list_init(&s->link);
        s->cut(s);
    }
}

/* table hooks: the table kills e, or e goes */
static void
entry_dying(struct entry *e, unsigned slot)
{
    (void)slot;
    e2b_entry_dying(e);
}

static void
entry_free(struct entry *e, unsigned slot)
{
    struct e2b_sb *x = e->ext[slot];
    if (!x)
        return;
    e2b_entry_dying(e);
    e2b_snapshots_entry_gone(e);
    struct e2b_cold *c = x->cold;
    if (c && c->live == e) {
        /* The last sandbox that ran as it: the E2B sandbox ends. */
        list_remove(&c->link);
        json_decref(c->meta);
        free(c);
    }
    free(x);
    e->ext[slot] = NULL;
}

/* Its envd token and alias go into the sandbox's record (table.h), so
 * that a restarted network process serves it to the same SDK. Streams,
 * snapshots being taken and a cold pause's identity do not. */
static void
entry_save(struct entry *e, unsigned slot, json_t *rec)
{
    const struct e2b_sb *x = e->ext[slot];
    if (!x)
        return;
    (void)json_set(rec, "token", json_string(x->token));
    (void)json_set(rec, "alias", json_string(x->alias));
}

static int
entry_load(struct entry *e, unsigned slot, json_t *rec)
{
    const char *token = NULL, *alias = NULL;
    if (json_get_str(rec, "token", true, &token, NULL) < 0 ||
        json_get_str(rec, "alias", true, &alias, NULL) < 0 || strlen(token) != E2B_TOKEN_LEN ||
        strspn(token, "0123456789abcdef") != E2B_TOKEN_LEN ||
        strlen(alias) >= sizeof(((struct e2b_sb *)0)->alias))
        return -EINVAL;
    struct e2b_sb *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    list_init(&x->streams);
    memcpy(x->token, token, E2B_TOKEN_LEN + 1);
    (void)snprintf(x->alias, sizeof(x->alias), "%s", alias);
    e->ext[slot] = x;
    return 0;
}

int
e2b_init(struct api *a)
{
    static const struct table_hooks hooks = {.dying = entry_dying,
                                             .free = entry_free,
                                             .save = entry_save,
                                             .load = entry_load,
                                             .name = "e2b"};
    return table_add_hooks(a->table, &hooks, &a->e2b_slot);
}

void
e2b_stream_attach(struct entry *e, struct e2b_stream *s)
{
    list_add_tail(&e2b_of(e)->streams, &s->link);
}

void
e2b_stream_detach(struct e2b_stream *s)
{
    list_remove(&s->link);
    list_init(&s->link);
}

/* --- finding --- */

/* The entry the caller may see: live, and created with its key when that
 * is a scoped key (the full key sees every sandbox). */
struct entry *
e2b_find(struct api *a, struct http_req *req, const char *id, const struct api_scope *scope)
{
    struct entry *e = e2b_lookup(a, id);
    if (!e || e->state != E_READY || (scope && e->scope != scope)) {
        if (req)
            e2b_error(req, 404, "sandbox '%.64s' not found", id);
        return NULL;
    }
    return e;
}

/* The cold record id names while paused (NULL when none or running). */
struct e2b_cold *
e2b_find_cold(struct api *a, const char *id, const struct api_scope *scope)
{
    if (!a->snaps || e2b_snaps_closing(a))
        return NULL;
    list_foreach (l, e2b_cold_list(a)) {
        struct e2b_cold *c = list_entry(l, struct e2b_cold, link);
        if (!strcmp(c->id, id) && !c->live && (!scope || c->scope == scope))
            return c;
    }
    return NULL;
}

/* --- create --- */

int
e2b_read_timeout(json_t *j, uint64_t max_s, uint64_t *ret, struct err *err)
{
    json_t *v = json_object_get(j, "timeout");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return err_set(err, EINVAL, "'timeout' must be a non-negative integer of seconds");
    if (max_s && (uint64_t)json_integer_value(v) > max_s)
        return err_set(err, EINVAL, "'timeout' may be at most %llu seconds",
                       (unsigned long long)max_s);
    *ret = (uint64_t)json_integer_value(v);
    return 1;
}

void
e2b_create_ready(struct api *a, struct entry *e, int r, const struct err *err, struct http_req *req)
{
    if (r < 0) {
        if (req) {
            e2b_error(req, 500, "%s", err && err->msg[0] ? err->msg : "cannot create");
            http_req_unref(req);
        }
        return;
    }
    struct e2b_sb *x = e2b_of(e);
    if (x && x->restore) {
        e2b_restore_ready(a, e, req); /* takes over req */
        return;
    }
    api_template_start(a, e, req, req ? e2b_create_answer(a, e) : NULL);
}

/* --- envd calls --- */

struct entry *
e2b_call_entry(const struct e2b_call *c)
{
    struct entry *e = table_find(c->api->table, c->id);
    if (!e || e->state != E_READY || !e2b_of(e) || e->paused)
        return NULL;
    return e;
}

int
e2b_user_named(const char *name, struct e2b_user *ret)
{
    if (!name || !*name || !strcmp(name, "user"))
        *ret = (struct e2b_user){false, "user", "/home/user"};
    else if (!strcmp(name, "root"))
        *ret = (struct e2b_user){true, "root", "/root"};
    else
        return -ENOENT;
    return 0;
}
