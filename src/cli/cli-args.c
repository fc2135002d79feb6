/*
 * cli-args.c - a custom command's arguments from `abx run`'s command line.
 *
 * Turns `--arg K=V`, `--NAME VALUE`, `--NAME=VALUE`, `--FLAG` and
 * `--no-FLAG` into the JSON object POST .../commands/{name} takes, against
 * the command's declared arguments (struct abx_command from libabx). Only
 * the shape is decided here: an int or float value goes as a JSON number
 * when it is one, anything else as a string, so abxd's coercion and its
 * messages apply to every value. Pure: no I/O, no libabx calls; the JSON is
 * written by hand (the CLI does not link a JSON library).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/parse.h"

int
cli_json_string(struct buf *b, const char *s)
{
    int r;

    if ((r = buf_putc(b, '"')) < 0)
        return r;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            r = buf_printf(b, "\\%c", *p);
        else if (*p == '\n')
            r = buf_puts(b, "\\n");
        else if (*p == '\t')
            r = buf_puts(b, "\\t");
        else if (*p == '\r')
            r = buf_puts(b, "\\r");
        else if (*p < 0x20 || *p == 0x7f)
            r = buf_printf(b, "\\u%04x", *p);
        else
            r = buf_putc(b, (char)*p);
        if (r < 0)
            return r;
    }
    return buf_putc(b, '"');
}

/* -?(0|[1-9][0-9]*), then for floats (\.[0-9]+)?([eE][+-]?[0-9]+)?: JSON's
 * number grammar. Returns the length of the integer part's digits. */
static bool
json_number_syntax(const char *s, bool integer)
{
    const char *p = s;

    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (integer)
        return *p == '\0';
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

bool
cli_json_number_ok(const char *s, enum abx_arg_type type)
{
    if (type == ABX_ARG_INT) {
        uint64_t v;
        bool neg = s[0] == '-';
        if (!json_number_syntax(s, true) || parse_u64(s + neg, &v) < 0)
            return false;
        return v <= (uint64_t)INT64_MAX + neg;
    }
    if (type == ABX_ARG_FLOAT) {
        char *end;
        double d;
        if (!json_number_syntax(s, false))
            return false;
        errno = 0;
        d = strtod(s, &end);
        /* Out of range either way: as a string abxd says why. */
        return *end == '\0' && errno == 0 && isfinite(d);
    }
    return false;
}

int
cli_json_value(struct buf *b, enum abx_arg_type type, const char *v)
{
    if ((type == ABX_ARG_INT || type == ABX_ARG_FLOAT) && cli_json_number_ok(v, type))
        return buf_puts(b, v);
    return cli_json_string(b, v);
}

void
cli_args_init(struct cli_args *a, const struct abx_command *cmd)
{
    *a = (struct cli_args){.cmd = cmd};
    buf_init(&a->json, CLI_ARGS_JSON_MAX);
}

void
cli_args_done(struct cli_args *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->names[i]);
    a->n = 0;
    buf_done(&a->json);
}

__attribute__((format(printf, 3, 4))) static int
args_fail(struct cli_args *a, int r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(a->error, sizeof(a->error), fmt, ap);
    va_end(ap);
    return r;
}

/* Whether option text opt (len bytes, without "--") names argument name:
 * equal, with '-' in opt standing for '_'. */
static bool
name_matches(const char *opt, size_t len, const char *name)
{
    size_t i;

    for (i = 0; i < len && name[i]; i++)
        if (opt[i] != name[i] && !(opt[i] == '-' && name[i] == '_'))
            return false;
    return i == len && name[i] == '\0';
}

static const struct abx_command_arg *
find_arg(const struct abx_command *cmd, const char *opt, size_t len)
{
    for (size_t i = 0; cmd && i < cmd->n_args; i++)
        if (name_matches(opt, len, cmd->args[i].name))
            return &cmd->args[i];
    return NULL;
}

