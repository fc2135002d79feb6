/*
 * client-sandboxes.c - sandbox lifecycle and the operational routes.
 *
 * POST/GET/PATCH/DELETE /v1/sandboxes[/{id}], and /healthz, /readyz,
 * /drain, /metrics. Answers are decoded into struct abx_sandbox_info; the
 * JSON text is kept beside the typed fields.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/client-internal.h"
#include "util/cleanup.h"

#define ANSWER_MAX  CLIENT_BODY_MAX
#define METRICS_MAX (16u * 1024 * 1024)

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_sandbox_info *, abx_sandbox_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_sandbox_list *, abx_sandbox_list_free)

struct abx_sandbox_info *
abx_sandbox_info_free(struct abx_sandbox_info *s)
{
    if (!s)
        return NULL;
    free(s->id);
    free(s->template_name);
    free(s->state);
    free(s->created_at);
    free(s->end_at);
    free(s->isolation);
    for (size_t i = 0; i < s->n_metadata; i++) {
        free(s->metadata[i].key);
        free(s->metadata[i].value);
    }
    free(s->metadata);
    free(s->json);
    free(s);
    return NULL;
}

struct abx_sandbox_list *
abx_sandbox_list_free(struct abx_sandbox_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        abx_sandbox_info_free(l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

/* Decodes one sandbox object; text (optional) is its JSON as sent. */
static int
sandbox_from(json_t *o, const char *text, struct abx_sandbox_info **ret)
{
    _cleanup_(abx_sandbox_info_freep) struct abx_sandbox_info *s = NULL;
    json_t *meta, *usage;

    if (!json_is_object(o) || !json_is_string(json_object_get(o, "id")))
        return -EBADMSG;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    if (client_dup_str(o, "id", &s->id) < 0 ||
        client_dup_str(o, "template", &s->template_name) < 0 ||
        client_dup_str(o, "state", &s->state) < 0 ||
        client_dup_str(o, "created_at", &s->created_at) < 0 ||
        client_dup_str(o, "end_at", &s->end_at) < 0 ||
        client_dup_str(o, "isolation", &s->isolation) < 0)
        return -ENOMEM;
    s->timeout_s = client_get_u64(o, "timeout_s");
    s->cpu = client_get_num(o, "cpu");
    s->memory_mb = client_get_u64(o, "memory_mb");
    s->pids = client_get_u64(o, "pids");
    s->processes = client_get_u64(o, "processes");
    meta = json_object_get(o, "metadata");
    if (json_is_object(meta) && json_object_size(meta) > 0) {
        const char *k;
        json_t *v;
        s->metadata = calloc(json_object_size(meta), sizeof(*s->metadata));
        if (!s->metadata)
            return -ENOMEM;
        json_object_foreach (meta, k, v) {
            if (!json_is_string(v))
                continue;
            struct abx_pair *p = &s->metadata[s->n_metadata];
            p->key = strdup(k);
            p->value = strdup(json_string_value(v));
            s->n_metadata++;
            if (!p->key || !p->value)
                return -ENOMEM;
        }
    }
    usage = json_object_get(o, "usage");
    if (json_is_object(usage)) {
        s->has_usage = true;
        s->usage.memory_bytes = client_get_u64(usage, "memory_bytes");
        s->usage.pids = client_get_u64(usage, "pids");
        s->usage.cpu_usec = client_get_u64(usage, "cpu_usec");
        s->usage.oom_kills = client_get_u64(usage, "oom_kills");
    }
    s->json = text ? strdup(text) : json_dumps(o, JSON_COMPACT);
    if (!s->json)
        return -ENOMEM;
    *ret = TAKE_PTR(s);
    return 0;
}

/* Decodes a single-sandbox answer into *ret (when ret is not NULL). */
static int
answer_to_info(struct abx_client *c, const struct buf *body, struct abx_sandbox_info **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_free_ char *text = NULL;
    int r;

    if (!ret)
        return 0;
    r = client_parse(c, body->data, body->len, "a sandbox", &j);
    if (r < 0)
        return r;
    text = client_strip(body);
    if (!text)
        return client_fail(c, -ENOMEM, "out of memory");
    r = sandbox_from(j, text, ret);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer is not a sandbox (no 'id')");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    return 0;
}

