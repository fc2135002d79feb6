/*
 * client-exec.c - exec and the process table.
 *
 * A foreground exec and an output reattach answer NDJSON; the lines are
 * decoded one by one inside libcurl's write callback and the output handed
 * to the caller as it streams, so nothing but the current line is ever held.
 * Exec is the same request for a sandbox and a workspace (client_exec(),
 * client_exec_background()); the process table is a sandbox's only.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client-internal.h"
#include "util/b64.h"
#include "util/cleanup.h"
#include "util/parse.h"

#define ANSWER_MAX     CLIENT_BODY_MAX
#define EXEC_STDIN_MAX (64u * 1024 * 1024) /* bytes we encode; abxd takes 1 MiB */

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_process_info *, abx_process_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_process_list *, abx_process_list_free)

void
abx_exec_result_done(struct abx_exec_result *r)
{
    if (!r)
        return;
    free(r->json);
    *r = (struct abx_exec_result){0};
}

struct abx_process_info *
abx_process_info_free(struct abx_process_info *p)
{
    if (!p)
        return NULL;
    for (size_t i = 0; p->argv && i < p->argc; i++)
        free(p->argv[i]);
    free(p->argv);
    free(p->cwd);
    free(p->user);
    free(p->started_at);
    free(p->ended_at);
    free(p->json);
    free(p);
    return NULL;
}

