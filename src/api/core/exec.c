/*
 * exec.c - the api core's exec: an exec request decoded once (from a
 * native body, or made from C values by custom commands, code and tools),
 * started in a sandbox, and its output streamed as NDJSON through
 * http/ndjson.h, whichever surface asked (see exec.h). The process does
 * not depend on the connection: a client that drops reattaches through
 * api_exec_stream() from an offset.
 */
#include "api/core/exec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "http/ndjson.h"
#include "util/b64.h"
#include "util/json.h"
#include "util/timeutil.h"

#define LINE_ROOM (API_LINE_CHUNK / 3 * 4 + 256) /* worst-case size of one output line */
#define HOLD_MS   10                             /* see struct out_op */
#define HOLD_BODY (256 * 1024)                   /* largest answer sent in one piece */

/* --- JSON of a process --- */

json_t *
api_proc_json(struct proc *p)
{
    json_t *o = json_object();
    json_t *argv = json_array();
    const char *s = proc_argv_text(p);
    for (size_t i = 0; i < proc_argc(p); i++) {
        (void)json_array_append_new(argv, json_string(s));
        s += strlen(s) + 1;
    }
    const struct proc_result *res = proc_get_result(p);
    (void)json_set(o, "pid", json_integer(proc_pid(p)));
    (void)json_set(o, "argv", argv);
    (void)json_set(o, "cwd", json_string(proc_cwd(p)));
    (void)json_set(o, "user", json_string(proc_is_root(p) ? "root" : "user"));
    (void)json_set(o, "background", json_boolean(proc_is_background(p)));
    (void)json_set(o, "state", json_string(res ? "exited" : "running"));
    (void)json_set(o, "exit_code", res ? json_integer(res->exit_code) : json_null());
    (void)json_set(o, "signal", res && res->signal ? json_integer(res->signal) : json_null());
    (void)json_set(o, "timed_out", json_boolean(res && res->timed_out));
    (void)json_set(o, "oom_killed", json_boolean(res && res->oom_killed));
    (void)json_set(o, "started_at", api_time_json_or_null(proc_started_wall_ms(p)));
    (void)json_set(o, "ended_at", api_time_json_or_null(res ? proc_ended_wall_ms(p) : 0));
    (void)json_set(o, "duration_ms",
                   res ? json_integer((json_int_t)res->duration_ms) : json_null());
    (void)json_set(o, "output_start", json_integer((json_int_t)proc_output_start(p)));
    (void)json_set(o, "output_end", json_integer((json_int_t)proc_output_end(p)));
    (void)json_set(o, "stdin_open", json_boolean(proc_stdin_is_open(p)));
    return o;
}

/* --- output streams (exec and output routes) --- */

/* An output stream. A foreground exec first holds its answer: a process
 * that ends within HOLD_MS, before writing anything, is answered with the
 * whole NDJSON body in one piece (one write, one segment, no chunking);
 * otherwise the stream starts at the first output or after HOLD_MS. */
struct out_op {
    struct api *api;
    struct http_req *req;
    struct out_owner owner;
    struct http_stream *stream;
    struct proc_reader *reader;
    bool follow;
    bool counted; /* counted in the entry's streams */
    bool holding;
    uint64_t hold_until;     /* monotonic ms */
    struct loop_timer *hold; /* fires at hold_until, or at once when woken */
    json_t *first;           /* the line to send before any output */
    struct buf line;
};

static const char *
chunk_key(const struct proc_chunk *c)
{
    return c->stream == PROC_STDOUT ? "stdout" : "stderr";
}

static int
write_line(struct out_op *op, json_t *v)
{
    return ndjson_write(op->stream, &op->line, v);
}

static int
write_chunk(struct out_op *op, const struct proc_chunk *c)
{
    return ndjson_write_data(op->stream, &op->line, chunk_key(c), c->data, c->len, c->offset);
}

static json_t *
result_json(struct proc *p)
{
    json_t *o = json_object();
    const struct proc_result *res = p ? proc_get_result(p) : NULL;
    if (!res) {
        (void)json_set(o, "error", json_string("the process record is no longer kept"));
        return o;
    }
    (void)json_set(o, "exit_code", json_integer(res->exit_code));
    (void)json_set(o, "timed_out", json_boolean(res->timed_out));
    (void)json_set(o, "oom_killed", json_boolean(res->oom_killed));
    (void)json_set(o, "duration_ms", json_integer((json_int_t)res->duration_ms));
    if (res->signal)
        (void)json_set(o, "signal", json_integer(res->signal));
    (void)json_set(o, "pid", json_integer(proc_pid(p)));
    (void)json_set(o, "output_end", json_integer((json_int_t)proc_output_end(p)));
    return o;
}

