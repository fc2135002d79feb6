/*
 * test-ndjson.c - NDJSON line splitting across arbitrary chunk boundaries.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client-internal.h"

/* Collects lines as "line1|line2|..." and counts them. */
struct collect {
    struct buf joined;
    size_t lines;
    size_t fail_at; /* return -EIO for this line number (1-based); 0 = never */
};

static int
on_line(const char *line, size_t len, void *userdata)
{
    struct collect *c = userdata;

    assert_non_null(line);
    assert_true(len > 0);
    assert_null(memchr(line, '\n', len));
    c->lines++;
    if (c->fail_at && c->lines == c->fail_at)
        return -EIO;
    if (c->joined.len)
        assert_int_equal(buf_putc(&c->joined, '|'), 0);
    assert_int_equal(buf_put(&c->joined, line, len), 0);
    return 0;
}

static void
collect_init(struct collect *c)
{
    buf_init(&c->joined, BUF_UNLIMITED);
    c->lines = 0;
    c->fail_at = 0;
}

/* Feeds text in pieces cut at the given positions (ascending) and finishes. */
static void
feed_cut(const char *text, size_t len, const size_t *cuts, size_t ncuts, struct collect *c)
{
    struct ndjson nd;
    size_t pos = 0;

    ndjson_init(&nd, 1024);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        assert_int_equal(ndjson_feed(&nd, text + pos, end - pos, on_line, c), 0);
        pos = end;
    }
    assert_int_equal(ndjson_finish(&nd, on_line, c), 0);
    ndjson_done(&nd);
}

static const char sample[] = "{\"pid\":2}\n"
                             "{\"stdout\":\"aGVsbG8K\",\"offset\":0}\n"
                             "{\"stderr\":\"ZXJyCg==\",\"offset\":6}\n"
                             "{\"exit_code\":3,\"pid\":2}\n";
static const char sample_joined[] = "{\"pid\":2}|"
                                    "{\"stdout\":\"aGVsbG8K\",\"offset\":0}|"
                                    "{\"stderr\":\"ZXJyCg==\",\"offset\":6}|"
                                    "{\"exit_code\":3,\"pid\":2}";

static void
test_one_chunk(void **state)
{
    struct collect c;
    (void)state;

    collect_init(&c);
    feed_cut(sample, sizeof(sample) - 1, NULL, 0, &c);
    assert_int_equal(c.lines, 4);
    assert_string_equal(c.joined.data, sample_joined);
    buf_done(&c.joined);
}

/* Every way of cutting the stream into two and three pieces gives the same lines. */
static void
test_every_split(void **state)
{
    size_t len = sizeof(sample) - 1;
    (void)state;

    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            struct collect c;
            size_t cuts[2] = {a, b};
            collect_init(&c);
            feed_cut(sample, len, cuts, 2, &c);
            assert_int_equal(c.lines, 4);
            assert_string_equal(c.joined.data, sample_joined);
            buf_done(&c.joined);
        }
    }
}

static void
test_byte_by_byte(void **state)
{
    size_t len = sizeof(sample) - 1;
    size_t cuts[sizeof(sample)];
    struct collect c;
    (void)state;

    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    collect_init(&c);
    feed_cut(sample, len, cuts, len - 1, &c);
    assert_int_equal(c.lines, 4);
    assert_string_equal(c.joined.data, sample_joined);
    buf_done(&c.joined);
}

