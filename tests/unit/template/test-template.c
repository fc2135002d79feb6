/*
 * test-template.c - sandbox-template.yaml: a full valid template, every
 * validation error with its file:line, and the YAML features and bombs the
 * parser must refuse.
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

#include "template/template.h"
#include "util/buf.h"
#include "util/fd.h"

static const char full[] =
        "# A complete template.\n"
        "name: python-data\n"
        "aliases: [pydata, data]\n"
        "description: Python with pandas\n"
        "base: host\n"
        "steps:\n"
        "  - run: pip install pandas\n"
        "  - env:\n"
        "      PIP_NO_CACHE_DIR: \"1\"\n"
        "      LANG: C.UTF-8\n"
        "  - workdir: /work\n"
        "  - copy: {src: files/helpers.py, dst: /opt/helpers.py}\n"
        "env:\n"
        "  PYTHONUNBUFFERED: \"1\"\n"
        "  MPLBACKEND: Agg\n"
        "resources:\n"
        "  cpu: 1.5\n"
        "  memory_mb: 2048\n"
        "  pids: 256\n"
        "  disk_mb: 4096\n"
        "capabilities: [shell, files, code, ports]\n"
        "ports: [8888, 8080]\n"
        "start_cmd: jupyter lab --port 8888\n"
        "ready_cmd: curl -fs localhost:8888\n"
        "custom_commands:\n"
        "  summarize:\n"
        "    cmd: python3 /opt/helpers.py summarize {path} --rows {rows} --braces={{x}}\n"
        "    description: Summarize a CSV file\n"
        "    cwd: /work\n"
        "    env: {LC_ALL: C}\n"
        "    timeout: 30.5\n"
        "    args:\n"
        "      - name: path\n"
        "        required: true\n"
        "        description: CSV file\n"
        "      - {name: rows, type: int, default: 010}\n"
        "  plot:\n"
        "    cmd: python3 /opt/helpers.py plot {ratio} {log}\n"
        "    args:\n"
        "      - {name: ratio, type: float, default: 0.1}\n"
        "      - {name: log, type: bool, default: \"yes\"}\n";

/* Parses y, which must be valid. */
static struct template *
good(const char *y)
{
    struct template *t = NULL;
    struct err e = {0};
    int r = template_parse(y, strlen(y), "t.yaml", &t, &e);
    if (r != 0)
        fail_msg("got %d '%s' for:\n%.200s", r, e.msg, y);
    return t;
}

static void
test_full(void **state)
{
    struct template *t = good(full);

    assert_string_equal(t->name, "python-data");
    assert_int_equal(t->n_aliases, 2);
    assert_string_equal(t->aliases[1], "data");
    assert_true(template_matches(t, "pydata"));
    assert_true(template_matches(t, "python-data"));
    assert_false(template_matches(t, "python"));
    assert_string_equal(t->description, "Python with pandas");
    assert_string_equal(t->base, "host");
    assert_int_equal(t->n_steps, 5);
    assert_int_equal(t->steps[0].kind, TEMPLATE_STEP_RUN);
    assert_string_equal(t->steps[0].a, "pip install pandas");
    assert_null(t->steps[0].b);
    assert_int_equal(t->steps[0].line, 7);
    assert_int_equal(t->steps[1].kind, TEMPLATE_STEP_ENV);
    assert_string_equal(t->steps[1].a, "PIP_NO_CACHE_DIR");
    assert_string_equal(t->steps[1].b, "1");
    assert_int_equal(t->steps[2].kind, TEMPLATE_STEP_ENV);
    assert_string_equal(t->steps[2].a, "LANG");
    assert_int_equal(t->steps[2].line, 10);
    assert_int_equal(t->steps[3].kind, TEMPLATE_STEP_WORKDIR);
    assert_string_equal(t->steps[3].a, "/work");
    assert_int_equal(t->steps[4].kind, TEMPLATE_STEP_COPY);
    assert_string_equal(t->steps[4].a, "files/helpers.py");
    assert_string_equal(t->steps[4].b, "/opt/helpers.py");
    assert_int_equal(t->n_env, 2);
    assert_string_equal(t->env[0], "PYTHONUNBUFFERED=1");
    assert_string_equal(t->env[1], "MPLBACKEND=Agg");
    assert_true(t->cpu == 1.5);
    assert_int_equal(t->memory_mb, 2048);
    assert_int_equal(t->pids, 256);
    assert_int_equal(t->disk_mb, 4096);
    assert_int_equal(t->caps, TEMPLATE_CAP_SHELL | TEMPLATE_CAP_FILES | TEMPLATE_CAP_CODE |
                                      TEMPLATE_CAP_PORTS);
    assert_int_equal(t->n_ports, 2);
    assert_int_equal(t->ports[0], 8888);
    assert_int_equal(t->ports[1], 8080);
    assert_string_equal(t->start_cmd, "jupyter lab --port 8888");
    assert_string_equal(t->ready_cmd, "curl -fs localhost:8888");
    assert_int_equal(t->n_cmds, 2);

    const struct template_command *c = template_find_command(t, "summarize");
    assert_non_null(c);
    assert_int_equal(c->line, 26);
    assert_string_equal(c->description, "Summarize a CSV file");
    assert_string_equal(c->cwd, "/work");
    assert_int_equal(c->n_env, 1);
    assert_string_equal(c->env[0], "LC_ALL=C");
    assert_int_equal(c->timeout_ms, 30500);
    assert_int_equal(c->n_args, 2);
    assert_string_equal(c->args[0].name, "path");
    assert_int_equal(c->args[0].type, TEMPLATE_ARG_STR);
    assert_true(c->args[0].required);
    assert_null(c->args[0].default_text);
    assert_string_equal(c->args[0].description, "CSV file");
    assert_string_equal(c->args[1].name, "rows");
    assert_int_equal(c->args[1].type, TEMPLATE_ARG_INT);
    assert_false(c->args[1].required);
    assert_string_equal(c->args[1].default_text, "10");

    c = template_find_command(t, "plot");
    assert_non_null(c);
    assert_int_equal(c->timeout_ms, 0);
    assert_null(c->cwd);
    assert_string_equal(c->args[0].default_text, "0.1");
    assert_int_equal(c->args[0].type, TEMPLATE_ARG_FLOAT);
    assert_string_equal(c->args[1].default_text, "true");
    assert_int_equal(c->args[1].type, TEMPLATE_ARG_BOOL);
    assert_null(template_find_command(t, "nope"));
    assert_null(template_free(t));
}

