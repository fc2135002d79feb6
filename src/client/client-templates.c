/*
 * client-templates.c - templates, a sandbox's custom commands, and running
 * them and code snippets.
 *
 * GET /v1/templates, /v1/templates/{name}, /v1/sandboxes/{id}/commands;
 * POST /v1/sandboxes/{id}/commands/{name} and /v1/sandboxes/{id}/code,
 * which stream NDJSON exactly like exec and are decoded by client-exec.c's
 * line handler (client_stream()). Answers are kept as the text abxd sent
 * with the useful fields decoded beside it. A command's arguments arrive as
 * JSON text, are checked to be one object and sent as they are (numbers
 * keep their spelling); their checking and coercion is abxd's. This file
 * does not know how a template is built or a command rendered; building
 * sends the directory as a tar (util/tar.h) and reads the build log.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client-internal.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/tar.h"

#define ANSWER_MAX        CLIENT_BODY_MAX
#define TEMPLATE_NAME_MAX 64                  /* bytes of a template or command name */
#define ARGS_MAX          CLIENT_REQ_BODY_MAX /* bytes of the arguments' JSON text */
#define CODE_MAX          (4u * 1024 * 1024)  /* bytes of code we encode; abxd takes 1 MiB */

DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_template_info *, abx_template_info_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_template_list *, abx_template_list_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct abx_command_list *, abx_command_list_free)

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void
commands_free(struct abx_command *cmds, size_t n)
{
    for (size_t i = 0; cmds && i < n; i++) {
        struct abx_command *c = &cmds[i];
        for (size_t k = 0; c->args && k < c->n_args; k++) {
            free(c->args[k].name);
            free(c->args[k].type_name);
            free(c->args[k].default_value);
            free(c->args[k].description);
        }
        free(c->args);
        free(c->name);
        free(c->description);
        free(c->schema);
    }
    free(cmds);
}

struct abx_template_info *
abx_template_info_free(struct abx_template_info *t)
{
    if (!t)
        return NULL;
    free(t->name);
    strv_free(t->aliases, t->n_aliases);
    free(t->description);
    free(t->base);
    strv_free(t->capabilities, t->n_capabilities);
    free(t->ports);
    commands_free(t->commands, t->n_commands);
    free(t->json);
    free(t);
    return NULL;
}

