/*
 * test-e2b-list.c - E2B's GET /sandboxes without a daemon. Which rows:
 * state, startedAfter, template and metadata filters (the metadata as the
 * SDKs encode it), the caller's scope, rows not ready. Which page: limit,
 * order and nextToken decoding (strict: what this server gives, nothing
 * else), the order (start time, then id; descending by default), pages
 * that walk a listing exactly once, and a token that stays valid when the
 * row it names was killed in between.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/e2b/e2b-internal.h"
#include "template/set.h"
#include "util/timeutil.h"

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

static void
test_filter(void **state)
{
    struct template_set *ts = NULL;
    struct err err = {0};
    struct e2b_filter f;
    struct api_scope mine = {0}, other = {0};
    (void)state;

    assert_int_equal(template_set_load(NULL, NULL, &ts, &err), 0);
    const struct template *base = template_set_find(ts, "base");
    assert_non_null(base);
    json_t *m1 = json_pack("{s:s, s:s}", "user", "ann lee", "k&=", "v%");
    json_t *m2 = json_pack("{s:s}", "user", "bob");
    struct entry live = {.state = E_READY, .tmpl = base, .metadata = m1, .scope = &mine};
    struct entry frozen = {.state = E_READY, .tmpl = base, .metadata = m2, .paused = true};
    struct entry creating = {.state = E_CREATING, .tmpl = base, .metadata = m1};
    struct e2b_cold cold = {.t = base, .meta = m2, .scope = &other};
    struct e2b_item rl = {.created = 2000, .id = "l", .e = &live},
                    rf = {.created = 3000, .id = "f", .e = &frozen},
                    rc = {.created = 1000, .id = "c", .e = &creating},
                    ro = {.created = 4000, .id = "o", .c = &cold};

    /* No filter: every ready row and every cold one, not those creating. */
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, NULL, NULL, &f, &err), 0);
    assert_true(e2b_filter_matches(ts, &rl, &f, NULL));
    assert_true(e2b_filter_matches(ts, &rf, &f, NULL));
    assert_true(e2b_filter_matches(ts, &ro, &f, NULL));
    assert_false(e2b_filter_matches(ts, &rc, &f, NULL));
    /* A scoped key sees its own rows only. */
    assert_true(e2b_filter_matches(ts, &rl, &f, &mine));
    assert_false(e2b_filter_matches(ts, &rf, &f, &mine));
    assert_false(e2b_filter_matches(ts, &ro, &f, &mine));
    assert_true(e2b_filter_matches(ts, &ro, &f, &other));

    /* state: paused covers frozen and cold rows. */
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode("paused", NULL, NULL, NULL, &f, &err), 0);
    assert_false(e2b_filter_matches(ts, &rl, &f, NULL));
    assert_true(e2b_filter_matches(ts, &rf, &f, NULL));
    assert_true(e2b_filter_matches(ts, &ro, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode("running,paused", NULL, NULL, NULL, &f, &err), 0);
    assert_true(e2b_filter_matches(ts, &rl, &f, NULL) && e2b_filter_matches(ts, &rf, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode("", NULL, NULL, NULL, &f, &err), 0);
    assert_false(e2b_filter_matches(ts, &rl, &f, NULL) || e2b_filter_matches(ts, &rf, &f, NULL));

    /* startedAfter: rows started at or after it. */
    char t[40];
    format_rfc3339(3000, t, sizeof(t));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, t, NULL, NULL, &f, &err), 0);
    assert_false(e2b_filter_matches(ts, &rl, &f, NULL));
    assert_true(e2b_filter_matches(ts, &rf, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, "yesterday", NULL, NULL, &f, &err), -EINVAL);
    assert_string_equal(err.msg, "'startedAfter' must be an RFC 3339 time");

    /* template: by name (or alias); an unknown one matches nothing. */
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, "base", NULL, &f, &err), 0);
    assert_true(e2b_filter_matches(ts, &rl, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, "nope", NULL, &f, &err), 0);
    assert_false(e2b_filter_matches(ts, &rl, &f, NULL));

    /* metadata: every pair must match; form-decoded, then percent-decoded
     * once more ("ann lee" arrives as ann%2520lee, or as ann+lee). */
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, NULL, "user=ann%2520lee", &f, &err), 0);
    assert_true(e2b_filter_matches(ts, &rl, &f, NULL));
    assert_false(e2b_filter_matches(ts, &rf, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(
            e2b_filter_decode(NULL, NULL, NULL, "user=ann+lee&k%2526%253D=v%2525", &f, &err), 0);
    assert_int_equal(f.meta.n, 2);
    assert_true(e2b_filter_matches(ts, &rl, &f, NULL));
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, NULL, "user=bob&k=x", &f, &err), 0);
    assert_false(e2b_filter_matches(ts, &rf, &f, NULL)); /* no k */
    err = (struct err){0};
    memset(&f, 0, sizeof(f));
    assert_int_equal(e2b_filter_decode(NULL, NULL, NULL, "user", &f, &err), -EINVAL);
    assert_string_equal(err.msg, "'metadata' must be key=value pairs");

    json_decref(m1);
    json_decref(m2);
    template_set_free(ts);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_filter),
            cmocka_unit_test(test_decode),
            cmocka_unit_test(test_pages),
            cmocka_unit_test(test_token_outlives_its_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
