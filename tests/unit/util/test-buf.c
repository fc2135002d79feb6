/*
 * test-buf.c - struct buf: bounds, NUL termination, printf growth, consume,
 * steal, size arithmetic at the edge of size_t, and every allocation failing
 * in turn (this binary is linked with failalloc.c).
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

#include "failalloc.h"
#include "util/buf.h"

/* The invariant every public function keeps: data is never NULL and holds
 * len bytes followed by a NUL, and len never exceeds max. */
static void
check_invariant(const struct buf *b)
{
    assert_non_null(b->data);
    assert_true(b->len <= b->max);
    assert_int_equal(b->data[b->len], '\0');
    if (b->cap)
        assert_true(b->len < b->cap);
    else
        assert_int_equal(b->len, 0);
}

static void
test_init_is_empty_string(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 16);
    check_invariant(&b);
    assert_string_equal(b.data, "");
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 16);
    /* done on a never-grown buffer frees nothing and keeps it usable */
    buf_done(&b);
    buf_done(&b);
    check_invariant(&b);
    assert_int_equal(b.max, 16);
}

static void
test_put_and_nul(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 16);
    assert_int_equal(buf_puts(&b, "hello"), 0);
    assert_int_equal(b.len, 5);
    check_invariant(&b);
    assert_int_equal(buf_printf(&b, " %d", 42), 0);
    assert_string_equal(b.data, "hello 42");
    assert_int_equal(buf_putc(&b, '!'), 0);
    assert_int_equal(buf_put(&b, "\0z", 2), 0); /* binary data keeps its NUL */
    assert_int_equal(b.len, 11);
    assert_memory_equal(b.data, "hello 42!\0z", 12);
    check_invariant(&b);
    assert_int_equal(buf_put(&b, NULL, 0), 0);
    assert_int_equal(b.len, 11);
    buf_done(&b);
    check_invariant(&b);
    assert_int_equal(b.len, 0);
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
    assert_int_equal(b.len, 8);
    assert_int_equal(buf_printf(&b, "%s", ""), 0);
    assert_int_equal(buf_printf(&b, "%d", 1), -EFBIG);
    assert_int_equal(buf_reserve(&b, 1), -EFBIG);
    assert_int_equal(buf_reserve(&b, 0), 0);
    check_invariant(&b);
    assert_string_equal(b.data, "12345678");

    /* one put larger than max at once, and from an empty buffer */
    buf_reset(&b);
    assert_int_equal(buf_put(&b, "123456789", 9), -EFBIG);
    assert_int_equal(b.len, 0);
    check_invariant(&b);
    buf_done(&b);

    /* max 0: only empty appends succeed */
    buf_init(&b, 0);
    assert_int_equal(buf_put(&b, "", 0), 0);
    assert_int_equal(buf_putc(&b, 'a'), -EFBIG);
    assert_int_equal(buf_printf(&b, "%c", 'a'), -EFBIG);
    check_invariant(&b);
    buf_done(&b);
}

static void
test_reserve_edge_of_size_t(void **state)
{
    struct buf b;
    (void)state;

    /* BUG: buf_reserve() computes need = len + extra + 1, which wraps to 0
     * when len + extra == SIZE_MAX on an unlimited buffer; "need <= cap"
     * then holds and it returns 0 without reserving anything, so the
     * buf_put() that follows would memcpy SIZE_MAX bytes. It must fail. */
    buf_init(&b, BUF_UNLIMITED);
    assert_true(buf_reserve(&b, SIZE_MAX) < 0);
    check_invariant(&b);
    assert_int_equal(buf_puts(&b, "0123456789"), 0);
    assert_true(buf_reserve(&b, SIZE_MAX - 10) < 0);
    assert_true(buf_reserve(&b, SIZE_MAX - 9) < 0);
    assert_int_equal(buf_reserve(&b, SIZE_MAX), -EFBIG);
    assert_string_equal(b.data, "0123456789");
    buf_done(&b);

    /* a limit close to SIZE_MAX: the len > max - extra test must not wrap */
    buf_init(&b, SIZE_MAX - 1);
    assert_int_equal(buf_puts(&b, "ab"), 0);
    assert_int_equal(buf_reserve(&b, SIZE_MAX - 2), -EFBIG);
    assert_int_equal(buf_reserve(&b, SIZE_MAX), -EFBIG);
    check_invariant(&b);
    buf_done(&b);
}

static void
test_printf_growth(void **state)
{
    struct buf b;
    char expect[16];
    (void)state;

    /* many small appends across the first allocation and several doublings */
    buf_init(&b, BUF_UNLIMITED);
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(buf_printf(&b, "%04d,", i), 0);
        check_invariant(&b);
    }
    assert_int_equal(b.len, 2000 * 5);
    for (int i = 0; i < 2000; i++) {
        (void)snprintf(expect, sizeof(expect), "%04d,", i);
        assert_memory_equal(b.data + i * 5, expect, 5);
    }
    buf_done(&b);

    /* one printf much larger than the current capacity */
    buf_init(&b, 100000);
    assert_int_equal(buf_puts(&b, "x"), 0);
    assert_int_equal(buf_printf(&b, "%0*d", 50000, 7), 0);
    assert_int_equal(b.len, 50001);
    assert_int_equal(b.data[0], 'x');
    assert_int_equal(b.data[1], '0');
    assert_int_equal(b.data[50000], '7');
    check_invariant(&b);
    /* exactly up to the limit, then one more */
    assert_int_equal(buf_printf(&b, "%0*d", 100000 - 50001, 0), 0);
    assert_int_equal(b.len, 100000);
    assert_int_equal(buf_printf(&b, "%s", "y"), -EFBIG);
    assert_int_equal(b.len, 100000);
    check_invariant(&b);
    buf_done(&b);
}

