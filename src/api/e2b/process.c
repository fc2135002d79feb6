/*
 * process.c - envd's process.Process over the sandbox's process table.
 *
 * Start runs a process exactly as the native exec does (sandbox_exec),
 * then streams its output as Connect envelopes: {"event":{"start"}} first,
 * data as it comes, {"event":{"end"}} after exit and EOF, and the
 * end-stream frame. The process never depends on the stream: a client that
 * goes away leaves it running (in List, reachable by Connect, which streams
 * only new output). Connect-Timeout-Ms on Start is the process's deadline
 * (killed, deadline_exceeded); on Connect it only bounds the stream.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b/e2b-internal.h"
#include "http/connect.h"
#include "template/template.h"
#include "util/b64.h"
#include "util/json.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/timeutil.h"

#define OUT_CHUNK (32 * 1024)                     /* output bytes per data event */
#define OUT_ROOM  (OUT_CHUNK / 3 * 4 + 4096 + 64) /* worst-case size of one envelope */
#define ARGS_MAX  4096

/* --- output streams --- */

struct pstream {
    struct e2b_stream es; /* in the entry's stream list while attached */
    struct api *api;
    struct http_req *req;
    struct http_stream *stream;
    struct proc_reader *reader;
    struct out_owner owner;
    bool counted;
    bool is_start; /* a Start stream: the deadline was the process's */
    bool pty;      /* output goes out as data.pty */
    bool ended;    /* the end-stream frame is written */
    uint64_t keepalive_ms;
    struct loop_timer *keepalive;
    struct loop_timer *deadline; /* Connect: ends the stream, not the process */
    struct buf env;              /* one envelope being built */
};

static int
put_envelope(struct pstream *ps, uint8_t flags)
{
    /* ps->env holds 5 bytes of room, then the payload. */
    uint8_t h[5];
    connect_env_header(h, flags, (uint32_t)(ps->env.len - 5));
    memcpy(ps->env.data, h, 5);
    return http_stream_write(ps->stream, ps->env.data, ps->env.len);
}

static int
begin_envelope(struct pstream *ps)
{
    buf_reset(&ps->env);
    return buf_put(&ps->env, "\0\0\0\0\0", 5);
}

static int
write_event(struct pstream *ps, json_t *event)
{
    json_t *o = json_object();
    (void)json_set(o, "event", event);
    int r = begin_envelope(ps);
    if (r == 0)
        r = json_dump_buf(o, &ps->env);
    json_decref(o);
    if (r == 0)
        r = put_envelope(ps, 0);
    return r;
}

static int
write_data(struct pstream *ps, const struct proc_chunk *c)
{
    int r = begin_envelope(ps);
    if (r == 0)
        r = buf_puts(&ps->env, ps->pty                    ? "{\"event\":{\"data\":{\"pty\":\""
                               : c->stream == PROC_STDERR ? "{\"event\":{\"data\":{\"stderr\":\""
                                                          : "{\"event\":{\"data\":{\"stdout\":\"");
    if (r == 0)
        r = b64_encode(&ps->env, c->data, c->len);
    if (r == 0)
        r = buf_puts(&ps->env, "\"}}}");
    if (r == 0)
        r = put_envelope(ps, 0);
    return r;
}

static void
end_stream(struct pstream *ps, const char *code, const char *msg)
{
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    if (connect_end_stream_json(&b, code, msg) == 0)
        (void)http_stream_write(ps->stream, b.data, b.len);
    buf_done(&b);
    ps->ended = true;
    http_stream_end(ps->stream);
}

/* Go's os/exec names, as envd reports them ("signal: killed"). */
static const char *
go_signal_name(int sig, char *buf, size_t n)
{
    static const char *const names[] = {
            [SIGHUP] = "hangup",
            [SIGINT] = "interrupt",
            [SIGQUIT] = "quit",
            [SIGILL] = "illegal instruction",
            [SIGTRAP] = "trace/breakpoint trap",
            [SIGABRT] = "aborted",
            [SIGBUS] = "bus error",
            [SIGFPE] = "floating point exception",
            [SIGKILL] = "killed",
            [SIGUSR1] = "user defined signal 1",
            [SIGSEGV] = "segmentation fault",
            [SIGUSR2] = "user defined signal 2",
            [SIGPIPE] = "broken pipe",
            [SIGALRM] = "alarm clock",
            [SIGTERM] = "terminated",
    };
    if (sig > 0 && (size_t)sig < ELEMENTSOF(names) && names[sig])
        return names[sig];
    (void)snprintf(buf, n, "signal %d", sig);
    return buf;
}

