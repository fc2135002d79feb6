/*
 * tools.c - the tool surface: export the bundles' commands to language
 * models, and run one in a sandbox or a workspace.
 *
 *   GET  /v1/tools?allowed=pkg,pkg:cmd&format=openai|mcp
 *   GET  /v1/tools/{name}              name = cmd or pkg:cmd
 *   GET  /v1/tool-packages
 *   POST /v1/sandboxes/{id}/tools/{name}   {arguments, timeout_s?, idle_timeout_s?, stream?}
 *   POST /v1/workspaces/{ws}/tools/{name}  (the same; wakes the workspace)
 *
 * A call is validated against the command's schema before anything runs
 * (400 invalid_arguments), then runs `<bundle>/launch <cmd> <args_json>` as
 * "user" in the workspace directory through the same exec machinery as the
 * exec route, under the exec deadlines. Output is kept up to
 * TOOL_OUTPUT_MAX bytes per stream and the rest is counted and replaced by
 * a marker, so a tool that floods cannot make abxd hold more than that. The
 * answer lists the workspace files the call created or changed (compared by
 * version before and after), so an agent can look at a chart it produced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "template/set.h"
#include "tools/registry.h"
#include "tools/schema.h"
#include "util/b64.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"

#define TOOL_OUTPUT_MAX (1024 * 1024) /* bytes of stdout (and of stderr) kept per call */
#define TOOL_ARGS_MAX   (128 * 1024)  /* bytes of the arguments JSON handed to launch */
#define TOOL_FILES_MAX  1000          /* changed files listed in an answer */
#define TOOL_FILES_BYTES                                                    \
    (128 * 1024) /* and the bytes of their paths, so the answer stays small \
                  */
#define TOOL_LINE_ROOM (API_LINE_CHUNK / 3 * 4 + 256)
#define TOOL_WALK_MAX  50000 /* entries compared; beyond that, files is left partial */

/* --- export --- */

static json_t *
export_schema(const char *name, const char *description, json_t *schema, bool mcp)
{
    json_t *o = json_object();
    (void)json_set(o, "name", json_string(name));
    (void)json_set(o, "description", json_string(description));
    if (mcp) {
        (void)json_set(o, "inputSchema", json_incref(schema));
        return o;
    }
    (void)json_set(o, "parameters", json_incref(schema));
    json_t *f = json_object();
    (void)json_set(f, "type", json_string("function"));
    (void)json_set(f, "function", o);
    return f;
}

static json_t *
export_one(const struct tools_pick *p, bool mcp)
{
    return export_schema(p->cmd->name, p->cmd->description, p->cmd->schema, mcp);
}

