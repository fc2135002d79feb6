/*
 * template.c - parse and validate sandbox-template.yaml.
 *
 * Two passes. The first reads libyaml events into a small tree of scalars,
 * sequences and mappings and refuses, while reading, everything YAML can do
 * that a template does not need and an attacker could use: aliases (the
 * "billion laughs" bomb), anchors, merge keys, several documents, custom
 * tags, duplicate keys, deep nesting, too many nodes. The second walks the
 * tree against the template schema into struct template, refusing unknown
 * keys and bad values. Building images and running commands live elsewhere.
 */
#include "template/template.h"

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

/* ---- the YAML tree ---- */

enum ykind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
    enum ykind kind;
    unsigned line; /* 1-based */
    bool typed;    /* plain (or tagged non-str): YAML would resolve it to null/bool/number */
    char *text;    /* scalar value, NUL-terminated, never contains NUL */
    size_t len;
    struct ynode **kids; /* mapping: key, value, key, value, ... */
    size_t n, cap;
};

static void
ynode_free(struct ynode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++)
        ynode_free(n->kids[i]); /* depth is bounded by TEMPLATE_DEPTH_MAX */
    free(n->kids);
    free(n->text);
    free(n);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ynode *, ynode_free)

/* Parsing and validation state; where is the dotted path of the current key. */
struct ctx {
    const char *file;
    struct err *err;
    char where[192];
    size_t nodes;
};

/* Copies s for an error message: printable ASCII only, at most 48 bytes. */
static const char *
shown(const char *s, char *b, size_t size)
{
    size_t o = 0, max = MIN(size - 4, (size_t)48);
    for (; *s && o < max; s++)
        b[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s)
        b[o++] = '.', b[o++] = '.', b[o++] = '.';
    b[o] = '\0';
    return b;
}

