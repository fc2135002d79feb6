/*
 * test-utf8.c - utf8_seq()/utf8_valid() agree with jansson on every 1-, 2-
 * and 3-byte string and on the 4-byte edges (what we call valid, json_string
 * accepts, and nothing else); utf8_lossy() replaces each bad byte once;
 * utf8_escape() on the documented cases, its bound, that it never cuts an
 * escape or a sequence, and that no escaped output ever holds a control
 * byte or invalid UTF-8 whatever the input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "util/utf8.h"

static bool
jansson_valid(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    json_decref(v);
    return v != NULL;
}

static void
check_agrees(const char *s, size_t n)
{
    bool ours = utf8_valid(s, n), theirs = jansson_valid(s, n);
    if (ours != theirs) {
        char hex[64] = "";
        for (size_t i = 0; i < n && i < 8; i++)
            (void)snprintf(hex + 3 * i, sizeof(hex) - 3 * i, "%02x ", (unsigned char)s[i]);
        fail_msg("bytes %s: utf8_valid %d, jansson %d", hex, ours, theirs);
    }
}

static void
test_agrees_with_jansson(void **state)
{
    char s[4];
    (void)state;
    for (unsigned a = 1; a < 256; a++) {
        s[0] = (char)a;
        check_agrees(s, 1);
        for (unsigned b = 1; b < 256; b++) {
            s[1] = (char)b;
            check_agrees(s, 2);
        }
    }
    /* Three bytes: every lead that is not ASCII with every pair of bytes
     * that matters (continuations, and one ASCII and one lead byte). */
    static const unsigned char probes[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f,
                                           0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed,
                                           0xef, 0xf0, 0xf4, 0xf5, 0xff};
    for (unsigned a = 0x80; a < 256; a++)
        for (unsigned b = 0x80; b < 0xc0; b++)
            for (size_t c = 0; c < sizeof(probes); c++) {
                if (!probes[c])
                    continue;
                s[0] = (char)a, s[1] = (char)b, s[2] = (char)probes[c];
                check_agrees(s, 3);
                for (unsigned d = 0x80; d < 0xc0; d += 0x0f) {
                    s[3] = (char)d;
                    check_agrees(s, 4);
                }
            }
}

static void
test_seq_edges(void **state)
{
    (void)state;
    assert_int_equal(utf8_seq("a", 1), 1);
    assert_int_equal(utf8_seq("\xc3\xa9", 2), 2);
    assert_int_equal(utf8_seq("\xc3\xa9", 1), 0);     /* cut short */
    assert_int_equal(utf8_seq("\xc0\x80", 2), 0);     /* overlong NUL */
    assert_int_equal(utf8_seq("\xe0\x80\xaf", 3), 0); /* overlong '/' */
    assert_int_equal(utf8_seq("\xed\xa0\x80", 3), 0); /* surrogate */
    assert_int_equal(utf8_seq("\xef\xbf\xbd", 3), 3);
    assert_int_equal(utf8_seq("\xf4\x8f\xbf\xbf", 4), 4); /* U+10FFFF */
    assert_int_equal(utf8_seq("\xf4\x90\x80\x80", 4), 0); /* past it */
    assert_int_equal(utf8_seq("\xff", 1), 0);
    assert_int_equal(utf8_seq("", 0), 0);
    assert_true(utf8_valid("", 0));
    assert_false(utf8_valid("ok\x80", 3));
}

static void
test_lossy(void **state)
{
    struct buf b;
    (void)state;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(utf8_lossy(&b, "caf\xc3\xa9", 5), 0);
    assert_string_equal(b.data, "caf\xc3\xa9");
    buf_reset(&b);
    assert_int_equal(utf8_lossy(&b,
                                "a\xff\xfe"
                                "b\xc3",
                                5),
                     0);
    assert_string_equal(b.data, "a" UTF8_REPLACEMENT UTF8_REPLACEMENT "b" UTF8_REPLACEMENT);
    assert_true(utf8_valid(b.data, b.len));
    buf_done(&b);

    /* Past the limit: -EFBIG and nothing appended. */
    buf_init(&b, 4);
    assert_int_equal(buf_puts(&b, "x"), 0);
    assert_int_equal(utf8_lossy(&b, "\xff\xff", 2), -EFBIG);
    assert_string_equal(b.data, "x");
    buf_done(&b);
}