static void
out_fill(struct http_stream *s, void *ud)
{
    struct out_op *op = ud;
    (void)s;

    while (http_stream_room(op->stream) >= LINE_ROOM) {
        struct proc_chunk c;
        int r = proc_reader_peek(op->reader, API_LINE_CHUNK, &c);
        if (r == 1 && c.stream == 0) {
            json_t *g = json_object();
            (void)json_set(g, "dropped", json_integer((json_int_t)c.dropped));
            (void)json_set(g, "offset", json_integer((json_int_t)c.offset));
            if (write_line(op, g) < 0)
                return;
            proc_reader_consume(op->reader, 0);
            continue;
        }
        if (r == 1) {
            if (write_chunk(op, &c) < 0)
                return;
            proc_reader_consume(op->reader, c.len);
            continue;
        }
        if (r == -ENODATA) {
            (void)write_line(op, result_json(proc_reader_proc(op->reader)));
            http_stream_end(op->stream);
            return;
        }
        /* nothing now */
        if (!op->follow)
            http_stream_end(op->stream);
        return;
    }
}

static void
out_wake(void *ud)
{
    struct out_op *op = ud;
    if (op->stream)
        http_stream_wake(op->stream);
    else if (op->holding)
        /* Decide outside the process's own bookkeeping, through the timer:
         * unlike a deferred call it dies with op. */
        (void)loop_timer_arm(op->hold, now_msec());
}

static void
out_free(struct out_op *op)
{
    loop_timer_free(op->hold);
    json_decref(op->first);
    if (op->counted)
        api_stream_attached(op->api, &op->owner, false);
    proc_reader_free(op->reader);
    http_stream_release(op->stream);
    buf_done(&op->line);
    http_req_unref(op->req);
    free(op);
}

static void
out_closed(struct http_stream *s, void *ud)
{
    (void)s;
    out_free(ud);
}

static const struct http_stream_ops out_ops = {
        .fill = out_fill,
        .closed = out_closed,
};

static int
start_stream(struct out_op *op)
{
    op->holding = false;
    loop_timer_disarm(op->hold);
    int r = http_stream_start(op->req, 200, "application/x-ndjson", &out_ops, op, &op->stream);
    if (r < 0)
        return r;
    if (op->first) {
        json_t *f = op->first;
        op->first = NULL;
        (void)write_line(op, f);
    }
    return 0;
}

/* Answers a finished process in one piece when it fits; returns 1 if done. */
static int
answer_whole(struct out_op *op)
{
    struct buf b;
    struct proc_chunk c;
    int r = 0;

    buf_init(&b, HOLD_BODY);
    if (op->first)
        r = ndjson_line(&b, json_incref(op->first));
    while (r == 0) {
        int k = proc_reader_peek(op->reader, API_LINE_CHUNK, &c);
        if (k == -ENODATA) {
            r = ndjson_line(&b, result_json(proc_reader_proc(op->reader)));
            if (r == 0) {
                http_respond(op->req, 200, "application/x-ndjson", b.data, b.len);
                buf_done(&b);
                return 1;
            }
            break;
        }
        if (k != 1)
            break;
        r = c.stream ? ndjson_data_line(&b, chunk_key(&c), c.data, c.len, c.offset) : 0;
        proc_reader_consume(op->reader, c.len);
    }
    /* Too big (or odd): rewind and stream it instead. */
    buf_done(&b);
    struct proc *p = proc_reader_proc(op->reader);
    proc_reader_free(op->reader);
    op->reader = NULL;
    return p && proc_reader_new(p, 0, out_wake, op, &op->reader) == 0 ? 0 : -ENOMEM;
}

static void
hold_decide(struct out_op *op, bool timed_out)
{
    if (!op->holding)
        return;
    struct proc *p = proc_reader_proc(op->reader);
    if (!p || proc_get_state(p) == PROC_EXITED) {
        int r = answer_whole(op);
        if (r == 1) {
            op->holding = false;
            out_free(op); /* the request is answered; nothing else holds op */
            return;
        }
    } else if (!timed_out) {
        struct proc_chunk c;
        if (proc_reader_peek(op->reader, 1, &c) != 1) {
            (void)loop_timer_arm(op->hold, op->hold_until); /* keep holding */
            return;
        }
    }
    if (start_stream(op) < 0) {
        api_error(op->req, -ENOMEM, NULL);
        out_free(op);
    }
}

static void
on_hold_timer(struct loop_timer *t, void *ud)
{
    struct out_op *op = ud;
    uint64_t now = now_msec();
    hold_decide(op, now >= op->hold_until);
    /* op may be gone now; if it still holds, t is its timer. */
}

