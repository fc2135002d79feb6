/*
 * cmd-sandbox.c - abx create, ls, info, update, kill.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum {
    OPT_MEMORY = 256,
    OPT_CPU,
    OPT_PIDS,
    OPT_TIMEOUT,
    OPT_ENV,
    OPT_META,
    OPT_TEMPLATE,
    OPT_JSON,
};

/* Whole seconds for sandbox timeouts, which the wire takes as integers. */
static int
whole_seconds(struct cli *cli, const char *arg, uint64_t *ret)
{
    double s;
    int r = cli_opt_seconds(cli, "--timeout", arg, &s);
    if (r)
        return r;
    if (s != floor(s) || s > (double)INT64_MAX)
        return cli_usage(cli, "--timeout of a sandbox is whole seconds, not '%s'", arg);
    *ret = (uint64_t)s;
    return 0;
}

int
cmd_create(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"memory-mb", required_argument, NULL, OPT_MEMORY},
            {"cpu", required_argument, NULL, OPT_CPU},
            {"pids", required_argument, NULL, OPT_PIDS},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"env", required_argument, NULL, OPT_ENV},
            {"meta", required_argument, NULL, OPT_META},
            {"template", required_argument, NULL, OPT_TEMPLATE},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_sandbox_spec spec = {0};
    struct abx_sandbox_info *info = NULL;
    struct abx_client *c;
    struct cli_kv env = {0}, meta = {0};
    bool json = false;
    int o, r = 0;

    while (r == 0 && (o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        switch (o) {
        case OPT_MEMORY:
            r = cli_opt_u64(cli, "--memory-mb", optarg, 1, &spec.memory_mb);
            break;
        case OPT_CPU:
            r = cli_opt_decimal(cli, "--cpu", optarg, &spec.cpu);
            if (r == 0 && spec.cpu <= 0)
                r = cli_usage(cli, "--cpu must be more than 0");
            break;
        case OPT_PIDS:
            r = cli_opt_u64(cli, "--pids", optarg, 1, &spec.pids);
            break;
        case OPT_TIMEOUT:
            r = whole_seconds(cli, optarg, &spec.timeout_s);
            spec.has_timeout = true;
            break;
        case OPT_ENV:
            r = cli_kv_add(cli, &env, "--env", optarg);
            break;
        case OPT_META:
            r = cli_kv_add(cli, &meta, "--meta", optarg);
            break;
        case OPT_TEMPLATE:
            spec.template_name = optarg;
            break;
        case OPT_JSON:
            json = true;
            break;
        default:
            r = o;
            break;
        }
    }
    if (r == 0 && optind < argc)
        r = cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (r == 0)
        r = cli_client(cli, &c);
    if (r == 0) {
        spec.env = env.items;
        spec.n_env = env.n;
        spec.metadata = meta.items;
        spec.n_metadata = meta.n;
        int k = abx_sandbox_create(c, &spec, &info);
        if (k < 0)
            r = cli_fail(cli, k, "cannot create a sandbox");
        else
            r = cli_print_line(cli, json ? info->json : info->id);
    }
    abx_sandbox_info_free(info);
    cli_kv_done(&env);
    cli_kv_done(&meta);
    return r;
}

int
cmd_ls(struct cli *cli, int argc, char **argv)
{
    struct abx_sandbox_list *l = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    r = cli_json_operands(cli, argc, argv, 0, "", &json, &args);
    if (r)
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_sandbox_list(c, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list sandboxes");
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        printf("%-22s %-9s %6s %9s %6s %6s  %s\n", "ID", "STATE", "CPU", "MEMORY", "PIDS", "PROCS",
               "CREATED");
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_sandbox_info *s = l->items[i];
            printf("%-22s %-9s %6.2f %6" PRIu64 " MB %6" PRIu64 " %6" PRIu64 "  %s\n", s->id,
                   s->state ? s->state : "?", s->cpu, s->memory_mb, s->pids, s->processes,
                   s->created_at ? s->created_at : "-");
        }
    }
    abx_sandbox_list_free(l);
    return r;
}