static int _printf_(4, 5) fail_at(struct ctx *c, unsigned line, int errnum, const char *fmt, ...)
{
    char reason[ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return err_set(c->err, errnum, "%s:%u: %s%s%s", c->file, line, c->where,
                   c->where[0] ? ": " : "", reason);
}
#define fail(c, node, ...) fail_at((c), (node)->line, EINVAL, __VA_ARGS__)

/* Appends ".key" (or "key" at the top) or "[i]" to where; returns the old
 * length for pop(). Over-long paths are cut, never overflow. */
static size_t
push_key(struct ctx *c, const char *key)
{
    size_t old = strlen(c->where);
    char b[64];
    (void)snprintf(c->where + old, sizeof(c->where) - old, "%s%s", old ? "." : "",
                   shown(key, b, sizeof(b)));
    return old;
}

static size_t
push_index(struct ctx *c, size_t i)
{
    size_t old = strlen(c->where);
    (void)snprintf(c->where + old, sizeof(c->where) - old, "[%zu]", i);
    return old;
}

static void
pop(struct ctx *c, size_t old)
{
    c->where[old] = '\0';
}

static bool
tag_ok(const char *tag, enum ykind kind, bool *ret_typed)
{
    static const char pfx[] = "tag:yaml.org,2002:";

    if (!startswith(tag, pfx, &tag))
        return false;
    if (kind == Y_SEQ)
        return !strcmp(tag, "seq");
    if (kind == Y_MAP)
        return !strcmp(tag, "map");
    if (!strcmp(tag, "str")) {
        *ret_typed = false;
        return true;
    }
    if (!strcmp(tag, "int") || !strcmp(tag, "float") || !strcmp(tag, "bool") ||
        !strcmp(tag, "null")) {
        *ret_typed = true;
        return true;
    }
    return false;
}

static bool
is_null(const struct ynode *n)
{
    return n->kind == Y_SCALAR && n->typed &&
           (n->len == 0 || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
            !strcmp(n->text, "Null") || !strcmp(n->text, "NULL"));
}

/* Adds n under parent (or as the root); refuses complex and duplicate keys
 * and oversized collections. Takes n in all cases. */
static int
attach(struct ctx *c, struct ynode *parent, struct ynode **root, struct ynode *n)
{
    _cleanup_(ynode_freep) struct ynode *owned = n;

    if (!parent) {
        *root = TAKE_PTR(owned);
        return 0;
    }
    if (parent->kind == Y_MAP && parent->n % 2 == 0) {
        if (n->kind != Y_SCALAR)
            return fail(c, n, "mapping keys must be plain strings");
        if (!strcmp(n->text, "<<"))
            return fail(c, n, "merge keys ('<<') are not supported");
        for (size_t i = 0; i < parent->n; i += 2) {
            const struct ynode *k = parent->kids[i];
            if (k->len == n->len && !memcmp(k->text, n->text, n->len)) {
                char b[64];
                return fail(c, n, "duplicate key '%s' (first on line %u)",
                            shown(n->text, b, sizeof(b)), k->line);
            }
        }
    }
    if (parent->n >= (parent->kind == Y_MAP ? 2 : 1) * (size_t)TEMPLATE_COLLECTION_MAX)
        return fail(c, n, "more than %d items in one %s", TEMPLATE_COLLECTION_MAX,
                    parent->kind == Y_MAP ? "mapping" : "sequence");
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 8;
        struct ynode **k = realloc(parent->kids, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = TAKE_PTR(owned);
    return 0;
}

static unsigned
offset_line(const char *data, size_t len, size_t off)
{
    unsigned line = 1;
    for (size_t i = 0; i < off && i < len; i++)
        line += data[i] == '\n';
    return line;
}

static int
yaml_fail(struct ctx *c, const yaml_parser_t *p, const char *data, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return -ENOMEM;
    unsigned line = p->error == YAML_READER_ERROR ? offset_line(data, len, p->problem_offset)
                                                  : (unsigned)p->problem_mark.line + 1;
    return fail_at(c, line, EINVAL, "invalid YAML: %s%s%s", p->problem ? p->problem : "error",
                   p->context ? " " : "", p->context ? p->context : "");
}

/* Reads the single document of data into a tree. */
static int
read_tree(struct ctx *c, const char *data, size_t len, struct ynode **ret)
{
    _cleanup_(ynode_freep) struct ynode *root = NULL;
    struct ynode *stack[TEMPLATE_DEPTH_MAX];
    size_t depth = 0;
    unsigned docs = 0;
    yaml_parser_t p;
    int r = 0;

    if (!yaml_parser_initialize(&p))
        return -ENOMEM;
    /* UTF-8 only: libyaml would switch to UTF-16 on seeing its byte order
     * mark, and with the encoding forced it no longer skips a UTF-8 one. */
    size_t skip = len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3) ? 3 : 0;
    yaml_parser_set_input_string(&p, (const unsigned char *)data + skip, len - skip);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);

    for (bool done = false; !done && r >= 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            r = yaml_fail(c, &p, data, len);
            break;
        }
        unsigned line = (unsigned)ev.start_mark.line + 1;
        const yaml_char_t *anchor = NULL, *tag = NULL;
        enum ykind kind = Y_SCALAR;
        bool typed = false;

        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                r = fail_at(c, line, EINVAL, "more than one YAML document");
            break;
        case YAML_ALIAS_EVENT:
            r = fail_at(c, line, EINVAL, "YAML aliases ('*') are not supported");
            break;
        case YAML_SCALAR_EVENT:
            anchor = ev.data.scalar.anchor;
            tag = ev.data.scalar.tag;
            typed = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = ev.data.sequence_start.anchor;
            tag = ev.data.sequence_start.tag;
            kind = Y_SEQ;
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = ev.data.mapping_start.anchor;
            tag = ev.data.mapping_start.tag;
            kind = Y_MAP;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            assert(depth > 0);
            depth--;
            break;
        default:
            break;
        }
        bool node = ev.type == YAML_SCALAR_EVENT || ev.type == YAML_SEQUENCE_START_EVENT ||
                    ev.type == YAML_MAPPING_START_EVENT;
        if (r >= 0 && node) {
            if (anchor)
                r = fail_at(c, line, EINVAL, "YAML anchors ('&') are not supported");
            else if (tag && !tag_ok((const char *)tag, kind, &typed)) {
                char b[64];
                r = fail_at(c, line, EINVAL, "YAML tag '%s' is not supported",
                            shown((const char *)tag, b, sizeof(b)));
            } else if (++c->nodes > TEMPLATE_NODES_MAX)
                r = fail_at(c, line, EINVAL, "more than %d YAML nodes", TEMPLATE_NODES_MAX);
            else if (kind != Y_SCALAR && depth >= TEMPLATE_DEPTH_MAX)
                r = fail_at(c, line, EINVAL, "nested deeper than %d levels", TEMPLATE_DEPTH_MAX);
            else if (kind == Y_SCALAR && memchr(ev.data.scalar.value, '\0', ev.data.scalar.length))
                r = fail_at(c, line, EINVAL, "NUL character in a string");
        }
        if (r >= 0 && node) {
            struct ynode *n = calloc(1, sizeof(*n));
            if (!n)
                r = -ENOMEM;
            else {
                n->kind = kind;
                n->line = line;
                n->typed = typed;
                if (kind == Y_SCALAR) {
                    n->len = ev.data.scalar.length;
                    n->text = strndup((const char *)ev.data.scalar.value, n->len);
                }
                if (kind == Y_SCALAR && !n->text) {
                    ynode_free(n);
                    r = -ENOMEM;
                } else
                    r = attach(c, depth ? stack[depth - 1] : NULL, &root, n);
                if (r >= 0 && kind != Y_SCALAR)
                    stack[depth++] = n;
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(root);
    return 0;
}

/* ---- typed getters over the tree ---- */

static const char *
kind_name(const struct ynode *n)
{
    if (is_null(n))
        return "null";
    return n->kind == Y_MAP ? "a mapping" : n->kind == Y_SEQ ? "a list" : "a scalar";
}

/* A string of 1..max bytes (0..max with allow_empty), no control
 * characters except newline and tab when multiline. */
static int
get_str(struct ctx *c, const struct ynode *n, size_t max, bool allow_empty, bool multiline,
        char **ret)
{
    if (n->kind != Y_SCALAR || is_null(n))
        return fail(c, n, "must be a string, not %s", kind_name(n));
    if (!allow_empty && n->len == 0)
        return fail(c, n, "must not be empty");
    if (n->len > max)
        return fail(c, n, "longer than %zu bytes", max);
    for (size_t i = 0; i < n->len; i++) {
        unsigned char ch = (unsigned char)n->text[i];
        if ((ch < 0x20 || ch == 0x7f) && !(multiline && (ch == '\n' || ch == '\t')))
            return fail(c, n, "control character 0x%02x in string", ch);
    }
    char *s = strdup(n->text);
    if (!s)
        return -ENOMEM;
    free(*ret);
    *ret = s;
    return 0;
}

static int
get_u64(struct ctx *c, const struct ynode *n, uint64_t max, uint64_t *ret)
{
    uint64_t v;
    if (n->kind != Y_SCALAR || !n->typed || is_null(n))
        return fail(c, n, "must be a positive integer, not %s",
                    n->kind == Y_SCALAR && !is_null(n) ? "a quoted string" : kind_name(n));
    if (parse_u64(n->text, &v) < 0 || v == 0 || v > max) {
        char b[64];
        return fail(c, n, "'%s' is not an integer in 1..%" PRIu64, shown(n->text, b, sizeof(b)),
                    max);
    }
    *ret = v;
    return 0;
}

/* Decimal numbers only: [-]digits[.digits][e[+-]digits] (or .digits);
 * strtod() alone would also take hex, "inf", "nan" and leading blanks. */
static bool
parse_decimal(const char *s, double *ret)
{
    const char *p = s;
    bool digits = false;

    if (*p == '-' || *p == '+')
        p++;
    for (; *p >= '0' && *p <= '9'; p++)
        digits = true;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits = true;
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p)
        return false;
    double d = strtod(s, NULL);
    if (!isfinite(d))
        return false;
    *ret = d;
    return true;
}

