/*
 * router.c - api_begin(): every request's way to its surface, and the
 * native route table.
 *
 * The table is the one place that says which handler serves a method and
 * path and who may call it (the access class the scope gate reads). Order
 * matters: the first route whose pattern and method match wins; routes
 * whose pattern matches with another method make a 405 with their methods
 * in Allow. Raw patterns come first and see any path; segment patterns see
 * paths up to API_PATH_MAX bytes and API_MAX_SEGMENTS segments.
 */
#include "api/router.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api-internal.h"
#include "api/e2b/e2b.h"
#include "api/ports/ports.h"
#include "api/wire/wire.h"
#include "util/log.h"

/* --- adapters to surfaces that take their own arguments --- */

static void
route_workspaces(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    wire_workspaces(a, req, r->path + strlen("/v1/workspaces"));
}

static void
route_tools(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    wire_tools(a, req, r->path);
}

static void
route_templates(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    wire_templates(a, req, r->path, r->scope);
}

static void
route_store(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    wire_store(a, req, r->tail);
}

/* /v1/sandboxes/{id}/files/{path...} keeps its tail verbatim. */
static void
route_files(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    if (!r->id) {
        api_error_msg(req, 404, "not_found", "no sandbox with that id");
        return;
    }
    struct entry *e = api_find(a, req, r->id);
    if (e)
        wire_files(a, req, e, "files", r->tail);
}

static void
route_commands(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    api_commands(a, req, r->id, "commands", r->name, r->scope);
}

static void
route_code(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    api_commands(a, req, r->id, "code", NULL, r->scope);
}

static void
route_sandbox_op(struct api *a, struct http_req *req, const struct api_route_req *r)
{
    wire_sandboxes(a, req, r->seg, r->n);
}

/* --- the table --- */

#define RAW(m, p, fn, acc)              \
    {                                   \
        m, ROUTE_RAW, p, fn, acc, false \
    }
#define SEG(m, p, fn, acc)              \
    {                                   \
        m, ROUTE_SEG, p, fn, acc, false \
    }
#define PROBE(p, fn)                               \
    {                                              \
        "GET", ROUTE_RAW, p, fn, ACCESS_OPEN, true \
    }
#define SB "v1/sandboxes/{id}"

const struct api_route api_routes[] = {
        PROBE("/healthz", wire_healthz),
        PROBE("/readyz", wire_readyz),
        RAW("POST", "/drain", wire_drain, ACCESS_FULL),
        RAW("GET", "/metrics", wire_metrics, ACCESS_FULL),
        RAW(NULL, "/v1/workspaces", route_workspaces, ACCESS_FULL),
        RAW(NULL, "/v1/workspaces/{*}", route_workspaces, ACCESS_FULL),
        RAW(NULL, "/v1/tools", route_tools, ACCESS_FULL),
        RAW(NULL, "/v1/tools/{*}", route_tools, ACCESS_FULL),
        RAW(NULL, "/v1/tool-packages", route_tools, ACCESS_FULL),
        RAW(NULL, "/v1/templates", route_templates, ACCESS_SCOPED),
        RAW(NULL, "/v1/templates/{*}", route_templates, ACCESS_SCOPED),
        RAW(NULL, "/v1/store/{*}", route_store, ACCESS_FULL),
        RAW(NULL, "/v1/sandboxes/{id}/files/{*}", route_files, ACCESS_FULL),
        SEG("GET", "v1/sandboxes", wire_sandbox_list, ACCESS_FULL),
        SEG("POST", "v1/sandboxes", wire_sandbox_create, ACCESS_SCOPED),
        SEG("GET", SB, wire_sandbox_info, ACCESS_OWNED),
        SEG("PATCH", SB, wire_sandbox_update, ACCESS_FULL),
        SEG("DELETE", SB, wire_sandbox_delete, ACCESS_OWNED),
        SEG(NULL, SB "/commands", route_commands, ACCESS_OWNED),
        SEG(NULL, SB "/commands/{name}", route_commands, ACCESS_OWNED),
        SEG(NULL, SB "/code", route_code, ACCESS_FULL),
        SEG(NULL, SB "/tools/{name}", wire_sandbox_tool, ACCESS_FULL),
        SEG(NULL, SB "/exec", route_sandbox_op, ACCESS_FULL),
        SEG(NULL, SB "/walk", route_sandbox_op, ACCESS_FULL),
        SEG(NULL, SB "/mkdir", route_sandbox_op, ACCESS_FULL),
        SEG(NULL, SB "/rmdir", route_sandbox_op, ACCESS_FULL),
        SEG(NULL, SB "/rename", route_sandbox_op, ACCESS_FULL),
        SEG(NULL, SB "/processes/{*}", route_sandbox_op, ACCESS_FULL),
};
const unsigned api_n_routes = sizeof(api_routes) / sizeof(api_routes[0]);

/* --- matching --- */

/* A raw pattern against path: literal bytes, {id} (captured into m->id
 * when 1..API_ROUTE_ID_MAX-1 bytes) and a final {*}. */
static bool
match_raw(const char *pat, const char *path, struct api_route_match *m)
{
    while (*pat) {
        if (!strcmp(pat, "{*}")) {
            m->r.tail = path;
            return true;
        }
        if (!strncmp(pat, "{id}", 4)) {
            size_t n = strcspn(path, "/");
            if (n > 0 && n < sizeof(m->id)) {
                memcpy(m->id, path, n);
                m->id[n] = '\0';
                m->r.id = m->id;
            }
            path += n;
            pat += 4;
            continue;
        }
        if (*pat++ != *path++)
            return false;
    }
    return *path == '\0';
}

