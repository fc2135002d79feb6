/*
 * e2b.h - the E2B-compatible surface (platform API and envd), as the
 * router and the api's life see it. Its files share e2b-internal.h.
 */
#pragma once

#include <stdbool.h>

struct api;
struct http_req;

/* Whether req belongs to the E2B surface (envd header, signed /files, or a
 * platform path); it is then served by e2b_begin(). */
bool e2b_claims(struct http_req *req, const char *path);
void e2b_begin(struct api *a, struct http_req *req, const char *path);
/* Registers the E2B surface's per-sandbox state with the table (api_new). */
int e2b_init(struct api *a);
void e2b_snaps_free(struct api *a); /* from api_free(), first: finishes copies */