static void
test_minimal(void **state)
{
    struct template *t = NULL;
    const char *y = "name: tiny\n";

    t = good(y);
    assert_string_equal(t->base, "host");
    assert_int_equal(t->caps, TEMPLATE_CAPS_DEFAULT);
    assert_int_equal(t->n_steps + t->n_env + t->n_ports + t->n_cmds + t->n_aliases, 0);
    assert_true(t->cpu == 0);
    assert_int_equal(t->memory_mb, 0);
    assert_null(t->description);
    assert_null(t->start_cmd);
    template_free(t);

    /* an explicit empty list is no capabilities, never the default */
    y = "name: none\ncapabilities: []\n";
    t = good(y);
    assert_int_equal(t->caps, 0);
    template_free(t);

    /* explicit standard tags, a document marker, a UTF-8 BOM, CRLF */
    y = "\xef\xbb\xbf---\r\nname: !!str tagged\r\nresources: !!map {pids: !!int 5}\r\n"
        "description: \"caf\\u00e9 \xe2\x98\x95\"\n...\n";
    t = good(y);
    assert_int_equal(t->pids, 5);
    assert_string_equal(t->description, "caf\xc3\xa9 \xe2\x98\x95");
    template_free(t);
}

/* Parses y and checks the error is exactly msg, "t.yaml:" prepended. */
static void
bad(const char *y, size_t len, int errnum, const char *msg)
{
    struct template *t = (struct template *)0x1;
    struct err e = {0};
    char want[ERR_MSG_MAX];

    int r = template_parse(y, len, "t.yaml", &t, &e);
    if (r != -errnum || strncmp(e.msg, "t.yaml:", 7))
        fail_msg("%s: got %d '%s'", y, r, e.msg);
    assert_ptr_equal(t, (struct template *)0x1); /* untouched */
    assert_int_equal(e.errnum, errnum);
    if (msg) {
        (void)snprintf(want, sizeof(want), "t.yaml:%s", msg);
        if (strcmp(e.msg, want))
            fail_msg("for:\n%s\nwant '%s'\n got '%s'", y, want, e.msg);
    }
}
#define BAD(y, msg) bad((y), strlen(y), EINVAL, (msg))

