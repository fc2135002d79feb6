/*
 * client-tools.c - tool bundles: the tool list, one tool, the packages, and
 * running a tool in a sandbox or a workspace.
 *
 * GET /v1/tools, /v1/tools/{name}, /v1/tool-packages and POST
 * .../tools/{name} under /v1/sandboxes/{id} or /v1/workspaces/{ws}. The tool
 * list is kept as the text abxd sent (callers hand it to an LLM library) with
 * the names and descriptions decoded beside it. A call's arguments arrive as
 * JSON text; they are checked to be one object and sent as they are, not
 * re-encoded, so numbers keep their spelling. A streamed call is NDJSON like
 * exec's, decoded line by line; its last line is the result. This file does
 * not know what a tool is beyond its wire form.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/client-internal.h"
#include "util/b64.h"
#include "util/cleanup.h"

#define ANSWER_MAX    CLIENT_BODY_MAX
#define TOOL_NAME_MAX 256                 /* bytes of a tool name, "package:command" */
#define ARGS_MAX      CLIENT_REQ_BODY_MAX /* bytes of the arguments' JSON text */

static struct abx_tool_package *tool_package_free(struct abx_tool_package *p);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_tool_list *, abx_tool_list_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_tool_info *, abx_tool_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_tool_package *, tool_package_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_tool_package_list *, abx_tool_package_list_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_tool_result *, abx_tool_result_free)

struct abx_tool_list *
abx_tool_list_free(struct abx_tool_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].name);
        free(l->items[i].description);
    }
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

struct abx_tool_info *
abx_tool_info_free(struct abx_tool_info *t)
{
    if (!t)
        return NULL;
    free(t->name);
    free(t->package);
    free(t->command);
    free(t->description);
    free(t->schema);
    free(t->json);
    free(t);
    return NULL;
}

static struct abx_tool_package *
tool_package_free(struct abx_tool_package *p)
{
    if (!p)
        return NULL;
    for (size_t i = 0; p->commands && i < p->n_commands; i++)
        free(p->commands[i]);
    free(p->commands);
    free(p->name);
    free(p->kind);
    free(p->description);
    free(p->built_at);
    free(p->json);
    free(p);
    return NULL;
}

