/*
 * test-err.c - struct err: first writer wins, return values, errno text,
 * truncation at ERR_MSG_MAX, NULL err.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/err.h"

static void
test_set_and_return(void **state)
{
    struct err e = {0};
    (void)state;

    assert_false(err_isset(&e));
    assert_int_equal(err_set(&e, ENOENT, "no such thing '%s'", "x"), -ENOENT);
    assert_true(err_isset(&e));
    assert_int_equal(e.errnum, ENOENT);
    assert_string_equal(e.msg, "no such thing 'x'");
}

static void
test_first_writer_wins(void **state)
{
    struct err e = {0};
    (void)state;

    assert_int_equal(err_set(&e, EACCES, "inner: %d", 1), -EACCES);
    /* the outer layer's call still returns its own code, but changes nothing */
    assert_int_equal(err_set(&e, EINVAL, "outer"), -EINVAL);
    assert_int_equal(err_setx(&e, EIO, "outer too"), -EIO);
    assert_int_equal(e.errnum, EACCES);
    assert_string_equal(e.msg, "inner: 1");

    err_clear(&e);
    assert_false(err_isset(&e));
    assert_int_equal(e.errnum, 0);
    assert_int_equal(err_set(&e, EBUSY, "again"), -EBUSY);
    assert_int_equal(e.errnum, EBUSY);
    assert_string_equal(e.msg, "again");
}

static void
test_null_err(void **state)
{
    (void)state;
    assert_int_equal(err_set(NULL, EPERM, "x %s", "y"), -EPERM);
    assert_int_equal(err_setx(NULL, ENOSPC, "x"), -ENOSPC);
    assert_false(err_isset(NULL));
    err_clear(NULL);
}

static void
test_errnum_zero_and_negative(void **state)
{
    struct err e = {0};
    (void)state;

    /* 0 is not an error code: it becomes EIO so callers still fail */
    assert_int_equal(err_set(&e, 0, "weird"), -EIO);
    assert_int_equal(e.errnum, EIO);
    assert_string_equal(e.msg, "weird");

    /* a negative errno (an r passed straight through) means the same */
    err_clear(&e);
    assert_int_equal(err_set(&e, -ENOENT, "neg"), -ENOENT);
    assert_int_equal(e.errnum, ENOENT);
}

static void
test_setx_appends_strerror(void **state)
{
    struct err e = {0};
    char expect[ERR_MSG_MAX];
    (void)state;

    assert_int_equal(err_setx(&e, ENOENT, "cannot open '%s'", "/x"), -ENOENT);
    (void)snprintf(expect, sizeof(expect), "cannot open '/x': %s", strerror(ENOENT));
    assert_string_equal(e.msg, expect);

    err_clear(&e);
    assert_int_equal(err_setx(&e, 0, "zero"), -EIO);
    (void)snprintf(expect, sizeof(expect), "zero: %s", strerror(EIO));
    assert_string_equal(e.msg, expect);
}

static void
test_empty_message(void **state)
{
    struct err e = {0};
    (void)state;

    /* an empty message would read as "unset": a generic one replaces it */
    assert_int_equal(err_set(&e, EINVAL, "%s", ""), -EINVAL);
    assert_true(err_isset(&e));
    assert_string_equal(e.msg, "error 22");
    err_clear(&e);
    assert_int_equal(err_setx(&e, EINVAL, "%s", ""), -EINVAL);
    assert_true(err_isset(&e));
    assert_non_null(strstr(e.msg, strerror(EINVAL)));
}

static void
test_truncation(void **state)
{
    struct err e = {0};
    char longmsg[1000];
    (void)state;

    memset(longmsg, 'a', sizeof(longmsg) - 1);
    longmsg[sizeof(longmsg) - 1] = '\0';
    assert_int_equal(err_set(&e, E2BIG, "%s", longmsg), -E2BIG);
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
    assert_int_equal(e.msg[0], 'a');

    /* too long for the errno text: the message is kept, truncated, and
     * still NUL-terminated */
    err_clear(&e);
    assert_int_equal(err_setx(&e, E2BIG, "%s", longmsg), -E2BIG);
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);

    /* room for part of the errno text: it is cut, not overflowed */
    err_clear(&e);
    longmsg[ERR_MSG_MAX - 5] = '\0';
    assert_int_equal(err_setx(&e, ENOENT, "%s", longmsg), -ENOENT);
    assert_int_equal(strlen(e.msg), ERR_MSG_MAX - 1);
    assert_memory_equal(e.msg + ERR_MSG_MAX - 5, ": N", 3);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_set_and_return),
            cmocka_unit_test(test_first_writer_wins),
            cmocka_unit_test(test_null_err),
            cmocka_unit_test(test_errnum_zero_and_negative),
            cmocka_unit_test(test_setx_appends_strerror),
            cmocka_unit_test(test_empty_message),
            cmocka_unit_test(test_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