static void
list_tools(struct api *a, struct http_req *req)
{
    struct err err = {0};
    const char *format = http_req_query(req, "format");
    bool mcp = false;
    if (format && !strcmp(format, "mcp"))
        mcp = true;
    else if (format && strcmp(format, "openai")) {
        api_error_msg(req, 400, "bad_request", "'format' must be openai or mcp, not '%.32s'",
                      format);
        return;
    }
    struct tools_pick *picks = NULL;
    size_t n = 0;
    int r = tools_select(a->tools, http_req_query(req, "allowed"), &picks, &n, &err);
    if (r == -EEXIST) {
        api_error_msg(req, 409, "tool_conflict", "%s", err.msg);
        return;
    }
    if (r < 0) {
        api_error(req, r, &err);
        return;
    }
    /* A sandbox's or a template's custom commands join the bundles' tools. */
    const struct template *t = NULL;
    const char *sid = http_req_query(req, "sandbox"), *tname = http_req_query(req, "template");
    if (sid && tname) {
        free(picks);
        api_error_msg(req, 400, "bad_request", "give 'sandbox' or 'template', not both");
        return;
    }
    if (sid) {
        struct entry *e = api_find(a, req, sid);
        if (!e) {
            free(picks);
            return;
        }
        t = e->tmpl;
    } else if (tname) {
        t = template_set_find(a->templates, tname);
        if (!t) {
            free(picks);
            api_error_msg(req, 404, "not_found", "no template '%.64s'", tname);
            return;
        }
    }
    for (size_t i = 0; t && i < t->n_cmds; i++) {
        for (size_t k = 0; k < n; k++) {
            if (strcmp(picks[k].cmd->name, t->cmds[i].name) != 0)
                continue;
            api_error_msg(req, 409, "tool_conflict",
                          "'%s' is both a command of tool bundle '%s' and a custom command of "
                          "template '%s'; leave one out of the selection",
                          t->cmds[i].name, picks[k].pkg->name, t->name);
            free(picks);
            return;
        }
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        (void)json_array_append_new(arr, export_one(&picks[i], mcp));
    free(picks);
    for (size_t i = 0; t && i < t->n_cmds; i++) {
        const struct template_command *c = &t->cmds[i];
        json_t *schema = api_command_schema(c);
        (void)json_array_append_new(
                arr, export_schema(c->name, c->description ? c->description : "", schema, mcp));
        json_decref(schema);
    }
    json_t *o = json_object();
    (void)json_set(o, "tools", arr);
    api_json(req, 200, o);
}

static int
lookup(struct api *a, struct http_req *req, const char *name, struct tools_pick *ret)
{
    struct err err = {0};
    int r = tools_lookup(a->tools, name, ret, &err);
    if (r == -EEXIST)
        api_error_msg(req, 409, "tool_conflict", "%s", err.msg);
    else if (r < 0)
        api_error_msg(req, 404, "not_found", "%s", err.msg);
    return r;
}

static void
get_tool(struct api *a, struct http_req *req, const char *name)
{
    struct tools_pick p;
    if (lookup(a, req, name, &p) < 0)
        return;
    json_t *o = json_object();
    (void)json_set(o, "name", json_string(p.cmd->name));
    (void)json_set(o, "package", json_string(p.pkg->name));
    (void)json_set(o, "command", json_string(p.cmd->name));
    (void)json_set(o, "description", json_string(p.cmd->description));
    (void)json_set(o, "schema", json_incref(p.cmd->schema));
    api_json(req, 200, o);
}

static void
list_packages(struct api *a, struct http_req *req)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < tools_registry_count(a->tools); i++) {
        const struct tools_package *p = tools_registry_at(a->tools, i);
        json_t *o = json_object(), *cmds = json_array();
        for (size_t k = 0; k < p->ncmds; k++)
            (void)json_array_append_new(cmds, json_string(p->cmds[k].name));
        (void)json_set(o, "name", json_string(p->name));
        (void)json_set(o, "kind", json_string(p->carrier ? "carrier" : "cli"));
        (void)json_set(o, "description", json_string(p->description));
        (void)json_set(o, "commands", cmds);
        (void)json_set(o, "built_at", json_string(p->built_at));
        (void)json_array_append_new(arr, o);
    }
    json_t *o = json_object();
    (void)json_set(o, "packages", arr);
    api_json(req, 200, o);
}

void
wire_tools(struct api *a, struct http_req *req, const char *path)
{
    if (strcmp(http_req_method(req), "GET") != 0) {
        http_req_add_header(req, "Allow", "GET");
        api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here",
                      http_req_method(req));
        return;
    }
    if (!strcmp(path, "/v1/tool-packages"))
        list_packages(a, req);
    else if (!strcmp(path, "/v1/tools"))
        list_tools(a, req);
    else if (path[10] && !strchr(path + 10, '/'))
        get_tool(a, req, path + 10);
    else
        api_error_msg(req, 404, "not_found", "no route for GET %.200s", path);
}

/* --- calls --- */