void
api_exec_stream(struct api *a, struct http_req *req, const struct out_owner *owner, struct proc *p,
                uint64_t offset, bool follow, json_t *first, bool hold)
{
    struct out_op *op = calloc(1, sizeof(*op));
    int r;

    if (!op) {
        json_decref(first);
        api_error(req, -ENOMEM, NULL);
        return;
    }
    op->api = a;
    op->req = req;
    http_req_ref(req);
    op->follow = follow;
    op->first = first;
    op->owner = *owner;
    buf_init(&op->line, LINE_ROOM * 2);
    api_stream_attached(a, owner, true);
    op->counted = true;
    r = proc_reader_new(p, offset, out_wake, op, &op->reader);
    if (r == 0 && hold) {
        op->holding = true;
        op->hold_until = now_msec() + HOLD_MS;
        r = loop_timer_new(a->loop, on_hold_timer, op, &op->hold);
        if (r == 0)
            r = loop_timer_arm(op->hold, op->hold_until);
        if (r == 0) {
            hold_decide(op, false);
            return;
        }
    }
    if (r == 0)
        r = start_stream(op);
    if (r < 0) {
        api_error(req, r, NULL);
        out_free(op);
    }
}

/* --- exec --- */

struct exec_req {
    struct sandbox_exec x;
    const char **av;
    char **ev;
    struct buf in;
    json_t *j;
};

void
api_exec_req_free(struct exec_req *q)
{
    if (!q)
        return;
    for (size_t i = 0; q->ev && q->ev[i]; i++)
        free(q->ev[i]);
    free(q->ev);
    free(q->av);
    buf_done(&q->in);
    json_decref(q->j);
    free(q);
}

int
api_decode_seconds(json_t *j, const char *key, uint64_t *ret_ms, struct err *err)
{
    double s;
    int r = json_get_num(j, key, false, 0, 7 * 86400.0, &s, err);
    if (r > 0)
        *ret_ms = (uint64_t)(s * 1000.0 + 0.5);
    return r;
}

int
api_exec_req_new(struct api *a, const char *const *argv, const char *const *env, const char *cwd,
                 uint64_t timeout_ms, const void *stdin_data, size_t stdin_len,
                 struct exec_req **ret)
{
    size_t na = 0, ne = 0;
    while (argv[na])
        na++;
    while (env && env[ne])
        ne++;
    struct exec_req *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    buf_init(&q->in, PROC_STDIN_MAX);
    q->j = json_array(); /* owns the argv and cwd strings */
    q->av = calloc(na + 1, sizeof(*q->av));
    q->ev = calloc(ne + 1, sizeof(*q->ev));
    int r = q->j && q->av && q->ev ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < na; i++) {
        json_t *s = json_string(argv[i]);
        if (!s || json_array_append_new(q->j, s) < 0)
            r = -EINVAL; /* not UTF-8 */
        else
            q->av[i] = json_string_value(s);
    }
    for (size_t i = 0; r == 0 && i < ne; i++)
        if (!(q->ev[i] = strdup(env[i])))
            r = -ENOMEM;
    if (r == 0 && cwd) {
        json_t *s = json_string(cwd);
        if (!s || json_array_append_new(q->j, s) < 0)
            r = -EINVAL;
        else
            q->x.cwd = json_string_value(s);
    }
    if (r == 0 && stdin_len)
        r = buf_put(&q->in, stdin_data, stdin_len);
    if (r < 0) {
        api_exec_req_free(q);
        return r;
    }
    q->x.stdin_data = q->in.data;
    q->x.stdin_len = q->in.len;
    q->x.argv = q->av;
    q->x.env = (const char *const *)q->ev;
    q->x.timeout_ms = timeout_ms ? timeout_ms : a->cfg.exec_timeout_ms;
    *ret = q;
    return 0;
}

