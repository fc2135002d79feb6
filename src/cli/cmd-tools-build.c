/*
 * cmd-tools-build.c - abx tools build: tool packages into bundles.
 *
 * `abx tools build [--force] [--out DIR] [SRC...]` builds each package (a
 * directory with abx-tool.json, or a directory of them) into DIR/<name> with
 * src/toolkit/build.c, skipping those whose bundle is up to date. Every
 * package is tried; a failure is printed with the tail of its build output
 * and makes the exit status 1. This verb works on local files only: it
 * never talks to abxd (which loads the bundles at start, --tools-dir).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "toolkit/build.h"

#define DEFAULT_SRC      "sample-tools"
#define DEFAULT_OUT      "build/tools"
#define LOG_TAIL_LINES   20   /* lines of build output shown for a failure */
#define SRC_PACKAGES_MAX 1024 /* packages in one run */

enum {
    OPT_OUT = 256,
    OPT_FORCE,
};

struct pkg_list {
    char *dirs[SRC_PACKAGES_MAX];
    size_t n;
};

static void
pkg_list_done(struct pkg_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->dirs[i]);
    l->n = 0;
}

static int
pkg_add(struct cli *cli, struct pkg_list *l, const char *dir)
{
    if (l->n >= SRC_PACKAGES_MAX)
        return cli_error(cli, "more than %d packages", SRC_PACKAGES_MAX);
    l->dirs[l->n] = strdup(dir);
    if (!l->dirs[l->n])
        return cli_error(cli, "out of memory");
    l->n++;
    return 0;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* src is a package, or a directory whose (non-hidden) subdirectories with a
 * manifest are, in name order. Subdirectories without one are named in a
 * warning; none at all is an error. */
static int
expand_src(struct cli *cli, const char *src, struct pkg_list *l)
{
    struct dirent **ents = NULL;
    size_t before = l->n;
    int n, r = 0;

    if (tools_build_is_package(src))
        return pkg_add(cli, l, src);
    n = scandir(src, &ents, NULL, alphasort);
    if (n < 0)
        return cli_error(cli, "cannot read '%s': %s", src, strerror(errno));
    for (int i = 0; i < n; i++) {
        char sub[4096];
        struct stat st;
        const char *name = ents[i]->d_name;
        if (r == 0 && name[0] != '.' &&
            snprintf(sub, sizeof(sub), "%s%s%s", src, src[strlen(src) - 1] == '/' ? "" : "/",
                     name) < (int)sizeof(sub) &&
            stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (tools_build_is_package(sub))
                r = pkg_add(cli, l, sub);
            else
                cli_warn(cli, "'%s' has no %s; skipped", sub, TOOLS_BUILD_MANIFEST);
        }
        free(ents[i]);
    }
    free(ents);
    if (r)
        return r;
    if (l->n == before)
        return cli_error(cli, "'%s' is neither a package (no %s) nor a directory of packages", src,
                         TOOLS_BUILD_MANIFEST);
    qsort(l->dirs + before, l->n - before, sizeof(l->dirs[0]), cmp_str);
    return 0;
}

/* The last LOG_TAIL_LINES lines of the build output, indented, on stderr. */
static void
print_log_tail(const struct buf *log)
{
    const char *s = log->data, *end = log->data + log->len;
    int lines = 0;

    if (log->len == 0)
        return;
    while (end > s && end[-1] == '\n')
        end--;
    const char *p = end;
    while (p > s && lines < LOG_TAIL_LINES) {
        p--;
        if (*p == '\n')
            lines++;
    }
    if (*p == '\n')
        p++;
    fprintf(stderr, "  build output%s:\n", p > s ? " (last lines)" : "");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        fprintf(stderr, "  | %.*s\n", (int)len, p);
        p += len + 1;
    }
}

int
cmd_tools_build(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"out", required_argument, NULL, OPT_OUT},
            {"force", no_argument, NULL, OPT_FORCE},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    _cleanup_(tools_builder_freep) struct tools_builder *b = NULL;
    struct tools_build_opts bo = {0};
    struct pkg_list pkgs = {0};
    struct err err = {0};
    const char *out = NULL;
    size_t failed = 0;
    int o, r = 0;

    while ((o = cli_getopt(cli, argc, argv, "fo:h", opts)) != -1) {
        switch (o) {
        case 'o':
        case OPT_OUT:
            out = optarg;
            break;
        case 'f':
        case OPT_FORCE:
            bo.force = true;
            break;
        default:
            return o;
        }
    }
    if (!out || !*out) {
        out = getenv("ABX_TOOLS_DIR");
        if (!out || !*out)
            out = DEFAULT_OUT;
    }
    if (optind == argc) {
        struct stat st;
        if (stat(DEFAULT_SRC, &st) < 0 || !S_ISDIR(st.st_mode))
            return cli_usage(cli, "no SRC given and no ./%s here", DEFAULT_SRC);
        r = expand_src(cli, DEFAULT_SRC, &pkgs);
    }
    for (int i = optind; r == 0 && i < argc; i++)
        r = expand_src(cli, argv[i], &pkgs);
    if (r) {
        pkg_list_done(&pkgs);
        return r;
    }

    bo.out_dir = out;
    tools_build_sdk_default(&bo.sdk);
    if (tools_builder_new(&bo, &b, &err) < 0) {
        pkg_list_done(&pkgs);
        return cli_error(cli, "%s", err.msg[0] ? err.msg : "cannot start");
    }
    for (size_t i = 0; i < pkgs.n; i++) {
        struct tools_build_report rep;
        const char *dir = pkgs.dirs[i];

        tools_build_report_init(&rep);
        err_clear(&err);
        r = tools_builder_build(b, dir, &rep, &err);
        if (r < 0) {
            failed++;
            (void)cli_error(cli, "%s: %s", rep.name[0] ? rep.name : dir,
                            err.msg[0] ? err.msg : strerror(-r));
            print_log_tail(&rep.log);
        } else if (rep.outcome == TOOLS_BUILD_UP_TO_DATE) {
            printf("%s: up to date\n", rep.name);
        } else {
            printf("%s: built, %zu command%s (%.2f s)\n", rep.name, rep.n_commands,
                   rep.n_commands == 1 ? "" : "s", (double)rep.duration_ms / 1000);
        }
        if (r >= 0 && rep.source_changed)
            cli_warn(cli,
                     "%s: the build changed files in '%s'; write build output to "
                     "$ABX_TOOL_OUT only, or the next run rebuilds it again",
                     rep.name, dir);
        tools_build_report_done(&rep);
        fflush(stdout);
    }
    size_t total = pkgs.n;
    pkg_list_done(&pkgs);
    if (failed)
        return cli_error(cli, "%zu of %zu package%s failed", failed, total, total == 1 ? "" : "s");
    return 0;
}
