/*
 * exec.h - the api core's exec, for every surface: an exec request decoded
 * once, started in a sandbox, its output streamed as NDJSON.
 *
 * The stream: {"pid"} first (a foreground exec), then {"stdout"|"stderr":
 * base64, "offset"} as output arrives, {"dropped", "offset"} where the log
 * lost output nobody read, and last the result ({"exit_code", "timed_out",
 * "oom_killed", "duration_ms", ["signal",] "pid", "output_end"}). A
 * foreground exec that ends within a few milliseconds without output is
 * answered in one piece. Answers go to req; errors with the native error
 * writer (core/answer).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/json.h"

struct api;
struct http_req;
struct out_owner;
struct proc;
struct sandbox;

/* A duration in seconds at key (optional; 0 to 7 days, fractions allowed)
 * into *ret_ms. 1 when present, 0 when absent, -EINVAL. */
int api_decode_seconds(json_t *j, const char *key, uint64_t *ret_ms, struct err *err);
/* An exec request decoded once; freed by the caller after api_exec_run(). */
struct exec_req;
int api_exec_decode(struct api *a, const char *body, size_t len, struct exec_req **ret,
                    struct err *err);
void api_exec_req_free(struct exec_req *q);
/* An exec request made from C values (custom commands, code): argv, env and
 * stdin are copied; timeout_ms 0 = the default exec deadline. */
int api_exec_req_new(struct api *a, const char *const *argv, const char *const *env,
                     const char *cwd, uint64_t timeout_ms, const void *stdin_data, size_t stdin_len,
                     struct exec_req **ret);
/* Starts q in sb and answers req (NDJSON stream, or 201 when background). */
void api_exec_run(struct api *a, struct http_req *req, struct sandbox *sb,
                  const struct out_owner *owner, const struct exec_req *q);
/* Answers req with an NDJSON stream of p's output from offset (follow: wait
 * for more until p ends). first (optional, stolen) is written before any
 * output. hold: a foreground exec (answered whole when it ends at once). */
void api_exec_stream(struct api *a, struct http_req *req, const struct out_owner *owner,
                     struct proc *p, uint64_t offset, bool follow, json_t *first, bool hold);
/* A process as the native wire shows it. */
json_t *api_proc_json(struct proc *p);
