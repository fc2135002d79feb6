/*
 * test-command.c - rendering custom commands: coercion tables, quoting,
 * template text rules, limits, messages, and injection attempts run through
 * a real /bin/sh to show every value arrives as literal text.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "template/command.h"
#include "util/buf.h"
#include "util/err.h"

/* ---- helpers ---- */

static struct template_arg args_xyz[] = {
        {.name = "x", .type = TEMPLATE_ARG_STR},
        {.name = "y", .type = TEMPLATE_ARG_STR},
        {.name = "n", .type = TEMPLATE_ARG_INT, .default_text = "7"},
        {.name = "f", .type = TEMPLATE_ARG_FLOAT},
        {.name = "b", .type = TEMPLATE_ARG_BOOL},
};

static struct template_command
cmd(const char *text)
{
    return (struct template_command){
            .name = "demo",
            .cmd = (char *)(uintptr_t)text,
            .args = args_xyz,
            .n_args = ELEMENTSOF(args_xyz),
    };
}

/* Renders text with one string value for x (NULL = none). */
static int
render1(const char *text, const char *x, char **ret, struct err *err)
{
    struct template_command c = cmd(text);
    struct command_value v = {.name = "x", .text = x, .is_string = true};
    return command_render(&c, &v, x ? 1 : 0, ret, err);
}

static void
assert_render(const char *text, const struct command_value *v, size_t n, const char *want)
{
    struct template_command c = cmd(text);
    struct err err = {0};
    char *line = NULL;
    int r = command_render(&c, v, n, &line, &err);
    if (r < 0)
        fail_msg("render '%s': %d %s", text, r, err.msg);
    assert_string_equal(line, want);
    free(line);
}

/* Renders and expects -errnum with a message containing want. */
static void
assert_refused(const struct template_command *c, const struct command_value *v, size_t n,
               int errnum, const char *want)
{
    struct err err = {0};
    char *line = (char *)"untouched";
    int r = command_render(c, v, n, &line, &err);
    if (r != -errnum || !strstr(err.msg, want))
        fail_msg("cmd '%.60s': got %d '%s', want %d '%s'", c->cmd, r, err.msg, -errnum, want);
    assert_string_equal(line, "untouched");
}

static void
assert_no_controls(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            fail_msg("control character 0x%02x in '%s'", *p, s);
}

/* ---- coercion ---- */

struct coerce_case {
    enum template_arg_type t;
    const char *in;
    bool is_string;
    const char *out; /* NULL = refused */
};

