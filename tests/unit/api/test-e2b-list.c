/*
 * test-e2b-list.c - the pages of E2B's GET /sandboxes: limit, order and
 * nextToken decoding (strict: what this server gives, nothing else), the
 * order (start time, then id; descending by default), pages that walk a
 * listing exactly once, and a token that stays valid when the row it
 * names was killed in between.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/e2b/e2b-internal.h"

static void
test_decode(void **state)
{
    struct e2b_page p;
    struct err err = {0};
    (void)state;

    assert_int_equal(e2b_page_decode(NULL, NULL, NULL, &p, &err), 0);
    assert_int_equal(p.limit, E2B_LIST_MAX);
    assert_false(p.asc);
    assert_false(p.after);
    assert_int_equal(e2b_page_decode("1", "ASC", "", &p, &err), 0);
    assert_int_equal(p.limit, 1);
    assert_true(p.asc);
    assert_false(p.after); /* an empty token is none */
    assert_int_equal(e2b_page_decode("100", "desc", "1700000000123.abc09", &p, &err), 0);
    assert_false(p.asc);
    assert_true(p.after);
    assert_int_equal(p.after_ms, 1700000000123ull);
    assert_string_equal(p.after_id, "abc09");

    static const char *const bad_limit[] = {
            "", "0", "101", "-1", "+5", " 5", "5x", "1e2", "99999999999999999999999"};
    for (size_t i = 0; i < ELEMENTSOF(bad_limit); i++) {
        err = (struct err){0};
        assert_int_equal(e2b_page_decode(bad_limit[i], NULL, NULL, &p, &err), -EINVAL);
        assert_string_equal(err.msg, "'limit' must be between 1 and 100");
    }
    static const char *const bad_order[] = {"", "up", "ascending"};
    for (size_t i = 0; i < ELEMENTSOF(bad_order); i++) {
        err = (struct err){0};
        assert_int_equal(e2b_page_decode(NULL, bad_order[i], NULL, &p, &err), -EINVAL);
        assert_string_equal(err.msg, "'order' must be asc or desc");
    }
    static const char *const bad_token[] = {
            "x",
            "12",
            "12.",
            ".abc",
            "-1.abc",
            "+1.abc",
            " 1.abc",
            "1.A",
            "1.a-",
            "1.abc def",
            "1.abc\n",
            "1.a.b",
            "99999999999999999999.a",
            "1.abcdefghijklmnopqrstu", /* 21 > API_ID_LEN */
    };
    for (size_t i = 0; i < ELEMENTSOF(bad_token); i++) {
        err = (struct err){0};
        if (e2b_page_decode(NULL, NULL, bad_token[i], &p, &err) != -EINVAL)
            fail_msg("token '%s' was taken", bad_token[i]);
        assert_string_equal(err.msg, "'nextToken' is not a token this server gave");
    }
}

/* Walks a listing page by page through the tokens it hands out. */
static size_t
walk(struct e2b_item *rows, size_t n, const char *order, const char *limit, char *seen,
     size_t seensz)
{
    char tok[E2B_PAGE_TOKEN_MAX] = "";
    size_t pages = 0;
    struct err err = {0};
    seen[0] = '\0';
    for (;;) {
        struct e2b_page p;
        size_t start, end;
        assert_int_equal(e2b_page_decode(limit, order, tok, &p, &err), 0);
        e2b_page_cut(rows, n, &p, &start, &end);
        assert_true(end - start <= p.limit);
        for (size_t i = start; i < end; i++) {
            size_t l = strlen(seen);
            (void)snprintf(seen + l, seensz - l, "%s ", rows[i].id);
        }
        pages++;
        if (end == n)
            return pages;
        e2b_page_token(&rows[end - 1], tok, sizeof(tok));
    }
}

static void
test_pages(void **state)
{
    struct e2b_item rows[] = {
            {.created = 3000, .id = "c"},  {.created = 1000, .id = "a"},
            {.created = 2000, .id = "b2"}, {.created = 2000, .id = "b1"},
            {.created = 4000, .id = "d"},
    };
    char seen[256];
    (void)state;

    assert_int_equal(walk(rows, ELEMENTSOF(rows), NULL, "2", seen, sizeof(seen)), 3);
    assert_string_equal(seen, "d c b2 b1 a ");
    assert_int_equal(walk(rows, ELEMENTSOF(rows), "asc", "2", seen, sizeof(seen)), 3);
    assert_string_equal(seen, "a b1 b2 c d ");
    assert_int_equal(walk(rows, ELEMENTSOF(rows), "asc", "5", seen, sizeof(seen)), 1);
    assert_int_equal(walk(rows, ELEMENTSOF(rows), "asc", "1", seen, sizeof(seen)), 5);
    assert_string_equal(seen, "a b1 b2 c d ");
    assert_int_equal(walk(rows, 0, NULL, NULL, seen, sizeof(seen)), 1);
    assert_string_equal(seen, "");
}

static void
test_token_outlives_its_row(void **state)
{
    struct e2b_item rows[] = {
            {.created = 1000, .id = "a"},
            {.created = 2000, .id = "b"},
            {.created = 3000, .id = "c"},
    };
    struct e2b_page p;
    struct err err = {0};
    char tok[E2B_PAGE_TOKEN_MAX];
    size_t start, end;
    (void)state;

    assert_int_equal(e2b_page_decode("1", "asc", NULL, &p, &err), 0);
    e2b_page_cut(rows, 3, &p, &start, &end);
    assert_int_equal(end - start, 1);
    e2b_page_token(&rows[0], tok, sizeof(tok));
    assert_string_equal(tok, "1000.a");
    /* "a" is killed; the next page still starts at "b". */
    rows[0] = rows[2];
    assert_int_equal(e2b_page_decode("1", "asc", tok, &p, &err), 0);
    e2b_page_cut(rows, 2, &p, &start, &end);
    assert_int_equal(end - start, 1);
    assert_string_equal(rows[start].id, "b");
    /* A token past every row: an empty page. */
    assert_int_equal(e2b_page_decode(NULL, "asc", "9000.z", &p, &err), 0);
    e2b_page_cut(rows, 2, &p, &start, &end);
    assert_int_equal(start, end);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_decode),
            cmocka_unit_test(test_pages),
            cmocka_unit_test(test_token_outlives_its_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
