/*
 * cmd-templates.c - abx template ls|show, abx commands, abx run, abx code.
 *
 * Templates and their custom commands as abxd serves them (libabx decodes
 * the answers; --json prints abxd's text), except `abx commands DIR`, which
 * reads DIR/sandbox-template.yaml offline with the template parser abxd uses
 * (src/template/template.h), so a template can be checked before abxd
 * loads it. `abx run` turns typed options into the command's arguments
 * against the declared ones (cli-args.c) and streams the output; `abx code`
 * sends a snippet. Both exit with the command's exit code, as exec does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "template/template.h"
#include "util/b64.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"

#define CODE_MAX     (1024 * 1024) /* bytes of a snippet (what abxd takes) */
#define EXIT_TIMEOUT 124           /* a command its deadline killed, as exec */

enum {
    OPT_JSON = 256,
    OPT_LANGUAGE,
};

/* The capabilities in the order abxd lists them. */
static const unsigned all_caps[] = {TEMPLATE_CAP_SHELL, TEMPLATE_CAP_FILES, TEMPLATE_CAP_CODE,
                                    TEMPLATE_CAP_TERMINAL, TEMPLATE_CAP_PORTS};

/* The wire's type names, for offline commands (abx_command_arg.type_name
 * is not const). */
static char type_names[][8] = {"str", "int", "float", "bool"};

/* --- printing --- */

/* Writes "a, b, c" of n strings, or none when n is 0. */
static void
print_list(char *const *v, size_t n, const char *none)
{
    if (n == 0)
        fputs(none, stdout);
    for (size_t i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", v[i]);
}

/* The first line of s, at most max bytes, into out. */
static void
first_line(const char *s, char *out, size_t max)
{
    size_t n = s ? strcspn(s, "\r\n") : 0;

    if (n >= max) {
        n = max - 4;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* do not cut a UTF-8 sequence */
        (void)snprintf(out, max, "%.*s...", (int)n, s);
        return;
    }
    (void)snprintf(out, max, "%.*s", (int)n, s ? s : "");
}

/* s with every line after the first indented by indent spaces. */
static void
print_indented(const char *s, int indent)
{
    for (; *s; s++) {
        putchar(*s);
        if (*s == '\n' && s[1])
            printf("%*s", indent, "");
    }
}

/* Each command with its arguments: "name:type (required|default=V|optional)". */
static void
print_commands(const struct abx_command *cmds, size_t n)
{
    if (n == 0) {
        printf("  (none)\n");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct abx_command *c = &cmds[i];
        printf("  %s", c->name);
        if (c->description) {
            fputs(": ", stdout);
            print_indented(c->description, 4);
        }
        putchar('\n');
        for (size_t k = 0; k < c->n_args; k++) {
            const struct abx_command_arg *g = &c->args[k];
            printf("    %s:%s ", g->name, g->type_name ? g->type_name : "str");
            if (g->required)
                printf("(required)");
            else if (g->default_value)
                printf("(default=%s)", g->default_value);
            else
                printf("(optional)");
            if (g->description) {
                fputs("  ", stdout);
                print_indented(g->description, 6);
            }
            putchar('\n');
        }
    }
}

/* --- template ls, show --- */

int
cmd_template_ls(struct cli *cli, int argc, char **argv)
{
    struct abx_template_list *l = NULL;
    struct abx_client *c;
    bool json = false;
    char **args;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 0, "", &json, &args)))
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_template_list(c, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list the templates");
    if (json) {
        r = cli_print_line(cli, l->json);
        abx_template_list_free(l);
        return r;
    }
    printf("%-16s %-16s %-32s %-24s %s\n", "NAME", "ALIASES", "CAPABILITIES", "COMMANDS",
           "DESCRIPTION");
    for (size_t i = 0; i < l->n; i++) {
        const struct abx_template_info *t = l->items[i];
        struct buf cmds, caps, aliases;
        char desc[100];

        buf_init(&cmds, BUF_UNLIMITED);
        buf_init(&caps, BUF_UNLIMITED);
        buf_init(&aliases, BUF_UNLIMITED);
        for (size_t m = 0; m < t->n_commands; m++)
            (void)buf_printf(&cmds, "%s%s", m ? "," : "", t->commands[m].name);
        for (size_t m = 0; m < t->n_capabilities; m++)
            (void)buf_printf(&caps, "%s%s", m ? "," : "", t->capabilities[m]);
        for (size_t m = 0; m < t->n_aliases; m++)
            (void)buf_printf(&aliases, "%s%s", m ? "," : "", t->aliases[m]);
        first_line(t->description, desc, sizeof(desc));
        printf("%-16s %-16s %-32s %-24s %s\n", t->name, aliases.len ? aliases.data : "-",
               caps.len ? caps.data : "-", cmds.len ? cmds.data : "-", desc);
        buf_done(&cmds);
        buf_done(&caps);
        buf_done(&aliases);
    }
    abx_template_list_free(l);
    return 0;
}

