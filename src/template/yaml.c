/*
 * yaml.c - a safe YAML reader: one document into a bounded tree, and typed
 * getters over it.
 *
 * libyaml turns the text into events; this file builds a small tree of
 * scalars, sequences and mappings from them and refuses, while reading,
 * everything YAML can do that a configuration file does not need and an
 * attacker could use: aliases (the "billion laughs" bomb), anchors, merge
 * keys, several documents, custom tags, duplicate keys, deep nesting, too
 * many nodes. The getters check one node against what a schema expects and
 * say where it failed. What the keys mean is the caller's business
 * (template.c walks the template schema).
 */
#include "template/yaml.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/cleanup.h"
#include "util/parse.h"

/* ---- the YAML tree ---- */

void
yaml_node_free(struct yaml_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++)
        yaml_node_free(n->kids[i]); /* depth is bounded by YAML_DEPTH_MAX */
    free(n->kids);
    free(n->text);
    free(n);
}

/* Copies s for an error message: printable ASCII only, at most 48 bytes. */
const char *
yaml_shown(const char *s, char *b, size_t size)
{
    size_t o = 0, max = MIN(size - 4, (size_t)48);
    for (; *s && o < max; s++)
        b[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s)
        b[o++] = '.', b[o++] = '.', b[o++] = '.';
    b[o] = '\0';
    return b;
}