static int
put_limits(json_t *o, double cpu, uint64_t memory_mb, uint64_t pids, bool has_timeout,
           uint64_t timeout_s)
{
    int r = 0;

    if (cpu < 0 || cpu != cpu)
        return -EINVAL;
    if (cpu > 0)
        r |= json_object_set_new(o, "cpu", json_real(cpu));
    if (memory_mb)
        r |= json_object_set_new(o, "memory_mb", json_integer((json_int_t)memory_mb));
    if (pids)
        r |= json_object_set_new(o, "pids", json_integer((json_int_t)pids));
    if (has_timeout)
        r |= json_object_set_new(o, "timeout_s", json_integer((json_int_t)timeout_s));
    return r ? -ENOMEM : 0;
}

int
abx_sandbox_create(struct abx_client *c, const struct abx_sandbox_spec *spec,
                   struct abx_sandbox_info **ret)
{
    static const struct abx_sandbox_spec defaults = {0};
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!spec)
        spec = &defaults;
    if (spec->memory_mb > INT64_MAX || spec->pids > INT64_MAX || spec->timeout_s > INT64_MAX)
        return client_fail(c, -EINVAL, "a limit is out of range");
    body = json_object();
    if (!body)
        return client_fail(c, -ENOMEM, "out of memory");
    if (spec->template_name &&
        json_object_set_new(body, "template", json_string(spec->template_name)) < 0)
        return client_fail(c, -EINVAL, "the template name must be UTF-8");
    r = put_limits(body, spec->cpu, spec->memory_mb, spec->pids, spec->has_timeout,
                   spec->timeout_s);
    if (r < 0)
        return client_fail(c, r, r == -EINVAL ? "cpu must not be negative" : "out of memory");
    if (spec->n_env) {
        json_t *env;
        if ((r = client_kv_object(spec->env, spec->n_env, &env)) < 0 ||
            (r = json_object_set_new(body, "env", env) < 0 ? -ENOMEM : 0) < 0)
            return client_fail(c, r, "invalid env: keys and values must be non-empty UTF-8");
    }
    if (spec->n_metadata) {
        json_t *meta;
        if ((r = client_kv_object(spec->metadata, spec->n_metadata, &meta)) < 0 ||
            (r = json_object_set_new(body, "metadata", meta) < 0 ? -ENOMEM : 0) < 0)
            return client_fail(c, r, "invalid metadata: keys and values must be non-empty UTF-8");
    }
    if ((r = buf_puts(&path, "/v1/sandboxes")) < 0)
        return client_fail(c, r, "out of memory");
    r = client_call(c, "POST", &path, TAKE_PTR(body), EBUSY, &answer, NULL);
    if (r < 0)
        return r;
    return answer_to_info(c, &answer, ret);
}

int
abx_sandbox_list(struct abx_client *c, struct abx_sandbox_list **ret)
{
    _cleanup_(abx_sandbox_list_freep) struct abx_sandbox_list *l = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    json_t *arr, *v;
    size_t i;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, "/v1/sandboxes")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = client_get_list(c, &path, 0, "the sandbox list", "sandboxes", &answer, &j, &arr)) < 0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = sandbox_from(v, NULL, &l->items[l->n]);
        if (r == -EBADMSG)
            return client_fail(c, r, "abxd's sandbox list has an entry without 'id'");
        if (r < 0)
            return client_fail(c, r, "out of memory");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

int
abx_sandbox_get(struct abx_client *c, const char *id, struct abx_sandbox_info **ret)
{
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_sandbox_url(c, &path, id, NULL)) < 0)
        return r;
    r = client_call(c, "GET", &path, NULL, EBUSY, &answer, NULL);
    if (r < 0)
        return r;
    return answer_to_info(c, &answer, ret);
}

int
abx_sandbox_update(struct abx_client *c, const char *id, const struct abx_sandbox_update *u,
                   struct abx_sandbox_info **ret)
{
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!u || (u->cpu == 0 && !u->memory_mb && !u->pids && !u->has_timeout))
        return client_fail(c, -EINVAL, "nothing to update");
    if (u->memory_mb > INT64_MAX || u->pids > INT64_MAX || u->timeout_s > INT64_MAX)
        return client_fail(c, -EINVAL, "a limit is out of range");
    if ((r = client_sandbox_url(c, &path, id, NULL)) < 0)
        return r;
    body = json_object();
    if (!body)
        return client_fail(c, -ENOMEM, "out of memory");
    r = put_limits(body, u->cpu, u->memory_mb, u->pids, u->has_timeout, u->timeout_s);
    if (r < 0)
        return client_fail(c, r, r == -EINVAL ? "cpu must not be negative" : "out of memory");
    r = client_call(c, "PATCH", &path, TAKE_PTR(body), EBUSY, &answer, NULL);
    if (r < 0)
        return r;
    return answer_to_info(c, &answer, ret);
}