int
cmd_template_show(struct cli *cli, int argc, char **argv)
{
    struct abx_template_info *t = NULL;
    struct abx_client *c;
    bool json = false;
    char **args;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the template name", &json, &args)))
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_template_get(c, args[0], &t);
    if (k < 0)
        return cli_fail(cli, k, "cannot get template '%s'", args[0]);
    if (json) {
        r = cli_print_line(cli, t->json);
        abx_template_info_free(t);
        return r;
    }
    printf("name:          %s\n", t->name);
    printf("aliases:       ");
    print_list(t->aliases, t->n_aliases, "-");
    printf("\ndescription:   ");
    print_indented(t->description ? t->description : "-", 15);
    printf("\nbase:          %s\n", t->base ? t->base : "host");
    printf("capabilities:  ");
    print_list(t->capabilities, t->n_capabilities, "none");
    printf("\nresources:     cpu ");
    if (t->cpu > 0)
        printf("%g", t->cpu);
    else
        printf("default");
    if (t->memory_mb)
        printf(", memory %" PRIu64 " MiB", t->memory_mb);
    else
        printf(", memory default");
    if (t->pids)
        printf(", pids %" PRIu64 "\n", t->pids);
    else
        printf(", pids default\n");
    if (t->n_ports) {
        printf("ports:         ");
        for (size_t i = 0; i < t->n_ports; i++)
            printf("%s%d", i ? ", " : "", t->ports[i]);
        putchar('\n');
    }
    printf("commands:\n");
    print_commands(t->commands, t->n_commands);
    abx_template_info_free(t);
    return 0;
}

/* --- commands --- */

/* The offline form of a template's commands, as abx_command structs that
 * borrow the template's strings. */
struct offline {
    struct abx_command *cmds;
    size_t n;
};

static void
offline_done(struct offline *o)
{
    for (size_t i = 0; o->cmds && i < o->n; i++)
        free(o->cmds[i].args);
    free(o->cmds);
    *o = (struct offline){0};
}

static int
offline_from(const struct template *t, struct offline *o)
{
    o->cmds = calloc(t->n_cmds + 1, sizeof(*o->cmds));
    if (!o->cmds)
        return -ENOMEM;
    for (size_t i = 0; i < t->n_cmds; i++, o->n++) {
        const struct template_command *tc = &t->cmds[i];
        struct abx_command *c = &o->cmds[i];
        c->name = tc->name;
        c->description = tc->description;
        c->args = calloc(tc->n_args + 1, sizeof(*c->args));
        if (!c->args)
            return -ENOMEM;
        c->n_args = tc->n_args;
        for (size_t k = 0; k < tc->n_args; k++) {
            const struct template_arg *g = &tc->args[k];
            static const enum abx_arg_type types[] = {ABX_ARG_STR, ABX_ARG_INT, ABX_ARG_FLOAT,
                                                      ABX_ARG_BOOL};
            size_t ty = (size_t)g->type < ELEMENTSOF(types) ? (size_t)g->type : 0;
            c->args[k] = (struct abx_command_arg){
                    .name = g->name,
                    .type = types[ty],
                    .type_name = type_names[ty],
                    .required = g->required,
                    .default_value = g->default_text,
                    .description = g->description,
            };
        }
    }
    return 0;
}

/* Appends a default as its JSON value: a number or bool as it is (the
 * template stored it canonically), a string quoted. */
static int
put_default(struct buf *b, const struct abx_command_arg *g)
{
    if (g->type == ABX_ARG_BOOL ||
        (g->type != ABX_ARG_STR && cli_json_number_ok(g->default_value, g->type)))
        return buf_puts(b, g->default_value);
    return cli_json_string(b, g->default_value);
}