struct tool_call {
    struct api *api;
    struct http_req *req;
    struct out_owner owner;
    bool started; /* the call owns itself from here on (see call_close) */
    bool stream;
    bool timeout_given;
    struct tools_pick pick;              /* a bundle's command, or: */
    const struct template_command *tcmd; /* a custom command of the sandbox's template */
    const char *tool_name, *package;     /* for the answer */
    char *cmd_line;                      /* tcmd rendered */
    char name[2 * TOOLS_NAME_MAX + 2];
    json_t *args;
    struct sandbox_exec x;
    const char *argv[4];
    char launch[4200];
    char *args_text;
    struct files_tree before;
    bool have_before;
    struct proc_reader *reader;
    bool attached;
    struct buf out[2];     /* stdout, stderr (not streamed) */
    uint64_t sent[2];      /* bytes streamed (streamed) */
    uint64_t dropped[2];   /* bytes past TOOL_OUTPUT_MAX */
    struct http_stream *s; /* streamed */
    struct buf line;
    bool final_ready; /* streamed: the last lines are in line */
    bool finished;
};

static void
call_free(struct tool_call *c)
{
    if (!c)
        return;
    if (c->attached)
        api_stream_attached(c->api, &c->owner, false);
    proc_reader_free(c->reader);
    http_stream_release(c->s);
    json_decref(c->args);
    free(c->args_text);
    free(c->cmd_line);
    if (c->have_before)
        files_tree_free(&c->before);
    buf_done(&c->out[0]);
    buf_done(&c->out[1]);
    buf_done(&c->line);
    if (c->started) {
        /* The request may outlive the call (answered, not yet closed). */
        http_req_set_userdata(c->req, NULL, NULL);
        http_req_unref(c->req);
    }
    free(c);
}

static void
call_close(struct http_req *req, void *ud)
{
    struct tool_call *c = ud;
    (void)req;
    if (c && !c->started)
        call_free(c);
}

/* The live sandbox the call runs in, looked up again (it may be gone). */
static struct sandbox *
owner_sandbox(struct tool_call *c)
{
    if (c->owner.kind == OWNER_WORKSPACE)
        return c->api->ws ? workspaces_peek(c->api->ws, c->owner.id) : NULL;
    struct entry *e = api_find(c->api, NULL, c->owner.id);
    return e ? e->sb : NULL;
}

/* Directories whose contents no agent wants listed as "files the tool
 * wrote" and which can hold more entries than we care to compare. */
static const struct files_prune walk_prune = {
        .n = 8,
        .patterns = {".git", "node_modules", ".venv", "venv", "__pycache__", ".cache", ".local",
                     ".npm"},
        .dir_only = {true, true, true, true, true, true, true, true},
};

static int
walk(struct sandbox *sb, struct files_tree *t)
{
    struct files_walk_opts o = {.prune = &walk_prune, .max = TOOL_WALK_MAX};
    _cleanup_(fileops_unrefp) struct fileops *fo = NULL;
    memset(t, 0, sizeof(*t));
    int r = sandbox_fileops(sb, false, &fo, NULL);
    return r < 0 ? r : fileops_tree_list(fo, ".", &o, t, NULL);
}

/* Regular files in after that are new or have another version. */
static json_t *
changed_files(const struct files_tree *before, const struct files_tree *after, bool *ret_more)
{
    json_t *arr = json_array();
    size_t i = 0, n = 0, bytes = 0;
    *ret_more = false;
    for (size_t k = 0; k < after->n; k++) {
        const struct files_entry *e = &after->v[k];
        while (i < before->n && strcmp(before->v[i].path, e->path) < 0)
            i++;
        if (e->st.type != FILES_FILE)
            continue;
        if (i < before->n && !strcmp(before->v[i].path, e->path) &&
            before->v[i].st.type == FILES_FILE && !strcmp(before->v[i].st.version, e->st.version))
            continue;
        bytes += strlen(e->path) + 64;
        if (n == TOOL_FILES_MAX || bytes > TOOL_FILES_BYTES) {
            *ret_more = true;
            break;
        }
        json_t *o = json_object();
        (void)json_set_name(o, "path", e->path);
        (void)json_set(o, "size", json_integer((json_int_t)e->st.size));
        (void)json_set(o, "version", json_string(e->st.version));
        (void)json_array_append_new(arr, o);
        n++;
    }
    return arr;
}