struct abx_process_list *
abx_process_list_free(struct abx_process_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        abx_process_info_free(l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

/* --- decoding --- */

int
client_exec_result_from(json_t *o, const char *line, size_t len, struct abx_exec_result *ret)
{
    struct abx_exec_result res = {0};

    if (!json_is_integer(json_object_get(o, "exit_code")))
        return -EBADMSG;
    res.pid = (int)client_get_i64(o, "pid", 0);
    res.exit_code = (int)client_get_i64(o, "exit_code", 0);
    res.timed_out = client_get_bool(o, "timed_out");
    res.oom_killed = client_get_bool(o, "oom_killed");
    res.signal = (int)client_get_i64(o, "signal", 0);
    res.duration_ms = client_get_u64(o, "duration_ms");
    res.output_end = client_get_u64(o, "output_end");
    res.json = line ? strndup(line, len) : json_dumps(o, JSON_COMPACT);
    if (!res.json)
        return -ENOMEM;
    *ret = res;
    return 0;
}

int
client_process_from(json_t *o, struct abx_process_info **ret)
{
    _cleanup_(abx_process_info_freep) struct abx_process_info *p = NULL;
    json_t *argv, *v;
    const char *state;
    size_t i;

    if (!json_is_object(o) || !json_is_integer(json_object_get(o, "pid")))
        return -EBADMSG;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->pid = (int)client_get_i64(o, "pid", 0);
    argv = json_object_get(o, "argv");
    p->argv = calloc(json_array_size(argv) + 1, sizeof(char *));
    if (!p->argv)
        return -ENOMEM;
    json_array_foreach (argv, i, v) {
        if (!json_is_string(v))
            continue;
        p->argv[p->argc] = strdup(json_string_value(v));
        if (!p->argv[p->argc])
            return -ENOMEM;
        p->argc++;
    }
    if (client_dup_str(o, "cwd", &p->cwd) < 0 || client_dup_str(o, "user", &p->user) < 0 ||
        client_dup_str(o, "started_at", &p->started_at) < 0 ||
        client_dup_str(o, "ended_at", &p->ended_at) < 0)
        return -ENOMEM;
    state = json_string_value(json_object_get(o, "state"));
    p->running = state && !strcmp(state, "running");
    p->background = client_get_bool(o, "background");
    p->exit_code = (int)client_get_i64(o, "exit_code", -1);
    p->signal = (int)client_get_i64(o, "signal", 0);
    p->timed_out = client_get_bool(o, "timed_out");
    p->oom_killed = client_get_bool(o, "oom_killed");
    p->duration_ms = client_get_i64(o, "duration_ms", -1);
    p->output_start = client_get_u64(o, "output_start");
    p->output_end = client_get_u64(o, "output_end");
    p->stdin_open = client_get_bool(o, "stdin_open");
    p->json = json_dumps(o, JSON_COMPACT);
    if (!p->json)
        return -ENOMEM;
    *ret = TAKE_PTR(p);
    return 0;
}

/* --- the NDJSON output stream --- */

struct stream {
    struct abx_client *c;
    abx_started_fn started;
    abx_output_fn output;
    void *userdata;
    struct buf bytes; /* the decoded output of the current line */
    bool have_result;
    struct abx_exec_result result;
};

static int
stream_callback_failed(struct stream *s, int r, const char *what)
{
    if (!abx_client_error(s->c)[0])
        (void)client_fail(s->c, r, "the %s callback stopped the stream: %s", what, strerror(-r));
    return r;
}

int
client_output_line(const char *line, size_t len, enum abx_stream *ret_stream, const char **ret_b64,
                   size_t *ret_b64_len, uint64_t *ret_offset)
{
    static const char out[] = "{\"stdout\":\"", err[] = "{\"stderr\":\"";
    static const char tail[] = "\",\"offset\":";
    const size_t head = sizeof(out) - 1, tail_len = sizeof(tail) - 1;
    const char *end = line + len, *b64, *q, *p;
    enum abx_stream stream;
    uint64_t offset = 0;

    if (len < head + tail_len + 2)
        return 0;
    if (!memcmp(line, out, head))
        stream = ABX_STREAM_STDOUT;
    else if (!memcmp(line, err, head))
        stream = ABX_STREAM_STDERR;
    else
        return 0;
    b64 = line + head;
    q = memchr(b64, '"', (size_t)(end - b64));
    if (!q || (size_t)(end - q) < tail_len + 2 || memcmp(q, tail, tail_len) != 0)
        return 0;
    /* Base64 has no '\\': an escape means a form this does not handle. */
    if (memchr(b64, '\\', (size_t)(q - b64)))
        return 0;
    p = q + tail_len;
    if (*p < '0' || *p > '9')
        return 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (offset > (UINT64_MAX - d) / 10)
            return 0;
        offset = offset * 10 + d;
    }
    if (p != end - 1 || *p != '}')
        return 0;
    *ret_stream = stream;
    *ret_b64 = b64;
    *ret_b64_len = (size_t)(q - b64);
    *ret_offset = offset;
    return 1;
}

/* Decodes one piece of output and hands it over. */
static int
deliver(struct stream *s, enum abx_stream which, const char *b64, size_t b64_len, uint64_t offset)
{
    int r;

    buf_reset(&s->bytes);
    r = b64_decode(&s->bytes, b64, b64_len);
    if (r < 0)
        return client_fail(s->c, r == -ENOMEM ? r : -EBADMSG,
                           "abxd sent output that is not base64");
    if (!s->output)
        return 0;
    r = s->output(which, s->bytes.data, s->bytes.len, offset, s->userdata);
    return r < 0 ? stream_callback_failed(s, r, "output") : 0;
}

static int
on_line(const char *line, size_t len, void *userdata)
{
    struct stream *s = userdata;
    _cleanup_(json_decrefp) json_t *o = NULL;
    json_error_t je;
    json_t *v;
    int r;

    if (!s->have_result) {
        /* Nearly every line is output: take the short way when it fits. */
        enum abx_stream which;
        const char *b64;
        size_t b64_len;
        uint64_t offset;
        if (client_output_line(line, len, &which, &b64, &b64_len, &offset))
            return deliver(s, which, b64, b64_len, offset);
    }
    o = json_loadb(line, len, 0, &je);
    if (!json_is_object(o))
        return client_fail(s->c, -EBADMSG, "abxd sent an output line that is not a JSON object%s%s",
                           o ? "" : ": ", o ? "" : je.text);
    if (s->have_result)
        return 0; /* nothing is expected after the result */

    enum abx_stream which = ABX_STREAM_STDOUT;
    v = json_object_get(o, "stdout");
    if (!v) {
        which = ABX_STREAM_STDERR;
        v = json_object_get(o, "stderr");
    }
    if (v) {
        if (!json_is_string(v))
            return client_fail(s->c, -EBADMSG, "abxd sent output that is not a string");
        return deliver(s, which, json_string_value(v), json_string_length(v),
                       client_get_u64(o, "offset"));
    }
    if (json_object_get(o, "exit_code")) {
        r = client_exec_result_from(o, line, len, &s->result);
        if (r < 0)
            return client_fail(s->c, r, r == -ENOMEM ? "out of memory" : "abxd sent a bad result");
        s->have_result = true;
        return 0;
    }
    if ((v = json_object_get(o, "dropped"))) {
        if (!s->output)
            return 0;
        r = s->output(ABX_STREAM_DROPPED, NULL, (size_t)client_get_u64(o, "dropped"),
                      client_get_u64(o, "offset"), s->userdata);
        return r < 0 ? stream_callback_failed(s, r, "output") : 0;
    }
    if ((v = json_object_get(o, "error"))) {
        const char *m = json_string_value(v);
        return client_fail(s->c, -ENOENT, "%s", m ? m : "abxd ended the stream with an error");
    }
    if ((v = json_object_get(o, "pid")) && json_is_integer(v)) {
        if (!s->started)
            return 0;
        r = s->started((int)json_integer_value(v), s->userdata);
        return r < 0 ? stream_callback_failed(s, r, "started") : 0;
    }
    return 0; /* a kind of line this version does not know */
}

/* Runs an NDJSON request. Returns 1 with the result, 0 without. */
static int
stream_run(struct abx_client *c, const char *method, const struct buf *path, const char *body,
           abx_started_fn started, abx_output_fn output, void *userdata,
           struct abx_exec_result *ret)
{
    struct stream s = {
            .c = c,
            .started = started,
            .output = output,
            .userdata = userdata,
    };
    struct client_req rq;
    int r;

    buf_init(&s.bytes, CLIENT_LINE_MAX);
    client_req_init(&rq, method, path);
    if (body) {
        rq.body = body;
        rq.body_len = strlen(body);
        rq.body_json = true;
    }
    rq.stream = true;
    rq.resp = CLIENT_RESP_NDJSON;
    rq.line = on_line;
    rq.line_ud = &s;
    r = client_request(c, &rq);
    buf_done(&s.bytes);
    if (r < 0) {
        abx_exec_result_done(&s.result);
        return r;
    }
    if (!s.have_result)
        return 0;
    if (ret)
        *ret = s.result;
    else
        abx_exec_result_done(&s.result);
    return 1;
}

int
client_stream(struct abx_client *c, const char *method, const struct buf *path, const char *body,
              abx_started_fn started, abx_output_fn output, void *userdata,
              struct abx_exec_result *ret)
{
    return stream_run(c, method, path, body, started, output, userdata, ret);
}

/* --- exec --- */

static int
exec_body(struct abx_client *c, const struct abx_exec_spec *spec, bool background, char **ret)
{
    _cleanup_(json_decrefp) json_t *o = NULL;
    json_t *argv, *env;
    int r = 0;

    if (!spec || !spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return client_fail(c, -EINVAL, "exec needs a command (argv[0])");
    if (spec->has_timeout && !(spec->timeout_s >= 0 && isfinite(spec->timeout_s)))
        return client_fail(c, -EINVAL, "the timeout must be a number of seconds >= 0");
    if (!(spec->idle_timeout_s >= 0 && isfinite(spec->idle_timeout_s)))
        return client_fail(c, -EINVAL, "the idle timeout must be a number of seconds >= 0");
    if (spec->stdin_len > EXEC_STDIN_MAX || (spec->stdin_len && !spec->stdin_data))
        return client_fail(c, -EFBIG, "stdin for exec is limited to %u bytes", EXEC_STDIN_MAX);
    o = json_object();
    argv = json_array();
    if (!o || !argv || json_object_set_new(o, "argv", argv) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    for (size_t i = 0; spec->argv[i]; i++)
        if (json_array_append_new(argv, json_string(spec->argv[i])) < 0)
            return client_fail(c, -EINVAL, "argument %zu is not valid UTF-8", i);
    if (spec->n_env) {
        if (client_kv_object(spec->env, spec->n_env, &env) < 0)
            return client_fail(c, -EINVAL, "invalid env: keys and values must be non-empty UTF-8");
        r |= json_object_set_new(o, "env", env);
    }
    if (spec->cwd && json_object_set_new(o, "cwd", json_string(spec->cwd)) < 0)
        return client_fail(c, -EINVAL, "the working directory is not valid UTF-8");
    if (spec->user && json_object_set_new(o, "user", json_string(spec->user)) < 0)
        return client_fail(c, -EINVAL, "the user is not valid UTF-8");
    if (spec->stdin_len) {
        struct buf b;
        buf_init(&b, b64_encoded_len(spec->stdin_len) + 1);
        if (b64_encode(&b, spec->stdin_data, spec->stdin_len) < 0) {
            buf_done(&b);
            return client_fail(c, -ENOMEM, "out of memory");
        }
        r |= json_object_set_new(o, "stdin", json_stringn(b.data, b.len));
        buf_done(&b);
    }
    if (spec->stdin_open)
        r |= json_object_set_new(o, "stdin_open", json_true());
    if (spec->has_timeout)
        r |= json_object_set_new(o, "timeout_s", json_real(spec->timeout_s));
    if (spec->idle_timeout_s > 0)
        r |= json_object_set_new(o, "idle_timeout_s", json_real(spec->idle_timeout_s));
    if (background)
        r |= json_object_set_new(o, "background", json_true());
    if (r)
        return client_fail(c, -ENOMEM, "out of memory");
    *ret = client_dump(TAKE_PTR(o));
    return *ret ? 0 : client_fail(c, -ENOMEM, "out of memory");
}

int
client_exec(struct abx_client *c, enum client_scope scope, const char *id,
            const struct abx_exec_spec *spec, abx_started_fn started, abx_output_fn output,
            void *userdata, struct abx_exec_result *ret)
{
    _cleanup_free_ char *body = NULL;
    _cleanup_buf_ struct buf path;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, scope, id, "/exec")) < 0)
        return r;
    if ((r = exec_body(c, spec, false, &body)) < 0)
        return r;
    r = stream_run(c, "POST", &path, body, started, output, userdata, ret);
    if (r == 0)
        return client_fail(c, -EPROTO, "the output stream ended before the process's result");
    return r < 0 ? r : 0;
}