static void
test_errors_top(void **state)
{
    BAD("", "1: empty document: a template is a mapping");
    BAD("# only a comment\n", "1: empty document: a template is a mapping");
    BAD("- a\n- b\n", "1: a template is a mapping, not a list");
    BAD("just text\n", "1: a template is a mapping, not a scalar");
    BAD("description: x\n", "1: missing key 'name'");
    BAD("name: a\nnmae: b\n", "2: unknown key 'nmae'");
    BAD("name: Big\n", "1: name: 'Big' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)");
    BAD("name: -a\n", "1: name: '-a' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)");
    BAD("name: host\n", "1: name: 'host' is reserved for the base of templates built on the host");
    BAD("name: a\nbase: a\n", "2: base: a template cannot be based on itself");
    BAD("name: a\nbase: Ubuntu:22.04\n",
        "2: base: 'Ubuntu:22.04' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)");
    BAD("name: [a]\n", "1: name: must be a string, not a list");
    BAD("name:\n", "1: name: must be a string, not null");
    BAD("name: ''\n", "1: name: must not be empty");
    BAD("name: a\ndescription: {x: 1}\n", "2: description: must be a string, not a mapping");
    BAD("name: a\ndescription: \"a\\x01b\"\n", "2: description: control character 0x01 in string");
    BAD("name: a\nstart_cmd: ''\n", "2: start_cmd: must not be empty");
    BAD("name: a\nready_cmd: [x]\n", "2: ready_cmd: must be a string, not a list");
    char longname[128];
    memset(longname, 'a', 65);
    (void)snprintf(longname + 65, sizeof(longname) - 65, "%s", "\n");
    char y[160];
    (void)snprintf(y, sizeof(y), "name: %s", longname);
    bad(y, strlen(y), EINVAL, NULL);
}

static void
test_errors_aliases(void **state)
{
    BAD("name: a\naliases: b\n", "2: aliases: must be a list, not a scalar");
    BAD("name: a\naliases: [b, a]\n", "2: aliases[1]: alias 'a' is the template's name");
    BAD("name: a\naliases: [b, c, b]\n", "2: aliases[2]: alias 'b' listed twice");
    BAD("name: a\naliases:\n  - b\n  - B_\n",
        "4: aliases[1]: 'B_' is not a valid name (^[a-z0-9][a-z0-9_-]{0,63}$)");
    BAD("name: a\naliases: [a1, a2, a3, a4, a5, a6, a7, a8, a9, b1, b2, b3, b4, b5, b6, b7, b8]\n",
        "2: aliases: more than 16 entries");
}

static void
test_errors_steps(void **state)
{
    BAD("name: a\nsteps: {run: x}\n", "2: steps: must be a list, not a mapping");
    BAD("name: a\nsteps:\n  - run: x\n    env: {A: b}\n",
        "3: steps[0]: a step has exactly one key: run, env, workdir or copy");
    BAD("name: a\nsteps:\n  - {}\n",
        "3: steps[0]: a step has exactly one key: run, env, workdir or copy");
    BAD("name: a\nsteps:\n  - apt: x\n", "3: steps[0]: unknown key 'apt'");
    BAD("name: a\nsteps:\n  - run x\n", "3: steps[0]: must be a mapping, not a scalar");
    BAD("name: a\nsteps:\n  - run: ''\n", "3: steps[0].run: must not be empty");
    BAD("name: a\nsteps:\n  - workdir: work\n", "3: steps[0].workdir: must be an absolute path");
    BAD("name: a\nsteps:\n  - env: {}\n", "3: steps[0].env: must not be empty");
    BAD("name: a\nsteps:\n  - env: {1A: x}\n",
        "3: steps[0].env: '1A' is not a valid variable name (^[A-Za-z_][A-Za-z0-9_]{0,255}$)");
    BAD("name: a\nsteps:\n  - run: ok\n  - copy: {src: a}\n",
        "4: steps[1].copy: missing key 'dst'");
    BAD("name: a\nsteps:\n  - copy: {dst: /a}\n", "3: steps[0].copy: missing key 'src'");
    BAD("name: a\nsteps:\n  - copy: {src: a, dst: /b, mode: 1}\n",
        "3: steps[0].copy: unknown key 'mode'");
    BAD("name: a\nsteps:\n  - copy: {src: /etc/passwd, dst: /b}\n",
        "3: steps[0].copy.src: must be a path relative to the template directory");
    BAD("name: a\nsteps:\n  - copy: {src: a/../../b, dst: /b}\n",
        "3: steps[0].copy.src: must not contain '..'");
    BAD("name: a\nsteps:\n  - copy: {src: .., dst: /b}\n",
        "3: steps[0].copy.src: must not contain '..'");
    BAD("name: a\nsteps:\n  - copy: {src: a, dst: b}\n",
        "3: steps[0].copy.dst: must be an absolute path");

    /* "..x" and "x.." are names, not parent references */
    struct template *t = NULL;
    const char *y = "name: a\nsteps:\n  - copy: {src: ..a/b.., dst: /b}\n";
    t = good(y);
    template_free(t);
}

