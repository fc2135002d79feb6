/*
 * route.h - what a route handler gets from the router.
 *
 * The router (router.c) holds the one ordered table of native routes:
 * method, pattern, handler and access class (auth.h). It matches a request
 * once, checks the access class of the route it found, and calls the
 * handler with the pieces of the path its pattern named. Surfaces write
 * handlers against this header and never see the table.
 */
#pragma once

#include <stddef.h>

struct api;
struct api_scope;
struct http_req;

#define API_PATH_MAX     512 /* bytes of a path the segment routes look at */
#define API_MAX_SEGMENTS 8   /* segments of such a path */
#define API_ROUTE_ID_MAX 64  /* bytes of an {id} a raw pattern captures, with the NUL */

struct api_route_req {
    const char *path; /* the whole (percent-decoded) path */
    char **seg;       /* its segments, for segment patterns; NULL for raw ones */
    int n;
    const char *id;   /* the pattern's first {...}; NULL when none or (raw) empty or too long */
    const char *name; /* its second {...}; NULL when none */
    const char *tail; /* what a raw pattern's {*} matched ("" when empty), else NULL */
    const struct api_scope *scope; /* the request's scoped key, NULL = the full key */
};

typedef void (*api_route_fn)(struct api *a, struct http_req *req, const struct api_route_req *r);

/* Splits path on '/' (in place, runs of '/' count as one) into at most max
 * segments; -1 if more. */
int api_split(char *path, char **seg, int max);
