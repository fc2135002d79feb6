/*
 * api-internal.h - what the files of the api piece share.
 */
#pragma once

#include <jansson.h>

#include "../util/err.h"
#include "../util/hashmap.h"
#include "../util/list.h"
#include "../workspace/workspace.h"
#include "api.h"

struct tools_registry;
struct template;
struct template_set;

#define API_JSON_MAX      (1024 * 1024)     /* bytes of a JSON request body */
#define API_EXEC_BODY_MAX (4 * 1024 * 1024) /* exec bodies carry base64 stdin */
#define API_ID_LEN        20
#define API_ENV_MAX       256 /* entries in a create's env */
#define API_ENV_BYTES     65536
#define API_ARGV_MAX      4096
#define API_ARGV_BYTES    (192 * 1024)
#define API_META_MAX      64
#define API_META_BYTES    16384
#define API_LINE_CHUNK    (48 * 1024) /* output bytes per NDJSON line */

struct api_metrics {
    uint64_t requests, errors_4xx, errors_5xx;
    uint64_t sandboxes_created, sandboxes_killed, sandboxes_failed;
    uint64_t execs, exec_failures, timeouts;
    uint64_t bytes_uploaded, bytes_downloaded;
    uint64_t create_us_sum, create_count;
};

/* A key limited to some templates and commands (keys.c). */
struct api_scope {
    char *key;
    char **templates; /* canonical names */
    size_t n_templates;
    char **commands; /* "template:command" or "template:*" */
    size_t n_commands;
    bool all_commands; /* no "commands" list: every command of its templates */
};

enum entry_state { E_CREATING, E_READY, E_DYING };

struct entry {
    struct list link;
    struct api *api;
    char id[API_ID_LEN + 1];
    struct sandbox *sb;
    enum entry_state state;
    uint64_t created_wall_ms;
    uint64_t end_at_wall_ms; /* 0 = no deadline */
    uint64_t timeout_s;
    uint64_t last_active_ms; /* monotonic */
    unsigned streams;        /* output streams attached */
    json_t *metadata;
    struct http_req *create_req;
    struct list waiters; /* DELETE requests waiting for the end */
    struct loop_timer *deadline;
    const struct template *tmpl;   /* borrowed from the api's template set */
    unsigned caps;                 /* TEMPLATE_CAP_* the sandbox's routes allow */
    const struct api_scope *scope; /* the scoped key that created it, NULL = the full key */
};

struct api {
    struct loop *loop;
    struct sandbox_host *sh;
    struct workspaces *ws;                /* NULL when workspaces are not configured */
    const struct tools_registry *tools;   /* NULL when no tools directory is configured */
    const struct template_set *templates; /* never NULL once api_set_templates() ran */
    struct api_scope *scopes;             /* scoped keys (keys.c) */
    size_t n_scopes;
    char tools_mount[4096]; /* where sandboxes see the bundles */
    struct api_config cfg;
    char *api_key;
    struct hashmap *map;
    struct list entries;
    uint32_t count;
    bool draining;
    char missing[1024];
    struct api_metrics m;
    uint64_t started_wall_ms;
    void (*all_gone)(void *ud);
    void *all_gone_ud;
};

/* Per-request state of the native wire, freed when the request closes. */
struct rq {
    struct api *api;
    char id[API_ID_LEN + 8];
    long pid;
    bool workspace;                /* id names a workspace, not a sandbox */
    void *op;                      /* route-specific state (exec, stdin...) with its own lifetime */
    const struct api_scope *scope; /* the request's scoped key, NULL = the full key */
};

struct rq *api_rq(struct api *a, struct http_req *req, const char *id);
/* Splits path on '/' (in place) into at most max segments; -1 if more. */
int api_split(char *path, char **seg, int max);

