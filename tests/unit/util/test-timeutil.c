/*
 * test-timeutil.c - RFC 3339 formatting (epoch, leap days, milliseconds,
 * far future, truncation) and parsing (fractions, offsets, what is not a
 * time), and the clocks' units and monotonicity.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "util/timeutil.h"

static void
check(uint64_t ms, const char *want)
{
    char out[32];
    memset(out, 'X', sizeof(out));
    format_rfc3339(ms, out, sizeof(out));
    if (strcmp(out, want) != 0)
        fail_msg("format_rfc3339(%llu) = \"%s\", want \"%s\"", (unsigned long long)ms, out, want);
}

static void
test_format(void **state)
{
    (void)state;
    check(0, "1970-01-01T00:00:00.000Z");
    check(1, "1970-01-01T00:00:00.001Z");
    check(999, "1970-01-01T00:00:00.999Z");
    check(1000, "1970-01-01T00:00:01.000Z");
    check(86399999, "1970-01-01T23:59:59.999Z");
    check(86400000, "1970-01-02T00:00:00.000Z");
    check(951782400000ULL, "2000-02-29T00:00:00.000Z"); /* leap day of a /400 year */
    check(951868800000ULL, "2000-03-01T00:00:00.000Z");
    check(4107456000000ULL, "2100-02-28T00:00:00.000Z"); /* 2100 is not a leap year */
    check(4107542400000ULL, "2100-03-01T00:00:00.000Z");
    check(1787342422123ULL, "2026-08-21T20:00:22.123Z"); /* the header's example */
    check(2147483647000ULL, "2038-01-19T03:14:07.000Z");
    check(2147483648000ULL, "2038-01-19T03:14:08.000Z"); /* past 32-bit time_t */
    check(253402300799999ULL, "9999-12-31T23:59:59.999Z");
}

static void
test_format_extremes(void **state)
{
    char out[32];
    (void)state;
    /* years past 9999 and the largest input: longer, never overflowing */
    format_rfc3339(253402300800000ULL, out, sizeof(out));
    assert_string_equal(out, "10000-01-01T00:00:00.000Z");
    memset(out, 'X', sizeof(out));
    format_rfc3339(UINT64_MAX, out, sizeof(out));
    assert_non_null(memchr(out, '\0', sizeof(out)));
    assert_int_equal(out[strlen(out) - 1], 'Z');
    assert_non_null(strstr(out, ".615Z")); /* UINT64_MAX % 1000 */

    /* a short buffer is truncated and terminated */
    char small[11];
    format_rfc3339(0, small, sizeof(small));
    assert_string_equal(small, "1970-01-01");
}

static uint64_t
parsed(const char *s)
{
    uint64_t ms = 7;
    if (parse_rfc3339(s, &ms) != 0)
        fail_msg("parse_rfc3339(\"%s\") failed", s);
    return ms;
}

static void
test_parse(void **state)
{
    char out[32];
    uint64_t ms = 7;
    (void)state;
    assert_int_equal(parsed("2026-08-21T20:00:22.123Z"), 1787342422123ULL);
    assert_int_equal(parsed("2026-08-21T20:00:22Z"), 1787342422000ULL);
    assert_int_equal(parsed("2026-08-21T20:00:22.1z"), 1787342422100ULL);
    assert_int_equal(parsed("2026-08-21T20:00:22.123456Z"),
                     1787342422123ULL); /* cut, not rounded */
    assert_int_equal(parsed("2026-08-21T22:00:22.123+02:00"), 1787342422123ULL);
    assert_int_equal(parsed("2026-08-21T19:30:22.123-00:30"), 1787342422123ULL);
    assert_int_equal(parsed("1969-12-31T23:59:59Z"), 0); /* before the epoch: 0 */
    /* what format_rfc3339() writes reads back */
    const uint64_t samples[] = {0, 999, 951782400000ULL, 2147483648000ULL, 253402300799999ULL};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        format_rfc3339(samples[i], out, sizeof(out));
        assert_int_equal(parsed(out), samples[i]);
    }
    /* not times; ret untouched */
    const char *bad[] = {"",
                         "2026",
                         "2026-08-21",
                         "2026-08-21T20:00",
                         "2026-08-21T20:00:22",
                         "2026-08-21 20:00:22Z",
                         "2026-08-21T20:00:22+0200",
                         "yesterday"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_rfc3339(bad[i], &ms), -EINVAL);
        assert_int_equal(ms, 7);
    }
}

static void
test_clocks(void **state)
{
    struct timespec ts;
    (void)state;

    uint64_t u0 = now_usec(), m0 = now_msec();
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    uint64_t ref_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    assert_true(ref_ms >= m0 && ref_ms - m0 < 1000);
    assert_true(u0 / 1000 <= ref_ms);
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    uint64_t u1 = now_usec(), m1 = now_msec();
    assert_true(u1 - u0 >= 20000);
    assert_true(m1 - m0 >= 19);
    assert_true(u1 - u0 < 5000000);

    uint64_t w = wall_msec();
    assert_int_equal(clock_gettime(CLOCK_REALTIME, &ts), 0);
    uint64_t ref_w = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    assert_true(ref_w >= w && ref_w - w < 1000);
    assert_true(w > 1577836800000ULL); /* after 2020: really ms since the epoch */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_format),
            cmocka_unit_test(test_format_extremes),
            cmocka_unit_test(test_parse),
            cmocka_unit_test(test_clocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
