/*
 * test-parse.c - the strict parsers: every sign, blank, overflow and junk
 * case is refused with the right code, and ret_ values are written only on
 * success.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/parse.h"

#define SENTINEL64 0x5a5a5a5a5a5a5a5aULL
#define SENTINEL32 0x5a5a5a5au

struct u64_case {
    const char *in;
    int r;
    uint64_t v;
};

static void
test_u64(void **state)
{
    static const struct u64_case cases[] = {
            {"0", 0, 0},
            {"7", 0, 7},
            {"007", 0, 7},
            {"18446744073709551615", 0, UINT64_MAX},
            {"18446744073709551616", -ERANGE, 0},
            {"18446744073709551620", -ERANGE, 0},
            {"99999999999999999999", -ERANGE, 0},
            {"000000000000000000000000000018446744073709551615", 0, UINT64_MAX},
            {"", -EINVAL, 0},
            {"+1", -EINVAL, 0},
            {"-1", -EINVAL, 0},
            {"-0", -EINVAL, 0},
            {" 1", -EINVAL, 0},
            {"1 ", -EINVAL, 0},
            {"\t1", -EINVAL, 0},
            {"1\n", -EINVAL, 0},
            {"1x", -EINVAL, 0},
            {"x1", -EINVAL, 0},
            {"0x10", -EINVAL, 0},
            {"1.0", -EINVAL, 0},
            {"1e3", -EINVAL, 0},
            {"1_000", -EINVAL, 0},
            {"١", -EINVAL, 0}, /* a non-ASCII digit */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = SENTINEL64;
        int r = parse_u64(cases[i].in, &v);
        if (r != cases[i].r)
            fail_msg("parse_u64(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
        if (r == 0)
            assert_int_equal(v, cases[i].v);
        else
            assert_int_equal(v, SENTINEL64);
    }
    uint64_t v = SENTINEL64;
    assert_int_equal(parse_u64(NULL, &v), -EINVAL);
    assert_int_equal(v, SENTINEL64);
}

static void
test_u32(void **state)
{
    uint32_t v = SENTINEL32;
    (void)state;

    assert_int_equal(parse_u32("4294967295", &v), 0);
    assert_int_equal(v, UINT32_MAX);
    v = SENTINEL32;
    assert_int_equal(parse_u32("4294967296", &v), -ERANGE);
    assert_int_equal(parse_u32("18446744073709551616", &v), -ERANGE);
    assert_int_equal(parse_u32("-1", &v), -EINVAL);
    assert_int_equal(parse_u32("+1", &v), -EINVAL);
    assert_int_equal(parse_u32(" 1", &v), -EINVAL);
    assert_int_equal(parse_u32("1 ", &v), -EINVAL);
    assert_int_equal(parse_u32("", &v), -EINVAL);
    assert_int_equal(parse_u32(NULL, &v), -EINVAL);
    assert_int_equal(v, SENTINEL32);
    assert_int_equal(parse_u32("0", &v), 0);
    assert_int_equal(v, 0);
}

struct i32_case {
    const char *in;
    int r;
    int32_t v;
};

