/*
 * wire.h - the native wire's route handlers, as the router's table names
 * them (router.c says which method, path and access class each serves).
 *
 * Each answers its request exactly once, with the native error body
 * (core/answer.h) when it refuses.
 */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "api/api-internal.h"
#include "api/core/route.h"

struct out_owner;
struct template_command;

/* ops.c: GET /healthz, GET /readyz (HEAD too), POST /drain, GET /metrics */
void wire_healthz(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_readyz(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_drain(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_metrics(struct api *a, struct http_req *req, const struct api_route_req *r);

/* sandboxes.c: /v1/sandboxes and /v1/sandboxes/{id} */
void wire_sandbox_list(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_sandbox_create(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_sandbox_info(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_sandbox_update(struct api *a, struct http_req *req, const struct api_route_req *r);
void wire_sandbox_delete(struct api *a, struct http_req *req, const struct api_route_req *r);

/* tools.c: POST /v1/sandboxes/{id}/tools/{name}; a template's own commands
 * run without the shell capability, as on /commands. */
void wire_sandbox_tool(struct api *a, struct http_req *req, const struct api_route_req *r);

/* Per-request state of the native wire, freed when the request closes. */
struct rq {
    struct api *api;
    char id[API_ID_LEN + 8];
    long pid;
    bool workspace;                /* id names a workspace, not a sandbox */
    void *op;                      /* route-specific state (exec, stdin...) with its own lifetime */
    const struct api_scope *scope; /* the request's scoped key, NULL = the full key */
};

/* wire/sandboxes.c: makes q the request's state (freed when it closes);
 * answers 500 and returns NULL without memory. */
struct rq *api_rq(struct api *a, struct http_req *req, const char *id);

/* wire/sandboxes.c: the native wire's view of the table: the ready entry id, touched;
 * answers 404 (unknown or dying) or 409 (creating) and returns NULL
 * otherwise (nothing is answered when req is NULL). */
struct entry *api_find(struct api *a, struct http_req *req, const char *id);
json_t *api_entry_json(struct api *a, struct entry *e, bool with_usage);

/* paths.c: paths from requests (any byte but NUL; util/json.h for
 * bodies) */
/* Answers 400 and returns -EINVAL when the request target held "%00". */
int api_path_nul_check(struct http_req *req);
/* The path j sends as key or key_b64, normalized into out (outsz >=
 * PATH_MAX_LEN + 2); -EINVAL with err filled otherwise. */
int api_body_path(json_t *j, const char *key, char *out, size_t outsz, struct err *err);

/* files.c: the file routes of a live sandbox (op is "files" with rest the path, or walk, mkdir,
 * rmdir, rename) */
void wire_files(struct api *a, struct http_req *req, struct entry *e, const char *op,
                const char *rest);

/* processes.c: seg[0] is "processes"; serves a sandbox or a warm
 * workspace's sandbox (404 when cold). */
void api_processes(struct api *a, struct http_req *req, const struct out_owner *o, char **seg,
                   int n);
/* processes.c */
void wire_sandboxes(struct api *a, struct http_req *req, char **seg, int nseg);

/* tools.c: GET /v1/tools[/{name}] and /v1/tool-packages (path is the whole path). */
void wire_tools(struct api *a, struct http_req *req, const char *path);
/* tools.c: POST .../tools/{name} on a sandbox or a workspace. */
void api_tool_call(struct api *a, struct http_req *req, const struct out_owner *o,
                   const char *name);

/* template-build.c: POST /v1/templates (a tar of a template directory). */
void api_template_build(struct api *a, struct http_req *req, const struct api_scope *scope);
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
/* sandboxes.c: capabilities (a template's or a sandbox's) as a JSON array of names. */
json_t *api_caps_json(unsigned caps);

/* workspaces.c: path is what follows "/v1/workspaces" ("" or "/..."). */
void wire_workspaces(struct api *a, struct http_req *req, const char *path);
/* workspaces.c: what is "check" or "gc" (/v1/store/...). */
void wire_store(struct api *a, struct http_req *req, const char *what);