static void
test_errors_env(void **state)
{
    BAD("name: a\nenv: [A]\n", "2: env: must be a mapping, not a list");
    BAD("name: a\nenv:\n  A-B: x\n",
        "3: env: 'A-B' is not a valid variable name (^[A-Za-z_][A-Za-z0-9_]{0,255}$)");
    BAD("name: a\nenv:\n  A: \"x\\ny\"\n", "3: env.A: control character 0x0a in string");
    BAD("name: a\nenv:\n  A: \"x\\0y\"\n", "3: NUL character in a string");
    BAD("name: a\nenv:\n  A:\n", "3: env.A: must be a string, not null");
    BAD("name: a\nenv:\n  A: [1]\n", "3: env.A: must be a string, not a list");
}

static void
test_errors_resources(void **state)
{
    BAD("name: a\nresources: 1\n", "2: resources: must be a mapping, not a scalar");
    BAD("name: a\nresources: {gpu: 1}\n", "2: resources: unknown key 'gpu'");
    BAD("name: a\nresources: {cpu: 0}\n",
        "2: resources.cpu: '0' is not a number greater than 0 and at most 1024");
    BAD("name: a\nresources: {cpu: -1}\n",
        "2: resources.cpu: '-1' is not a number greater than 0 and at most 1024");
    BAD("name: a\nresources: {cpu: .nan}\n",
        "2: resources.cpu: '.nan' is not a number greater than 0 and at most 1024");
    BAD("name: a\nresources: {cpu: 0x10}\n",
        "2: resources.cpu: '0x10' is not a number greater than 0 and at most 1024");
    BAD("name: a\nresources: {cpu: \"2\"}\n",
        "2: resources.cpu: must be a number, not a quoted string");
    BAD("name: a\nresources: {memory_mb: 0}\n",
        "2: resources.memory_mb: '0' is not an integer in 1..1048576");
    BAD("name: a\nresources: {memory_mb: 1.5}\n",
        "2: resources.memory_mb: '1.5' is not an integer in 1..1048576");
    BAD("name: a\nresources: {pids: -5}\n",
        "2: resources.pids: '-5' is not an integer in 1..4194304");
    BAD("name: a\nresources: {disk_mb: 99999999999999999999999}\n",
        "2: resources.disk_mb: '99999999999999999999999' is not an integer in 1..16777216");
    BAD("name: a\nresources: {disk_mb: }\n",
        "2: resources.disk_mb: must be a positive integer, not null");
}

static void
test_errors_caps_ports(void **state)
{
    BAD("name: a\ncapabilities: shell\n", "2: capabilities: must be a list, not a scalar");
    BAD("name: a\ncapabilities: [shell, gpu]\n",
        "2: capabilities[1]: unknown capability 'gpu' (known: shell, files, code, terminal, ports)");
    BAD("name: a\ncapabilities: [shell, shell]\n",
        "2: capabilities[1]: capability 'shell' listed twice");
    BAD("name: a\ncapabilities: [[shell]]\n", "2: capabilities[0]: must be a string, not a list");
    BAD("name: a\ncapabilities: [ports]\nports: [0]\n",
        "3: ports[0]: '0' is not an integer in 1..65535");
    BAD("name: a\ncapabilities: [ports]\nports: [65536]\n",
        "3: ports[0]: '65536' is not an integer in 1..65535");
    BAD("name: a\ncapabilities: [ports]\nports: [80, 81, 80]\n",
        "3: ports[2]: port 80 listed twice");
    BAD("name: a\ncapabilities: [ports]\nports: [\"80\"]\n",
        "3: ports[0]: must be a positive integer, not a quoted string");
    BAD("name: a\nports: [80]\n", "2: ports: listed, but capability 'ports' is not declared");
    BAD("name: a\ncapabilities: [ports]\nports: 80\n", "3: ports: must be a list, not a scalar");
}

