/*
 * cmd-files.c - abx cp, files, rm, mkdir, mv, cat.
 *
 * cp streams between a local descriptor and the sandbox; it never holds a
 * file in memory. A download into a local regular file goes to a temporary
 * file beside it that replaces the destination only once complete, so a
 * failed copy leaves the destination as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "util/cleanup.h"

enum {
    OPT_JSON = 256,
    OPT_OVERWRITE,
};

static bool
ends_with_slash(const char *s)
{
    size_t n = strlen(s);
    return n == 0 || s[n - 1] == '/';
}

/* --- cp --- */

static int
upload(struct cli *cli, struct abx_client *c, const char *local, const char *id, const char *rpath)
{
    _cleanup_free_ char *name = NULL, *target = NULL;
    _cleanup_close_ int fd = -EBADF;
    bool from_stdin = !strcmp(local, "-");
    enum abx_file_type type = ABX_FILE_UNKNOWN;
    struct stat st;
    int k;

    if (!from_stdin) {
        fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return cli_error(cli, "cannot open '%s': %s", local, strerror(errno));
        if (fstat(fd, &st) < 0)
            return cli_error(cli, "cannot stat '%s': %s", local, strerror(errno));
        if (S_ISDIR(st.st_mode))
            return cli_error(cli, "'%s' is a directory; cp copies files", local);
    }
    /* A destination that is a directory gets the source's name. */
    bool into_dir = ends_with_slash(rpath);
    if (!into_dir) {
        k = abx_file_exists(c, id, rpath, &type);
        if (k < 0)
            return cli_fail(cli, k, "cannot look up '%s' in sandbox '%s'", rpath, id);
        into_dir = k > 0 && type == ABX_FILE_DIRECTORY;
    }
    if (into_dir) {
        if (from_stdin)
            return cli_error(cli, "'%s:%s' is a directory; name the file to write stdin to", id,
                             rpath);
        if ((k = cli_basename(local, &name)) < 0)
            return cli_usage(cli, "cannot tell the file name of '%s'", local);
        if ((k = cli_join(*rpath ? rpath : "/", name, &target)) < 0)
            return cli_error(cli, "out of memory");
        rpath = target;
    }
    k = abx_file_upload(c, id, rpath, from_stdin ? STDIN_FILENO : fd, NULL);
    if (k < 0)
        return cli_fail(cli, k, "cannot upload '%s' to '%s' in sandbox '%s'",
                        from_stdin ? "standard input" : local, rpath, id);
    return 0;
}

/* Downloads into fd (not closed). */
static int
download_fd(struct cli *cli, struct abx_client *c, const char *id, const char *rpath, int fd,
            const char *what)
{
    int k = abx_file_download(c, id, rpath, fd, NULL);
    if (k < 0)
        return cli_fail(cli, k, "cannot download '%s' from sandbox '%s' to %s", rpath, id, what);
    return 0;
}