/* Runs x when everything before it succeeded (r == 0). */
#define PUT(x)       \
    do {             \
        if (r == 0)  \
            r = (x); \
    } while (0)

/* The JSON Schema abxd would send for c. */
static int
put_schema(struct buf *b, const struct abx_command *c)
{
    static const char *const types[] = {"string", "string", "integer", "number", "boolean"};
    size_t n = 0;
    int r = 0;

    PUT(buf_puts(b, "{\"type\":\"object\""));
    if (c->description) {
        PUT(buf_puts(b, ",\"description\":"));
        PUT(cli_json_string(b, c->description));
    }
    PUT(buf_puts(b, ",\"properties\":{"));
    for (size_t k = 0; k < c->n_args; k++) {
        const struct abx_command_arg *g = &c->args[k];
        PUT(buf_puts(b, k ? "," : ""));
        PUT(cli_json_string(b, g->name));
        PUT(buf_printf(b, ":{\"type\":\"%s\"", types[g->type]));
        if (g->description) {
            PUT(buf_puts(b, ",\"description\":"));
            PUT(cli_json_string(b, g->description));
        }
        if (g->default_value) {
            PUT(buf_puts(b, ",\"default\":"));
            PUT(put_default(b, g));
        }
        PUT(buf_putc(b, '}'));
    }
    PUT(buf_puts(b, "},\"required\":["));
    for (size_t k = 0; k < c->n_args; k++) {
        if (!c->args[k].required)
            continue;
        PUT(buf_puts(b, n++ ? "," : ""));
        PUT(cli_json_string(b, c->args[k].name));
    }
    PUT(buf_puts(b, "],\"additionalProperties\":false}"));
    return r;
}

/* A string member's value, or null. */
static int
put_str_or_null(struct buf *b, const char *s)
{
    return s ? cli_json_string(b, s) : buf_puts(b, "null");
}

/* {"template", "capabilities", "commands": [...]} as abxd's
 * GET /v1/sandboxes/{id}/commands answers it. */
static int
put_commands_json(struct buf *b, const struct template *t, const struct offline *o)
{
    size_t n = 0;
    int r = 0;

    PUT(buf_puts(b, "{\"template\":"));
    PUT(cli_json_string(b, t->name));
    PUT(buf_puts(b, ",\"capabilities\":["));
    for (size_t i = 0; i < ELEMENTSOF(all_caps); i++) {
        if (!(t->caps & all_caps[i]))
            continue;
        PUT(buf_puts(b, n++ ? "," : ""));
        PUT(cli_json_string(b, template_cap_name(all_caps[i])));
    }
    PUT(buf_puts(b, "],\"commands\":["));
    for (size_t i = 0; i < o->n; i++) {
        const struct abx_command *c = &o->cmds[i];
        PUT(buf_puts(b, i ? ",{\"name\":" : "{\"name\":"));
        PUT(cli_json_string(b, c->name));
        PUT(buf_puts(b, ",\"description\":"));
        PUT(put_str_or_null(b, c->description));
        PUT(buf_puts(b, ",\"args\":["));
        for (size_t k = 0; k < c->n_args; k++) {
            const struct abx_command_arg *g = &c->args[k];
            PUT(buf_puts(b, k ? ",{\"name\":" : "{\"name\":"));
            PUT(cli_json_string(b, g->name));
            PUT(buf_printf(b, ",\"type\":\"%s\",\"required\":%s,\"default\":", g->type_name,
                           g->required ? "true" : "false"));
            PUT(put_str_or_null(b, g->default_value));
            PUT(buf_puts(b, ",\"description\":"));
            PUT(put_str_or_null(b, g->description));
            PUT(buf_putc(b, '}'));
        }
        PUT(buf_puts(b, "],\"schema\":"));
        PUT(put_schema(b, c));
        PUT(buf_putc(b, '}'));
    }
    PUT(buf_puts(b, "]}"));
    return r;
}

