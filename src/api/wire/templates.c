/*
 * templates.c - templates on the native wire: discovery and the custom
 * commands a template declares.
 *
 *   GET  /v1/templates, GET /v1/templates/{name}
 *   GET  /v1/sandboxes/{id}/commands
 *   POST /v1/sandboxes/{id}/commands/{name}   {args: {...}}   streams like exec
 *   POST /v1/sandboxes/{id}/code              {language, code} streams like exec
 *
 * A command's values are checked, coerced, quoted and substituted by
 * template/command.c; here JSON becomes struct command_value and the
 * rendered line runs as `/bin/sh -c LINE` through the exec machinery.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "template/command.h"
#include "template/set.h"
#include "util/json.h"

#define CODE_MAX PROC_STDIN_MAX /* bytes of a code snippet (it goes in on stdin) */

/* --- discovery --- */

static json_t *
arg_json(const struct template_arg *g)
{
    json_t *o = json_object();
    (void)json_set(o, "name", json_string(g->name));
    (void)json_set(o, "type", json_string(template_arg_type_name(g->type)));
    (void)json_set(o, "required", json_boolean(g->required));
    (void)json_set(o, "default", g->default_text ? json_string(g->default_text) : json_null());
    (void)json_set(o, "description", g->description ? json_string(g->description) : json_null());
    return o;
}

/* The arguments as a JSON Schema (what a model fills in). */
json_t *
api_command_schema(const struct template_command *c)
{
    static const char *const types[] = {"string", "integer", "number", "boolean"};
    json_t *props = json_object(), *req = json_array();
    for (size_t i = 0; i < c->n_args; i++) {
        const struct template_arg *g = &c->args[i];
        json_t *p = json_object();
        (void)json_set(p, "type", json_string(types[g->type]));
        if (g->description)
            (void)json_set(p, "description", json_string(g->description));
        if (g->default_text) {
            json_error_t je;
            json_t *d = g->type == TEMPLATE_ARG_STR
                                ? json_string(g->default_text)
                                : json_loads(g->default_text, JSON_DECODE_ANY, &je);
            if (d)
                (void)json_set(p, "default", d);
        }
        (void)json_object_set_new(props, g->name, p);
        if (g->required)
            (void)json_array_append_new(req, json_string(g->name));
    }
    json_t *s = json_object();
    (void)json_set(s, "type", json_string("object"));
    if (c->description)
        (void)json_set(s, "description", json_string(c->description));
    (void)json_set(s, "properties", props);
    (void)json_set(s, "required", req);
    (void)json_set(s, "additionalProperties", json_false());
    return s;
}

static json_t *
commands_json(const struct template *t, const struct api_scope *scope)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < t->n_cmds; i++) {
        const struct template_command *c = &t->cmds[i];
        if (!api_scope_command(scope, t, c->name))
            continue;
        json_t *o = json_object(), *args = json_array();
        for (size_t k = 0; k < c->n_args; k++)
            (void)json_array_append_new(args, arg_json(&c->args[k]));
        (void)json_set(o, "name", json_string(c->name));
        (void)json_set(o, "description",
                       c->description ? json_string(c->description) : json_null());
        (void)json_set(o, "args", args);
        (void)json_set(o, "schema", api_command_schema(c));
        (void)json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *
template_json(const struct api *a, const struct template *t, bool full,
              const struct api_scope *scope)
{
    json_t *o = json_object(), *aliases = json_array();
    for (size_t i = 0; i < t->n_aliases; i++)
        (void)json_array_append_new(aliases, json_string(t->aliases[i]));
    (void)json_set(o, "name", json_string(t->name));
    (void)json_set(o, "aliases", aliases);
    (void)json_set(o, "description", t->description ? json_string(t->description) : json_null());
    (void)json_set(o, "base", json_string(t->base));
    (void)json_set(o, "capabilities", api_caps_json(t->caps));
    double cpu;
    uint64_t mem, pids;
    template_effective_resources(a->templates, t, &cpu, &mem, &pids);
    json_t *res = json_object();
    (void)json_set(res, "cpu", cpu > 0 ? json_real(cpu) : json_null());
    (void)json_set(res, "memory_mb", mem ? json_integer((json_int_t)mem) : json_null());
    (void)json_set(res, "pids", pids ? json_integer((json_int_t)pids) : json_null());
    (void)json_set(o, "resources", res);
    (void)json_set(o, "built", json_boolean(t->digest != NULL));
    if (full) {
        json_t *ports = json_array();
        for (size_t i = 0; i < t->n_ports; i++)
            (void)json_array_append_new(ports, json_integer(t->ports[i]));
        (void)json_set(o, "ports", ports);
        (void)json_set(o, "commands", commands_json(t, scope));
    } else {
        json_t *names = json_array();
        for (size_t i = 0; i < t->n_cmds; i++)
            if (api_scope_command(scope, t, t->cmds[i].name))
                (void)json_array_append_new(names, json_string(t->cmds[i].name));
        (void)json_set(o, "commands", names);
    }
    return o;
}

void
wire_templates(struct api *a, struct http_req *req, const char *path, const struct api_scope *scope)
{
    if (!strcmp(path, "/v1/templates") && !strcmp(http_req_method(req), "POST")) {
        api_template_build(a, req, scope);
        return;
    }
    if (strcmp(http_req_method(req), "GET") != 0) {
        http_req_add_header(req, "Allow", !strcmp(path, "/v1/templates") ? "GET, POST" : "GET");
        api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here",
                      http_req_method(req));
        return;
    }
    if (!strcmp(path, "/v1/templates")) {
        json_t *arr = json_array();
        for (size_t i = 0; i < template_set_count(a->templates); i++) {
            const struct template *t = template_set_at(a->templates, i);
            if (api_scope_template(scope, t))
                (void)json_array_append_new(arr, template_json(a, t, false, scope));
        }
        json_t *o = json_object();
        (void)json_set(o, "templates", arr);
        api_json(req, 200, o);
        return;
    }
    const char *name = path + 14;
    const struct template *t = strchr(name, '/') ? NULL : template_set_find(a->templates, name);
    if (!t || !api_scope_template(scope, t)) {
        api_error_msg(req, 404, "not_found", "no template '%.64s'", name);
        return;
    }
    api_json(req, 200, template_json(a, t, true, scope));
}