struct abx_template_list *
abx_template_list_free(struct abx_template_list *l)
{
    if (!l)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        abx_template_info_free(l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
    return NULL;
}

struct abx_command_list *
abx_command_list_free(struct abx_command_list *l)
{
    if (!l)
        return NULL;
    free(l->template_name);
    strv_free(l->capabilities, l->n_capabilities);
    commands_free(l->commands, l->n_commands);
    free(l->json);
    free(l);
    return NULL;
}

const struct abx_command *
abx_command_find(const struct abx_command_list *l, const char *name)
{
    for (size_t i = 0; l && name && i < l->n_commands; i++)
        if (l->commands[i].name && !strcmp(l->commands[i].name, name))
            return &l->commands[i];
    return NULL;
}

/* --- URLs --- */

/* Appends "/<name>" percent-encoded. -EINVAL for an empty name, one longer
 * than TEMPLATE_NAME_MAX or with control characters (abxd's names are
 * [a-z0-9_-]; anything else is sent, encoded, for abxd to refuse). */
static int
put_name(struct buf *b, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    int r;

    if (n == 0 || n > TEMPLATE_NAME_MAX)
        return -EINVAL;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            return -EINVAL;
    if ((r = buf_putc(b, '/')) < 0)
        return r;
    return client_put_encoded(b, name, false);
}

/* "/v1/templates/<name>". */
static int
template_url(struct buf *b, const char *name)
{
    int r = buf_puts(b, "/v1/templates");
    return r < 0 ? r : put_name(b, name);
}

/* "/v1/sandboxes/<id>/commands/<name>". */
static int
command_url(struct abx_client *c, struct buf *b, const char *id, const char *name)
{
    int r;

    if ((r = client_sandbox_url(c, b, id, "/commands")) < 0)
        return r;
    r = put_name(b, name);
    if (r == -EINVAL)
        return client_fail(c, r, "invalid command name '%.80s'", name ? name : "");
    if (r < 0)
        return client_fail(c, r, "cannot build the request URL: %s", strerror(-r));
    return 0;
}

/* --- decoding --- */

/* A NULL-terminated copy of the strings of array key (others skipped). */
static int
strv_from(json_t *o, const char *key, char ***ret, size_t *ret_n)
{
    json_t *arr = json_object_get(o, key), *v;
    char **s;
    size_t i, n = 0;

    s = calloc(json_array_size(arr) + 1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    json_array_foreach (arr, i, v) {
        if (!json_is_string(v))
            continue;
        s[n] = strdup(json_string_value(v));
        if (!s[n]) {
            strv_free(s, n);
            return -ENOMEM;
        }
        n++;
    }
    *ret = s;
    *ret_n = n;
    return 0;
}

static enum abx_arg_type
arg_type(const char *s)
{
    if (!s)
        return ABX_ARG_STR; /* abxd's default type */
    if (!strcmp(s, "str"))
        return ABX_ARG_STR;
    if (!strcmp(s, "int"))
        return ABX_ARG_INT;
    if (!strcmp(s, "float"))
        return ABX_ARG_FLOAT;
    if (!strcmp(s, "bool"))
        return ABX_ARG_BOOL;
    return ABX_ARG_UNKNOWN;
}

static int
arg_from(json_t *o, struct abx_command_arg *a)
{
    json_t *d = json_object_get(o, "default");

    if (!json_is_string(json_object_get(o, "name")))
        return -EBADMSG;
    if (client_dup_str(o, "name", &a->name) < 0 || client_dup_str(o, "type", &a->type_name) < 0 ||
        client_dup_str(o, "description", &a->description) < 0)
        return -ENOMEM;
    a->type = arg_type(a->type_name);
    if (!a->type_name && !(a->type_name = strdup("str")))
        return -ENOMEM;
    a->required = client_get_bool(o, "required");
    /* abxd sends the canonical text; a number or bool is written out. */
    if (json_is_string(d))
        a->default_value = strdup(json_string_value(d));
    else if (d && !json_is_null(d))
        a->default_value = json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT);
    if (d && !json_is_null(d) && !a->default_value)
        return -ENOMEM;
    return 0;
}

/* A command: a name (a template list's entries) or an object (the rest). */
static int
command_from(json_t *o, struct abx_command *c)
{
    json_t *args, *schema, *v;
    size_t i;
    int r;

    if (json_is_string(o)) {
        c->name = strdup(json_string_value(o));
        return c->name ? 0 : -ENOMEM;
    }
    if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")))
        return -EBADMSG;
    if (client_dup_str(o, "name", &c->name) < 0 ||
        client_dup_str(o, "description", &c->description) < 0)
        return -ENOMEM;
    args = json_object_get(o, "args");
    c->args = calloc(json_array_size(args) + 1, sizeof(*c->args));
    if (!c->args)
        return -ENOMEM;
    json_array_foreach (args, i, v) {
        r = arg_from(v, &c->args[c->n_args]);
        c->n_args++; /* so a half-filled entry is freed */
        if (r < 0)
            return r;
    }
    schema = json_object_get(o, "schema");
    if (json_is_object(schema) && !(c->schema = json_dumps(schema, JSON_INDENT(2))))
        return -ENOMEM;
    return 0;
}

static int
commands_from(json_t *o, struct abx_command **ret, size_t *ret_n)
{
    json_t *arr = json_object_get(o, "commands"), *v;
    size_t i;
    int r;

    if (arr && !json_is_array(arr))
        return -EBADMSG;
    *ret = calloc(json_array_size(arr) + 1, sizeof(**ret));
    if (!*ret)
        return -ENOMEM;
    *ret_n = 0;
    json_array_foreach (arr, i, v) {
        r = command_from(v, &(*ret)[*ret_n]);
        (*ret_n)++;
        if (r < 0)
            return r;
    }
    return 0;
}

static int
template_from(json_t *o, bool details, struct abx_template_info **ret)
{
    _cleanup_(abx_template_info_freep) struct abx_template_info *t = NULL;
    json_t *res, *ports, *v;
    size_t i;
    int r;

    if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")))
        return -EBADMSG;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    if (client_dup_str(o, "name", &t->name) < 0 ||
        client_dup_str(o, "description", &t->description) < 0 ||
        client_dup_str(o, "base", &t->base) < 0 ||
        strv_from(o, "aliases", &t->aliases, &t->n_aliases) < 0 ||
        strv_from(o, "capabilities", &t->capabilities, &t->n_capabilities) < 0)
        return -ENOMEM;
    res = json_object_get(o, "resources");
    t->cpu = client_get_num(res, "cpu");
    t->memory_mb = client_get_u64(res, "memory_mb");
    t->pids = client_get_u64(res, "pids");
    ports = json_object_get(o, "ports");
    t->ports = calloc(json_array_size(ports) + 1, sizeof(*t->ports));
    if (!t->ports)
        return -ENOMEM;
    json_array_foreach (ports, i, v) {
        if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 65535)
            t->ports[t->n_ports++] = (int)json_integer_value(v);
    }
    if ((r = commands_from(o, &t->commands, &t->n_commands)) < 0)
        return r;
    t->has_details = details;
    t->json = json_dumps(o, JSON_COMPACT);
    if (!t->json)
        return -ENOMEM;
    *ret = TAKE_PTR(t);
    return 0;
}

