/*
 * template.c - parse and validate sandbox-template.yaml.
 *
 * Two passes. The first is yaml.c's: it reads the file into a bounded tree
 * and refuses, while reading, everything YAML can do that a template does
 * not need and an attacker could use (aliases, anchors, merge keys, several
 * documents, custom tags, duplicate keys, deep nesting, too many nodes),
 * within the TEMPLATE_* limits. The second, this file, walks the tree
 * against the template schema into struct template, refusing unknown keys
 * and bad values. Building images and running commands live elsewhere.
 */
#include "template/template.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "template/yaml.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

/* ---- name rules ---- */

bool
template_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TEMPLATE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                  (i > 0 && (ch == '_' || ch == '-'));
        if (!ok)
            return false;
    }
    return true;
}

/* ^[A-Za-z_][A-Za-z0-9_]*$ of at most max bytes: env keys, arg names. */
static bool
ident_ok(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
                  (i > 0 && ch >= '0' && ch <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static int
get_name(struct yaml_ctx *c, const struct yaml_node *n, char **ret)
{
    int r = yaml_get_str(c, n, TEMPLATE_NAME_MAX + 1, false, false, ret);
    if (r < 0)
        return r;
    if (!template_name_ok(*ret)) {
        char b[64];
        return yaml_fail(c, n, "'%s' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)",
                         yaml_shown(*ret, b, sizeof(b)));
    }
    return 0;
}

/* Whether path has a ".." component. */
static bool
has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return true;
    return false;
}

static int
get_abs_path(struct yaml_ctx *c, const struct yaml_node *n, char **ret)
{
    int r = yaml_get_str(c, n, TEMPLATE_PATH_MAX, false, false, ret);
    if (r < 0)
        return r;
    if ((*ret)[0] != '/')
        return yaml_fail(c, n, "must be an absolute path");
    return 0;
}

/* ---- sections ---- */

/* Reads an env mapping as "K=V" strings. */
static int
get_env(struct yaml_ctx *c, const struct yaml_node *n, char ***ret, size_t *ret_n)
{
    if (n->kind != YAML_KIND_MAP)
        return yaml_fail(c, n, "must be a mapping, not %s", yaml_kind_name(n));
    if (n->n / 2 > TEMPLATE_ENV_MAX)
        return yaml_fail(c, n, "more than %d entries", TEMPLATE_ENV_MAX);
    *ret = calloc(n->n / 2 + 1, sizeof(char *));
    if (!*ret)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i += 2) {
        const struct yaml_node *k = n->kids[i], *v = n->kids[i + 1];
        _cleanup_free_ char *val = NULL;
        char b[64];
        if (!ident_ok(k->text, k->len, TEMPLATE_ENV_NAME_MAX))
            return yaml_fail(c, k,
                             "'%s' is not a valid variable name (^[A-Za-z_][A-Za-z0-9_]{0,255}$)",
                             yaml_shown(k->text, b, sizeof(b)));
        size_t old = yaml_push_key(c, k->text);
        int r = yaml_get_str(c, v, TEMPLATE_ENV_VALUE_MAX, true, false, &val);
        yaml_pop(c, old);
        if (r < 0)
            return r;
        if (asprintf(&(*ret)[*ret_n], "%s=%s", k->text, val) < 0) {
            (*ret)[*ret_n] = NULL;
            return -ENOMEM;
        }
        (*ret_n)++;
    }
    return 0;
}

static int
add_step(struct template *t, enum template_step_kind kind, unsigned line, char **a, char **b)
{
    struct template_step *s = &t->steps[t->n_steps++];
    s->kind = kind;
    s->line = line;
    s->a = TAKE_PTR(*a);
    s->b = b ? TAKE_PTR(*b) : NULL;
    return 0;
}