/* `abx commands DIR`: the template file, read here. */
static int
commands_offline(struct cli *cli, const char *dir, bool json)
{
    _cleanup_(template_freep) struct template *t = NULL;
    _cleanup_close_ int fd = -EBADF;
    struct offline o = {0};
    struct err err = {0};
    char display[4096];
    size_t n = strlen(dir);
    int r;

    /* "dir/" names the file "dir/sandbox-template.yaml", not "dir//...". */
    while (n > 1 && dir[n - 1] == '/')
        n--;
    (void)snprintf(display, sizeof(display), "%.*s", (int)n, dir);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return cli_error(cli, "cannot open directory '%s': %s", dir, strerror(errno));
    r = template_load(fd, display, &t, &err);
    if (r < 0)
        return cli_error(cli, "%s", err.msg[0] ? err.msg : strerror(-r));
    if (offline_from(t, &o) < 0) {
        offline_done(&o);
        return cli_error(cli, "out of memory");
    }
    if (json) {
        struct buf b;
        buf_init(&b, BUF_UNLIMITED);
        r = put_commands_json(&b, t, &o);
        r = r < 0 ? cli_error(cli, "out of memory") : cli_print_line(cli, b.data);
        buf_done(&b);
        offline_done(&o);
        return r;
    }
    printf("template:      %s\ncapabilities:  ", t->name);
    bool any = false;
    for (size_t i = 0; i < ELEMENTSOF(all_caps); i++)
        if (t->caps & all_caps[i]) {
            printf("%s%s", any ? ", " : "", template_cap_name(all_caps[i]));
            any = true;
        }
    printf("%s\ncommands:\n", any ? "" : "none");
    print_commands(o.cmds, o.n);
    offline_done(&o);
    return 0;
}

int
cmd_commands(struct cli *cli, int argc, char **argv)
{
    struct abx_command_list *l = NULL;
    struct abx_client *c;
    struct stat st;
    const char *what;
    bool json = false;
    char **args;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the template directory or sandbox ID", &json,
                               &args)))
        return r;
    what = args[0];
    if (stat(what, &st) == 0 && S_ISDIR(st.st_mode))
        return commands_offline(cli, what, json);
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_sandbox_commands(c, what, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list the commands of sandbox '%s'", what);
    if (json) {
        r = cli_print_line(cli, l->json);
        abx_command_list_free(l);
        return r;
    }
    printf("template:      %s\ncapabilities:  ", l->template_name ? l->template_name : "base");
    print_list(l->capabilities, l->n_capabilities, "none");
    printf("\ncommands:\n");
    print_commands(l->commands, l->n_commands);
    abx_command_list_free(l);
    return 0;
}

/* --- output of run and code --- */

/* write_full() that also waits out a non-blocking descriptor. */
static int
write_all(int fd, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            (void)poll(&pfd, 1, -1);
            continue;
        }
        if (k < 0)
            return -errno;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

struct run_out {
    struct cli *cli;
    bool json;       /* re-encode the output as NDJSON lines, as exec --json */
    struct buf line; /* json: the line being written */
};

static int
on_output(enum abx_stream stream, const void *data, size_t len, uint64_t offset, void *userdata)
{
    struct run_out *ro = userdata;
    const char *name = stream == ABX_STREAM_STDERR ? "stderr" : "stdout";
    int r;

    if (stream == ABX_STREAM_DROPPED)
        return 0;
    if (ro->json) {
        buf_reset(&ro->line);
        if ((r = buf_printf(&ro->line, "{\"%s\":\"", name)) < 0 ||
            (r = b64_encode(&ro->line, data, len)) < 0 ||
            (r = buf_printf(&ro->line, "\",\"offset\":%" PRIu64 "}\n", offset)) < 0)
            return r;
        r = write_all(STDOUT_FILENO, ro->line.data, ro->line.len);
    } else {
        r = write_all(stream == ABX_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
    }
    if (r < 0)
        cli_warn(ro->cli, "cannot write the command's %s: %s", name, strerror(-r));
    return r;
}

/* The exit status for a result, after printing it (--json). */
static int
run_finish(struct cli *cli, const struct abx_exec_result *res, bool json)
{
    if (json && cli_print_line(cli, res->json))
        return EXIT_FAIL;
    if (!json && res->timed_out)
        cli_warn(cli, "the command reached its deadline and was killed");
    if (!json && res->oom_killed)
        cli_warn(cli, "the command ran out of memory and was killed");
    if (res->timed_out)
        return EXIT_TIMEOUT;
    return res->exit_code < 0 ? EXIT_FAIL : res->exit_code > 255 ? 255 : res->exit_code;
}

/* --- run --- */

static bool
is_own(const char *s, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(s, name, n) && (s[n] == '\0' || s[n] == '=');
}

/* The value of own option argv[*i] ("--opt V" or "--opt=V"); NULL (usage
 * printed) when it has none. */
static const char *
own_value(struct cli *cli, int argc, char **argv, int *i, const char *name)
{
    const char *eq = strchr(argv[*i], '=');

    if (eq)
        return eq + 1;
    if (*i + 1 >= argc) {
        (void)cli_usage(cli, "option '%s' needs a value", name);
        return NULL;
    }
    return argv[++*i];
}

/* Prints run's help (through cli_getopt(), which owns the verb help). */
static int
run_help(struct cli *cli, char *argv0)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    static char help[] = "--help";
    char *av[] = {argv0, help, NULL};

    optind = 0;
    return cli_getopt(cli, 2, av, "h", opts);
}

