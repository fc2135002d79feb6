/*
 * yaml.h - a safe YAML reader: one document into a bounded tree, and typed
 * getters that check a node against what a schema expects.
 *
 * The YAML is read with libyaml, restricted to a safe subset: one document,
 * no anchors, aliases or merge keys, only the standard tags, no duplicate
 * mapping keys, bounded depth, node count and collection size. What the keys
 * mean is the caller's: it walks the tree with the getters, which refuse a
 * node of the wrong kind or value with one error
 * "<file>:<line>: <where>: <reason>", where <where> is the dotted path of
 * keys and [indexes] the caller pushed on the way down.
 *
 * Functions return 0 on success and -errno on failure: -EINVAL for input
 * that is refused, -EFBIG for input past its size limit, -ENOMEM. They never log; struct err
 * (optional, in the context) says why. ret_ parameters are written only on success and belong to
 * the caller. Thread-safe: no global state (one context per reader).
 *
 * Not to be confused with libyaml's own <yaml.h>, which yaml.c uses and no
 * one else needs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cleanup.h"
#include "util/err.h"

enum yaml_kind {
    YAML_KIND_SCALAR,
    YAML_KIND_SEQ,
    YAML_KIND_MAP,
};

/* One node of the tree; read-only for the caller, freed with the root. */
struct yaml_node {
    enum yaml_kind kind;
    unsigned line; /* 1-based */
    bool typed;    /* plain (or tagged non-str): YAML would resolve it to null/bool/number */
    char *text;    /* scalar value, NUL-terminated, never contains NUL */
    size_t len;
    struct yaml_node **kids; /* mapping: key, value, key, value, ...; keys are scalars */
    size_t n, cap;
};

/* The ceiling of yaml_limits.depth_max: the reader keeps one pointer per
 * open collection on its stack, and freeing a tree recurses this deep. */
#define YAML_DEPTH_MAX 64

/* What one input may make the reader parse and allocate. Each is refused
 * past its limit with a message naming it. */
struct yaml_limits {
    size_t bytes_max;      /* input length; past it -EFBIG */
    unsigned depth_max;    /* nested sequences/mappings; at most YAML_DEPTH_MAX */
    size_t nodes_max;      /* scalars + sequences + mappings (keys included) */
    size_t collection_max; /* items in one sequence, pairs in one mapping */
};

/* Reading and validation state; where is the dotted path of the current key.
 * The caller sets file and err ({.file = "x.yaml", .err = err}). */
struct yaml_ctx {
    const char *file; /* names the input in error messages */
    struct err *err;  /* optional */
    char where[192];
};

/* Frees n and everything under it; takes NULL. */
void yaml_node_free(struct yaml_node *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct yaml_node *, yaml_node_free)

/* Reads the single document of len bytes of data (UTF-8, an optional byte
 * order mark; data may be NULL when len is 0) into a tree; *ret is NULL
 * for an empty document. Refuses: more than l->bytes_max bytes (-EFBIG), a
 * NUL byte, invalid YAML, a second document, anchors, aliases, merge keys
 * ('<<'), tags other than the standard str/int/float/bool/null/seq/map, a
 * mapping key that is not a scalar, a duplicate key, and going past any of
 * l's limits (-EINVAL). Every refusal names a line. */
int yaml_read(struct yaml_ctx *c, const struct yaml_limits *l, const char *data, size_t len,
              struct yaml_node **ret);

/* Fails with errnum and "<file>:<line>: <where>: <reason>"; returns -errnum. */
int _printf_(4, 5)
        yaml_fail_at(struct yaml_ctx *c, unsigned line, int errnum, const char *fmt, ...);
#define yaml_fail(c, node, ...) yaml_fail_at((c), (node)->line, EINVAL, __VA_ARGS__)

/* Appends ".key" (or "key" at the top) or "[i]" to c->where; returns the
 * old length for yaml_pop(). Over-long paths are cut, never overflow. */
size_t yaml_push_key(struct yaml_ctx *c, const char *key);
size_t yaml_push_index(struct yaml_ctx *c, size_t i);
void yaml_pop(struct yaml_ctx *c, size_t old);

/* Copies s into b for an error message: printable ASCII only, at most 48
 * bytes and "..."; returns b. */
const char *yaml_shown(const char *s, char *b, size_t size);

/* Whether n is a plain null (empty, "~", "null", "Null", "NULL"). */
bool yaml_is_null(const struct yaml_node *n);
/* "null", "a mapping", "a list" or "a scalar", for error messages. */
const char *yaml_kind_name(const struct yaml_node *n);

/* A string of 1..max bytes (0..max with allow_empty), no control characters
 * except newline and tab when multiline; replaces *ret (freeing it). */
int yaml_get_str(struct yaml_ctx *c, const struct yaml_node *n, size_t max, bool allow_empty,
                 bool multiline, char **ret);
/* A plain (unquoted) integer in 1..max. */
int yaml_get_u64(struct yaml_ctx *c, const struct yaml_node *n, uint64_t max, uint64_t *ret);
/* A plain decimal number greater than 0 and at most max (no hex, inf, nan). */
int yaml_get_number(struct yaml_ctx *c, const struct yaml_node *n, double max, double *ret);
/* Whether s is a decimal number, [-]digits[.digits][e[+-]digits] (or
 * .digits), that is finite; strtod() alone would also take hex, "inf",
 * "nan" and leading blanks. */
bool yaml_parse_decimal(const char *s, double *ret);
/* A plain YAML 1.2 core boolean. */
int yaml_get_bool(struct yaml_ctx *c, const struct yaml_node *n, bool *ret);
/* Checks that n is a mapping whose keys all appear in keys[], and points
 * vals[i] at the value of keys[i] (NULL when absent). */
int yaml_get_fields(struct yaml_ctx *c, const struct yaml_node *n, const char *const *keys,
                    size_t nkeys, const struct yaml_node **vals);
/* Checks that n is a sequence of at most max entries. */
int yaml_get_list(struct yaml_ctx *c, const struct yaml_node *n, size_t max);