static int
get_step(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    static const char *const keys[] = {"run", "env", "workdir", "copy"};
    const struct yaml_node *v[ELEMENTSOF(keys)];
    _cleanup_free_ char *a = NULL, *b = NULL;
    int r;

    r = yaml_get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (n->n != 2)
        return yaml_fail(c, n, "a step has exactly one key: run, env, workdir or copy");
    size_t old = yaml_push_key(c, n->kids[0]->text);
    if (v[0]) {
        r = yaml_get_str(c, v[0], TEMPLATE_CMD_MAX, false, true, &a);
        if (r >= 0)
            r = add_step(t, TEMPLATE_STEP_RUN, n->line, &a, NULL);
    } else if (v[1]) {
        _cleanup_free_ char **env = NULL;
        size_t n_env = 0;
        r = get_env(c, v[1], &env, &n_env);
        if (r >= 0 && n_env == 0)
            r = yaml_fail(c, v[1], "must not be empty");
        for (size_t i = 0; i < n_env; i++) {
            if (r >= 0) {
                char *eq = strchr(env[i], '=');
                a = strndup(env[i], (size_t)(eq - env[i]));
                b = strdup(eq + 1);
                if (!a || !b)
                    r = -ENOMEM;
                else
                    r = add_step(t, TEMPLATE_STEP_ENV, v[1]->kids[2 * i]->line, &a, &b);
            }
            free(env[i]);
        }
    } else if (v[2]) {
        r = get_abs_path(c, v[2], &a);
        if (r >= 0)
            r = add_step(t, TEMPLATE_STEP_WORKDIR, n->line, &a, NULL);
    } else {
        static const char *const ckeys[] = {"src", "dst"};
        const struct yaml_node *cv[2];
        r = yaml_get_fields(c, v[3], ckeys, 2, cv);
        if (r >= 0 && (!cv[0] || !cv[1]))
            r = yaml_fail(c, v[3], "missing key '%s'", cv[0] ? "dst" : "src");
        if (r >= 0) {
            size_t o = yaml_push_key(c, "src");
            r = yaml_get_str(c, cv[0], TEMPLATE_PATH_MAX, false, false, &a);
            if (r >= 0 && a[0] == '/')
                r = yaml_fail(c, cv[0], "must be a path relative to the template directory");
            if (r >= 0 && has_dotdot(a))
                r = yaml_fail(c, cv[0], "must not contain '..'");
            yaml_pop(c, o);
        }
        if (r >= 0) {
            size_t o = yaml_push_key(c, "dst");
            r = get_abs_path(c, cv[1], &b);
            yaml_pop(c, o);
        }
        if (r >= 0)
            r = add_step(t, TEMPLATE_STEP_COPY, n->line, &a, &b);
    }
    yaml_pop(c, old);
    return r;
}

