/*
 * test-client-templates.c - libabx's template functions and `abx run`'s
 * argument building, offline.
 *
 * The file includes client-templates.c to reach its static pieces (template
 * and command URLs with names percent-encoded, the command body that keeps
 * the arguments' text, the template and command-list decoders) and links the
 * CLI's pure library for cli-args.c: typed options against a command's
 * declared arguments become the JSON object abxd takes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "client/client-templates.c"

static struct abx_client *
offline_client(void)
{
    struct abx_client *c = NULL;
    assert_int_equal(abx_client_new("http://127.0.0.1:1", "k", &c), 0);
    return c;
}

/* --- URLs and bodies --- */

static void
test_urls(void **state)
{
    struct abx_client *c = offline_client();
    char long_name[TEMPLATE_NAME_MAX + 2];
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(template_url(&b, "python-data"), 0);
    assert_string_equal(b.data, "/v1/templates/python-data");
    buf_reset(&b);
    assert_int_equal(template_url(&b, "../a b?x=1#y"), 0);
    assert_string_equal(b.data, "/v1/templates/..%2Fa%20b%3Fx%3D1%23y");
    buf_reset(&b);
    assert_int_equal(template_url(&b, ""), -EINVAL);
    buf_reset(&b);
    assert_int_equal(template_url(&b, NULL), -EINVAL);
    buf_reset(&b);
    assert_int_equal(template_url(&b, "a\nb"), -EINVAL);
    buf_reset(&b);
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(template_url(&b, long_name), -EINVAL);
    buf_reset(&b);
    long_name[TEMPLATE_NAME_MAX] = '\0';
    assert_int_equal(template_url(&b, long_name), 0);
    buf_reset(&b);

    assert_int_equal(command_url(c, &b, "sb_1", "echo"), 0);
    assert_string_equal(b.data, "/v1/sandboxes/sb_1/commands/echo");
    buf_reset(&b);
    assert_int_equal(command_url(c, &b, "sb", "x/../../y"), 0);
    assert_string_equal(b.data, "/v1/sandboxes/sb/commands/x%2F..%2F..%2Fy");
    buf_reset(&b);
    assert_int_equal(command_url(c, &b, "../x", "echo"), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "invalid sandbox id"));
    buf_reset(&b);
    assert_int_equal(command_url(c, &b, "sb", ""), -EINVAL);
    assert_non_null(strstr(abx_client_error(c), "invalid command name"));
    buf_done(&b);

    /* Invalid input fails before any request. */
    struct abx_exec_result res = {0};
    assert_int_equal(abx_command_run(c, "sb", "echo", "[1]", NULL, NULL, &res), -EINVAL);
    assert_int_equal(abx_command_run(c, "s/b", "echo", "{}", NULL, NULL, &res), -EINVAL);
    assert_int_equal(abx_code_run(c, "sb", "python", "a\0b", 3, NULL, NULL, &res), -EINVAL);
    assert_int_equal(abx_code_run(c, "sb", "python", "\xff", 1, NULL, NULL, &res), -EINVAL);
    assert_int_equal(abx_code_run(c, "sb", "", "1", 1, NULL, NULL, &res), -EINVAL);
    assert_int_equal(abx_template_get(c, "", &(struct abx_template_info *){NULL}), -EINVAL);
    abx_client_free(c);
}

static void
test_command_body(void **state)
{
    struct abx_client *c = offline_client();
    struct buf b;
    (void)state;

    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(command_body(c, NULL, &b), 0);
    assert_string_equal(b.data, "{\"args\":{}}");
    buf_reset(&b);
    /* The text is kept: 1.50 stays 1.50, key order and spacing too. */
    assert_int_equal(command_body(c, "{\"x\": 1.50, \"a\": \"$(id)\"}", &b), 0);
    assert_string_equal(b.data, "{\"args\":{\"x\": 1.50, \"a\": \"$(id)\"}}");
    buf_reset(&b);
    assert_int_equal(command_body(c, "[1]", &b), -EINVAL);
    assert_int_equal(command_body(c, "{", &b), -EINVAL);
    assert_int_equal(command_body(c, "{} {}", &b), -EINVAL);
    assert_int_equal(command_body(c, "{\"a\":1,\"a\":2}", &b), -EINVAL);
    assert_int_equal(b.len, 0);
    buf_done(&b);
    abx_client_free(c);
}

/* --- decoders --- */