static int
get_number(struct ctx *c, const struct ynode *n, double max, double *ret)
{
    double d;
    if (n->kind != Y_SCALAR || !n->typed || is_null(n))
        return fail(c, n, "must be a number, not %s",
                    n->kind == Y_SCALAR && !is_null(n) ? "a quoted string" : kind_name(n));
    if (!parse_decimal(n->text, &d) || !(d > 0) || d > max) {
        char b[64];
        return fail(c, n, "'%s' is not a number greater than 0 and at most %g",
                    shown(n->text, b, sizeof(b)), max);
    }
    *ret = d;
    return 0;
}

/* YAML 1.2 core booleans. */
static bool
parse_yaml_bool(const char *s, bool *ret)
{
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return (*ret = true);
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return !(*ret = false);
    return false;
}

static int
get_bool(struct ctx *c, const struct ynode *n, bool *ret)
{
    if (n->kind != Y_SCALAR || !n->typed || !parse_yaml_bool(n->text, ret))
        return fail(c, n, "must be true or false");
    return 0;
}

/* Checks that n is a mapping whose keys all appear in keys[], and points
 * vals[i] at the value of keys[i] (NULL when absent). */
static int
get_fields(struct ctx *c, const struct ynode *n, const char *const *keys, size_t nkeys,
           const struct ynode **vals)
{
    if (n->kind != Y_MAP)
        return fail(c, n, "must be a mapping, not %s", kind_name(n));
    for (size_t k = 0; k < nkeys; k++)
        vals[k] = NULL;
    for (size_t i = 0; i < n->n; i += 2) {
        size_t k = 0;
        while (k < nkeys && strcmp(keys[k], n->kids[i]->text))
            k++;
        if (k == nkeys) {
            char b[64];
            return fail(c, n->kids[i], "unknown key '%s'", shown(n->kids[i]->text, b, sizeof(b)));
        }
        vals[k] = n->kids[i + 1];
    }
    return 0;
}

