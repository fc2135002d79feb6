/*
 * processes.c - exec and the process table on the native wire.
 *
 * POST /v1/sandboxes/{id}/exec streams NDJSON: {"pid"} first, then
 * {"stdout"|"stderr": base64, "offset"} as output arrives, and last the
 * result (the exec and its stream are core/exec.c's). The process does not
 * depend on the connection: a client that drops reattaches with
 * GET .../processes/{pid}/output?offset=N&follow=1.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "template/template.h"
#include "util/b64.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"

/* --- exec --- */

static void
exec_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    struct exec_req *x = NULL;

    struct entry *e = api_find(a, req, q->id);
    if (!e)
        return;
    int r = api_exec_decode(a, body, len, &x, &err);
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    struct out_owner owner = {.kind = OWNER_SANDBOX};
    (void)snprintf(owner.id, sizeof(owner.id), "%s", e->id);
    api_exec_run(a, req, e->sb, &owner, x);
    api_exec_req_free(x);
}

/* --- processes --- */

/* The live sandbox of a sandbox entry or a warm workspace; answers 404
 * and returns NULL when there is none. */
static struct sandbox *
owner_sandbox(struct api *a, struct http_req *req, const struct out_owner *o)
{
    if (o->kind == OWNER_SANDBOX) {
        struct entry *e = api_find(a, req, o->id);
        return e ? e->sb : NULL;
    }
    struct sandbox *sb = a->ws ? workspaces_peek(a->ws, o->id) : NULL;
    if (!sb)
        api_error_msg(req, 404, "not_found",
                      "workspace '%s' is not warm: it has no processes (exec wakes it)", o->id);
    return sb;
}

static struct proc *
find_proc(struct http_req *req, struct sandbox *sb, const struct out_owner *o, long pidnum,
          const char *pidstr)
{
    int32_t pid = (int32_t)pidnum;
    if (pidstr && (parse_i32(pidstr, &pid) < 0 || pid <= 0)) {
        api_error_msg(req, 400, "bad_request", "'%.32s' is not a process id", pidstr);
        return NULL;
    }
    struct proc *p = sandbox_proc_find(sb, pid);
    if (!p)
        api_error_msg(req, 404, "not_found", "no process %d in %s '%s'", pid,
                      o->kind == OWNER_SANDBOX ? "sandbox" : "workspace", o->id);
    return p;
}

/* The owner a request's rq names (set when the route was matched). */
static struct out_owner
rq_owner(const struct rq *q)
{
    struct out_owner o = {.kind = q->workspace ? OWNER_WORKSPACE : OWNER_SANDBOX};
    (void)snprintf(o.id, sizeof(o.id), "%s", q->id);
    return o;
}

static void
list_procs(struct http_req *req, struct sandbox *sb)
{
    json_t *arr = json_array();
    for (struct proc *p = sandbox_proc_next(sb, NULL); p; p = sandbox_proc_next(sb, p))
        (void)json_array_append_new(arr, api_proc_json(p));
    json_t *o = json_object();
    (void)json_set(o, "processes", arr);
    api_json(req, 200, o);
}

static void
output(struct api *a, struct http_req *req, const struct out_owner *owner, struct proc *p)
{
    uint64_t offset = 0;
    bool follow = false;
    const char *s = http_req_query(req, "offset");
    if (s && parse_u64(s, &offset) < 0) {
        api_error_msg(req, 400, "bad_request", "'offset' must be a non-negative integer");
        return;
    }
    s = http_req_query(req, "follow");
    if (s && !parse_bool(s, &follow)) {
        api_error_msg(req, 400, "bad_request", "'follow' must be 1 or 0");
        return;
    }
    api_exec_stream(a, req, owner, p, offset, follow, NULL, false);
}

