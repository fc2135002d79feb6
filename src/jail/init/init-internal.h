/*
 * init-internal.h - what the files of abx-init share: the failure exit and
 * the root build (init-root.c), called by set-up in init.c.
 */
#pragma once

#include <errno.h>

struct proto_config;

/* Reports a set-up failure (step, errnum) to abxd and exits; abxd turns it
 * into an error naming the step. */
void init_fail(const char *step, int errnum) __attribute__((noreturn));

/* init_fail(step, errno) when expr is negative. */
#define CHECK(expr, step)           \
    do {                            \
        if ((expr) < 0)             \
            init_fail(step, errno); \
    } while (0)

/* Builds the sandbox's root below c->rootmnt and pivots into it (ns mode,
 * in a new mount namespace, as host root). Exits through init_fail(). */
void init_build_root(const struct proto_config *c);