static int
get_list(struct ctx *c, const struct ynode *n, size_t max)
{
    if (n->kind != Y_SEQ)
        return fail(c, n, "must be a list, not %s", kind_name(n));
    if (n->n > max)
        return fail(c, n, "more than %zu entries", max);
    return 0;
}

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
get_name(struct ctx *c, const struct ynode *n, char **ret)
{
    int r = get_str(c, n, TEMPLATE_NAME_MAX + 1, false, false, ret);
    if (r < 0)
        return r;
    if (!template_name_ok(*ret)) {
        char b[64];
        return fail(c, n, "'%s' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)",
                    shown(*ret, b, sizeof(b)));
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
get_abs_path(struct ctx *c, const struct ynode *n, char **ret)
{
    int r = get_str(c, n, TEMPLATE_PATH_MAX, false, false, ret);
    if (r < 0)
        return r;
    if ((*ret)[0] != '/')
        return fail(c, n, "must be an absolute path");
    return 0;
}

/* ---- sections ---- */

/* Reads an env mapping as "K=V" strings. */
static int
get_env(struct ctx *c, const struct ynode *n, char ***ret, size_t *ret_n)
{
    if (n->kind != Y_MAP)
        return fail(c, n, "must be a mapping, not %s", kind_name(n));
    if (n->n / 2 > TEMPLATE_ENV_MAX)
        return fail(c, n, "more than %d entries", TEMPLATE_ENV_MAX);
    *ret = calloc(n->n / 2 + 1, sizeof(char *));
    if (!*ret)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i += 2) {
        const struct ynode *k = n->kids[i], *v = n->kids[i + 1];
        _cleanup_free_ char *val = NULL;
        char b[64];
        if (!ident_ok(k->text, k->len, TEMPLATE_ENV_NAME_MAX))
            return fail(c, k, "'%s' is not a valid variable name (^[A-Za-z_][A-Za-z0-9_]{0,255}$)",
                        shown(k->text, b, sizeof(b)));
        size_t old = push_key(c, k->text);
        int r = get_str(c, v, TEMPLATE_ENV_VALUE_MAX, true, false, &val);
        pop(c, old);
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
get_step(struct ctx *c, struct template *t, const struct ynode *n)
{
    static const char *const keys[] = {"run", "env", "workdir", "copy"};
    const struct ynode *v[ELEMENTSOF(keys)];
    _cleanup_free_ char *a = NULL, *b = NULL;
    int r;

    r = get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (n->n != 2)
        return fail(c, n, "a step has exactly one key: run, env, workdir or copy");
    size_t old = push_key(c, n->kids[0]->text);
    if (v[0]) {
        r = get_str(c, v[0], TEMPLATE_CMD_MAX, false, true, &a);
        if (r >= 0)
            r = add_step(t, TEMPLATE_STEP_RUN, n->line, &a, NULL);
    } else if (v[1]) {
        _cleanup_free_ char **env = NULL;
        size_t n_env = 0;
        r = get_env(c, v[1], &env, &n_env);
        if (r >= 0 && n_env == 0)
            r = fail(c, v[1], "must not be empty");
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
        const struct ynode *cv[2];
        r = get_fields(c, v[3], ckeys, 2, cv);
        if (r >= 0 && (!cv[0] || !cv[1]))
            r = fail(c, v[3], "missing key '%s'", cv[0] ? "dst" : "src");
        if (r >= 0) {
            size_t o = push_key(c, "src");
            r = get_str(c, cv[0], TEMPLATE_PATH_MAX, false, false, &a);
            if (r >= 0 && a[0] == '/')
                r = fail(c, cv[0], "must be a path relative to the template directory");
            if (r >= 0 && has_dotdot(a))
                r = fail(c, cv[0], "must not contain '..'");
            pop(c, o);
        }
        if (r >= 0) {
            size_t o = push_key(c, "dst");
            r = get_abs_path(c, cv[1], &b);
            pop(c, o);
        }
        if (r >= 0)
            r = add_step(t, TEMPLATE_STEP_COPY, n->line, &a, &b);
    }
    pop(c, old);
    return r;
}

static int
get_steps(struct ctx *c, struct template *t, const struct ynode *n)
{
    int r = get_list(c, n, TEMPLATE_STEPS_MAX);
    if (r < 0)
        return r;
    /* env steps expand to one step per variable: count them first */
    size_t total = 0;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *s = n->kids[i];
        if (s->kind == Y_MAP && s->n == 2 && !strcmp(s->kids[0]->text, "env") &&
            s->kids[1]->kind == Y_MAP)
            total += s->kids[1]->n / 2;
        else
            total++;
    }
    t->steps = calloc(total + 1, sizeof(*t->steps));
    if (!t->steps)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        size_t old = push_index(c, i);
        r = get_step(c, t, n->kids[i]);
        pop(c, old);
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
get_caps(struct ctx *c, const struct ynode *n, unsigned *ret)
{
    int r = get_list(c, n, ELEMENTSOF(cap_names));
    if (r < 0)
        return r;
    *ret = 0;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *k = n->kids[i];
        size_t old = push_index(c, i);
        char b[64];
        int cap = k->kind == Y_SCALAR ? template_cap_from_name(k->text) : -EINVAL;
        if (k->kind != Y_SCALAR || is_null(k))
            r = fail(c, k, "must be a string, not %s", kind_name(k));
        else if (cap < 0)
            r = fail(c, k, "unknown capability '%s' (known: shell, files, code, terminal, ports)",
                     shown(k->text, b, sizeof(b)));
        else if (*ret & (unsigned)cap)
            r = fail(c, k, "capability '%s' listed twice", k->text);
        else
            *ret |= (unsigned)cap;
        pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_ports(struct ctx *c, struct template *t, const struct ynode *n)
{
    int r = get_list(c, n, TEMPLATE_PORTS_MAX);
    if (r < 0)
        return r;
    t->ports = calloc(n->n + 1, sizeof(*t->ports));
    if (!t->ports)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        uint64_t v = 0;
        size_t old = push_index(c, i);
        r = get_u64(c, n->kids[i], 65535, &v);
        for (size_t j = 0; r >= 0 && j < t->n_ports; j++)
            if (t->ports[j] == v)
                r = fail(c, n->kids[i], "port %" PRIu64 " listed twice", v);
        pop(c, old);
        if (r < 0)
            return r;
        t->ports[t->n_ports++] = (uint16_t)v;
    }
    return 0;
}

static int
get_resources(struct ctx *c, struct template *t, const struct ynode *n)
{
    static const char *const keys[] = {"cpu", "memory_mb", "pids", "disk_mb"};
    const struct ynode *v[ELEMENTSOF(keys)];
    int r = get_fields(c, n, keys, ELEMENTSOF(keys), v);
    size_t old;

    if (r < 0)
        return r;
    if (v[0]) {
        old = push_key(c, "cpu");
        r = get_number(c, v[0], TEMPLATE_CPU_MAX, &t->cpu);
        pop(c, old);
    }
    if (r >= 0 && v[1]) {
        old = push_key(c, "memory_mb");
        r = get_u64(c, v[1], TEMPLATE_MEMORY_MB_MAX, &t->memory_mb);
        pop(c, old);
    }
    if (r >= 0 && v[2]) {
        old = push_key(c, "pids");
        r = get_u64(c, v[2], TEMPLATE_PIDS_MAX, &t->pids);
        pop(c, old);
    }
    if (r >= 0 && v[3]) {
        old = push_key(c, "disk_mb");
        r = get_u64(c, v[3], TEMPLATE_DISK_MB_MAX, &t->disk_mb);
        pop(c, old);
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
        if (!parse_decimal(s, &d))
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
get_arg(struct ctx *c, struct template_command *cmd, const struct ynode *n)
{
    static const char *const keys[] = {"name", "type", "required", "default", "description"};
    const struct ynode *v[ELEMENTSOF(keys)];
    struct template_arg *a = &cmd->args[cmd->n_args];
    char b[64];
    size_t old;
    int r;

    r = get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[0])
        return fail(c, n, "missing key 'name'");
    cmd->n_args++; /* from here a is owned by cmd, also on failure */
    a->line = n->line;
    old = push_key(c, "name");
    r = get_str(c, v[0], TEMPLATE_ARG_NAME_MAX + 1, false, false, &a->name);
    if (r >= 0 && !ident_ok(a->name, strlen(a->name), TEMPLATE_ARG_NAME_MAX))
        r = fail(c, v[0], "'%s' is not a valid argument name (^[A-Za-z_][A-Za-z0-9_]{0,63}$)",
                 shown(a->name, b, sizeof(b)));
    for (size_t i = 0; r >= 0 && i + 1 < cmd->n_args; i++)
        if (!strcmp(cmd->args[i].name, a->name))
            r = fail(c, v[0], "argument '%s' declared twice", a->name);
    pop(c, old);
    if (r < 0)
        return r;

    a->type = TEMPLATE_ARG_STR;
    if (v[1]) {
        _cleanup_free_ char *type = NULL;
        old = push_key(c, "type");
        r = get_str(c, v[1], 16, false, false, &type);
        if (r >= 0 && (int)(a->type = template_arg_type_from_name(type)) < 0)
            r = fail(c, v[1], "unknown type '%s' (known: str, int, float, bool)",
                     shown(type, b, sizeof(b)));
        pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[2]) {
        old = push_key(c, "required");
        r = get_bool(c, v[2], &a->required);
        pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[3]) {
        _cleanup_free_ char *text = NULL;
        old = push_key(c, "default");
        if (a->required)
            r = fail(c, v[3], "an argument with required: true cannot have a default");
        if (r >= 0)
            r = get_str(c, v[3], TEMPLATE_DESCRIPTION_MAX, true, true, &text);
        if (r >= 0) {
            r = canonical_default(a->type, text, &a->default_text);
            if (r == -EINVAL)
                r = fail(c, v[3], "'%s' is not a valid %s", shown(text, b, sizeof(b)),
                         template_arg_type_name(a->type));
        }
        pop(c, old);
        if (r < 0)
            return r;
    }
    if (v[4]) {
        old = push_key(c, "description");
        r = get_str(c, v[4], TEMPLATE_DESCRIPTION_MAX, true, true, &a->description);
        pop(c, old);
    }
    return r;
}

/* Every {name} in cmd must name a declared argument; "{{" and "}}" are
 * literal braces, any other brace is an error. */
static int
check_placeholders(struct ctx *c, const struct template_command *cmd, const struct ynode *n)
{
    for (const char *p = cmd->cmd; *p; p++) {
        if (*p == '}') {
            if (p[1] != '}')
                return fail(c, n, "unbalanced '}' (write '}}' for a literal brace)");
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
            return fail(c, n, "bad placeholder at '%s' (write '{{' for a literal brace)",
                        shown(frag, b, sizeof(b)));
        }
        bool found = false;
        for (size_t i = 0; i < cmd->n_args && !found; i++)
            found = strlen(cmd->args[i].name) == len && !memcmp(cmd->args[i].name, p + 1, len);
        if (!found) {
            char name[TEMPLATE_ARG_NAME_MAX + 1];
            memcpy(name, p + 1, len);
            name[len] = '\0';
            return fail(c, n, "unknown placeholder '{%s}': no argument '%s' is declared", name,
                        name);
        }
        p = end;
    }
    return 0;
}

static int
get_command(struct ctx *c, struct template *t, const struct ynode *k, const struct ynode *n)
{
    static const char *const keys[] = {"cmd", "description", "cwd", "env", "timeout", "args"};
    const struct ynode *v[ELEMENTSOF(keys)];
    struct template_command *cmd = &t->cmds[t->n_cmds];
    char b[64];
    size_t old;
    int r;

    if (!template_name_ok(k->text))
        return fail(c, k, "'%s' is not a valid command name (^[a-z0-9][a-z0-9_-]{0,63}$)",
                    shown(k->text, b, sizeof(b)));
    cmd->name = strdup(k->text);
    if (!cmd->name)
        return -ENOMEM;
    t->n_cmds++;
    cmd->line = k->line;
    r = get_fields(c, n, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[0])
        return fail(c, n, "missing key 'cmd'");
    if (v[1]) {
        old = push_key(c, "description");
        r = get_str(c, v[1], TEMPLATE_DESCRIPTION_MAX, true, true, &cmd->description);
        pop(c, old);
    }
    if (r >= 0 && v[2]) {
        old = push_key(c, "cwd");
        r = get_abs_path(c, v[2], &cmd->cwd);
        pop(c, old);
    }
    if (r >= 0 && v[3]) {
        old = push_key(c, "env");
        r = get_env(c, v[3], &cmd->env, &cmd->n_env);
        pop(c, old);
    }
    if (r >= 0 && v[4]) {
        double s = 0;
        old = push_key(c, "timeout");
        r = get_number(c, v[4], TEMPLATE_TIMEOUT_MAX_S, &s);
        pop(c, old);
        /* round up: a positive timeout never becomes "none" */
        double ms = s * 1000.0;
        cmd->timeout_ms = (uint64_t)ms + ((double)(uint64_t)ms < ms);
    }
    if (r >= 0 && v[5]) {
        old = push_key(c, "args");
        r = get_list(c, v[5], TEMPLATE_ARGS_MAX);
        if (r >= 0) {
            cmd->args = calloc(v[5]->n + 1, sizeof(*cmd->args));
            if (!cmd->args)
                r = -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < v[5]->n; i++) {
            size_t o = push_index(c, i);
            r = get_arg(c, cmd, v[5]->kids[i]);
            pop(c, o);
        }
        pop(c, old);
    }
    /* cmd last: its placeholders refer to the arguments */
    if (r >= 0) {
        old = push_key(c, "cmd");
        r = get_str(c, v[0], TEMPLATE_CMD_MAX, false, true, &cmd->cmd);
        if (r >= 0)
            r = check_placeholders(c, cmd, v[0]);
        pop(c, old);
    }
    return r;
}

static int
get_commands(struct ctx *c, struct template *t, const struct ynode *n)
{
    if (n->kind != Y_MAP)
        return fail(c, n, "must be a mapping of command names, not %s", kind_name(n));
    if (n->n / 2 > TEMPLATE_COMMANDS_MAX)
        return fail(c, n, "more than %d commands", TEMPLATE_COMMANDS_MAX);
    t->cmds = calloc(n->n / 2 + 1, sizeof(*t->cmds));
    if (!t->cmds)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i += 2) {
        size_t old = push_key(c, n->kids[i]->text);
        int r = get_command(c, t, n->kids[i], n->kids[i + 1]);
        pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_aliases(struct ctx *c, struct template *t, const struct ynode *n)
{
    int r = get_list(c, n, TEMPLATE_ALIASES_MAX);
    if (r < 0)
        return r;
    t->aliases = calloc(n->n + 1, sizeof(char *));
    if (!t->aliases)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        size_t old = push_index(c, i);
        char **a = &t->aliases[t->n_aliases];
        r = get_name(c, n->kids[i], a);
        if (*a)
            t->n_aliases++;
        if (r >= 0 && t->name && !strcmp(*a, t->name))
            r = fail(c, n->kids[i], "alias '%s' is the template's name", *a);
        for (size_t j = 0; r >= 0 && j + 1 < t->n_aliases; j++)
            if (!strcmp(t->aliases[j], *a))
                r = fail(c, n->kids[i], "alias '%s' listed twice", *a);
        pop(c, old);
        if (r < 0)
            return r;
    }
    return 0;
}

static int
get_template(struct ctx *c, const struct ynode *root, struct template *t)
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
    const struct ynode *v[ELEMENTSOF(keys)];
    size_t old;
    int r;

    if (!root)
        return fail_at(c, 1, EINVAL, "empty document: a template is a mapping");
    if (root->kind != Y_MAP)
        return fail(c, root, "a template is a mapping, not %s", kind_name(root));
    r = get_fields(c, root, keys, ELEMENTSOF(keys), v);
    if (r < 0)
        return r;
    if (!v[K_NAME])
        return fail(c, root, "missing key 'name'");

    for (size_t k = 0; k < ELEMENTSOF(keys) && r >= 0; k++) {
        const struct ynode *n = v[k];
        if (!n)
            continue;
        old = push_key(c, keys[k]);
        switch (k) {
        case K_NAME:
            r = get_name(c, n, &t->name);
            if (r >= 0 && !strcmp(t->name, TEMPLATE_BASE_HOST))
                r = fail(c, n, "'host' is reserved for the base of templates built on the host");
            break;
        case K_ALIASES:
            r = get_aliases(c, t, n);
            break;
        case K_DESCRIPTION:
            r = get_str(c, n, TEMPLATE_DESCRIPTION_MAX, true, true, &t->description);
            break;
        case K_BASE:
            r = get_name(c, n, &t->base);
            if (r >= 0 && !strcmp(t->base, t->name))
                r = fail(c, n, "a template cannot be based on itself");
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
            r = get_str(c, n, TEMPLATE_CMD_MAX, false, true, &t->start_cmd);
            break;
        case K_READY:
            r = get_str(c, n, TEMPLATE_CMD_MAX, false, true, &t->ready_cmd);
            break;
        case K_COMMANDS:
            r = get_commands(c, t, n);
            break;
        }
        pop(c, old);
    }
    if (r < 0)
        return r;
    if (!v[K_CAPS])
        t->caps = TEMPLATE_CAPS_DEFAULT;
    if (t->n_ports > 0 && !(t->caps & TEMPLATE_CAP_PORTS)) {
        old = push_key(c, "ports");
        r = fail(c, v[K_PORTS], "listed, but capability 'ports' is not declared");
        pop(c, old);
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
    _cleanup_(ynode_freep) struct ynode *root = NULL;
    _cleanup_(template_freep) struct template *t = NULL;
    struct ctx c = {.file = file, .err = err};
    int r;

    if (len > TEMPLATE_FILE_MAX)
        return err_set(err, EFBIG, "%s: larger than %d bytes", file, TEMPLATE_FILE_MAX);
    if (!data)
        data = ""; /* libyaml asserts on a NULL input even when len is 0 */
    const char *nul = memchr(data, '\0', len);
    if (nul)
        return fail_at(&c, offset_line(data, len, (size_t)(nul - data)), EINVAL,
                       "NUL byte in the file");
    r = read_tree(&c, data, len, &root);
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