static const struct coerce_case coerce_cases[] = {
        /* int */
        {TEMPLATE_ARG_INT, "0", false, "0"},
        {TEMPLATE_ARG_INT, "3", false, "3"},
        {TEMPLATE_ARG_INT, "3", true, "3"},
        {TEMPLATE_ARG_INT, "-3", true, "-3"},
        {TEMPLATE_ARG_INT, "-0", false, "0"},
        {TEMPLATE_ARG_INT, "9223372036854775807", false, "9223372036854775807"},
        {TEMPLATE_ARG_INT, "-9223372036854775808", false, "-9223372036854775808"},
        {TEMPLATE_ARG_INT, "9223372036854775808", false, NULL},
        {TEMPLATE_ARG_INT, "-9223372036854775809", false, NULL},
        {TEMPLATE_ARG_INT, "99999999999999999999999", false, NULL},
        {TEMPLATE_ARG_INT, "3.0", false, NULL},
        {TEMPLATE_ARG_INT, "3.0", true, NULL},
        {TEMPLATE_ARG_INT, "0x10", true, NULL},
        {TEMPLATE_ARG_INT, " 3", true, NULL},
        {TEMPLATE_ARG_INT, "3 ", true, NULL},
        {TEMPLATE_ARG_INT, "1e3", false, NULL},
        {TEMPLATE_ARG_INT, "+3", true, NULL},
        {TEMPLATE_ARG_INT, "007", true, NULL},
        {TEMPLATE_ARG_INT, "-07", true, NULL},
        {TEMPLATE_ARG_INT, "00", true, NULL},
        {TEMPLATE_ARG_INT, "-", true, NULL},
        {TEMPLATE_ARG_INT, "--1", true, NULL},
        {TEMPLATE_ARG_INT, "", true, NULL},
        {TEMPLATE_ARG_INT, "1_000", true, NULL},
        {TEMPLATE_ARG_INT, "true", false, NULL},
        {TEMPLATE_ARG_INT, "\xd9\xa3", true, NULL}, /* ARABIC-INDIC DIGIT THREE */
        /* float */
        {TEMPLATE_ARG_FLOAT, "0.1", false, "0.1"},
        {TEMPLATE_ARG_FLOAT, "0.1", true, "0.1"},
        {TEMPLATE_ARG_FLOAT, "1e300", false, "1e+300"},
        {TEMPLATE_ARG_FLOAT, "1e-300", false, "1e-300"},
        {TEMPLATE_ARG_FLOAT, "-0.0", false, "-0"},
        {TEMPLATE_ARG_FLOAT, "-0", false, "-0"},
        {TEMPLATE_ARG_FLOAT, "0", false, "0"},
        {TEMPLATE_ARG_FLOAT, "3", false, "3"},
        {TEMPLATE_ARG_FLOAT, "2.5E3", true, "2500"},
        {TEMPLATE_ARG_FLOAT, "1E+2", true, "100"},
        {TEMPLATE_ARG_FLOAT, "0.30000000000000004", false, "0.30000000000000004"},
        {TEMPLATE_ARG_FLOAT, "1.7976931348623157e308", false, "1.7976931348623157e+308"},
        {TEMPLATE_ARG_FLOAT, "5e-324", false, "4.94065645841247e-324"},
        {TEMPLATE_ARG_FLOAT, "123456789012345678", false, "1.2345678901234568e+17"},
        {TEMPLATE_ARG_FLOAT, "nan", true, NULL},
        {TEMPLATE_ARG_FLOAT, "NaN", true, NULL},
        {TEMPLATE_ARG_FLOAT, "inf", true, NULL},
        {TEMPLATE_ARG_FLOAT, "-Infinity", true, NULL},
        {TEMPLATE_ARG_FLOAT, "1e400", false, NULL},
        {TEMPLATE_ARG_FLOAT, "-1e400", false, NULL},
        {TEMPLATE_ARG_FLOAT, "1e-400", false, NULL},
        {TEMPLATE_ARG_FLOAT, "0x1p3", true, NULL},
        {TEMPLATE_ARG_FLOAT, " 1", true, NULL},
        {TEMPLATE_ARG_FLOAT, "1.", true, NULL},
        {TEMPLATE_ARG_FLOAT, ".5", true, NULL},
        {TEMPLATE_ARG_FLOAT, "+1", true, NULL},
        {TEMPLATE_ARG_FLOAT, "01", true, NULL},
        {TEMPLATE_ARG_FLOAT, "1e", true, NULL},
        {TEMPLATE_ARG_FLOAT, "1,5", true, NULL},
        {TEMPLATE_ARG_FLOAT, "", true, NULL},
        /* bool */
        {TEMPLATE_ARG_BOOL, "true", false, "true"},
        {TEMPLATE_ARG_BOOL, "false", false, "false"},
        {TEMPLATE_ARG_BOOL, "TRUE", true, "true"},
        {TEMPLATE_ARG_BOOL, "Yes", true, "true"},
        {TEMPLATE_ARG_BOOL, "y", true, "true"},
        {TEMPLATE_ARG_BOOL, "On", true, "true"},
        {TEMPLATE_ARG_BOOL, "1", false, "true"},
        {TEMPLATE_ARG_BOOL, "fAlSe", true, "false"},
        {TEMPLATE_ARG_BOOL, "NO", true, "false"},
        {TEMPLATE_ARG_BOOL, "N", true, "false"},
        {TEMPLATE_ARG_BOOL, "oFF", true, "false"},
        {TEMPLATE_ARG_BOOL, "0", true, "false"},
        {TEMPLATE_ARG_BOOL, "2", false, NULL},
        {TEMPLATE_ARG_BOOL, "t", true, NULL},
        {TEMPLATE_ARG_BOOL, "truee", true, NULL},
        {TEMPLATE_ARG_BOOL, " true", true, NULL},
        {TEMPLATE_ARG_BOOL, "yes ", true, NULL},
        {TEMPLATE_ARG_BOOL, "", true, NULL},
        {TEMPLATE_ARG_BOOL, "1.0", false, NULL},
        {TEMPLATE_ARG_BOOL, "-0", false, NULL},
        /* str */
        {TEMPLATE_ARG_STR, "", true, ""},
        {TEMPLATE_ARG_STR, "h\xc3\xa9llo", true, "h\xc3\xa9llo"},
        {TEMPLATE_ARG_STR, "a\nb\t$(x)", true, "a\nb\t$(x)"},
        {TEMPLATE_ARG_STR, "3", false, "3"},
        {TEMPLATE_ARG_STR, "\xf0\x9f\x98\x80", true, "\xf0\x9f\x98\x80"},
        {TEMPLATE_ARG_STR, "\xff", true, NULL},
        {TEMPLATE_ARG_STR, "a\xc3", true, NULL},
        {TEMPLATE_ARG_STR, "\xc0\x80", true, NULL},         /* overlong NUL */
        {TEMPLATE_ARG_STR, "\xed\xa0\x80", true, NULL},     /* surrogate */
        {TEMPLATE_ARG_STR, "\xf4\x90\x80\x80", true, NULL}, /* past U+10FFFF */
};