int
abx_exec(struct abx_client *c, const char *id, const struct abx_exec_spec *spec,
         abx_started_fn started, abx_output_fn output, void *userdata, struct abx_exec_result *ret)
{
    return client_exec(c, CLIENT_SANDBOX, id, spec, started, output, userdata, ret);
}

int
client_exec_background(struct abx_client *c, enum client_scope scope, const char *id,
                       const struct abx_exec_spec *spec, struct abx_process_info **ret)
{
    _cleanup_(abx_process_info_freep) struct abx_process_info *p = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_free_ char *body = NULL;
    _cleanup_buf_ struct buf path, answer;
    struct client_req rq;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = client_scope_url(c, &path, scope, id, "/exec")) < 0)
        return r;
    if ((r = exec_body(c, spec, true, &body)) < 0)
        return r;
    client_req_init(&rq, "POST", &path);
    rq.body = body;
    rq.body_len = strlen(body);
    rq.body_json = true;
    rq.resp = CLIENT_RESP_BUFFER;
    rq.out = &answer;
    if ((r = client_request(c, &rq)) < 0)
        return r;
    if ((r = client_parse(c, answer.data, answer.len, "a process", &j)) < 0)
        return r;
    r = client_process_from(j, &p);
    if (r < 0)
        return client_fail(c, r, r == -ENOMEM ? "out of memory" : "abxd's answer is not a process");
    r = p->pid;
    if (ret)
        *ret = TAKE_PTR(p);
    return r;
}

