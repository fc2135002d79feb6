/*
 * test-yaml.c - the safe-YAML reader on its own: the trees it builds, each
 * limit at and past its bound, everything of YAML it refuses (anchors,
 * aliases, merge keys, tags, documents, duplicate and complex keys, NUL,
 * other encodings), each with its message and line, and the typed getters.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/yaml.h"
#include "util/buf.h"

static const struct yaml_limits small = {
        .bytes_max = 4096,
        .depth_max = 4,
        .nodes_max = 64,
        .collection_max = 8,
};

/* Reads len bytes of y under l, which must be accepted. */
static struct yaml_node *
read_ok(const struct yaml_limits *l, const char *y, size_t len)
{
    struct yaml_node *root = NULL;
    struct err e = {0};
    struct yaml_ctx c = {.file = "x.yaml", .err = &e};
    int r = yaml_read(&c, l, y, len, &root);
    if (r != 0)
        fail_msg("got %d '%s' for:\n%.200s", r, e.msg, y);
    return root;
}
#define GOOD(y) read_ok(&small, (y), strlen(y))

/* Reads len bytes of y under l, which must be refused with errnum and a
 * message that is "x.yaml:" followed by msg. */
static void
read_bad(const struct yaml_limits *l, const char *y, size_t len, int errnum, const char *msg)
{
    struct yaml_node *root = (struct yaml_node *)0x1;
    struct err e = {0};
    struct yaml_ctx c = {.file = "x.yaml", .err = &e};
    int r = yaml_read(&c, l, y, len, &root);
    if (r != -errnum)
        fail_msg("got %d '%s', not %d, for:\n%.200s", r, e.msg, -errnum, y);
    assert_ptr_equal(root, (struct yaml_node *)0x1); /* untouched */
    assert_int_equal(e.errnum, errnum);
    assert_true(strlen(e.msg) < ERR_MSG_MAX);
    assert_true(!strncmp(e.msg, "x.yaml:", 7));
    if (msg && strcmp(e.msg + 7, msg))
        fail_msg("message '%s', not 'x.yaml:%s'", e.msg, msg);
}
#define BAD(y, msg) read_bad(&small, (y), strlen(y), EINVAL, (msg))

