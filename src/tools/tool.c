/*
 * tool.c - libabxtool: the launch contract for tools written in C
 * (include/abx/tool.h).
 *
 * Every stage first turns the whole declaration into schemas and checks
 * them with tool_schema_check(), so a wrong declaration fails the same way
 * whatever the stage (and at build time, when the builder lists commands).
 * Calls are validated with tool_schema_validate() against the very schema
 * the second stage prints; sdk/python/abx_tool.py does the same in Python.
 *
 * schema.c is compiled into this file with internal linkage (see
 * schema.h): the archive is linked by tool authors with a plain `cc`, and
 * must bring no symbols but abx_* and need nothing but jansson.
 */
#include "abx/tool.h"

#define TOOL_SCHEMA_STATIC
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "tools/schema.c" /* IWYU pragma: keep */

#define ARGS_MAX_DEPTH 64  /* nesting of a call's JSON before jansson sees it */
#define COMMANDS_MAX   256 /* commands of one tool (the builder's limit too) */
#define JSON_FLAGS     (JSON_COMPACT | JSON_PRESERVE_ORDER)

struct abx_tool_args {
    const struct abx_tool *tool;
    const struct abx_tool_command *cmd;
    json_t *values;      /* validated, defaults applied, in declaration order */
    const char ***lists; /* per declared argument: STRING_ARRAY values, else NULL */
    size_t nargs;
};

/* [a-z0-9][a-z0-9_-]{0,63}: tool and command names (OpenAI function names). */
static bool
cmd_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (i > 0 && (c == '_' || c == '-'));
        if (!ok)
            return false;
    }
    return true;
}

/* The tool's name for messages, when it is one. */
static const char *
tool_label(const struct abx_tool *t)
{
    return t && cmd_name_ok(t->name) ? t->name : "abx-tool";
}

/* Starts a declaration message: "command 'x': argument 'y': ". */
static void
msg_decl(struct msg *m, const struct abx_tool_command *c, const struct abx_tool_arg *a)
{
    if (c) {
        msg_add(m, "command ");
        msg_name(m, c->name ? c->name : "(null)");
        msg_add(m, ": ");
    }
    if (a) {
        msg_add(m, "argument ");
        msg_name(m, a->name ? a->name : "(null)");
        msg_add(m, ": ");
    }
}

_printf_(4, 5) static int decl_fail(struct err *err, const struct abx_tool_command *c,
                                    const struct abx_tool_arg *a, const char *fmt, ...)
{
    struct msg m = {.len = 0};
    char tmp[ERR_MSG_MAX];
    va_list ap;

    msg_decl(&m, c, a);
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        msg_add(&m, tmp);
    return msg_fail(err, &m);
}

/* A text from the declaration as a JSON string (NULL when not UTF-8). */
static json_t *
decl_string(const char *s)
{
    return json_string(s);
}

static int
set_new(json_t *obj, const char *key, json_t *v)
{
    if (!v || json_object_set_new(obj, key, v) < 0)
        return -ENOMEM;
    return 0;
}

static int
decl_number(const struct abx_tool_command *c, const struct abx_tool_arg *a, const char *key,
            const char *text, json_t *prop, struct err *err)
{
    json_t *v;

    if (!text)
        return 0;
    if (a->type != ABX_ARG_INTEGER && a->type != ABX_ARG_NUMBER)
        return decl_fail(err, c, a, "%s applies to integer and number arguments only", key);
    v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!json_is_number(v)) {
        json_decref(v);
        return decl_fail(err, c, a, "%s is not a JSON number", key);
    }
    return set_new(prop, key, v);
}

/* The property schema of one argument, keys in a fixed order: type, items,
 * enum, description, default, minimum, maximum. */
static int
decl_property(const struct abx_tool_command *c, const struct abx_tool_arg *a, json_t **ret,
              struct err *err)
{
    json_t *p = json_object(), *choices = NULL;
    int r = -ENOMEM;