/* errors.c */
void api_error(struct http_req *req, int r, const struct err *err);
void api_error_msg(struct http_req *req, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void api_json(struct http_req *req, unsigned status, json_t *v); /* steals v */
void api_no_content(struct http_req *req);

/* api.c: the table of sandboxes */
struct entry *api_find(struct api *a, struct http_req *req, const char *id);
json_t *api_entry_json(struct api *a, struct entry *e, bool with_usage);
void api_touch(struct entry *e);
/* Kills e's sandbox (asynchronously; the entry goes when it is gone). */
void api_entry_kill(struct entry *e);
/* templates.c: e is ready: runs its template's start_cmd in the background
 * and, with a ready_cmd, polls it; then answers req (may be NULL) 201 with
 * answer (stolen), or 504 not_ready and kills e when ready_cmd never
 * succeeds. Takes over the caller's reference on req. */
void api_template_start(struct api *a, struct entry *e, struct http_req *req, json_t *answer);

/* Who an output stream belongs to: it keeps that sandbox (or workspace)
 * from counting as idle while attached. */
struct out_owner {
    enum { OWNER_SANDBOX, OWNER_WORKSPACE } kind;
    char id[72];
};
void api_stream_attached(struct api *a, const struct out_owner *o, bool attached);

/* wire-sandboxes.c: a duration in seconds at key (optional; 0 to 7 days,
 * fractions allowed) into *ret_ms. 1 when present, 0 when absent, -EINVAL. */
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

/* tools.c: GET /v1/tools[/{name}] and /v1/tool-packages (path is the whole path). */
void wire_tools(struct api *a, struct http_req *req, const char *path);
/* tools.c: POST .../tools/{name} on a sandbox or a workspace. */
void api_tool_call(struct api *a, struct http_req *req, const struct out_owner *o,
                   const char *name);

/* keys.c */
void api_keys_free(struct api *a);
const struct api_scope *api_scope_of(const struct api *a, const char *tok, size_t len);
/* Whether scope (NULL = the full key) may use template t / run its command cmd. */
bool api_scope_template(const struct api_scope *s, const struct template *t);
bool api_scope_command(const struct api_scope *s, const struct template *t, const char *cmd);

/* templates.c: answers 403 capability_missing and returns false unless e's
 * template grants cap (a TEMPLATE_CAP_* bit). */
bool api_need_cap(struct http_req *req, const struct entry *e, unsigned cap);
/* templates.c: GET /v1/templates[/{name}] (path is the whole path). */
void wire_templates(struct api *a, struct http_req *req, const char *path,
                    const struct api_scope *scope);
/* templates.c: GET /v1/sandboxes/{id}/commands, POST .../commands/{name},
 * POST .../code (name is NULL for the list and for code). */
void api_commands(struct api *a, struct http_req *req, const char *id, const char *what,
                  const char *name, const struct api_scope *scope);
/* templates.c: renders custom command c with the JSON object args (NULL =
 * none) into a malloc'ed `sh -c` line; -EINVAL (err says why), -E2BIG. */
struct template_command;
int api_render_command(const struct template_command *c, json_t *args, char **ret, struct err *err);
/* templates.c: a command's arguments as a JSON Schema. */
json_t *api_command_schema(const struct template_command *c);
/* templates.c: the template's capabilities as a JSON array of names. */
json_t *api_caps_json(unsigned caps);

/* workspaces.c: path is what follows "/v1/workspaces" ("" or "/..."). */
void wire_workspaces(struct api *a, struct http_req *req, const char *path);
/* workspaces.c: what is "check" or "gc" (/v1/store/...). */
void wire_store(struct api *a, struct http_req *req, const char *what);

/* wire-sandboxes.c: seg[0] is "processes"; serves a sandbox or a warm
 * workspace's sandbox (404 when cold). */
void api_processes(struct api *a, struct http_req *req, const struct out_owner *o, char **seg,
                   int n);
/* wire-sandboxes.c */
void wire_sandboxes(struct api *a, struct http_req *req, char **seg, int nseg);
/* wire-files.c */
void wire_files(struct api *a, struct http_req *req, struct entry *e, const char *op,
                const char *rest);