static const char full_template[] =
        "{\"name\":\"toolbox\",\"aliases\":[\"tb\"],\"description\":\"echo and friends\","
        "\"base\":\"host\",\"capabilities\":[\"shell\",\"files\"],"
        "\"resources\":{\"cpu\":null,\"memory_mb\":300,\"pids\":100},\"ports\":[8888],"
        "\"commands\":[{\"name\":\"echo\",\"description\":\"Print\",\"args\":["
        "{\"name\":\"text\",\"type\":\"str\",\"required\":true,\"default\":null,"
        "\"description\":\"what\"},"
        "{\"name\":\"count\",\"type\":\"int\",\"required\":false,\"default\":\"3\","
        "\"description\":null},"
        "{\"name\":\"loud\",\"type\":\"bool\",\"required\":false,\"default\":false},"
        "{\"name\":\"x\",\"type\":\"decimal\"}],"
        "\"schema\":{\"type\":\"object\"}}]}";

static void
test_decode_template(void **state)
{
    struct abx_template_info *t = NULL;
    json_t *j;
    (void)state;

    j = json_loads(full_template, 0, NULL);
    assert_non_null(j);
    assert_int_equal(template_from(j, true, &t), 0);
    json_decref(j);
    assert_string_equal(t->name, "toolbox");
    assert_int_equal(t->n_aliases, 1);
    assert_string_equal(t->aliases[0], "tb");
    assert_null(t->aliases[1]);
    assert_string_equal(t->base, "host");
    assert_int_equal(t->n_capabilities, 2);
    assert_string_equal(t->capabilities[1], "files");
    assert_true(t->cpu == 0);
    assert_int_equal(t->memory_mb, 300);
    assert_int_equal(t->pids, 100);
    assert_int_equal(t->n_ports, 1);
    assert_int_equal(t->ports[0], 8888);
    assert_true(t->has_details);
    assert_int_equal(t->n_commands, 1);
    const struct abx_command *c = &t->commands[0];
    assert_string_equal(c->name, "echo");
    assert_string_equal(c->description, "Print");
    assert_non_null(strstr(c->schema, "\"type\": \"object\""));
    assert_int_equal(c->n_args, 4);
    assert_int_equal(c->args[0].type, ABX_ARG_STR);
    assert_true(c->args[0].required);
    assert_null(c->args[0].default_value);
    assert_string_equal(c->args[0].description, "what");
    assert_int_equal(c->args[1].type, ABX_ARG_INT);
    assert_string_equal(c->args[1].default_value, "3");
    assert_null(c->args[1].description);
    /* A default sent as a JSON value is written out. */
    assert_int_equal(c->args[2].type, ABX_ARG_BOOL);
    assert_string_equal(c->args[2].default_value, "false");
    assert_int_equal(c->args[3].type, ABX_ARG_UNKNOWN);
    assert_string_equal(c->args[3].type_name, "decimal");
    abx_template_info_free(t);

    /* A list entry names its commands only. */
    j = json_loads("{\"name\":\"base\",\"commands\":[\"a\",\"b\"]}", 0, NULL);
    assert_int_equal(template_from(j, false, &t), 0);
    json_decref(j);
    assert_false(t->has_details);
    assert_int_equal(t->n_commands, 2);
    assert_string_equal(t->commands[1].name, "b");
    assert_int_equal(t->commands[1].n_args, 0);
    assert_null(t->description);
    assert_int_equal(t->n_aliases, 0);
    abx_template_info_free(t);

    j = json_loads("{\"aliases\":[]}", 0, NULL);
    assert_int_equal(template_from(j, false, &t), -EBADMSG);
    json_decref(j);
    j = json_loads("{\"name\":\"a\",\"commands\":[{\"description\":\"no name\"}]}", 0, NULL);
    assert_int_equal(template_from(j, false, &t), -EBADMSG);
    json_decref(j);
}

static void
test_decode_commands(void **state)
{
    struct abx_command_list *l = calloc(1, sizeof(*l));
    json_t *j;
    (void)state;

    j = json_loads("{\"template\":\"locked\",\"capabilities\":[],\"commands\":[{\"name\":\"hello\","
                   "\"description\":null,\"args\":[{\"name\":\"who\",\"type\":\"str\","
                   "\"required\":false,\"default\":\"world\",\"description\":null}]}]}",
                   0, NULL);
    assert_int_equal(command_list_from(j, l), 0);
    json_decref(j);
    assert_string_equal(l->template_name, "locked");
    assert_int_equal(l->n_capabilities, 0);
    assert_null(l->capabilities[0]);
    assert_int_equal(l->n_commands, 1);
    assert_ptr_equal(abx_command_find(l, "hello"), &l->commands[0]);
    assert_null(abx_command_find(l, "hell"));
    assert_null(abx_command_find(l, NULL));
    assert_string_equal(abx_command_find(l, "hello")->args[0].default_value, "world");
    abx_command_list_free(l);

    l = calloc(1, sizeof(*l));
    j = json_loads("{\"template\":\"x\"}", 0, NULL);
    assert_int_equal(command_list_from(j, l), -EBADMSG);
    json_decref(j);
    abx_command_list_free(l);
}

