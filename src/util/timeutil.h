/*
 * timeutil.h - clocks and time formatting.
 *
 * Monotonic times are in microseconds or milliseconds since an arbitrary
 * start and only ever compared; wall-clock times are for display (RFC 3339).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

uint64_t now_usec(void);  /* CLOCK_MONOTONIC */
uint64_t now_msec(void);  /* CLOCK_MONOTONIC */
uint64_t wall_msec(void); /* CLOCK_REALTIME, ms since the epoch */

/* Formats ms since the epoch as "2026-08-21T20:00:22.123Z" into out (>= 32 bytes). */
void format_rfc3339(uint64_t epoch_ms, char *out, size_t outsz);

/* Parses an RFC 3339 time ("2026-08-21T20:00:22.123Z", "...+02:00") into ms
 * since the epoch (times before it give 0). -EINVAL when it is not one. */
int parse_rfc3339(const char *s, uint64_t *ret_ms);