static void
test_i32(void **state)
{
    static const struct i32_case cases[] = {
            {"0", 0, 0},
            {"-0", 0, 0},
            {"42", 0, 42},
            {"-42", 0, -42},
            {"2147483647", 0, INT32_MAX},
            {"-2147483648", 0, INT32_MIN},
            {"2147483648", -ERANGE, 0},
            {"-2147483649", -ERANGE, 0},
            {"4294967296", -ERANGE, 0},
            {"-18446744073709551616", -ERANGE, 0},
            {"-", -EINVAL, 0},
            {"--1", -EINVAL, 0},
            {"-+1", -EINVAL, 0},
            {"+1", -EINVAL, 0},
            {" -1", -EINVAL, 0},
            {"- 1", -EINVAL, 0},
            {"-1 ", -EINVAL, 0},
            {"1-", -EINVAL, 0},
            {"", -EINVAL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int32_t v = 0x5a5a5a5a;
        int r = parse_i32(cases[i].in, &v);
        if (r != cases[i].r)
            fail_msg("parse_i32(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
        if (r == 0)
            assert_int_equal(v, cases[i].v);
        else
            assert_int_equal(v, 0x5a5a5a5a);
    }
    int32_t v = 1;
    assert_int_equal(parse_i32(NULL, &v), -EINVAL);
    assert_int_equal(v, 1);
}

static void
test_size(void **state)
{
    static const struct u64_case cases[] = {
            {"0", 0, 0},
            {"0K", 0, 0},
            {"512", 0, 512},
            {"1K", 0, 1024},
            {"1k", 0, 1024},
            {"2M", 0, 2ULL << 20},
            {"2m", 0, 2ULL << 20},
            {"3G", 0, 3ULL << 30},
            {"3g", 0, 3ULL << 30},
            {"4T", 0, 4ULL << 40},
            {"4t", 0, 4ULL << 40},
            {"16777215T", 0, 16777215ULL << 40},
            {"16777216T", -ERANGE, 0},
            {"17179869183G", 0, 17179869183ULL << 30},
            {"17179869184G", -ERANGE, 0},
            {"18446744073709551615", 0, UINT64_MAX},
            {"18446744073709551616", -ERANGE, 0},
            {"18446744073709551615K", -ERANGE, 0},
            {"0000000000000000000000000000001", 0, 1}, /* 31 digits */
            {"", -EINVAL, 0},
            {"K", -EINVAL, 0},
            {"KK", -EINVAL, 0},
            {"1KB", -EINVAL, 0},
            {"1KiB", -EINVAL, 0},
            {"1P", -EINVAL, 0},
            {"1.5G", -EINVAL, 0},
            {"-1K", -EINVAL, 0},
            {"+1K", -EINVAL, 0},
            {" 1K", -EINVAL, 0},
            {"1 K", -EINVAL, 0},
            {"1K ", -EINVAL, 0},
            {"1\nK", -EINVAL, 0},
            {"0x1K", -EINVAL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = SENTINEL64;
        int r = parse_size(cases[i].in, &v);
        if (r != cases[i].r)
            fail_msg("parse_size(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
        if (r == 0)
            assert_int_equal(v, cases[i].v);
        else
            assert_int_equal(v, SENTINEL64);
    }
    uint64_t v = SENTINEL64;
    assert_int_equal(parse_size(NULL, &v), -EINVAL);
    /* an over-long digit string is refused, not truncated */
    char longnum[200];
    memset(longnum, '1', sizeof(longnum) - 1);
    longnum[sizeof(longnum) - 1] = '\0';
    assert_true(parse_size(longnum, &v) < 0);
    assert_int_equal(v, SENTINEL64);
}

struct listen_case {
    const char *in;
    int r;
    const char *host;
    uint16_t port;
};

static void
test_listen(void **state)
{
    static const struct listen_case cases[] = {
            {"127.0.0.1:8700", 0, "127.0.0.1", 8700},
            {"0.0.0.0:0", 0, "0.0.0.0", 0},
            {"localhost:65535", 0, "localhost", 65535},
            {"[::1]:80", 0, "::1", 80},
            {"[fe80::1%eth0]:443", 0, "fe80::1%eth0", 443},
            {"127.0.0.1:65536", -ERANGE, NULL, 0},
            {"127.0.0.1:4294967296", -ERANGE, NULL, 0},
            {"127.0.0.1:", -EINVAL, NULL, 0},
            {"127.0.0.1", -EINVAL, NULL, 0},
            {":80", -EINVAL, NULL, 0},
            {"", -EINVAL, NULL, 0},
            {"127.0.0.1:-1", -EINVAL, NULL, 0},
            {"127.0.0.1:+80", -EINVAL, NULL, 0},
            {"127.0.0.1: 80", -EINVAL, NULL, 0},
            {"127.0.0.1:80 ", -EINVAL, NULL, 0},
            {"127.0.0.1:0x50", -EINVAL, NULL, 0},
            {"[::1]80", -EINVAL, NULL, 0},
            {"[::1]", -EINVAL, NULL, 0},
            {"[::1", -EINVAL, NULL, 0},
            {"[]:80", -EINVAL, NULL, 0},
            {"[::1]:", -EINVAL, NULL, 0},
            {"[::1]:80x", -EINVAL, NULL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[64] = "untouched";
        uint16_t port = 4242;
        int r = parse_listen(cases[i].in, host, sizeof(host), &port);
        if (r != cases[i].r)
            fail_msg("parse_listen(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
        if (r == 0) {
            assert_string_equal(host, cases[i].host);
            assert_int_equal(port, cases[i].port);
        } else {
            assert_string_equal(host, "untouched");
            assert_int_equal(port, 4242);
        }
    }
}

static void
test_listen_host_buffer(void **state)
{
    char host[10];
    uint16_t port = 0;
    (void)state;

    /* 9 characters and the NUL fit exactly; 10 do not */
    assert_int_equal(parse_listen("123456789:1", host, sizeof(host), &port), 0);
    assert_string_equal(host, "123456789");
    assert_int_equal(port, 1);
    memcpy(host, "untouched", 10);
    assert_int_equal(parse_listen("1234567890:1", host, sizeof(host), &port), -EINVAL);
    assert_int_equal(parse_listen("[123456789a]:1", host, sizeof(host), &port), -EINVAL);
    assert_string_equal(host, "untouched");
    assert_int_equal(parse_listen(NULL, host, sizeof(host), &port), -EINVAL);
}

static void
test_bool(void **state)
{
    static const char *const yes[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"};
    static const char *const no[] = {"0", "false", "FALSE", "no", "No", "off", "OFF"};
    static const char *const bad[] = {"",  "2", "tru",    "truee", "yes ", " yes",
                                      "y", "n", "enable", "01",    "-1",   "o"};
    bool v;
    (void)state;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        v = false;
        assert_true(parse_bool(yes[i], &v));
        assert_true(v);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        v = true;
        assert_true(parse_bool(no[i], &v));
        assert_false(v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = true;
        if (parse_bool(bad[i], &v))
            fail_msg("parse_bool(\"%s\") accepted", bad[i]);
        assert_true(v);
        v = false;
        assert_false(parse_bool(bad[i], &v));
        assert_false(v);
    }
    v = true;
    assert_false(parse_bool(NULL, &v));
    assert_true(v);
}

static void
test_strscpy(void **state)
{
    char dst[8];
    (void)state;

    memset(dst, 'x', sizeof(dst));
    assert_int_equal(strscpy(dst, "abc", sizeof(dst)), 3);
    assert_string_equal(dst, "abc");
    assert_int_equal(strscpy(dst, "1234567", sizeof(dst)), 7); /* exactly fits */
    assert_string_equal(dst, "1234567");
    assert_int_equal(strscpy(dst, "12345678", sizeof(dst)), -E2BIG);
    assert_string_equal(dst, "1234567"); /* truncated, terminated */
    assert_int_equal(strscpy(dst, "", sizeof(dst)), 0);
    assert_string_equal(dst, "");
    memcpy(dst, "keepme!", 8);
    assert_int_equal(strscpy(dst, "a", 0), -E2BIG); /* no room at all: untouched */
    assert_string_equal(dst, "keepme!");
    assert_int_equal(strscpy(dst, "a", 1), -E2BIG);
    assert_string_equal(dst, "");
}

static void
test_startswith(void **state)
{
    const char *rest = NULL;
    (void)state;

    assert_true(startswith("abc", "ab", &rest));
    assert_string_equal(rest, "c");
    assert_true(startswith("abc", "abc", &rest));
    assert_string_equal(rest, "");
    assert_true(startswith("abc", "", &rest));
    assert_string_equal(rest, "abc");
    rest = NULL;
    assert_false(startswith("abc", "abcd", &rest));
    assert_false(startswith("abc", "b", &rest));
    assert_false(startswith("", "a", &rest));
    assert_null(rest);
    assert_true(startswith("abc", "a", NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_u64),        cmocka_unit_test(test_u32),
            cmocka_unit_test(test_i32),        cmocka_unit_test(test_size),
            cmocka_unit_test(test_listen),     cmocka_unit_test(test_listen_host_buffer),
            cmocka_unit_test(test_bool),       cmocka_unit_test(test_strscpy),
            cmocka_unit_test(test_startswith),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
