/*
 * cmd-ws.c - abx ws: create, ls, info, rm, exec, cp, cat, files, rm-file,
 * mkdir, mv, flush, close, manifest.
 *
 * The lifecycle verbs and the mirror verbs are here; exec and the file verbs
 * are cmd-exec.c's and cmd-files.c's, run on a workspace (CLI_WORKSPACE).
 * Nothing here wakes a workspace but `ws exec`.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum {
    OPT_ID = 256,
    OPT_CPU,
    OPT_MEMORY,
    OPT_PIDS,
    OPT_TEMPLATE,
    OPT_JSON,
};

/* --- create, ls, info, rm --- */

int
cmd_ws_create(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"id", required_argument, NULL, OPT_ID},
            {"cpu", required_argument, NULL, OPT_CPU},
            {"memory-mb", required_argument, NULL, OPT_MEMORY},
            {"pids", required_argument, NULL, OPT_PIDS},
            {"template", required_argument, NULL, OPT_TEMPLATE},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_workspace_spec spec = {0};
    struct abx_workspace_info *info = NULL;
    struct abx_client *c;
    bool json = false;
    int o, r = 0, k;

    while (r == 0 && (o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        switch (o) {
        case OPT_ID:
            spec.id = optarg;
            break;
        case OPT_CPU:
            r = cli_opt_decimal(cli, "--cpu", optarg, &spec.cpu);
            if (r == 0 && spec.cpu <= 0)
                r = cli_usage(cli, "--cpu must be more than 0");
            break;
        case OPT_MEMORY:
            r = cli_opt_u64(cli, "--memory-mb", optarg, 1, &spec.memory_mb);
            break;
        case OPT_PIDS:
            r = cli_opt_u64(cli, "--pids", optarg, 1, &spec.pids);
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
    if (r)
        return r;
    if (optind < argc)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if ((r = cli_client(cli, &c)))
        return r;
    k = abx_workspace_create(c, &spec, &info);
    if (k == -EEXIST)
        return cli_error(cli, "cannot create workspace '%s': %s", spec.id ? spec.id : "",
                         abx_client_error(c));
    if (k < 0)
        return cli_fail(cli, k, "cannot create a workspace");
    r = cli_print_line(cli, json ? info->json : info->id);
    abx_workspace_info_free(info);
    return r;
}

int
cmd_ws_ls(struct cli *cli, int argc, char **argv)
{
    struct abx_workspace_list *l = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 0, "", &json, &args)) || (r = cli_client(cli, &c)))
        return r;
    k = abx_workspace_list(c, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list workspaces");
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        printf("%-22s %-9s %-9s %s\n", "ID", "STATE", "TEMPLATE", "CREATED");
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_workspace_info *w = l->items[i];
            printf("%-22s %-9s %-9s %s\n", w->id, w->state ? w->state : "?",
                   w->template_name ? w->template_name : "?", w->created_at ? w->created_at : "-");
        }
    }
    abx_workspace_list_free(l);
    return r;
}

int
cmd_ws_info(struct cli *cli, int argc, char **argv)
{
    struct abx_workspace_info *w = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the workspace", &json, &args)) ||
        (r = cli_client(cli, &c)))
        return r;
    k = abx_workspace_get(c, args[0], &w);
    if (k < 0)
        return cli_fail(cli, k, "cannot get workspace '%s'", args[0]);
    if (json) {
        r = cli_print_line(cli, w->json);
    } else {
        printf("id:         %s\n", w->id);
        printf("state:      %s\n", w->state ? w->state : "?");
        printf("template:   %s\n", w->template_name ? w->template_name : "?");
        printf("created:    %s\n", w->created_at ? w->created_at : "-");
        if (w->has_usage)
            printf("stored:     %" PRIu64 " bytes in %" PRIu64 " files, %" PRIu64 " directories\n",
                   w->usage.bytes, w->usage.files, w->usage.dirs);
        printf("processes:  %" PRIu64 " running\n", w->processes);
    }
    abx_workspace_info_free(w);
    return r;
}

int
cmd_ws_rm(struct cli *cli, int argc, char **argv)
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
        return cli_usage(cli, "missing the workspace");
    if ((r = cli_client(cli, &c)))
        return r;
    for (int i = optind; i < argc; i++) {
        int k = abx_workspace_delete(c, argv[i]);
        if (k < 0)
            r = cli_fail(cli, k, "cannot delete workspace '%s'", argv[i]);
    }
    return r;
}

/* --- exec and files: the sandbox verbs on a workspace --- */

int
cmd_ws_exec(struct cli *cli, int argc, char **argv)
{
    return exec_main(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_cp(struct cli *cli, int argc, char **argv)
{
    return files_cp(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_cat(struct cli *cli, int argc, char **argv)
{
    return files_cat(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_files(struct cli *cli, int argc, char **argv)
{
    return files_list(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_rm_file(struct cli *cli, int argc, char **argv)
{
    return files_rm(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_mkdir(struct cli *cli, int argc, char **argv)
{
    return files_mkdir(cli, argc, argv, CLI_WORKSPACE);
}

int
cmd_ws_mv(struct cli *cli, int argc, char **argv)
{
    return files_mv(cli, argc, argv, CLI_WORKSPACE);
}

/* --- flush, close, manifest --- */

static int
mirror(struct cli *cli, int argc, char **argv, bool close)
{
    struct abx_sync_report *rep = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the workspace", &json, &args)) ||
        (r = cli_client(cli, &c)))
        return r;
    k = close ? abx_workspace_close(c, args[0], &rep) : abx_workspace_flush(c, args[0], &rep);
    if (k < 0)
        return cli_fail(cli, k, "cannot %s workspace '%s'", close ? "close" : "flush", args[0]);
    if (json)
        r = cli_print_line(cli, rep->json);
    else
        printf("%s: %" PRIu64 " files (%" PRIu64 " bytes) and %" PRIu64
               " directories stored, %" PRIu64 " deleted, %" PRIu64 " unchanged, %" PRIu64
               " ignored, %" PRIu64 " skipped, in %.1f ms\n",
               close ? "closed" : "flushed", rep->files, rep->bytes, rep->dirs, rep->deleted,
               rep->unchanged, rep->ignored, rep->skipped, rep->duration_ms);
    abx_sync_report_free(rep);
    return r;
}

int
cmd_ws_flush(struct cli *cli, int argc, char **argv)
{
    return mirror(cli, argc, argv, false);
}

int
cmd_ws_close(struct cli *cli, int argc, char **argv)
{
    return mirror(cli, argc, argv, true);
}

int
cmd_ws_manifest(struct cli *cli, int argc, char **argv)
{
    struct abx_walk_list *l = NULL;
    struct abx_client *c;
    char **args;
    bool json;
    int r, k;

    if ((r = cli_json_operands(cli, argc, argv, 1, "the workspace", &json, &args)) ||
        (r = cli_client(cli, &c)))
        return r;
    k = abx_workspace_manifest(c, args[0], &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot get the manifest of workspace '%s'", args[0]);
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_file_info *f = l->items[i];
            printf("%-4s %12" PRIu64 " %-64s %s\n", f->type_name ? f->type_name : "?", f->size,
                   f->hash ? f->hash : "-", f->path);
        }
    }
    abx_walk_list_free(l);
    return r;
}