    if (!p)
        return -ENOMEM;
    if (a->choices) {
        size_t n = 0;
        if (a->type != ABX_ARG_ENUM && a->type != ABX_ARG_STRING_ARRAY) {
            r = decl_fail(err, c, a, "choices apply to enum and string array arguments only");
            goto fail;
        }
        choices = json_array();
        if (!choices)
            goto fail;
        for (const char *const *s = a->choices; *s; s++, n++) {
            if (n == TOOL_SCHEMA_MAX_ENUM) {
                r = decl_fail(err, c, a, "more than %d choices", TOOL_SCHEMA_MAX_ENUM);
                goto fail;
            }
            json_t *v = decl_string(*s);
            if (!v) {
                r = decl_fail(err, c, a, "choice %zu is not valid UTF-8", n);
                goto fail;
            }
            if (json_array_append_new(choices, v) < 0)
                goto fail;
        }
    } else if (a->type == ABX_ARG_ENUM) {
        r = decl_fail(err, c, a, "an enum argument needs choices");
        goto fail;
    }

    switch (a->type) {
    case ABX_ARG_STRING:
    case ABX_ARG_ENUM:
        r = set_new(p, "type", json_string("string"));
        if (r >= 0 && choices)
            r = set_new(p, "enum", json_incref(choices));
        break;
    case ABX_ARG_INTEGER:
        r = set_new(p, "type", json_string("integer"));
        break;
    case ABX_ARG_NUMBER:
        r = set_new(p, "type", json_string("number"));
        break;
    case ABX_ARG_BOOLEAN:
        r = set_new(p, "type", json_string("boolean"));
        break;
    case ABX_ARG_STRING_ARRAY: {
        json_t *items = json_pack("{s:s}", "type", "string");
        if (items && choices && json_object_set(items, "enum", choices) < 0)
            items = (json_decref(items), NULL);
        r = set_new(p, "type", json_string("array"));
        if (r >= 0)
            r = set_new(p, "items", items);
        else
            json_decref(items);
        break;
    }
    default:
        r = decl_fail(err, c, a, "unknown type %d", (int)a->type);
        goto fail;
    }
    if (r < 0)
        goto fail;

    if (a->description) {
        json_t *d = decl_string(a->description);
        if (!d) {
            r = decl_fail(err, c, a, "the description is not valid UTF-8");
            goto fail;
        }
        r = set_new(p, "description", d);
        if (r < 0)
            goto fail;
    }
    if (a->default_json) {
        json_error_t je;
        json_t *d;
        if (a->required) {
            r = decl_fail(err, c, a, "a required argument cannot have a default");
            goto fail;
        }
        d = json_loads(a->default_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!d) {
            r = decl_fail(err, c, a, "the default is not JSON: %s", je.text);
            goto fail;
        }
        r = set_new(p, "default", d);
        if (r < 0)
            goto fail;
    }
    r = decl_number(c, a, "minimum", a->minimum, p, err);
    if (r >= 0)
        r = decl_number(c, a, "maximum", a->maximum, p, err);
    if (r < 0)
        goto fail;

    json_decref(choices);
    *ret = p;
    return 0;
fail:
    json_decref(choices);
    json_decref(p);
    return r;
}

/* {"type":"object","description":...,"properties":{...},"required":[...],
 * "additionalProperties":false}, "required" only when not empty. */
