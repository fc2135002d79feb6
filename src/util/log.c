/*
 * log.c - stderr logging with optional journald priority prefixes.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_name = "abx";
static int log_level = LOG_INFO;
static int log_journal = -1;

void
log_init(const char *name)
{
    log_name = name;
    log_journal = getenv("JOURNAL_STREAM") != NULL;
    const char *lvl = getenv("ABX_LOG_LEVEL");
    if (lvl && !strcmp(lvl, "debug"))
        log_level = LOG_DEBUG;
    else if (lvl && !strcmp(lvl, "warn"))
        log_level = LOG_WARNING;
    else if (lvl && !strcmp(lvl, "error"))
        log_level = LOG_ERR;
}

void
log_set_level(int level)
{
    log_level = level;
}

int
log_get_level(void)
{
    return log_level;
}

static const char *
level_name(int level)
{
    switch (level) {
    case LOG_EMERG:
    case LOG_ALERT:
    case LOG_CRIT:
    case LOG_ERR:
        return "error";
    case LOG_WARNING:
        return "warning";
    case LOG_NOTICE:
        return "notice";
    case LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

int
log_full_errno(int level, int r, const char *fmt, ...)
{
    if (level > log_level)
        return r;
    int saved = errno;
    char line[2048];
    int n;

    if (log_journal < 0)
        log_journal = getenv("JOURNAL_STREAM") != NULL;
    if (log_journal)
        n = snprintf(line, sizeof(line), "<%d>", level);
    else
        n = snprintf(line, sizeof(line), "%s: %s: ", log_name, level_name(level));
    if (n < 0)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    if (r < 0 && len < sizeof(line) - 2) {
        char tmp[128];
        int k = snprintf(line + len, sizeof(line) - 1 - len, ": %s",
                         strerror_r(-r, tmp, sizeof(tmp)));
        if (k > 0)
            len = MIN(len + (size_t)k, sizeof(line) - 2);
    }
    line[len++] = '\n';
    (void)fwrite(line, 1, len, stderr);
    errno = saved;
    return r;
}