int
abx_exec_background(struct abx_client *c, const char *id, const struct abx_exec_spec *spec,
                    struct abx_process_info **ret)
{
    return client_exec_background(c, CLIENT_SANDBOX, id, spec, ret);
}

/* --- processes --- */

static int
process_url(struct abx_client *c, struct buf *path, const char *id, int pid, const char *suffix)
{
    int r;

    if (pid <= 0)
        return client_fail(c, -EINVAL, "invalid process id %d", pid);
    if ((r = client_sandbox_url(c, path, id, "/processes")) < 0)
        return r;
    if ((r = buf_printf(path, "/%d%s", pid, suffix ? suffix : "")) < 0)
        return client_fail(c, r, "out of memory");
    return 0;
}

int
abx_process_list(struct abx_client *c, const char *id, struct abx_process_list **ret)
{
    _cleanup_(abx_process_list_freep) struct abx_process_list *l = NULL;
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
    if ((r = client_sandbox_url(c, &path, id, "/processes")) < 0)
        return r;
    if ((r = client_get_list(c, &path, EBUSY, "the process list", "processes", &answer, &j, &arr)) <
        0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = client_process_from(v, &l->items[l->n]);
        if (r < 0)
            return client_fail(
                    c, r, r == -ENOMEM ? "out of memory" : "abxd's process list has a bad entry");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

int
abx_process_get(struct abx_client *c, const char *id, int pid, struct abx_process_info **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = process_url(c, &path, id, pid, NULL)) < 0)
        return r;
    if ((r = client_call(c, "GET", &path, NULL, EBUSY, &answer, NULL)) < 0)
        return r;
    if ((r = client_parse(c, answer.data, answer.len, "a process", &j)) < 0)
        return r;
    r = client_process_from(j, ret);
    if (r < 0)
        return client_fail(c, r, r == -ENOMEM ? "out of memory" : "abxd's answer is not a process");
    /* Keep the text exactly as sent. */
    char *text = client_strip(&answer);
    if (!text) {
        *ret = abx_process_info_free(*ret);
        return client_fail(c, -ENOMEM, "out of memory");
    }
    free((*ret)->json);
    (*ret)->json = text;
    return 0;
}