static int
command_list_from(json_t *o, struct abx_command_list *l)
{
    int r;

    if (!json_is_array(json_object_get(o, "commands")))
        return -EBADMSG;
    if (client_dup_str(o, "template", &l->template_name) < 0 ||
        strv_from(o, "capabilities", &l->capabilities, &l->n_capabilities) < 0)
        return -ENOMEM;
    if ((r = commands_from(o, &l->commands, &l->n_commands)) < 0)
        return r;
    return 0;
}

/* --- discovery --- */

int
abx_template_list(struct abx_client *c, struct abx_template_list **ret)
{
    _cleanup_(abx_template_list_freep) struct abx_template_list *l = NULL;
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
    if ((r = buf_puts(&path, "/v1/templates")) < 0)
        return client_fail(c, r, "out of memory");
    if ((r = client_get_list(c, &path, 0, "the template list", "templates", &answer, &j, &arr)) < 0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->items = calloc(json_array_size(arr) + 1, sizeof(*l->items))) ||
        !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    json_array_foreach (arr, i, v) {
        r = template_from(v, false, &l->items[l->n]);
        if (r == -EBADMSG)
            return client_fail(c, r, "abxd's template list has a bad entry");
        if (r < 0)
            return client_fail(c, r, "out of memory");
        l->n++;
    }
    *ret = TAKE_PTR(l);
    return 0;
}

