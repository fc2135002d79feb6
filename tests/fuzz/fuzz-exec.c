/*
 * fuzz-exec.c - the JSON that becomes a process: exec request bodies and
 * the arguments of a custom-command call. The first byte picks which (low
 * bit); the rest is the body.
 *
 *   0 api_exec_decode() (api/core/exec.c), POST .../exec: 0, -EINVAL
 *     or -EFBIG with a message and *ret untouched; a decoded request has
 *     argv as the body's "argv" (1..API_ARGV_MAX strings, the first not
 *     empty), env as "K=V" of the body's "env" (K not empty, no '=' in
 *     it), cwd within 4096 bytes, stdin within PROC_STDIN_MAX, "user"
 *     root exactly when it said "root", and timeouts within 7 days.
 *   1 api_render_command() (api/wire/templates.c), POST .../commands/{name}:
 *     the body is the "args" object for a fixed command; 0, -EINVAL or
 *     -E2BIG with a message; a rendered line holds every string value
 *     single-quoted (command_quote()), and only declared arguments with
 *     string, number or boolean values render.
 *
 * The decoded request is read through its first member, struct
 * sandbox_exec (core/exec.c keeps it there for api_exec_run()).
 */
#include <errno.h>

#include "api/api-internal.h"
#include "api/wire/wire.h"
#include "fuzz-common.h"
#include "sandbox/proc.h"
#include "template/command.h"
#include "util/buf.h"
#include "util/json.h"

#define WEEK_MS (7 * 86400000ull)

static void
exec_body(const char *body, size_t len)
{
    static struct api a = {.cfg = {.exec_timeout_ms = 60000}};
    struct exec_req *q = (struct exec_req *)&a; /* a canary: untouched on failure */
    struct err err = {0};
    int r = api_exec_decode(&a, body, len, &q, &err);
    if (r < 0) {
        CHECK(r == -EINVAL || r == -EFBIG);
        CHECK(err.msg[0] != '\0');
        CHECK(q == (struct exec_req *)&a);
        return;
    }
    const struct sandbox_exec *x = (const struct sandbox_exec *)q;
    json_t *j = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    CHECK(json_is_object(j));
    json_t *argv = json_object_get(j, "argv"), *env = json_object_get(j, "env");
    size_t n = json_array_size(argv);
    CHECK(n >= 1 && n <= API_ARGV_MAX);
    for (size_t i = 0; i < n; i++)
        CHECK(x->argv[i] && !strcmp(x->argv[i], json_string_value(json_array_get(argv, i))));
    CHECK(x->argv[n] == NULL && x->argv[0][0] != '\0');
    size_t ne = 0;
    for (; x->env && x->env[ne]; ne++) {
        const char *eq = strchr(x->env[ne], '=');
        CHECK(eq && eq > x->env[ne]);
        char key[4096];
        CHECK((size_t)(eq - x->env[ne]) < sizeof(key));
        memcpy(key, x->env[ne], (size_t)(eq - x->env[ne]));
        key[eq - x->env[ne]] = '\0';
        json_t *v = json_object_get(env, key);
        CHECK(json_is_string(v) && !strcmp(json_string_value(v), eq + 1));
    }
    CHECK(ne == (env ? json_object_size(env) : 0));
    CHECK(!x->cwd || strlen(x->cwd) <= 4096);
    CHECK(x->stdin_len <= PROC_STDIN_MAX);
    CHECK(x->root == (json_string_value(json_object_get(j, "user")) &&
                      !strcmp(json_string_value(json_object_get(j, "user")), "root")));
    CHECK(x->timeout_ms <= WEEK_MS && x->idle_timeout_ms <= WEEK_MS);
    json_decref(j);
    api_exec_req_free(q);
}

static struct template_arg args[] = {
        {.name = "x", .type = TEMPLATE_ARG_STR},
        {.name = "y", .type = TEMPLATE_ARG_STR, .default_text = "d'e"},
        {.name = "n", .type = TEMPLATE_ARG_INT, .default_text = "7"},
        {.name = "f", .type = TEMPLATE_ARG_FLOAT, .default_text = "0.5"},
        {.name = "b", .type = TEMPLATE_ARG_BOOL, .default_text = "false"},
};
static struct template_command command = {
        .name = "fuzz",
        .cmd = "echo {x} {y} && test {n} -gt 0 {{ {f} }} {b}",
        .args = args,
        .n_args = sizeof(args) / sizeof(args[0]),
};

static bool
declared(const char *name)
{
    for (size_t i = 0; i < command.n_args; i++)
        if (!strcmp(args[i].name, name))
            return true;
    return false;
}

static void
command_args(const char *body, size_t len)
{
    json_t *j = NULL;
    struct err err = {0};
    if (json_parse(body, len, &j, &err) < 0)
        return;
    if (!json_is_object(j)) {
        json_decref(j);
        return;
    }
    char *line = (char *)&command; /* a canary */
    int r = api_render_command(&command, j, &line, &err);
    if (r < 0) {
        CHECK(r == -EINVAL || r == -E2BIG);
        CHECK(err.msg[0] != '\0');
        CHECK(line == (char *)&command);
        json_decref(j);
        return;
    }
    CHECK(strlen(line) <= COMMAND_LINE_MAX);
    const char *k;
    json_t *v;
    json_object_foreach (j, k, v) {
        CHECK(declared(k));
        CHECK(json_is_string(v) || json_is_number(v) || json_is_boolean(v));
        if (!json_is_string(v) || strcmp(k, "x") != 0)
            continue;
        _cleanup_buf_ struct buf quoted;
        buf_init(&quoted, 4 * COMMAND_LINE_MAX);
        CHECK(command_quote(&quoted, json_string_value(v)) == 0);
        CHECK(strstr(line, quoted.data) != NULL);
    }
    free(line);
    json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *body = fuzz_string(data + 1, size - 1); /* NUL-terminated, length kept */
    if (data[0] & 1)
        command_args(body, size - 1);
    else
        exec_body(body, size - 1);
    free(body);
    return 0;
}