static int
get_steps(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    int r = yaml_get_list(c, n, TEMPLATE_STEPS_MAX);
    if (r < 0)
        return r;
    /* env steps expand to one step per variable: count them first */
    size_t total = 0;
    for (size_t i = 0; i < n->n; i++) {
        const struct yaml_node *s = n->kids[i];
        if (s->kind == YAML_KIND_MAP && s->n == 2 && !strcmp(s->kids[0]->text, "env") &&
            s->kids[1]->kind == YAML_KIND_MAP)
            total += s->kids[1]->n / 2;
        else
            total++;
    }
    t->steps = calloc(total + 1, sizeof(*t->steps));
    if (!t->steps)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        size_t old = yaml_push_index(c, i);
        r = get_step(c, t, n->kids[i]);
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static const char *const cap_names[] = {"shell", "files", "code", "terminal", "ports"};

const char *
template_cap_name(unsigned cap)
{
    for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
        if (cap == 1u << i)
            return cap_names[i];
    return NULL;
}

int
template_cap_from_name(const char *s)
{
    for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
        if (!strcmp(s, cap_names[i]))
            return (int)(1u << i);
    return -EINVAL;
}

static const char *const arg_type_names[_TEMPLATE_ARG_TYPE_MAX] = {
        [TEMPLATE_ARG_STR] = "str",
        [TEMPLATE_ARG_INT] = "int",
        [TEMPLATE_ARG_FLOAT] = "float",
        [TEMPLATE_ARG_BOOL] = "bool",
};

const char *
template_arg_type_name(enum template_arg_type t)
{
    return (int)t >= 0 && t < _TEMPLATE_ARG_TYPE_MAX ? arg_type_names[t] : NULL;
}

enum template_arg_type
template_arg_type_from_name(const char *s)
{
    for (int i = 0; i < _TEMPLATE_ARG_TYPE_MAX; i++)
        if (!strcmp(s, arg_type_names[i]))
            return (enum template_arg_type)i;
    return _TEMPLATE_ARG_TYPE_INVALID;
}

static int
get_caps(struct yaml_ctx *c, const struct yaml_node *n, unsigned *ret)
{
    int r = yaml_get_list(c, n, ELEMENTSOF(cap_names));
    if (r < 0)
        return r;
    *ret = 0;
    for (size_t i = 0; i < n->n; i++) {
        const struct yaml_node *k = n->kids[i];
        size_t old = yaml_push_index(c, i);
        char b[64];
        int cap = k->kind == YAML_KIND_SCALAR ? template_cap_from_name(k->text) : -EINVAL;
        if (k->kind != YAML_KIND_SCALAR || yaml_is_null(k))
            r = yaml_fail(c, k, "must be a string, not %s", yaml_kind_name(k));
        else if (cap < 0)
            r = yaml_fail(c, k,
                          "unknown capability '%s' (known: shell, files, code, terminal, ports)",
                          yaml_shown(k->text, b, sizeof(b)));
        else if (*ret & (unsigned)cap)
            r = yaml_fail(c, k, "capability '%s' listed twice", k->text);
        else
            *ret |= (unsigned)cap;
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_ports(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    int r = yaml_get_list(c, n, TEMPLATE_PORTS_MAX);
    if (r < 0)
        return r;
    t->ports = calloc(n->n + 1, sizeof(*t->ports));
    if (!t->ports)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        uint64_t v = 0;
        size_t old = yaml_push_index(c, i);
        r = yaml_get_u64(c, n->kids[i], 65535, &v);
        for (size_t j = 0; r >= 0 && j < t->n_ports; j++)
            if (t->ports[j] == v)
                r = yaml_fail(c, n->kids[i], "port %" PRIu64 " listed twice", v);
        yaml_pop(c, old);
        if (r < 0)
            return r;
        t->ports[t->n_ports++] = (uint16_t)v;
    }
    return 0;
}

static int
get_resources(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    static const char *const keys[] = {"cpu", "memory_mb", "pids", "disk_mb"};
    const struct yaml_node *v[ELEMENTSOF(keys)];
    int r = yaml_get_fields(c, n, keys, ELEMENTSOF(keys), v);
    size_t old;

    if (r < 0)
        return r;
    if (v[0]) {
        old = yaml_push_key(c, "cpu");
        r = yaml_get_number(c, v[0], TEMPLATE_CPU_MAX, &t->cpu);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[1]) {
        old = yaml_push_key(c, "memory_mb");
        r = yaml_get_u64(c, v[1], TEMPLATE_MEMORY_MB_MAX, &t->memory_mb);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[2]) {
        old = yaml_push_key(c, "pids");
        r = yaml_get_u64(c, v[2], TEMPLATE_PIDS_MAX, &t->pids);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[3]) {
        old = yaml_push_key(c, "disk_mb");
        r = yaml_get_u64(c, v[3], TEMPLATE_DISK_MB_MAX, &t->disk_mb);
        yaml_pop(c, old);
    }
    return r;
}

/* The canonical text of a default for its type, or -EINVAL. */
static int
canonical_default(enum template_arg_type type, const char *s, char **ret)
{
    char b[64];

    switch (type) {
    case TEMPLATE_ARG_STR:
        *ret = strdup(s);
        break;
    case TEMPLATE_ARG_INT: {
        const char *d = s + (*s == '-');
        uint64_t v;
        if (!(*d >= '0' && *d <= '9') || parse_u64(d, &v) < 0 ||
            v > (d == s ? (uint64_t)INT64_MAX : (uint64_t)INT64_MAX + 1))
            return -EINVAL;
        (void)snprintf(b, sizeof(b), "%s%" PRIu64, d != s && v ? "-" : "", v);
        *ret = strdup(b);
        break;
    }
    case TEMPLATE_ARG_FLOAT: {
        double d;
        if (!yaml_parse_decimal(s, &d))
            return -EINVAL;
        /* the shortest text that reads back as the same double */
        for (int prec = 1; prec <= 17; prec++) {
            (void)snprintf(b, sizeof(b), "%.*g", prec, d);
            if (strtod(b, NULL) == d)
                break;
        }
        *ret = strdup(b);
        break;
    }
    case TEMPLATE_ARG_BOOL: {
        bool v;
        if (!parse_bool(s, &v))
            return -EINVAL;
        *ret = strdup(v ? "true" : "false");
        break;
    }
    default:
        return -EINVAL;
    }
    return *ret ? 0 : -ENOMEM;
}

static int
get_arg(struct yaml_ctx *c, struct template_command *cmd, const struct yaml_node *n)
{
    static const char *const keys[] = {"name", "type", "required", "default", "description"};
    const struct yaml_node *v[ELEMENTSOF(keys)];
    struct template_arg *a = &cmd->args[cmd->n_args];
    char b[64];
    size_t old;
    int r;

    r = yaml_get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[0])
        return yaml_fail(c, n, "missing key 'name'");
    cmd->n_args++; /* from here a is owned by cmd, also on failure */
    a->line = n->line;
    old = yaml_push_key(c, "name");
    r = yaml_get_str(c, v[0], TEMPLATE_ARG_NAME_MAX + 1, false, false, &a->name);
    if (r >= 0 && !ident_ok(a->name, strlen(a->name), TEMPLATE_ARG_NAME_MAX))
        r = yaml_fail(c, v[0], "'%s' is not a valid argument name (^[A-Za-z_][A-Za-z0-9_]{0,63}$)",
                      yaml_shown(a->name, b, sizeof(b)));
    for (size_t i = 0; r >= 0 && i + 1 < cmd->n_args; i++)
        if (!strcmp(cmd->args[i].name, a->name))
            r = yaml_fail(c, v[0], "argument '%s' declared twice", a->name);
    yaml_pop(c, old);
    if (r < 0)
        return r;

    a->type = TEMPLATE_ARG_STR;
    if (v[1]) {
        _cleanup_free_ char *type = NULL;
        old = yaml_push_key(c, "type");
        r = yaml_get_str(c, v[1], 16, false, false, &type);
        if (r >= 0 && (int)(a->type = template_arg_type_from_name(type)) < 0)
            r = yaml_fail(c, v[1], "unknown type '%s' (known: str, int, float, bool)",
                          yaml_shown(type, b, sizeof(b)));
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[2]) {
        old = yaml_push_key(c, "required");
        r = yaml_get_bool(c, v[2], &a->required);
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[3]) {
        _cleanup_free_ char *text = NULL;
        old = yaml_push_key(c, "default");
        if (a->required)
            r = yaml_fail(c, v[3], "an argument with required: true cannot have a default");
        if (r >= 0)
            r = yaml_get_str(c, v[3], TEMPLATE_DESCRIPTION_MAX, true, true, &text);
        if (r >= 0) {
            r = canonical_default(a->type, text, &a->default_text);
            if (r == -EINVAL)
                r = yaml_fail(c, v[3], "'%s' is not a valid %s", yaml_shown(text, b, sizeof(b)),
                              template_arg_type_name(a->type));
        }
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[4]) {
        old = yaml_push_key(c, "description");
        r = yaml_get_str(c, v[4], TEMPLATE_DESCRIPTION_MAX, true, true, &a->description);
        yaml_pop(c, old);
    }
    return r;
}

/* Every {name} in cmd must name a declared argument; "{{" and "}}" are
 * literal braces, any other brace is an error. */
static int
check_placeholders(struct yaml_ctx *c, const struct template_command *cmd,
                   const struct yaml_node *n)
{
    for (const char *p = cmd->cmd; *p; p++) {
        if (*p == '}') {
            if (p[1] != '}')
                return yaml_fail(c, n, "unbalanced '}' (write '}}' for a literal brace)");
            p++;
            continue;
        }
        if (*p != '{')
            continue;
        if (p[1] == '{') {
            p++;
            continue;
        }
        const char *end = strchr(p + 1, '}');
        size_t len = end ? (size_t)(end - p - 1) : 0;
        char b[64];
        if (!end || !ident_ok(p + 1, len, TEMPLATE_ARG_NAME_MAX)) {
            char frag[24];
            (void)snprintf(frag, sizeof(frag), "%s", p);
            return yaml_fail(c, n, "bad placeholder at '%s' (write '{{' for a literal brace)",
                             yaml_shown(frag, b, sizeof(b)));
        }
        bool found = false;
        for (size_t i = 0; i < cmd->n_args && !found; i++)
            found = strlen(cmd->args[i].name) == len && !memcmp(cmd->args[i].name, p + 1, len);
        if (!found) {
            char name[TEMPLATE_ARG_NAME_MAX + 1];
            memcpy(name, p + 1, len);
            name[len] = '\0';
            return yaml_fail(c, n, "unknown placeholder '{%s}': no argument '%s' is declared", name,
                             name);
        }
        p = end;
    }
    return 0;
}

static int
get_command(struct yaml_ctx *c, struct template *t, const struct yaml_node *k,
            const struct yaml_node *n)
{
    static const char *const keys[] = {"cmd", "description", "cwd", "env", "timeout", "args"};
    const struct yaml_node *v[ELEMENTSOF(keys)];
    struct template_command *cmd = &t->cmds[t->n_cmds];
    char b[64];
    size_t old;
    int r;

    if (!template_name_ok(k->text))
        return yaml_fail(c, k, "'%s' is not a valid command name (^[a-z0-9][a-z0-9_-]{0,63}$)",
                         yaml_shown(k->text, b, sizeof(b)));
    cmd->name = strdup(k->text);
    if (!cmd->name)
        return -ENOMEM;
    t->n_cmds++;
    cmd->line = k->line;
    r = yaml_get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[0])
        return yaml_fail(c, n, "missing key 'cmd'");
    if (v[1]) {
        old = yaml_push_key(c, "description");
        r = yaml_get_str(c, v[1], TEMPLATE_DESCRIPTION_MAX, true, true, &cmd->description);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[2]) {
        old = yaml_push_key(c, "cwd");
        r = get_abs_path(c, v[2], &cmd->cwd);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[3]) {
        old = yaml_push_key(c, "env");
        r = get_env(c, v[3], &cmd->env, &cmd->n_env);
        yaml_pop(c, old);
    }
    if (r >= 0 && v[4]) {
        double s = 0;
        old = yaml_push_key(c, "timeout");
        r = yaml_get_number(c, v[4], TEMPLATE_TIMEOUT_MAX_S, &s);
        yaml_pop(c, old);
        /* round up: a positive timeout never becomes "none" */
        double ms = s * 1000.0;
        cmd->timeout_ms = (uint64_t)ms + ((double)(uint64_t)ms < ms);
    }
    if (r >= 0 && v[5]) {
        old = yaml_push_key(c, "args");
        r = yaml_get_list(c, v[5], TEMPLATE_ARGS_MAX);
        if (r >= 0) {
            cmd->args = calloc(v[5]->n + 1, sizeof(*cmd->args));
            if (!cmd->args)
                r = -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < v[5]->n; i++) {
            size_t o = yaml_push_index(c, i);
            r = get_arg(c, cmd, v[5]->kids[i]);
            yaml_pop(c, o);
        }
        yaml_pop(c, old);
    }
    /* cmd last: its placeholders refer to the arguments */
    if (r >= 0) {
        old = yaml_push_key(c, "cmd");
        r = yaml_get_str(c, v[0], TEMPLATE_CMD_MAX, false, true, &cmd->cmd);
        if (r >= 0)
            r = check_placeholders(c, cmd, v[0]);
        yaml_pop(c, old);
    }
    return r;
}

