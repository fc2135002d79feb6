/*
 * json.h - jansson helpers for decoding requests once, at a surface.
 *
 * Each getter checks presence and type and, on failure, fills err with a
 * message naming the field ("'memory_mb' must be an integer"), so a 400 says
 * exactly what was wrong. Absent optional fields leave *ret untouched and
 * return 0; present fields return 1.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/buf.h"
#include "util/err.h"

#define JSON_MAX_DEPTH 64 /* nesting we accept in a request body */

/* Parses one JSON value of exactly len bytes (duplicates rejected, depth
 * bounded). -EINVAL with "invalid JSON at line L column C: reason". */
int json_parse(const char *data, size_t len, json_t **ret, struct err *err);

/* Requires an object whose keys all appear in the NULL-terminated allowed list. */
int json_check_object(json_t *v, const char *const *allowed, struct err *err);

int json_get_str(json_t *obj, const char *key, bool required, const char **ret, struct err *err);
int json_get_u64(json_t *obj, const char *key, bool required, uint64_t max, uint64_t *ret,
                 struct err *err);
int json_get_num(json_t *obj, const char *key, bool required, double min, double max, double *ret,
                 struct err *err);
int json_get_bool(json_t *obj, const char *key, bool required, bool *ret, struct err *err);
/* An object of string values; ret is borrowed from obj. */
int json_get_str_map(json_t *obj, const char *key, size_t max_entries, size_t max_bytes,
                     json_t **ret, struct err *err);
/* An array of strings, at least min_len long; ret borrowed. */
int json_get_str_array(json_t *obj, const char *key, bool required, size_t min_len, size_t max_len,
                       size_t max_bytes, json_t **ret, struct err *err);

/* Appends the compact encoding of v to b. */
int json_dump_buf(json_t *v, struct buf *b);

/* Stealing setters that tolerate NULL values (then: -ENOMEM). */
int json_set(json_t *obj, const char *key, json_t *v);

/* Names: file names, paths and link targets are bytes (any but NUL), JSON
 * strings are UTF-8. A name goes on the wire as "<key>": the name itself
 * when it is valid UTF-8, else the name with each invalid byte as U+FFFD
 * (readable, but lossy) plus "<key>_b64": the standard base64 (RFC 4648,
 * padded) of the exact bytes. So "path" is always there and always a valid
 * string, and "path_b64" appears exactly when "path" is not the name.
 *   {"path": "/caf\u00e9"}                        the bytes 2f 63 61 66 c3 a9
 *   {"path": "/a\ufffd", "path_b64": "L2H/"}      the bytes 2f 61 ff */
#define JSON_NAME_B64_SUFFIX "_b64"
#define JSON_NAME_KEY_MAX    60 /* longest key a name may go under */

/* s as a JSON string, each byte that is not valid UTF-8 as U+FFFD (for
 * messages and display fields that must not vanish); NULL on OOM. */
json_t *json_string_lossy(const char *s);
/* Sets obj.key (and obj.key_b64 when needed) to the name s, as above. */
int json_set_name(json_t *obj, const char *key, const char *s);
/* Reads a name sent as "<key>_b64" (wins when present) or "<key>" into out
 * (reset first; its max bounds the name: -ENAMETOOLONG past it). -EINVAL
 * for bad base64, a NUL byte, a non-string. 1 when present, 0 when absent
 * and not required. Lists of allowed keys must name both forms. */
int json_get_name(json_t *obj, const char *key, bool required, struct buf *out, struct err *err);