static void
expect_escape(const char *in, size_t n, const char *want)
{
    char out[256];
    size_t used = 0;
    size_t k = utf8_escape(out, sizeof(out), in, n, &used);
    assert_int_equal(used, n);
    assert_int_equal(k, strlen(want));
    assert_string_equal(out, want);
}

static void
test_escape_cases(void **state)
{
    (void)state;
    expect_escape("plain /a/b.txt", 14, "plain /a/b.txt");
    expect_escape("caf\xc3\xa9 \xe2\x82\xac", 9, "caf\xc3\xa9 \xe2\x82\xac");
    expect_escape("a\nb\tc\rd", 7, "a\\nb\\tc\\rd");
    expect_escape("\x1b[31mred", 8, "\\x1b[31mred");
    expect_escape("back\\slash", 10, "back\\\\slash");
    expect_escape("del\x7f", 4, "del\\x7f");
    expect_escape("bad\xff\xc3", 5, "bad\\xff\\xc3");
    expect_escape("c1\xc2\x9b"
                  "1m",
                  6, "c1\\xc2\\x9b1m");               /* U+009B is CSI */
    expect_escape("nbsp\xc2\xa0", 6, "nbsp\xc2\xa0"); /* U+00A0 is not a control */
    expect_escape("x\n<3>abxd: forged line\x1b[31m", 27, "x\\n<3>abxd: forged line\\x1b[31m");
}

static void
test_escape_bound(void **state)
{
    char out[8];
    size_t used = 0;
    (void)state;
    /* "ab\n" needs 4 bytes and the NUL; "\xff" 4 more: the escape that does
     * not fit whole is left out entirely. */
    size_t k = utf8_escape(out, sizeof(out), "ab\n\xff", 4, &used);
    assert_int_equal(k, 4);
    assert_int_equal(used, 3);
    assert_string_equal(out, "ab\\n");
    /* A sequence is never cut either. */
    k = utf8_escape(out, 4, "ab\xe2\x82\xac", 5, &used);
    assert_int_equal(k, 2);
    assert_int_equal(used, 2);
    assert_string_equal(out, "ab");
    /* The documented worst case fits. */
    char big[UTF8_ESCAPED_MAX(64) + 1];
    char in[64];
    memset(in, 0xff, sizeof(in));
    k = utf8_escape(big, sizeof(big), in, sizeof(in), &used);
    assert_int_equal(used, sizeof(in));
    assert_int_equal(k, UTF8_ESCAPED_MAX(64));
    /* outsz 1 writes only the NUL. */
    k = utf8_escape(out, 1, "abc", 3, &used);
    assert_int_equal(k, 0);
    assert_int_equal(used, 0);
    assert_string_equal(out, "");
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static unsigned char
rng_byte(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned char)(rng_state >> 24);
}

/* Whatever goes in, what comes out is valid UTF-8 without a control byte. */
static void
test_escape_never_controls(void **state)
{
    char in[96], out[UTF8_ESCAPED_MAX(96) + 1];
    (void)state;
    for (int round = 0; round < 20000; round++) {
        size_t n = rng_byte() % sizeof(in);
        for (size_t i = 0; i < n; i++)
            in[i] = (char)rng_byte();
        size_t outsz = 1 + rng_byte() % sizeof(out);
        size_t used = 0;
        size_t k = utf8_escape(out, outsz, in, n, &used);
        assert_true(k < outsz);
        assert_true(used <= n);
        assert_int_equal(out[k], '\0');
        assert_true(utf8_valid(out, k));
        for (size_t i = 0; i < k; i++) {
            unsigned char c = (unsigned char)out[i];
            assert_false(c < 0x20 || c == 0x7f);
            if (c == 0xc2)
                assert_true((unsigned char)out[i + 1] >= 0xa0);
        }
        if (outsz == sizeof(out))
            assert_int_equal(used, n);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_agrees_with_jansson),
            cmocka_unit_test(test_seq_edges),
            cmocka_unit_test(test_lossy),
            cmocka_unit_test(test_escape_cases),
            cmocka_unit_test(test_escape_bound),
            cmocka_unit_test(test_escape_never_controls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
