/*
 * fuzz-tool-manifest.c - tools_build_manifest_parse() on arbitrary bytes.
 * Invariants: it returns 0 or -EINVAL (-ENOMEM aside) and fills the
 * message on failure; an accepted manifest has a valid name, a run path
 * exactly when it is a cli package, and only relative paths without empty,
 * ".", ".." or hidden components (the builder joins them to directories).
 */
#include <errno.h>

#include "fuzz-common.h"
#include "toolkit/build.h"

static void
check_rel(const char *p)
{
    CHECK(p && p[0] && p[0] != '/');
    const char *s = p;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        CHECK(n > 0);
        CHECK(s[0] != '.');
        s += n + (e ? 1 : 0);
        if (e)
            CHECK(*s);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tools_build_manifest *m = NULL;
    struct err e = {0};

    if (size > 65536)
        return 0;
    int r = tools_build_manifest_parse((const char *)data, size, &m, &e);
    if (r == -ENOMEM)
        return 0;
    CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        CHECK(m == NULL);
        CHECK(e.msg[0] && strlen(e.msg) < ERR_MSG_MAX);
        return 0;
    }
    CHECK(m && tools_name_ok(m->name));
    CHECK(m->description);
    CHECK((m->kind == TOOLS_BUILD_KIND_CARRIER) == (m->run_path == NULL));
    if (m->run_path)
        check_rel(m->run_path);
    for (size_t i = 0; i < m->n_files; i++)
        check_rel(m->files[i]);
    tools_build_manifest_free(m);
    return 0;
}
