/*
 * parse.h - strict number and string parsing for configuration and requests.
 *
 * Every parser rejects empty input, signs, leading blanks, overflow and
 * trailing junk with -EINVAL or -ERANGE; ret_ values are written only on
 * success. Used instead of atoi()/strtol(), which accept all of these.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int parse_u64(const char *s, uint64_t *ret);
int parse_u32(const char *s, uint32_t *ret);
int parse_i32(const char *s, int32_t *ret); /* optional leading '-' */
/* Decimal with an optional K, M, G or T suffix (powers of 1024). */
int parse_size(const char *s, uint64_t *ret);
/* "ADDR:PORT" (IPv4 dotted or "[v6]"); port 0..65535. ret_host is a
 * NUL-terminated copy of ADDR in a caller buffer of hostsz bytes. */
int parse_listen(const char *s, char *ret_host, size_t hostsz, uint16_t *ret_port);
bool parse_bool(const char *s, bool *ret); /* 1/0, true/false, yes/no, on/off */
/* The value of one hex digit (0-9, a-f, A-F), or -1. */
int parse_hex_digit(char c);

/* Copies src into dst of size n, always NUL-terminating; returns strlen(src)
 * or -E2BIG when it was truncated. */
long strscpy(char *dst, const char *src, size_t n);

/* True when s starts with prefix; *ret_rest (optional) points after it. */
bool startswith(const char *s, const char *prefix, const char **ret_rest);