static int
download(struct cli *cli, struct abx_client *c, const char *id, const char *rpath,
         const char *local)
{
    _cleanup_free_ char *name = NULL, *joined = NULL, *dir = NULL, *tmp = NULL;
    _cleanup_close_ int fd = -EBADF;
    struct stat st, lst;
    bool exists;
    mode_t mode;
    int r;

    if (!strcmp(local, "-"))
        return download_fd(cli, c, id, rpath, STDOUT_FILENO, "standard output");
    if (ends_with_slash(rpath))
        return cli_usage(cli, "'%s:%s' names a directory; cp copies files", id, rpath);
    exists = stat(local, &st) == 0;
    if (!exists && errno != ENOENT)
        return cli_error(cli, "cannot stat '%s': %s", local, strerror(errno));
    if (!exists && ends_with_slash(local))
        return cli_error(cli, "directory '%s' does not exist", local);
    if (exists && S_ISDIR(st.st_mode)) {
        if (cli_basename(rpath, &name) < 0)
            return cli_usage(cli, "cannot tell the file name of '%s'", rpath);
        if (cli_join(local, name, &joined) < 0)
            return cli_error(cli, "out of memory");
        local = joined;
        exists = stat(local, &st) == 0;
        if (!exists && errno != ENOENT)
            return cli_error(cli, "cannot stat '%s': %s", local, strerror(errno));
        if (exists && S_ISDIR(st.st_mode))
            return cli_error(cli, "'%s' is a directory", local);
    }
    if (exists && (!S_ISREG(st.st_mode) || (lstat(local, &lst) == 0 && S_ISLNK(lst.st_mode)))) {
        /* A device, a fifo, or a file behind a symlink: write through it. */
        fd = open(local, O_WRONLY | O_CLOEXEC | O_NOCTTY | (S_ISREG(st.st_mode) ? O_TRUNC : 0));
        if (fd < 0)
            return cli_error(cli, "cannot open '%s': %s", local, strerror(errno));
        return download_fd(cli, c, id, rpath, fd, local);
    }

    /* A temporary file beside the destination, renamed over it when done. */
    const char *slash = strrchr(local, '/');
    dir = slash ? strndup(local, (size_t)(slash - local) + 1) : strdup("");
    if (!dir || asprintf(&tmp, "%s.%s.abx-XXXXXX", dir, slash ? slash + 1 : local) < 0) {
        tmp = NULL;
        return cli_error(cli, "out of memory");
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return cli_error(cli, "cannot create a file beside '%s': %s", local, strerror(errno));
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        (void)umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) < 0) {
        r = cli_error(cli, "cannot set the mode of '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    r = download_fd(cli, c, id, rpath, fd, local);
    if (r)
        goto fail;
    if (close(TAKE_FD(fd)) < 0) {
        r = cli_error(cli, "cannot write '%s': %s", local, strerror(errno));
        goto fail;
    }
    if (rename(tmp, local) < 0) {
        r = cli_error(cli, "cannot replace '%s': %s", local, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    (void)unlink(tmp);
    return r;
}

int
cmd_cp(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    char sid[CLI_ID_MAX + 1], did[CLI_ID_MAX + 1];
    const char *spath = NULL, *dpath = NULL;
    struct abx_client *c;
    int o, r, rs, rd;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if (argc - optind != 2)
        return argc - optind < 2 ? cli_usage(cli, "expected SRC and DST")
                                 : cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
    const char *src = argv[optind], *dst = argv[optind + 1];
    rs = cli_parse_remote(src, sid, sizeof(sid), &spath);
    rd = cli_parse_remote(dst, did, sizeof(did), &dpath);
    if (rs < 0 || rd < 0)
        return cli_usage(cli, "the sandbox id in '%s' is too long", rs < 0 ? src : dst);
    if (rs == rd)
        return cli_usage(cli, "one of SRC and DST must be ID:PATH, the other a local path or "
                              "'-'");
    if (!strcmp(src, "-") && !strcmp(dst, "-"))
        return cli_usage(cli, "SRC and DST cannot both be '-'");
    if ((r = cli_client(cli, &c)))
        return r;
    if (rd)
        return upload(cli, c, src, did, dpath);
    if (!*spath)
        return cli_usage(cli, "'%s' names no file", src);
    return download(cli, c, sid, spath, dst);
}

/* --- cat, files, rm, mkdir, mv --- */

/* Parses [opts] and exactly n operands. */
static int
operands(struct cli *cli, int argc, char **argv, int min, int max, const char *missing)
{
    if (argc - optind < min)
        return cli_usage(cli, "missing %s", missing);
    if (argc - optind > max)
        return cli_usage(cli, "unexpected argument '%s'", argv[optind + max]);
    return 0;
}

int
cmd_cat(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    int o, r;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if ((r = operands(cli, argc, argv, 2, 2, "ID and PATH")) || (r = cli_client(cli, &c)))
        return r;
    return download_fd(cli, c, argv[optind], argv[optind + 1], STDOUT_FILENO, "standard output");
}

int
cmd_files(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_walk_list *l = NULL;
    struct abx_client *c;
    const char *path;
    bool json = false;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        if (o != OPT_JSON)
            return o;
        json = true;
    }
    if ((r = operands(cli, argc, argv, 1, 2, "the sandbox ID")) || (r = cli_client(cli, &c)))
        return r;
    path = argc - optind > 1 ? argv[optind + 1] : "/";
    k = abx_walk(c, argv[optind], path, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list '%s' in sandbox '%s'", path, argv[optind]);
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_file_info *f = l->items[i];
            printf("%-7s %12" PRIu64 " %s%s%s\n", f->type_name ? f->type_name : "?", f->size,
                   f->path, f->target ? " -> " : "", f->target ? f->target : "");
        }
    }
    abx_walk_list_free(l);
    return r;
}

int
cmd_rm(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"recursive", no_argument, NULL, 'r'},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    bool recursive = false;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "hr", opts)) != -1) {
        if (o != 'r')
            return o;
        recursive = true;
    }
    if ((r = operands(cli, argc, argv, 2, 2, "ID and PATH")) || (r = cli_client(cli, &c)))
        return r;
    const char *id = argv[optind], *path = argv[optind + 1];
    k = abx_file_delete(c, id, path);
    if (k == -EISDIR && recursive)
        k = abx_rmdir(c, id, path);
    else if (k == -EISDIR)
        return cli_error(cli, "cannot remove '%s' in sandbox '%s': it is a directory (use -r)",
                         path, id);
    if (k < 0)
        return cli_fail(cli, k, "cannot remove '%s' in sandbox '%s'", path, id);
    return 0;
}

int
cmd_mkdir(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if ((r = operands(cli, argc, argv, 2, 2, "ID and PATH")) || (r = cli_client(cli, &c)))
        return r;
    k = abx_mkdir(c, argv[optind], argv[optind + 1]);
    if (k < 0)
        return cli_fail(cli, k, "cannot create directory '%s' in sandbox '%s'", argv[optind + 1],
                        argv[optind]);
    return 0;
}

int
cmd_mv(struct cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
            {"overwrite", no_argument, NULL, OPT_OVERWRITE},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    bool overwrite = false;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1) {
        if (o != OPT_OVERWRITE)
            return o;
        overwrite = true;
    }
    if ((r = operands(cli, argc, argv, 3, 3, "ID, FROM and TO")) || (r = cli_client(cli, &c)))
        return r;
    const char *id = argv[optind], *from = argv[optind + 1], *to = argv[optind + 2];
    k = abx_rename(c, id, from, to, overwrite, NULL);
    if (k == -EEXIST && !overwrite)
        return cli_error(cli, "cannot move '%s' to '%s' in sandbox '%s': %s (use --overwrite)",
                         from, to, id, abx_client_error(c));
    if (k < 0)
        return cli_fail(cli, k, "cannot move '%s' to '%s' in sandbox '%s'", from, to, id);
    return 0;
}