static void
print_names(const struct abx_command_list *l)
{
    fprintf(stderr, "Commands of template '%s': ", l->template_name ? l->template_name : "base");
    if (l->n_commands == 0)
        fprintf(stderr, "none");
    for (size_t i = 0; i < l->n_commands; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", l->commands[i].name);
    fputc('\n', stderr);
}

int
cmd_run(struct cli *cli, int argc, char **argv)
{
    struct abx_command_list *l = NULL;
    struct abx_exec_result res = {0};
    struct run_out ro = {.cli = cli};
    struct cli_args a;
    const struct abx_command *cmd;
    const char *id = NULL, *name = NULL, *json_args = NULL, *args = NULL;
    struct abx_client *c;
    bool any = false;
    int i, first = 0, r = 0, k;

    buf_init(&ro.line, BUF_UNLIMITED);
    cli_args_init(&a, NULL);
    /* Own options anywhere; SANDBOX and CMD are the first two operands and
     * every other option after CMD is one of the command's (known only
     * once its arguments are fetched). */
    for (i = 1; i < argc && !name; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            r = run_help(cli, argv[0]);
            goto out;
        }
        if (!strcmp(s, "--json"))
            ro.json = true;
        else if (is_own(s, "--json-args")) {
            if (!(json_args = own_value(cli, argc, argv, &i, "--json-args")))
                goto usage;
        } else if (s[0] == '-' && s[1])
            break; /* an option before CMD is an error, reported below */
        else if (!id)
            id = s;
        else
            name = s;
    }
    if (!name) {
        if (i < argc)
            r = cli_usage(cli, "unknown option '%s' (the command's options come after its name)",
                          argv[i]);
        else
            r = cli_usage(cli, "missing %s",
                          id ? "the command name" : "the sandbox ID and the command name");
        goto out;
    }
    first = i;
    if ((r = cli_client(cli, &c)))
        goto out;
    k = abx_sandbox_commands(c, id, &l);
    if (k < 0) {
        r = cli_fail(cli, k, "cannot list the commands of sandbox '%s'", id);
        goto out;
    }
    cmd = abx_command_find(l, name);
    if (!cmd) {
        r = cli_error(cli, "sandbox '%s' has no command '%s'", id, name);
        print_names(l);
        r = EXIT_USAGE;
        goto out;
    }
    cli_args_done(&a);
    cli_args_init(&a, cmd);
    for (i = first; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            r = run_help(cli, argv[0]);
            goto out;
        }
        if (!strcmp(s, "--json")) {
            ro.json = true;
        } else if (is_own(s, "--json-args")) {
            if (!(json_args = own_value(cli, argc, argv, &i, "--json-args")))
                goto usage;
        } else if (is_own(s, "--arg")) {
            const char *kv = own_value(cli, argc, argv, &i, "--arg");
            if (!kv)
                goto usage;
            if ((k = cli_args_add_kv(&a, kv)) < 0) {
                r = k == -ENOMEM ? cli_error(cli, "out of memory") : cli_usage(cli, "%s", a.error);
                goto out;
            }
            any = true;
        } else {
            k = cli_args_add_option(&a, argc - i, argv + i);
            if (k < 0) {
                r = k == -ENOMEM ? cli_error(cli, "out of memory") : cli_usage(cli, "%s", a.error);
                goto out;
            }
            i += k - 1;
            any = true;
        }
    }
    if (json_args && any) {
        r = cli_usage(cli, "--json-args cannot be combined with --arg or the command's options");
        goto out;
    }
    if (json_args)
        args = json_args;
    else if ((k = cli_args_finish(&a, &args)) < 0) {
        r = cli_error(cli, "%s", a.error);
        goto out;
    }
    k = abx_command_run(c, id, name, args, on_output, &ro, &res);
    if (k < 0) {
        r = cli_fail(cli, k, "cannot run command '%s' in sandbox '%s'", name, id);
        goto out;
    }
    r = run_finish(cli, &res, ro.json);
    goto out;