static void
test_coerce_table(void **state)
{
    for (size_t i = 0; i < ELEMENTSOF(coerce_cases); i++) {
        const struct coerce_case *k = &coerce_cases[i];
        _cleanup_buf_ struct buf b;
        struct err err = {0};

        buf_init(&b, 1024);
        int r = command_coerce(k->t, k->in, k->is_string, &b, &err);
        if (k->out) {
            if (r < 0)
                fail_msg("case %zu '%s' refused: %s", i, k->in, err.msg);
            assert_string_equal(b.data, k->out);
        } else {
            if (r != -EINVAL)
                fail_msg("case %zu '%s' accepted as '%s'", i, k->in, b.data);
            assert_true(err.msg[0]);
            assert_no_controls(err.msg);
        }
    }
}

static void
test_coerce_float_roundtrip(void **state)
{
    static const char *const in[] = {"0.1",
                                     "0.2",
                                     "1.1",
                                     "3.14159",
                                     "1e23",
                                     "2.2250738585072014e-308",
                                     "9007199254740993",
                                     "4.35",
                                     "100",
                                     "1.5e-7"};
    for (size_t i = 0; i < ELEMENTSOF(in); i++) {
        _cleanup_buf_ struct buf b;
        buf_init(&b, 64);
        assert_int_equal(command_coerce(TEMPLATE_ARG_FLOAT, in[i], false, &b, NULL), 0);
        double want = strtod(in[i], NULL), got = strtod(b.data, NULL);
        assert_memory_equal(&want, &got, sizeof(want));
        /* shortest: when 14 digits read back, the canonical text is no longer */
        char shorter[64];
        (void)snprintf(shorter, sizeof(shorter), "%.14g", want);
        if (strtod(shorter, NULL) == want)
            assert_true(strlen(b.data) <= strlen(shorter));
    }
}

static void
test_coerce_messages(void **state)
{
    struct err err = {0};
    _cleanup_buf_ struct buf b;

    buf_init(&b, 64);
    assert_int_equal(command_coerce(TEMPLATE_ARG_INT, "3.0", true, &b, &err), -EINVAL);
    assert_string_equal(err.msg, "\"3.0\" is not an integer (decimal digits, optional '-')");
    err_clear(&err);
    assert_int_equal(command_coerce(TEMPLATE_ARG_INT, "3.5", false, &b, &err), -EINVAL);
    assert_string_equal(err.msg, "3.5 is not an integer (decimal digits, optional '-')");
    err_clear(&err);
    assert_int_equal(command_coerce(TEMPLATE_ARG_BOOL, "a\"\\\n\x1b", true, &b, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "\"a\\\"\\\\\\n\\u001b\" is not a boolean"));
    assert_int_equal(b.len, 0);
}