/* Resets b to head, n times piece, then tail. */
static void
repeat(struct buf *b, const char *head, const char *piece, int n, const char *tail)
{
    buf_reset(b);
    assert_int_equal(buf_puts(b, head), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(buf_puts(b, piece), 0);
    assert_int_equal(buf_puts(b, tail), 0);
}

static void
test_tree(void **state)
{
    (void)state;
    struct yaml_node *n = GOOD("a: 1\n"
                               "b: [x, \"y\", 'z']\n"
                               "c:\n"
                               "  - ~\n"
                               "  - !!str 5\n"
                               "  - !!int \"6\"\n");
    assert_int_equal(n->kind, YAML_KIND_MAP);
    assert_int_equal(n->n, 6);
    assert_string_equal(n->kids[0]->text, "a");
    const struct yaml_node *one = n->kids[1];
    assert_int_equal(one->kind, YAML_KIND_SCALAR);
    assert_string_equal(one->text, "1");
    assert_true(one->typed);
    assert_int_equal(one->line, 1);
    const struct yaml_node *b = n->kids[3];
    assert_int_equal(b->kind, YAML_KIND_SEQ);
    assert_int_equal(b->n, 3);
    assert_true(b->kids[0]->typed);  /* plain */
    assert_false(b->kids[1]->typed); /* double-quoted */
    assert_false(b->kids[2]->typed); /* single-quoted */
    const struct yaml_node *c = n->kids[5];
    assert_int_equal(c->line, 4);
    assert_true(yaml_is_null(c->kids[0]));
    assert_false(c->kids[1]->typed); /* !!str makes a plain scalar a string */
    assert_true(c->kids[2]->typed);  /* !!int makes a quoted one typed */
    assert_int_equal(c->kids[2]->line, 6);
    yaml_node_free(n);

    /* an empty document, a comment, a byte order mark, CRLF */
    assert_null(read_ok(&small, NULL, 0));
    assert_null(GOOD(""));
    assert_null(GOOD("# nothing\n"));
    n = GOOD("---\n...\n"); /* an explicit empty document is a null */
    assert_true(yaml_is_null(n));
    yaml_node_free(n);
    n = GOOD("\xef\xbb\xbf"
             "a: b\r\nc: d\r\n");
    assert_int_equal(n->n, 4);
    assert_int_equal(n->kids[2]->line, 2);
    yaml_node_free(n);

    /* block scalars and escapes keep their text, byte for byte */
    n = GOOD("a: |\n  one\n  two\nb: \"\\t\\u00e9\"\n");
    assert_string_equal(n->kids[1]->text, "one\ntwo\n");
    assert_string_equal(n->kids[3]->text, "\t\xc3\xa9");
    yaml_node_free(n);
    yaml_node_free(NULL);
}

static void
test_size(void **state)
{
    (void)state;
    struct yaml_limits l = small;
    char y[128];

    l.bytes_max = 64;
    memset(y, ' ', sizeof(y));
    memcpy(y, "a: b", 4);
    yaml_node_free(read_ok(&l, y, 64));
    read_bad(&l, y, 65, EFBIG, " larger than 64 bytes");

    /* a NUL byte anywhere, named by its line, before any YAML is read */
    read_bad(&small, "a: b\nc: d\0e\n", 12, EINVAL, "2: NUL byte in the file");
    read_bad(&small, "\0", 1, EINVAL, "1: NUL byte in the file");
    BAD("a: \"x\\0y\"\n", "1: NUL character in a string");
}

static void
test_depth(void **state)
{
    (void)state;
    yaml_node_free(GOOD("[[[[1]]]]"));
    BAD("[[[[[1]]]]]", "1: nested deeper than 4 levels");
    yaml_node_free(GOOD("a:\n b:\n  c:\n   d: 1\n"));
    BAD("a:\n b:\n  c:\n   d:\n    e: 1\n", "5: nested deeper than 4 levels");
    BAD("a: {b: [c, {d: [e]}]}\n", "1: nested deeper than 4 levels");

    /* a depth_max past the ceiling counts as YAML_DEPTH_MAX: the reader's
     * stack is sized for it */
    struct yaml_limits l = {
            .bytes_max = 100000, .depth_max = 100000, .nodes_max = 100000, .collection_max = 8};
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    repeat(&b, "", "[", YAML_DEPTH_MAX, "");
    for (int i = 0; i < YAML_DEPTH_MAX; i++)
        assert_int_equal(buf_putc(&b, ']'), 0);
    yaml_node_free(read_ok(&l, b.data, b.len));
    repeat(&b, "", "[", 10000, "");
    read_bad(&l, b.data, b.len, EINVAL, "1: nested deeper than 64 levels");
    buf_done(&b);
}

static void
test_counts(void **state)
{
    (void)state;
    /* items in one collection: 8 of each, then one more */
    yaml_node_free(GOOD("[1, 2, 3, 4, 5, 6, 7, 8]"));
    BAD("[1, 2, 3, 4, 5, 6, 7, 8, 9]", "1: more than 8 items in one sequence");
    yaml_node_free(GOOD("{a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}"));
    BAD("a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf: 6\ng: 7\nh: 8\ni: 9\n",
        "9: more than 8 items in one mapping");

    /* nodes: keys, values and collections all count */
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    repeat(&b, "[", "[1, 2, 3, 4, 5, 6, 7, 8],", 7, "]");
    yaml_node_free(read_ok(&small, b.data, b.len)); /* 1 + 7 * 9 = 64 nodes */
    repeat(&b, "[", "[1, 2, 3, 4, 5, 6, 7, 8],", 7, "x]");
    read_bad(&small, b.data, b.len, EINVAL, "1: more than 64 YAML nodes");
    buf_done(&b);
}

static void
test_anchors_aliases(void **state)
{
    (void)state;
    BAD("a: &x 1\n", "1: YAML anchors ('&') are not supported");
    BAD("a: &x [1]\n", "1: YAML anchors ('&') are not supported");
    BAD("a: &x {b: 1}\n", "1: YAML anchors ('&') are not supported");
    BAD("a: 1\nb: *x\n", "2: YAML aliases ('*') are not supported");
    /* the billion laughs: refused at the first anchor, nothing expanded */
    BAD("a: [lol]\n"
        "b: &b [lol, lol, lol, lol, lol, lol, lol, lol]\n"
        "c: [*b, *b, *b, *b, *b, *b, *b, *b]\n",
        "2: YAML anchors ('&') are not supported");
    BAD("base: {a: 1}\nchild:\n  <<: {a: 2}\n", "3: merge keys ('<<') are not supported");
}

static void
test_tags(void **state)
{
    (void)state;
    struct yaml_node *n = GOOD("--- !!map\n"
                               "a: !!str x\n"
                               "b: !!int 1\n"
                               "c: !!float 1.5\n"
                               "d: !!bool true\n"
                               "e: !!null ~\n"
                               "f: !!seq [1]\n"
                               "g: !<tag:yaml.org,2002:str> y\n");
    assert_int_equal(n->n, 14);
    yaml_node_free(n);
    BAD("a: !custom x\n", "1: YAML tag '!custom' is not supported");
    BAD("a: !<tag:example.com,2000:x> y\n",
        "1: YAML tag 'tag:example.com,2000:x' is not supported");
    BAD("a: !!binary aGk=\n", "1: YAML tag 'tag:yaml.org,2002:binary' is not supported");
    BAD("a: !!map x\n", "1: YAML tag 'tag:yaml.org,2002:map' is not supported");
    BAD("a: !!str [x]\n", "1: YAML tag 'tag:yaml.org,2002:str' is not supported");
    BAD("a: !!set {x}\n", "1: YAML tag 'tag:yaml.org,2002:set' is not supported");
    /* a %TAG directive cannot make a custom tag look standard */
    BAD("%TAG !e! tag:example.com,2000:\n---\na: !e!x y\n",
        "3: YAML tag 'tag:example.com,2000:x' is not supported");
    /* control characters in a tag are not echoed */
    BAD("a: !<x%07y> z\n", "1: YAML tag 'x?y' is not supported");
}

static void
test_keys_documents(void **state)
{
    (void)state;
    BAD("a: 1\nb: 2\na: 3\n", "3: duplicate key 'a' (first on line 1)");
    BAD("a: 1\n\"a\": 2\n", "2: duplicate key 'a' (first on line 1)"); /* quoting aside */
    BAD("{a: 1, a: 1}", "1: duplicate key 'a' (first on line 1)");
    /* a duplicate under a key names where it is */
    BAD("x:\n  - {k: 1, k: 2}\n", "2: duplicate key 'k' (first on line 2)");
    yaml_node_free(GOOD("a: 1\nb: {a: 2}\n")); /* the same key in two mappings */
    BAD("? [a, b]\n: 1\n", "1: mapping keys must be plain strings");
    BAD("{a: 1}: 2\n", "1: mapping keys must be plain strings");
    BAD("---\na: 1\n---\nb: 2\n", "3: more than one YAML document");
    BAD("a: 1\n...\n---\nb: 2\n", "3: more than one YAML document");
}

static void
test_invalid(void **state)
{
    (void)state;
    struct err e = {0};
    struct yaml_ctx c = {.file = "x.yaml", .err = &e};
    struct yaml_node *n = NULL;

    BAD("a: [1, 2\n", NULL);
    BAD("a: b: c\n", "1: invalid YAML: mapping values are not allowed in this context");
    BAD("a:\n\tb: 1\n", NULL); /* a tab is no indentation */
    BAD("a: \xff\xfe\n", "1: invalid YAML: invalid leading UTF-8 octet");
    read_bad(&small,
             "\xff\xfe"
             "a\0:\0 \0"
             "1\0",
             10, EINVAL, "1: NUL byte in the file");
    read_bad(&small, "\xfe\xff\0a", 4, EINVAL, "1: NUL byte in the file");
    BAD("\xfe\xff", NULL); /* a UTF-16 byte order mark alone is no UTF-8 */
    /* the innermost error wins: a second read keeps the first message */
    assert_int_equal(yaml_read(&c, &small, "&a x", 4, &n), -EINVAL);
    assert_int_equal(yaml_read(&c, &small, "*a", 2, &n), -EINVAL);
    assert_string_equal(e.msg, "x.yaml:1: YAML anchors ('&') are not supported");
    /* without a struct err the refusal is only the return value */
    c.err = NULL;
    assert_int_equal(yaml_read(&c, &small, "*a", 2, &n), -EINVAL);
    assert_null(n);
}

/* Checks a getter's result r and message against msg (after
 * "x.yaml:1: v: "): failure with it, or success when msg is NULL. */
static void
getter_result(int r, const struct err *e, const char *y, const char *msg)
{
    char want[ERR_MSG_MAX];

    if (!msg) {
        if (r != 0)
            fail_msg("got %d '%s' for '%s'", r, e->msg, y);
        return;
    }
    (void)snprintf(want, sizeof(want), "x.yaml:1: v: %s", msg);
    assert_int_equal(r, -EINVAL);
    if (strcmp(e->msg, want))
        fail_msg("'%s' for '%s', not '%s'", e->msg, y, want);
}

/* Runs getter expression g on n, the value of "v: <y>", with c the context. */
#define GETTER(y, g, msg)                                    \
    do {                                                     \
        struct err e_ = {0};                                 \
        struct yaml_ctx c_ = {.file = "x.yaml", .err = &e_}; \
        struct yaml_node *root_ = GOOD("v: " y "\n");        \
        const struct yaml_node *n = root_->kids[1];          \
        struct yaml_ctx *c = &c_;                            \
        size_t old_ = yaml_push_key(c, "v");                 \
        int r_ = (g);                                        \
        yaml_pop(c, old_);                                   \
        getter_result(r_, &e_, y, msg);                      \
        yaml_node_free(root_);                               \
    } while (0)
#define NOMSG ((const char *)NULL)

static void
test_get_str(void **state)
{
    (void)state;
    _cleanup_free_ char *s = NULL;

    GETTER("hello", yaml_get_str(c, n, 5, false, false, &s), NOMSG);
    assert_string_equal(s, "hello");
    GETTER("\"\"", yaml_get_str(c, n, 5, true, false, &s), NOMSG);
    assert_string_equal(s, "");
    GETTER("\"\"", yaml_get_str(c, n, 5, false, false, &s), "must not be empty");
    GETTER("hello!", yaml_get_str(c, n, 5, false, false, &s), "longer than 5 bytes");
    GETTER("~", yaml_get_str(c, n, 5, true, false, &s), "must be a string, not null");
    GETTER("[a]", yaml_get_str(c, n, 5, true, false, &s), "must be a string, not a list");
    GETTER("{a: b}", yaml_get_str(c, n, 5, true, false, &s), "must be a string, not a mapping");
    GETTER("\"a\\tb\"", yaml_get_str(c, n, 5, true, false, &s), "control character 0x09 in string");
    GETTER("\"a\\tb\\nc\"", yaml_get_str(c, n, 5, true, true, &s), NOMSG);
    GETTER("\"a\\rb\"", yaml_get_str(c, n, 5, true, true, &s), "control character 0x0d in string");
    GETTER("\"a\\x7fb\"", yaml_get_str(c, n, 5, true, true, &s),
           "control character 0x7f in string");
    GETTER("\"null\"", yaml_get_str(c, n, 5, true, false, &s), NOMSG); /* quoted: a string */
    assert_string_equal(s, "null");
}

static void
test_get_numbers(void **state)
{
    (void)state;
    uint64_t u = 0;
    double d = 0;
    bool b = false;

    GETTER("42", yaml_get_u64(c, n, 100, &u), NOMSG);
    assert_int_equal(u, 42);
    GETTER("100", yaml_get_u64(c, n, 100, &u), NOMSG);
    GETTER("101", yaml_get_u64(c, n, 100, &u), "'101' is not an integer in 1..100");
    GETTER("0", yaml_get_u64(c, n, 100, &u), "'0' is not an integer in 1..100");
    GETTER("-1", yaml_get_u64(c, n, 100, &u), "'-1' is not an integer in 1..100");
    GETTER("0x10", yaml_get_u64(c, n, 100, &u), "'0x10' is not an integer in 1..100");
    GETTER("99999999999999999999999", yaml_get_u64(c, n, UINT64_MAX, &u),
           "'99999999999999999999999' is not an integer in 1..18446744073709551615");
    GETTER("\"42\"", yaml_get_u64(c, n, 100, &u),
           "must be a positive integer, not a quoted string");
    GETTER("~", yaml_get_u64(c, n, 100, &u), "must be a positive integer, not null");
    GETTER("[1]", yaml_get_u64(c, n, 100, &u), "must be a positive integer, not a list");

    GETTER("1.5", yaml_get_number(c, n, 2, &d), NOMSG);
    assert_true(d == 1.5);
    GETTER(".5e1", yaml_get_number(c, n, 10, &d), NOMSG);
    assert_true(d == 5);
    GETTER("3", yaml_get_number(c, n, 2, &d), "'3' is not a number greater than 0 and at most 2");
    GETTER("0", yaml_get_number(c, n, 2, &d), "'0' is not a number greater than 0 and at most 2");
    GETTER(".inf", yaml_get_number(c, n, 2, &d),
           "'.inf' is not a number greater than 0 and at most 2");
    GETTER(".nan", yaml_get_number(c, n, 2, &d),
           "'.nan' is not a number greater than 0 and at most 2");
    GETTER("0x1", yaml_get_number(c, n, 2, &d),
           "'0x1' is not a number greater than 0 and at most 2");
    GETTER("1e999", yaml_get_number(c, n, 2, &d),
           "'1e999' is not a number greater than 0 and at most 2");
    GETTER("'1'", yaml_get_number(c, n, 2, &d), "must be a number, not a quoted string");

    GETTER("true", yaml_get_bool(c, n, &b), NOMSG);
    assert_true(b);
    GETTER("FALSE", yaml_get_bool(c, n, &b), NOMSG);
    assert_false(b);
    GETTER("yes", yaml_get_bool(c, n, &b), "must be true or false"); /* YAML 1.1 only */
    GETTER("\"true\"", yaml_get_bool(c, n, &b), "must be true or false");
    GETTER("[true]", yaml_get_bool(c, n, &b), "must be true or false");
}

static void
test_get_collections(void **state)
{
    (void)state;
    static const char *const keys[] = {"a", "b"};
    const struct yaml_node *vals[2];

    GETTER("{b: 1}", yaml_get_fields(c, n, keys, 2, vals), NOMSG);
    GETTER("{a: 1, c: 2}", yaml_get_fields(c, n, keys, 2, vals), "unknown key 'c'");
    GETTER("[a]", yaml_get_fields(c, n, keys, 2, vals), "must be a mapping, not a list");
    GETTER("~", yaml_get_fields(c, n, keys, 2, vals), "must be a mapping, not null");
    GETTER("[1, 2]", yaml_get_list(c, n, 2), NOMSG);
    GETTER("[1, 2, 3]", yaml_get_list(c, n, 2), "more than 2 entries");
    GETTER("x", yaml_get_list(c, n, 2), "must be a list, not a scalar");

    /* what lands in vals */
    struct yaml_node *root = GOOD("{b: 1}");
    struct yaml_ctx ctx = {.file = "x.yaml"};
    assert_int_equal(yaml_get_fields(&ctx, root, keys, 2, vals), 0);
    assert_null(vals[0]);
    assert_string_equal(vals[1]->text, "1");
    yaml_node_free(root);
}

static void
test_where(void **state)
{
    (void)state;
    struct err e = {0};
    struct yaml_ctx c = {.file = "x.yaml", .err = &e};
    char longkey[300];

    size_t a = yaml_push_key(&c, "steps");
    size_t b = yaml_push_index(&c, 3);
    size_t k = yaml_push_key(&c, "env\x01");
    assert_string_equal(c.where, "steps[3].env?");
    yaml_pop(&c, k);
    assert_string_equal(c.where, "steps[3]");
    yaml_pop(&c, b);
    yaml_pop(&c, a);
    assert_string_equal(c.where, "");

    /* long keys are cut for the message, and where never overflows */
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    for (int i = 0; i < 20; i++) {
        (void)yaml_push_key(&c, longkey);
        (void)yaml_push_index(&c, SIZE_MAX);
        assert_true(strlen(c.where) < sizeof(c.where));
    }
    assert_int_equal(yaml_fail_at(&c, 7, EINVAL, "%s", longkey), -EINVAL);
    assert_true(strlen(e.msg) < ERR_MSG_MAX);
    assert_true(!strncmp(e.msg, "x.yaml:7: kkkk", 14));

    char sb[64];
    assert_string_equal(yaml_shown("a\tb\x80", sb, sizeof(sb)), "a?b?");
    assert_string_equal(yaml_shown(longkey, sb, sizeof(sb)),
                        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...");
    char tiny[8];
    assert_string_equal(yaml_shown("abcdefgh", tiny, sizeof(tiny)), "abcd...");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_tree),
            cmocka_unit_test(test_size),
            cmocka_unit_test(test_depth),
            cmocka_unit_test(test_counts),
            cmocka_unit_test(test_anchors_aliases),
            cmocka_unit_test(test_tags),
            cmocka_unit_test(test_keys_documents),
            cmocka_unit_test(test_invalid),
            cmocka_unit_test(test_get_str),
            cmocka_unit_test(test_get_numbers),
            cmocka_unit_test(test_get_collections),
            cmocka_unit_test(test_where),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