int
abx_template_get(struct abx_client *c, const char *name, struct abx_template_info **ret)
{
    _cleanup_(abx_template_info_freep) struct abx_template_info *t = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    r = template_url(&path, name);
    if (r < 0)
        return client_fail(c, r == -EFBIG ? -EINVAL : r, "invalid template name '%.80s'",
                           name ? name : "");
    if ((r = client_call(c, "GET", &path, NULL, 0, &answer, NULL)) < 0)
        return r;
    if ((r = client_parse(c, answer.data, answer.len, "a template", &j)) < 0)
        return r;
    r = template_from(j, true, &t);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer is not a template");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    free(t->json);
    if (!(t->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    *ret = TAKE_PTR(t);
    return 0;
}

int
abx_sandbox_commands(struct abx_client *c, const char *id, struct abx_command_list **ret)
{
    _cleanup_(abx_command_list_freep) struct abx_command_list *l = NULL;
    _cleanup_(json_decrefp) json_t *j = NULL;
    _cleanup_buf_ struct buf path, answer;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&answer, ANSWER_MAX);
    if (!c || !ret)
        return -EINVAL;
    client_clear(c);
    if ((r = client_sandbox_url(c, &path, id, "/commands")) < 0)
        return r;
    if ((r = client_call(c, "GET", &path, NULL, 0, &answer, NULL)) < 0)
        return r;
    if ((r = client_parse(c, answer.data, answer.len, "the command list", &j)) < 0)
        return r;
    l = calloc(1, sizeof(*l));
    if (!l || !(l->json = client_strip(&answer)))
        return client_fail(c, -ENOMEM, "out of memory");
    r = command_list_from(j, l);
    if (r == -EBADMSG)
        return client_fail(c, r, "abxd's answer has no valid 'commands' list");
    if (r < 0)
        return client_fail(c, r, "out of memory");
    *ret = TAKE_PTR(l);
    return 0;
}

/* --- running --- */

/* The request body {"args": <args_json as given>}. */
static int
command_body(struct abx_client *c, const char *args_json, struct buf *body)
{
    _cleanup_(json_decrefp) json_t *args = NULL;
    json_error_t je;
    int r;

    if (!args_json)
        args_json = "{}";
    if (strlen(args_json) > ARGS_MAX)
        return client_fail(c, -EFBIG, "the arguments are larger than %u bytes", ARGS_MAX);
    args = json_loads(args_json, JSON_REJECT_DUPLICATES, &je);
    if (!args)
        return client_fail(c, -EINVAL, "the arguments are not valid JSON: %s (line %d, column %d)",
                           je.text, je.line, je.column);
    if (!json_is_object(args))
        return client_fail(c, -EINVAL, "the arguments are not a JSON object");
    /* A valid JSON text is one value and nothing else: safe to embed. */
    if ((r = buf_puts(body, "{\"args\":")) < 0 || (r = buf_puts(body, args_json)) < 0 ||
        (r = buf_putc(body, '}')) < 0)
        return client_fail(c, r, "cannot build the request: %s", strerror(-r));
    return 0;
}

int
abx_command_run(struct abx_client *c, const char *id, const char *name, const char *args_json,
                abx_output_fn output, void *userdata, struct abx_exec_result *ret)
{
    _cleanup_buf_ struct buf path, body;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    buf_init(&body, CLIENT_REQ_BODY_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if ((r = command_url(c, &path, id, name)) < 0)
        return r;
    if ((r = command_body(c, args_json, &body)) < 0)
        return r;
    r = client_stream(c, "POST", &path, body.data, NULL, output, userdata, ret);
    if (r == 0)
        return client_fail(c, -EPROTO, "the output stream ended before the command's result");
    return r < 0 ? r : 0;
}

int
abx_code_run(struct abx_client *c, const char *id, const char *language, const char *code,
             size_t len, abx_output_fn output, void *userdata, struct abx_exec_result *ret)
{
    _cleanup_(json_decrefp) json_t *o = NULL;
    _cleanup_free_ char *body = NULL;
    _cleanup_buf_ struct buf path;
    json_t *text;
    int r;

    buf_init(&path, CLIENT_URL_MAX);
    if (!c)
        return -EINVAL;
    client_clear(c);
    if (!language || !*language)
        return client_fail(c, -EINVAL, "no language given (python, javascript or bash)");
    if (len && !code)
        return client_fail(c, -EINVAL, "no code given");
    if (len > CODE_MAX)
        return client_fail(c, -EFBIG, "the code is larger than %u bytes", CODE_MAX);
    if (len && memchr(code, '\0', len))
        return client_fail(c, -EINVAL, "the code contains a NUL byte");
    if ((r = client_sandbox_url(c, &path, id, "/code")) < 0)
        return r;
    o = json_object();
    if (!o)
        return client_fail(c, -ENOMEM, "out of memory");
    if (json_object_set_new(o, "language", json_string(language)) < 0)
        return client_fail(c, -EINVAL, "the language is not valid UTF-8");
    text = json_stringn(len ? code : "", len);
    if (!text || json_object_set_new(o, "code", text) < 0)
        return client_fail(c, -EINVAL, "the code is not valid UTF-8");
    body = client_dump(TAKE_PTR(o));
    if (!body)
        return client_fail(c, -ENOMEM, "out of memory");
    r = client_stream(c, "POST", &path, body, NULL, output, userdata, ret);
    if (r == 0)
        return client_fail(c, -EPROTO, "the output stream ended before the snippet's result");
    return r < 0 ? r : 0;
}

/* --- building --- */

struct build_ctx {
    struct abx_client *c;
    abx_build_log_fn log;
    void *ud;
    char *name;  /* from the done line */
    char *error; /* from the error line */
};

static int
tar_to_fd(void *ud, const void *p, size_t n)
{
    return write_full(*(int *)ud, p, n);
}

static int
build_line(const char *line, size_t len, void *ud)
{
    struct build_ctx *b = ud;
    json_t *o = NULL;
    int r = client_parse(b->c, line, len, "build log line", &o);
    if (r < 0)
        return r;
    json_t *err = json_object_get(o, "error");
    if (json_is_string(err)) {
        free(b->error);
        b->error = strdup(json_string_value(err));
    } else if (json_is_true(json_object_get(o, "done"))) {
        free(b->name);
        b->name = NULL;
        r = client_dup_str(o, "template", &b->name);
    } else if (b->log) {
        unsigned step = (unsigned)client_get_u64(o, "step");
        json_t *start = json_object_get(o, "start");
        json_t *text = json_object_get(o, "line");
        if (json_is_string(start))
            r = b->log(step, true, (unsigned)json_integer_value(text), json_string_value(start),
                       b->ud)
                        ? client_fail(b->c, -ECANCELED, "stopped by the caller")
                        : 0;
        else if (json_is_string(text))
            r = b->log(step, false, 0, json_string_value(text), b->ud)
                        ? client_fail(b->c, -ECANCELED, "stopped by the caller")
                        : 0;
    }
    json_decref(o);
    return r;
}

ABX_PUBLIC int
abx_template_build(struct abx_client *c, const char *dir, abx_build_log_fn log, void *userdata,
                   char **ret_name)
{
    _cleanup_(buf_donep) struct buf path = {0};
    _cleanup_close_ int dfd = -EBADF, tfd = -EBADF;
    struct build_ctx b = {.c = c, .log = log, .ud = userdata};
    struct client_req rq;
    struct err err = {0};
    const char *tmp = getenv("TMPDIR");
    int r;

    client_clear(c);
    if (!dir || !*dir)
        return client_fail(c, -EINVAL, "no template directory given");
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return client_fail(c, -errno, "cannot open the template directory '%s': %s", dir,
                           strerror(errno));
    tfd = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tfd < 0)
        return client_fail(c, -errno, "cannot make a temporary file: %s", strerror(errno));
    r = tar_write_dir(dfd, tar_to_fd, &tfd, TAR_BYTES_MAX, &err);
    if (r < 0)
        return client_fail(c, r, "cannot pack '%s': %s", dir, err.msg[0] ? err.msg : strerror(-r));
    if (lseek(tfd, 0, SEEK_SET) < 0)
        return client_fail(c, -errno, "cannot rewind the archive: %s", strerror(errno));
    /* errors name the directory as the user gave it */
    const char *display = dir;
    char trimmed[4096];
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    if (dl < sizeof(trimmed)) {
        memcpy(trimmed, dir, dl);
        trimmed[dl] = '\0';
        display = trimmed;
    }
    buf_init(&path, CLIENT_URL_MAX);
    if ((r = buf_puts(&path, "/v1/templates?dir=")) < 0 ||
        (r = client_put_encoded(&path, display, true)) < 0)
        return client_fail(c, r, "template directory name too long");
    client_req_init(&rq, "POST", &path);
    rq.upload_fd = tfd;
    rq.content_type = "application/x-tar";
    rq.stream = true;
    rq.resp = CLIENT_RESP_NDJSON;
    rq.line = build_line;
    rq.line_ud = &b;
    r = client_request(c, &rq);
    if (r == 0 && b.error)
        r = client_fail(c, -ECANCELED, "%s", b.error);
    else if (r == 0 && !b.name)
        r = client_fail(c, -EPROTO, "the build log ended without a result");
    if (r == 0 && ret_name) {
        *ret_name = b.name;
        b.name = NULL;
    }
    free(b.name);
    free(b.error);
    return r;
}