static void
test_quote(void **state)
{
    static const char *const cases[][2] = {
            {"", "''"},       {"a", "'a'"},           {"it's", "'it'\\''s'"},
            {"'", "''\\'''"}, {"''", "''\\'''\\'''"}, {"a b\n$c", "'a b\n$c'"},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_buf_ struct buf b;
        buf_init(&b, 64);
        assert_int_equal(command_quote(&b, cases[i][0]), 0);
        assert_string_equal(b.data, cases[i][1]);
    }
    _cleanup_buf_ struct buf small;
    buf_init(&small, 4);
    assert_int_equal(command_quote(&small, "abcd"), -EFBIG);
}

static void
test_json_type(void **state)
{
    assert_string_equal(command_json_type(TEMPLATE_ARG_STR), "string");
    assert_string_equal(command_json_type(TEMPLATE_ARG_INT), "integer");
    assert_string_equal(command_json_type(TEMPLATE_ARG_FLOAT), "number");
    assert_string_equal(command_json_type(TEMPLATE_ARG_BOOL), "boolean");
    assert_null(command_json_type(_TEMPLATE_ARG_TYPE_MAX));
}

/* ---- rendering ---- */

static void
test_render_values(void **state)
{
    struct command_value v[] = {
            {.name = "b", .text = "YES", .is_string = true},
            {.name = "x", .text = "it's", .is_string = true},
            {.name = "f", .text = "1e300"},
            {.name = "n", .text = "-0", .is_string = true},
    };
    assert_render("run {x} -n {n} -f {f} -b {b}", v, ELEMENTSOF(v),
                  "run 'it'\\''s' -n '0' -f '1e+300' -b 'true'");
    /* the default, quoted too, and an argument used twice */
    assert_render("run {n}{n} --x={x}", &v[1], 1, "run '7''7' --x='it'\\''s'");
    /* unused optional arguments without a value are fine */
    assert_render("true", NULL, 0, "true");
}

static void
test_render_one_pass(void **state)
{
    struct command_value v[] = {
            {.name = "x", .text = "{y}", .is_string = true},
            {.name = "y", .text = "{{x}}", .is_string = true},
    };
    assert_render("printf '%s' {x} {y}", v, 2, "printf '%s' '{y}' '{{x}}'");
}

