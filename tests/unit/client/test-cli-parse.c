/*
 * test-cli-parse.c - the abx command line's pure parsers: ID:PATH (and
 * WS:PATH) operands, KEY=VALUE, decimals, durations, pids, basename and
 * join, --if-match values, and finding verbs and grouped verbs (`abx ws cp`).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"

static void
test_remote(void **state)
{
    char id[CLI_ID_MAX + 1];
    const char *path = NULL;
    (void)state;

    assert_int_equal(cli_parse_remote("j46zo8ij5r7l7fl5990j:/a/b.txt", id, sizeof(id), &path), 1);
    assert_string_equal(id, "j46zo8ij5r7l7fl5990j");
    assert_string_equal(path, "/a/b.txt");

    /* A relative path and an empty one are the sandbox's too. */
    assert_int_equal(cli_parse_remote("abc:x", id, sizeof(id), &path), 1);
    assert_string_equal(id, "abc");
    assert_string_equal(path, "x");
    assert_int_equal(cli_parse_remote("abc:", id, sizeof(id), &path), 1);
    assert_string_equal(path, "");
    /* Only the first ':' splits. */
    assert_int_equal(cli_parse_remote("Ab_-9:/a:b", id, sizeof(id), &path), 1);
    assert_string_equal(id, "Ab_-9");
    assert_string_equal(path, "/a:b");

    /* Local paths. */
    path = "untouched";
    assert_int_equal(cli_parse_remote("-", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("plain.txt", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("./a:b", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("/tmp/x:y", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("dir/a:b", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote(":abc", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("a.b:c", id, sizeof(id), &path), 0);
    assert_int_equal(cli_parse_remote("", id, sizeof(id), &path), 0);
    assert_string_equal(path, "untouched");

    /* An id longer than fits. */
    char long_arg[CLI_ID_MAX + 8];
    memset(long_arg, 'a', CLI_ID_MAX + 1);
    memcpy(long_arg + CLI_ID_MAX + 1, ":/x", 4);
    assert_int_equal(cli_parse_remote(long_arg, id, sizeof(id), &path), -ENAMETOOLONG);
    char small[4];
    assert_int_equal(cli_parse_remote("abcd:/x", small, sizeof(small), &path), -ENAMETOOLONG);
    assert_int_equal(cli_parse_remote("abc:/x", small, sizeof(small), &path), 1);
    assert_string_equal(small, "abc");
}

static void
test_kv(void **state)
{
    char *key = NULL;
    const char *value = NULL;
    (void)state;

    assert_int_equal(cli_parse_kv("FOO=bar", &key, &value), 0);
    assert_string_equal(key, "FOO");
    assert_string_equal(value, "bar");
    free(key);
    assert_int_equal(cli_parse_kv("A=b=c", &key, &value), 0);
    assert_string_equal(key, "A");
    assert_string_equal(value, "b=c");
    free(key);
    assert_int_equal(cli_parse_kv("EMPTY=", &key, &value), 0);
    assert_string_equal(key, "EMPTY");
    assert_string_equal(value, "");
    free(key);
    key = NULL;
    assert_int_equal(cli_parse_kv("=x", &key, &value), -EINVAL);
    assert_int_equal(cli_parse_kv("novalue", &key, &value), -EINVAL);
    assert_int_equal(cli_parse_kv("", &key, &value), -EINVAL);
    assert_null(key);
}

static void
test_decimal(void **state)
{
    double v = -1;
    (void)state;

    assert_int_equal(cli_parse_decimal("2", &v), 0);
    assert_true(v == 2.0);
    assert_int_equal(cli_parse_decimal("0.5", &v), 0);
    assert_true(v == 0.5);
    assert_int_equal(cli_parse_decimal(".25", &v), 0);
    assert_true(v == 0.25);
    assert_int_equal(cli_parse_decimal("1.", &v), 0);
    assert_true(v == 1.0);
    assert_int_equal(cli_parse_decimal("000123.4500", &v), 0);
    assert_true(v > 123.4499 && v < 123.4501);
    assert_int_equal(cli_parse_decimal("0", &v), 0);
    assert_true(v == 0.0);

    v = 42;
    assert_int_equal(cli_parse_decimal("", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal(".", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("-1", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("+1", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal(" 1", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("1 ", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("1e3", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("1.2.3", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("0x10", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("nan", &v), -EINVAL);
    assert_int_equal(cli_parse_decimal("1234567890123456", &v), -ERANGE);
    assert_true(v == 42); /* untouched on failure */
}

static void
test_seconds(void **state)
{
    double v = -1;
    (void)state;

    assert_int_equal(cli_parse_seconds("90", &v), 0);
    assert_true(v == 90.0);
    assert_int_equal(cli_parse_seconds("1.5", &v), 0);
    assert_true(v == 1.5);
    assert_int_equal(cli_parse_seconds("30s", &v), 0);
    assert_true(v == 30.0);
    assert_int_equal(cli_parse_seconds("1.5m", &v), 0);
    assert_true(v == 90.0);
    assert_int_equal(cli_parse_seconds("2h", &v), 0);
    assert_true(v == 7200.0);
    assert_int_equal(cli_parse_seconds("0", &v), 0);
    assert_true(v == 0.0);

    assert_int_equal(cli_parse_seconds("s", &v), -EINVAL);
    assert_int_equal(cli_parse_seconds("", &v), -EINVAL);
    assert_int_equal(cli_parse_seconds("5d", &v), -EINVAL);
    assert_int_equal(cli_parse_seconds("5ms", &v), -EINVAL);
    assert_int_equal(cli_parse_seconds("-5", &v), -EINVAL);
}

static void
test_pid(void **state)
{
    int pid = 0;
    (void)state;

    assert_int_equal(cli_parse_pid("1", &pid), 0);
    assert_int_equal(pid, 1);
    assert_int_equal(cli_parse_pid("2147483647", &pid), 0);
    assert_int_equal(pid, 2147483647);
    assert_int_equal(cli_parse_pid("0", &pid), -ERANGE);
    assert_int_equal(cli_parse_pid("2147483648", &pid), -ERANGE);
    assert_int_equal(cli_parse_pid("-3", &pid), -EINVAL);
    assert_int_equal(cli_parse_pid("3x", &pid), -EINVAL);
    assert_int_equal(cli_parse_pid("", &pid), -EINVAL);
    assert_int_equal(pid, 2147483647);
}

static void
test_basename_join(void **state)
{
    char *s = NULL;
    (void)state;

    assert_int_equal(cli_basename("/a/b/c.txt", &s), 0);
    assert_string_equal(s, "c.txt");
    free(s);
    assert_int_equal(cli_basename("c.txt", &s), 0);
    assert_string_equal(s, "c.txt");
    free(s);
    assert_int_equal(cli_basename("dir//", &s), 0);
    assert_string_equal(s, "dir");
    free(s);
    s = NULL;
    assert_int_equal(cli_basename("/", &s), -EINVAL);
    assert_int_equal(cli_basename("", &s), -EINVAL);
    assert_int_equal(cli_basename("a/..", &s), -EINVAL);
    assert_int_equal(cli_basename(".", &s), -EINVAL);
    assert_null(s);

    assert_int_equal(cli_join("/d1", "f", &s), 0);
    assert_string_equal(s, "/d1/f");
    free(s);
    assert_int_equal(cli_join("/d1///", "f", &s), 0);
    assert_string_equal(s, "/d1/f");
    free(s);
    assert_int_equal(cli_join("/", "f", &s), 0);
    assert_string_equal(s, "/f");
    free(s);
    assert_int_equal(cli_join("rel", "/f", &s), 0);
    assert_string_equal(s, "rel/f");
    free(s);
}

static void
test_remote_workspace(void **state)
{
    char id[CLI_ID_MAX + 1];
    const char *path = NULL;
    (void)state;

    /* Workspace ids are operands like sandbox ids. */
    assert_int_equal(cli_parse_remote("myws:/a.txt", id, sizeof(id), &path), 1);
    assert_string_equal(id, "myws");
    assert_string_equal(path, "/a.txt");
    assert_int_equal(cli_parse_remote("proj-1_b:dir/", id, sizeof(id), &path), 1);
    assert_string_equal(id, "proj-1_b");
    assert_string_equal(path, "dir/");
    /* The longest id there is fits exactly. */
    char arg[CLI_ID_MAX + 8];
    memset(arg, 'w', CLI_ID_MAX);
    memcpy(arg + CLI_ID_MAX, ":/x", 4);
    assert_int_equal(cli_parse_remote(arg, id, sizeof(id), &path), 1);
    assert_int_equal(strlen(id), CLI_ID_MAX);
    assert_string_equal(path, "/x");
    assert_int_equal(cli_parse_remote("./a.txt", id, sizeof(id), &path), 0);
}

static void
test_if_match(void **state)
{
    char *v = NULL;
    (void)state;

    assert_int_equal(cli_parse_if_match("5891b5b522d5df08", &v), 0);
    assert_string_equal(v, "5891b5b522d5df08");
    free(v);
    /* ETag quotes are optional. */
    assert_int_equal(cli_parse_if_match("\"abc\"", &v), 0);
    assert_string_equal(v, "abc");
    free(v);
    /* "" and '""' both mean "only if absent". */
    assert_int_equal(cli_parse_if_match("", &v), 0);
    assert_string_equal(v, "");
    free(v);
    assert_int_equal(cli_parse_if_match("\"\"", &v), 0);
    assert_string_equal(v, "");
    free(v);
    /* A lone quote is not a pair of them. */
    v = NULL;
    assert_int_equal(cli_parse_if_match("\"", &v), -EINVAL);
    assert_int_equal(cli_parse_if_match("a\"b", &v), -EINVAL);
    assert_int_equal(cli_parse_if_match("\"a\"b\"", &v), -EINVAL);
    assert_int_equal(cli_parse_if_match("abc\r\nX-Evil: 1", &v), -EINVAL);
    assert_int_equal(cli_parse_if_match("tab\there", &v), -EINVAL);
    assert_int_equal(cli_parse_if_match(NULL, &v), -EINVAL);
    char long_arg[CLI_IF_MATCH_MAX + 4];
    memset(long_arg, 'a', CLI_IF_MATCH_MAX + 1);
    long_arg[CLI_IF_MATCH_MAX + 1] = '\0';
    assert_int_equal(cli_parse_if_match(long_arg, &v), -EINVAL);
    assert_null(v);
    long_arg[CLI_IF_MATCH_MAX] = '\0';
    assert_int_equal(cli_parse_if_match(long_arg, &v), 0);
    assert_int_equal(strlen(v), CLI_IF_MATCH_MAX);
    free(v);
}

static int
run_nothing(struct cli *cli, int argc, char **argv)
{
    (void)cli;
    (void)argc;
    (void)argv;
    return 0;
}

static void
test_find_verb(void **state)
{
    static const struct verb ws[] = {
            {"ws rm", "WS...", "delete", "", run_nothing, NULL},
            {"ws rm-file", "WS PATH", "remove a file", "", run_nothing, NULL},
            {"ws cp", "SRC DST", "copy", "", run_nothing, NULL},
            {0},
    };
    static const struct verb top[] = {
            {"rm", "ID PATH", "remove a file", "", run_nothing, NULL},
            {"ws", "VERB", "workspaces", "", NULL, ws},
            {"wsx", "", "a name that starts like a group", "", run_nothing, NULL},
            {0},
    };
    (void)state;

    assert_ptr_equal(cli_find_verb(top, NULL, "rm"), &top[0]);
    assert_ptr_equal(cli_find_verb(top, NULL, "ws"), &top[1]);
    assert_ptr_equal(cli_find_verb(top, NULL, "wsx"), &top[2]);
    assert_null(cli_find_verb(top, NULL, "w"));
    assert_null(cli_find_verb(top, NULL, "ws rm")); /* a group's verb is not a top verb */
    assert_null(cli_find_verb(top, NULL, ""));
    assert_null(cli_find_verb(top, NULL, NULL));

    /* In a group, names are matched whole, after the group's. */
    assert_ptr_equal(cli_find_verb(ws, "ws", "rm"), &ws[0]);
    assert_ptr_equal(cli_find_verb(ws, "ws", "rm-file"), &ws[1]);
    assert_ptr_equal(cli_find_verb(ws, "ws", "cp"), &ws[2]);
    assert_null(cli_find_verb(ws, "ws", "rm-"));
    assert_null(cli_find_verb(ws, "ws", "ws rm"));
    assert_null(cli_find_verb(ws, "ws", ""));
    assert_null(cli_find_verb(ws, "w", "s rm"));
    assert_null(cli_find_verb(ws, "store", "rm"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_remote),
            cmocka_unit_test(test_kv),
            cmocka_unit_test(test_decimal),
            cmocka_unit_test(test_seconds),
            cmocka_unit_test(test_pid),
            cmocka_unit_test(test_basename_join),
            cmocka_unit_test(test_remote_workspace),
            cmocka_unit_test(test_if_match),
            cmocka_unit_test(test_find_verb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