static json_t *
end_event(const struct proc_result *res)
{
    json_t *end = json_object();
    char status[96], tmp[32];
    if (res->signal) {
        (void)snprintf(status, sizeof(status), "signal: %s",
                       go_signal_name(res->signal, tmp, sizeof(tmp)));
        (void)json_set(end, "exitCode", json_integer(-1));
        (void)json_set(end, "status", json_string(status));
        (void)json_set(end, "error", json_string(status));
    } else {
        (void)snprintf(status, sizeof(status), "exit status %d", res->exit_code);
        (void)json_set(end, "exitCode", json_integer(res->exit_code));
        (void)json_set(end, "exited", json_true());
        (void)json_set(end, "status", json_string(status));
        if (res->exit_code != 0)
            (void)json_set(end, "error", json_string(status));
    }
    json_t *ev = json_object();
    (void)json_set(ev, "end", end);
    return ev;
}

static void
arm_keepalive(struct pstream *ps)
{
    if (ps->keepalive)
        (void)loop_timer_arm(ps->keepalive, now_msec() + ps->keepalive_ms);
}

static void
ps_fill(struct http_stream *s, void *ud)
{
    struct pstream *ps = ud;
    (void)s;
    if (ps->ended)
        return;
    while (http_stream_room(ps->stream) >= OUT_ROOM) {
        struct proc_chunk c;
        int r = proc_reader_peek(ps->reader, OUT_CHUNK, &c);
        if (r == 1) {
            if (c.stream != 0 && write_data(ps, &c) < 0)
                return;
            proc_reader_consume(ps->reader, c.len);
            arm_keepalive(ps);
            continue;
        }
        if (r != -ENODATA)
            return; /* nothing now: the reader wakes us */
        struct proc *p = proc_reader_proc(ps->reader);
        const struct proc_result *res = p ? proc_get_result(p) : NULL;
        if (!res) {
            /* The sandbox is gone: cut, as a dying VM would. */
            ps->ended = true;
            http_stream_abort(ps->stream);
            return;
        }
        if (res->timed_out && ps->is_start) {
            end_stream(ps, "deadline_exceeded",
                       "the process was killed: its Connect-Timeout-Ms ran out");
            return;
        }
        if (write_event(ps, end_event(res)) < 0)
            return;
        end_stream(ps, NULL, NULL);
        return;
    }
}

static void
ps_wake(void *ud)
{
    struct pstream *ps = ud;
    if (ps->stream)
        http_stream_wake(ps->stream);
}

static void
ps_free(struct pstream *ps)
{
    e2b_stream_detach(&ps->es);
    loop_timer_free(ps->keepalive);
    loop_timer_free(ps->deadline);
    if (ps->counted)
        api_stream_attached(ps->api, &ps->owner, false);
    proc_reader_free(ps->reader);
    http_stream_release(ps->stream);
    buf_done(&ps->env);
    http_req_unref(ps->req);
    free(ps);
}

static void
ps_closed(struct http_stream *s, void *ud)
{
    (void)s;
    ps_free(ud);
}

static const struct http_stream_ops ps_ops = {
        .fill = ps_fill,
        .closed = ps_closed,
};

static void
ps_cut(struct e2b_stream *es)
{
    struct pstream *ps = (struct pstream *)es;
    if (ps->stream && !ps->ended) {
        ps->ended = true;
        http_stream_abort(ps->stream);
    }
}

static void
on_keepalive(struct loop_timer *t, void *ud)
{
    struct pstream *ps = ud;
    (void)t;
    if (ps->ended)
        return;
    if (http_stream_room(ps->stream) >= 64) {
        json_t *ev = json_object();
        (void)json_set(ev, "keepalive", json_object());
        (void)write_event(ps, ev);
    }
    arm_keepalive(ps);
}

