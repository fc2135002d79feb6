/*
 * test-ndjson.c - the NDJSON writer's lines: compact JSON ending in one
 * '\n', the value released; data lines with standard padded base64 and
 * the offset, empty data, the largest offset; lines appended, never
 * replacing what the buffer holds; a line past the buffer's limit refused
 * with -ENOMEM (the caller's limit bounds a line).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/ndjson.h"
#include "util/buf.h"

static void
test_line(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, 4096);
    json_t *v = json_pack("{s:i, s:s, s:[i,b]}", "pid", 42, "name", "caf\xc3\xa9", "x", 1, 1);
    assert_non_null(v);
    json_incref(v);
    assert_int_equal(ndjson_line(&b, v), 0);
    assert_int_equal(v->refcount, 1); /* the writer dropped its reference */
    json_decref(v);
    assert_non_null(strchr(b.data, '\n'));
    assert_int_equal(b.data[b.len - 1], '\n');
    assert_null(memchr(b.data, '\n', b.len - 1)); /* one line, compact */
    assert_null(strchr(b.data, ' '));
    json_t *back = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(back);
    assert_int_equal(json_integer_value(json_object_get(back, "pid")), 42);
    json_decref(back);

    /* Appended after what is there. */
    assert_int_equal(ndjson_line(&b, json_pack("{s:n}", "a")), 0);
    assert_non_null(strstr(b.data, "}\n{\"a\":null}\n"));
    buf_done(&b);
}

static void
test_data_line(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, 4096);
    assert_int_equal(ndjson_data_line(&b, "stdout", "hello\n", 6, 0), 0);
    assert_string_equal(b.data, "{\"stdout\":\"aGVsbG8K\",\"offset\":0}\n");
    buf_reset(&b);
    assert_int_equal(ndjson_data_line(&b, "stderr", "\xff\x00", 2, UINT64_MAX), 0);
    assert_string_equal(b.data, "{\"stderr\":\"/wA=\",\"offset\":18446744073709551615}\n");
    buf_reset(&b);
    assert_int_equal(ndjson_data_line(&b, "stdout", "", 0, 7), 0);
    assert_string_equal(b.data, "{\"stdout\":\"\",\"offset\":7}\n");
    buf_done(&b);
}

static void
test_limit(void **state)
{
    static char big[1024];
    struct buf b;
    (void)state;

    memset(big, 'a', sizeof(big));
    buf_init(&b, 64);
    assert_true(ndjson_data_line(&b, "stdout", big, sizeof(big), 0) < 0);
    buf_reset(&b);
    json_t *v = json_stringn(big, sizeof(big));
    assert_int_equal(ndjson_line(&b, v), -ENOMEM);
    buf_reset(&b);
    /* A line that fits exactly: 62 bytes of JSON plus '\n'. */
    char s[61];
    memset(s, 'b', 60);
    s[60] = '\0';
    assert_int_equal(ndjson_line(&b, json_string(s)), 0);
    assert_int_equal(b.len, 63);
    buf_done(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_line),
            cmocka_unit_test(test_data_line),
            cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
