/*
 * log.c - stderr logging with optional journald priority prefixes.
 */
#include "util/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

#define LOG_CUT "..."

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
    char msg[LOG_LINE_MAX], line[LOG_LINE_MAX];
    size_t len;
    int n, m;

    if (log_journal < 0)
        log_journal = getenv("JOURNAL_STREAM") != NULL;
    if (log_journal)
        n = snprintf(line, sizeof(line), "<%d>", level);
    else
        n = snprintf(line, sizeof(line), "%s: %s: ", log_name, level_name(level));
    len = n > 0 ? (size_t)n : 0;
    va_list ap;
    va_start(ap, fmt);
    m = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* The message carries names, paths and argv from sandboxes and
     * clients: escaped here, where every line passes, so that none can end
     * the line, forge another or reach a terminal as a control sequence. */
    size_t mlen = m > 0 ? MIN((size_t)m, sizeof(msg) - 1) : 0;
    size_t room = sizeof(line) - 1 - len - (sizeof(LOG_CUT) - 1); /* newline, marker */
    size_t used = 0;
    len += utf8_escape(line + len, room, msg, mlen, &used);
    if (used < mlen || (m > 0 && (size_t)m >= sizeof(msg))) {
        memcpy(line + len, LOG_CUT, sizeof(LOG_CUT) - 1); /* cut short: say so */
        len += sizeof(LOG_CUT) - 1;
    }
    if (r < 0 && len + 2 < sizeof(line) - 1) {
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
