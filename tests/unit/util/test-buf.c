/*
 * test-buf.c - struct buf: bounds, NUL termination, consume, steal.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/buf.h"

static void
test_put_and_nul(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 16);
    assert_string_equal(b.data, "");
    assert_int_equal(buf_puts(&b, "hello"), 0);
    assert_int_equal(b.len, 5);
    assert_int_equal(b.data[5], '\0');
    assert_int_equal(buf_printf(&b, " %d", 42), 0);
    assert_string_equal(b.data, "hello 42");
    buf_done(&b);
}

static void
test_limit(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 8);
    assert_int_equal(buf_puts(&b, "12345678"), 0);
    assert_int_equal(buf_putc(&b, 'x'), -EFBIG);
    assert_string_equal(b.data, "12345678"); /* unchanged on failure */
    assert_int_equal(buf_printf(&b, "%s", ""), 0);
    buf_done(&b);
}

static void
test_consume_and_steal(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "abcdef"), 0);
    buf_consume(&b, 2);
    assert_string_equal(b.data, "cdef");
    buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    assert_int_equal(buf_puts(&b, "xyz"), 0);
    char *s = buf_steal(&b);
    assert_string_equal(s, "xyz");
    assert_int_equal(b.len, 0);
    free(s);
    buf_done(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_put_and_nul),
            cmocka_unit_test(test_limit),
            cmocka_unit_test(test_consume_and_steal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
