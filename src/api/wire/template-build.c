/*
 * template-build.c - POST /v1/templates: a tar of a template directory in,
 * the build's progress out as NDJSON. The build itself (extraction, checks,
 * the build sandbox, steps, the layer) is template/build.c's; this file
 * decodes the request, answers its errors and frames the progress:
 *
 *   {"step": 1, "start": "run", "line": 3}
 *   {"step": 1, "line": "output line"}
 *   {"done": true, "template": "pydata", "layer": "/var/lib/abx/templates/pydata/layer-..."}
 *   or {"error": "step 2 (line 9): exited with 1", "step": 2}
 *
 * Lines wait in a queue of BUILD_QUEUE_MAX bytes for a slow client; the
 * build reads its steps' output no faster. A client that goes away
 * abandons the build.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "http/ndjson.h"
#include "template/build.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

#define BUILD_QUEUE_MAX (256 * 1024) /* NDJSON waiting for the client */

/* One request's side of a build; freed with the build (released()). */
struct tb {
    struct api *a;
    struct template_build *b;
    struct http_req *req; /* until it closes */
    struct http_stream *out;
    struct buf q; /* NDJSON lines for the client */
    bool ending;
};

/* --- output --- */

static void
emit(struct tb *w, json_t *o)
{
    if (!o || !w->out) {
        json_decref(o);
        return;
    }
    size_t before = w->q.len;
    if (ndjson_line(&w->q, o) < 0)
        w->q.len = before;
    http_stream_wake(w->out);
}

/* JSON wants UTF-8: invalid bytes of build output become '?'. */
static json_t *
text_json(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j)
        return j;
    _cleanup_free_ char *c = malloc(n ? n : 1);
    if (!c)
        return NULL;
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)s[i] >= 0x80 || s[i] == '\0' ? '?' : s[i];
    return json_stringn(c, n);
}

static void
on_event(void *ud, const struct template_build_event *ev)
{
    struct tb *w = ud;
    json_t *o = json_object();

    switch (ev->kind) {
    case TEMPLATE_BUILD_STEP:
        (void)json_set(o, "step", json_integer((json_int_t)ev->step));
        (void)json_set(o, "start", json_string(ev->start));
        (void)json_set(o, "line", json_integer(ev->line));
        break;
    case TEMPLATE_BUILD_LINE:
        (void)json_set(o, "step", json_integer((json_int_t)ev->step));
        (void)json_set(o, "line", text_json(ev->text, ev->len));
        break;
    case TEMPLATE_BUILD_DONE:
        (void)json_set(o, "done", json_true());
        (void)json_set(o, "template", json_string(ev->name));
        (void)json_set(o, "layer", json_string(ev->layer));
        break;
    case TEMPLATE_BUILD_ERROR:
        (void)json_set(o, "error", json_string(ev->text));
        if (ev->step)
            (void)json_set(o, "step", json_integer((json_int_t)ev->step));
        break;
    }
    emit(w, o);
}

static bool
on_room(void *ud)
{
    struct tb *w = ud;
    return w->q.len < BUILD_QUEUE_MAX;
}

static void
on_wake(void *ud)
{
    struct tb *w = ud;
    if (w->out)
        http_stream_wake(w->out);
}

/* Ends the stream once the queue is written. */
static void
on_end(void *ud)
{
    struct tb *w = ud;
    w->ending = true;
    if (!w->out)
        return;
    if (w->q.len)
        http_stream_wake(w->out);
    else
        http_stream_end(w->out);
}

static void
on_released(void *ud)
{
    struct tb *w = ud;
    buf_done(&w->q);
    free(w);
}

static const struct template_build_ops build_ops = {
        .event = on_event,
        .room = on_room,
        .wake = on_wake,
        .end = on_end,
        .released = on_released,
};

static void
out_fill(struct http_stream *s, void *ud)
{
    struct tb *w = ud;
    while (w->q.len) {
        size_t k = http_stream_room(s);
        if (k == 0)
            return;
        if (k > w->q.len)
            k = w->q.len;
        if (http_stream_write(s, w->q.data, k) < 0)
            return;
        buf_consume(&w->q, k);
    }
    if (w->ending) {
        http_stream_end(s);
        return;
    }
    template_build_pump(w->b);
    if (w->q.len && http_stream_room(s))
        out_fill(s, ud);
}

