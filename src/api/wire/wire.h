/*
 * wire.h - the native wire's route handlers, as the router's table names
 * them (router.c says which method, path and access class each serves).
 *
 * Each answers its request exactly once, with the native error body
 * (core/answer.h) when it refuses.
 */
#pragma once

#include "api/core/route.h"

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