int
yaml_fail_at(struct yaml_ctx *c, unsigned line, int errnum, const char *fmt, ...)
{
    char reason[ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return err_set(c->err, errnum, "%s:%u: %s%s%s", c->file, line, c->where,
                   c->where[0] ? ": " : "", reason);
}

/* Appends ".key" (or "key" at the top) or "[i]" to where; returns the old
 * length for yaml_pop(). Over-long paths are cut, never overflow. */
size_t
yaml_push_key(struct yaml_ctx *c, const char *key)
{
    size_t old = strlen(c->where);
    char b[64];
    (void)snprintf(c->where + old, sizeof(c->where) - old, "%s%s", old ? "." : "",
                   yaml_shown(key, b, sizeof(b)));
    return old;
}

size_t
yaml_push_index(struct yaml_ctx *c, size_t i)
{
    size_t old = strlen(c->where);
    (void)snprintf(c->where + old, sizeof(c->where) - old, "[%zu]", i);
    return old;
}

void
yaml_pop(struct yaml_ctx *c, size_t old)
{
    c->where[old] = '\0';
}

static bool
tag_ok(const char *tag, enum yaml_kind kind, bool *ret_typed)
{
    static const char pfx[] = "tag:yaml.org,2002:";

    if (!startswith(tag, pfx, &tag))
        return false;
    if (kind == YAML_KIND_SEQ)
        return !strcmp(tag, "seq");
    if (kind == YAML_KIND_MAP)
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

bool
yaml_is_null(const struct yaml_node *n)
{
    return n->kind == YAML_KIND_SCALAR && n->typed &&
           (n->len == 0 || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
            !strcmp(n->text, "Null") || !strcmp(n->text, "NULL"));
}

/* Adds n under parent (or as the root); refuses complex and duplicate keys
 * and oversized collections. Takes n in all cases. */
static int
attach(struct yaml_ctx *c, const struct yaml_limits *l, struct yaml_node *parent,
       struct yaml_node **root, struct yaml_node *n)
{
    _cleanup_(yaml_node_freep) struct yaml_node *owned = n;

    if (!parent) {
        *root = TAKE_PTR(owned);
        return 0;
    }
    if (parent->kind == YAML_KIND_MAP && parent->n % 2 == 0) {
        if (n->kind != YAML_KIND_SCALAR)
            return yaml_fail(c, n, "mapping keys must be plain strings");
        if (!strcmp(n->text, "<<"))
            return yaml_fail(c, n, "merge keys ('<<') are not supported");
        for (size_t i = 0; i < parent->n; i += 2) {
            const struct yaml_node *k = parent->kids[i];
            if (k->len == n->len && !memcmp(k->text, n->text, n->len)) {
                char b[64];
                return yaml_fail(c, n, "duplicate key '%s' (first on line %u)",
                                 yaml_shown(n->text, b, sizeof(b)), k->line);
            }
        }
    }
    if (parent->n >= (parent->kind == YAML_KIND_MAP ? 2 : 1) * l->collection_max)
        return yaml_fail(c, n, "more than %zu items in one %s", l->collection_max,
                         parent->kind == YAML_KIND_MAP ? "mapping" : "sequence");
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 8;
        struct yaml_node **k = realloc(parent->kids, cap * sizeof(*k));
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
parser_fail(struct yaml_ctx *c, const yaml_parser_t *p, const char *data, size_t len)
{
    if (p->error == YAML_MEMORY_ERROR)
        return -ENOMEM;
    unsigned line = p->error == YAML_READER_ERROR ? offset_line(data, len, p->problem_offset)
                                                  : (unsigned)p->problem_mark.line + 1;
    return yaml_fail_at(c, line, EINVAL, "invalid YAML: %s%s%s", p->problem ? p->problem : "error",
                        p->context ? " " : "", p->context ? p->context : "");
}

int
yaml_read(struct yaml_ctx *c, const struct yaml_limits *l, const char *data, size_t len,
          struct yaml_node **ret)
{
    _cleanup_(yaml_node_freep) struct yaml_node *root = NULL;
    struct yaml_node *stack[YAML_DEPTH_MAX];
    size_t depth_max = MIN((size_t)l->depth_max, (size_t)YAML_DEPTH_MAX), nodes = 0;
    size_t depth = 0;
    unsigned docs = 0;
    yaml_parser_t p;
    int r = 0;

    if (len > l->bytes_max)
        return err_set(c->err, EFBIG, "%s: larger than %zu bytes", c->file, l->bytes_max);
    if (!data)
        data = ""; /* libyaml asserts on a NULL input even when len is 0 */
    const char *nul = memchr(data, '\0', len);
    if (nul)
        return yaml_fail_at(c, offset_line(data, len, (size_t)(nul - data)), EINVAL,
                            "NUL byte in the file");
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
            r = parser_fail(c, &p, data, len);
            break;
        }
        unsigned line = (unsigned)ev.start_mark.line + 1;
        const yaml_char_t *anchor = NULL, *tag = NULL;
        enum yaml_kind kind = YAML_KIND_SCALAR;
        bool typed = false;

        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                r = yaml_fail_at(c, line, EINVAL, "more than one YAML document");
            break;
        case YAML_ALIAS_EVENT:
            r = yaml_fail_at(c, line, EINVAL, "YAML aliases ('*') are not supported");
            break;
        case YAML_SCALAR_EVENT:
            anchor = ev.data.scalar.anchor;
            tag = ev.data.scalar.tag;
            typed = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = ev.data.sequence_start.anchor;
            tag = ev.data.sequence_start.tag;
            kind = YAML_KIND_SEQ;
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = ev.data.mapping_start.anchor;
            tag = ev.data.mapping_start.tag;
            kind = YAML_KIND_MAP;
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
                r = yaml_fail_at(c, line, EINVAL, "YAML anchors ('&') are not supported");
            else if (tag && !tag_ok((const char *)tag, kind, &typed)) {
                char b[64];
                r = yaml_fail_at(c, line, EINVAL, "YAML tag '%s' is not supported",
                                 yaml_shown((const char *)tag, b, sizeof(b)));
            } else if (++nodes > l->nodes_max)
                r = yaml_fail_at(c, line, EINVAL, "more than %zu YAML nodes", l->nodes_max);
            else if (kind != YAML_KIND_SCALAR && depth >= depth_max)
                r = yaml_fail_at(c, line, EINVAL, "nested deeper than %zu levels", depth_max);
            else if (kind == YAML_KIND_SCALAR &&
                     memchr(ev.data.scalar.value, '\0', ev.data.scalar.length))
                r = yaml_fail_at(c, line, EINVAL, "NUL character in a string");
        }
        if (r >= 0 && node) {
            struct yaml_node *n = calloc(1, sizeof(*n));
            if (!n)
                r = -ENOMEM;
            else {
                n->kind = kind;
                n->line = line;
                n->typed = typed;
                if (kind == YAML_KIND_SCALAR) {
                    n->len = ev.data.scalar.length;
                    n->text = strndup((const char *)ev.data.scalar.value, n->len);
                }
                if (kind == YAML_KIND_SCALAR && !n->text) {
                    yaml_node_free(n);
                    r = -ENOMEM;
                } else
                    r = attach(c, l, depth ? stack[depth - 1] : NULL, &root, n);
                if (r >= 0 && kind != YAML_KIND_SCALAR)
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

const char *
yaml_kind_name(const struct yaml_node *n)
{
    if (yaml_is_null(n))
        return "null";
    return n->kind == YAML_KIND_MAP   ? "a mapping"
           : n->kind == YAML_KIND_SEQ ? "a list"
                                      : "a scalar";
}

/* A string of 1..max bytes (0..max with allow_empty), no control
 * characters except newline and tab when multiline. */
int
yaml_get_str(struct yaml_ctx *c, const struct yaml_node *n, size_t max, bool allow_empty,
             bool multiline, char **ret)
{
    if (n->kind != YAML_KIND_SCALAR || yaml_is_null(n))
        return yaml_fail(c, n, "must be a string, not %s", yaml_kind_name(n));
    if (!allow_empty && n->len == 0)
        return yaml_fail(c, n, "must not be empty");
    if (n->len > max)
        return yaml_fail(c, n, "longer than %zu bytes", max);
    for (size_t i = 0; i < n->len; i++) {
        unsigned char ch = (unsigned char)n->text[i];
        if ((ch < 0x20 || ch == 0x7f) && !(multiline && (ch == '\n' || ch == '\t')))
            return yaml_fail(c, n, "control character 0x%02x in string", ch);
    }
    char *s = strdup(n->text);
    if (!s)
        return -ENOMEM;
    free(*ret);
    *ret = s;
    return 0;
}

int
yaml_get_u64(struct yaml_ctx *c, const struct yaml_node *n, uint64_t max, uint64_t *ret)
{
    uint64_t v;
    if (n->kind != YAML_KIND_SCALAR || !n->typed || yaml_is_null(n))
        return yaml_fail(c, n, "must be a positive integer, not %s",
                         n->kind == YAML_KIND_SCALAR && !yaml_is_null(n) ? "a quoted string"
                                                                         : yaml_kind_name(n));
    if (parse_u64(n->text, &v) < 0 || v == 0 || v > max) {
        char b[64];
        return yaml_fail(c, n, "'%s' is not an integer in 1..%" PRIu64,
                         yaml_shown(n->text, b, sizeof(b)), max);
    }
    *ret = v;
    return 0;
}

/* Decimal numbers only: [-]digits[.digits][e[+-]digits] (or .digits);
 * strtod() alone would also take hex, "inf", "nan" and leading blanks. */
bool
yaml_parse_decimal(const char *s, double *ret)
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

int
yaml_get_number(struct yaml_ctx *c, const struct yaml_node *n, double max, double *ret)
{
    double d;
    if (n->kind != YAML_KIND_SCALAR || !n->typed || yaml_is_null(n))
        return yaml_fail(c, n, "must be a number, not %s",
                         n->kind == YAML_KIND_SCALAR && !yaml_is_null(n) ? "a quoted string"
                                                                         : yaml_kind_name(n));
    if (!yaml_parse_decimal(n->text, &d) || !(d > 0) || d > max) {
        char b[64];
        return yaml_fail(c, n, "'%s' is not a number greater than 0 and at most %g",
                         yaml_shown(n->text, b, sizeof(b)), max);
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

int
yaml_get_bool(struct yaml_ctx *c, const struct yaml_node *n, bool *ret)
{
    if (n->kind != YAML_KIND_SCALAR || !n->typed || !parse_yaml_bool(n->text, ret))
        return yaml_fail(c, n, "must be true or false");
    return 0;
}

/* Checks that n is a mapping whose keys all appear in keys[], and points
 * vals[i] at the value of keys[i] (NULL when absent). */
int
yaml_get_fields(struct yaml_ctx *c, const struct yaml_node *n, const char *const *keys,
                size_t nkeys, const struct yaml_node **vals)
{
    if (n->kind != YAML_KIND_MAP)
        return yaml_fail(c, n, "must be a mapping, not %s", yaml_kind_name(n));
    for (size_t k = 0; k < nkeys; k++)
        vals[k] = NULL;
    for (size_t i = 0; i < n->n; i += 2) {
        size_t k = 0;
        while (k < nkeys && strcmp(keys[k], n->kids[i]->text))
            k++;
        if (k == nkeys) {
            char b[64];
            return yaml_fail(c, n->kids[i], "unknown key '%s'",
                             yaml_shown(n->kids[i]->text, b, sizeof(b)));
        }
        vals[k] = n->kids[i + 1];
    }
    return 0;
}

int
yaml_get_list(struct yaml_ctx *c, const struct yaml_node *n, size_t max)
{
    if (n->kind != YAML_KIND_SEQ)
        return yaml_fail(c, n, "must be a list, not %s", yaml_kind_name(n));
    if (n->n > max)
        return yaml_fail(c, n, "more than %zu entries", max);
    return 0;
}