static void
test_errors_commands(void **state)
{
    BAD("name: a\ncustom_commands: [x]\n",
        "2: custom_commands: must be a mapping of command names, not a list");
    BAD("name: a\ncustom_commands:\n  Bad: {cmd: x}\n",
        "3: custom_commands.Bad: 'Bad' is not a valid command name (^[a-z0-9][a-z0-9_-]{0,63}$)");
    BAD("name: a\ncustom_commands:\n  x: echo\n",
        "3: custom_commands.x: must be a mapping, not a scalar");
    BAD("name: a\ncustom_commands:\n  x:\n    description: d\n",
        "4: custom_commands.x: missing key 'cmd'");
    BAD("name: a\ncustom_commands:\n  x:\n    cmd: y\n    shell: bash\n",
        "5: custom_commands.x: unknown key 'shell'");
    BAD("name: a\ncustom_commands:\n  x: {cmd: y, cwd: tmp}\n",
        "3: custom_commands.x.cwd: must be an absolute path");
    BAD("name: a\ncustom_commands:\n  x: {cmd: y, timeout: 0}\n",
        "3: custom_commands.x.timeout: '0' is not a number greater than 0 and at most 86400");
    BAD("name: a\ncustom_commands:\n  x: {cmd: y, timeout: 1e9}\n",
        "3: custom_commands.x.timeout: '1e9' is not a number greater than 0 and at most 86400");
    BAD("name: a\ncustom_commands:\n  x: {cmd: y, env: {A: [b]}}\n",
        "3: custom_commands.x.env.A: must be a string, not a list");
    BAD("name: a\ncustom_commands:\n  x:\n    cmd: echo {who}\n",
        "4: custom_commands.x.cmd: unknown placeholder '{who}': no argument 'who' is declared");
    BAD("name: a\ncustom_commands:\n  x:\n    cmd: echo {who\n    args: [{name: who}]\n",
        "4: custom_commands.x.cmd: bad placeholder at '{who' (write '{{' for a literal brace)");
    BAD("name: a\ncustom_commands:\n  x:\n    cmd: echo { who }\n    args: [{name: who}]\n",
        "4: custom_commands.x.cmd: bad placeholder at '{ who }' (write '{{' for a literal brace)");
    BAD("name: a\ncustom_commands:\n  x:\n    cmd: echo who}\n",
        "4: custom_commands.x.cmd: unbalanced '}' (write '}}' for a literal brace)");
    BAD("name: a\ncustom_commands:\n  x: {cmd: y, args: {name: a}}\n",
        "3: custom_commands.x.args: must be a list, not a mapping");

    /* literal braces and a multi-line cmd */
    struct template *t = NULL;
    const char *y = "name: a\ncustom_commands:\n  x:\n    cmd: |\n      echo {{}} {{a}} {a}}}\n"
                    "      echo {a}\n    args: [{name: a}]\n    timeout: 0.0001\n";
    t = good(y);
    assert_string_equal(t->cmds[0].cmd, "echo {{}} {{a}} {a}}}\necho {a}\n");
    assert_int_equal(t->cmds[0].timeout_ms, 1); /* rounded up, never 0 */
    template_free(t);
}

static void
test_errors_args(void **state)
{
#define CMD "name: a\ncustom_commands:\n  x:\n    cmd: run\n    args:\n"
    BAD(CMD "      - {type: int}\n", "6: custom_commands.x.args[0]: missing key 'name'");
    BAD(CMD "      - {name: a, kind: int}\n", "6: custom_commands.x.args[0]: unknown key 'kind'");
    BAD(CMD "      - {name: 1a}\n",
        "6: custom_commands.x.args[0].name: '1a' is not a valid argument name "
        "(^[A-Za-z_][A-Za-z0-9_]{0,63}$)");
    BAD(CMD "      - {name: a}\n      - {name: a}\n",
        "7: custom_commands.x.args[1].name: argument 'a' declared twice");
    BAD(CMD "      - {name: a, type: list}\n",
        "6: custom_commands.x.args[0].type: unknown type 'list' (known: str, int, float, bool)");
    BAD(CMD "      - {name: a, required: yes}\n",
        "6: custom_commands.x.args[0].required: must be true or false");
    BAD(CMD "      - {name: a, required: \"true\"}\n",
        "6: custom_commands.x.args[0].required: must be true or false");
    BAD(CMD "      - {name: a, required: true, default: x}\n",
        "6: custom_commands.x.args[0].default: an argument with required: true cannot have a "
        "default");
    BAD(CMD "      - {name: a, type: int, default: 1.5}\n",
        "6: custom_commands.x.args[0].default: '1.5' is not a valid int");
    BAD(CMD "      - {name: a, type: int, default: 9223372036854775808}\n",
        "6: custom_commands.x.args[0].default: '9223372036854775808' is not a valid int");
    BAD(CMD "      - {name: a, type: int, default: +1}\n",
        "6: custom_commands.x.args[0].default: '+1' is not a valid int");
    BAD(CMD "      - {name: a, type: float, default: abc}\n",
        "6: custom_commands.x.args[0].default: 'abc' is not a valid float");
    BAD(CMD "      - {name: a, type: float, default: .inf}\n",
        "6: custom_commands.x.args[0].default: '.inf' is not a valid float");
    BAD(CMD "      - {name: a, type: float, default: 1e999}\n",
        "6: custom_commands.x.args[0].default: '1e999' is not a valid float");
    BAD(CMD "      - {name: a, type: bool, default: maybe}\n",
        "6: custom_commands.x.args[0].default: 'maybe' is not a valid bool");
    BAD(CMD "      - {name: a, default: }\n",
        "6: custom_commands.x.args[0].default: must be a string, not null");
    BAD(CMD "      - {name: a, default: [1]}\n",
        "6: custom_commands.x.args[0].default: must be a string, not a list");
    BAD(CMD "      - a\n", "6: custom_commands.x.args[0]: must be a mapping, not a scalar");

    /* canonical defaults */
    static const struct {
        const char *type, *in, *out;
    } ok[] = {
            {"int", "-0", "0"},
            {"int", "-9223372036854775808", "-9223372036854775808"},
            {"int", "\"42\"", "42"},
            {"float", "1.0", "1"},
            {"float", "0.30000000000000004", "0.30000000000000004"},
            {"float", "-2.5e-3", "-0.0025"},
            {"float", "7", "7"},
            {"bool", "false", "false"},
            {"bool", "On", "true"},
            {"bool", "0", "false"},
            {"str", "010", "010"},
            {"str", "''", ""},
    };
    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        char y[256];
        struct template *t = NULL;
        (void)snprintf(y, sizeof(y), CMD "      - {name: a, type: %s, default: %s}\n", ok[i].type,
                       ok[i].in);
        t = good(y);
        assert_string_equal(t->cmds[0].args[0].default_text, ok[i].out);
        template_free(t);
    }