static void
print_info(const struct abx_sandbox_info *s)
{
    printf("id:         %s\n", s->id);
    printf("state:      %s\n", s->state ? s->state : "?");
    printf("template:   %s\n", s->template_name ? s->template_name : "?");
    printf("isolation:  %s\n", s->isolation ? s->isolation : "?");
    printf("created:    %s\n", s->created_at ? s->created_at : "-");
    if (s->end_at)
        printf("ends:       %s (timeout %" PRIu64 " s)\n", s->end_at, s->timeout_s);
    else
        printf("ends:       never\n");
    printf("cpu:        %g cores\n", s->cpu);
    printf("memory:     %" PRIu64 " MiB\n", s->memory_mb);
    printf("pids:       %" PRIu64 "\n", s->pids);
    printf("processes:  %" PRIu64 " running\n", s->processes);
    if (s->has_usage)
        printf("usage:      %.1f MiB memory, %" PRIu64 " pids, %.2f s cpu, %" PRIu64 " OOM kills\n",
               (double)s->usage.memory_bytes / (1024.0 * 1024.0), s->usage.pids,
               (double)s->usage.cpu_usec / 1e6, s->usage.oom_kills);
    for (size_t i = 0; i < s->n_metadata; i++)
        printf("%s %s=%s\n", i == 0 ? "metadata:  " : "           ", s->metadata[i].key,
               s->metadata[i].value);
}

int
cmd_info(struct cli *cli, int argc, char **argv)
{
    struct abx_sandbox_info *info = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    r = cli_json_operands(cli, argc, argv, 1, "the sandbox ID", &json, &args);
    if (r)
        return r;
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_sandbox_get(c, args[0], &info);
    if (k < 0)
        return cli_fail(cli, k, "cannot get sandbox '%s'", args[0]);
    if (json)
        r = cli_print_line(cli, info->json);
    else
        print_info(info);
    abx_sandbox_info_free(info);
    return r;
}

int
cmd_update(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"memory-mb", required_argument, NULL, OPT_MEMORY},
            {"cpu", required_argument, NULL, OPT_CPU},
            {"pids", required_argument, NULL, OPT_PIDS},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_sandbox_update u = {0};
    struct abx_sandbox_info *info = NULL;
    struct abx_client *c;
    bool json = false;
    int o, r = 0, k;

    while (r == 0 && (o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        switch (o) {
        case OPT_MEMORY:
            r = cli_opt_u64(cli, "--memory-mb", optarg, 1, &u.memory_mb);
            break;
        case OPT_CPU:
            r = cli_opt_decimal(cli, "--cpu", optarg, &u.cpu);
            if (r == 0 && u.cpu <= 0)
                r = cli_usage(cli, "--cpu must be more than 0");
            break;
        case OPT_PIDS:
            r = cli_opt_u64(cli, "--pids", optarg, 1, &u.pids);
            break;
        case OPT_TIMEOUT:
            r = whole_seconds(cli, optarg, &u.timeout_s);
            u.has_timeout = true;
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
    if (argc - optind < 1)
        return cli_usage(cli, "missing the sandbox ID");
    if (argc - optind > 1)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);
    if (u.cpu == 0 && !u.memory_mb && !u.pids && !u.has_timeout)
        return cli_usage(cli, "nothing to update: give --memory-mb, --cpu, --pids or --timeout");
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_sandbox_update(c, argv[optind], &u, json ? &info : NULL);
    if (k < 0)
        return cli_fail(cli, k, "cannot update sandbox '%s'", argv[optind]);
    if (json)
        r = cli_print_line(cli, info->json);
    abx_sandbox_info_free(info);
    return r;
}

int
cmd_kill(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    int o, r = 0;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if (optind >= argc)
        return cli_usage(cli, "missing the sandbox ID");
    if ((r = cli_client(cli, &c)))
        return r;
    for (int i = optind; i < argc; i++) {
        int k = abx_sandbox_kill(c, argv[i]);
        if (k < 0)
            r = cli_fail(cli, k, "cannot kill sandbox '%s'", argv[i]);
    }
    return r;
}