static int
get_commands(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    if (n->kind != YAML_KIND_MAP)
        return yaml_fail(c, n, "must be a mapping of command names, not %s", yaml_kind_name(n));
    if (n->n / 2 > TEMPLATE_COMMANDS_MAX)
        return yaml_fail(c, n, "more than %d commands", TEMPLATE_COMMANDS_MAX);
    t->cmds = calloc(n->n / 2 + 1, sizeof(*t->cmds));
    if (!t->cmds)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i += 2) {
        size_t old = yaml_push_key(c, n->kids[i]->text);
        int r = get_command(c, t, n->kids[i], n->kids[i + 1]);
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_aliases(struct yaml_ctx *c, struct template *t, const struct yaml_node *n)
{
    int r = yaml_get_list(c, n, TEMPLATE_ALIASES_MAX);
    if (r < 0)
        return r;
    t->aliases = calloc(n->n + 1, sizeof(char *));
    if (!t->aliases)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        size_t old = yaml_push_index(c, i);
        char **a = &t->aliases[t->n_aliases];
        r = get_name(c, n->kids[i], a);
        if (*a)
            t->n_aliases++;
        if (r >= 0 && t->name && !strcmp(*a, t->name))
            r = yaml_fail(c, n->kids[i], "alias '%s' is the template's name", *a);
        for (size_t j = 0; r >= 0 && j + 1 < t->n_aliases; j++)
            if (!strcmp(t->aliases[j], *a))
                r = yaml_fail(c, n->kids[i], "alias '%s' listed twice", *a);
        yaml_pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_template(struct yaml_ctx *c, const struct yaml_node *root, struct template *t)
{
    static const char *const keys[] = {
            "name",      "aliases",      "description", "base",      "steps",     "env",
            "resources", "capabilities", "ports",       "start_cmd", "ready_cmd", "custom_commands",
    };
    enum {
        K_NAME,
        K_ALIASES,
        K_DESCRIPTION,
        K_BASE,
        K_STEPS,
        K_ENV,
        K_RESOURCES,
        K_CAPS,
        K_PORTS,
        K_START,
        K_READY,
        K_COMMANDS,
    };
    const struct yaml_node *v[ELEMENTSOF(keys)];
    size_t old;
    int r;

    if (!root)
        return yaml_fail_at(c, 1, EINVAL, "empty document: a template is a mapping");
    if (root->kind != YAML_KIND_MAP)
        return yaml_fail(c, root, "a template is a mapping, not %s", yaml_kind_name(root));
    r = yaml_get_fields(c, root, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[K_NAME])
        return yaml_fail(c, root, "missing key 'name'");

    for (size_t k = 0; k < ELEMENTSOF(keys) && r >= 0; k++) {
        const struct yaml_node *n = v[k];
        if (!n)
            continue;
        old = yaml_push_key(c, keys[k]);
        switch (k) {
        case K_NAME:
            r = get_name(c, n, &t->name);
            if (r >= 0 && !strcmp(t->name, TEMPLATE_BASE_HOST))
                r = yaml_fail(c, n,
                              "'host' is reserved for the base of templates built on the host");
            break;
        case K_ALIASES:
            r = get_aliases(c, t, n);
            break;
        case K_DESCRIPTION:
            r = yaml_get_str(c, n, TEMPLATE_DESCRIPTION_MAX, true, true, &t->description);
            break;
        case K_BASE:
            r = get_name(c, n, &t->base);
            if (r >= 0 && !strcmp(t->base, t->name))
                r = yaml_fail(c, n, "a template cannot be based on itself");
            break;
        case K_STEPS:
            r = get_steps(c, t, n);
            break;
        case K_ENV:
            r = get_env(c, n, &t->env, &t->n_env);
            break;
        case K_RESOURCES:
            r = get_resources(c, t, n);
            break;
        case K_CAPS:
            r = get_caps(c, n, &t->caps);
            break;
        case K_PORTS:
            r = get_ports(c, t, n);
            break;
        case K_START:
            r = yaml_get_str(c, n, TEMPLATE_CMD_MAX, false, true, &t->start_cmd);
            break;
        case K_READY:
            r = yaml_get_str(c, n, TEMPLATE_CMD_MAX, false, true, &t->ready_cmd);
            break;
        case K_COMMANDS:
            r = get_commands(c, t, n);
            break;
        }
        yaml_pop(c, old);
    }
    if (r < 0)
        return r;
    if (!v[K_CAPS])
        t->caps = TEMPLATE_CAPS_DEFAULT;
    if (t->n_ports > 0 && !(t->caps & TEMPLATE_CAP_PORTS)) {
        old = yaml_push_key(c, "ports");
        r = yaml_fail(c, v[K_PORTS], "listed, but capability 'ports' is not declared");
        yaml_pop(c, old);
        return r;
    }
    if (!t->base) {
        t->base = strdup(TEMPLATE_BASE_HOST);
        if (!t->base)
            return -ENOMEM;
    }
    return 0;
}

int
template_parse(const char *data, size_t len, const char *file, struct template **ret,
               struct err *err)
{
    _cleanup_(yaml_node_freep) struct yaml_node *root = NULL;
    _cleanup_(template_freep) struct template *t = NULL;
    static const struct yaml_limits limits = {
            .bytes_max = TEMPLATE_FILE_MAX,
            .depth_max = TEMPLATE_DEPTH_MAX,
            .nodes_max = TEMPLATE_NODES_MAX,
            .collection_max = TEMPLATE_COLLECTION_MAX,
    };
    struct yaml_ctx c = {.file = file, .err = err};
    int r;

    r = yaml_read(&c, &limits, data, len, &root);
    if (r < 0)
        return r;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    r = get_template(&c, root, t);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(t);
    return 0;
}

int
template_load(int dirfd, const char *display_path, struct template **ret, struct err *err)
{
    char file[512];
    struct stat st;

    (void)snprintf(file, sizeof(file), "%s/%s", display_path, TEMPLATE_FILE_NAME);
    /* O_NONBLOCK: a FIFO planted in place of the file must not hang us */
    _cleanup_close_ int fd =
            openat(dirfd, TEMPLATE_FILE_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno, "%s: cannot open", file);
    if (fstat(fd, &st) < 0)
        return err_setx(err, errno, "%s: cannot stat", file);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "%s: not a regular file", file);
    if (st.st_size > TEMPLATE_FILE_MAX)
        return err_set(err, EFBIG, "%s: larger than %d bytes", file, TEMPLATE_FILE_MAX);
    /* read one byte past the limit: the file may have grown since fstat() */
    _cleanup_free_ char *data = malloc((size_t)TEMPLATE_FILE_MAX + 1);
    if (!data)
        return -ENOMEM;
    ssize_t n = read_full(fd, data, (size_t)TEMPLATE_FILE_MAX + 1);
    if (n < 0)
        return err_setx(err, (int)-n, "%s: cannot read", file);
    if (n > TEMPLATE_FILE_MAX)
        return err_set(err, EFBIG, "%s: larger than %d bytes", file, TEMPLATE_FILE_MAX);
    return template_parse(data, (size_t)n, file, ret, err);
}

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

struct template *
template_free(struct template *t)
{
    if (!t)
        return NULL;
    free(t->name);
    strv_free(t->aliases, t->n_aliases);
    free(t->description);
    free(t->base);
    for (size_t i = 0; i < t->n_steps; i++) {
        free(t->steps[i].a);
        free(t->steps[i].b);
    }
    free(t->steps);
    strv_free(t->env, t->n_env);
    free(t->ports);
    free(t->start_cmd);
    free(t->ready_cmd);
    for (size_t i = 0; i < t->n_cmds; i++) {
        struct template_command *cmd = &t->cmds[i];
        free(cmd->name);
        free(cmd->cmd);
        free(cmd->description);
        free(cmd->cwd);
        strv_free(cmd->env, cmd->n_env);
        for (size_t j = 0; j < cmd->n_args; j++) {
            free(cmd->args[j].name);
            free(cmd->args[j].default_text);
            free(cmd->args[j].description);
        }
        free(cmd->args);
    }
    free(t->cmds);
    strv_free(t->layers, t->n_layers);
    free(t->digest);
    free(t);
    return NULL;
}

bool
template_matches(const struct template *t, const char *name)
{
    if (!strcmp(t->name, name))
        return true;
    for (size_t i = 0; i < t->n_aliases; i++)
        if (!strcmp(t->aliases[i], name))
            return true;
    return false;
}

const struct template_command *
template_find_command(const struct template *t, const char *name)
{
    for (size_t i = 0; t && i < t->n_cmds; i++)
        if (!strcmp(t->cmds[i].name, name))
            return &t->cmds[i];
    return NULL;
}