static void
on_connect_deadline(struct loop_timer *t, void *ud)
{
    struct pstream *ps = ud;
    (void)t;
    if (!ps->ended)
        end_stream(ps, "deadline_exceeded", "the stream's Connect-Timeout-Ms ran out");
}

/* Answers req with a stream of p's output from offset, start event first. */
static void
stream_process(struct e2b_call *c, struct http_req *req, struct entry *e, struct proc *p,
               uint64_t offset, bool is_start)
{
    struct pstream *ps = calloc(1, sizeof(*ps));
    int r;
    if (!ps) {
        http_respond(req, 500, NULL, "", 0);
        return;
    }
    ps->api = c->api;
    ps->req = req;
    http_req_ref(req);
    ps->is_start = is_start;
    ps->pty = proc_is_pty(p);
    ps->es.cut = ps_cut;
    list_init(&ps->es.link);
    buf_init(&ps->env, OUT_ROOM * 2);
    ps->owner.kind = OWNER_SANDBOX;
    (void)snprintf(ps->owner.id, sizeof(ps->owner.id), "%s", e->id);
    r = proc_reader_new(p, offset, ps_wake, ps, &ps->reader);
    if (r == 0)
        r = http_stream_start(req, 200, "application/connect+json", &ps_ops, ps, &ps->stream);
    if (r < 0) {
        ps_free(ps);
        http_respond(req, 500, NULL, "", 0);
        return;
    }
    api_stream_attached(c->api, &ps->owner, true);
    ps->counted = true;
    e2b_stream_attach(e, &ps->es);
    json_t *start = json_object(), *ev = json_object();
    (void)json_set(start, "pid", json_integer(proc_pid(p)));
    (void)json_set(ev, "start", start);
    (void)write_event(ps, ev);
    if (c->keepalive_ms) {
        ps->keepalive_ms = c->keepalive_ms;
        if (loop_timer_new(c->api->loop, on_keepalive, ps, &ps->keepalive) == 0)
            arm_keepalive(ps);
    }
    if (!is_start && c->timeout_ms &&
        loop_timer_new(c->api->loop, on_connect_deadline, ps, &ps->deadline) == 0)
        (void)loop_timer_arm(ps->deadline, now_msec() + c->timeout_ms);
    ps_fill(ps->stream, ps);
}

/* --- Start --- */

struct start_op {
    struct e2b_call call;
    struct http_req *req;
    char cwd_shown[512];
};

static void
started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct start_op *op = ud;
    struct http_req *req = op->req;
    (void)sb;
    struct entry *e = e2b_call_entry(&op->call);
    if (!http_req_closed(req)) {
        if (r == -ENOENT || r == -ENOTDIR)
            e2b_stream_error(req, "invalid_argument", "cwd '%s' does not exist", op->cwd_shown);
        else if (r < 0)
            e2b_stream_error(req, e2b_code_for_errno(r), "%s",
                             err && err->msg[0] ? err->msg : "cannot start the process");
        else if (!e)
            e2b_stream_error(req, "unavailable", "the sandbox is gone");
        else
            stream_process(&op->call, req, e, p, 0, true);
    }
    http_req_unref(req);
    free(op);
}

/* cwd as envd takes it: "~" and "~/x" under the user's home, relative
 * below home; NULL = home. */
static const char *
start_cwd(const char *cwd)
{
    if (!cwd || !*cwd || !strcmp(cwd, "~") || !strcmp(cwd, "~/"))
        return NULL;
    if (!strncmp(cwd, "~/", 2))
        return cwd + 2;
    return cwd;
}

/* A terminal's size from {"size":{"cols","rows"}}; false when malformed. */
static bool
pty_size(json_t *pty, uint16_t *cols, uint16_t *rows)
{
    json_t *size = json_object_get(pty, "size");
    json_t *c = size ? json_object_get(size, "cols") : NULL;
    json_t *r = size ? json_object_get(size, "rows") : NULL;
    if (!json_is_object(pty) || (size && !json_is_object(size)) ||
        (c && (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > 4096)) ||
        (r && (!json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > 4096)))
        return false;
    *cols = c ? (uint16_t)json_integer_value(c) : 80;
    *rows = r ? (uint16_t)json_integer_value(r) : 24;
    return true;
}

