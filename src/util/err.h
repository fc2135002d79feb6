/*
 * err.h - an optional, allocation-free error record for telling a client why.
 *
 * Fallible functions return -errno; when the caller must explain the failure
 * (an HTTP error body, a start-up message) they also fill a struct err. The
 * first message set wins: the innermost cause is the most specific one, so
 * outer layers call err_set() only when err is still empty.
 */
#pragma once

#include <stdbool.h>

#include "util/cleanup.h"

#define ERR_MSG_MAX 256

struct err {
    int errnum;            /* positive errno, 0 = unset */
    char msg[ERR_MSG_MAX]; /* NUL-terminated, "" = unset */
};

/* Records errnum and a formatted message unless err is NULL or already set.
 * Returns -errnum (or -EIO when errnum is 0) so it can be returned directly. */
int err_set(struct err *err, int errnum, const char *fmt, ...) _printf_(3, 4);

/* Like err_set() but appends ": <strerror(errnum)>". */
int err_setx(struct err *err, int errnum, const char *fmt, ...) _printf_(3, 4);

static inline bool
err_isset(const struct err *err)
{
    return err && err->msg[0];
}

static inline void
err_clear(struct err *err)
{
    if (err) {
        err->errnum = 0;
        err->msg[0] = '\0';
    }
}
