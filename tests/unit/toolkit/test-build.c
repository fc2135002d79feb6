/*
 * test-build.c - the tool bundle builder's pure parts: manifest validation,
 * the package content hash and the builder fingerprint. Building real
 * bundles is tests/integration/tools-build.test.mjs's.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "toolkit/build.h"
#include "util/fd.h"

static int
parse(const char *json, struct tools_build_manifest **ret, struct err *err)
{
    err_clear(err);
    return tools_build_manifest_parse(json, strlen(json), ret, err);
}

static void
expect_bad(const char *json, const char *needle)
{
    struct tools_build_manifest *m = NULL;
    struct err err = {0};

    assert_int_equal(parse(json, &m, &err), -EINVAL);
    assert_null(m);
    if (!strstr(err.msg, needle))
        fail_msg("message '%s' does not name '%s'", err.msg, needle);
}

static void
test_manifest_good(void **state)
{
    struct tools_build_manifest *m = NULL;
    struct err err = {0};

    assert_int_equal(parse("{\"name\": \"csv-summary\", \"kind\": \"cli\", \"description\": \"d\","
                           " \"build\": \"make\", \"files\": [\"share/x.txt\", \"lib\"],"
                           " \"run\": {\"exec\": \"bin/csv-summary\"}}",
                           &m, &err),
                     0);
    assert_string_equal(m->name, "csv-summary");
    assert_int_equal(m->kind, TOOLS_BUILD_KIND_CLI);
    assert_int_equal(m->run, TOOLS_BUILD_RUN_EXEC);
    assert_string_equal(m->run_path, "bin/csv-summary");
    assert_string_equal(m->build, "make");
    assert_int_equal(m->n_files, 2);
    assert_string_equal(m->files[1], "lib");
    m = tools_build_manifest_free(m);

    assert_int_equal(parse("{\"name\": \"sci_plot\", \"kind\": \"cli\", \"description\": \"\","
                           " \"run\": {\"python\": \"main.py\"}}",
                           &m, &err),
                     0);
    assert_int_equal(m->run, TOOLS_BUILD_RUN_PYTHON);
    assert_null(m->build);
    assert_int_equal(m->n_files, 0);
    m = tools_build_manifest_free(m);

    assert_int_equal(parse("{\"name\": \"python-stack\", \"kind\": \"carrier\", \"description\":"
                           " \"d\", \"python\": {\"modules\": [\"numpy\", \"os.path\"]}}",
                           &m, &err),
                     0);
    assert_int_equal(m->kind, TOOLS_BUILD_KIND_CARRIER);
    assert_int_equal(m->run, TOOLS_BUILD_RUN_NONE);
    assert_null(m->run_path);
    assert_int_equal(m->n_modules, 2);
    assert_string_equal(m->modules[1], "os.path");
    m = tools_build_manifest_free(m);
}

static void
test_manifest_bad(void **state)
{
#define RUN ", \"run\": {\"exec\": \"bin/x\"}"
    /* unknown keys are named, all of them */
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"versoin\": 1, "
               "\"x\": 2" RUN "}",
               "'versoin', 'x'");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"exec\": \"x\", \"args\": []}}",
               "'args'");
    expect_bad("{\"name\": \"a\", \"kind\": \"carrier\", \"description\": \"d\", \"python\": "
               "{\"module\": []}}",
               "'module'");
    /* names */
    expect_bad("{\"name\": \"Abc\", \"kind\": \"cli\", \"description\": \"d\"" RUN "}", "'name'");
    expect_bad("{\"name\": \"-a\", \"kind\": \"cli\", \"description\": \"d\"" RUN "}", "'name'");
    expect_bad("{\"name\": \"a b\", \"kind\": \"cli\", \"description\": \"d\"" RUN "}", "'name'");
    expect_bad("{\"name\": \"\", \"kind\": \"cli\", \"description\": \"d\"" RUN "}", "'name'");
    expect_bad("{\"name\": "
               "\"a1234567890123456789012345678901234567890123456789012345678901234\", "
               "\"kind\": \"cli\", \"description\": \"d\"" RUN "}",
               "'name'");
    expect_bad("{\"name\": 7, \"kind\": \"cli\", \"description\": \"d\"" RUN "}", "name");
    /* kind, required fields, run */
    expect_bad("{\"name\": \"a\", \"kind\": \"lib\", \"description\": \"d\"" RUN "}", "'kind'");
    expect_bad("{\"name\": \"a\", \"description\": \"d\"" RUN "}", "kind");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\"" RUN "}", "description");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\"}", "'run'");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": {}}",
               "exactly one");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"exec\": \"x\", \"python\": \"y\"}}",
               "exactly one");
    expect_bad("{\"name\": \"a\", \"kind\": \"carrier\", \"description\": \"d\"" RUN "}",
               "carrier");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"python\": "
               "{\"modules\": []}" RUN "}",
               "carriers");
    expect_bad("{\"name\": \"a\", \"kind\": \"carrier\", \"description\": \"d\", \"python\": "
               "{\"modules\": [\"os; rm\"]}}",
               "module name");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"build\": \"\"" RUN
               "}",
               "'build'");
    /* paths in files and run */
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "[\"../etc\"]" RUN "}",
               "'..'");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "[\"a/../../b\"]" RUN "}",
               "'..'");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "[\"/etc/passwd\"]" RUN "}",
               "absolute");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "[\"a//b\"]" RUN "}",
               "empty");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "[\".env\"]" RUN "}",
               "hidden");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"files\": "
               "\"bin\"" RUN "}",
               "array");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"exec\": \"/bin/sh\"}}",
               "absolute");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"exec\": \"../x\"}}",
               "'..'");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"python\": \"my tool.py\"}}",
               "only letters");
    expect_bad("{\"name\": \"a\", \"kind\": \"cli\", \"description\": \"d\", \"run\": "
               "{\"exec\": \"$(id)\"}}",
               "only letters");
    /* not a manifest at all */
    expect_bad("[1]", "object");
    expect_bad("{\"name\": \"a\",", "invalid JSON");