static void
spawn(struct http_req *req, struct e2b_call *c, struct entry *e, const char *const *argv,
      char **envv, const char *cwd, bool stdin_open, json_t *pty)
{
    struct err err = {0};
    int r;
    struct start_op *op = calloc(1, sizeof(*op));
    if (!op) {
        e2b_stream_error(req, "internal", "out of memory");
        return;
    }
    op->call = *c;
    op->req = req;
    (void)snprintf(op->cwd_shown, sizeof(op->cwd_shown), "%s", cwd ? cwd : "");
    struct sandbox_exec x = {
            .argv = argv,
            .env = (const char *const *)envv,
            .cwd = start_cwd(cwd),
            .root = c->user.root,
            .stdin_open = stdin_open,
            .timeout_ms = c->timeout_ms,
            .background = true, /* the process never depends on the stream */
    };
    if (pty) {
        x.pty = true;
        (void)pty_size(pty, &x.pty_cols, &x.pty_rows); /* checked by start() */
    }
    http_req_ref(req);
    r = sandbox_exec(e->sb, &x, started, op, &err);
    if (r < 0) {
        http_req_unref(req);
        free(op);
        e2b_stream_error(req, e2b_code_for_errno(r), "%s",
                         err.msg[0] ? err.msg : "cannot start the process");
        return;
    }
    c->api->m.execs++;
}

static void
start(struct http_req *req, struct e2b_call *c, json_t *msg)
{
    struct err err = {0};
    json_t *pj = json_object_get(msg, "process");
    const char *cmd = NULL, *cwd = NULL;
    json_t *args = NULL, *envs = NULL;
    const char *argv[ARGS_MAX + 2];
    char **envv = NULL;
    size_t na = 0, ne = 0;
    bool stdin_open = true;
    struct entry *e = e2b_call_entry(c);
    int r;

    if (!e) {
        e2b_stream_error(req, "unavailable", "the sandbox is gone");
        return;
    }
    if (!api_need_cap(req, e, TEMPLATE_CAP_SHELL))
        return;
    json_t *pty = json_object_get(msg, "pty");
    uint16_t cols, rows;
    if (json_is_null(pty))
        pty = NULL;
    if (pty && !api_need_cap(req, e, TEMPLATE_CAP_TERMINAL))
        return;
    if (pty && !pty_size(pty, &cols, &rows)) {
        e2b_stream_error(req, "invalid_argument",
                         "'pty' must be {\"size\":{\"cols\":1-4096,\"rows\":1-4096}}");
        return;
    }
    if (!json_is_object(pj) || (r = json_get_str(pj, "cmd", true, &cmd, &err)) < 0 ||
        (r = json_get_str(pj, "cwd", false, &cwd, &err)) < 0 ||
        (r = json_get_str_array(pj, "args", false, 0, ARGS_MAX, API_ARGV_BYTES, &args, &err)) < 0 ||
        (r = json_get_str_map(pj, "envs", API_ENV_MAX, API_ENV_BYTES, &envs, &err)) < 0 ||
        (r = json_get_bool(msg, "stdin", false, &stdin_open, &err)) < 0) {
        e2b_stream_error(req, "invalid_argument", "%s",
                         err.msg[0] ? err.msg : "'process' must be an object");
        return;
    }
    if (!*cmd) {
        e2b_stream_error(req, "invalid_argument", "'process.cmd' must not be empty");
        return;
    }
    argv[na++] = cmd;
    for (size_t i = 0; args && i < json_array_size(args); i++)
        argv[na++] = json_string_value(json_array_get(args, i));
    argv[na] = NULL;
    envv = calloc((envs ? json_object_size(envs) : 0) + 1, sizeof(*envv));
    if (!envv) {
        e2b_stream_error(req, "internal", "out of memory");
        return;
    }
    if (envs) {
        const char *k;
        json_t *v;
        json_object_foreach (envs, k, v) {
            if (!*k || strchr(k, '=')) {
                e2b_stream_error(req, "invalid_argument",
                                 "'%.64s' is not an environment variable name", k);
                goto out;
            }
            if (asprintf(&envv[ne], "%s=%s", k, json_string_value(v)) < 0) {
                envv[ne] = NULL;
                e2b_stream_error(req, "internal", "out of memory");
                goto out;
            }
            ne++;
        }
    }
    spawn(req, c, e, argv, envv, cwd, stdin_open, pty);
out:
    for (size_t i = 0; i < ne; i++)
        free(envv[i]);
    free(envv);
}