static int
decl_schema(const struct abx_tool_command *c, json_t **ret, struct err *err)
{
    json_t *s = NULL, *props = NULL, *req = NULL, *d = NULL;
    struct err inner = {0};
    int r = -ENOMEM;

    s = json_object();
    props = json_object();
    req = json_array();
    if (!s || !props || !req)
        goto fail;
    if (!c->description) {
        r = decl_fail(err, c, NULL, "the description is missing");
        goto fail;
    }
    if (set_new(s, "type", json_string("object")) < 0)
        goto fail;
    d = decl_string(c->description);
    if (!d) {
        r = decl_fail(err, c, NULL, "the description is not valid UTF-8");
        goto fail;
    }
    if (set_new(s, "description", d) < 0)
        goto fail;

    for (const struct abx_tool_arg *a = c->args; a && a->name; a++) {
        json_t *p = NULL;
        if (!name_ok(a->name, strlen(a->name))) {
            r = decl_fail(err, c, a, "invalid name (expected [A-Za-z_][A-Za-z0-9_-]{0,63})");
            goto fail;
        }
        if (json_object_get(props, a->name)) {
            r = decl_fail(err, c, a, "declared twice");
            goto fail;
        }
        if ((size_t)(a - c->args) == TOOL_SCHEMA_MAX_PROPERTIES) {
            r = decl_fail(err, c, NULL, "more than %d arguments", TOOL_SCHEMA_MAX_PROPERTIES);
            goto fail;
        }
        r = decl_property(c, a, &p, err);
        if (r < 0)
            goto fail;
        r = set_new(props, a->name, p);
        if (r >= 0 && a->required)
            r = json_array_append_new(req, json_string(a->name)) < 0 ? -ENOMEM : 0;
        if (r < 0)
            goto fail;
    }

    r = set_new(s, "properties", props);
    props = NULL;
    if (r >= 0 && json_array_size(req) > 0)
        r = set_new(s, "required", req);
    else
        json_decref(req);
    req = NULL;
    if (r >= 0)
        r = set_new(s, "additionalProperties", json_false());
    if (r < 0)
        goto fail;

    /* The checker knows every remaining rule: bounds, defaults against
     * types and bounds, duplicate choices, lengths. */
    r = tool_schema_check(s, &inner);
    if (r < 0) {
        r = decl_fail(err, c, NULL, "%s", inner.msg);
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    json_decref(s);
    json_decref(props);
    json_decref(req);
    return r;
}

static void
schemas_free(json_t **schemas, size_t n)
{
    for (size_t i = 0; schemas && i < n; i++)
        json_decref(schemas[i]);
    free(schemas);
}

/* Checks the whole declaration; on success *ret holds one schema per command. */
static int
decl_check(const struct abx_tool *t, json_t ***ret, size_t *ret_n, struct err *err)
{
    json_t **schemas = NULL;
    size_t n = 0;
    int r;

    if (!t)
        return decl_fail(err, NULL, NULL, "no tool");
    if (!cmd_name_ok(t->name)) {
        struct msg m = {.len = 0};
        msg_add(&m, "tool name ");
        msg_name(&m, t->name ? t->name : "(null)");
        msg_add(&m, " is invalid (expected [a-z0-9][a-z0-9_-]{0,63})");
        return msg_fail(err, &m);
    }
    while (t->commands && t->commands[n].name)
        n++;
    if (n == 0)
        return decl_fail(err, NULL, NULL, "the tool has no commands");
    if (n > COMMANDS_MAX)
        return decl_fail(err, NULL, NULL, "more than %d commands", COMMANDS_MAX);
    schemas = calloc(n, sizeof(*schemas));
    if (!schemas)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct abx_tool_command *c = &t->commands[i];
        if (!cmd_name_ok(c->name)) {
            r = decl_fail(err, c, NULL, "invalid name (expected [a-z0-9][a-z0-9_-]{0,63})");
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t->commands[j].name, c->name)) {
                r = decl_fail(err, c, NULL, "declared twice");
                goto fail;
            }
        if (!c->run) {
            r = decl_fail(err, c, NULL, "no run function");
            goto fail;
        }
        r = decl_schema(c, &schemas[i], err);
        if (r < 0)
            goto fail;
    }
    *ret = schemas;
    *ret_n = n;
    return 0;
fail:
    schemas_free(schemas, n);
    return r;
}

static int
print_json(const json_t *v)
{
    if (json_dumpf(v, stdout, JSON_FLAGS) < 0 || fputc('\n', stdout) == EOF)
        return -EIO;
    return 0;
}

/* [{"name": ..., "description": ...}, ...] in declaration order. */
static int
list_commands(const struct abx_tool *t, json_t *const *schemas, size_t n)
{
    json_t *list = json_array();
    int r = list ? 0 : -ENOMEM;

    for (size_t i = 0; r >= 0 && i < n; i++) {
        json_t *o = json_object();
        if (!o || json_array_append_new(list, o) < 0 ||
            set_new(o, "name", json_string(t->commands[i].name)) < 0 ||
            json_object_set(o, "description", json_object_get(schemas[i], "description")) < 0)
            r = -ENOMEM; /* o, when created, is list's (append_new frees it on failure) */
    }
    if (r < 0) {
        json_decref(list);
        fprintf(stderr, "%s: out of memory\n", t->name);
        return 1;
    }
    r = print_json(list);
    json_decref(list);
    return r < 0 ? 1 : 0;
}