/* --- running a command --- */

/* "a, b, c" of t's command names scope may see, for a 404 that says what
 * exists. */
static void
names_of(const struct template *t, const struct api_scope *scope, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; t && i < t->n_cmds && k + 4 < n; i++) {
        if (!api_scope_command(scope, t, t->cmds[i].name))
            continue;
        int w = snprintf(out + k, n - k, "%s%s", k ? ", " : "", t->cmds[i].name);
        if (w < 0 || (size_t)w >= n - k) {
            (void)snprintf(out + k, n - k, "...");
            break;
        }
        k += (size_t)w;
    }
}

int
api_render_command(const struct template_command *c, json_t *args, char **ret, struct err *err)
{
    size_t n = args ? json_object_size(args) : 0, i = 0;
    struct command_value *vals = calloc(n + 1, sizeof(*vals));
    char **texts = calloc(n + 1, sizeof(*texts));
    const char *k;
    json_t *v;
    int r = vals && texts ? 0 : -ENOMEM;
    if (args && r == 0) {
        json_object_foreach (args, k, v) {
            vals[i].name = k;
            if (json_is_string(v)) {
                vals[i].text = json_string_value(v);
                vals[i].len = json_string_length(v);
                vals[i].is_string = true;
            } else if (json_is_number(v) || json_is_boolean(v)) {
                texts[i] = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
                if (!texts[i]) {
                    r = -ENOMEM;
                    break;
                }
                vals[i].text = texts[i];
            } else {
                r = err_set(err, EINVAL,
                            "argument values must be strings, numbers or booleans; '%.64s' is "
                            "not",
                            template_name_ok(k) ? k : "(an argument)");
                break;
            }
            i++;
        }
    }
    if (r == 0)
        r = command_render(c, vals, i, ret, err);
    for (size_t m = 0; texts && m < n; m++)
        free(texts[m]);
    free(texts);
    free(vals);
    return r;
}

struct call_rq {
    struct api *api;
    char id[API_ID_LEN + 8];
    char name[TEMPLATE_NAME_MAX + 1];
};

static void
call_rq_close(struct http_req *req, void *ud)
{
    (void)req;
    free(ud);
}

/* Runs `sh -c script` in e's sandbox and answers req as exec does; c (may
 * be NULL) gives env, cwd and deadline, stdin_data the process's stdin. */
static void
run_sh(struct api *a, struct http_req *req, struct entry *e, const char *script,
       const struct template_command *c, const char *stdin_data, size_t stdin_len)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct exec_req *x = NULL;
    int r = api_exec_req_new(a, argv, c ? (const char *const *)c->env : NULL, c ? c->cwd : NULL,
                             c ? c->timeout_ms : 0, stdin_data, stdin_len, &x);
    if (r < 0) {
        api_error(req, r, NULL);
        return;
    }
    struct out_owner owner = {.kind = OWNER_SANDBOX};
    (void)snprintf(owner.id, sizeof(owner.id), "%s", e->id);
    api_exec_run(a, req, e->sb, &owner, x);
    api_exec_req_free(x);
}

static void
command_body(struct http_req *req, const char *body, size_t len)
{
    struct call_rq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j = NULL;
    static const char *const allowed[] = {"args", NULL};

    struct entry *e = api_find(a, req, q->id);
    if (!e)
        return;
    const struct template_command *c = template_find_command(e->tmpl, q->name);
    int r = json_parse(len ? body : "{}", len ? len : 2, &j, &err);
    if (r == 0)
        r = json_check_object(j, allowed, &err);
    json_t *args = r == 0 ? json_object_get(j, "args") : NULL;
    if (r == 0 && args && !json_is_object(args))
        r = err_set(&err, EINVAL, "'args' must be an object");
    if (r < 0) {
        json_decref(j);
        api_error(req, r, &err);
        return;
    }
    char *line = NULL;
    r = api_render_command(c, args, &line, &err);
    if (r < 0)
        api_error(req, r == -E2BIG ? -EINVAL : r, &err);
    else
        run_sh(a, req, e, line, c, NULL, 0);
    free(line);
    json_decref(j);
}

