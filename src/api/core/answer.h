/*
 * answer.h - the native wire's answers: JSON bodies, and errors as
 * {"error": code, "message": text} with a status from one errno table.
 *
 * Only the native surfaces (and the core's own refusals) answer this way;
 * E2B answers through e2b/errors. Every function answers req exactly once.
 */
#pragma once

#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

struct http_req;

/* r (-errno) as its status and code; err's message when it has one. */
void api_error(struct http_req *req, int r, const struct err *err);
void api_error_msg(struct http_req *req, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void api_json(struct http_req *req, unsigned status, json_t *v); /* steals v */
void api_no_content(struct http_req *req);

/* A wall-clock time (ms since the epoch) as an RFC 3339 string. */
json_t *api_time_json(uint64_t wall_ms);
/* The same, or null for 0 ("never"). */
json_t *api_time_json_or_null(uint64_t wall_ms);