/* --- abx run's arguments --- */

static struct abx_command_arg echo_args[] = {
        {.name = (char[]){"text"}, .type = ABX_ARG_STR, .type_name = (char[]){"str"}},
        {.name = (char[]){"count"}, .type = ABX_ARG_INT, .type_name = (char[]){"int"}},
        {.name = (char[]){"loud"}, .type = ABX_ARG_BOOL, .type_name = (char[]){"bool"}},
        {.name = (char[]){"ratio"}, .type = ABX_ARG_FLOAT, .type_name = (char[]){"float"}},
        {.name = (char[]){"dry_run"}, .type = ABX_ARG_BOOL, .type_name = (char[]){"bool"}},
        {.name = (char[]){"no_cache"}, .type = ABX_ARG_STR, .type_name = (char[]){"str"}},
};
static const struct abx_command echo = {
        .name = (char[]){"echo"},
        .args = echo_args,
        .n_args = sizeof(echo_args) / sizeof(echo_args[0]),
};

/* Feeds argv (NULL-terminated) as run's options after CMD; returns the first
 * failure or 0 with the JSON in *ret (a heap copy). --arg is handled here as
 * cmd_run() does. */
static int
build(struct cli_args *a, const char *const *argv, char **ret)
{
    int argc = 0, r;
    const char *json;

    while (argv[argc])
        argc++;
    cli_args_init(a, &echo);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--arg")) {
            assert_true(i + 1 < argc);
            r = cli_args_add_kv(a, argv[++i]);
        } else {
            /* The parser never writes argv; cmd_run() passes its own. */
            r = cli_args_add_option(a, argc - i, (char **)(uintptr_t)(argv + i));
            if (r > 0) {
                i += r - 1;
                r = 0;
            }
        }
        if (r < 0)
            return r;
    }
    if ((r = cli_args_finish(a, &json)) < 0)
        return r;
    *ret = strdup(json);
    return 0;
}

#define BUILD_OK(expected, ...)                                                         \
    do {                                                                                \
        struct cli_args a_;                                                             \
        char *j_ = NULL;                                                                \
        assert_int_equal(build(&a_, (const char *const[]){__VA_ARGS__, NULL}, &j_), 0); \
        assert_string_equal(j_, expected);                                              \
        free(j_);                                                                       \
        cli_args_done(&a_);                                                             \
    } while (0)

#define BUILD_FAILS(err, msg, ...)                                                        \
    do {                                                                                  \
        struct cli_args a_;                                                               \
        char *j_ = NULL;                                                                  \
        assert_int_equal(build(&a_, (const char *const[]){__VA_ARGS__, NULL}, &j_), err); \
        assert_non_null(strstr(a_.error, msg));                                           \
        cli_args_done(&a_);                                                               \
    } while (0)