static void
test_render_braces(void **state)
{
    struct command_value v = {.name = "x", .text = "v", .is_string = true};
    assert_render("awk '{{print $1}}' {x}", &v, 1, "awk '{print $1}' 'v'");
    assert_render("echo {{x}} {{{x}}}", &v, 1, "echo {x} {'v'}");
    assert_render("echo \"${{HOME}}\" {x}", &v, 1, "echo \"${HOME}\" 'v'");
    assert_render("{{ echo; }} && {x}", &v, 1, "{ echo; } && 'v'");

    static const char *const bad[][2] = {
            {"echo {", "'{' at byte 5 does not start a placeholder"},
            {"echo {x", "'{' at byte 5 does not start"},
            {"echo { x}", "'{' at byte 5 does not start"},
            {"echo {x }", "'{' at byte 5 does not start"},
            {"echo {}", "'{' at byte 5 does not start"},
            {"echo {1}", "'{' at byte 5 does not start"},
            {"echo {x-y}", "'{' at byte 5 does not start"},
            {"echo }", "'}' at byte 5 is not closing a placeholder"},
            {"echo {x}}", "'}' at byte 8 is not closing"},
            {"echo {{x}", "'}' at byte 8 is not closing"},
            {"echo {z}", "placeholder {z} at byte 5 names no argument"},
            {"echo {X}", "placeholder {X} at byte 5 names no argument"},
            {"echo {xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx}",
             "does not start a placeholder"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct template_command c = cmd(bad[i][0]);
        assert_refused(&c, &v, 1, EINVAL, bad[i][1]);
        struct err err = {0};
        assert_int_equal(command_check(&c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, bad[i][1]));
    }
}

static void
test_render_contexts(void **state)
{
    struct command_value v = {.name = "x", .text = "v", .is_string = true};
    static const char *const bad[][2] = {
            {"echo '{x}'", "inside '...'"},
            {"echo 'a{x}b'", "inside '...'"},
            {"echo \"{x}\"", "inside \"...\""},
            {"echo \"a \\\" {x}\"", "inside \"...\""},
            {"echo \"${{a}}{x}\"", "inside \"...\""},
            {"echo `echo {x}`", "inside `...`"},
            {"echo \"`echo {x}`\"", "inside \"...\""},
            {"echo # {x}", "inside a comment"},
            {"echo hi;# {x}", "inside a comment"},
            {"echo \\{x}", "right after '\\'"},
            {"echo ${x}", "right after '$'"},
            {"echo $(( {x} + 1 ))", "inside $((...))"},
            {"cat <<EOF\n{x}\nEOF", "after a here-document"},
            {"cat <<EOF\nhi\nEOF\necho {x}", "after a here-document"},
            {"echo \"$(echo \")\")\" {x}", "after a command substitution inside \"...\""},
            {"echo \"${{a:-\"b\"}}\" {x}", "after a ${...} expansion inside \"...\""},
            {"echo $(( 1 + '2' )) {x}", "after quoting inside $((...))"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct template_command c = cmd(bad[i][0]);
        assert_refused(&c, &v, 1, EINVAL, bad[i][1]);
    }

    /* where a word can start, also after such constructs are closed */
    static const char *const good[][2] = {
            {"echo '{{x}}' {x}", "echo '{x}' 'v'"},
            {"echo \"a\" {x} 'b'", "echo \"a\" 'v' 'b'"},
            {"echo a#{x}", "echo a#'v'"},
            {"echo # c\necho {x}", "echo # c\necho 'v'"},
            {"echo $(printf %s {x})", "echo $(printf %s 'v')"},
            {"echo `date` {x}", "echo `date` 'v'"},
            {"echo $((1+2)) {x}", "echo $((1+2)) 'v'"},
            {"echo \\\\{x}", "echo \\\\'v'"},
            {"X={x} env", "X='v' env"},
            {"cat <<EOF {x}", "cat <<EOF 'v'"},
            {"echo \"${{HOME}}/a\" {x}", "echo \"${HOME}/a\" 'v'"},
            {"echo ${{v:-{x}}}", "echo ${v:-'v'}"},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++)
        assert_render(good[i][0], &v, 1, good[i][1]);
}

static void
test_render_errors(void **state)
{
    static struct template_arg req[] = {
            {.name = "path", .type = TEMPLATE_ARG_STR, .required = true},
            {.name = "count", .type = TEMPLATE_ARG_INT},
            {.name = "deep", .type = TEMPLATE_ARG_BOOL, .default_text = "false"},
    };
    struct template_command c = {
            .name = "ls", .cmd = "ls {path} {count} {deep}", .args = req, .n_args = 3};
    struct command_value path = {.name = "path", .text = "/", .is_string = true};
    struct command_value vals[3];

    assert_refused(&c, NULL, 0, EINVAL, "missing required argument 'path'");

    vals[0] = path;
    vals[1] = (struct command_value){.name = "colour", .text = "x", .is_string = true};
    assert_refused(&c, vals, 2, EINVAL, "unknown argument 'colour' (declared: path, count, deep)");

    vals[1] = path;
    assert_refused(&c, vals, 2, EINVAL, "argument 'path' is given twice");

    vals[1] = (struct command_value){.name = "count", .text = "3.0"};
    assert_refused(&c, vals, 2, EINVAL, "argument 'count': 3.0 is not an integer");

    vals[1] = (struct command_value){.name = "deep", .text = "maybe", .is_string = true};
    assert_refused(&c, vals, 2, EINVAL, "argument 'deep': \"maybe\" is not a boolean");

    /* count is optional, has no default and the text uses it */
    assert_refused(&c, &path, 1, EINVAL,
                   "argument 'count' has no value and no default, but the command uses it");

    vals[1] = (struct command_value){.name = "count", .text = "2"};
    char *line = NULL;
    assert_int_equal(command_render(&c, vals, 2, &line, NULL), 0);
    assert_string_equal(line, "ls '/' '2' 'false'");
    free(line);

    /* a bad default is the template's fault and says so */
    static struct template_arg bad_default[] = {
            {.name = "n", .type = TEMPLATE_ARG_INT, .default_text = "x"},
    };
    struct template_command d = {.name = "d", .cmd = "echo", .args = bad_default, .n_args = 1};
    assert_refused(&d, NULL, 0, EINVAL, "default of argument 'n': x is not an integer");

    /* no arguments at all */
    struct template_command none = {.name = "none", .cmd = "true"};
    struct command_value extra = {.name = "x", .text = "1"};
    assert_refused(&none, &extra, 1, EINVAL, "unknown argument 'x' (declared: none)");

    /* a JSON string with "\u0000" in it */
    struct command_value nul = {.name = "path", .text = "a\0b", .len = 3, .is_string = true};
    assert_refused(&c, &nul, 1, EINVAL, "argument 'path': the value contains a NUL character");
}

static void
test_render_messages_escaped(void **state)
{
    char name[300], value[300];
    struct err err = {0};
    char *line = NULL;

    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    memcpy(name, "\n\x1b[31m\r\t\x7f\xc2\x85\xe2\x80\xae", 14);
    struct template_command c = cmd("echo {x}");
    struct command_value v = {.name = name, .text = "a", .is_string = true};
    assert_int_equal(command_render(&c, &v, 1, &line, &err), -EINVAL);
    assert_no_controls(err.msg);
    assert_non_null(strstr(err.msg, "unknown argument '\\n\\u001b[31m\\r\\t\\u007f\\u0085\\u202e"));
    assert_non_null(strstr(err.msg, "nnn...' (declared: x, y, n, f, b)"));

    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    memcpy(value, "\x01\xff", 2);
    err_clear(&err);
    v = (struct command_value){.name = "n", .text = value, .is_string = true};
    assert_int_equal(command_render(&c, &v, 1, &line, &err), -EINVAL);
    assert_no_controls(err.msg);
    assert_non_null(strstr(err.msg, "argument 'n': \"\\u0001\\xffvvv"));
    assert_non_null(strstr(err.msg, "vvv...\" is not an integer"));
    assert_true(strlen(err.msg) < 200);
}

static void
test_render_limit(void **state)
{
    size_t big = COMMAND_LINE_MAX;
    char *value = malloc(big + 2);
    char *line = NULL;
    struct err err = {0};

    assert_non_null(value);
    /* the largest value that fits: the line is "echo " + 'value' */
    memset(value, 'a', big);
    value[big - strlen("echo ''")] = '\0';
    assert_int_equal(render1("echo {x}", value, &line, NULL), 0);
    assert_int_equal(strlen(line), COMMAND_LINE_MAX);
    free(line);
    line = NULL;

    /* one byte more */
    value[big - strlen("echo ''")] = 'a';
    value[big - strlen("echo ''") + 1] = '\0';
    assert_int_equal(render1("echo {x}", value, &line, &err), -E2BIG);
    assert_non_null(strstr(err.msg, "longer than 131072 bytes"));
    assert_null(line);

    /* quoting makes a value of quotes four times longer */
    memset(value, '\'', big / 4);
    value[big / 4] = '\0';
    err_clear(&err);
    assert_int_equal(render1("echo {x}", value, &line, &err), -E2BIG);

    /* a value longer than the whole line */
    memset(value, 'a', big + 1);
    value[big + 1] = '\0';
    err_clear(&err);
    assert_int_equal(render1("{x}", value, &line, &err), -E2BIG);
    assert_non_null(strstr(err.msg, "argument 'x': the value is longer than"));

    /* many uses of a small value */
    char *text = malloc(big);
    assert_non_null(text);
    for (size_t i = 0; i + 3 < big; i += 3)
        memcpy(text + i, "{x}", 3);
    text[big / 3 * 3 - 3] = '\0';
    err_clear(&err);
    assert_int_equal(render1(text, "ab", &line, &err), -E2BIG);
    free(text);
    free(value);
}

/* ---- injection attempts through a real shell ---- */

/* Runs line with /bin/sh -c in dir (also HOME), returns its stdout. */
static char *
run_sh(const char *line, const char *dir, int *ret_status)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char home[512];
        (void)snprintf(home, sizeof(home), "HOME=%s", dir);
        char *const argv[] = {(char *)"sh", (char *)"-c", (char *)(uintptr_t)line, NULL};
        char *const envp[] = {home, (char *)"PATH=/usr/bin:/bin", NULL};
        if (dup2(p[1], 1) < 0 || chdir(dir) < 0)
            _exit(127);
        execve("/bin/sh", argv, envp);
        _exit(127);
    }
    close(p[1]);
    _cleanup_buf_ struct buf out;
    buf_init(&out, 1 << 20);
    char tmp[4096];
    ssize_t n;
    while ((n = read(p[0], tmp, sizeof(tmp))) > 0)
        assert_int_equal(buf_put(&out, tmp, (size_t)n), 0);
    close(p[0]);
    assert_int_equal(waitpid(pid, ret_status, 0), pid);
    return buf_steal(&out);
}