/* Parses a call's arguments. Nesting is bounded before jansson recurses;
 * duplicate keys are refused (which one would win is parser folklore). */
static int
args_parse(const char *text, json_t **ret, struct err *err)
{
    struct msg m = {.len = 0};
    json_error_t je;
    int depth = 0;
    bool in_str = false, esc = false;

    for (const char *p = text; *p; p++) {
        if (in_str) {
            if (esc)
                esc = false;
            else if (*p == '\\')
                esc = true;
            else if (*p == '"')
                in_str = false;
        } else if (*p == '"') {
            in_str = true;
        } else if (*p == '[' || *p == '{') {
            if (++depth > ARGS_MAX_DEPTH)
                return fail(err, "invalid JSON arguments: nested deeper than %d levels",
                            ARGS_MAX_DEPTH);
        } else if (*p == ']' || *p == '}') {
            depth--;
        }
    }
    *ret = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (*ret)
        return 0;
    msg_add(&m, "invalid JSON arguments: ");
    msg_quote(&m, je.text, strlen(je.text), 0);
    msg_addf(&m, " (line %d, column %d)", je.line, je.column);
    return msg_fail(err, &m);
}

static struct abx_tool_args *
args_free(struct abx_tool_args *a)
{
    if (!a)
        return NULL;
    for (size_t i = 0; a->lists && i < a->nargs; i++)
        free(a->lists[i]);
    free(a->lists);
    json_decref(a->values);
    free(a);
    return NULL;
}

/* The values the run function sees: the call's, else the defaults. */
static int
args_new(const struct abx_tool *t, const struct abx_tool_command *c, const json_t *schema,
         const json_t *call, struct abx_tool_args **ret)
{
    const json_t *props = json_object_get(schema, "properties");
    struct abx_tool_args *a = calloc(1, sizeof(*a));

    if (!a)
        return -ENOMEM;
    a->tool = t;
    a->cmd = c;
    while (c->args && c->args[a->nargs].name)
        a->nargs++;
    a->values = json_object();
    a->lists = calloc(a->nargs + 1, sizeof(*a->lists));
    if (!a->values || !a->lists)
        goto oom;
    for (size_t i = 0; i < a->nargs; i++) {
        const struct abx_tool_arg *d = &c->args[i];
        json_t *v = json_object_get(call, d->name);
        if (!v)
            v = json_object_get(json_object_get(props, d->name), "default");
        if (!v)
            continue;
        if (json_object_set(a->values, d->name, v) < 0)
            goto oom;
        if (d->type == ABX_ARG_STRING_ARRAY) {
            size_t n = json_array_size(v), j;
            json_t *s;
            a->lists[i] = calloc(n + 1, sizeof(char *));
            if (!a->lists[i])
                goto oom;
            json_array_foreach (v, j, s)
                a->lists[i][j] = json_string_value(s);
        }
    }
    *ret = a;
    return 0;
oom:
    args_free(a);
    return -ENOMEM;
}