#undef CMD
}

static void
test_yaml_refused(void **state)
{
    BAD("name: a\nname: b\n", "2: duplicate key 'name' (first on line 1)");
    BAD("name: a\nenv:\n  A: x\n  \"A\": y\n", "4: duplicate key 'A' (first on line 3)");
    BAD("name: a\n---\nname: b\n", "2: more than one YAML document");
    BAD("name: &n a\n", "1: YAML anchors ('&') are not supported");
    BAD("name: a\nenv: &e {A: b}\n", "2: YAML anchors ('&') are not supported");
    BAD("name: a\ndescription: *x\n", NULL); /* an undefined alias: still refused */
    BAD("name: a\nenv:\n  <<: {A: b}\n", "3: merge keys ('<<') are not supported");
    BAD("name: !custom a\n", "1: YAML tag '!custom' is not supported");
    BAD("name: a\nports: !!set {1}\n", "2: YAML tag 'tag:yaml.org,2002:set' is not supported");
    BAD("name: a\nenv: !!seq {A: b}\n", "2: YAML tag 'tag:yaml.org,2002:seq' is not supported");
    BAD("name: a\nenv: {[A]: b}\n", "2: mapping keys must be plain strings");
    BAD("name: a\n\tdescription: x\n", NULL); /* a tab where indentation is */
    BAD("name: a\ndescription: [x\n", NULL);  /* unclosed flow sequence */
    BAD("name: a\n  bad indent: x\n", NULL);
    /* invalid UTF-8, a UTF-16 document, a raw NUL byte */
    BAD("name: a\ndescription: \xff\xfe\n", "2: invalid YAML: invalid leading UTF-8 octet");
    bad("\xff\xfen\0a\0m\0e\0:\0 \0a\0\n\0", 20, EINVAL, NULL);
    bad("name: a\ndescription: x\0y\n", 25, EINVAL, "2: NUL byte in the file");
}

static void
test_bombs(void **state)
{
    /* billion laughs: refused at the first anchor, nothing is expanded */
    BAD("name: a\nx0: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        "x1: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "x2: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
        "2: YAML anchors ('&') are not supported");

    /* 10000-deep nesting, flow and block */
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "name: a\ndescription: "), 0);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(buf_putc(&b, '['), 0);
    bad(b.data, b.len, EINVAL, "2: nested deeper than 32 levels");
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nenv:\n"), 0);
    for (int i = 0; i < 40; i++)
        assert_int_equal(buf_printf(&b, "%*sk%d:\n", 2 * (i + 1), "", i), 0);
    bad(b.data, b.len, EINVAL, "34: nested deeper than 32 levels");

    /* a document of more than TEMPLATE_FILE_MAX bytes */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\ndescription: "), 0);
    while (b.len <= TEMPLATE_FILE_MAX)
        assert_int_equal(buf_puts(&b, "xxxxxxxxxxxxxxxx"), 0);
    bad(b.data, b.len, EFBIG, NULL);

    /* too many nodes: a flat list under the size limit */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nx: ["), 0);
    for (int i = 0; i < TEMPLATE_NODES_MAX; i++)
        assert_int_equal(buf_puts(&b, "[],"), 0);
    assert_int_equal(buf_puts(&b, "]\n"), 0);
    bad(b.data, b.len, EINVAL, "2: more than 1024 items in one sequence");
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nx:\n"), 0);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(buf_printf(&b, " - ["), 0);
        for (int j = 0; j < 600; j++)
            assert_int_equal(buf_puts(&b, "1,"), 0);
        assert_int_equal(buf_puts(&b, "]\n"), 0);
    }
    bad(b.data, b.len, EINVAL, NULL);
    assert_non_null(strstr("more than 100000 YAML nodes", "100000")); /* message checked below */
    struct template *t = NULL;
    struct err e = {0};
    assert_int_equal(template_parse(b.data, b.len, "t.yaml", &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, ": more than 100000 YAML nodes"));

    /* a mapping with too many keys */
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nenv:\n"), 0);
    for (int i = 0; i < TEMPLATE_COLLECTION_MAX + 1; i++)
        assert_int_equal(buf_printf(&b, "  K%d: v\n", i), 0);
    bad(b.data, b.len, EINVAL, "1027: more than 1024 items in one mapping");
    buf_done(&b);
}

