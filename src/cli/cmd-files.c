/*
 * cmd-files.c - abx cp, files, rm, mkdir, mv, cat, and the same verbs on a
 * workspace (abx ws cp, files, rm-file, mkdir, mv, cat).
 *
 * cp streams between a local descriptor and the sandbox; it never holds a
 * file in memory. A download into a local regular file goes to a temporary
 * file beside it that replaces the destination only once complete, so a
 * failed copy leaves the destination as it was. Each verb is written once;
 * struct target says whose files it works on (a sandbox or a workspace) and
 * the target_*() helpers pick the libabx function. A workspace's uploads and
 * deletes may carry --if-match.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/cleanup.h"

enum {
    OPT_JSON = 256,
    OPT_OVERWRITE,
    OPT_IF_MATCH,
};

/* Whose files a verb works on. */
struct target {
    enum cli_scope scope;
    const char *id;       /* the sandbox or workspace */
    const char *if_match; /* workspace writes and deletes: If-Match, NULL = none */
};

static const char *
noun(const struct target *t)
{
    return cli_scope_noun(t->scope);
}

static int
target_upload(const struct target *t, struct abx_client *c, const char *path, int fd)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_file_upload(c, t->id, path, fd, t->if_match, NULL);
    return abx_file_upload(c, t->id, path, fd, NULL);
}

static int
target_download(const struct target *t, struct abx_client *c, const char *path, int fd)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_file_download(c, t->id, path, fd, NULL);
    return abx_file_download(c, t->id, path, fd, NULL);
}

static int
target_exists(const struct target *t, struct abx_client *c, const char *path,
              enum abx_file_type *ret_type)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_file_exists(c, t->id, path, ret_type);
    return abx_file_exists(c, t->id, path, ret_type);
}

static int
target_delete(const struct target *t, struct abx_client *c, const char *path)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_file_delete(c, t->id, path, t->if_match);
    return abx_file_delete(c, t->id, path);
}

static int
target_walk(const struct target *t, struct abx_client *c, const char *path,
            struct abx_walk_list **ret)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_walk(c, t->id, path, ret);
    return abx_walk(c, t->id, path, ret);
}

static int
target_mkdir(const struct target *t, struct abx_client *c, const char *path)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_mkdir(c, t->id, path);
    return abx_mkdir(c, t->id, path);
}

static int
target_rmdir(const struct target *t, struct abx_client *c, const char *path)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_rmdir(c, t->id, path);
    return abx_rmdir(c, t->id, path);
}

static int
target_rename(const struct target *t, struct abx_client *c, const char *from, const char *to,
              bool overwrite)
{
    if (t->scope == CLI_WORKSPACE)
        return abx_workspace_rename(c, t->id, from, to, overwrite, NULL);
    return abx_rename(c, t->id, from, to, overwrite, NULL);
}

/* Parses an --if-match value into *ret (heap, replacing what was there). */
static int
opt_if_match(struct cli *cli, const char *arg, char **ret)
{
    char *v = NULL;
    int r = cli_parse_if_match(arg, &v);

    if (r == -ENOMEM)
        return cli_error(cli, "out of memory");
    if (r < 0)
        return cli_usage(cli,
                         "--if-match wants a version or content hash (at most %d bytes, no '\"' "
                         "inside), not '%.64s'",
                         CLI_IF_MATCH_MAX, arg);
    free(*ret);
    *ret = v;
    return 0;
}

static bool
ends_with_slash(const char *s)
{
    size_t n = strlen(s);
    return n == 0 || s[n - 1] == '/';
}

/* --- cp --- */

static int
upload(struct cli *cli, struct abx_client *c, const char *local, const struct target *t,
       const char *rpath)
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
        k = target_exists(t, c, rpath, &type);
        if (k < 0)
            return cli_fail(cli, k, "cannot look up '%s' in %s '%s'", rpath, noun(t), t->id);
        into_dir = k > 0 && type == ABX_FILE_DIRECTORY;
    }
    if (into_dir) {
        if (from_stdin)
            return cli_error(cli, "'%s:%s' is a directory; name the file to write stdin to", t->id,
                             rpath);
        if ((k = cli_basename(local, &name)) < 0)
            return cli_usage(cli, "cannot tell the file name of '%s'", local);
        if ((k = cli_join(*rpath ? rpath : "/", name, &target)) < 0)
            return cli_error(cli, "out of memory");
        rpath = target;
    }
    k = target_upload(t, c, rpath, from_stdin ? STDIN_FILENO : fd);
    if (k < 0)
        return cli_fail(cli, k, "cannot upload '%s' to '%s' in %s '%s'",
                        from_stdin ? "standard input" : local, rpath, noun(t), t->id);
    return 0;
}