static void
test_args(void **state)
{
    struct cli_args a;
    const char *json;
    (void)state;

    cli_args_init(&a, &echo);
    assert_int_equal(cli_args_finish(&a, &json), 0);
    assert_string_equal(json, "{}");
    cli_args_done(&a);

    BUILD_OK("{\"text\":\"hi\",\"count\":5,\"loud\":true}", "--text", "hi", "--count", "5",
             "--loud");
    BUILD_OK("{\"loud\":false,\"text\":\"a=b\"}", "--no-loud", "--text=a=b");
    /* A bool with a value goes as text: abxd coerces "YES". */
    BUILD_OK("{\"loud\":\"YES\"}", "--loud=YES");
    /* '-' stands for '_'; --no-X is a bool's false unless no_X is declared. */
    BUILD_OK("{\"dry_run\":true}", "--dry-run");
    BUILD_OK("{\"dry_run\":false}", "--no-dry_run");
    BUILD_OK("{\"no_cache\":\"x\"}", "--no-cache", "x");
    /* The value is the next word, whatever it looks like. */
    BUILD_OK("{\"text\":\"--x\"}", "--text", "--x");
    BUILD_OK("{\"text\":\"\"}", "--text", "");
    BUILD_OK("{\"text\":\"$(id) '; #\"}", "--text", "$(id) '; #");
    BUILD_OK("{\"text\":\"a\\\"b\\\\c\\nd\\u0001\\t\"}", "--text", "a\"b\\c\nd\x01\t");
    BUILD_OK("{\"text\":\"h\xc3\xa9\"}", "--text", "h\xc3\xa9");

    /* Numbers go as numbers when they are JSON numbers abxd can take. */
    BUILD_OK("{\"count\":-12}", "--count", "-12");
    BUILD_OK("{\"count\":\"007\"}", "--count", "007");
    BUILD_OK("{\"count\":\"1.5\"}", "--count", "1.5");
    BUILD_OK("{\"count\":\"ten\"}", "--count", "ten");
    BUILD_OK("{\"count\":\"+3\"}", "--count", "+3");
    BUILD_OK("{\"count\":9223372036854775807}", "--count", "9223372036854775807");
    BUILD_OK("{\"count\":\"9223372036854775808\"}", "--count", "9223372036854775808");
    BUILD_OK("{\"count\":-9223372036854775808}", "--count", "-9223372036854775808");
    BUILD_OK("{\"count\":\"-9223372036854775809\"}", "--count", "-9223372036854775809");
    BUILD_OK("{\"ratio\":0.1}", "--ratio", "0.1");
    BUILD_OK("{\"ratio\":1e3}", "--ratio", "1e3");
    BUILD_OK("{\"ratio\":-2.5E-3}", "--ratio", "-2.5E-3");
    BUILD_OK("{\"ratio\":\".5\"}", "--ratio", ".5");
    BUILD_OK("{\"ratio\":\"1e400\"}", "--ratio", "1e400");
    BUILD_OK("{\"ratio\":\"1e-400\"}", "--ratio", "1e-400");
    BUILD_OK("{\"ratio\":\"nan\"}", "--ratio", "nan");
    BUILD_OK("{\"ratio\":\"1.\"}", "--ratio", "1.");

    /* --arg: typed when declared, text when not (abxd refuses it). */
    BUILD_OK("{\"count\":12,\"text\":\"a=b\",\"colour\":\"red\"}", "--arg", "count=12", "--arg",
             "text=a=b", "--arg", "colour=red");
    BUILD_OK("{\"dry_run\":\"yes\"}", "--arg", "dry-run=yes");

    BUILD_FAILS(-ENOENT,
                "command 'echo' has no option '--colour' (its options: --text str, "
                "--count int, --[no-]loud, --ratio float, --[no-]dry_run, --no_cache str)",
                "--colour", "red");
    BUILD_FAILS(-ENOENT, "no option '--no-textx'", "--no-textx");
    BUILD_FAILS(-EINVAL, "'text' is not a bool argument", "--no-text");
    BUILD_FAILS(-EINVAL, "takes no value", "--no-loud=1");
    BUILD_FAILS(-EINVAL, "option '--text' needs a value", "--text");
    BUILD_FAILS(-EINVAL, "unexpected argument 'word'", "word");
    BUILD_FAILS(-EINVAL, "unexpected argument '-x'", "-x");
    BUILD_FAILS(-EINVAL, "unexpected argument '--'", "--");
    BUILD_FAILS(-EEXIST, "argument 'text' is given twice", "--text", "a", "--arg", "text=b");
    BUILD_FAILS(-EEXIST, "argument 'loud' is given twice", "--loud", "--no-loud");
    BUILD_FAILS(-EEXIST, "argument 'x' is given twice", "--arg", "x=1", "--arg", "x=2");
    BUILD_FAILS(-EINVAL, "--arg wants NAME=VALUE", "--arg", "text");
    BUILD_FAILS(-EINVAL, "--arg wants NAME=VALUE", "--arg", "=x");
}

static void
test_args_bounds(void **state)
{
    const struct abx_command none = {.name = (char[]){"bare"}};
    struct cli_args a;
    char kv[32];
    int r = 0;
    (void)state;

    cli_args_init(&a, &none);
    assert_int_equal(cli_args_add_option(&a, 1, (char *[]){(char[]){"--x"}, NULL}), -ENOENT);
    assert_non_null(strstr(a.error, "(its options: none)"));
    for (int i = 0; i <= CLI_ARGS_MAX && r == 0; i++) {
        (void)snprintf(kv, sizeof(kv), "a%d=%d", i, i);
        r = cli_args_add_kv(&a, kv);
    }
    assert_int_equal(r, -E2BIG);
    assert_int_equal(a.n, CLI_ARGS_MAX);
    cli_args_done(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_urls),
            cmocka_unit_test(test_command_body),
            cmocka_unit_test(test_decode_template),
            cmocka_unit_test(test_decode_commands),
            cmocka_unit_test(test_args),
            cmocka_unit_test(test_args_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
