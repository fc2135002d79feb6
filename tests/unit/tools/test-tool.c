/*
 * test-tool.c - abx_tool_main() in-process: the three stages, exit codes
 * 0/2/70, the schema generated from a declaration, defaults reaching the
 * run function, getters, and hostile calls (deep JSON, huge strings, NUL,
 * 1e400, duplicate keys, bool for integer). stdout and stderr are captured
 * by pointing fds 1 and 2 at temporary files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "abx/tool.h"

static char out[1 << 16], errtext[1 << 16];

static size_t
slurp(int fd, char *buf, size_t size)
{
    size_t n = 0;
    ssize_t k;
    (void)lseek(fd, 0, SEEK_SET);
    while (n < size - 1 && (k = read(fd, buf + n, size - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    return n;
}

/* Runs abx_tool_main(tool, argv...) with stdout and stderr captured. */
static int
run(const struct abx_tool *tool, void *userdata, ...)
{
    char *argv[8] = {"launch"};
    int argc = 1;
    va_list ap;

    va_start(ap, userdata);
    for (char *a; argc < 7 && (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);

    fflush(stdout);
    fflush(stderr);
    int save1 = dup(1), save2 = dup(2);
    FILE *t1 = tmpfile(), *t2 = tmpfile();
    assert_non_null(t1);
    assert_non_null(t2);
    dup2(fileno(t1), 1);
    dup2(fileno(t2), 2);
    int code = abx_tool_main(tool, argc, argv, userdata);
    fflush(stdout);
    fflush(stderr);
    dup2(save1, 1);
    dup2(save2, 2);
    close(save1);
    close(save2);
    slurp(fileno(t1), out, sizeof(out));
    slurp(fileno(t2), errtext, sizeof(errtext));
    fclose(t1);
    fclose(t2);
    return code;
}

/* What the run function saw. */
struct seen {
    int calls;
    char path[64];
    long long limit;
    double ratio;
    bool verbose, has_column;
    size_t ncols;
    char cols[4][16];
    const char *cmd;
};

static int
summarize(const struct abx_tool_args *a, void *userdata)
{
    struct seen *s = userdata;
    const char *const *cols;

    s->calls++;
    snprintf(s->path, sizeof(s->path), "%s", abx_tool_get_string(a, "path"));
    s->limit = abx_tool_get_int(a, "limit");
    s->ratio = abx_tool_get_number(a, "ratio");
    s->verbose = abx_tool_get_bool(a, "verbose");
    s->has_column = abx_tool_has(a, "column");
    s->ncols = abx_tool_get_strings(a, "columns", &cols);
    for (size_t i = 0; i < s->ncols && i < 4; i++)
        snprintf(s->cols[i], sizeof(s->cols[i]), "%s", cols[i]);
    assert_null(cols[s->ncols]);
    assert_null(abx_tool_get_string(a, "column") ? NULL : NULL);
    s->cmd = abx_tool_command_name(a);
    printf("{\"ok\":true}\n");
    if (!strcmp(s->path, "fail"))
        return abx_tool_error(a, 4, "cannot open '%s'", s->path);
    if (!strcmp(s->path, "big"))
        return 1000;
    return 0;
}

static const char *const modes[] = {"mean", "max", NULL};

static const struct abx_tool_arg summarize_args[] = {
        {"path", ABX_ARG_STRING, "CSV file", .required = true},
        {"column", ABX_ARG_STRING, NULL},
        {"mode", ABX_ARG_ENUM, "How", .default_json = "\"mean\"", .choices = modes},
        {"limit", ABX_ARG_INTEGER, NULL, .default_json = "10", .minimum = "1"},
        {"ratio", ABX_ARG_NUMBER, NULL, .default_json = "0.5"},
        {"verbose", ABX_ARG_BOOLEAN, NULL, .default_json = "false"},
        {"columns", ABX_ARG_STRING_ARRAY, NULL},
        {0},
};

static const struct abx_tool_command commands[] = {
        {"summarize", "Summarizes", summarize_args, summarize},
        {"noargs", "Nothing", NULL, summarize},
        {0},
};

static const struct abx_tool tool = {"csv-summary", "CSV", commands};

static void
test_list_and_schema(void **state)
{
    (void)state;
    assert_int_equal(run(&tool, NULL, NULL), 0);
    assert_string_equal(out, "[{\"name\":\"summarize\",\"description\":\"Summarizes\"},"
                             "{\"name\":\"noargs\",\"description\":\"Nothing\"}]\n");
    assert_string_equal(errtext, "");

    assert_int_equal(run(&tool, NULL, "summarize", NULL), 0);
    assert_string_equal(out,
                        "{\"type\":\"object\",\"description\":\"Summarizes\",\"properties\":{"
                        "\"path\":{\"type\":\"string\",\"description\":\"CSV file\"},"
                        "\"column\":{\"type\":\"string\"},"
                        "\"mode\":{\"type\":\"string\",\"enum\":[\"mean\",\"max\"],\"description\":"
                        "\"How\",\"default\":\"mean\"},"
                        "\"limit\":{\"type\":\"integer\",\"default\":10,\"minimum\":1},"
                        "\"ratio\":{\"type\":\"number\",\"default\":0.5},"
                        "\"verbose\":{\"type\":\"boolean\",\"default\":false},"
                        "\"columns\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                        "\"required\":[\"path\"],\"additionalProperties\":false}\n");

    assert_int_equal(run(&tool, NULL, "noargs", NULL), 0);
    assert_string_equal(out, "{\"type\":\"object\",\"description\":\"Nothing\",\"properties\":{},"
                             "\"additionalProperties\":false}\n");
}

static void
test_run(void **state)
{
    struct seen s = {0};
    (void)state;

    assert_int_equal(run(&tool, &s, "summarize", "{\"path\":\"a.csv\"}", NULL), 0);
    assert_int_equal(s.calls, 1);
    assert_string_equal(out, "{\"ok\":true}\n");
    assert_string_equal(s.path, "a.csv");
    assert_int_equal(s.limit, 10);
    assert_true(s.ratio == 0.5);
    assert_false(s.verbose);
    assert_false(s.has_column);
    assert_int_equal(s.ncols, 0);
    assert_string_equal(s.cmd, "summarize");

    assert_int_equal(run(&tool, &s, "summarize",
                         "{\"columns\":[\"a\",\"b\"],\"path\":\"p\",\"limit\":9223372036854775807,"
                         "\"ratio\":-0,\"verbose\":true,\"column\":\"x\"}",
                         NULL),
                     0);
    assert_int_equal(s.limit, 9223372036854775807LL);
    assert_true(s.ratio == 0);
    assert_true(s.verbose);
    assert_true(s.has_column);
    assert_int_equal(s.ncols, 2);
    assert_string_equal(s.cols[1], "b");

    /* the command's exit code, its message format, and codes out of range */
    assert_int_equal(run(&tool, &s, "summarize", "{\"path\":\"fail\"}", NULL), 4);
    assert_string_equal(errtext, "csv-summary: summarize: cannot open 'fail'\n");
    assert_int_equal(run(&tool, &s, "summarize", "{\"path\":\"big\"}", NULL), 1);
    assert_int_equal(s.calls, 4);
}

static void
expect_usage(const char *cmd, const char *args, const char *msg)
{
    struct seen s = {0};
    assert_int_equal(run(&tool, &s, cmd, args, NULL), ABX_TOOL_EXIT_USAGE);
    assert_int_equal(s.calls, 0);
    assert_string_equal(out, "");
    if (!strstr(errtext, msg))
        fail_msg("stderr '%s' lacks '%s'", errtext, msg);
    assert_non_null(strchr(errtext, '\n'));
    assert_ptr_equal(strchr(errtext, '\n'), errtext + strlen(errtext) - 1); /* one line */
}

static void
test_usage_errors(void **state)
{
    char *deep, *huge;
    (void)state;

    assert_int_equal(run(&tool, NULL, "summarize", "{}", "extra", NULL), 2);
    assert_string_equal(errtext,
                        "csv-summary: too many arguments (usage: launch [<command> [<json>]])\n");
    expect_usage("nope", NULL, "csv-summary: unknown command 'nope'\n");
    expect_usage("nope\x1b[2J", "{}", "csv-summary: unknown command 'nope\\u001b[2J'\n");
    expect_usage("summarize", "{}", "csv-summary: summarize: 'path' is required\n");
    expect_usage("summarize", "{\"path\":\"a\",\"limit\":\"5\"}",
                 "summarize: 'limit' must be an integer, not a string\n");
    expect_usage("summarize", "{\"path\":\"a\",\"limit\":true}",
                 "'limit' must be an integer, not a boolean");
    expect_usage("summarize", "{\"path\":\"a\",\"limit\":2.0}",
                 "'limit' must be an integer, not a decimal number");
    expect_usage("summarize", "{\"path\":\"a\",\"limit\":0}", "'limit' must be at least 1 (got 0)");
    expect_usage("summarize", "{\"path\":\"a\",\"mode\":\"avg\"}",
                 "'mode' must be one of \"mean\", \"max\" (got \"avg\")");
    expect_usage("summarize", "{\"path\":\"a\",\"colum\":\"x\"}", "unknown argument 'colum'");
    expect_usage("summarize", "", "invalid JSON arguments");
    expect_usage("summarize", "{", "invalid JSON arguments");
    expect_usage("summarize", "{\"path\":\"a\"} x", "invalid JSON arguments");
    expect_usage("summarize", "{\"path\":\"a\",\"path\":\"b\"}", "duplicate object key");
    expect_usage("summarize", "{\"path\":\"a\\u0000b\"}", "invalid JSON arguments");
    expect_usage("summarize", "{\"path\":\"a\",\"ratio\":1e400}", "invalid JSON arguments");
    expect_usage("summarize", "{\"path\":\"a\",\"limit\":99999999999999999999}",
                 "invalid JSON arguments");
    expect_usage("summarize", "{\"path\":\"\xff\"}", "invalid JSON arguments");
    expect_usage("summarize", "[\"path\"]", "arguments must be a JSON object, not an array");
    expect_usage("summarize", "null", "arguments must be a JSON object, not null");

    /* a million brackets stop at the pre-scan, not in jansson's recursion */
    deep = malloc(1000001);
    memset(deep, '[', 1000000);
    deep[1000000] = '\0';
    expect_usage("summarize", deep, "nested deeper than 64 levels");
    /* 64 levels parse, and then fail as the wrong type */
    deep[0] = '{';
    memcpy(deep + 1, "\"path\":", 7);
    memset(deep + 8, '[', 63);
    memset(deep + 71, ']', 63);
    deep[134] = '}';
    deep[135] = '\0';
    expect_usage("summarize", deep, "'path' must be a string, not an array");
    free(deep);

    /* a huge value is echoed cut short */
    huge = malloc(200000);
    memcpy(huge, "{\"path\":\"a\",\"mode\":\"", 20);
    memset(huge + 20, 'm', 199970);
    memcpy(huge + 199990, "\"}", 3);
    expect_usage("summarize", huge, "(got \"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm...\")");
    assert_true(strlen(errtext) < 300);
    free(huge);
}

static int
noop(const struct abx_tool_args *a, void *userdata)
{
    (void)a;
    (void)userdata;
    return 0;
}

static void
expect_decl(const struct abx_tool *t, const char *msg)
{
    /* every stage refuses a broken declaration */
    const char *stages[][2] = {{NULL, NULL}, {"c", NULL}, {"c", "{}"}};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(run(t, NULL, stages[i][0], stages[i][1], NULL), ABX_TOOL_EXIT_DECL);
        assert_string_equal(out, "");
        if (!strstr(errtext, msg))
            fail_msg("stderr '%s' lacks '%s'", errtext, msg);
    }
}