static void
out_closed(struct http_stream *s, void *ud)
{
    struct tb *w = ud;
    (void)s;
    http_stream_release(w->out);
    w->out = NULL;
    template_build_abandon(w->b, true); /* when the client went away */
    template_build_unref(w->b);
}

static const struct http_stream_ops out_ops = {.fill = out_fill, .closed = out_closed};

/* --- the request --- */

static void
req_closed(struct http_req *req, void *ud)
{
    struct tb *w = ud;
    (void)req;
    w->req = NULL;
    template_build_unref(w->b);
}

static int
body_chunk(struct http_req *req, const char *data, size_t len)
{
    struct tb *w = http_req_userdata(req);
    struct err err = {0};
    int r = template_build_feed(w->b, data, len, &err);
    if (r < 0) {
        api_error_msg(req, r == -EFBIG ? 413 : 400, "invalid_archive", "%s", err.msg);
        return r;
    }
    return 0;
}

static void
body_done(struct http_req *req)
{
    struct tb *w = http_req_userdata(req);
    struct template_build *b = w->b;
    struct err err = {0};
    int r;

    r = template_build_untar_done(b, &err);
    if (r < 0) {
        api_error_msg(req, 400, "invalid_archive", "%s", err.msg);
        return;
    }
    r = template_build_digest(b, &err);
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    r = template_build_load(b, &err);
    if (r == -ENOENT) {
        api_error_msg(req, 400, "invalid_template", "the archive has no %s at its top",
                      TEMPLATE_FILE_NAME);
        return;
    }
    if (r < 0) {
        api_error_msg(req,
                      r == -EEXIST  ? 409
                      : r == -EFBIG ? 413
                                    : 400,
                      r == -EEXIST ? "conflict" : "invalid_template", "%s", err.msg);
        return;
    }
    if (table_draining(w->a->table)) {
        api_error_msg(req, 503, "draining", "abxd is draining");
        return;
    }
    r = template_build_start(b, &err);
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    log_info("template=%s build started (sandbox=%s, %zu steps)", template_build_name(b),
             template_build_id(b), template_build_steps(b));
    template_build_ref(b);
    r = http_stream_start(req, 200, "application/x-ndjson", &out_ops, w, &w->out);
    if (r < 0) {
        template_build_abandon(b, false);
        template_build_unref(b);
    }
}

/* POST /v1/templates. */
void
api_template_build(struct api *a, struct http_req *req, const struct api_scope *scope)
{
    int r;

    if (scope) {
        api_error_msg(req, 403, "forbidden", "building templates needs the full key");
        return;
    }
    const char *ct = http_req_header(req, "Content-Type");
    if (!ct || strncasecmp(ct, "application/x-tar", 17) != 0) {
        api_error_msg(req, 415, "unsupported_media_type",
                      "the body must be a tar of the template directory (Content-Type: "
                      "application/x-tar)");
        return;
    }
    if (!sandbox_host_has_layers(a->sh)) {
        api_error_msg(req, 501, "not_implemented",
                      "building templates needs the ns isolation mode");
        return;
    }
    struct tb *w = calloc(1, sizeof(*w));
    if (!w) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    w->a = a;
    buf_init(&w->q, BUF_UNLIMITED);
    struct template_build_host host = {
            .loop = a->loop,
            .sh = a->sh,
            .set = a->templates,
            .default_memory_bytes = a->cfg.default_memory_bytes,
            .default_cpu_millis = a->cfg.default_cpu_millis,
            .default_pids = a->cfg.default_pids,
            .default_disk_bytes = a->cfg.default_disk_bytes,
            .disk_floor_bytes = a->cfg.disk_floor_bytes,
    };
    r = template_build_new(&host, http_req_query(req, "dir"), &build_ops, w, &w->b);
    if (r < 0) {
        api_error(req, r, NULL);
        buf_done(&w->q);
        free(w);
        return;
    }
    w->req = req;
    http_req_set_userdata(req, w, req_closed);
    http_req_stream_body(req, body_chunk, body_done);
}
