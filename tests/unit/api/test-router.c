/*
 * test-router.c - the native route table and the scope gate that reads it.
 *
 * Every route is reached by at least one example, with the pieces of the
 * path its pattern names; wrong methods make 405 with the route's methods,
 * unknown paths 404, long paths skip the segment routes. What a scoped key
 * may reach through the table is compared, over many requests, with the
 * rule the router applied by its own path matching before the table
 * existed (old_scope_ok below), so the two cannot have drifted apart. And
 * the key check both the bearer and E2B's X-API-KEY use.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/api-internal.h"
#include "api/router.h"
#include "util/parse.h"

static int
find(const char *method, const char *path, struct api_route_match *m)
{
    int i = api_route_find(method, path, true, m);
    if (i >= 0 || m->allow[0])
        return i;
    return api_route_find(method, path, false, m);
}

static void
test_every_route(void **state)
{
    static const struct {
        const char *method, *path, *pattern;
        enum api_access access;
        const char *id, *name, *tail;
    } ex[] = {
            {"GET", "/healthz", "/healthz", ACCESS_OPEN, NULL, NULL, NULL},
            {"HEAD", "/healthz", "/healthz", ACCESS_OPEN, NULL, NULL, NULL},
            {"GET", "/readyz", "/readyz", ACCESS_OPEN, NULL, NULL, NULL},
            {"HEAD", "/readyz", "/readyz", ACCESS_OPEN, NULL, NULL, NULL},
            {"POST", "/drain", "/drain", ACCESS_FULL, NULL, NULL, NULL},
            {"GET", "/metrics", "/metrics", ACCESS_FULL, NULL, NULL, NULL},
            {"GET", "/v1/workspaces", "/v1/workspaces", ACCESS_FULL, NULL, NULL, NULL},
            {"PUT", "/v1/workspaces/w/files/a", "/v1/workspaces/{*}", ACCESS_FULL, NULL, NULL,
             "w/files/a"},
            {"GET", "/v1/tools", "/v1/tools", ACCESS_FULL, NULL, NULL, NULL},
            {"GET", "/v1/tools/x", "/v1/tools/{*}", ACCESS_FULL, NULL, NULL, "x"},
            {"GET", "/v1/tool-packages", "/v1/tool-packages", ACCESS_FULL, NULL, NULL, NULL},
            {"GET", "/v1/templates", "/v1/templates", ACCESS_SCOPED, NULL, NULL, NULL},
            {"POST", "/v1/templates", "/v1/templates", ACCESS_SCOPED, NULL, NULL, NULL},
            {"GET", "/v1/templates/t/x/y", "/v1/templates/{*}", ACCESS_SCOPED, NULL, NULL, "t/x/y"},
            {"POST", "/v1/store/gc", "/v1/store/{*}", ACCESS_FULL, NULL, NULL, "gc"},
            {"GET", "/v1/sandboxes/abc/files/a//b", "/v1/sandboxes/{id}/files/{*}", ACCESS_FULL,
             "abc", NULL, "a//b"},
            {"PUT", "/v1/sandboxes//files/a", "/v1/sandboxes/{id}/files/{*}", ACCESS_FULL, NULL,
             NULL, "a"},
            {"GET", "/v1/sandboxes", "v1/sandboxes", ACCESS_FULL, NULL, NULL, NULL},
            {"POST", "/v1//sandboxes/", "v1/sandboxes", ACCESS_SCOPED, NULL, NULL, NULL},
            {"GET", "/v1/sandboxes/abc", "v1/sandboxes/{id}", ACCESS_OWNED, "abc", NULL, NULL},
            {"PATCH", "/v1/sandboxes/abc", "v1/sandboxes/{id}", ACCESS_FULL, "abc", NULL, NULL},
            {"DELETE", "/v1/sandboxes/abc", "v1/sandboxes/{id}", ACCESS_OWNED, "abc", NULL, NULL},
            {"GET", "/v1/sandboxes/abc/commands", "v1/sandboxes/{id}/commands", ACCESS_OWNED, "abc",
             NULL, NULL},
            {"POST", "/v1/sandboxes/abc/commands/run", "v1/sandboxes/{id}/commands/{name}",
             ACCESS_OWNED, "abc", "run", NULL},
            {"POST", "/v1/sandboxes/abc/code", "v1/sandboxes/{id}/code", ACCESS_FULL, "abc", NULL,
             NULL},
            {"POST", "/v1/sandboxes/abc/tools/t", "v1/sandboxes/{id}/tools/{name}", ACCESS_FULL,
             "abc", "t", NULL},
            {"POST", "/v1/sandboxes/abc/exec", "v1/sandboxes/{id}/exec", ACCESS_FULL, "abc", NULL,
             NULL},
            {"GET", "/v1/sandboxes/abc/exec", "v1/sandboxes/{id}/exec", ACCESS_FULL, "abc", NULL,
             NULL}, /* the handler answers 405 (as it did) */
            {"POST", "/v1/sandboxes/abc/walk", "v1/sandboxes/{id}/walk", ACCESS_FULL, "abc", NULL,
             NULL},
            {"POST", "/v1/sandboxes/abc/mkdir", "v1/sandboxes/{id}/mkdir", ACCESS_FULL, "abc", NULL,
             NULL},
            {"POST", "/v1/sandboxes/abc/rmdir", "v1/sandboxes/{id}/rmdir", ACCESS_FULL, "abc", NULL,
             NULL},
            {"POST", "/v1/sandboxes/abc/rename", "v1/sandboxes/{id}/rename", ACCESS_FULL, "abc",
             NULL, NULL},
            {"GET", "/v1/sandboxes/abc/processes", "v1/sandboxes/{id}/processes/{*}", ACCESS_FULL,
             "abc", NULL, NULL},
            {"POST", "/v1/sandboxes/abc/processes/12/signal", "v1/sandboxes/{id}/processes/{*}",
             ACCESS_FULL, "abc", NULL, NULL},
    };
    bool hit[64] = {false};
    struct api_route_match m;
    (void)state;

    assert_true(api_n_routes <= ELEMENTSOF(hit));
    for (size_t k = 0; k < ELEMENTSOF(ex); k++) {
        int i = find(ex[k].method, ex[k].path, &m);
        if (i < 0)
            fail_msg("%s %s: no route", ex[k].method, ex[k].path);
        assert_string_equal(api_routes[i].pattern, ex[k].pattern);
        assert_int_equal(api_routes[i].access, ex[k].access);
        if (ex[k].id)
            assert_string_equal(m.r.id, ex[k].id);
        else
            assert_null(m.r.id);
        if (ex[k].name)
            assert_string_equal(m.r.name, ex[k].name);
        else
            assert_null(m.r.name);
        if (ex[k].tail)
            assert_string_equal(m.r.tail, ex[k].tail);
        assert_ptr_equal(m.r.path, ex[k].path);
        hit[i] = true;
    }
    for (unsigned i = 0; i < api_n_routes; i++)
        if (!hit[i])
            fail_msg("route %s %s has no example",
                     api_routes[i].method ? api_routes[i].method : "*", api_routes[i].pattern);
}

