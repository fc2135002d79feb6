/*
 * output.c - what abx prints besides a verb's data: one-line errors and
 * warnings on stderr ("abx VERB: ..."), escaped for a terminal, a verb's
 * usage and help, and checked writes to stdout.
 *
 * Every verb (cmd-*.c), the option helpers (common.c) and the dispatcher
 * (abx.c) call down into this file; it calls nothing of theirs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/utf8.h"

static void
print_verb_usage(FILE *f, const struct verb *v)
{
    fprintf(f, "Usage: abx %s %s\n", v->name, v->synopsis);
}

void
cli_print_group_help(FILE *f, const struct verb *g)
{
    size_t skip = strlen(g->name) + 1;

    print_verb_usage(f, g);
    fprintf(f, "\n%s\nVerbs:\n", g->help);
    for (const struct verb *v = g->sub; v->name; v++)
        fprintf(f, "  %-9s %s\n", v->name + skip, v->summary);
    fprintf(f, "\n'abx %s VERB --help' describes a verb.\n", g->name);
}

void
cli_print_verb_help(FILE *f, const struct verb *v)
{
    if (v->sub) {
        cli_print_group_help(f, v);
        return;
    }
    print_verb_usage(f, v);
    fprintf(f, "\n%c%s.\n\nOptions:\n%s  -h, --help            show this help\n",
            v->summary[0] >= 'a' && v->summary[0] <= 'z' ? v->summary[0] - 'a' + 'A'
                                                         : v->summary[0],
            v->summary + 1, v->help);
}

char *
cli_escaped(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(UTF8_ESCAPED_MAX(n) + 1);
    if (!out)
        abort();
    (void)utf8_escape(out, UTF8_ESCAPED_MAX(n) + 1, s, n, NULL);
    return out;
}

__attribute__((format(printf, 3, 0))) static void
vreport(struct cli *cli, const char *prefix, const char *fmt, va_list ap)
{
    char msg[1024];

    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    fflush(stdout);
    /* Messages name paths (ours and abxd's): no raw control bytes. */
    char *safe = cli_escaped(msg);
    fprintf(stderr, "abx%s%s: %s%s\n", cli->verb ? " " : "", cli->verb ? cli->verb->name : "",
            prefix, safe);
    free(safe);
}

int
cli_usage(struct cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cli, "", fmt, ap);
    va_end(ap);
    if (cli->verb) {
        print_verb_usage(stderr, cli->verb);
        fprintf(stderr, "Try 'abx %s --help' for the options.\n", cli->verb->name);
    }
    return EXIT_USAGE;
}

int
cli_error(struct cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cli, "", fmt, ap);
    va_end(ap);
    return EXIT_FAIL;
}

void
cli_warn(struct cli *cli, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cli, "warning: ", fmt, ap);
    va_end(ap);
}

int
cli_fail(struct cli *cli, int r, const char *fmt, ...)
{
    char what[512];
    const char *msg = cli->client ? abx_client_error(cli->client) : "";
    char tmp[128];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (!msg[0])
        msg = strerror_r(-r, tmp, sizeof(tmp));
    if (r == -EACCES && !cli->key)
        return cli_error(cli, "%s: %s (ABX_API_KEY is not set)", what, msg);
    return cli_error(cli, "%s: %s", what, msg);
}

int
cli_print_line(struct cli *cli, const char *s)
{
    if (fputs(s, stdout) == EOF || putchar('\n') == EOF)
        return cli_error(cli, "cannot write to standard output: %s", strerror(errno));
    return 0;
}

int
cli_flush(struct cli *cli)
{
    if (fflush(stdout) == EOF || ferror(stdout))
        return cli_error(cli, "cannot write to standard output: %s", strerror(errno));
    return 0;
}
