/*
 * api-internal.h - what every file of the api piece shares: struct api,
 * the request limits, and the core's create, exec and stream contracts.
 *
 * It is the core's: it includes core headers only, never a surface's
 * (wire/wire.h, e2b/e2b.h, ports/ports.h), so that a surface that includes
 * it sees the core and nothing of the others (scripts/layering.py).
 */
#pragma once

#include <jansson.h>

#include "api/api.h"
#include "api/core/answer.h"
#include "api/core/auth.h"
#include "api/core/route.h"
#include "api/core/table.h"
#include "util/err.h"
#include "util/list.h"
#include "workspace/workspace.h"

struct tools_registry;
struct template;
struct template_set;

#define API_JSON_MAX      (1024 * 1024)     /* bytes of a JSON request body */
#define API_EXEC_BODY_MAX (4 * 1024 * 1024) /* exec bodies carry base64 stdin */
#define API_ID_LEN        TABLE_ID_LEN
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
    uint64_t execs, exec_failures, timeouts;
    uint64_t bytes_uploaded, bytes_downloaded;
};

/* A create has ended: r == 0, e is ready; r < 0, e failed and is freed on
 * return. Takes over the reference on req (NULL when there is none): the
 * surface answers it. */
typedef void (*api_ready_fn)(struct api *a, struct entry *e, int r, const struct err *err,
                             struct http_req *req);
/* A decoded create request: the native wire and E2B each build one. */
struct api_create_req {
    const struct template *t;
    const struct api_scope *scope;
    json_t *env;  /* string map, borrowed, may be NULL */
    json_t *meta; /* string map, borrowed, may be NULL */
    uint64_t timeout_s;
    struct sandbox_limits lim;
    api_ready_fn ready; /* required: how the surface answers once ready or failed */
};
/* Starts creating a sandbox; c->ready gets req (may be NULL) when it is
 * ready or failed. -ESHUTDOWN draining, -EOPNOTSUPP no isolation, -EAGAIN
 * full, -EINVAL bad env: nothing was called back, err says why. */
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
    struct api_scope *scopes;           /* scoped keys (core/auth.c) */
    size_t n_scopes;
    char tools_mount[4096]; /* where sandboxes see the bundles */
    struct api_config cfg;
    char *api_key;
    struct table *table; /* the live sandboxes */
    unsigned e2b_slot;   /* e->ext[] of the E2B surface (struct e2b_sb) */
    struct api_metrics m;
    struct e2b_snaps *snaps; /* e2b/snapshots.c: its worker and store, made on first use */
    uint32_t inotify_open;   /* e2b/watch.c: inotify instances its watches hold */
    uint64_t started_wall_ms;
};

/* core/create.c: e is ready: runs its template's start_cmd in the background
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

/* core/create.c: the file system of a sandbox of t (its layers, disk_mb), in
 * storage buf; NULL for the default one. */
struct api_fs {
    struct sandbox_fs fs;
    const char *layers[SANDBOX_MAX_LAYERS];
};
const struct sandbox_fs *api_template_fs(struct api *a, const struct template *t,
                                         struct api_fs *buf);
