/*
 * create.c - a create as the surfaces ask for it: the template's env and
 * file system under the request's, limits from the template, then the
 * table; the surface's ready callback answers, after the template's
 * start_cmd and ready_cmd (api_template_start()). Also whose output streams
 * keep what from counting as idle.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "template/set.h"
#include "template/start.h"
#include "util/json.h"
#include "util/log.h"

static bool
valid_env_key(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return false;
    for (; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return false;
    return true;
}

int
api_decode_disk_mb(struct api *a, json_t *body, uint64_t *ret_bytes, struct err *err)
{
    uint64_t mb;
    int r = json_get_u64(body, "disk_mb", false, API_DISK_MB_MAX, &mb, err);
    if (r <= 0)
        return r;
    if (mb < 1)
        return err_set(err, EINVAL, "'disk_mb' must be at least 1");
    if (!a->cfg.default_disk_bytes)
        return err_set(err, EINVAL,
                       "'disk_mb' needs a disk bound, and this host runs without one "
                       "(--disk-mb 0)");
    *ret_bytes = mb << 20;
    return 1;
}

/* A create in flight: who answers it, and the request it answers. */
struct create_op {
    struct api *api;
    struct http_req *req; /* referenced, may be NULL */
    api_ready_fn ready;
};

static void
create_op_ready(struct entry *e, int r, const struct err *err, void *ud)
{
    struct create_op *op = ud;
    op->ready(op->api, e, r, err, op->req); /* takes over the reference */
    free(op);
}

static void
create_op_drop(void *ud)
{
    struct create_op *op = ud;
    if (op->req)
        http_req_unref(op->req);
    free(op);
}

int
api_create(struct api *a, struct http_req *req, const struct api_create_req *c, struct entry **ret,
           struct err *err)
{
    const char *tenv[TEMPLATE_ENV_MAX * 4];
    const char **envv = NULL;
    struct create_op *op = NULL;
    struct sandbox_spec spec;
    struct table_create tc;
    struct api_fs fsb;
    size_t n, i = 0;
    int nt, r;

    /* Before the env, so that a bad env does not hide that this host
     * takes no sandbox now. */
    if ((r = table_admits(a->table, err)) < 0)
        return r;
    /* The template's env first (its bases before it), the request's over it. */
    nt = template_effective_env(a->templates, c->t, tenv, ELEMENTSOF(tenv));
    if (nt < 0)
        return err_set(err, E2BIG, "template '%s' has too many env entries", c->t->name);
    n = c->env ? json_object_size(c->env) : 0;
    envv = calloc(n + (size_t)nt + 1, sizeof(char *));
    if (!envv)
        return -ENOMEM;
    for (int k = 0; k < nt; k++) {
        if (!(envv[i] = strdup(tenv[k]))) {
            r = -ENOMEM;
            goto out;
        }
        i++;
    }
    if (c->env) {
        const char *k;
        json_t *v;
        json_object_foreach (c->env, k, v) {
            if (!valid_env_key(k)) {
                r = err_set(err, EINVAL, "env key '%.64s' is not a valid variable name", k);
                goto out;
            }
            char *kv = NULL;
            if (asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
                r = -ENOMEM;
                goto out;
            }
            envv[i++] = kv;
        }
    }
    op = calloc(1, sizeof(*op));
    if (!op) {
        r = -ENOMEM;
        goto out;
    }
    *op = (struct create_op){.api = a, .req = req, .ready = c->ready};
    spec = (struct sandbox_spec){
            .limits = c->lim, .env = envv, .fs = api_template_fs(a, c->t, &fsb)};
    tc = (struct table_create){
            .spec = &spec,
            .tmpl = c->t,
            .caps = c->t->caps,
            .scope = c->scope,
            .meta = c->meta,
            .timeout_s = c->timeout_s,
    };
    r = table_create(a->table, &tc, create_op_ready, create_op_drop, op, ret, err);
    if (r < 0)
        goto out;
    op = NULL;
    if (req)
        http_req_ref(req);
out:
    free(op);
    for (size_t k = 0; envv && envv[k]; k++)
        free((char *)(uintptr_t)envv[k]);
    free(envv);
    return r;
}

const struct sandbox_fs *
api_template_fs(struct api *a, const struct template *t, struct api_fs *buf)
{
    uint64_t disk = 0;
    memset(buf, 0, sizeof(*buf));
    for (const struct template *c = t; c && !disk;
         c = strcmp(c->base, TEMPLATE_BASE_HOST) ? template_set_find(a->templates, c->base) : NULL)
        disk = c->disk_mb;
    buf->fs.nlayers = template_layers(a->templates, t, buf->layers, SANDBOX_MAX_LAYERS);
    buf->fs.layers = buf->layers;
    buf->fs.disk_bytes = disk << 20;
    return buf->fs.nlayers || disk ? &buf->fs : NULL;
}

