/*
 * err.c - struct err: first-writer-wins error messages without allocation.
 */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 4, 0))) static int
err_vset(struct err *err, int errnum, bool with_errno, const char *fmt, va_list ap)
{
    int r = errnum > 0 ? -errnum : (errnum < 0 ? errnum : -EIO);

    if (!err || err->msg[0])
        return r;
    err->errnum = -r;
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (n < 0)
        err->msg[0] = '\0';
    if (with_errno && n >= 0 && (size_t)n < sizeof(err->msg)) {
        char tmp[128];
        const char *s = strerror_r(-r, tmp, sizeof(tmp));
        (void)snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", s);
    }
    if (!err->msg[0])
        (void)snprintf(err->msg, sizeof(err->msg), "error %d", -r);
    return r;
}

int
err_set(struct err *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = err_vset(err, errnum, false, fmt, ap);
    va_end(ap);
    return r;
}

int
err_setx(struct err *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = err_vset(err, errnum, true, fmt, ap);
    va_end(ap);
    return r;
}