static void
test_405_404(void **state)
{
    static const struct {
        const char *method, *path, *allow;
    } ex[] = {
            {"POST", "/healthz", "GET"},
            {"DELETE", "/readyz", "GET"},
            {"GET", "/drain", "POST"},
            {"HEAD", "/metrics", "GET"},
            {"PUT", "/v1/sandboxes", "GET, POST"},
            {"HEAD", "/v1/sandboxes/abc", "GET, PATCH, DELETE"},
            {"GET", "/nope", ""},
            {"GET", "/healthz/", ""},
            {"GET", "/v1/templatesx", ""},
            {"GET", "/v1/store", ""},
            {"GET", "/v1/sandboxes/abc/exec/x", ""},
            {"GET", "/v1/sandboxes/abc/commands/a/b", ""},
            {"GET", "/v1/sandboxes/abc/files", ""},
            {"GET", "/v1/a/b/c/d/e/f/g/h/i", ""}, /* more than API_MAX_SEGMENTS */
            {"GET", "/", ""},
    };
    struct api_route_match m;
    (void)state;

    for (size_t k = 0; k < ELEMENTSOF(ex); k++) {
        int i = find(ex[k].method, ex[k].path, &m);
        if (i >= 0)
            fail_msg("%s %s: matched %s", ex[k].method, ex[k].path, api_routes[i].pattern);
        assert_int_equal(i, -ENOENT);
        assert_string_equal(m.allow, ex[k].allow);
    }

    /* Long paths: raw routes still see them, segment routes do not. */
    char p[API_PATH_MAX + 32];
    memset(p, 'a', sizeof(p) - 1);
    p[sizeof(p) - 1] = '\0';
    memcpy(p, "/v1/sandboxes/", 14);
    assert_int_equal(find("GET", p, &m), -E2BIG);
    memcpy(p, "/v1/templates/", 14);
    assert_true(find("GET", p, &m) >= 0);
}

/* The scope rule as api_begin applied it by its own matching, before the
 * route table: allowed, or refused (403) before any routing. */
static bool
old_scope_ok(const char *method, const char *path)
{
    char copy[512];
    char *seg[API_MAX_SEGMENTS];
    if (strlen(path) >= sizeof(copy))
        return false;
    (void)strscpy(copy, path, sizeof(copy));
    int n = api_split(copy, seg, API_MAX_SEGMENTS);
    return n >= 2 && !strcmp(seg[0], "v1") &&
           (!strcmp(seg[1], "templates") ||
            (!strcmp(seg[1], "sandboxes") &&
             (n == 2   ? !strcmp(method, "POST")
              : n == 3 ? !strcmp(method, "GET") || !strcmp(method, "DELETE")
                       : (n == 4 || n == 5) && !strcmp(seg[3], "commands"))));
}

