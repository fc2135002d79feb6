/*
 * timeutil.c - clock reads and RFC 3339 formatting.
 */
#include "util/timeutil.h"

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
