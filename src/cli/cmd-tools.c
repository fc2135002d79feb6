/*
 * cmd-tools.c - abx tools: ls, schema, call.
 *
 * The tool bundles abxd loaded (--tools-dir) as a language model sees them:
 * `ls` lists the selected tools with their packages, `schema` prints one
 * tool's argument schema, `call` runs a tool in a workspace (or, with
 * --sandbox, a sandbox) the way a model's tool call would, and exits with
 * the tool's exit code. `tools build` is cmd-tools-build.c's. Nothing here
 * parses JSON: libabx decodes the answers, and --json prints abxd's text.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/b64.h"
#include "util/buf.h"
#include "util/fd.h"

#define ARGS_STDIN_MAX (1024 * 1024) /* bytes of arguments read from stdin */
#define EXIT_TIMEOUT   124           /* a tool its deadline killed, as exec */

enum {
    OPT_ALLOWED = 256,
    OPT_FORMAT,
    OPT_JSON,
    OPT_SANDBOX,
    OPT_TIMEOUT,
    OPT_IDLE,
    OPT_STREAM,
};

/* --- ls --- */

/* Whether package pkg's command cmd is in the selection allowed (NULL =
 * everything): an item "pkg" or "pkg:cmd", items separated by ',' with
 * blanks around them ignored, as abxd reads it. */
