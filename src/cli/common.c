/*
 * common.c - what every verb of abx uses to read its command line and
 * reach abxd: getopt with -h/--help and usage errors, the --json-only
 * option set, KEY=VALUE lists, checked option values, and the client made
 * on first use.
 *
 * The verbs (cmd-*.c) call down into this file; it uses output.c and no
 * verb.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/parse.h"

int
cli_json_operands(struct cli *cli, int argc, char **argv, int nargs, const char *what,
                  bool *ret_json, char ***ret_args)
{
    static const struct option opts[] = {
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    int o;

    *ret_json = false;
    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        if (o != 'j')
            return o;
        *ret_json = true;
    }
    if (argc - optind < nargs)
        return cli_usage(cli, "missing %s", what);
    if (argc - optind > nargs)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + nargs]);
    *ret_args = argv + optind;
    return 0;
}

const char *
cli_scope_noun(enum cli_scope scope)
{
    return scope == CLI_WORKSPACE ? "workspace" : "sandbox";
}

int
cli_client(struct cli *cli, struct abx_client **ret)
{
    int r;

    if (!cli->client) {
        r = abx_client_new(cli->url, cli->key, &cli->client);
        if (r == -EINVAL)
            return cli_error(cli, "ABX_URL '%s' is not an http:// or https:// URL%s", cli->url,
                             cli->key ? " (or ABX_API_KEY has control characters)" : "");
        if (r < 0)
            return cli_error(cli, "cannot set up the client: %s", strerror(-r));
    }
    *ret = cli->client;
    return 0;
}

int
cli_kv_add(struct cli *cli, struct cli_kv *l, const char *opt, const char *arg)
{
    const char *value;
    char *key;
    int r;

    if (l->n >= CLI_KV_MAX)
        return cli_usage(cli, "at most %d %s options", CLI_KV_MAX, opt);
    r = cli_parse_kv(arg, &key, &value);
    if (r == -ENOMEM)
        return cli_error(cli, "out of memory");
    if (r < 0)
        return cli_usage(cli, "%s wants KEY=VALUE, not '%s'", opt, arg);
    l->keys[l->n] = key;
    l->items[l->n] = (struct abx_kv){key, value};
    l->n++;
    return 0;
}

void
cli_kv_done(struct cli_kv *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->keys[i]);
    l->n = 0;
}

int
cli_opt_u64(struct cli *cli, const char *opt, const char *arg, uint64_t min, uint64_t *ret)
{
    uint64_t v;

    if (parse_u64(arg, &v) < 0 || v > INT64_MAX)
        return cli_usage(cli, "%s wants a whole number, not '%s'", opt, arg);
    if (v < min)
        return cli_usage(cli, "%s must be at least %llu", opt, (unsigned long long)min);
    *ret = v;
    return 0;
}

int
cli_opt_decimal(struct cli *cli, const char *opt, const char *arg, double *ret)
{
    double v;

    if (cli_parse_decimal(arg, &v) < 0)
        return cli_usage(cli, "%s wants a number like 2 or 0.5, not '%s'", opt, arg);
    *ret = v;
    return 0;
}

int
cli_opt_seconds(struct cli *cli, const char *opt, const char *arg, double *ret)
{
    double v;

    if (cli_parse_seconds(arg, &v) < 0)
        return cli_usage(cli, "%s wants seconds like 30, 1.5 or 5m, not '%s'", opt, arg);
    *ret = v;
    return 0;
}

int
cli_getopt(struct cli *cli, int argc, char **argv, const char *shortopts,
           const struct option *longopts)
{
    char opts[64];
    int prev = optind ? optind : 1;
    bool in_order = shortopts[0] == '+';
    int c;

    /* A leading ':' makes getopt tell a missing value (':') from an unknown
     * option ('?'); a leading '+' stops at the first operand. */
    if (snprintf(opts, sizeof(opts), "%s:%s", in_order ? "+" : "", shortopts + in_order) >=
        (int)sizeof(opts)) {
        (void)cli_error(cli, "internal error: option string too long");
        return CLI_BAD;
    }
    c = getopt_long(argc, argv, opts, longopts, NULL);
    if (c == 'h') {
        cli_print_verb_help(stdout, cli->verb);
        return CLI_HELP;
    }
    if (c == '?' || c == ':') {
        const char *bad = optind > prev && optind <= argc ? argv[optind - 1] : argv[prev];
        if (c == ':') {
            (void)cli_usage(cli, "option '%s' needs a value", bad);
        } else if (optopt && !(bad[0] == '-' && bad[1] == '-')) {
            (void)cli_usage(cli, "unknown option '-%c'", optopt);
        } else {
            (void)cli_usage(cli, "unknown option '%s'", bad);
        }
        return CLI_BAD;
    }
    return c;
}