/* Downloads into fd (not closed). */
static int
download_fd(struct cli *cli, struct abx_client *c, const struct target *t, const char *rpath,
            int fd, const char *what)
{
    int k = target_download(t, c, rpath, fd);
    if (k < 0)
        return cli_fail(cli, k, "cannot download '%s' from %s '%s' to %s", rpath, noun(t), t->id,
                        what);
    return 0;
}

static int
download(struct cli *cli, struct abx_client *c, const struct target *t, const char *rpath,
         const char *local)
{
    _cleanup_free_ char *name = NULL, *joined = NULL, *dir = NULL, *tmp = NULL;
    _cleanup_close_ int fd = -EBADF;
    struct stat st, lst;
    bool exists;
    mode_t mode;
    int r;

    if (!strcmp(local, "-"))
        return download_fd(cli, c, t, rpath, STDOUT_FILENO, "standard output");
    if (ends_with_slash(rpath))
        return cli_usage(cli, "'%s:%s' names a directory; cp copies files", t->id, rpath);
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
        return download_fd(cli, c, t, rpath, fd, local);
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
    r = download_fd(cli, c, t, rpath, fd, local);
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
files_cp(struct cli *cli, int argc, char **argv, enum cli_scope scope)
{
    static const struct option opts[] = {
            {"if-match", required_argument, NULL, OPT_IF_MATCH}, /* a workspace's only */
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    _cleanup_free_ char *if_match = NULL;
    char sid[CLI_ID_MAX + 1], did[CLI_ID_MAX + 1];
    const char *spath = NULL, *dpath = NULL;
    struct abx_client *c;
    bool has_if_match = false;
    int o, r, rs, rd;

    while ((o = cli_getopt(cli, argc, argv, "h", scope == CLI_WORKSPACE ? opts : opts + 1)) != -1) {
        if (o != OPT_IF_MATCH)
            return o;
        if ((r = opt_if_match(cli, optarg, &if_match)))
            return r;
        has_if_match = true;
    }
    if (argc - optind != 2)
        return argc - optind < 2 ? cli_usage(cli, "expected SRC and DST")
                                 : cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
    const char *src = argv[optind], *dst = argv[optind + 1];
    rs = cli_parse_remote(src, sid, sizeof(sid), &spath);
    rd = cli_parse_remote(dst, did, sizeof(did), &dpath);
    if (rs < 0 || rd < 0)
        return cli_usage(cli, "the %s id in '%s' is too long", cli_scope_noun(scope),
                         rs < 0 ? src : dst);
    if (rs == rd)
        return cli_usage(cli, "one of SRC and DST must be %s:PATH, the other a local path or '-'",
                         scope == CLI_WORKSPACE ? "WS" : "ID");
    if (!strcmp(src, "-") && !strcmp(dst, "-"))
        return cli_usage(cli, "SRC and DST cannot both be '-'");
    if (has_if_match && !rd)
        return cli_usage(cli, "--if-match applies to uploads (DST is WS:PATH)");
    if ((r = cli_client(cli, &c)))
        return r;
    if (rd) {
        struct target t = {scope, did, has_if_match ? if_match : NULL};
        return upload(cli, c, src, &t, dpath);
    }
    if (!*spath)
        return cli_usage(cli, "'%s' names no file", src);
    struct target t = {scope, sid, NULL};
    return download(cli, c, &t, spath, dst);
}

int
cmd_cp(struct cli *cli, int argc, char **argv)
{
    return files_cp(cli, argc, argv, CLI_SANDBOX);
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

/* "ID and PATH" or "WS and PATH", for messages. */
static const char *
id_and(enum cli_scope scope, const char *sandbox, const char *workspace)
{
    return scope == CLI_WORKSPACE ? workspace : sandbox;
}

int
files_cat(struct cli *cli, int argc, char **argv, enum cli_scope scope)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    int o, r;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if ((r = operands(cli, argc, argv, 2, 2, id_and(scope, "ID and PATH", "WS and PATH"))) ||
        (r = cli_client(cli, &c)))
        return r;
    struct target t = {scope, argv[optind], NULL};
    return download_fd(cli, c, &t, argv[optind + 1], STDOUT_FILENO, "standard output");
}

int
cmd_cat(struct cli *cli, int argc, char **argv)
{
    return files_cat(cli, argc, argv, CLI_SANDBOX);
}

int
files_list(struct cli *cli, int argc, char **argv, enum cli_scope scope)
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
    if ((r = operands(cli, argc, argv, 1, 2, id_and(scope, "the sandbox ID", "the workspace"))) ||
        (r = cli_client(cli, &c)))
        return r;
    struct target t = {scope, argv[optind], NULL};
    path = argc - optind > 1 ? argv[optind + 1] : "/";
    k = target_walk(&t, c, path, &l);
    if (k < 0)
        return cli_fail(cli, k, "cannot list '%s' in %s '%s'", path, noun(&t), t.id);
    if (json) {
        r = cli_print_line(cli, l->json);
    } else {
        for (size_t i = 0; i < l->n; i++) {
            const struct abx_file_info *f = l->items[i];
            char *p = cli_escaped(f->path), *to = f->target ? cli_escaped(f->target) : NULL;
            printf("%-7s %12" PRIu64 " %s%s%s\n", f->type_name ? f->type_name : "?", f->size, p,
                   to ? " -> " : "", to ? to : "");
            free(p);
            free(to);
        }
    }
    abx_walk_list_free(l);
    return r;
}

int
cmd_files(struct cli *cli, int argc, char **argv)
{
    return files_list(cli, argc, argv, CLI_SANDBOX);
}

int
files_rm(struct cli *cli, int argc, char **argv, enum cli_scope scope)
{
    static const struct option opts[] = {
            {"if-match", required_argument, NULL, OPT_IF_MATCH}, /* a workspace's only */
            {"recursive", no_argument, NULL, 'r'},
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    _cleanup_free_ char *if_match = NULL;
    struct abx_client *c;
    bool recursive = false, has_if_match = false;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "hr", scope == CLI_WORKSPACE ? opts : opts + 1)) !=
           -1) {
        if (o == 'r') {
            recursive = true;
        } else if (o == OPT_IF_MATCH) {
            if ((r = opt_if_match(cli, optarg, &if_match)))
                return r;
            has_if_match = true;
        } else {
            return o;
        }
    }
    if ((r = operands(cli, argc, argv, 2, 2, id_and(scope, "ID and PATH", "WS and PATH"))) ||
        (r = cli_client(cli, &c)))
        return r;
    struct target t = {scope, argv[optind], has_if_match ? if_match : NULL};
    const char *path = argv[optind + 1];
    k = target_delete(&t, c, path);
    if (k == -EISDIR && recursive && has_if_match)
        return cli_error(cli,
                         "cannot remove '%s' in %s '%s': it is a directory, and --if-match "
                         "applies to files",
                         path, noun(&t), t.id);
    else if (k == -EISDIR && recursive)
        k = target_rmdir(&t, c, path);
    else if (k == -EISDIR)
        return cli_error(cli, "cannot remove '%s' in %s '%s': it is a directory (use -r)", path,
                         noun(&t), t.id);
    if (k < 0)
        return cli_fail(cli, k, "cannot remove '%s' in %s '%s'", path, noun(&t), t.id);
    return 0;
}

