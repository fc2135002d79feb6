/*
 * fuzz-template.c - template_parse() on arbitrary bytes.
 *
 * Invariants: it returns 0 or -EINVAL (inputs stay under TEMPLATE_FILE_MAX);
 * a refusal carries a message that starts with the file name and a line
 * number, is shorter than ERR_MSG_MAX and holds no control characters; an
 * accepted template satisfies the validation rules re-checked here without
 * the parser's help (names, uniqueness, ports, env, paths, defaults and
 * placeholders), and parsing it again gives the same result.
 */
#include <errno.h>
#include <stdint.h>

#include "fuzz-common.h"
#include "template/template.h"

static bool
ident(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

static void
check_env(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(env[i], '=');
        CHECK(eq && eq > env[i] && (size_t)(eq - env[i]) <= TEMPLATE_ENV_NAME_MAX);
        for (const char *p = env[i]; p < eq; p++)
            CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
                  (p > env[i] && *p >= '0' && *p <= '9'));
        CHECK(!strchr(eq, '\n') && !strchr(eq, '\r'));
    }
}

static bool
has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return true;
    return false;
}

static void
check_default(const struct template_arg *a)
{
    const char *d = a->default_text;
    char b[64];

    if (!d)
        return;
    CHECK(!a->required);
    switch (a->type) {
    case TEMPLATE_ARG_STR:
        break;
    case TEMPLATE_ARG_INT: {
        errno = 0;
        char *end;
        long long v = strtoll(d, &end, 10);
        CHECK(errno == 0 && *end == '\0');
        (void)snprintf(b, sizeof(b), "%lld", v);
        CHECK(!strcmp(b, d)); /* canonical */
        break;
    }
    case TEMPLATE_ARG_FLOAT: {
        char *end;
        double v = strtod(d, &end);
        CHECK(*end == '\0' && v == v);
        break;
    }
    case TEMPLATE_ARG_BOOL:
        CHECK(!strcmp(d, "true") || !strcmp(d, "false"));
        break;
    default:
        CHECK(!"arg type out of range");
    }
}

static void
check_placeholders(const struct template_command *c)
{
    for (const char *p = c->cmd; *p; p++) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            p++;
            continue;
        }
        CHECK(*p != '}');
        if (*p != '{')
            continue;
        const char *end = strchr(p, '}');
        CHECK(end);
        size_t len = (size_t)(end - p - 1);
        CHECK(ident(p + 1, len, TEMPLATE_ARG_NAME_MAX));
        bool found = false;
        for (size_t i = 0; i < c->n_args; i++)
            found |= strlen(c->args[i].name) == len && !memcmp(c->args[i].name, p + 1, len);
        CHECK(found);
        p = end;
    }
}

static void
check_template(const struct template *t)
{
    CHECK(template_name_ok(t->name) && strcmp(t->name, TEMPLATE_BASE_HOST));
    CHECK(t->n_aliases <= TEMPLATE_ALIASES_MAX);
    for (size_t i = 0; i < t->n_aliases; i++) {
        CHECK(template_name_ok(t->aliases[i]) && strcmp(t->aliases[i], t->name));
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(t->aliases[i], t->aliases[j]));
        CHECK(template_matches(t, t->aliases[i]));
    }
    CHECK(t->base && strcmp(t->base, t->name));
    CHECK(!strcmp(t->base, TEMPLATE_BASE_HOST) || template_name_ok(t->base));
    CHECK((t->caps & ~TEMPLATE_CAPS_ALL) == 0);
    CHECK(t->cpu >= 0 && t->cpu <= TEMPLATE_CPU_MAX);
    CHECK(t->memory_mb <= TEMPLATE_MEMORY_MB_MAX && t->pids <= TEMPLATE_PIDS_MAX &&
          t->disk_mb <= TEMPLATE_DISK_MB_MAX);
    CHECK(t->n_ports <= TEMPLATE_PORTS_MAX);
    CHECK(t->n_ports == 0 || (t->caps & TEMPLATE_CAP_PORTS));
    for (size_t i = 0; i < t->n_ports; i++) {
        CHECK(t->ports[i] != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(t->ports[i] != t->ports[j]);
    }
    check_env(t->env, t->n_env);
    for (size_t i = 0; i < t->n_steps; i++) {
        const struct template_step *s = &t->steps[i];
        CHECK(s->a && s->a[0]);
        switch (s->kind) {
        case TEMPLATE_STEP_RUN:
            CHECK(!s->b);
            break;
        case TEMPLATE_STEP_WORKDIR:
            CHECK(!s->b && s->a[0] == '/');
            break;
        case TEMPLATE_STEP_ENV:
            CHECK(s->b && ident(s->a, strlen(s->a), TEMPLATE_ENV_NAME_MAX) && !strchr(s->b, '\n'));
            break;
        case TEMPLATE_STEP_COPY:
            CHECK(s->b && s->a[0] != '/' && !has_dotdot(s->a) && s->b[0] == '/');
            break;
        default:
            CHECK(!"step kind out of range");
        }
    }
    CHECK(t->n_cmds <= TEMPLATE_COMMANDS_MAX);
    for (size_t i = 0; i < t->n_cmds; i++) {
        const struct template_command *c = &t->cmds[i];
        CHECK(template_name_ok(c->name) && c->cmd && c->cmd[0]);
        CHECK(template_find_command(t, c->name) == c); /* unique */
        CHECK(!c->cwd || c->cwd[0] == '/');
        CHECK(c->timeout_ms <= (uint64_t)(TEMPLATE_TIMEOUT_MAX_S * 1000));
        check_env(c->env, c->n_env);
        CHECK(c->n_args <= TEMPLATE_ARGS_MAX);
        for (size_t j = 0; j < c->n_args; j++) {
            CHECK(ident(c->args[j].name, strlen(c->args[j].name), TEMPLATE_ARG_NAME_MAX));
            for (size_t k = 0; k < j; k++)
                CHECK(strcmp(c->args[j].name, c->args[k].name));
            check_default(&c->args[j]);
        }
        check_placeholders(c);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct template *t = NULL, *again = NULL;
    struct err e = {0};

    if (size > 256 * 1024)
        return 0;
    int r = template_parse((const char *)data, size, "fuzz.yaml", &t, &e);
    CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        CHECK(t == NULL);
        CHECK(e.errnum == EINVAL);
        CHECK(strlen(e.msg) < ERR_MSG_MAX);
        CHECK(!strncmp(e.msg, "fuzz.yaml:", 10) && e.msg[10] >= '1' && e.msg[10] <= '9');
        for (const char *p = e.msg; *p; p++)
            CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
        return 0;
    }
    check_template(t);
    CHECK(template_parse((const char *)data, size, "fuzz.yaml", &again, NULL) == 0);
    CHECK(!strcmp(again->name, t->name) && again->n_cmds == t->n_cmds &&
          again->n_steps == t->n_steps && again->caps == t->caps);
    template_free(again);
    template_free(t);
    return 0;
}