int
abx_sandbox_kill(struct abx_client *c, const char *id)
{
    _cleanup_buf_ struct buf path;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_sandbox_url(c, &path, id, NULL)) < 0)
        return r;
    /* Deleting waits for every process, mount and cgroup to be gone. */
    return client_call(c, "DELETE", &path, NULL, EBUSY, NULL, NULL);
}

/* --- operations --- */

/* A GET or POST of an operational route; returns the HTTP status. accept is
 * a non-2xx status that is an answer rather than a failure (0 = none). */
static int
op_call(struct abx_client *c, const char *method, const char *route, long accept, size_t max,
        char **ret_text)
{
    _cleanup_buf_ struct buf path, answer;
    struct client_req rq;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, max);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, route)) < 0)
        return client_fail(c, r, "out of memory");
    client_req_init(&rq, method, &path);
    rq.resp = CLIENT_RESP_BUFFER;
    rq.out = &answer;
    rq.accept = accept;
    r = client_request(c, &rq);
    if (r < 0)
        return r;
    if (ret_text) {
        *ret_text = client_strip(&answer);
        if (!*ret_text)
            return client_fail(c, -ENOMEM, "out of memory");
    }
    return (int)rq.status;
}

int
abx_health(struct abx_client *c, char **ret_json)
{
    int r = op_call(c, "GET", "/healthz", 0, CLIENT_ERRBODY_MAX, ret_json);
    return r < 0 ? r : 0;
}

struct abx_readiness *
abx_readiness_free(struct abx_readiness *rd)
{
    if (!rd)
        return NULL;
    free(rd->isolation);
    free(rd->cgroup);
    for (size_t i = 0; rd->missing && i < rd->n_missing; i++)
        free(rd->missing[i]);
    free(rd->missing);
    free(rd->json);
    free(rd);
    return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_readiness *, abx_readiness_free)

int
abx_ready(struct abx_client *c, struct abx_readiness **ret)
{
    _cleanup_(abx_readiness_freep) struct abx_readiness *rd = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_free_ char *text = NULL;
    json_t *missing, *v;
    size_t i;
    int r, status;

    status = op_call(c, "GET", "/readyz", 503, CLIENT_ERRBODY_MAX, &text);
    if (status < 0)
        return status;
    if (!ret)
        return status == 200;
    if ((r = client_parse(c, text, strlen(text), "readiness", &j)) < 0)
        return r;
    rd = calloc(1, sizeof(*rd));
    if (!rd)
        return client_fail(c, -ENOMEM, "out of memory");
    rd->ready = status == 200 && client_get_bool(j, "ready");
    rd->draining = client_get_bool(j, "draining");
    missing = json_object_get(j, "missing");
    if (client_dup_str(j, "isolation", &rd->isolation) < 0 ||
        client_dup_str(j, "cgroup", &rd->cgroup) < 0 ||
        !(rd->missing = calloc(json_array_size(missing) + 1, sizeof(char *))))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (missing, i, v) {
        if (!json_is_string(v))
            continue;
        if (!(rd->missing[rd->n_missing] = strdup(json_string_value(v))))
            return client_fail(c, -ENOMEM, "out of memory");
        rd->n_missing++;
    }
    rd->json = TAKE_PTR(text);
    r = rd->ready;
    *ret = TAKE_PTR(rd);
    return r;
}

int
abx_metrics(struct abx_client *c, char **ret_text)
{
    int r = op_call(c, "GET", "/metrics", 0, METRICS_MAX, ret_text);
    return r < 0 ? r : 0;
}

int
abx_drain(struct abx_client *c, char **ret_json)
{
    _cleanup_free_ char *text = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    int r;

    r = op_call(c, "POST", "/drain", 0, CLIENT_ERRBODY_MAX, &text);
    if (r < 0)
        return r;
    r = client_parse(c, text, strlen(text), "drain", &j);
    if (r < 0)
        return r;
    uint64_t n = client_get_u64(j, "sandboxes");
    if (ret_json)
        *ret_json = TAKE_PTR(text);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}
