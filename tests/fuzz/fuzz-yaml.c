/*
 * fuzz-yaml.c - yaml_read() and the typed getters on arbitrary bytes.
 *
 * The limits are small, so that mutations reach each of them. Invariants:
 * yaml_read() returns 0, -EINVAL or (past bytes_max only) -EFBIG; a refusal
 * leaves no tree and carries a message that starts with the file name (and
 * a line number unless it is about the size), is shorter than ERR_MSG_MAX
 * and holds no control characters; an accepted tree keeps every limit
 * (depth, nodes, items per collection), its mappings have an even number of
 * kids, scalar keys, no '<<' and no duplicate key, and its scalars are
 * NUL-free with len == strlen(text); every getter on every node either
 * fails with EINVAL and a well-formed message or returns a value that obeys
 * its contract; reading the same bytes again gives the same tree.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "fuzz-common.h"
#include "template/yaml.h"

static const struct yaml_limits limits = {
        .bytes_max = 16384,
        .depth_max = 8,
        .nodes_max = 512,
        .collection_max = 32,
};

static void
check_msg(const struct err *e, bool line)
{
    CHECK(e->errnum == EINVAL || e->errnum == EFBIG);
    CHECK(strlen(e->msg) < ERR_MSG_MAX);
    CHECK(!strncmp(e->msg, "fuzz.yaml:", 10));
    if (line)
        CHECK(e->msg[10] >= '1' && e->msg[10] <= '9');
    for (const char *p = e->msg; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* A getter's result: 0 with its contract, or -EINVAL with a message. */
static void
check_getter(int r, struct err *e)
{
    CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        CHECK(e->errnum == EINVAL);
        check_msg(e, true);
    }
    err_clear(e);
}

static void
check_getters(struct yaml_ctx *c, const struct yaml_node *n)
{
    struct err *e = c->err;
    char *s = NULL;
    uint64_t u = 0;
    double d = 0;
    bool b;

    int r = yaml_get_str(c, n, 64, n->line & 1, n->line & 2, &s);
    check_getter(r, e);
    if (r == 0) {
        CHECK(n->kind == YAML_KIND_SCALAR && !yaml_is_null(n));
        CHECK(s && strlen(s) == n->len && n->len <= 64 && ((n->line & 1) || n->len > 0));
        for (const char *p = s; *p; p++)
            CHECK(((unsigned char)*p >= 0x20 && *p != 0x7f) ||
                  ((n->line & 2) && (*p == '\n' || *p == '\t')));
    }
    free(s);

    r = yaml_get_u64(c, n, 1000000, &u);
    check_getter(r, e);
    if (r == 0)
        CHECK(n->kind == YAML_KIND_SCALAR && n->typed && u >= 1 && u <= 1000000);

    r = yaml_get_number(c, n, 1e6, &d);
    check_getter(r, e);
    if (r == 0)
        CHECK(n->kind == YAML_KIND_SCALAR && n->typed && isfinite(d) && d > 0 && d <= 1e6);

    r = yaml_get_bool(c, n, &b);
    check_getter(r, e);
    if (r == 0)
        CHECK(n->kind == YAML_KIND_SCALAR && n->typed);

    r = yaml_get_list(c, n, 4);
    check_getter(r, e);
    if (r == 0)
        CHECK(n->kind == YAML_KIND_SEQ && n->n <= 4);

    static const char *const keys[] = {"a", "b", "name", ""};
    const struct yaml_node *vals[4];
    r = yaml_get_fields(c, n, keys, 4, vals);
    check_getter(r, e);
    if (r == 0) {
        CHECK(n->kind == YAML_KIND_MAP);
        size_t found = 0;
        for (size_t k = 0; k < 4; k++)
            found += vals[k] != NULL;
        CHECK(found * 2 == n->n);
    }
}

/* Walks the tree, checks its shape and the getters; returns its node count. */
static size_t
walk(struct yaml_ctx *c, const struct yaml_node *n, unsigned depth, unsigned lines)
{
    size_t nodes = 1;

    CHECK(n->line >= 1 && n->line <= lines + 1); /* an empty last value: past the end */
    check_getters(c, n);
    if (n->kind == YAML_KIND_SCALAR) {
        CHECK(n->text && strlen(n->text) == n->len && n->n == 0);
        return 1;
    }
    CHECK(n->kind == YAML_KIND_SEQ || n->kind == YAML_KIND_MAP);
    CHECK(!n->text);
    CHECK(depth < limits.depth_max);
    if (n->kind == YAML_KIND_MAP) {
        CHECK(n->n % 2 == 0 && n->n <= 2 * limits.collection_max);
        for (size_t i = 0; i < n->n; i += 2) {
            const struct yaml_node *k = n->kids[i];
            CHECK(k->kind == YAML_KIND_SCALAR && strcmp(k->text, "<<"));
            for (size_t j = 0; j < i; j += 2)
                CHECK(n->kids[j]->len != k->len || memcmp(n->kids[j]->text, k->text, k->len));
        }
    } else
        CHECK(n->n <= limits.collection_max);
    for (size_t i = 0; i < n->n; i++) {
        size_t old = n->kind == YAML_KIND_MAP && i % 2 == 1 ? yaml_push_key(c, n->kids[i - 1]->text)
                                                            : yaml_push_index(c, i);
        CHECK(strlen(c->where) < sizeof(c->where));
        nodes += walk(c, n->kids[i], depth + 1, lines);
        yaml_pop(c, old);
        CHECK(strlen(c->where) == old);
    }
    return nodes;
}

static bool
same(const struct yaml_node *a, const struct yaml_node *b)
{
    if (a->kind != b->kind || a->line != b->line || a->typed != b->typed || a->n != b->n ||
        a->len != b->len || (a->text && memcmp(a->text, b->text, a->len)))
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!same(a->kids[i], b->kids[i]))
            return false;
    return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct yaml_node *root = NULL, *again = NULL;
    struct err e = {0};
    struct yaml_ctx c = {.file = "fuzz.yaml", .err = &e};

    if (size > 2 * limits.bytes_max)
        return 0;
    int r = yaml_read(&c, &limits, (const char *)data, size, &root);
    CHECK(r == 0 || r == -EINVAL || r == -EFBIG);
    CHECK((r == -EFBIG) == (size > limits.bytes_max));
    if (r < 0) {
        CHECK(root == NULL && e.errnum == -r);
        check_msg(&e, r == -EINVAL);
        return 0;
    }
    CHECK(c.where[0] == '\0' && !err_isset(&e));
    if (!root)
        return 0;
    /* libyaml also breaks lines at NEL (C2 85), LS and PS (E2 80 A8/A9):
     * count their last bytes too, an upper bound is enough; the implicit
     * empty value after a block scalar that ends the input is one further */
    unsigned lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || data[i] == '\r' || data[i] == 0x85 || data[i] == 0xa8 ||
                 data[i] == 0xa9;
    CHECK(walk(&c, root, 0, lines) <= limits.nodes_max);

    struct yaml_ctx c2 = {.file = "fuzz.yaml"};
    CHECK(yaml_read(&c2, &limits, (const char *)data, size, &again) == 0);
    CHECK(again && same(root, again));
    yaml_node_free(again);
    yaml_node_free(root);
    return 0;
}
