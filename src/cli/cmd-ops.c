/*
 * cmd-ops.c - abx health, ready, drain, metrics, store check, store gc.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum {
    OPT_JSON = 256,
};

/* Parses [--json] (when allowed) and no operands. */
static int
only_json(struct cli *cli, int argc, char **argv, bool allow_json, bool *ret_json)
{
    static const struct option with_json[] = {
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    int o;

    *ret_json = false;
    while ((o = cli_getopt(cli, argc, argv, "h", allow_json ? with_json : with_json + 1)) != -1) {
        if (o != OPT_JSON)
            return o;
        *ret_json = true;
    }
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    return 0;
}

int
cmd_health(struct cli *cli, int argc, char **argv)
{
    struct abx_client *c;
    char *text = NULL;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, true, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_health(c, &text);
    if (k < 0)
        return cli_fail(cli, k, "abxd at %s is not healthy", abx_client_url(c));
    r = cli_print_line(cli, json ? text : "ok");
    free(text);
    return r;
}

int
cmd_ready(struct cli *cli, int argc, char **argv)
{
    struct abx_readiness *rd = NULL;
    struct abx_client *c;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, true, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_ready(c, &rd);
    if (k < 0)
        return cli_fail(cli, k, "cannot ask abxd at %s whether it is ready", abx_client_url(c));
    if (json) {
        r = cli_print_line(cli, rd->json);
    } else if (k > 0) {
        printf("ready (isolation %s, cgroup %s)\n", rd->isolation ? rd->isolation : "?",
               rd->cgroup ? rd->cgroup : "?");
    } else {
        char missing[1024] = "";
        size_t used = 0;
        for (size_t i = 0; i < rd->n_missing; i++) {
            int n = snprintf(missing + used, sizeof(missing) - used, "%s%s", i ? ", " : "",
                             rd->missing[i]);
            if (n < 0 || (size_t)n >= sizeof(missing) - used)
                break;
            used += (size_t)n;
        }
        (void)cli_error(cli, "abxd at %s is not ready%s%s%s", abx_client_url(c),
                        rd->draining ? ": draining" : "", missing[0] ? ": missing " : "", missing);
    }
    abx_readiness_free(rd);
    if (r == 0 && k == 0)
        r = EXIT_FAIL;
    return r;
}

int
cmd_drain(struct cli *cli, int argc, char **argv)
{
    struct abx_client *c;
    char *text = NULL;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, true, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_drain(c, &text);
    if (k < 0)
        return cli_fail(cli, k, "cannot drain abxd at %s", abx_client_url(c));
    if (json)
        r = cli_print_line(cli, text);
    else
        printf("draining: no new sandboxes; %d still running\n", k);
    free(text);
    return r;
}

int
cmd_metrics(struct cli *cli, int argc, char **argv)
{
    struct abx_client *c;
    char *text = NULL;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, false, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_metrics(c, &text);
    if (k < 0)
        return cli_fail(cli, k, "cannot get the metrics of abxd at %s", abx_client_url(c));
    r = cli_print_line(cli, text);
    free(text);
    return r;
}

int
cmd_store_check(struct cli *cli, int argc, char **argv)
{
    struct abx_store_check *rep = NULL;
    struct abx_client *c;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, true, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_store_check(c, &rep);
    if (k < 0)
        return cli_fail(cli, k, "cannot check the store of abxd at %s", abx_client_url(c));
    if (json)
        r = cli_print_line(cli, rep->json);
    else if (k > 0)
        printf("ok: %s store, %" PRIu64 " files, %" PRIu64 " blobs\n",
               rep->store ? rep->store : "?", rep->files, rep->blobs);
    if (k == 0)
        (void)cli_error(cli,
                        "the %s store is damaged: %" PRIu64 " missing blobs, %" PRIu64
                        " corrupt blobs, %" PRIu64 " orphan entries; first: %s",
                        rep->store ? rep->store : "?", rep->missing_blobs, rep->corrupt_blobs,
                        rep->orphan_entries, rep->first_problem ? rep->first_problem : "?");
    abx_store_check_free(rep);
    if (r == 0 && k == 0)
        r = EXIT_FAIL;
    return r;
}

int
cmd_store_gc(struct cli *cli, int argc, char **argv)
{
    struct abx_store_gc *rep = NULL;
    struct abx_client *c;
    bool json;
    int r, k;

    if ((r = only_json(cli, argc, argv, true, &json)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_store_gc(c, &rep);
    if (k < 0)
        return cli_fail(cli, k, "cannot collect the store's garbage at %s", abx_client_url(c));
    if (json)
        r = cli_print_line(cli, rep->json);
    else if (!rep->held_lease)
        printf("another abxd is collecting (it holds the lease); nothing done\n");
    else
        printf("deleted %" PRIu64 " blobs, freed %" PRIu64 " bytes\n", rep->blobs_deleted,
               rep->bytes_freed);
    abx_store_gc_free(rep);
    return r;
}