/* The snippet goes to a file of its own (never a fixed path: concurrent
 * calls must not collide), run by the interpreter the sandbox has. */
static void
code_body(struct http_req *req, const char *body, size_t len)
{
    struct call_rq *q = http_req_userdata(req);
    struct api *a = q->api;
    struct err err = {0};
    json_t *j = NULL;
    const char *lang = NULL, *code = NULL;
    static const char *const allowed[] = {"language", "code", NULL};

    struct entry *e = api_find(a, req, q->id);
    if (!e)
        return;
    int r = json_parse(body, len, &j, &err);
    if (r == 0)
        r = json_check_object(j, allowed, &err);
    if (r >= 0)
        r = json_get_str(j, "language", true, &lang, &err);
    if (r >= 0)
        r = json_get_str(j, "code", true, &code, &err);
    if (r < 0) {
        json_decref(j);
        api_error(req, r, &err);
        return;
    }
    const char *run;
    if (!strcmp(lang, "python"))
        run = "if command -v python3 >/dev/null 2>&1; then p=python3; "
              "elif command -v python >/dev/null 2>&1; then p=python; "
              "else echo 'abx: no python3 or python in this sandbox' >&2; exit 127; fi; "
              "\"$p\" \"$f\"";
    else if (!strcmp(lang, "javascript"))
        run = "if ! command -v node >/dev/null 2>&1; then "
              "echo 'abx: no node in this sandbox' >&2; exit 127; fi; node \"$f\"";
    else if (!strcmp(lang, "bash"))
        run = "bash \"$f\"";
    else {
        api_error_msg(req, 400, "bad_request",
                      "'language' must be python, javascript or bash, not '%.32s'", lang);
        json_decref(j); /* lang lives in j */
        return;
    }
    if (strlen(code) > CODE_MAX) {
        json_decref(j);
        api_error_msg(req, 413, "too_large", "'code' is larger than %d bytes", CODE_MAX);
        return;
    }
    /* mktemp makes the unique file; the snippet arrives on stdin and is
     * copied into it, never parsed by the shell. The interpreter's stdin
     * is /dev/null. */
    char script[1024];
    (void)snprintf(script, sizeof(script),
                   "f=$(mktemp /tmp/abx-code-XXXXXXXXXX) || exit 125; "
                   "trap 'rm -f \"$f\"' EXIT; cat >\"$f\" || exit 125; %s </dev/null",
                   run);
    run_sh(a, req, e, script, NULL, code, strlen(code));
    json_decref(j); /* code lives in j; run_sh copied it */
}

void
api_commands(struct api *a, struct http_req *req, const char *id, const char *what,
             const char *name, const struct api_scope *scope)
{
    const char *m = http_req_method(req);
    struct entry *e = api_find(a, req, id);
    if (!e)
        return;
    bool code = !strcmp(what, "code");
    if (!code && !name) {
        if (strcmp(m, "GET") != 0) {
            http_req_add_header(req, "Allow", "GET");
            api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here", m);
            return;
        }
        json_t *o = json_object();
        (void)json_set(o, "template", json_string(e->tmpl ? e->tmpl->name : "base"));
        (void)json_set(o, "capabilities", api_caps_json(e->caps));
        (void)json_set(o, "commands", e->tmpl ? commands_json(e->tmpl, scope) : json_array());
        api_json(req, 200, o);
        return;
    }
    if (strcmp(m, "POST") != 0) {
        http_req_add_header(req, "Allow", "POST");
        api_error_msg(req, 405, "method_not_allowed", "%s is not allowed here", m);
        return;
    }
    if (code && !api_need_cap(req, e, TEMPLATE_CAP_CODE))
        return;
    if (!code &&
        (!template_find_command(e->tmpl, name) || !api_scope_command(scope, e->tmpl, name))) {
        char names[1024];
        names_of(e->tmpl, scope, names, sizeof(names));
        api_error_msg(req, 404, "not_found", "template '%s' has no command '%.64s' (it has: %s)",
                      e->tmpl ? e->tmpl->name : "base", name, names[0] ? names : "none");
        return;
    }
    struct call_rq *q = calloc(1, sizeof(*q));
    if (!q) {
        api_error(req, -ENOMEM, NULL);
        return;
    }
    q->api = a;
    (void)snprintf(q->id, sizeof(q->id), "%s", id);
    (void)snprintf(q->name, sizeof(q->name), "%s", name ? name : "");
    http_req_set_userdata(req, q, call_rq_close);
    http_req_read_body(req, code ? CODE_MAX + 4096 : API_JSON_MAX, code ? code_body : command_body);
}
