/*
 * test-registry.c - strict discovery of tool bundles in a real directory,
 * selection, lookup and the carrier's shims.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/registry.h"
#include "util/fd.h"
#include "util/rand.h"

static const char schema[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                             "\"required\":[\"a\"],\"additionalProperties\":false}";

struct fx {
    char dir[256];
};

static void
put(const char *dir, const char *rel, const char *content, mode_t mode)
{
    char path[PATH_MAX];
    (void)snprintf(path, sizeof(path), "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    assert_int_equal(mkdir_p(path, 0755), 0);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, content, strlen(content)), 0);
    (void)fchmod(fd, mode);
    close(fd);
}

/* A bundle with commands cmds ("a,b"), kind cli or carrier. */
static void
bundle(struct fx *f, const char *name, const char *kind, const char *cmds)
{
    char rel[256], list[1024] = "[";
    (void)snprintf(rel, sizeof(rel), "%s/launch", name);
    put(f->dir, rel, "#!/bin/sh\n", 0755);
    char copy[256];
    (void)snprintf(copy, sizeof(copy), "%s", cmds);
    (void)snprintf(rel, sizeof(rel), "%s/schemas", name);
    char path[PATH_MAX];
    (void)snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
    assert_int_equal(mkdir_p(path, 0755), 0);
    for (char *save = NULL, *c = strtok_r(copy, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(list);
        (void)snprintf(list + n, sizeof(list) - n, "%s{\"name\":\"%s\",\"description\":\"d %s\"}",
                       n > 1 ? "," : "", c, c);
        (void)snprintf(rel, sizeof(rel), "%s/schemas/%s.json", name, c);
        put(f->dir, rel, schema, 0644);
    }
    (void)strncat(list, "]", sizeof(list) - strlen(list) - 1);
    (void)snprintf(rel, sizeof(rel), "%s/commands.json", name);
    put(f->dir, rel, list, 0644);
    char stamp[256];
    (void)snprintf(stamp, sizeof(stamp), "{\"name\":\"%s\",\"kind\":\"%s\",\"built_at\":\"now\"}",
                   name, kind);
    (void)snprintf(rel, sizeof(rel), "%s/build-stamp.json", name);
    put(f->dir, rel, stamp, 0644);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char rnd[17];
    assert_non_null(f);
    assert_int_equal(rand_hex(rnd, 8), 0);
    (void)snprintf(f->dir, sizeof(f->dir), "/tmp/abx-test-registry-%s", rnd);
    assert_int_equal(mkdir_p(f->dir, 0755), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    assert_int_equal(rm_rf_at(AT_FDCWD, f->dir), 0);
    free(f);
    return 0;
}

static struct tools_registry *
load_ok(struct fx *f)
{
    struct tools_registry *r = NULL;
    struct err err = {0};
    int rc = tools_registry_load(f->dir, &r, &err);
    if (rc < 0)
        fail_msg("load: %s", err.msg);
    return r;
}

static void
load_fails(struct fx *f, int want, const char *needle)
{
    struct tools_registry *r = NULL;
    struct err err = {0};
    int rc = tools_registry_load(f->dir, &r, &err);
    assert_null(r);
    if (want)
        assert_int_equal(rc, want);
    else
        assert_true(rc < 0);
    if (!strstr(err.msg, needle))
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void
test_names(void **state)
{
    (void)state;
    assert_true(tools_name_ok("a"));
    assert_true(tools_name_ok("csv-summary_2"));
    assert_false(tools_name_ok(""));
    assert_false(tools_name_ok("-a"));
    assert_false(tools_name_ok("_a"));
    assert_false(tools_name_ok("A"));
    assert_false(tools_name_ok("a b"));
    assert_false(tools_name_ok("a/b"));
    assert_false(tools_name_ok("a:b"));
    char long_name[TOOLS_NAME_MAX + 2];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[TOOLS_NAME_MAX + 1] = '\0';
    assert_false(tools_name_ok(long_name));
    long_name[TOOLS_NAME_MAX] = '\0';
    assert_true(tools_name_ok(long_name));
}

static void
test_empty_and_missing(void **state)
{
    struct fx *f = *state;
    struct tools_registry *r = load_ok(f);
    assert_int_equal(tools_registry_count(r), 0);
    struct tools_pick *p = NULL;
    size_t n = 9;
    assert_int_equal(tools_select(r, NULL, &p, &n, NULL), 0);
    assert_int_equal(n, 0);
    tools_registry_free(r);

    struct err err = {0};
    assert_int_equal(tools_registry_load("/nonexistent/abx", &r, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/abx"));
    err_clear(&err);
    assert_int_equal(tools_registry_load("relative/dir", &r, &err), -EINVAL);
}

static void
test_select(void **state)
{
    struct fx *f = *state;
    bundle(f, "alpha", "cli", "echo,touch");
    bundle(f, "beta", "cli", "echo,other");
    bundle(f, "py", "carrier", "");
    char staging[PATH_MAX];
    (void)snprintf(staging, sizeof(staging), "%s/.alpha.tmp-xyz", f->dir);
    assert_int_equal(mkdir_p(staging, 0755), 0); /* ignored */
    struct tools_registry *r = load_ok(f);
    assert_int_equal(tools_registry_count(r), 3);
    assert_int_equal(tools_registry_commands(r), 4);
    assert_string_equal(tools_registry_carrier(r)->name, "py");

    struct tools_pick *p = NULL;
    size_t n = 0;
    struct err err = {0};
    /* none = all: echo clashes */
    assert_int_equal(tools_select(r, NULL, &p, &n, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "'echo' is exported by both 'alpha' and 'beta'"));
    /* empty = none */
    assert_int_equal(tools_select(r, "", &p, &n, NULL), 0);
    assert_int_equal(n, 0);
    assert_null(p);
    /* pkg, pkg:cmd, unknown skipped, duplicates once, blanks ignored */
    assert_int_equal(tools_select(r, " alpha , beta:other,nosuch,beta:nosuch,alpha:echo,,:,a:", &p,
                                  &n, NULL),
                     0);
    assert_int_equal(n, 3);
    assert_string_equal(p[0].cmd->name, "echo");
    assert_string_equal(p[0].pkg->name, "alpha");
    assert_string_equal(p[1].cmd->name, "touch");
    assert_string_equal(p[2].cmd->name, "other");
    assert_string_equal(p[2].pkg->name, "beta");
    free(p);
    /* the carrier exports nothing */
    assert_int_equal(tools_select(r, "py", &p, &n, NULL), 0);
    assert_int_equal(n, 0);

    struct tools_pick one;
    assert_int_equal(tools_lookup(r, "touch", &one, NULL), 0);
    assert_string_equal(one.pkg->name, "alpha");
    assert_int_equal(tools_lookup(r, "beta:echo", &one, NULL), 0);
    assert_string_equal(one.pkg->name, "beta");
    err_clear(&err);
    assert_int_equal(tools_lookup(r, "echo", &one, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "'alpha' and 'beta'"));
    assert_int_equal(tools_lookup(r, "nosuch", &one, NULL), -ENOENT);
    assert_int_equal(tools_lookup(r, "alpha:", &one, NULL), -ENOENT);
    assert_int_equal(tools_lookup(r, ":echo", &one, NULL), -ENOENT);
    assert_int_equal(tools_lookup(r, "", &one, NULL), -ENOENT);

    /* shims point at the carrier's launch */
    char shims[300], link[400];
    (void)snprintf(shims, sizeof(shims), "%s-shims", f->dir);
    assert_int_equal(tools_write_shims(r, shims, "/.tools", NULL), 1);
    (void)snprintf(link, sizeof(link), "%s/pip3", shims);
    char target[PATH_MAX];
    ssize_t k = readlink(link, target, sizeof(target) - 1);
    assert_true(k > 0);
    target[k] = '\0';
    assert_string_equal(target, "/.tools/py/launch");
    (void)snprintf(link, sizeof(link), "%s/python", shims);
    assert_true(readlink(link, target, sizeof(target)) > 0);

    /* a second start finds them as they should be and writes nothing */
    struct stat a, b;
    assert_int_equal(lstat(link, &a), 0);
    assert_int_equal(tools_write_shims(r, shims, "/.tools", NULL), 1);
    assert_int_equal(lstat(link, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
    assert_int_equal(a.st_ctim.tv_sec, b.st_ctim.tv_sec);
    assert_int_equal(a.st_ctim.tv_nsec, b.st_ctim.tv_nsec);
    /* another mount point, a missing or an extra entry: rewritten */
    assert_int_equal(tools_write_shims(r, shims, "/elsewhere", NULL), 1);
    k = readlink(link, target, sizeof(target) - 1);
    assert_true(k > 0);
    target[k] = '\0';
    assert_string_equal(target, "/elsewhere/py/launch");
    assert_int_equal(unlink(link), 0);
    assert_int_equal(tools_write_shims(r, shims, "/.tools", NULL), 1);
    assert_int_equal(lstat(link, &a), 0);
    (void)snprintf(link, sizeof(link), "%s/extra", shims);
    assert_int_equal(symlink("/.tools/py/launch", link), 0);
    assert_int_equal(tools_write_shims(r, shims, "/.tools", NULL), 1);
    assert_int_equal(lstat(link, &b), -1);
    tools_registry_free(r);
    assert_int_equal(rm_rf_at(AT_FDCWD, shims), 0);
}

static void
test_no_carrier_no_shims(void **state)
{
    struct fx *f = *state;
    bundle(f, "alpha", "cli", "echo");
    struct tools_registry *r = load_ok(f);
    char shims[300], link[400];
    (void)snprintf(shims, sizeof(shims), "%s-shims", f->dir);
    /* an old shim directory is replaced, not added to */
    assert_int_equal(mkdir_p(shims, 0755), 0);
    (void)snprintf(link, sizeof(link), "%s/pip", shims);
    assert_int_equal(symlink("/nowhere", link), 0);
    assert_int_equal(tools_write_shims(r, shims, "/.tools", NULL), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), -1);
    assert_int_equal(stat(shims, &st), 0);
    tools_registry_free(r);
    assert_int_equal(rm_rf_at(AT_FDCWD, shims), 0);
}

static void
test_strict(void **state)
{
    struct fx *f = *state;
    char path[PATH_MAX];

    bundle(f, "half", "cli", "go");
    (void)snprintf(path, sizeof(path), "%s/half/schemas/go.json", f->dir);
    assert_int_equal(unlink(path), 0);
    load_fails(f, 0, "command 'go' has no usable schema");

    put(f->dir, "half/schemas/go.json", "{\"type\":\"object\",\"oneOf\":[]}", 0644);
    load_fails(f, -EINVAL, "oneOf");

    put(f->dir, "half/schemas/go.json", "{not json", 0644);
    load_fails(f, -EINVAL, "not valid JSON");

    put(f->dir, "half/schemas/go.json", schema, 0644);
    put(f->dir, "half/commands.json", "{\"name\":\"go\"}", 0644);
    load_fails(f, -EINVAL, "not a JSON array");
    put(f->dir, "half/commands.json", "[{\"name\":\"Go!\",\"description\":\"\"}]", 0644);
    load_fails(f, -EINVAL, "bad command name");
    put(f->dir, "half/commands.json",
        "[{\"name\":\"go\",\"description\":\"\"},{\"name\":\"go\",\"description\":\"\"}]", 0644);
    load_fails(f, -EINVAL, "listed twice");
    put(f->dir, "half/commands.json", "[{\"name\":\"go\",\"description\":\"\"}]", 0644);
    put(f->dir, "half/build-stamp.json", "{\"kind\":\"library\"}", 0644);
    load_fails(f, -EINVAL, "no kind");
    put(f->dir, "half/build-stamp.json", "{\"kind\":\"cli\",\"name\":\"other\"}", 0644);
    load_fails(f, -EINVAL, "built as 'other'");
    put(f->dir, "half/build-stamp.json", "{\"kind\":\"carrier\"}", 0644);
    load_fails(f, -EINVAL, "carrier bundle lists no commands");
    put(f->dir, "half/build-stamp.json", "{\"kind\":\"cli\"}", 0644);
    put(f->dir, "half/launch", "#!/bin/sh\n", 0700);
    load_fails(f, -EINVAL, "every user can read and run");
    (void)snprintf(path, sizeof(path), "%s/half/launch", f->dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink("/bin/true", path), 0);
    load_fails(f, -EINVAL, "launch must be a regular file");
    assert_int_equal(unlink(path), 0);
    put(f->dir, "half/launch", "#!/bin/sh\n", 0755);
    struct tools_registry *r = load_ok(f);
    tools_registry_free(r);

    /* a stray file, a bad bundle name */
    put(f->dir, "README", "hello", 0644);
    load_fails(f, -EINVAL, "'README' in the tools directory is not a bundle name");
    (void)snprintf(path, sizeof(path), "%s/README", f->dir);
    assert_int_equal(unlink(path), 0);
    put(f->dir, "notes", "hello", 0644);
    load_fails(f, 0, "is not a directory");
    (void)snprintf(path, sizeof(path), "%s/notes", f->dir);
    assert_int_equal(unlink(path), 0);

    /* two carriers */
    bundle(f, "py1", "carrier", "");
    bundle(f, "py2", "carrier", "");
    load_fails(f, -EINVAL, "two carrier bundles, 'py1' and 'py2'");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_names),
            cmocka_unit_test_setup_teardown(test_empty_and_missing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_select, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_carrier_no_shims, setup, teardown),
            cmocka_unit_test_setup_teardown(test_strict, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