#undef RUN
}

/* --- the source hash --- */

static char *
mk_tmpdir(void)
{
    char *d = strdup("/tmp/abx-test-build.XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static void
put(int dfd, const char *name, const char *s, mode_t mode)
{
    assert_int_equal(write_file_at(dfd, name, s, mode), 0);
    assert_int_equal(fchmodat(dfd, name, mode, 0), 0);
}

static void
hash(int dfd, char out[TOOLS_BUILD_HASH_HEX])
{
    struct err err = {0};
    if (tools_build_source_hash(dfd, out, &err) < 0)
        fail_msg("hash: %s", err.msg);
    assert_int_equal(strlen(out), 64);
}

static void
test_source_hash(void **state)
{
    char *dir = mk_tmpdir();
    char h0[TOOLS_BUILD_HASH_HEX], h[TOOLS_BUILD_HASH_HEX];
    struct err err = {0};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    assert_true(dfd >= 0);
    assert_int_equal(mkdirat(dfd, "bin", 0755), 0);
    put(dfd, "abx-tool.json", "{}", 0644);
    put(dfd, "bin/tool", "#!/bin/sh\n", 0755);
    put(dfd, "main.c", "int main(void) { return 0; }\n", 0644);
    hash(dfd, h0);

    /* stable */
    hash(dfd, h);
    assert_string_equal(h, h0);

    /* hidden entries and __pycache__ do not count */
    assert_int_equal(mkdirat(dfd, ".git", 0755), 0);
    put(dfd, ".git/HEAD", "ref: x\n", 0644);
    put(dfd, ".env", "A=1\n", 0644);
    assert_int_equal(mkdirat(dfd, "__pycache__", 0755), 0);
    put(dfd, "__pycache__/m.pyc", "x", 0644);
    hash(dfd, h);
    assert_string_equal(h, h0);

    /* content, even of the same length and mtime */
    put(dfd, "main.c", "int main(void) { return 1; }\n", 0644);
    hash(dfd, h);
    assert_string_not_equal(h, h0);
    put(dfd, "main.c", "int main(void) { return 0; }\n", 0644);
    hash(dfd, h);
    assert_string_equal(h, h0);

    /* the exec bit */
    assert_int_equal(fchmodat(dfd, "main.c", 0755, 0), 0);
    hash(dfd, h);
    assert_string_not_equal(h, h0);
    assert_int_equal(fchmodat(dfd, "main.c", 0644, 0), 0);
    hash(dfd, h);
    assert_string_equal(h, h0);

    /* a rename, also into a directory; an empty file added */
    assert_int_equal(renameat(dfd, "main.c", dfd, "tool.c"), 0);
    hash(dfd, h);
    assert_string_not_equal(h, h0);
    assert_int_equal(renameat(dfd, "tool.c", dfd, "bin/main.c"), 0);
    hash(dfd, h);
    assert_string_not_equal(h, h0);
    assert_int_equal(renameat(dfd, "bin/main.c", dfd, "main.c"), 0);
    hash(dfd, h);
    assert_string_equal(h, h0);
    put(dfd, "empty", "", 0644);
    hash(dfd, h);
    assert_string_not_equal(h, h0);
    assert_int_equal(unlinkat(dfd, "empty", 0), 0);

    /* symlinks are refused, naming the path */
    assert_int_equal(symlinkat("/etc/passwd", dfd, "bin/link"), 0);
    assert_int_equal(tools_build_source_hash(dfd, h, &err), -ELOOP);
    assert_non_null(strstr(err.msg, "bin/link"));
    assert_int_equal(unlinkat(dfd, "bin/link", 0), 0);
    hash(dfd, h);
    assert_string_equal(h, h0);

    assert_int_equal(rm_rf_at(AT_FDCWD, dir), 0);
    close(dfd);
    free(dir);
}

/* --- the fingerprint --- */

static void
test_fingerprint(void **state)
{
    char *dir = mk_tmpdir();
    char inc[256], lib[256], py[256];
    char f0[TOOLS_BUILD_HASH_HEX], f[TOOLS_BUILD_HASH_HEX];
    struct err err = {0};
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    assert_true(dfd >= 0);
    assert_int_equal(mkdirat(dfd, "abx", 0755), 0);
    put(dfd, "abx/tool.h", "/* tool.h */\n", 0644);
    put(dfd, "libabxtool.a", "!<arch>\n", 0644);
    put(dfd, "abx_tool.py", "# sdk\n", 0644);
    (void)snprintf(inc, sizeof(inc), "%s", dir);
    (void)snprintf(lib, sizeof(lib), "%s/libabxtool.a", dir);
    (void)snprintf(py, sizeof(py), "%s", dir);
    struct tools_build_sdk sdk = {.include_dir = inc, .lib = lib, .python_dir = py};
    struct tools_build_templates t = tools_build_templates_default;

    assert_int_equal(tools_build_fingerprint(&t, &sdk, f0, &err), 0);
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_equal(f, f0);

    /* any template */
    t.python = "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n";
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_not_equal(f, f0);
    t = tools_build_templates_default;
    t.carrier = "#!/bin/sh\necho '[]'\n";
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_not_equal(f, f0);
    t = tools_build_templates_default;

    /* any SDK file */
    put(dfd, "abx_tool.py", "# sdk 2\n", 0644);
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_not_equal(f, f0);
    put(dfd, "abx_tool.py", "# sdk\n", 0644);
    put(dfd, "libabxtool.a", "!<arch>\nx", 0644);
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_not_equal(f, f0);
    put(dfd, "libabxtool.a", "!<arch>\n", 0644);
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), 0);
    assert_string_equal(f, f0);

    /* a missing one is an error naming it */
    assert_int_equal(unlinkat(dfd, "abx/tool.h", 0), 0);
    assert_int_equal(tools_build_fingerprint(&t, &sdk, f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "abx/tool.h"));

    assert_int_equal(rm_rf_at(AT_FDCWD, dir), 0);
    close(dfd);
    free(dir);
}

