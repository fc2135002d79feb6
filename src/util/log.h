/*
 * log.h - one-line log records on stderr.
 *
 * Under systemd (JOURNAL_STREAM set) each line starts with a "<N>" syslog
 * priority so journald can classify it; otherwise with "name: level: ".
 * The *_errno variants append ": <strerror(-r)>" and return r. Only logging modules
 * (api, workspace, abxd, cli) call these; libraries return errors instead.
 *
 * The formatted message is escaped before it is written (utf8_escape():
 * backslash, control characters, DEL and invalid UTF-8 as \\, \n, \t, \xNN),
 * so a name, path or argv from a sandbox or a client can neither end the
 * line nor put a terminal escape into the log; callers still quote user
 * values ('%s'). A line is at most LOG_LINE_MAX bytes with its newline; a
 * longer message is cut and ends in "...".
 */
#pragma once

#include <syslog.h>

#include "util/cleanup.h"

#define LOG_LINE_MAX 2048 /* bytes of one line, newline included */

void log_init(const char *name);
void log_set_level(int level); /* LOG_ERR..LOG_DEBUG; default LOG_INFO */
int log_get_level(void);

/* Logs at level; when r < 0 appends ": " and the text of -r. Returns r. */
int log_full_errno(int level, int r, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...)          log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)           log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)         log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warn(...)           log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_err(...)            log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_warn_errno(r, ...)  log_full_errno(LOG_WARNING, (r), __VA_ARGS__)
#define log_err_errno(r, ...)   log_full_errno(LOG_ERR, (r), __VA_ARGS__)
#define log_debug_errno(r, ...) log_full_errno(LOG_DEBUG, (r), __VA_ARGS__)