static void
test_limits(void **state)
{
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);

    assert_int_equal(buf_puts(&b, "name: a\nsteps:\n"), 0);
    for (int i = 0; i < TEMPLATE_STEPS_MAX + 1; i++)
        assert_int_equal(buf_puts(&b, "  - run: x\n"), 0);
    bad(b.data, b.len, EINVAL, "3: steps: more than 256 entries");

    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\ncustom_commands:\n"), 0);
    for (int i = 0; i < TEMPLATE_COMMANDS_MAX + 1; i++)
        assert_int_equal(buf_printf(&b, "  c%d: {cmd: x}\n", i), 0);
    bad(b.data, b.len, EINVAL, "3: custom_commands: more than 64 commands");

    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\ncustom_commands:\n  c:\n    cmd: x\n    args:\n"), 0);
    for (int i = 0; i < TEMPLATE_ARGS_MAX + 1; i++)
        assert_int_equal(buf_printf(&b, "      - {name: a%d}\n", i), 0);
    bad(b.data, b.len, EINVAL, "6: custom_commands.c.args: more than 32 entries");

    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nenv:\n"), 0);
    for (int i = 0; i < TEMPLATE_ENV_MAX + 1; i++)
        assert_int_equal(buf_printf(&b, "  K%d: v\n", i), 0);
    bad(b.data, b.len, EINVAL, "3: env: more than 256 entries");

    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\ncapabilities: [ports]\nports: ["), 0);
    for (int i = 0; i < TEMPLATE_PORTS_MAX + 1; i++)
        assert_int_equal(buf_printf(&b, "%d,", 1000 + i), 0);
    assert_int_equal(buf_puts(&b, "]\n"), 0);
    bad(b.data, b.len, EINVAL, "3: ports: more than 64 entries");

    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "name: a\nstart_cmd: "), 0);
    for (int i = 0; i < TEMPLATE_CMD_MAX + 1; i++)
        assert_int_equal(buf_putc(&b, 'x'), 0);
    bad(b.data, b.len, EINVAL, "2: start_cmd: longer than 65536 bytes");
    buf_done(&b);
}

static void
test_names(void **state)
{
    assert_true(template_name_ok("a"));
    assert_true(template_name_ok("0-a_b"));
    assert_false(template_name_ok(""));
    assert_false(template_name_ok("_a"));
    assert_false(template_name_ok("a.b"));
    assert_false(template_name_ok("aB"));
    char n[66];
    memset(n, 'a', 64);
    n[64] = '\0';
    assert_true(template_name_ok(n));
    n[64] = 'a';
    n[65] = '\0';
    assert_false(template_name_ok(n));

    assert_int_equal(template_cap_from_name("shell"), TEMPLATE_CAP_SHELL);
    assert_int_equal(template_cap_from_name("ports"), TEMPLATE_CAP_PORTS);
    assert_int_equal(template_cap_from_name("Shell"), -EINVAL);
    assert_string_equal(template_cap_name(TEMPLATE_CAP_TERMINAL), "terminal");
    assert_null(template_cap_name(TEMPLATE_CAP_SHELL | TEMPLATE_CAP_FILES));
    assert_null(template_cap_name(0));
    for (unsigned bit = 1; bit & TEMPLATE_CAPS_ALL; bit <<= 1)
        assert_int_equal(template_cap_from_name(template_cap_name(bit)), (int)bit);
    assert_string_equal(template_arg_type_name(TEMPLATE_ARG_FLOAT), "float");
    assert_null(template_arg_type_name(_TEMPLATE_ARG_TYPE_MAX));
    assert_int_equal(template_arg_type_from_name("bool"), TEMPLATE_ARG_BOOL);
    assert_int_equal(template_arg_type_from_name("string"), _TEMPLATE_ARG_TYPE_INVALID);
}