/* Text for JSON: invalid UTF-8 becomes U+FFFD (jansson refuses it). */
static json_t *
text_json(const struct buf *b, uint64_t dropped)
{
    struct buf t;
    buf_init(&t, TOOL_OUTPUT_MAX * 3 + 256);
    const unsigned char *s = (const unsigned char *)b->data;
    size_t n = b->len, i = 0;
    while (i < n) {
        unsigned char ch = s[i];
        size_t len = ch < 0x80         ? 1
                     : (ch >> 5) == 6  ? 2
                     : (ch >> 4) == 14 ? 3
                     : (ch >> 3) == 30 ? 4
                                       : 0;
        bool ok = len > 0 && i + len <= n && ch != 0;
        for (size_t k = 1; ok && k < len; k++)
            ok = (s[i + k] & 0xC0) == 0x80;
        if (ok && len == 2 && ch < 0xC2)
            ok = false;
        if (ok && len == 3) {
            unsigned cp = ((ch & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            ok = cp >= 0x800 && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        if (ok && len == 4) {
            unsigned cp = ((ch & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                          ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            ok = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (ok) {
            (void)buf_put(&t, s + i, len);
            i += len;
        } else {
            (void)buf_puts(&t, ch == 0 ? "\\0" : "\xEF\xBF\xBD");
            i++;
        }
    }
    if (dropped)
        (void)buf_printf(&t, "\n[abx: output truncated: %llu more bytes not shown]\n",
                         (unsigned long long)dropped);
    json_t *v = json_stringn(t.data ? t.data : "", t.len);
    buf_done(&t);
    return v ? v : json_string("");
}

static json_t *
result_json(struct tool_call *c, struct proc *p, bool with_text)
{
    json_t *o = json_object();
    const struct proc_result *res = p ? proc_get_result(p) : NULL;
    (void)json_set(o, "tool", json_string(c->tool_name));
    (void)json_set(o, c->tcmd ? "template" : "package", json_string(c->package));
    if (!res) {
        (void)json_set(o, "exit_code", json_null());
        (void)json_set(o, "error", json_string("the sandbox ended before the tool did"));
    } else {
        (void)json_set(o, "exit_code", json_integer(res->exit_code));
        if (res->signal)
            (void)json_set(o, "signal", json_integer(res->signal));
    }
    if (with_text) {
        (void)json_set(o, "stdout", text_json(&c->out[0], c->dropped[0]));
        (void)json_set(o, "stderr", text_json(&c->out[1], c->dropped[1]));
    }
    (void)json_set(o, "timed_out", json_boolean(res && res->timed_out));
    (void)json_set(o, "oom_killed", json_boolean(res && res->oom_killed));
    (void)json_set(o, "duration_ms", json_integer(res ? (json_int_t)res->duration_ms : 0));
    (void)json_set(o, "truncated", json_boolean(c->dropped[0] || c->dropped[1]));

    struct sandbox *sb = owner_sandbox(c);
    struct files_tree after = {0};
    bool more = false;
    if (sb && c->have_before && walk(sb, &after) == 0) {
        (void)json_set(o, "files", changed_files(&c->before, &after, &more));
        files_tree_free(&after);
    } else {
        (void)json_set(o, "files", json_array());
    }
    if (more)
        (void)json_set(o, "files_truncated", json_true());
    return o;
}

/* Keeps what fits of one chunk; returns the bytes kept. */
static size_t
keep(struct tool_call *c, const struct proc_chunk *ch)
{
    int k = ch->stream == PROC_STDERR ? 1 : 0;
    size_t room = c->out[k].len < TOOL_OUTPUT_MAX ? TOOL_OUTPUT_MAX - c->out[k].len : 0;
    size_t n = ch->len < room ? ch->len : room;
    if (n && buf_put(&c->out[k], ch->data, n) < 0)
        n = 0;
    c->dropped[k] += ch->len - n;
    return n;
}

static void
finish_whole(struct tool_call *c)
{
    struct proc *p = proc_reader_proc(c->reader);
    c->finished = true;
    if (!http_req_closed(c->req))
        api_json(c->req, 200, result_json(c, p, true));
    call_free(c);
}

/* The markers and the result, written once there is room for all of it
 * (the answer is bounded: see TOOL_FILES_BYTES). */
static void
stream_end(struct tool_call *c)
{
    if (!c->final_ready) {
        c->final_ready = true;
        buf_reset(&c->line);
        for (int k = 0; k < 2; k++) {
            if (!c->dropped[k])
                continue;
            char m[128];
            int ml = snprintf(m, sizeof(m), "\n[abx: output truncated: %llu more bytes]\n",
                              (unsigned long long)c->dropped[k]);
            (void)buf_puts(&c->line, k ? "{\"stderr\":\"" : "{\"stdout\":\"");
            (void)b64_encode(&c->line, m, (size_t)ml);
            (void)buf_puts(&c->line, "\"}\n");
        }
        json_t *v = result_json(c, proc_reader_proc(c->reader), false);
        int r = json_dump_buf(v, &c->line);
        json_decref(v);
        if (r < 0 || buf_putc(&c->line, '\n') < 0) {
            http_stream_abort(c->s);
            return;
        }
    }
    if (http_stream_room(c->s) < c->line.len)
        return; /* fill comes back when the socket took more */
    c->finished = true;
    (void)http_stream_write(c->s, c->line.data, c->line.len);
    http_stream_end(c->s);
}

static void
stream_fill(struct http_stream *s, void *ud)
{
    struct tool_call *c = ud;
    (void)s;
    if (c->final_ready) {
        if (!c->finished)
            stream_end(c);
        return;
    }
    while (http_stream_room(c->s) >= TOOL_LINE_ROOM) {
        struct proc_chunk ch;
        int r = proc_reader_peek(c->reader, API_LINE_CHUNK, &ch);
        if (r == 1 && ch.stream == 0) {
            proc_reader_consume(c->reader, 0);
            continue;
        }
        if (r == 1) {
            int k = ch.stream == PROC_STDERR ? 1 : 0;
            size_t n = c->sent[k] < TOOL_OUTPUT_MAX ? TOOL_OUTPUT_MAX - c->sent[k] : 0;
            if (n > ch.len)
                n = ch.len;
            c->sent[k] += n;
            c->dropped[k] += ch.len - n;
            if (n) {
                buf_reset(&c->line);
                int w = buf_puts(&c->line, k ? "{\"stderr\":\"" : "{\"stdout\":\"");
                if (w == 0)
                    w = b64_encode(&c->line, ch.data, n);
                if (w == 0)
                    w = buf_puts(&c->line, "\"}\n");
                if (w < 0 || http_stream_write(c->s, c->line.data, c->line.len) < 0)
                    return;
            }
            proc_reader_consume(c->reader, ch.len);
            continue;
        }
        if (r == -ENODATA)
            stream_end(c);
        return;
    }
}

static void
stream_closed(struct http_stream *s, void *ud)
{
    (void)s;
    call_free(ud);
}

static const struct http_stream_ops stream_ops = {
        .fill = stream_fill,
        .closed = stream_closed,
};

static void
on_output(void *ud)
{
    struct tool_call *c = ud;
    if (c->s) {
        http_stream_wake(c->s);
        return;
    }
    for (;;) {
        struct proc_chunk ch;
        int r = proc_reader_peek(c->reader, API_LINE_CHUNK, &ch);
        if (r == 1) {
            if (ch.stream)
                (void)keep(c, &ch);
            proc_reader_consume(c->reader, ch.len);
            continue;
        }
        if (r == -ENODATA)
            finish_whole(c); /* frees c */
        return;
    }
}

static void
call_started(struct sandbox *sb, struct proc *p, int r, const struct err *err, void *ud)
{
    struct tool_call *c = ud;
    (void)sb;
    if (r < 0) {
        c->api->m.exec_failures++;
        if (!http_req_closed(c->req))
            api_error(c->req, r, err);
        call_free(c);
        return;
    }
    api_stream_attached(c->api, &c->owner, true);
    c->attached = true;
    if (c->stream && !http_req_closed(c->req)) {
        r = http_stream_start(c->req, 200, "application/x-ndjson", &stream_ops, c, &c->s);
        if (r < 0) {
            api_error(c->req, r, NULL);
            call_free(c);
            return;
        }
    }
    r = proc_reader_new(p, 0, on_output, c, &c->reader);
    if (r < 0) {
        if (c->s)
            http_stream_abort(c->s); /* closed() frees c */
        else {
            api_error(c->req, r, NULL);
            call_free(c);
        }
        return;
    }
    on_output(c);
}

static void
call_run(struct tool_call *c, struct sandbox *sb)
{
    struct err err = {0};
    if (walk(sb, &c->before) == 0)
        c->have_before = true;
    c->api->m.execs++;
    int r = sandbox_exec(sb, &c->x, call_started, c, &err);
    if (r < 0) {
        c->api->m.exec_failures++;
        if (!http_req_closed(c->req))
            api_error(c->req, r, &err);
        call_free(c);
    }
}

static void
ws_ready(void *ud, int r, const struct err *err, struct sandbox *sb)
{
    struct tool_call *c = ud;
    if (r < 0) {
        if (!http_req_closed(c->req))
            api_error(c->req, r, err);
        call_free(c);
        return;
    }
    call_run(c, sb);
}

/* Decodes the body into c; answers and returns < 0 on bad input. */
static int
decode_call(struct tool_call *c, const char *body, size_t len)
{
    static const char *const allowed[] = {"arguments", "timeout_s", "idle_timeout_s", "stream",
                                          NULL};
    struct err err = {0};
    json_t *j = NULL;
    int r = json_parse(len ? body : "{}", len ? len : 2, &j, &err);
    if (r == 0)
        r = json_check_object(j, allowed, &err);
    if (r == 0)
        r = json_get_bool(j, "stream", false, &c->stream, &err);
    if (r >= 0)
        r = api_decode_seconds(j, "timeout_s", &c->x.timeout_ms, &err);
    c->timeout_given = r > 0;
    if (r >= 0)
        r = api_decode_seconds(j, "idle_timeout_s", &c->x.idle_timeout_ms, &err);
    if (r < 0) {
        json_decref(j);
        api_error(c->req, r, &err);
        return r;
    }
    /* OpenAI hands arguments over as a string holding JSON; accept both. */
    json_t *args = json_object_get(j, "arguments");
    if (!args || json_is_null(args)) {
        c->args = json_object();
    } else if (json_is_string(args)) {
        r = json_parse(json_string_value(args), json_string_length(args), &c->args, &err);
        if (r < 0) {
            json_decref(j);
            api_error_msg(c->req, 400, "invalid_arguments", "'arguments' is not JSON: %s", err.msg);
            return r;
        }
    } else {
        c->args = json_incref(args);
    }
    json_decref(j);
    if (!json_is_object(c->args)) {
        api_error_msg(c->req, 400, "invalid_arguments", "'arguments' must be a JSON object");
        return -EINVAL;
    }
    if (c->tcmd) {
        r = api_render_command(c->tcmd, c->args, &c->cmd_line, &err);
        if (r < 0) {
            api_error_msg(c->req, 400, "invalid_arguments", "%s: %s", c->tool_name, err.msg);
            return r;
        }
        return 0;
    }
    r = tool_schema_validate(c->pick.cmd->schema, c->args, &err);
    if (r < 0) {
        api_error_msg(c->req, 400, "invalid_arguments", "%s: %s", c->pick.cmd->name, err.msg);
        return r;
    }
    c->args_text = json_dumps(c->args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!c->args_text) {
        api_error(c->req, -ENOMEM, NULL);
        return -ENOMEM;
    }
    if (strlen(c->args_text) > TOOL_ARGS_MAX) {
        api_error_msg(c->req, 413, "too_large", "the arguments are larger than %d bytes",
                      TOOL_ARGS_MAX);
        return -EFBIG;
    }
    return 0;
}

static void
call_body(struct http_req *req, const char *body, size_t len)
{
    struct tool_call *c = http_req_userdata(req);
    struct api *a = c->api;

    if (decode_call(c, body, len) < 0)
        return;
    if (c->tcmd) {
        c->argv[0] = "/bin/sh";
        c->argv[1] = "-c";
        c->argv[2] = c->cmd_line;
        c->argv[3] = NULL;
        c->x.env = (const char *const *)c->tcmd->env;
        c->x.cwd = c->tcmd->cwd;
        if (c->tcmd->timeout_ms && !c->timeout_given)
            c->x.timeout_ms = c->tcmd->timeout_ms;
    } else {
        (void)snprintf(c->launch, sizeof(c->launch), "%s/%s/launch", a->tools_mount,
                       c->pick.pkg->name);
        c->argv[0] = c->launch;
        c->argv[1] = c->pick.cmd->name;
        c->argv[2] = c->args_text;
        c->argv[3] = NULL;
    }
    c->x.argv = c->argv;

    if (c->owner.kind == OWNER_SANDBOX) {
        struct entry *e = api_find(a, req, c->owner.id);
        if (!e)
            return;
        c->started = true;
        http_req_ref(req);
        call_run(c, e->sb);
        return;
    }
    c->started = true;
    http_req_ref(req);
    workspaces_ensure(a->ws, c->owner.id, ws_ready, c);
}

void
api_tool_call(struct api *a, struct http_req *req, const struct out_owner *o, const char *name)
{
    if (strcmp(http_req_method(req), "POST") != 0) {
        http_req_add_header(req, "Allow", "POST");
        api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here",
                      http_req_method(req));
        return;
    }
    if (o->kind == OWNER_WORKSPACE && !a->ws) {
        api_error_msg(req, 404, "not_found", "workspaces are not configured");
        return;
    }
    /* A custom command of a sandbox's template, or a bundle's command;
     * a name both answer to is ambiguous. */
    const struct template_command *tcmd = NULL;
    const struct template *t = NULL;
    if (o->kind == OWNER_SANDBOX) {
        struct entry *e = api_find(a, NULL, o->id);
        t = e ? e->tmpl : NULL;
        tcmd = t ? template_find_command(t, name) : NULL;
    }
    struct tools_pick pick = {0};
    struct err lerr = {0};
    int lr = tools_lookup(a->tools, name, &pick, &lerr);
    if (tcmd && lr != -ENOENT) {
        api_error_msg(req, 409, "tool_conflict",
                      "'%.64s' is a command of tool bundle '%s' and a custom command of template "
                      "'%s'; call the bundle's as 'pkg:cmd'",
                      name, lr == 0 ? pick.pkg->name : "(several)", t->name);
        return;
    }
    if (!tcmd && lookup(a, req, name, &pick) < 0)
        return;
    struct tool_call *c = calloc(1, sizeof(*c));
    if (!c) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    c->api = a;
    c->req = req;
    c->owner = *o;
    c->pick = pick;
    c->tcmd = tcmd;
    c->tool_name = tcmd ? tcmd->name : pick.cmd->name;
    c->package = tcmd ? t->name : pick.pkg->name;
    c->x.timeout_ms = a->cfg.exec_timeout_ms;
    buf_init(&c->out[0], TOOL_OUTPUT_MAX);
    buf_init(&c->out[1], TOOL_OUTPUT_MAX);
    buf_init(&c->line, TOOL_LINE_ROOM + TOOL_FILES_BYTES * 2);
    http_req_set_userdata(req, c, call_close);
    http_req_read_body(req, API_JSON_MAX, call_body);
}

void
wire_sandbox_tool(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    struct entry *e = api_find(a, req, r->id);
    if (!e ||
        (!template_find_command(e->tmpl, r->name) && !api_need_cap(req, e, TEMPLATE_CAP_SHELL)))
        return;
    struct out_owner o = {.kind = OWNER_SANDBOX};
    (void)snprintf(o.id, sizeof(o.id), "%s", r->id);
    api_tool_call(a, req, &o, r->name);
}