static const struct {
    const char *name;
    int sig;
} signals[] = {
        {"HUP", SIGHUP},     {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
        {"USR1", SIGUSR1},   {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
        {"STOP", SIGSTOP},   {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"PIPE", SIGPIPE},
        {"WINCH", SIGWINCH},
};

static void
signal_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    static const char *const allowed[] = {"signal", "group", NULL};
    struct err err = {0};
    json_t *j = NULL;
    bool group = true;
    int sig = 0, r;
    json_t *s;

    struct out_owner o = rq_owner(q);
    struct sandbox *sb = owner_sandbox(q->api, req, &o);
    struct proc *p = sb ? find_proc(req, sb, &o, q->pid, NULL) : NULL;
    if (!p)
        return;
    if ((r = json_parse(body, len, &j, &err)) < 0 ||
        (r = json_check_object(j, allowed, &err)) < 0 ||
        (r = json_get_bool(j, "group", false, &group, &err)) < 0)
        goto fail;
    s = json_object_get(j, "signal");
    if (json_is_integer(s) && json_integer_value(s) > 0 && json_integer_value(s) < 65) {
        sig = (int)json_integer_value(s);
    } else if (json_is_string(s)) {
        const char *n = json_string_value(s);
        if (!strncasecmp(n, "SIG", 3))
            n += 3;
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
            if (!strcasecmp(n, signals[i].name))
                sig = signals[i].sig;
    }
    if (!sig) {
        r = err_set(&err, EINVAL, "'signal' must be a signal name (\"TERM\") or number 1-64");
        goto fail;
    }
    r = proc_signal(p, sig, group);
    if (r == -ESRCH) {
        api_error_msg(req, 409, "conflict", "process %ld has exited", q->pid);
        goto out;
    }
    if (r < 0)
        goto fail;
    api_no_content(req);
    goto out;
fail:
    api_error(req, r, &err);
out:
    json_decref(j);
}

struct stdin_op {
    struct http_req *req;
};

static void
stdin_written(void *ud, int r)
{
    struct stdin_op *s = ud;
    if (r < 0)
        api_error_msg(s->req, 409, "conflict", "stdin closed before the data was written");
    else
        api_no_content(s->req);
    http_req_unref(s->req);
    free(s);
}

static void
stdin_done(struct http_req *req, const char *body, size_t len)
{
    struct rq *q = http_req_userdata(req);
    static const char *const allowed[] = {"data", "close", NULL};
    struct err err = {0};
    json_t *j = NULL;
    const char *data = NULL;
    bool close_after = false;
    struct buf in;
    struct proc *p = NULL;
    struct stdin_op *so = NULL;
    int r;

    buf_init(&in, PROC_STDIN_MAX);
    struct out_owner o = rq_owner(q);
    struct sandbox *sb = owner_sandbox(q->api, req, &o);
    p = sb ? find_proc(req, sb, &o, q->pid, NULL) : NULL;
    if (!p)
        goto out;
    if ((r = json_parse(body, len, &j, &err)) < 0 ||
        (r = json_check_object(j, allowed, &err)) < 0 ||
        (r = json_get_str(j, "data", true, &data, &err)) < 0 ||
        (r = json_get_bool(j, "close", false, &close_after, &err)) < 0)
        goto fail;
    if ((r = b64_decode(&in, data, strlen(data))) < 0) {
        r = err_set(&err, r == -EFBIG ? EFBIG : EINVAL,
                    "'data' is not valid base64 (or too large)");
        goto fail;
    }
    so = calloc(1, sizeof(*so));
    if (!so) {
        r = -ENOMEM;
        goto fail;
    }
    so->req = req;
    http_req_ref(req);
    r = proc_stdin_write(p, in.data, in.len, stdin_written, so);
    if (r < 0) {
        http_req_unref(req);
        free(so);
        if (r == -EPIPE) {
            api_error_msg(req, 409, "conflict", "stdin of process %ld is closed", q->pid);
            goto out;
        }
        if (r == -EFBIG)
            (void)err_set(&err, EFBIG, "more than %d bytes of stdin are waiting", PROC_STDIN_MAX);
        goto fail;
    }
    if (close_after)
        (void)proc_stdin_close(p);
    goto out;
fail:
    api_error(req, r, &err);
out:
    buf_done(&in);
    json_decref(j);
}

static void
close_stdin(struct http_req *req, struct proc *p)
{
    (void)proc_stdin_close(p);
    api_no_content(req);
}

/* --- routing --- */

static bool
method(struct http_req *req, const char *m, const char *allow)
{
    if (!strcmp(http_req_method(req), m))
        return true;
    http_req_add_header(req, "Allow", allow);
    api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here (allowed: %s)",
                  http_req_method(req), allow);
    return false;
}

void
api_processes(struct api *a, struct http_req *req, const struct out_owner *o, char **seg, int n)
{
    struct sandbox *sb = owner_sandbox(a, req, o);
    if (!sb)
        return;
    if (n == 1) {
        if (method(req, "GET", "GET"))
            list_procs(req, sb);
        return;
    }
    struct proc *p = find_proc(req, sb, o, 0, seg[1]);
    if (!p)
        return;
    if (n == 2) {
        if (method(req, "GET", "GET"))
            api_json(req, 200, api_proc_json(p));
        return;
    }
    const char *what = seg[2];
    if (n == 3 && !strcmp(what, "output")) {
        if (method(req, "GET", "GET"))
            output(a, req, o, p);
        return;
    }
    if (n == 3 &&
        (!strcmp(what, "signal") || !strcmp(what, "stdin") || !strcmp(what, "close-stdin"))) {
        if (!method(req, "POST", "POST"))
            return;
        if (!strcmp(what, "close-stdin")) {
            close_stdin(req, p);
            return;
        }
        struct rq *q = api_rq(a, req, o->id);
        if (!q)
            return;
        q->workspace = o->kind == OWNER_WORKSPACE;
        q->pid = proc_pid(p);
        http_req_read_body(req, API_JSON_MAX, !strcmp(what, "signal") ? signal_done : stdin_done);
        return;
    }
    api_error_msg(req, 404, "not_found", "no route for %s %.200s", http_req_method(req),
                  http_req_path(req));
}

void
wire_sandboxes(struct api *a, struct http_req *req, char **seg, int n)
{
    const char *id = seg[2];
    const char *op = seg[3];

    if (n == 4 && !strcmp(op, "exec")) {
        if (!method(req, "POST", "POST"))
            return;
        struct entry *e = api_find(a, req, id);
        if (!e || !api_need_cap(req, e, TEMPLATE_CAP_SHELL))
            return;
        if (api_rq(a, req, id))
            http_req_read_body(req, API_EXEC_BODY_MAX, exec_done);
        return;
    }
    if (n == 4 && (!strcmp(op, "walk") || !strcmp(op, "mkdir") || !strcmp(op, "rmdir") ||
                   !strcmp(op, "rename"))) {
        struct entry *e = api_find(a, req, id);
        if (e)
            wire_files(a, req, e, op, NULL);
        return;
    }
    if (n >= 4 && !strcmp(op, "processes")) {
        struct entry *e = api_find(a, req, id);
        if (!e || !api_need_cap(req, e, TEMPLATE_CAP_SHELL))
            return;
        struct out_owner o = {.kind = OWNER_SANDBOX};
        (void)snprintf(o.id, sizeof(o.id), "%s", id);
        api_processes(a, req, &o, seg + 3, n - 3);
        return;
    }
    api_error_msg(req, 404, "not_found", "no route for %s %.200s", http_req_method(req),
                  http_req_path(req));
}