/* --- the unary methods and Connect --- */

static int
selected_pid(json_t *msg, int32_t *ret)
{
    json_t *pj = json_object_get(msg, "process");
    json_t *pid = pj ? json_object_get(pj, "pid") : NULL;
    if (json_is_integer(pid) && json_integer_value(pid) > 0 &&
        json_integer_value(pid) <= INT32_MAX) {
        *ret = (int32_t)json_integer_value(pid);
        return 0;
    }
    if (json_is_string(pid)) { /* proto3 JSON allows numbers as strings */
        uint32_t v;
        if (parse_u32(json_string_value(pid), &v) == 0 && v > 0 && v <= INT32_MAX) {
            *ret = (int32_t)v;
            return 0;
        }
    }
    return -EINVAL;
}

static struct proc *
running_proc(struct entry *e, int32_t pid)
{
    struct proc *p = sandbox_proc_find(e->sb, pid);
    return p && proc_get_state(p) != PROC_EXITED ? p : NULL;
}

static json_t *
list_json(struct entry *e)
{
    json_t *arr = json_array();
    for (struct proc *p = sandbox_proc_next(e->sb, NULL); p; p = sandbox_proc_next(e->sb, p)) {
        if (proc_get_state(p) != PROC_RUNNING)
            continue;
        json_t *cfg = json_object(), *args = json_array();
        const char *s = proc_argv_text(p);
        for (size_t i = 0; i < proc_argc(p); i++) {
            if (i == 0)
                (void)json_set(cfg, "cmd", json_string(s));
            else
                (void)json_array_append_new(args, json_string(s));
            s += strlen(s) + 1;
        }
        (void)json_set(cfg, "args", args);
        (void)json_set(cfg, "envs", json_object());
        (void)json_set(cfg, "cwd", json_string(proc_cwd(p)));
        json_t *o = json_object();
        (void)json_set(o, "pid", json_integer(proc_pid(p)));
        (void)json_set(o, "config", cfg);
        (void)json_array_append_new(arr, o);
    }
    json_t *o = json_object();
    (void)json_set(o, "processes", arr);
    return o;
}

static int
signal_of(json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v) == 9 ? SIGKILL : json_integer_value(v) == 15 ? SIGTERM : 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "SIGNAL_SIGKILL"))
            return SIGKILL;
        if (!strcmp(s, "SIGNAL_SIGTERM"))
            return SIGTERM;
    }
    return 0;
}

static void
send_input(struct http_req *req, struct entry *e, json_t *msg, int32_t pid)
{
    json_t *in = json_object_get(msg, "input");
    json_t *data = in ? json_object_get(in, "stdin") : NULL;
    struct proc *p = running_proc(e, pid);
    if (!p) {
        e2b_rpc_error(req, "not_found", "process with pid %d not found", pid);
        return;
    }
    if (in && json_object_get(in, "pty")) {
        if (!proc_is_pty(p)) {
            e2b_rpc_error(req, "internal", "process %d has no PTY", pid);
            return;
        }
        data = json_object_get(in, "pty");
    } else if (proc_is_pty(p)) {
        e2b_rpc_error(req, "internal", "process %d is a PTY: send input as 'pty'", pid);
        return;
    }
    if (!json_is_string(data)) {
        e2b_rpc_error(req, "invalid_argument", "'input.stdin' (base64) is required");
        return;
    }
    struct buf b;
    buf_init(&b, PROC_STDIN_MAX);
    const char *s = json_string_value(data);
    if (b64_decode(&b, s, strlen(s)) < 0) {
        buf_done(&b);
        e2b_rpc_error(req, "invalid_argument", "'input.stdin' is not base64");
        return;
    }
    int r = b.len ? proc_stdin_write(p, b.data, b.len, NULL, NULL) : 0;
    buf_done(&b);
    if (r == -EPIPE || (r == 0 && !proc_stdin_is_open(p)))
        e2b_rpc_error(req, "internal", "stdin of process %d is closed or was not enabled", pid);
    else if (r < 0)
        e2b_rpc_error(req, e2b_code_for_errno(r), "cannot write to process %d: %s", pid,
                      strerror(-r));
    else
        e2b_rpc_ok(req, NULL);
}