#define ONE_ARG(...)                                                            \
    do {                                                                        \
        const struct abx_tool_arg args_[] = {__VA_ARGS__, {0}};                 \
        const struct abx_tool_command cmds_[] = {{"c", "C", args_, noop}, {0}}; \
        const struct abx_tool t_ = {"t", NULL, cmds_};                          \
        expect_decl(&t_, msg_);                                                 \
    } while (0)

static void
test_declaration_errors(void **state)
{
    static const char *const none[] = {NULL};
    static const char *const dup[] = {"a", "a", NULL};
    static const char *const one[] = {"a", NULL};
    const char *msg_;
    (void)state;

    {
        const struct abx_tool_command cmds[] = {{"c", "C", NULL, noop}, {0}};
        const struct abx_tool bad_name = {"Bad", NULL, cmds};
        expect_decl(&bad_name, "abx-tool: invalid declaration: tool name 'Bad' is invalid");
        const struct abx_tool no_name = {NULL, NULL, cmds};
        expect_decl(&no_name, "abx-tool: invalid declaration: tool name '(null)'");
        const struct abx_tool no_cmds = {"t", NULL, NULL};
        expect_decl(&no_cmds, "the tool has no commands");
    }
    {
        const struct abx_tool_command cmds[] = {
                {"c", "C", NULL, noop}, {"c", "C", NULL, noop}, {0}};
        const struct abx_tool t = {"t", NULL, cmds};
        expect_decl(&t, "command 'c': declared twice");
    }
    {
        const struct abx_tool_command cmds[] = {{"c", NULL, NULL, noop}, {0}};
        const struct abx_tool t = {"t", NULL, cmds};
        expect_decl(&t, "command 'c': the description is missing");
    }
    {
        const struct abx_tool_command cmds[] = {{"c", "C", NULL, NULL}, {0}};
        const struct abx_tool t = {"t", NULL, cmds};
        expect_decl(&t, "command 'c': no run function");
    }
    {
        const struct abx_tool_command cmds[] = {{"c", "\xff", NULL, noop}, {0}};
        const struct abx_tool t = {"t", NULL, cmds};
        expect_decl(&t, "the description is not valid UTF-8");
    }
    {
        const struct abx_tool_command cmds[] = {{"C!", "C", NULL, noop}, {0}};
        const struct abx_tool t = {"t", NULL, cmds};
        assert_int_equal(run(&t, NULL, NULL), ABX_TOOL_EXIT_DECL);
        assert_non_null(strstr(errtext, "command 'C!': invalid name"));
    }
    msg_ = "argument '1x': invalid name";
    ONE_ARG({"1x"});
    msg_ = "argument 'a': declared twice";
    ONE_ARG({"a"}, {"a"});
    msg_ = "command 'c': property 'a': invalid \"default\": 'a' must be an integer, not a string";
    ONE_ARG({"a", ABX_ARG_INTEGER, .default_json = "\"10\""});
    msg_ = "'a' must be an integer, not a boolean";
    ONE_ARG({"a", ABX_ARG_INTEGER, .default_json = "true"});
    msg_ = "'a' must be an integer, not a decimal number";
    ONE_ARG({"a", ABX_ARG_INTEGER, .default_json = "1.5"});
    msg_ = "argument 'a': the default is not JSON";
    ONE_ARG({"a", ABX_ARG_STRING, .default_json = "mean"});
    msg_ = "a required argument cannot have a default";
    ONE_ARG({"a", ABX_ARG_STRING, .required = true, .default_json = "\"x\""});
    msg_ = "an enum argument needs choices";
    ONE_ARG({"a", ABX_ARG_ENUM});
    msg_ = "\"enum\" must be an array of 1 to 256 strings";
    ONE_ARG({"a", ABX_ARG_ENUM, .choices = none});
    msg_ = "lists \"a\" twice";
    ONE_ARG({"a", ABX_ARG_ENUM, .choices = dup});
    msg_ = "choices apply to enum and string array arguments only";
    ONE_ARG({"a", ABX_ARG_STRING, .choices = one});
    msg_ = "must be one of \"a\" (got \"b\")";
    ONE_ARG({"a", ABX_ARG_ENUM, .choices = one, .default_json = "\"b\""});
    msg_ = "minimum applies to integer and number arguments only";
    ONE_ARG({"a", ABX_ARG_STRING, .minimum = "1"});
    msg_ = "maximum is not a JSON number";
    ONE_ARG({"a", ABX_ARG_NUMBER, .maximum = "x"});
    msg_ = "\"minimum\" is greater than \"maximum\"";
    ONE_ARG({"a", ABX_ARG_NUMBER, .minimum = "2", .maximum = "1"});
    msg_ = "'a' must be at most 1 (got 2)";
    ONE_ARG({"a", ABX_ARG_INTEGER, .maximum = "1", .default_json = "2"});
    msg_ = "unknown type 99";
    ONE_ARG({"a", (enum abx_arg_type)99});
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_list_and_schema),
            cmocka_unit_test(test_run),
            cmocka_unit_test(test_usage_errors),
            cmocka_unit_test(test_declaration_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
