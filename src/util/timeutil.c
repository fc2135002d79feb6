/*
 * timeutil.c - clock reads, RFC 3339 formatting and parsing.
 */
#include "util/timeutil.h"

#include <errno.h>
#include <stdio.h>

static uint64_t
clock_usec(clockid_t id)
{
    struct timespec ts;
    (void)clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
now_usec(void)
{
    return clock_usec(CLOCK_MONOTONIC);
}

uint64_t
now_msec(void)
{
    return clock_usec(CLOCK_MONOTONIC) / 1000u;
}

uint64_t
wall_msec(void)
{
    return clock_usec(CLOCK_REALTIME) / 1000u;
}

void
format_rfc3339(uint64_t epoch_ms, char *out, size_t outsz)
{
    time_t t = (time_t)(epoch_ms / 1000u);
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        (void)snprintf(out, outsz, "1970-01-01T00:00:00.000Z");
        return;
    }
    (void)snprintf(out, outsz, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (unsigned)(epoch_ms % 1000u));
}

int
parse_rfc3339(const char *s, uint64_t *ret_ms)
{
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -EINVAL;
    uint64_t ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (uint64_t)(*p - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    long off = 0;
    if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return -EINVAL;
        off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
    } else if (*p != 'Z' && *p != 'z') {
        return -EINVAL;
    }
    time_t t = timegm(&tm) - off;
    if (t < 0)
        t = 0;
    *ret_ms = (uint64_t)t * 1000u + ms;
    return 0;
}