int
cmd_rm(struct cli *cli, int argc, char **argv)
{
    return files_rm(cli, argc, argv, CLI_SANDBOX);
}

int
files_mkdir(struct cli *cli, int argc, char **argv, enum cli_scope scope)
{
    static const struct option opts[] = {
            {"help", no_argument, NULL, 'h'},
            {0},
    };
    struct abx_client *c;
    int o, r, k;

    while ((o = cli_getopt(cli, argc, argv, "h", opts)) != -1)
        return o;
    if ((r = operands(cli, argc, argv, 2, 2, id_and(scope, "ID and PATH", "WS and PATH"))) ||
        (r = cli_client(cli, &c)))
        return r;
    struct target t = {scope, argv[optind], NULL};
    k = target_mkdir(&t, c, argv[optind + 1]);
    if (k < 0)
        return cli_fail(cli, k, "cannot create directory '%s' in %s '%s'", argv[optind + 1],
                        noun(&t), t.id);
    return 0;
}

int
cmd_mkdir(struct cli *cli, int argc, char **argv)
{
    return files_mkdir(cli, argc, argv, CLI_SANDBOX);
}

int
files_mv(struct cli *cli, int argc, char **argv, enum cli_scope scope)
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
    if ((r = operands(cli, argc, argv, 3, 3,
                      id_and(scope, "ID, FROM and TO", "WS, FROM and TO"))) ||
        (r = cli_client(cli, &c)))
        return r;
    struct target t = {scope, argv[optind], NULL};
    const char *from = argv[optind + 1], *to = argv[optind + 2];
    k = target_rename(&t, c, from, to, overwrite);
    if (k == -EEXIST && !overwrite)
        return cli_error(cli, "cannot move '%s' to '%s' in %s '%s': %s (use --overwrite)", from, to,
                         noun(&t), t.id, abx_client_error(c));
    if (k < 0)
        return cli_fail(cli, k, "cannot move '%s' to '%s' in %s '%s'", from, to, noun(&t), t.id);
    return 0;
}

int
cmd_mv(struct cli *cli, int argc, char **argv)
{
    return files_mv(cli, argc, argv, CLI_SANDBOX);
}