/* "--text STR, --count INT, --[no-]loud" into a->error after prefix. */
static void
list_options(struct cli_args *a, const char *prefix)
{
    size_t k = strlen(prefix);

    (void)snprintf(a->error, sizeof(a->error), "%s", prefix);
    k = strlen(a->error);
    if (!a->cmd || a->cmd->n_args == 0) {
        (void)snprintf(a->error + k, sizeof(a->error) - k, "none");
        return;
    }
    for (size_t i = 0; i < a->cmd->n_args && k < sizeof(a->error) - 1; i++) {
        const struct abx_command_arg *g = &a->cmd->args[i];
        int w;
        if (g->type == ABX_ARG_BOOL)
            w = snprintf(a->error + k, sizeof(a->error) - k, "%s--[no-]%s", i ? ", " : "", g->name);
        else
            w = snprintf(a->error + k, sizeof(a->error) - k, "%s--%s %s", i ? ", " : "", g->name,
                         g->type_name ? g->type_name : "str");
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

/* Adds "name": value (typed) once; a->error says why not. */
static int
add_value(struct cli_args *a, const char *name, size_t name_len, enum abx_arg_type type,
          const char *value, bool is_bool_literal)
{
    char *key;
    int r;

    for (size_t i = 0; i < a->n; i++)
        if (strlen(a->names[i]) == name_len && !memcmp(a->names[i], name, name_len))
            return args_fail(a, -EEXIST, "argument '%.*s' is given twice", (int)name_len, name);
    if (a->n >= CLI_ARGS_MAX)
        return args_fail(a, -E2BIG, "more than %d arguments", CLI_ARGS_MAX);
    key = strndup(name, name_len);
    if (!key)
        return args_fail(a, -ENOMEM, "out of memory");
    a->names[a->n++] = key;
    if ((r = buf_puts(&a->json, a->json.len ? "," : "{")) < 0 ||
        (r = cli_json_string(&a->json, key)) < 0 || (r = buf_putc(&a->json, ':')) < 0 ||
        (r = is_bool_literal ? buf_puts(&a->json, value) : cli_json_value(&a->json, type, value)) <
                0)
        return args_fail(a, r, "the arguments are too large");
    return 0;
}

int
cli_args_add_kv(struct cli_args *a, const char *kv)
{
    const char *eq = strchr(kv, '=');
    const struct abx_command_arg *g;

    if (!eq || eq == kv)
        return args_fail(a, -EINVAL, "--arg wants NAME=VALUE, not '%s'", kv);
    /* Undeclared names go as they are: abxd refuses them with its list. */
    g = find_arg(a->cmd, kv, (size_t)(eq - kv));
    if (g)
        return add_value(a, g->name, strlen(g->name), g->type, eq + 1, false);
    return add_value(a, kv, (size_t)(eq - kv), ABX_ARG_STR, eq + 1, false);
}

int
cli_args_add_option(struct cli_args *a, int argc, char **argv)
{
    const char *opt = argv[0] + 2, *eq;
    const struct abx_command_arg *g;
    size_t len;
    int r;

    if (strncmp(argv[0], "--", 2) != 0 || !opt[0])
        return args_fail(a, -EINVAL, "unexpected argument '%s'", argv[0]);
    eq = strchr(opt, '=');
    len = eq ? (size_t)(eq - opt) : strlen(opt);
    g = find_arg(a->cmd, opt, len);
    if (!g && len > 3 && !strncmp(opt, "no-", 3)) {
        /* --no-FLAG: false for a bool argument. */
        g = find_arg(a->cmd, opt + 3, len - 3);
        if (g && g->type != ABX_ARG_BOOL)
            return args_fail(a, -EINVAL, "'--%.*s': '%s' is not a bool argument", (int)len, opt,
                             g->name);
        if (g && eq)
            return args_fail(a, -EINVAL, "'--%.*s' takes no value", (int)len, opt);
        if (g)
            return (r = add_value(a, g->name, strlen(g->name), g->type, "false", true)) < 0 ? r : 1;
    }
    if (!g) {
        char prefix[200];
        (void)snprintf(
                prefix, sizeof(prefix), "command '%.64s' has no option '--%.*s' (its options: ",
                a->cmd && a->cmd->name ? a->cmd->name : "?", (int)(len > 64 ? 64 : len), opt);
        list_options(a, prefix);
        size_t k = strlen(a->error);
        (void)snprintf(a->error + k, sizeof(a->error) - k, ")");
        return -ENOENT;
    }
    if (eq)
        r = add_value(a, g->name, strlen(g->name), g->type, eq + 1, false);
    else if (g->type == ABX_ARG_BOOL)
        r = add_value(a, g->name, strlen(g->name), g->type, "true", true);
    else if (argc < 2)
        return args_fail(a, -EINVAL, "option '--%s' needs a value", g->name);
    else
        return (r = add_value(a, g->name, strlen(g->name), g->type, argv[1], false)) < 0 ? r : 2;
    return r < 0 ? r : 1;
}

int
cli_args_finish(struct cli_args *a, const char **ret)
{
    int r = buf_puts(&a->json, a->json.len ? "}" : "{}");

    if (r < 0)
        return args_fail(a, r, "the arguments are too large");
    *ret = a->json.data;
    return 0;
}
