/*
 * utf8.h - telling UTF-8 from other bytes, for strings that are only bytes.
 *
 * File names, symlink targets, argv and xattrs come from sandboxes: any byte
 * but NUL (and '/' inside a name). JSON strings, log lines and terminals
 * want something else: valid UTF-8 (JSON), no control characters (logs,
 * terminals). These helpers draw that line once, the same way everywhere:
 * a valid sequence is what RFC 3629 allows and jansson accepts - no
 * overlong forms, no surrogates, nothing past U+10FFFF.
 *
 * Pure functions on (pointer, length): no allocation except through the
 * struct buf they are given, no logging, safe from any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

#define UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD, what an invalid byte becomes */

/* The length (1-4) of the valid UTF-8 sequence at s (left bytes remain),
 * or 0 when s[0] does not start one. */
size_t utf8_seq(const char *s, size_t left);

/* Whether n bytes at s are valid UTF-8 throughout (NUL bytes count as
 * valid: callers that care check them themselves). */
bool utf8_valid(const char *s, size_t n);

/* Appends s to b with each byte that is not part of a valid sequence
 * replaced by U+FFFD (one replacement per byte). -EFBIG past b's max. */
int utf8_lossy(struct buf *b, const char *s, size_t n);

/* Writes s into out (outsz > 0) escaped for a log line or a terminal:
 * backslash as "\\", control characters (C0, DEL and the C1 range
 * U+0080-U+009F) and bytes that are not valid UTF-8 as "\n", "\t", "\r" or
 * "\xNN"; other valid UTF-8 is copied. Stops before an escape or a sequence
 * that would not fit whole, NUL-terminates, and returns the bytes written;
 * ret_used (optional) receives how many bytes of s were consumed. An
 * escaped string never holds a control byte, so it cannot end a line or
 * start a terminal sequence. UTF8_ESCAPED_MAX(n) bytes (plus the NUL)
 * always suffice. */
size_t utf8_escape(char *out, size_t outsz, const char *s, size_t n, size_t *ret_used);
#define UTF8_ESCAPED_MAX(n) (4 * (n))
