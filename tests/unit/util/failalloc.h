/*
 * failalloc.h - fail the Nth allocation, for fault-injection tests.
 *
 * A test binary linked with failalloc.c and
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=free
 * routes every allocation made by its own objects and by the static
 * libraries linked into it (util, jail, ...) through a counter; shared
 * libraries keep the real allocator. jansson is reached through
 * json_set_alloc_funcs(failalloc_malloc, failalloc_free) instead.
 *
 * After failalloc_arm(n) the nth allocation from then on returns NULL (once);
 * failalloc_hit() says whether that happened, so a test loops n = 1, 2, ...
 * until an operation completes without hitting the failure. live counts
 * blocks handed out through the wrappers and not yet freed: comparing it
 * before and after an operation finds leaks on every error path without
 * waiting for LeakSanitizer at exit.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

void failalloc_arm(unsigned long n);
void failalloc_disarm(void);
bool failalloc_hit(void);
long failalloc_live(void);
/* Allocations attempted (successful or not) since the last arm. */
unsigned long failalloc_calls(void);

/* For json_set_alloc_funcs(): the same counter, the real allocator. */
void *failalloc_malloc(size_t n);
void failalloc_free(void *p);
