/*
 * fuzz-common.h - what every fuzz target shares: the entry point's
 * prototype, a checked abort, and the switch for known, reported bugs.
 *
 * Every target checks the full contract of its parser. A check that a
 * known, not yet fixed bug breaks carries a tag; long fuzzing runs may set
 * ABX_FUZZ_IGNORE="tag,tag" to step over those checks and keep looking for
 * new problems (docs/testing.md lists the tags). The corpus replay in the
 * test suite never sets it, so the reproducers committed for such bugs
 * keep failing until they are fixed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Two cut points 0 <= cuts[0] <= cuts[1] <= size chosen by the byte sel
 * (low and high nibble): the incremental parsers' targets feed the input
 * whole and in the three pieces these make, and compare. */
static inline void
fuzz_cuts(uint8_t sel, size_t size, size_t cuts[2])
{
    cuts[0] = size * (sel & 15) / 15;
    cuts[1] = cuts[0] + (size - cuts[0]) * (sel >> 4) / 15;
}

/* Aborts with a message naming the broken invariant. */
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* Whether checks tagged tag are switched off for this run. */
static inline bool
fuzz_ignored(const char *tag)
{
    const char *list = getenv("ABX_FUZZ_IGNORE");
    size_t n = strlen(tag);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, tag, n))
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* A NUL-terminated copy of the input (embedded NULs end it early). */
static inline char *
fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