void
api_template_limits(struct api *a, const struct template *t, struct sandbox_limits *lim)
{
    double tcpu;
    uint64_t tmem, tpids;

    template_effective_resources(a->templates, t, &tcpu, &tmem, &tpids);
    if (tcpu > 0)
        lim->cpu_millis = (uint32_t)lround(tcpu * 1000.0);
    if (tmem)
        lim->memory_bytes = tmem << 20;
    if (tpids)
        lim->pids = (uint32_t)tpids;
    /* disk_mb also bounds the home, where the host bounds it at all. */
    uint64_t disk = 0;
    for (const struct template *c = t; c && !disk;
         c = strcmp(c->base, TEMPLATE_BASE_HOST) ? template_set_find(a->templates, c->base) : NULL)
        disk = c->disk_mb;
    if (disk && a->cfg.default_disk_bytes)
        lim->disk_bytes = disk << 20;
}

void
api_stream_attached(struct api *a, const struct out_owner *o, bool attached)
{
    if (o->kind == OWNER_WORKSPACE) {
        if (a->ws)
            workspaces_stream_attached(a->ws, o->id, attached);
        return;
    }
    struct entry *e = table_find(a->table, o->id);
    if (e)
        table_stream_attached(e, attached);
}

/* --- start_cmd and ready_cmd (template/start.h) --- */

struct ready_op {
    struct api *api;
    char id[API_ID_LEN + 1];
    struct http_req *req; /* referenced; NULL when the client went away */
    json_t *answer;
};

/* op's sandbox while it is ready, as api_find() finds it, answering nothing
 * (this part is the core's: both surfaces call api_template_start()). */
static struct entry *
ready_entry(struct ready_op *op)
{
    struct entry *e = table_find(op->api->table, op->id);
    if (!e || e->state != E_READY)
        return NULL;
    table_touch(e);
    return e;
}

static struct sandbox *
ready_find(void *ud)
{
    struct entry *e = ready_entry(ud);
    return e ? e->sb : NULL;
}

static void
ready_done(void *ud, const struct template_ready *res)
{
    struct ready_op *op = ud;

    if (res->r == 0) {
        if (op->req && !http_req_closed(op->req)) {
            api_json(op->req, 201, op->answer);
            op->answer = NULL;
        }
    } else {
        struct entry *e = ready_entry(op);
        log_warn("sandbox=%s: ready_cmd did not succeed (%s): removing it", op->id, res->why);
        if (op->req && !http_req_closed(op->req)) {
            json_t *o = json_object();
            char msg[512];
            (void)snprintf(msg, sizeof(msg),
                           "the template's ready_cmd did not succeed within %.1f s (%s); the "
                           "sandbox was removed",
                           res->total_ms / 1000.0, res->why);
            (void)json_set(o, "error", json_string("not_ready"));
            (void)json_set(o, "message", json_string(msg));
            json_t *tail = json_stringn(res->output, res->output_len);
            (void)json_set(o, "output", tail ? tail : json_string(""));
            api_json(op->req, 504, o);
        }
        if (e)
            table_kill(e);
    }
    json_decref(op->answer);
    if (op->req)
        http_req_unref(op->req);
    free(op);
}

static const struct template_ready_ops ready_ops = {.find = ready_find, .done = ready_done};

static void
start_failed(struct sandbox *sb, const char *msg)
{
    log_warn("sandbox=%s: start_cmd could not start: %s", sandbox_id(sb), msg);
}

static const struct template_start_ops start_ops = {.failed = start_failed};

void
api_template_start(struct api *a, struct entry *e, struct http_req *req, json_t *answer)
{
    const struct template *t = e->tmpl;
    template_start_cmd(e->sb, t, &start_ops);
    if (!t || !t->ready_cmd) {
        if (req) {
            api_json(req, 201, answer);
            http_req_unref(req);
        } else {
            json_decref(answer);
        }
        return;
    }
    struct ready_op *op = calloc(1, sizeof(*op));
    if (!op) {
        if (req) {
            api_error(req, -ENOMEM, NULL);
            http_req_unref(req);
        }
        json_decref(answer);
        return;
    }
    op->api = a;
    (void)snprintf(op->id, sizeof(op->id), "%s", e->id);
    op->req = req;
    op->answer = answer;
    if (template_poll_ready(a->loop, t, a->cfg.ready_timeout_ms, &ready_ops, op) < 0) {
        op->req = NULL;
        op->answer = NULL;
        free(op);
        if (req) {
            api_error(req, -ENOMEM, NULL);
            http_req_unref(req);
        }
        json_decref(answer);
    }
}