static bool
new_scope_ok(const char *method, const char *path)
{
    struct api_route_match m;
    char copy[512];
    char *seg[API_MAX_SEGMENTS];
    if (strlen(path) >= sizeof(copy))
        return false;
    (void)strscpy(copy, path, sizeof(copy));
    if (api_split(copy, seg, API_MAX_SEGMENTS) < 0)
        return false;
    int i = api_route_find(method, path, false, &m);
    static const struct api_scope s = {0};
    /* an owned route on a sandbox the key created */
    struct entry e = {.scope = &s};
    return api_access_check(&s, i < 0 ? ACCESS_FULL : api_routes[i].access, &e) == 0;
}

static void
test_scope_same_as_before(void **state)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
    static const char *const paths[] = {
            "/v1/templates",
            "/v1/templates/t",
            "/v1/templates/t/commands",
            "/v1/templates/a/b/c/d/e",
            "/v1/templatesx",
            "/v1/sandboxes",
            "/v1/sandboxes/",
            "/v1//sandboxes",
            "/v1/sandboxes/abc",
            "/v1/sandboxes//abc/",
            "/v1/sandboxes/abc/commands",
            "/v1/sandboxes/abc/commands/x",
            "/v1/sandboxes/abc/commands/x/y",
            "/v1/sandboxes/abc/code",
            "/v1/sandboxes/abc/tools/x",
            "/v1/sandboxes/abc/exec",
            "/v1/sandboxes/abc/files/a",
            "/v1/sandboxes/abc/files/commands",
            "/v1/sandboxes/abc/processes",
            "/v1/sandboxes/abc/processes/1/signal",
            "/v1/sandboxes/abc/walk",
            "/v1/workspaces",
            "/v1/workspaces/w",
            "/v1/tools",
            "/v1/tool-packages",
            "/v1/store/gc",
            "/drain",
            "/metrics",
            "/nope",
            "/v1",
            "/",
    };
    (void)state;

    for (size_t p = 0; p < ELEMENTSOF(paths); p++)
        for (size_t k = 0; k < ELEMENTSOF(methods); k++)
            if (old_scope_ok(methods[k], paths[p]) != new_scope_ok(methods[k], paths[p]))
                fail_msg("%s %s: was %s", methods[k], paths[p],
                         old_scope_ok(methods[k], paths[p]) ? "allowed" : "refused");
}

static void
test_access_check(void **state)
{
    struct api_scope s = {0}, other = {0};
    struct entry mine = {.scope = &s}, theirs = {.scope = &other}, full = {.scope = NULL};
    (void)state;

    /* The full key may use every route, on every sandbox. */
    for (int acc = ACCESS_OPEN; acc <= ACCESS_OWNED; acc++) {
        assert_int_equal(api_access_check(NULL, acc, &theirs), 0);
        assert_int_equal(api_access_check(NULL, acc, NULL), 0);
    }
    assert_int_equal(api_access_check(&s, ACCESS_OPEN, NULL), 0);
    assert_int_equal(api_access_check(&s, ACCESS_SCOPED, NULL), 0);
    assert_int_equal(api_access_check(&s, ACCESS_FULL, &mine), -EPERM);
    assert_int_equal(api_access_check(&s, ACCESS_OWNED, &mine), 0);
    assert_int_equal(api_access_check(&s, ACCESS_OWNED, &theirs), -ENOENT);
    assert_int_equal(api_access_check(&s, ACCESS_OWNED, &full), -ENOENT);
    assert_int_equal(api_access_check(&s, ACCESS_OWNED, NULL), -ENOENT);
}

static void
test_key_check(void **state)
{
    char key[] = "full-key-0123456789", scoped_key[] = "scoped-key-0123456789";
    struct api_scope scopes[] = {{.key = scoped_key}};
    struct api a = {.api_key = key, .scopes = scopes, .n_scopes = 1};
    const struct api_scope *s = &scopes[0];
    (void)state;

    assert_int_equal(api_key_check(&a, "full-key-0123456789", &s), 0);
    assert_null(s);
    assert_int_equal(api_key_check(&a, "scoped-key-0123456789", &s), 0);
    assert_ptr_equal(s, &scopes[0]);
    assert_int_equal(api_key_check(&a, NULL, &s), -ENOKEY);
    assert_null(s);
    static const char *const bad[] = {"", "full-key-012345678", "full-key-01234567890",
                                      "scoped-key-012345678", "FULL-KEY-0123456789"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        assert_int_equal(api_key_check(&a, bad[i], &s), -EKEYREJECTED);
        assert_null(s);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_route),
            cmocka_unit_test(test_405_404),
            cmocka_unit_test(test_scope_same_as_before),
            cmocka_unit_test(test_access_check),
            cmocka_unit_test(test_key_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