int
api_exec_decode(struct api *a, const char *body, size_t len, struct exec_req **ret, struct err *err)
{
    static const char *const allowed[] = {"argv",       "env",        "cwd",       "user",
                                          "stdin",      "stdin_open", "timeout_s", "idle_timeout_s",
                                          "background", NULL};
    json_t *argv = NULL, *env = NULL;
    const char *cwd = NULL, *user = "user", *stdin_b64 = NULL;
    size_t n, k = 0;
    int r;
    struct exec_req *q = calloc(1, sizeof(*q));

    if (!q)
        return -ENOMEM;
    buf_init(&q->in, PROC_STDIN_MAX);
    q->x.timeout_ms = a->cfg.exec_timeout_ms;
    if ((r = json_parse(body, len, &q->j, err)) < 0 ||
        (r = json_check_object(q->j, allowed, err)) < 0 ||
        (r = json_get_str_array(q->j, "argv", true, 1, API_ARGV_MAX, API_ARGV_BYTES, &argv, err)) <
                0 ||
        (r = json_get_str_map(q->j, "env", SANDBOX_ENV_MAX / 2, API_ENV_BYTES, &env, err)) < 0 ||
        (r = json_get_str(q->j, "cwd", false, &cwd, err)) < 0 ||
        (r = json_get_str(q->j, "user", false, &user, err)) < 0 ||
        (r = json_get_str(q->j, "stdin", false, &stdin_b64, err)) < 0 ||
        (r = json_get_bool(q->j, "stdin_open", false, &q->x.stdin_open, err)) < 0 ||
        (r = json_get_bool(q->j, "background", false, &q->x.background, err)) < 0 ||
        (r = api_decode_seconds(q->j, "timeout_s", &q->x.timeout_ms, err)) < 0 ||
        (r = api_decode_seconds(q->j, "idle_timeout_s", &q->x.idle_timeout_ms, err)) < 0)
        goto fail;
    if (!json_string_value(json_array_get(argv, 0))[0]) {
        r = err_set(err, EINVAL, "'argv[0]' must not be empty");
        goto fail;
    }
    if (!strcmp(user, "root")) {
        q->x.root = true;
    } else if (strcmp(user, "user") != 0) {
        r = err_set(err, EINVAL, "'user' must be \"user\" or \"root\", not '%.32s'", user);
        goto fail;
    }
    if (cwd && strlen(cwd) > 4096) {
        r = err_set(err, EINVAL, "'cwd' is longer than 4096 bytes");
        goto fail;
    }
    if (stdin_b64 && (r = b64_decode(&q->in, stdin_b64, strlen(stdin_b64))) < 0) {
        if (r == -EFBIG)
            r = err_set(err, EFBIG, "'stdin' is larger than %d bytes", PROC_STDIN_MAX);
        else
            r = err_set(err, EINVAL, "'stdin' is not valid base64");
        goto fail;
    }
    n = json_array_size(argv);
    q->av = calloc(n + 1, sizeof(char *));
    q->ev = calloc((env ? json_object_size(env) : 0) + 1, sizeof(char *));
    if (!q->av || !q->ev) {
        r = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        q->av[i] = json_string_value(json_array_get(argv, i));
    if (env) {
        const char *key;
        json_t *v;
        json_object_foreach (env, key, v) {
            if (!*key || strchr(key, '=')) {
                r = err_set(err, EINVAL, "'env' key '%.64s' is not a valid variable name", key);
                goto fail;
            }
            if (asprintf(&q->ev[k], "%s=%s", key, json_string_value(v)) < 0) {
                q->ev[k] = NULL;
                r = -ENOMEM;
                goto fail;
            }
            k++;
        }
    }
    q->x.argv = q->av;
    q->x.env = (const char *const *)q->ev;
    q->x.cwd = cwd;
    q->x.stdin_data = q->in.data;
    q->x.stdin_len = q->in.len;
    *ret = q;
    return 0;
fail:
    api_exec_req_free(q);
    return r;
}

struct exec_op {
    struct api *api;
    struct http_req *req;
    struct out_owner owner;
    bool background;
};

static void
exec_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct exec_op *x = ud;
    struct api *a = x->api;
    struct http_req *req = x->req;

    (void)sb;
    if (r < 0) {
        a->m.exec_failures++;
        if (!http_req_closed(req)) {
            /* A bad cwd is the caller's mistake, not ours. */
            api_error(req, r == -ENOENT || r == -ENOTDIR ? -EINVAL : r, err);
        }
    } else if (!http_req_closed(req)) {
        if (x->background) {
            api_json(req, 201, api_proc_json(p));
        } else {
            json_t *first = json_object();
            (void)json_set(first, "pid", json_integer(proc_pid(p)));
            api_exec_stream(a, req, &x->owner, p, 0, true, first, true);
        }
    }
    http_req_unref(req);
    free(x);
}

void
api_exec_run(struct api *a, struct http_req *req, struct sandbox *sb, const struct out_owner *owner,
             const struct exec_req *q)
{
    struct err err = {0};
    struct exec_op *op = calloc(1, sizeof(*op));
    if (!op) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    op->api = a;
    op->req = req;
    op->owner = *owner;
    op->background = q->x.background;
    http_req_ref(req);
    int r = sandbox_exec(sb, &q->x, exec_started, op, &err);
    if (r < 0) {
        http_req_unref(req);
        free(op);
        a->m.exec_failures++;
        api_error(req, r, &err);
        return;
    }
    a->m.execs++;
}
