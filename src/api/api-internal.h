/*
 * api-internal.h - what the files of the api piece share.
 */
#pragma once

#include <jansson.h>

#include "api/api.h"
#include "util/err.h"
#include "util/hashmap.h"
#include "util/list.h"
#include "workspace/workspace.h"

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
#define API_LINE_CHUNK    (48 * 1024)         /* output bytes per NDJSON line */
#define API_DISK_MB_MAX   (UINT64_C(1) << 24) /* disk_mb of a create, as templates' (16 TiB) */

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
    /* The create answer's body (E2B's Sandbox); NULL = the native one. */
    json_t *(*answer)(struct api *a, struct entry *e);
    struct e2b_sb *e2b; /* E2B state (token, envd streams); NULL for native sandboxes */
    int ports_netns;    /* its network namespace, pinned by ports.c; 0 = not yet (never 0..2) */
    /* Runs once when the sandbox is ready, instead of answering: it takes
     * over create_req (may be NULL) and answers it (e2b snapshots). */
    void (*post_ready)(struct api *a, struct entry *e, struct http_req *req);
};

/* A decoded create request: the native wire and E2B each build one. */
struct api_create_req {
    const struct template *t;
    const struct api_scope *scope;
    json_t *env;  /* string map, borrowed, may be NULL */
    json_t *meta; /* string map, borrowed, may be NULL */
    uint64_t timeout_s;
    struct sandbox_limits lim;
    json_t *(*answer)(struct api *a, struct entry *e); /* NULL = the native answer */
};
/* Starts creating a sandbox; req (may be NULL) is answered when it is ready
 * (201) or failed. -ESHUTDOWN draining, -EOPNOTSUPP no isolation, -EAGAIN
 * full, -EINVAL bad env: nothing was answered, err says why. */
int api_create(struct api *a, struct http_req *req, const struct api_create_req *c,
               struct entry **ret, struct err *err);
/* "disk_mb" of a create body (optional, 1..API_DISK_MB_MAX) into bytes: 1
 * when present, 0 when absent, -EINVAL (also when the host has no disk
 * bound). */
int api_decode_disk_mb(struct api *a, json_t *body, uint64_t *ret_bytes, struct err *err);
/* Applies template t's resources over lim. */
void api_template_limits(struct api *a, const struct template *t, struct sandbox_limits *lim);

struct api {
    struct loop *loop;
    struct sandbox_host *sh;
    struct workspaces *ws;              /* NULL when workspaces are not configured */
    const struct tools_registry *tools; /* NULL when no tools directory is configured */
    struct template_set *templates;     /* never NULL once api_set_templates() ran */
    struct api_scope *scopes;           /* scoped keys (keys.c) */
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
    struct ports *ports;     /* the port proxy's state (ports.c), made on first use */
    struct e2b_snaps *snaps; /* e2b-snapshots.c: its worker and store, made on first use */
    uint32_t inotify_open;   /* e2b-watch.c: inotify instances its watches hold */
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

/* paths.c: paths from requests (any byte but NUL; util/json.h for bodies) */
/* Answers 400 and returns -EINVAL when the request target held "%00". */
int api_path_nul_check(struct http_req *req);
/* The path j sends as key or key_b64, normalized into out (outsz >=
 * PATH_MAX_LEN + 2); -EINVAL with err filled otherwise. */
int api_body_path(json_t *j, const char *key, char *out, size_t outsz, struct err *err);

/* api.c: the table of sandboxes */
struct entry *api_find(struct api *a, struct http_req *req, const char *id);
json_t *api_entry_json(struct api *a, struct entry *e, bool with_usage);
void api_touch(struct entry *e);
/* Moves e's deadline (0 = none). */
void api_entry_set_end(struct entry *e, uint64_t end_at_wall_ms);
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

/* core/exec.h: exec requests and output streams (api_exec_*). */
#include "api/core/exec.h"

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
/* template-build.c: POST /v1/templates (a tar of a template directory). */
void api_template_build(struct api *a, struct http_req *req, const struct api_scope *scope);
/* templates.c: the file system of a sandbox of t (its layers, disk_mb), in
 * storage buf; NULL for the default one. */
struct api_fs {
    struct sandbox_fs fs;
    const char *layers[SANDBOX_MAX_LAYERS];
};
const struct sandbox_fs *api_template_fs(struct api *a, const struct template *t,
                                         struct api_fs *buf);
/* templates.c: GET /v1/templates[/{name}], POST /v1/templates (path is the whole path). */
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
/* e2b-*.c: the E2B-compatible surface (platform API and envd). */
struct e2b_sb;
/* Whether req belongs to the E2B surface (envd header, signed /files, or a
 * platform path); it is then served by e2b_begin(). */
bool e2b_claims(struct http_req *req, const char *path);
void e2b_begin(struct api *a, struct http_req *req, const char *path);
/* {"code": status, "message": ...} as the E2B SDK reads errors. */
void e2b_error(struct http_req *req, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void e2b_entry_dying(struct entry *e); /* cuts its envd streams */
void e2b_entry_free(struct entry *e);
void e2b_snaps_free(struct api *a); /* from api_free(), first: finishes copies */

/* wire-files.c */
void wire_files(struct api *a, struct http_req *req, struct entry *e, const char *op,
                const char *rest);

/* ports.c: the port proxy. A request whose Host is <port>-<id>.<domain>
 * (an optional :port after it) goes to the server on that port inside
 * sandbox id, before any other route and without an API key. */
#define PORTS_ID_MAX 64 /* longest id a Host may name */
/* 1 and the port and id (lowercased; idsz bytes with the NUL) when host
 * has that shape under domain; 0 otherwise, and always when domain is
 * NULL or empty. */
int ports_match_host(const char *host, const char *domain, uint16_t *ret_port, char *ret_id,
                     size_t idsz);
void ports_begin(struct api *a, struct http_req *req, uint16_t port, const char *id);
void ports_entry_free(struct entry *e); /* from entry_free() */
void ports_free(struct api *a);         /* from api_free(): finishes dials in flight */