static int call_vprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
call_vprintf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

static void
test_vprintf(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, 32);
    assert_int_equal(call_vprintf(&b, "%s=%u", "key", 7u), 0);
    assert_int_equal(call_vprintf(&b, "%s", ""), 0);
    assert_string_equal(b.data, "key=7");
    assert_int_equal(call_vprintf(&b, "%040d", 1), -EFBIG);
    assert_string_equal(b.data, "key=7");
    check_invariant(&b);
    buf_done(&b);
}

static void
test_consume(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, BUF_UNLIMITED);
    buf_consume(&b, 0); /* on the static empty string */
    check_invariant(&b);
    assert_int_equal(buf_puts(&b, "abcdef"), 0);
    buf_consume(&b, 0);
    assert_string_equal(b.data, "abcdef");
    buf_consume(&b, 2);
    assert_string_equal(b.data, "cdef");
    assert_int_equal(b.len, 4);
    check_invariant(&b);
    buf_consume(&b, 3);
    assert_string_equal(b.data, "f");
    buf_consume(&b, 1);
    assert_int_equal(b.len, 0);
    check_invariant(&b);
    assert_int_equal(buf_puts(&b, "xyz"), 0);
    buf_consume(&b, 100);
    assert_int_equal(b.len, 0);
    check_invariant(&b);
    assert_int_equal(buf_puts(&b, "after"), 0);
    assert_string_equal(b.data, "after");
    buf_done(&b);
}

static void
test_reset_keeps_capacity(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_printf(&b, "%0500d", 0), 0);
    size_t cap = b.cap;
    char *data = b.data;
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, cap);
    assert_ptr_equal(b.data, data);
    check_invariant(&b);
    buf_done(&b);
}

static void
test_steal(void **state)
{
    struct buf b;
    (void)state;

    buf_init(&b, 10);
    assert_int_equal(buf_puts(&b, "xyz"), 0);
    char *s = buf_steal(&b);
    assert_non_null(s);
    assert_string_equal(s, "xyz");
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 10); /* the limit survives */
    check_invariant(&b);
    assert_true(b.data != s);
    free(s);

    /* the reinitialised buffer still enforces its limit */
    assert_int_equal(buf_puts(&b, "0123456789"), 0);
    assert_int_equal(buf_putc(&b, 'x'), -EFBIG);
    buf_done(&b);

    /* stealing a never-grown buffer gives a heap "" the caller can free */
    buf_init(&b, 10);
    s = buf_steal(&b);
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
    check_invariant(&b);
    buf_done(&b);
}

/* --- allocation failures --- */

struct snapshot {
    size_t len;
    char data[256];
};

static void
snap(const struct buf *b, struct snapshot *s)
{
    assert_true(b->len < sizeof(s->data));
    s->len = b->len;
    memcpy(s->data, b->data, b->len + 1);
}

static void
unchanged(const struct buf *b, const struct snapshot *s)
{
    check_invariant(b);
    assert_int_equal(b->len, s->len);
    assert_memory_equal(b->data, s->data, s->len + 1);
}

/* Checks one step of alloc_sequence(): success, or -ENOMEM with the
 * buffer exactly as it was. Returns 1 on success. */
static int
step(int r, const struct buf *b, const struct snapshot *s)
{
    if (r == 0)
        return 1;
    assert_int_equal(r, -ENOMEM);
    unchanged(b, s);
    return 0;
}

/* One allocation-heavy sequence; every step either succeeds or fails with
 * -ENOMEM leaving the buffer as it was. Returns how many steps succeeded. */
static int
alloc_sequence(void)
{
    struct buf b;
    struct snapshot s;
    int ok = 0;

    buf_init(&b, 200);
    snap(&b, &s);
    ok += step(buf_puts(&b, "first"), &b, &s);
    snap(&b, &s);
    ok += step(buf_printf(&b, "%0100d", 5), &b, &s); /* grows past the first 64 bytes */
    snap(&b, &s);
    ok += step(buf_printf(&b, "%050d", 6), &b, &s); /* and again past 128 */
    snap(&b, &s);
    assert_int_equal(buf_printf(&b, "%0300d", 7), -EFBIG); /* past max: no allocation */
    unchanged(&b, &s);
    char *str = buf_steal(&b);
    if (str) {
        ok++;
        free(str);
    }
    check_invariant(&b);
    str = buf_steal(&b); /* a fresh buffer: strdup("") */
    if (str) {
        ok++;
        assert_string_equal(str, "");
        free(str);
    }
    check_invariant(&b);
    buf_done(&b);
    return ok;
}

static void
test_alloc_failures(void **state)
{
    (void)state;
    long live0 = failalloc_live();

    failalloc_arm(0);
    assert_int_equal(alloc_sequence(), 5);
    unsigned long total = failalloc_calls();
    assert_true(total >= 3);
    assert_int_equal(failalloc_live(), live0);

    unsigned long n;
    for (n = 1;; n++) {
        failalloc_arm(n);
        int ok = alloc_sequence();
        bool hit = failalloc_hit();
        failalloc_disarm();
        assert_int_equal(failalloc_live(), live0); /* nothing leaked */
        if (!hit) {
            assert_int_equal(ok, 5);
            break;
        }
        assert_true(ok < 5);
    }
    assert_int_equal(n, total + 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_init_is_empty_string),
            cmocka_unit_test(test_put_and_nul),
            cmocka_unit_test(test_limit),
            cmocka_unit_test(test_reserve_edge_of_size_t),
            cmocka_unit_test(test_printf_growth),
            cmocka_unit_test(test_vprintf),
            cmocka_unit_test(test_consume),
            cmocka_unit_test(test_reset_keeps_capacity),
            cmocka_unit_test(test_steal),
            cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