usage:
    r = EXIT_USAGE;
out:
    abx_exec_result_done(&res);
    abx_command_list_free(l);
    cli_args_done(&a);
    buf_done(&ro.line);
    return r;
}

/* --- code --- */

int
cmd_code(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"language", required_argument, NULL, OPT_LANGUAGE},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_exec_result res = {0};
    struct run_out ro = {.cli = cli};
    _cleanup_close_ int fd = -EBADF;
    const char *language = NULL, *file = "-", *id;
    struct abx_client *c;
    struct buf code;
    ssize_t n;
    int o, r = 0, k;

    buf_init(&code, CODE_MAX + 1);
    buf_init(&ro.line, BUF_UNLIMITED);
    while (r == 0 && (o = cli_getopt(cli, argc, argv, "hl:", opts)) != -1) {
        switch (o) {
        case 'l':
        case OPT_LANGUAGE:
            if (strcmp(optarg, "python") != 0 && strcmp(optarg, "javascript") != 0 &&
                strcmp(optarg, "bash") != 0)
                r = cli_usage(cli, "--language is python, javascript or bash, not '%s'", optarg);
            language = optarg;
            break;
        case OPT_JSON:
            ro.json = true;
            break;
        default:
            r = o;
            break;
        }
    }
    if (r)
        goto out;
    if (argc - optind < 1) {
        r = cli_usage(cli, "missing the sandbox ID");
        goto out;
    }
    if (argc - optind > 2) {
        r = cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
        goto out;
    }
    if (!language) {
        r = cli_usage(cli, "missing --language (python, javascript or bash)");
        goto out;
    }
    id = argv[optind];
    if (argc - optind == 2)
        file = argv[optind + 1];
    if (strcmp(file, "-") != 0) {
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            r = cli_error(cli, "cannot open '%s': %s", file, strerror(errno));
            goto out;
        }
    }
    if (buf_reserve(&code, CODE_MAX + 1) < 0) {
        r = cli_error(cli, "out of memory");
        goto out;
    }
    /* One byte more than fits tells a snippet that is too large. */
    n = read_full(fd >= 0 ? fd : STDIN_FILENO, code.data, CODE_MAX + 1);
    if (n < 0) {
        r = cli_error(cli, "cannot read %s: %s", fd >= 0 ? file : "standard input",
                      strerror((int)-n));
        goto out;
    }
    if (n > CODE_MAX) {
        r = cli_error(cli, "the code in %s is larger than %d bytes",
                      fd >= 0 ? file : "standard input", CODE_MAX);
        goto out;
    }
    code.len = (size_t)n;
    if ((r = cli_client(cli, &c)))
        goto out;
    k = abx_code_run(c, id, language, code.data, code.len, on_output, &ro, &res);
    if (k < 0) {
        r = cli_fail(cli, k, "cannot run %s code in sandbox '%s'", language, id);
        goto out;
    }
    r = run_finish(cli, &res, ro.json);
out:
    abx_exec_result_done(&res);
    buf_done(&ro.line);
    buf_done(&code);
    return r;
}

/* --- template build --- */

static int
print_build_line(unsigned step, bool start, unsigned line, const char *text, void *ud)
{
    (void)ud;
    if (start)
        printf("==> step %u: %s (line %u)\n", step, text, line);
    else
        printf("%s\n", text);
    (void)fflush(stdout);
    return 0;
}

int
cmd_template_build(struct cli *cli, int argc, char **argv)
{
    struct abx_client *c;
    bool json = false;
    char **args, *name = NULL;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the template directory", &json, &args)))
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_template_build(c, args[0], print_build_line, NULL, &name);
    if (k < 0)
        return cli_fail(cli, k, "cannot build the template in '%s'", args[0]);
    if (json)
        printf("{\"template\":\"%s\"}\n", name); /* a template name needs no escaping */
    else
        printf("built template '%s'\n", name);
    free(name);
    return 0;
}