/* Long lines fed in random pieces, as libcurl does with big output lines. */
static void
test_random_chunks_long_lines(void **state)
{
    struct buf text, expect;
    struct ndjson nd;
    struct collect c;
    (void)state;

    srand(12345);
    buf_init(&text, BUF_UNLIMITED);
    buf_init(&expect, BUF_UNLIMITED);
    for (int l = 0; l < 50; l++) {
        size_t n = 1 + (size_t)(rand() % 70000);
        if (expect.len)
            assert_int_equal(buf_putc(&expect, '|'), 0);
        for (size_t i = 0; i < n; i++) {
            char ch = (char)('a' + (l + (int)i) % 26);
            assert_int_equal(buf_putc(&text, ch), 0);
            assert_int_equal(buf_putc(&expect, ch), 0);
        }
        assert_int_equal(buf_putc(&text, '\n'), 0);
    }
    for (int round = 0; round < 20; round++) {
        collect_init(&c);
        ndjson_init(&nd, 70000);
        for (size_t pos = 0; pos < text.len;) {
            size_t n = 1 + (size_t)(rand() % 20000);
            if (n > text.len - pos)
                n = text.len - pos;
            assert_int_equal(ndjson_feed(&nd, text.data + pos, n, on_line, &c), 0);
            pos += n;
        }
        assert_int_equal(ndjson_finish(&nd, on_line, &c), 0);
        assert_int_equal(c.lines, 50);
        assert_int_equal(c.joined.len, expect.len);
        assert_memory_equal(c.joined.data, expect.data, expect.len);
        ndjson_done(&nd);
        buf_done(&c.joined);
    }
    buf_done(&text);
    buf_done(&expect);
}

static void
test_crlf_and_empty_lines(void **state)
{
    static const char text[] = "\n\r\na\r\n\nb\n\n";
    struct collect c;
    (void)state;

    collect_init(&c);
    feed_cut(text, sizeof(text) - 1, NULL, 0, &c);
    assert_int_equal(c.lines, 2);
    assert_string_equal(c.joined.data, "a|b");
    buf_done(&c.joined);
}

static void
test_last_line_without_newline(void **state)
{
    static const char text[] = "a\nlast";
    size_t cuts[] = {3};
    struct collect c;
    (void)state;

    collect_init(&c);
    feed_cut(text, sizeof(text) - 1, cuts, 1, &c);
    assert_int_equal(c.lines, 2);
    assert_string_equal(c.joined.data, "a|last");
    buf_done(&c.joined);
}

static void
test_line_limit(void **state)
{
    struct ndjson nd;
    struct collect c;
    (void)state;

    /* Exactly max is fine, in one piece or in two. */
    collect_init(&c);
    ndjson_init(&nd, 4);
    assert_int_equal(ndjson_feed(&nd, "abcd\n", 5, on_line, &c), 0);
    assert_int_equal(ndjson_feed(&nd, "ab", 2, on_line, &c), 0);
    assert_int_equal(ndjson_feed(&nd, "cd\n", 3, on_line, &c), 0);
    assert_string_equal(c.joined.data, "abcd|abcd");
    /* One more byte is refused, whether the '\n' is there or not yet. */
    assert_int_equal(ndjson_feed(&nd, "abcde\n", 6, on_line, &c), -EFBIG);
    ndjson_done(&nd);
    ndjson_init(&nd, 4);
    assert_int_equal(ndjson_feed(&nd, "abc", 3, on_line, &c), 0);
    assert_int_equal(ndjson_feed(&nd, "de", 2, on_line, &c), -EFBIG);
    ndjson_done(&nd);
    ndjson_init(&nd, 4);
    assert_int_equal(ndjson_feed(&nd, "abc", 3, on_line, &c), 0);
    assert_int_equal(ndjson_feed(&nd, "de\n", 3, on_line, &c), -EFBIG);
    ndjson_done(&nd);
    buf_done(&c.joined);
}

static void
test_callback_error_stops(void **state)
{
    struct ndjson nd;
    struct collect c;
    (void)state;

    collect_init(&c);
    c.fail_at = 2;
    ndjson_init(&nd, 64);
    assert_int_equal(ndjson_feed(&nd, "a\nb\nc\n", 6, on_line, &c), -EIO);
    assert_int_equal(c.lines, 2);
    assert_string_equal(c.joined.data, "a");
    ndjson_done(&nd);
    buf_done(&c.joined);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_one_chunk),
            cmocka_unit_test(test_every_split),
            cmocka_unit_test(test_byte_by_byte),
            cmocka_unit_test(test_random_chunks_long_lines),
            cmocka_unit_test(test_crlf_and_empty_lines),
            cmocka_unit_test(test_last_line_without_newline),
            cmocka_unit_test(test_line_limit),
            cmocka_unit_test(test_callback_error_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