/* template_load() on a real directory. */
static void
test_load(void **state)
{
    char dir[] = "/tmp/abx-template-XXXXXX";
    struct template *t = NULL;
    struct err e = {0};

    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);

    assert_int_equal(template_load(dfd, "tpl", &t, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "tpl/sandbox-template.yaml: cannot open"));

    assert_int_equal(write_file_at(dfd, TEMPLATE_FILE_NAME, full, 0644), 0);
    assert_int_equal(template_load(dfd, "tpl", &t, NULL), 0);
    assert_string_equal(t->name, "python-data");
    t = template_free(t);

    /* an invalid template is an error naming the file, never a default */
    err_clear(&e);
    assert_int_equal(write_file_at(dfd, TEMPLATE_FILE_NAME, "name: x\ncapabilities: [gpu]\n", 0644),
                     0);
    assert_int_equal(template_load(dfd, "tpl", &t, &e), -EINVAL);
    assert_null(t);
    assert_string_equal(e.msg, "tpl/sandbox-template.yaml:2: capabilities[0]: unknown capability "
                               "'gpu' (known: shell, files, code, terminal, ports)");

    /* too large */
    err_clear(&e);
    assert_int_equal(unlinkat(dfd, TEMPLATE_FILE_NAME, 0), 0);
    int fd = openat(dfd, TEMPLATE_FILE_NAME, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, TEMPLATE_FILE_MAX + 1), 0);
    close(fd);
    assert_int_equal(template_load(dfd, "tpl", &t, &e), -EFBIG);
    assert_string_equal(e.msg, "tpl/sandbox-template.yaml: larger than 1048576 bytes");

    /* a symlink is not followed, a directory or FIFO is not a file */
    assert_int_equal(unlinkat(dfd, TEMPLATE_FILE_NAME, 0), 0);
    assert_int_equal(write_file_at(dfd, "real.yaml", "name: x\n", 0644), 0);
    assert_int_equal(symlinkat("real.yaml", dfd, TEMPLATE_FILE_NAME), 0);
    assert_int_equal(template_load(dfd, "tpl", &t, NULL), -ELOOP);
    assert_int_equal(unlinkat(dfd, TEMPLATE_FILE_NAME, 0), 0);
    assert_int_equal(mkfifoat(dfd, TEMPLATE_FILE_NAME, 0644), 0);
    err_clear(&e);
    assert_int_equal(template_load(dfd, "tpl", &t, &e), -EINVAL);
    assert_string_equal(e.msg, "tpl/sandbox-template.yaml: not a regular file");
    assert_int_equal(unlinkat(dfd, TEMPLATE_FILE_NAME, 0), 0);
    assert_int_equal(mkdirat(dfd, TEMPLATE_FILE_NAME, 0755), 0);
    assert_int_equal(template_load(dfd, "tpl", &t, NULL), -EINVAL);
    assert_null(t);

    close(dfd);
    assert_int_equal(rm_rf_at(AT_FDCWD, dir), 0);
}

/* The example in docs/templates.md is a valid template. */
static void
test_docs_example(void **state)
{
    const char *root = getenv("ABX_SOURCE_ROOT");
    if (!root)
        skip();
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    struct buf b;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(read_file_at(dfd, "docs/templates.md", 1 << 20, &b), 0);
    close(dfd);
    char *y = strstr(b.data, "```yaml\n");
    assert_non_null(y);
    y += strlen("```yaml\n");
    char *end = strstr(y, "```\n");
    assert_non_null(end);
    *end = '\0';

    struct template *t = good(y);
    assert_string_equal(t->name, "python-data");
    assert_int_equal(t->n_cmds, 2);
    const struct template_command *c = template_find_command(t, "plot");
    assert_non_null(c);
    assert_string_equal(c->cmd, "python3 /opt/helpers.py plot {path} {column} --log={log} --opts "
                                "'{{\"dpi\": 96}}'");
    assert_string_equal(c->args[2].default_text, "false");
    template_free(t);
    buf_done(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_full),
            cmocka_unit_test(test_minimal),
            cmocka_unit_test(test_errors_top),
            cmocka_unit_test(test_errors_aliases),
            cmocka_unit_test(test_errors_steps),
            cmocka_unit_test(test_errors_env),
            cmocka_unit_test(test_errors_resources),
            cmocka_unit_test(test_errors_caps_ports),
            cmocka_unit_test(test_errors_commands),
            cmocka_unit_test(test_errors_args),
            cmocka_unit_test(test_yaml_refused),
            cmocka_unit_test(test_bombs),
            cmocka_unit_test(test_limits),
            cmocka_unit_test(test_names),
            cmocka_unit_test(test_load),
            cmocka_unit_test(test_docs_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