static void
test_templates(void **state)
{
    const struct tools_build_templates *t = &tools_build_templates_default;

    /* POSIX sh, the substitutions, the rules the seeds learned the hard way */
    assert_true(!strncmp(t->exec, "#!/bin/sh\n", 10));
    assert_true(!strncmp(t->python, "#!/bin/sh\n", 10));
    assert_true(!strncmp(t->carrier, "#!/bin/sh\n", 10));
    assert_non_null(strstr(t->exec, "exec \"$d/@RUN@\" \"$@\""));
    assert_non_null(strstr(t->python, "/usr/bin/python3 -s \"$d/@RUN@\""));
    assert_non_null(strstr(t->python, "PYTHONDONTWRITEBYTECODE=1"));
    assert_non_null(strstr(t->carrier, "PIP_BREAK_SYSTEM_PACKAGES=1"));
    assert_non_null(strstr(t->carrier, "-m pip"));
    assert_non_null(strstr(t->carrier, "echo '[]'"));
    const char *tpls[] = {t->exec, t->python, t->carrier};
    for (size_t i = 0; i < 3; i++) {
        assert_non_null(strstr(tpls[i], "mktemp -d"));
        assert_null(strstr(tpls[i], "HOME=/tmp"));
        assert_null(strstr(tpls[i], "[["));
        assert_null(strstr(tpls[i], "function "));
    }
}

static void
test_names(void **state)
{
    assert_true(tools_name_ok("a"));
    assert_true(tools_name_ok("csv-summary_2"));
    assert_true(tools_name_ok("0abc"));
    assert_false(tools_name_ok(""));
    assert_false(tools_name_ok("_a"));
    assert_false(tools_name_ok("a.b"));
    assert_false(tools_name_ok("a/b"));
    assert_false(tools_name_ok("A"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_manifest_good), cmocka_unit_test(test_manifest_bad),
            cmocka_unit_test(test_source_hash),   cmocka_unit_test(test_fingerprint),
            cmocka_unit_test(test_templates),     cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