struct abx_tool_package_list *
abx_tool_package_list_free(struct abx_tool_package_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        tool_package_free(l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

struct abx_tool_result *
abx_tool_result_free(struct abx_tool_result *r)
{
    if (!r)
        return NULL;
    for (size_t i = 0; r->files && i < r->n_files; i++) {
        free(r->files[i].path);
        free(r->files[i].version);
    }
    free(r->files);
    free(r->tool);
    free(r->package);
    free(r->stdout_data);
    free(r->stderr_data);
    free(r->json);
    free(r);
    return NULL;
}

/* --- URLs --- */

/* Appends "/<name>" percent-encoded (':' included). -EINVAL for an empty
 * name, one longer than TOOL_NAME_MAX or with control characters. */
static int
put_tool_name(struct buf *b, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    int r;

    if (n == 0 || n > TOOL_NAME_MAX)
        return -EINVAL;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            return -EINVAL;
    if ((r = buf_putc(b, '/')) < 0)
        return r;
    return client_put_encoded(b, name, false);
}

/* Builds "/v1/tools[?format=F][&allowed=A]": allowed NULL leaves the query
 * out (every tool), "" sends it empty (none). */
static int
tool_list_url(struct buf *b, const char *allowed, const char *format)
{
    char sep = '?';
    int r;

    if ((r = buf_puts(b, "/v1/tools")) < 0)
        return r;
    if (format) {
        if ((r = buf_printf(b, "%cformat=", sep)) < 0 ||
            (r = client_put_encoded(b, format, false)) < 0)
            return r;
        sep = '&';
    }
    if (allowed) {
        if ((r = buf_printf(b, "%callowed=", sep)) < 0 ||
            (r = client_put_encoded(b, allowed, false)) < 0)
            return r;
    }
    return 0;
}

/* "/v1/{sandboxes,workspaces}/<id>/tools/<name>". */
static int
tool_call_url(struct abx_client *c, struct buf *b, enum client_scope scope, const char *id,
              const char *name)
{
    int r;

    if ((r = client_scope_url(c, b, scope, id, "/tools")) < 0)
        return r;
    r = put_tool_name(b, name);
    if (r == -EINVAL)
        return client_fail(c, r, "invalid tool name '%.80s'", name ? name : "");
    if (r < 0)
        return client_fail(c, r, "cannot build the request URL: %s", strerror(-r));
    return 0;
}

/* 409 from a tool route: -ENOTUNIQ when it is abxd's "tool_conflict". */
static int
tool_errno(struct abx_client *c, int r)
{
    if (r == -EBUSY && !strcmp(abx_client_error_code(c), "tool_conflict"))
        return -ENOTUNIQ;
    return r;
}

/* --- decoding --- */

/* The entries of a tool list in either format: OpenAI's {"type": "function",
 * "function": {"name", "description", ...}} or MCP's {"name",
 * "description", ...}. */
static int
tool_list_from(json_t *o, struct abx_tool_list *l)
{
    json_t *arr = json_object_get(o, "tools"), *v;
    size_t i;

    if (!json_is_array(arr))
        return -EBADMSG;
    l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items));
    if (!l->items)
        return -ENOMEM;
    json_array_foreach (arr, i, v) {
        json_t *f = json_object_get(v, "function");
        json_t *e = json_is_object(f) ? f : v;
        struct abx_tool *t = &l->items[l->n];
        if (!json_is_string(json_object_get(e, "name")))
            return -EBADMSG;
        l->n++;
        if (client_dup_str(e, "name", &t->name) < 0 ||
            client_dup_str(e, "description", &t->description) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int
tool_info_from(json_t *o, struct abx_tool_info **ret)
{
    _cleanup_(abx_tool_info_freep) struct abx_tool_info *t = NULL;
    json_t *schema = json_object_get(o, "schema");

    if (!json_is_string(json_object_get(o, "name")) || !json_is_object(schema))
        return -EBADMSG;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    if (client_dup_str(o, "name", &t->name) < 0 || client_dup_str(o, "package", &t->package) < 0 ||
        client_dup_str(o, "command", &t->command) < 0 ||
        client_dup_str(o, "description", &t->description) < 0)
        return -ENOMEM;
    t->schema = json_dumps(schema, JSON_INDENT(2));
    if (!t->schema)
        return -ENOMEM;
    *ret = TAKE_PTR(t);
    return 0;
}

static int
tool_package_from(json_t *o, struct abx_tool_package **ret)
{
    _cleanup_(tool_package_freep) struct abx_tool_package *p = NULL;
    json_t *cmds, *v;
    size_t i;

    if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")))
        return -EBADMSG;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    cmds = json_object_get(o, "commands");
    p->commands = calloc(json_array_size(cmds) + 1, sizeof(char *));
    if (!p->commands)
        return -ENOMEM;
    json_array_foreach (cmds, i, v) {
        if (!json_is_string(v))
            continue;
        p->commands[p->n_commands] = strdup(json_string_value(v));
        if (!p->commands[p->n_commands])
            return -ENOMEM;
        p->n_commands++;
    }
    if (client_dup_str(o, "name", &p->name) < 0 || client_dup_str(o, "kind", &p->kind) < 0 ||
        client_dup_str(o, "description", &p->description) < 0 ||
        client_dup_str(o, "built_at", &p->built_at) < 0)
        return -ENOMEM;
    p->json = json_dumps(o, JSON_COMPACT);
    if (!p->json)
        return -ENOMEM;
    *ret = TAKE_PTR(p);
    return 0;
}

/* Copies a string that may hold NULs; NULL when absent. */
static int
dup_bytes(json_t *o, const char *key, char **ret, size_t *ret_len)
{
    json_t *v = json_object_get(o, key);
    size_t n;

    *ret = NULL;
    *ret_len = 0;
    if (!json_is_string(v))
        return 0;
    n = json_string_length(v);
    *ret = malloc(n + 1);
    if (!*ret)
        return -ENOMEM;
    memcpy(*ret, json_string_value(v), n);
    (*ret)[n] = '\0';
    *ret_len = n;
    return 0;
}

/* A result without an exit code is abxd saying the call failed midway
 * (the sandbox ended under the tool): -EIO with its "error" as the message,
 * or 0 when o is not such a result. */
static int
result_failed(struct abx_client *c, json_t *o)
{
    const char *msg = json_string_value(json_object_get(o, "error"));

    if (json_is_integer(json_object_get(o, "exit_code")) || !msg)
        return 0;
    if (json_is_string(json_object_get(o, "message")))
        msg = json_string_value(json_object_get(o, "message"));
    return client_fail(c, -EIO, "%s", msg);
}

/* Decodes a call's result object; text (len bytes) is its JSON as sent.
 * -EBADMSG without an integer exit_code. */
static int
tool_result_from(json_t *o, const char *text, size_t len, struct abx_tool_result **ret)
{
    _cleanup_(abx_tool_result_freep) struct abx_tool_result *res = NULL;
    json_t *files, *v;
    size_t i;

    if (!json_is_object(o) || !json_is_integer(json_object_get(o, "exit_code")))
        return -EBADMSG;
    res = calloc(1, sizeof(*res));
    if (!res)
        return -ENOMEM;
    if (client_dup_str(o, "tool", &res->tool) < 0 ||
        client_dup_str(o, "package", &res->package) < 0 ||
        dup_bytes(o, "stdout", &res->stdout_data, &res->stdout_len) < 0 ||
        dup_bytes(o, "stderr", &res->stderr_data, &res->stderr_len) < 0)
        return -ENOMEM;
    res->exit_code = (int)client_get_i64(o, "exit_code", 0);
    res->signal = (int)client_get_i64(o, "signal", 0);
    res->timed_out = client_get_bool(o, "timed_out");
    res->oom_killed = client_get_bool(o, "oom_killed");
    res->truncated = client_get_bool(o, "truncated");
    res->duration_ms = client_get_u64(o, "duration_ms");
    files = json_object_get(o, "files");
    res->files = calloc(json_array_size(files) + 1, sizeof(*res->files));
    if (!res->files)
        return -ENOMEM;
    json_array_foreach (files, i, v) {
        struct abx_tool_file *f = &res->files[res->n_files];
        if (!json_is_string(json_object_get(v, "path")))
            continue;
        res->n_files++;
        if (client_dup_name(v, "path", &f->path) < 0 ||
            client_dup_str(v, "version", &f->version) < 0)
            return -ENOMEM;
        f->size = client_get_u64(v, "size");
    }
    res->json = strndup(text, len);
    if (!res->json)
        return -ENOMEM;
    *ret = TAKE_PTR(res);
    return 0;
}

/* --- list, one tool, packages --- */

int
abx_tool_list(struct abx_client *c, const char *allowed, const char *format,
              struct abx_tool_list **ret)
{
    _cleanup_(abx_tool_list_freep) struct abx_tool_list *l = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if (format && !*format)
        return client_fail(c, -EINVAL, "the tool format is empty (use \"openai\" or \"mcp\")");
    if ((r = tool_list_url(&path, allowed, format)) < 0)
        return client_fail(c, r == -EFBIG ? -EINVAL : r, "the tool selection is too long");
    if ((r = client_call(c, "GET", &path, NULL, 0, &answer, NULL)) < 0)
        return tool_errno(c, r);
    if ((r = client_parse(c, answer.data, answer.len, "the tool list", &j)) < 0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    r = tool_list_from(j, l);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's tool list has no 'tools' list of named tools");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    *ret = TAKE_PTR(l);
    return 0;
}

int
abx_tool_get(struct abx_client *c, const char *name, struct abx_tool_info **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = buf_puts(&path, "/v1/tools")) < 0)
        return client_fail(c, r, "out of memory");
    r = put_tool_name(&path, name);
    if (r < 0)
        return client_fail(c, r == -EFBIG ? -EINVAL : r, "invalid tool name '%.80s'",
                           name ? name : "");
    if ((r = client_call(c, "GET", &path, NULL, 0, &answer, NULL)) < 0)
        return tool_errno(c, r);
    if ((r = client_parse(c, answer.data, answer.len, "a tool", &j)) < 0)
        return r;
    r = tool_info_from(j, ret);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer is not a tool (no 'name' or 'schema')");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    (*ret)->json = client_strip(&answer);
    if (!(*ret)->json) {
        *ret = abx_tool_info_free(*ret);
        return client_fail(c, -ENOMEM, "out of memory");
    }
    return 0;
}

int
abx_tool_package_list(struct abx_client *c, struct abx_tool_package_list **ret)
{
    _cleanup_(abx_tool_package_list_freep) struct abx_tool_package_list *l = NULL;
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
    if ((r = buf_puts(&path, "/v1/tool-packages")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = client_get_list(c, &path, 0, "the tool packages", "packages", &answer, &j, &arr)) < 0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = tool_package_from(v, &l->items[l->n]);
        if (r == -EBADMSG)
            return client_fail(c, r, "abxd's package list has an entry without 'name'");
        if (r < 0)
            return client_fail(c, r, "out of memory");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

/* --- calls --- */

/* The request body: {"arguments": <arguments_json as given>, ...opts}. */
static int
call_body(struct abx_client *c, const char *arguments_json, const struct abx_tool_call_opts *opts,
          bool stream, struct buf *body)
{
    _cleanup_(json_decrefp) json_t *args = NULL, *rest = NULL;
    _cleanup_free_ char *tail = NULL;
    json_error_t je;
    int r = 0;

    if (!arguments_json)
        arguments_json = "{}";
    if (strlen(arguments_json) > ARGS_MAX)
        return client_fail(c, -EFBIG, "the arguments are larger than %u bytes", ARGS_MAX);
    args = json_loads(arguments_json, JSON_REJECT_DUPLICATES, &je);
    if (!args)
        return client_fail(c, -EINVAL, "the arguments are not valid JSON: %s (line %d, column %d)",
                           je.text, je.line, je.column);
    if (!json_is_object(args))
        return client_fail(c, -EINVAL, "the arguments are not a JSON object");
    if (opts && opts->has_timeout && !(opts->timeout_s >= 0 && isfinite(opts->timeout_s)))
        return client_fail(c, -EINVAL, "the timeout must be a number of seconds >= 0");
    if (opts && !(opts->idle_timeout_s >= 0 && isfinite(opts->idle_timeout_s)))
        return client_fail(c, -EINVAL, "the idle timeout must be a number of seconds >= 0");
    rest = json_object();
    if (!rest)
        return client_fail(c, -ENOMEM, "out of memory");
    if (opts && opts->has_timeout)
        r |= json_object_set_new(rest, "timeout_s", json_real(opts->timeout_s));
    if (opts && opts->idle_timeout_s > 0)
        r |= json_object_set_new(rest, "idle_timeout_s", json_real(opts->idle_timeout_s));
    if (stream)
        r |= json_object_set_new(rest, "stream", json_true());
    if (r || !(tail = json_dumps(rest, JSON_COMPACT)))
        return client_fail(c, -ENOMEM, "out of memory");
    /* A valid JSON text is one value and nothing else: safe to embed. */
    if ((r = buf_puts(body, "{\"arguments\":")) < 0 || (r = buf_puts(body, arguments_json)) < 0 ||
        (r = buf_puts(body, strcmp(tail, "{}") ? "," : "}")) < 0 ||
        (strcmp(tail, "{}") && (r = buf_puts(body, tail + 1)) < 0))
        return client_fail(c, r, "cannot build the request: %s", strerror(-r));
    return 0;
}

struct tool_stream {
    struct abx_client *c;
    abx_output_fn output;
    void *userdata;
    struct buf bytes; /* the current piece, decoded */
    uint64_t offset;  /* output bytes so far, both streams */
    struct abx_tool_result *result;
};

static int
stream_deliver(struct tool_stream *s, enum abx_stream which, const char *b64, size_t b64_len,
               const uint64_t *offset)
{
    uint64_t at;
    int r;

    buf_reset(&s->bytes);
    r = b64_decode(&s->bytes, b64, b64_len);
    if (r < 0)
        return client_fail(s->c, r == -ENOMEM ? r : -EBADMSG,
                           "abxd sent output that is not base64");
    at = offset ? *offset : s->offset;
    s->offset = at + s->bytes.len;
    if (!s->output)
        return 0;
    r = s->output(which, s->bytes.data, s->bytes.len, at, s->userdata);
    if (r < 0 && !abx_client_error(s->c)[0])
        (void)client_fail(s->c, r, "the output callback stopped the stream: %s", strerror(-r));
    return r < 0 ? r : 0;
}

static int
stream_line(const char *line, size_t len, void *userdata)
{
    struct tool_stream *s = userdata;
    _cleanup_(json_decrefp) json_t *o = NULL;
    enum abx_stream which;
    const char *b64;
    size_t b64_len;
    uint64_t offset;
    json_error_t je;
    json_t *v;
    int r;

    if (s->result)
        return 0; /* nothing is expected after the result */
    if (client_output_line(line, len, &which, &b64, &b64_len, &offset))
        return stream_deliver(s, which, b64, b64_len, &offset);
    o = json_loadb(line, len, 0, &je);
    if (!json_is_object(o))
        return client_fail(s->c, -EBADMSG, "abxd sent an output line that is not a JSON object%s%s",
                           o ? "" : ": ", o ? "" : je.text);
    which = ABX_STREAM_STDOUT;
    v = json_object_get(o, "stdout");
    if (!v) {
        which = ABX_STREAM_STDERR;
        v = json_object_get(o, "stderr");
    }
    if (v && !json_object_get(o, "exit_code")) {
        json_t *off = json_object_get(o, "offset");
        if (!json_is_string(v))
            return client_fail(s->c, -EBADMSG, "abxd sent output that is not a string");
        offset = client_get_u64(o, "offset");
        return stream_deliver(s, which, json_string_value(v), json_string_length(v),
                              json_is_integer(off) ? &offset : NULL);
    }
    if (json_object_get(o, "exit_code")) {
        if ((r = result_failed(s->c, o)) < 0)
            return r;
        r = tool_result_from(o, line, len, &s->result);
        if (r < 0)
            return client_fail(s->c, r, r == -ENOMEM ? "out of memory" : "abxd sent a bad result");
        return 0;
    }
    if ((v = json_object_get(o, "error"))) {
        const char *m = json_string_value(json_object_get(o, "message"));
        if (!m)
            m = json_string_value(v);
        return client_fail(s->c, -EIO, "%s", m ? m : "abxd ended the stream with an error");
    }
    return 0; /* a kind of line this version does not know */
}

static int
tool_call(struct abx_client *c, enum client_scope scope, const char *id, const char *name,
          const char *arguments_json, const struct abx_tool_call_opts *opts, bool stream,
          abx_output_fn output, void *userdata, struct abx_tool_result **ret)
{
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, body, answer;
    struct tool_stream s = {.c = c, .output = output, .userdata = userdata};
    struct client_req rq;
    json_error_t je;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&body, CLIENT_REQ_BODY_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || (!stream && !ret))
        return -EINVAL;
    client_clear(c);
    if ((r = tool_call_url(c, &path, scope, id, name)) < 0)
        return r;
    if ((r = call_body(c, arguments_json, opts, stream, &body)) < 0)
        return r;
    client_req_init(&rq, "POST", &path);
    rq.body = body.data;
    rq.body_len = body.len;
    rq.body_json = true;
    rq.stream = true; /* the tool's own timeout bounds it */
    if (stream) {
        buf_init(&s.bytes, CLIENT_LINE_MAX);
        rq.resp = CLIENT_RESP_NDJSON;
        rq.line = stream_line;
        rq.line_ud = &s;
    } else {
        rq.resp = CLIENT_RESP_BUFFER;
        rq.out = &answer;
    }
    r = client_request(c, &rq);
    if (stream)
        buf_done(&s.bytes);
    if (r < 0) {
        abx_tool_result_free(s.result);
        return tool_errno(c, r);
    }
    if (stream) {
        if (!s.result)
            return client_fail(c, -EPROTO, "the output stream ended before the tool's result");
        if (ret)
            *ret = s.result;
        else
            abx_tool_result_free(s.result);
        return 0;
    }
    /* stdout and stderr are text but may hold NULs. */
    j = json_loadb(answer.data, answer.len, JSON_ALLOW_NUL, &je);
    if (!json_is_object(j))
        return client_fail(c, -EBADMSG, "abxd sent invalid JSON for the tool's result%s%s",
                           j ? "" : ": ", j ? "" : je.text);
    if ((r = result_failed(c, j)) < 0)
        return r;
    size_t n = answer.len;
    while (n > 0 &&
           (answer.data[n - 1] == '\n' || answer.data[n - 1] == '\r' || answer.data[n - 1] == ' '))
        n--;
    r = tool_result_from(j, answer.data, n, ret);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer is not a tool result (no 'exit_code')");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    return 0;
}

int
abx_tool_call(struct abx_client *c, const char *id, const char *name, const char *arguments_json,
              const struct abx_tool_call_opts *opts, struct abx_tool_result **ret)
{
    return tool_call(c, CLIENT_SANDBOX, id, name, arguments_json, opts, false, NULL, NULL, ret);
}

int
abx_tool_call_stream(struct abx_client *c, const char *id, const char *name,
                     const char *arguments_json, const struct abx_tool_call_opts *opts,
                     abx_output_fn output, void *userdata, struct abx_tool_result **ret)
{
    return tool_call(c, CLIENT_SANDBOX, id, name, arguments_json, opts, true, output, userdata,
                     ret);
}

int
abx_workspace_tool_call(struct abx_client *c, const char *ws, const char *name,
                        const char *arguments_json, const struct abx_tool_call_opts *opts,
                        struct abx_tool_result **ret)
{
    return tool_call(c, CLIENT_WORKSPACE, ws, name, arguments_json, opts, false, NULL, NULL, ret);
}

int
abx_workspace_tool_call_stream(struct abx_client *c, const char *ws, const char *name,
                               const char *arguments_json, const struct abx_tool_call_opts *opts,
                               abx_output_fn output, void *userdata, struct abx_tool_result **ret)
{
    return tool_call(c, CLIENT_WORKSPACE, ws, name, arguments_json, opts, true, output, userdata,
                     ret);
}