int
abx_process_output(struct abx_client *c, const char *id, int pid, uint64_t offset, bool follow,
                   abx_output_fn output, void *userdata, struct abx_exec_result *ret)
{
    _cleanup_buf_ struct buf path;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = process_url(c, &path, id, pid, "/output")) < 0)
        return r;
    if ((r = buf_printf(&path, "?offset=%llu%s", (unsigned long long)offset,
                        follow ? "&follow=1" : "")) < 0)
        return client_fail(c, r, "out of memory");
    return stream_run(c, "GET", &path, NULL, NULL, output, userdata, ret);
}

int
abx_process_signal(struct abx_client *c, const char *id, int pid, const char *signal, bool group)
{
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf path;
    uint32_t num;
    json_t *sig;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!signal || !*signal)
        return client_fail(c, -EINVAL, "no signal given");
    if ((r = process_url(c, &path, id, pid, "/signal")) < 0)
        return r;
    /* "9" is the number 9 on the wire; names go as they are. */
    if (parse_u32(signal, &num) == 0)
        sig = json_integer(num);
    else
        sig = json_string(signal);
    body = json_object();
    if (!sig || !body || json_object_set_new(body, "signal", sig) < 0 ||
        json_object_set_new(body, "group", json_boolean(group)) < 0)
        return client_fail(c, -EINVAL, "invalid signal '%.32s'", signal);
    return client_call(c, "POST", &path, TAKE_PTR(body), ESRCH, NULL, NULL);
}

int
abx_process_stdin(struct abx_client *c, const char *id, int pid, const void *data, size_t len,
                  bool close)
{
    _cleanup_(json_decrefp) json_t *body = NULL;
    _cleanup_buf_ struct buf path, b64;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&b64, b64_encoded_len(EXEC_STDIN_MAX) + 1);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (len > EXEC_STDIN_MAX || (len && !data))
        return client_fail(c, -EFBIG, "stdin writes are limited to %u bytes", EXEC_STDIN_MAX);
    if ((r = process_url(c, &path, id, pid, "/stdin")) < 0)
        return r;
    if (len && (r = b64_encode(&b64, data, len)) < 0)
        return client_fail(c, r, "out of memory");
    body = json_object();
    if (!body || json_object_set_new(body, "data", json_stringn(b64.data, b64.len)) < 0 ||
        json_object_set_new(body, "close", json_boolean(close)) < 0)
        return client_fail(c, -ENOMEM, "out of memory");
    return client_call(c, "POST", &path, TAKE_PTR(body), EPIPE, NULL, NULL);
}

int
abx_process_close_stdin(struct abx_client *c, const char *id, int pid)
{
    _cleanup_buf_ struct buf path;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = process_url(c, &path, id, pid, "/close-stdin")) < 0)
        return r;
    return client_call(c, "POST", &path, NULL, EPIPE, NULL, NULL);
}