static bool
selected(const char *allowed, const char *pkg, const char *cmd)
{
    size_t plen = strlen(pkg), clen = strlen(cmd);

    if (!allowed)
        return true;
    for (const char *p = allowed; *p;) {
        const char *end = strchr(p, ',');
        size_t n;
        if (!end)
            end = p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        n = (size_t)(end - p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == plen && !memcmp(p, pkg, plen))
            return true;
        if (n == plen + 1 + clen && !memcmp(p, pkg, plen) && p[plen] == ':' &&
            !memcmp(p + plen + 1, cmd, clen))
            return true;
        p = *end ? end + 1 : end;
    }
    return false;
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

/* The table: each tool with the selected package that exports it. */
static void
print_tools(const struct abx_tool_list *l, const struct abx_tool_package_list *pkgs,
            const char *allowed)
{
    printf("%-24s %-20s %s\n", "NAME", "PACKAGE", "DESCRIPTION");
    for (size_t i = 0; i < l->n; i++) {
        const struct abx_tool *t = &l->items[i];
        const struct abx_tool_package *owner = NULL;
        char desc[100];

        for (size_t k = 0; !owner && k < pkgs->n; k++)
            for (size_t m = 0; m < pkgs->items[k]->n_commands; m++)
                if (!strcmp(pkgs->items[k]->commands[m], t->name) &&
                    selected(allowed, pkgs->items[k]->name, t->name)) {
                    owner = pkgs->items[k];
                    break;
                }
        first_line(t->description ? t->description
                   : owner        ? owner->description
                                  : NULL,
                   desc, sizeof(desc));
        printf("%-24s %-20s %s\n", t->name, owner ? owner->name : "-", desc);
    }
}

int
cmd_tools_ls(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"allowed", required_argument, NULL, OPT_ALLOWED},
            {"format", required_argument, NULL, OPT_FORMAT},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_tool_package_list *pkgs = NULL;
    struct abx_tool_list *l = NULL;
    const char *allowed = NULL, *format = NULL;
    struct abx_client *c;
    bool json = false;
    int o, r = 0, k;

    while (r == 0 && (o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        switch (o) {
        case OPT_ALLOWED:
            allowed = optarg;
            break;
        case OPT_FORMAT:
            if (strcmp(optarg, "openai") != 0 && strcmp(optarg, "mcp") != 0)
                r = cli_usage(cli, "--format is 'openai' or 'mcp', not '%s'", optarg);
            format = optarg;
            break;
        case OPT_JSON:
            json = true;
            break;
        default:
            r = o;
            break;
        }
    }
    if (r)
        return r;
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_tool_list(c, allowed, format, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list the tools");
    if (json || format) {
        r = cli_print_line(cli, l->json);
        abx_tool_list_free(l);
        return r;
    }
    k = abx_tool_package_list(c, &pkgs);
    if (k < 0) {
        abx_tool_list_free(l);
        return cli_fail(cli, k, "cannot list the tool packages");
    }
    print_tools(l, pkgs, allowed);
    abx_tool_package_list_free(pkgs);
    abx_tool_list_free(l);
    return 0;
}

/* --- schema --- */

int
cmd_tools_schema(struct cli *cli, int argc, char **argv)
{
    struct abx_tool_info *t = NULL;
    struct abx_client *c;
    bool json = false;
    char **args;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the tool name", &json, &args)))
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_tool_get(c, args[0], &t);
    if (k < 0)
        return cli_fail(cli, k, "cannot get tool '%s'", args[0]);
    r = cli_print_line(cli, json ? t->json : t->schema);
    abx_tool_info_free(t);
    return r;
}

/* --- call --- */

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

struct call_out {
    struct cli *cli;
    bool json;       /* re-encode the output as NDJSON lines */
    struct buf line; /* json: the line being written */
};

static int
on_output(enum abx_stream stream, const void *data, size_t len, uint64_t offset, void *userdata)
{
    struct call_out *co = userdata;
    const char *name = stream == ABX_STREAM_STDERR ? "stderr" : "stdout";
    int r;

    if (stream == ABX_STREAM_DROPPED)
        return 0;
    if (co->json) {
        buf_reset(&co->line);
        if ((r = buf_printf(&co->line, "{\"%s\":\"", name)) < 0 ||
            (r = b64_encode(&co->line, data, len)) < 0 ||
            (r = buf_printf(&co->line, "\",\"offset\":%" PRIu64 "}\n", offset)) < 0)
            return r;
        r = write_all(STDOUT_FILENO, co->line.data, co->line.len);
    } else {
        r = write_all(stream == ABX_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
    }
    if (r < 0)
        cli_warn(co->cli, "cannot write the tool's %s: %s", name, strerror(-r));
    return r;
}

/* Reads the arguments from stdin, at most ARGS_STDIN_MAX bytes. */
static int
read_args(struct cli *cli, struct buf *b)
{
    ssize_t n;

    if (buf_reserve(b, ARGS_STDIN_MAX + 1) < 0)
        return cli_error(cli, "out of memory");
    n = read_full(STDIN_FILENO, b->data, ARGS_STDIN_MAX + 1);
    if (n < 0)
        return cli_error(cli, "cannot read the arguments from standard input: %s",
                         strerror((int)-n));
    if (n > ARGS_STDIN_MAX)
        return cli_error(cli, "the arguments on standard input are larger than %d bytes",
                         ARGS_STDIN_MAX);
    /* The trailing newline of `echo` is no part of the object. */
    while (n > 0 && (b->data[n - 1] == '\n' || b->data[n - 1] == '\r' || b->data[n - 1] == ' ' ||
                     b->data[n - 1] == '\t'))
        n--;
    b->len = (size_t)n;
    b->data[n] = '\0';
    if (strlen(b->data) != b->len)
        return cli_error(cli, "the arguments on standard input contain a NUL byte");
    return 0;
}

/* What the human form prints after the tool's output; the exit status. */
static int
call_finish(struct cli *cli, const struct abx_tool_result *res, bool json, bool streamed)
{
    int r = 0;

    if (json) {
        r = cli_print_line(cli, res->json);
    } else {
        if (!streamed) {
            if (res->stdout_len &&
                (r = write_all(STDOUT_FILENO, res->stdout_data, res->stdout_len)) < 0)
                cli_warn(cli, "cannot write the tool's stdout: %s", strerror(-r));
            if (res->stderr_len &&
                (r = write_all(STDERR_FILENO, res->stderr_data, res->stderr_len)) < 0)
                cli_warn(cli, "cannot write the tool's stderr: %s", strerror(-r));
        }
        if (res->truncated)
            cli_warn(cli, "the tool's output was longer than abxd keeps; it was cut");
        if (res->timed_out)
            cli_warn(cli, "the tool reached its deadline and was killed");
        if (res->oom_killed)
            cli_warn(cli, "the tool ran out of memory and was killed");
        (void)fflush(stdout);
        for (size_t i = 0; i < res->n_files; i++)
            fprintf(stderr, "abx: wrote %s (%" PRIu64 " bytes)\n", res->files[i].path,
                    res->files[i].size);
        r = r < 0 ? EXIT_FAIL : 0;
    }
    if (r)
        return r;
    if (res->timed_out)
        return EXIT_TIMEOUT;
    return res->exit_code < 0 ? EXIT_FAIL : res->exit_code > 255 ? 255 : res->exit_code;
}

int
cmd_tools_call(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"sandbox", no_argument, NULL, OPT_SANDBOX},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"idle-timeout", required_argument, NULL, OPT_IDLE},
            {"stream", no_argument, NULL, OPT_STREAM},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_tool_call_opts copts = {0};
    struct abx_tool_result *res = NULL;
    struct call_out co = {.cli = cli};
    struct buf in;
    struct abx_client *c;
    const char *id, *name, *args = "{}";
    bool sandbox = false, stream = false;
    int o, r = 0, k;

    buf_init(&in, ARGS_STDIN_MAX + 1);
    buf_init(&co.line, BUF_UNLIMITED);
    while (r == 0 && (o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        switch (o) {
        case OPT_SANDBOX:
            sandbox = true;
            break;
        case OPT_TIMEOUT:
            r = cli_opt_seconds(cli, "--timeout", optarg, &copts.timeout_s);
            copts.has_timeout = true;
            break;
        case OPT_IDLE:
            r = cli_opt_seconds(cli, "--idle-timeout", optarg, &copts.idle_timeout_s);
            break;
        case OPT_STREAM:
            stream = true;
            break;
        case OPT_JSON:
            co.json = true;
            break;
        default:
            r = o;
            break;
        }
    }
    if (r)
        goto out;
    if (argc - optind < 2) {
        r = cli_usage(cli, "missing %s",
                      argc - optind < 1 ? (sandbox ? "the sandbox ID and the tool name"
                                                   : "the workspace and the tool name")
                                        : "the tool name");
        goto out;
    }
    if (argc - optind > 3) {
        r = cli_usage(cli, "unexpected argument '%s'", argv[optind + 3]);
        goto out;
    }
    id = argv[optind];
    name = argv[optind + 1];
    if (argc - optind == 3)
        args = argv[optind + 2];
    if (!strcmp(args, "-")) {
        if ((r = read_args(cli, &in)))
            goto out;
        args = in.data;
    }
    if ((r = cli_client(cli, &c)))
        goto out;
    if (stream && sandbox)
        k = abx_tool_call_stream(c, id, name, args, &copts, on_output, &co, &res);
    else if (stream)
        k = abx_workspace_tool_call_stream(c, id, name, args, &copts, on_output, &co, &res);
    else if (sandbox)
        k = abx_tool_call(c, id, name, args, &copts, &res);
    else
        k = abx_workspace_tool_call(c, id, name, args, &copts, &res);
    if (k < 0) {
        r = cli_fail(cli, k, "cannot call tool '%s' in %s '%s'", name,
                     sandbox ? "sandbox" : "workspace", id);
        goto out;
    }
    r = call_finish(cli, res, co.json, stream);
out:
    abx_tool_result_free(res);
    buf_done(&co.line);
    buf_done(&in);
    return r;
}
