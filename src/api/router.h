/*
 * router.h - the native route table, for api_begin() and its tests.
 *
 * Requests are tried in this order: the port proxy (by Host), the
 * ACCESS_OPEN routes (health probes), the E2B surface (by path or header,
 * with its own auth), then the bearer key and the rest of the table. The
 * access class of the route found is the only permission check a scoped key
 * meets before its handler.
 */
#pragma once

#include <stdbool.h>

#include "api/core/auth.h"
#include "api/core/route.h"

enum api_route_kind {
    ROUTE_RAW, /* pattern matched byte for byte: {id} = [^/]*, a final {*} = the rest */
    ROUTE_SEG, /* pattern matched on segments (api_split): {x} = one, a final {*} = zero or more */
};

struct api_route {
    const char *method; /* NULL = any (the handler answers 405 itself) */
    enum api_route_kind kind;
    const char *pattern;
    api_route_fn fn;
    enum api_access access;
    bool head; /* HEAD is served as GET (and not listed in Allow) */
};

extern const struct api_route api_routes[];
extern const unsigned api_n_routes;

struct api_route_match {
    struct api_route_req r;
    char copy[API_PATH_MAX];
    char *seg[API_MAX_SEGMENTS];
    char id[API_ROUTE_ID_MAX];
    char allow[64]; /* on -ENOENT: the methods the path has, ", "-separated ("" = none) */
};

/* The route for method and path among the ACCESS_OPEN routes (open) or the
 * others: its index into api_routes, with m filled. -ENOENT: none (m->allow
 * says whether the path has other methods: 405, or 404); -E2BIG: no raw
 * route took the path and it is too long for the segment routes. */
int api_route_find(const char *method, const char *path, bool open, struct api_route_match *m);