static void
test_injection_runs_literal(void **state)
{
    static const char *const values[] = {
            "'; rm -rf ~ #",
            "$(touch pwned1)",
            "`touch pwned2`",
            "; touch pwned3 #",
            "&& touch pwned4",
            "| touch pwned5",
            "'\"'",
            "a\nb",
            "a\n touch pwned6",
            "{other}",
            "{x}",
            "\\",
            "\\'",
            "'",
            "''",
            "",
            "$HOME ~ * ?",
            "-n",
            "\"$(touch pwned7)\"",
            "'$(touch pwned8)'",
            "\x01\x1b[31m\x7f",
            "h\xc3\xa9llo \xe2\x80\xae",
            "${IFS}touch${IFS}pwned9",
            "\\`touch pwned10\\`",
    };
    char dir[] = "/tmp/abx-test-command-XXXXXX";
    char sentinel[600];

    assert_non_null(mkdtemp(dir));
    (void)snprintf(sentinel, sizeof(sentinel), "%s/sentinel", dir);
    int fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);

    static const char *const texts[] = {"printf '%s' {x}", "printf %s {x}",
                                        "printf '%s' {x} > out && cat out && rm out",
                                        "x=$(printf %s {x}); printf %s \"$x\""};
    for (size_t t = 0; t < ELEMENTSOF(texts); t++) {
        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
            char *line = NULL;
            struct err err = {0};
            int status;
            if (render1(texts[t], values[i], &line, &err) < 0)
                fail_msg("render '%s': %s", values[i], err.msg);
            char *out = run_sh(line, dir, &status);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            /* $(...) strips trailing newlines; no value here ends in one */
            if (strcmp(out, values[i]))
                fail_msg("value '%s' came out as '%s' (line %s)", values[i], out, line);
            free(out);
            free(line);
        }
    }

    /* typed values through the shell */
    struct template_command c = cmd("printf '%s|' {n} {f} {b}");
    struct command_value v[] = {
            {.name = "n", .text = "-42", .is_string = true},
            {.name = "f", .text = "0.1"},
            {.name = "b", .text = "off", .is_string = true},
    };
    char *line = NULL;
    int status;
    assert_int_equal(command_render(&c, v, 3, &line, NULL), 0);
    char *out = run_sh(line, dir, &status);
    assert_string_equal(out, "-42|0.1|false|");
    free(out);
    free(line);

    /* nothing was created or removed: only the sentinel is there */
    out = run_sh("ls -A", dir, &status);
    assert_string_equal(out, "sentinel\n");
    free(out);
    assert_int_equal(unlink(sentinel), 0);
    assert_int_equal(rmdir(dir), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_coerce_table),
            cmocka_unit_test(test_coerce_float_roundtrip),
            cmocka_unit_test(test_coerce_messages),
            cmocka_unit_test(test_quote),
            cmocka_unit_test(test_json_type),
            cmocka_unit_test(test_render_values),
            cmocka_unit_test(test_render_one_pass),
            cmocka_unit_test(test_render_braces),
            cmocka_unit_test(test_render_contexts),
            cmocka_unit_test(test_render_errors),
            cmocka_unit_test(test_render_messages_escaped),
            cmocka_unit_test(test_render_limit),
            cmocka_unit_test(test_injection_runs_literal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