int
abx_tool_main(const struct abx_tool *t, int argc, char **argv, void *userdata)
{
    const char *label = tool_label(t);
    json_t **schemas = NULL, *call = NULL;
    struct abx_tool_args *a = NULL;
    struct err err = {0};
    size_t n = 0, i;
    int r, code;

    r = decl_check(t, &schemas, &n, &err);
    if (r == -ENOMEM) {
        fprintf(stderr, "%s: out of memory\n", label);
        return 1;
    }
    if (r < 0) {
        fprintf(stderr, "%s: invalid declaration: %s\n", label, err.msg);
        return ABX_TOOL_EXIT_DECL;
    }

    if (argc > 3) {
        fprintf(stderr, "%s: too many arguments (usage: launch [<command> [<json>]])\n", label);
        code = ABX_TOOL_EXIT_USAGE;
        goto out;
    }

    if (argc < 2) {
        code = list_commands(t, schemas, n);
        goto out;
    }

    for (i = 0; i < n; i++)
        if (!strcmp(t->commands[i].name, argv[1]))
            break;
    if (i == n) {
        struct msg m = {.len = 0};
        msg_add(&m, "unknown command ");
        msg_name(&m, argv[1]);
        fprintf(stderr, "%s: %s\n", label, m.s);
        code = ABX_TOOL_EXIT_USAGE;
        goto out;
    }

    if (argc == 2) {
        code = print_json(schemas[i]) < 0 ? 1 : 0;
        goto out;
    }

    r = args_parse(argv[2], &call, &err);
    if (r >= 0)
        r = tool_schema_validate(schemas[i], call, &err);
    if (r < 0) {
        fprintf(stderr, "%s: %s: %s\n", label, t->commands[i].name, err.msg);
        code = ABX_TOOL_EXIT_USAGE;
        goto out;
    }
    if (args_new(t, &t->commands[i], schemas[i], call, &a) < 0) {
        fprintf(stderr, "%s: out of memory\n", label);
        code = 1;
        goto out;
    }
    code = t->commands[i].run(a, userdata);
    if (code < 0 || code > 255)
        code = 1;

out:
    if (fflush(stdout) == EOF || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write the output: %s\n", label, strerror(errno));
        if (code == 0)
            code = 1;
    }
    args_free(a);
    json_decref(call);
    schemas_free(schemas, n);
    return code;
}

/*
 * Getters.
 */

/* The declaration of name, which must have one of the types in mask
 * (1 << type); anything else is the author's bug and ends the process. */
static size_t
arg_find(const struct abx_tool_args *a, const char *name, unsigned mask, const char *getter)
{
    for (size_t i = 0; name && i < a->nargs; i++) {
        if (strcmp(a->cmd->args[i].name, name))
            continue;
        if (mask & (1u << a->cmd->args[i].type))
            return i;
        break;
    }
    fprintf(stderr, "%s: %s: %s(\"%s\"): no such argument of a matching type\n",
            tool_label(a->tool), a->cmd->name, getter, name ? name : "(null)");
    fflush(stdout);
    exit(ABX_TOOL_EXIT_DECL);
}

#define ANY_TYPE 0x3fu

bool
abx_tool_has(const struct abx_tool_args *a, const char *name)
{
    size_t i = arg_find(a, name, ANY_TYPE, __func__);
    return json_object_get(a->values, a->cmd->args[i].name) != NULL;
}

const char *
abx_tool_get_string(const struct abx_tool_args *a, const char *name)
{
    size_t i = arg_find(a, name, 1u << ABX_ARG_STRING | 1u << ABX_ARG_ENUM, __func__);
    return json_string_value(json_object_get(a->values, a->cmd->args[i].name));
}

long long
abx_tool_get_int(const struct abx_tool_args *a, const char *name)
{
    size_t i = arg_find(a, name, 1u << ABX_ARG_INTEGER, __func__);
    return json_integer_value(json_object_get(a->values, a->cmd->args[i].name));
}

double
abx_tool_get_number(const struct abx_tool_args *a, const char *name)
{
    size_t i = arg_find(a, name, 1u << ABX_ARG_NUMBER | 1u << ABX_ARG_INTEGER, __func__);
    return json_number_value(json_object_get(a->values, a->cmd->args[i].name));
}

bool
abx_tool_get_bool(const struct abx_tool_args *a, const char *name)
{
    size_t i = arg_find(a, name, 1u << ABX_ARG_BOOLEAN, __func__);
    return json_is_true(json_object_get(a->values, a->cmd->args[i].name));
}

size_t
abx_tool_get_strings(const struct abx_tool_args *a, const char *name, const char *const **ret)
{
    static const char *const empty[] = {NULL};
    size_t i = arg_find(a, name, 1u << ABX_ARG_STRING_ARRAY, __func__);
    const json_t *v = json_object_get(a->values, a->cmd->args[i].name);

    *ret = a->lists[i] ? (const char *const *)a->lists[i] : empty;
    return json_array_size(v);
}

const char *
abx_tool_command_name(const struct abx_tool_args *a)
{
    return a->cmd->name;
}

int
abx_tool_error(const struct abx_tool_args *a, int code, const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "%s: %s: ", tool_label(a->tool), a->cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}