bool
e2b_process_is_stream(const char *method)
{
    return !strcmp(method, "Start") || !strcmp(method, "Connect") || !strcmp(method, "StreamInput");
}

void
e2b_process(struct http_req *req, struct e2b_call *c, const char *method, json_t *msg)
{
    struct entry *e = e2b_call_entry(c);
    int32_t pid = 0;

    if (!e) {
        e2b_rpc_error(req, "unavailable", "the sandbox is gone");
        return;
    }
    if (!strcmp(method, "Start")) {
        start(req, c, msg);
        return;
    }
    if (!strcmp(method, "List")) {
        e2b_rpc_ok(req, list_json(e));
        return;
    }
    bool known = !strcmp(method, "Connect") || !strcmp(method, "SendInput") ||
                 !strcmp(method, "SendSignal") || !strcmp(method, "CloseStdin") ||
                 !strcmp(method, "Update");
    if (!known) {
        e2b_rpc_error(req, "unimplemented", "process.Process/%.64s does not exist", method);
        return;
    }
    if (selected_pid(msg, &pid) < 0) {
        if (!strcmp(method, "Connect"))
            e2b_stream_error(req, "invalid_argument",
                             "'process.pid' is required (tags are not kept)");
        else
            e2b_rpc_error(req, "invalid_argument", "'process.pid' is required");
        return;
    }
    if (!strcmp(method, "Connect")) {
        struct proc *p = sandbox_proc_find(e->sb, pid);
        if (!p)
            e2b_stream_error(req, "not_found", "process with pid %d not found", pid);
        else
            stream_process(c, req, e, p, proc_output_end(p), false);
        return;
    }
    if (!strcmp(method, "SendInput")) {
        send_input(req, e, msg, pid);
        return;
    }
    struct proc *p = running_proc(e, pid);
    if (!p) {
        e2b_rpc_error(req, "not_found", "process with pid %d not found", pid);
        return;
    }
    if (!strcmp(method, "SendSignal")) {
        int sig = signal_of(json_object_get(msg, "signal"));
        if (!sig) {
            e2b_rpc_error(req, "invalid_argument",
                          "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
            return;
        }
        int r = proc_signal(p, sig, true);
        if (r == -ESRCH)
            e2b_rpc_error(req, "not_found", "process with pid %d not found", pid);
        else if (r < 0)
            e2b_rpc_error(req, "internal", "cannot signal process %d: %s", pid, strerror(-r));
        else
            e2b_rpc_ok(req, NULL);
        return;
    }
    if (!strcmp(method, "CloseStdin")) {
        (void)proc_stdin_close(p); /* idempotent */
        e2b_rpc_ok(req, NULL);
        return;
    }
    /* Update: the PTY's size. */
    uint16_t cols, rows;
    json_t *pty = json_object_get(msg, "pty");
    if (!pty || !pty_size(pty, &cols, &rows)) {
        e2b_rpc_error(req, "invalid_argument", "'pty.size' with cols and rows is required");
        return;
    }
    int r = proc_resize(p, cols, rows);
    if (r == -ENOTTY)
        e2b_rpc_error(req, "invalid_argument", "process %d has no PTY to resize", pid);
    else if (r < 0)
        e2b_rpc_error(req, "not_found", "process with pid %d not found", pid);
    else
        e2b_rpc_ok(req, NULL);
}

/* --- StreamInput: a client stream of input for one process --- */

struct sin {
    struct e2b_call call;
    struct connect_dec dec;
    int32_t pid; /* 0 until the start message */
    char error_code[32];
    char error[256];
};

static void
sin_close(struct http_req *req, void *ud)
{
    struct sin *q = ud;
    (void)req;
    connect_dec_done(&q->dec);
    free(q);
}

static int
sin_fail(struct sin *q, const char *code, const char *msg)
{
    if (!q->error_code[0]) {
        (void)snprintf(q->error_code, sizeof(q->error_code), "%s", code);
        (void)snprintf(q->error, sizeof(q->error), "%s", msg);
    }
    return -ECANCELED;
}

static int
sin_msg(void *ud, uint8_t flags, const uint8_t *payload, size_t len)
{
    struct sin *q = ud;
    struct err err = {0};
    json_t *m = NULL, *v;
    int r = 0;
    if (flags & CONNECT_FLAG_END_STREAM)
        return 0;
    if (json_parse((const char *)payload, len, &m, &err) < 0 || !json_is_object(m)) {
        json_decref(m);
        return sin_fail(q, "invalid_argument", err.msg[0] ? err.msg : "not a JSON object");
    }
    struct entry *e = e2b_call_entry(&q->call);
    if (!e) {
        r = sin_fail(q, "unavailable", "the sandbox is gone");
    } else if ((v = json_object_get(m, "start"))) {
        if (q->pid || selected_pid(v, &q->pid) < 0)
            r = sin_fail(q, "invalid_argument", "one start message with 'process.pid' comes first");
        else if (!running_proc(e, q->pid))
            r = sin_fail(q, "not_found", "process not found");
    } else if ((v = json_object_get(m, "data"))) {
        json_t *in = json_object_get(v, "input");
        json_t *data = in ? json_object_get(in, "stdin") : NULL;
        struct proc *p = q->pid ? running_proc(e, q->pid) : NULL;
        struct buf b;
        buf_init(&b, PROC_STDIN_MAX);
        if (!p)
            r = sin_fail(q, q->pid ? "not_found" : "invalid_argument",
                         q->pid ? "process not found" : "data before the start message");
        else if (!json_is_string(data) ||
                 b64_decode(&b, json_string_value(data), strlen(json_string_value(data))) < 0)
            r = sin_fail(q, "invalid_argument", "'data.input.stdin' must be base64");
        else if (b.len && proc_stdin_write(p, b.data, b.len, NULL, NULL) < 0)
            r = sin_fail(q, "internal", "stdin is closed or was not enabled");
        buf_done(&b);
    } else if (!json_object_get(m, "keepalive")) {
        r = sin_fail(q, "invalid_argument", "expected start, data or keepalive");
    }
    json_decref(m);
    return r;
}

static void sin_answer(struct http_req *req, struct sin *q);

static int
sin_chunk(struct http_req *req, const char *data, size_t len)
{
    struct sin *q = http_req_userdata(req);
    struct err err = {0};
    int r = connect_dec_feed(&q->dec, data, len, sin_msg, q, &err);
    if (r < 0) {
        if (!q->error_code[0])
            (void)sin_fail(q, "invalid_argument", err.msg[0] ? err.msg : "bad envelope");
        sin_answer(req, q); /* and stop reading */
        return -ECANCELED;
    }
    /* Between envelopes the client may wait for input; inside one it must
     * keep sending (body timeout). */
    http_req_body_at_boundary(req, connect_dec_at_boundary(&q->dec));
    return 0;
}

static void
sin_done(struct http_req *req)
{
    struct sin *q = http_req_userdata(req);
    struct err err = {0};
    if (connect_dec_finish(&q->dec, &err) < 0)
        (void)sin_fail(q, "invalid_argument", err.msg[0] ? err.msg : "truncated envelope");
    sin_answer(req, q);
}

static void
sin_answer(struct http_req *req, struct sin *q)
{
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    int r = 0;
    if (!q->error_code[0]) {
        uint8_t h[CONNECT_ENV_HEADER];
        connect_env_header(h, CONNECT_FLAG_DATA, 2);
        r = buf_put(&b, h, sizeof(h));
        if (r == 0)
            r = buf_put(&b, "{}", 2);
    }
    if (r == 0)
        r = connect_end_stream_json(&b, q->error_code[0] ? q->error_code : NULL, q->error);
    if (r == 0)
        http_respond(req, 200, "application/connect+json", b.data, b.len);
    else
        http_respond(req, 500, NULL, "", 0);
    buf_done(&b);
}

void
e2b_stream_input(struct http_req *req, const struct e2b_call *c)
{
    struct sin *q = calloc(1, sizeof(*q));
    if (!q) {
        http_respond(req, 500, NULL, "", 0);
        return;
    }
    q->call = *c;
    connect_dec_init(&q->dec, PROC_STDIN_MAX * 2);
    http_req_set_userdata(req, q, sin_close);
    http_req_stream_body(req, sin_chunk, sin_done);
    http_req_body_at_boundary(req, true);
}