/* A segment pattern against the n segments of the path. */
static bool
match_seg(const char *pat, char **seg, int n, struct api_route_match *m)
{
    char buf[128];
    char *ps[API_MAX_SEGMENTS];
    int np, i;

    (void)snprintf(buf, sizeof(buf), "%s", pat);
    np = api_split(buf, ps, API_MAX_SEGMENTS);
    const char *id = NULL, *name = NULL;
    for (i = 0; i < np; i++) {
        if (!strcmp(ps[i], "{*}") && i == np - 1)
            break;
        if (i >= n)
            return false;
        if (ps[i][0] == '{') {
            if (!id)
                id = seg[i];
            else
                name = seg[i];
        } else if (strcmp(ps[i], seg[i])) {
            return false;
        }
    }
    if (i == np && i != n)
        return false;
    m->r.id = id;
    m->r.name = name;
    return true;
}

static void
allow_add(struct api_route_match *m, const char *method)
{
    size_t l = strlen(m->allow);
    (void)snprintf(m->allow + l, sizeof(m->allow) - l, "%s%s", l ? ", " : "", method);
}

int
api_route_find(const char *method, const char *path, bool open, struct api_route_match *m)
{
    int n = -2; /* not split yet */

    memset(m, 0, sizeof(*m));
    m->r.path = path;
    for (unsigned i = 0; i < api_n_routes; i++) {
        const struct api_route *rt = &api_routes[i];
        if ((rt->access == ACCESS_OPEN) != open)
            continue;
        m->r.id = m->r.name = m->r.tail = NULL;
        m->r.seg = NULL;
        m->r.n = 0;
        if (rt->kind == ROUTE_RAW) {
            if (!match_raw(rt->pattern, path, m))
                continue;
        } else {
            if (n == -2) {
                if (strlen(path) >= sizeof(m->copy))
                    return m->allow[0] ? -ENOENT : -E2BIG;
                memcpy(m->copy, path, strlen(path) + 1);
                n = api_split(m->copy, m->seg, API_MAX_SEGMENTS);
            }
            if (n < 0 || !match_seg(rt->pattern, m->seg, n, m))
                continue;
            m->r.seg = m->seg;
            m->r.n = n;
        }
        if (!rt->method || !strcmp(rt->method, method) || (rt->head && !strcmp(method, "HEAD")))
            return (int)i;
        allow_add(m, rt->method);
    }
    return -ENOENT;
}

/* --- api_begin --- */

static void
method_not_allowed(struct http_req *req, const char *allow)
{
    http_req_add_header(req, "Allow", allow);
    api_error_msg(req, 405, "method_not_allowed", "%s is not allowed on %.200s (allowed: %s)",
                  http_req_method(req), http_req_path(req), allow);
}

/* What a scoped key may reach is the access class of the route; a path
 * the table does not know (or a method it has not) is not among it. */
static bool
scope_gate(struct api *a, struct http_req *req, const struct api_scope *scope)
{
    const char *path = http_req_path(req);
    struct api_route_match m;
    char copy[API_PATH_MAX];
    char *seg[API_MAX_SEGMENTS];

    if (strlen(path) >= sizeof(copy)) {
        api_error_msg(req, 404, "not_found", "no route for that path");
        return false;
    }
    memcpy(copy, path, strlen(path) + 1);
    int i = api_split(copy, seg, API_MAX_SEGMENTS) < 0
                    ? -ENOENT
                    : api_route_find(http_req_method(req), path, false, &m);
    return api_access_allows(a, req, scope, i < 0 ? ACCESS_FULL : api_routes[i].access,
                             i < 0 ? NULL : m.r.id);
}

void
api_begin(struct http_req *req, void *ud)
{
    struct api *a = ud;
    const char *path = http_req_path(req);
    const char *method = http_req_method(req);
    struct api_route_match m;
    int i;

    a->m.requests++;
    http_req_set_userdata(req, a, NULL);
    /* Port forwarding (ports.c) comes before every route, health included. */
    uint16_t fwd_port;
    char fwd_id[PORTS_ID_MAX + 1];
    if (ports_match_host(http_req_header(req, "Host"), a->cfg.e2b_domain, &fwd_port, fwd_id,
                         sizeof(fwd_id))) {
        ports_begin(a, req, fwd_port, fwd_id);
        return;
    }
    i = api_route_find(method, path, true, &m);
    if (i >= 0 || m.allow[0]) {
        if (i >= 0)
            api_routes[i].fn(a, req, &m.r);
        else
            method_not_allowed(req, m.allow);
        return;
    }
    /* E2B's SDK speaks its own auth (X-API-KEY, envd access tokens). */
    if (e2b_claims(req, path)) {
        e2b_begin(a, req, path);
        return;
    }
    const struct api_scope *scope = NULL;
    if (!api_authorized(a, req, &scope)) {
        a->m.errors_4xx++;
        return;
    }
    if (scope && !scope_gate(a, req, scope))
        return;
    i = api_route_find(method, path, false, &m);
    if (i >= 0) {
        m.r.scope = scope;
        api_routes[i].fn(a, req, &m.r);
    } else if (m.allow[0]) {
        method_not_allowed(req, m.allow);
    } else if (i == -E2BIG) {
        api_error_msg(req, 404, "not_found", "no route for %s %.100s...", method, path);
    } else {
        api_error_msg(req, 404, "not_found", "no route for %s %.200s", method, path);
    }
}
