/*
 * build-stage.c - filling the staging directory: copying the listed files
 * without following symlinks, sealing modes and fsyncing the tree, and the
 * three-stage contract (commands, schemas) that becomes commands.json and
 * schemas/.
 *
 * Everything here works on dirfds beside the bundle; nothing is swapped in
 * (build.c does that).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "toolkit/build-internal.h"
#include "toolkit/build.h"
#include "tools/registry.h"
#include "tools/schema.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/parse.h"

/* --- copying files into the staging directory --- */

/* Opens the directory rel below root without following any symlink,
 * creating missing components (mode 0755) when create. */
int
build_open_dir_nofollow(int root, const char *rel, bool create, const char *what, struct err *err)
{
    char part[NAME_MAX + 1];
    int cur = fcntl(root, F_DUPFD_CLOEXEC, 3);

    if (cur < 0)
        return err_setx(err, errno, "dup");
    for (const char *c = rel; *c;) {
        const char *e = strchrnul(c, '/');
        size_t len = (size_t)(e - c);
        memcpy(part, c, len);
        part[len] = '\0';
        if (create && mkdirat(cur, part, 0755) < 0 && errno != EEXIST) {
            int k = errno;
            (void)safe_close(cur);
            return err_setx(err, k, "cannot create '%s' in the bundle", rel);
        }
        int next = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int k = errno;
        (void)safe_close(cur);
        if (next < 0)
            return err_set(
                    err, k == ELOOP || k == ENOTDIR ? EINVAL : k, "%s: '%.200s' is %s", what, rel,
                    k == ELOOP || k == ENOTDIR ? "a symlink or not a directory" : strerror(k));
        cur = next;
        c = *e ? e + 1 : e;
    }
    return cur;
}

/* Splits rel into a heap parent ("" for none) and a pointer to its last part. */
int
build_split_rel(const char *rel, char **ret_parent, const char **ret_name)
{
    const char *slash = strrchr(rel, '/');
    *ret_parent = strndup(rel, slash ? (size_t)(slash - rel) : 0);
    if (!*ret_parent)
        return -ENOMEM;
    *ret_name = slash ? slash + 1 : rel;
    return 0;
}

static int copy_entry(int sdir, int ddir, const char *name, const char *rel, int depth,
                      struct err *err);

static int
copy_dir_contents(int sfd, int dfd, const char *rel, int depth, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    int fd = fcntl(sfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_setx(err, errno, "dup");
    d = fdopendir(fd);
    if (!d) {
        (void)safe_close(fd);
        return err_setx(err, errno, "cannot read '%s'", rel);
    }
    while ((errno = 0, de = readdir(d))) {
        char sub[PATH_MAX];
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || build_skipped_name(de->d_name))
            continue;
        if (snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= (int)sizeof(sub))
            return err_set(err, ENAMETOOLONG, "a path below '%s' is too long", rel);
        if ((r = copy_entry(sfd, dfd, de->d_name, sub, depth + 1, err)) < 0)
            return r;
    }
    if (errno)
        return err_setx(err, errno, "cannot read '%s'", rel);
    return 0;
}

/* Copies sdir/name (a regular file or a directory tree, never a symlink) to
 * ddir/name. Hidden entries and __pycache__ inside directories are skipped,
 * as the source hash skips them. */
static int
copy_entry(int sdir, int ddir, const char *name, const char *rel, int depth, struct err *err)
{
    struct stat st;
    int r;

    if (depth > BUILD_TREE_DEPTH_MAX)
        return err_set(err, ELOOP, "'files': '%.200s' is too deep", rel);
    if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return err_setx(err, errno, "'files': cannot find '%.200s' in the package", rel);
    if (S_ISREG(st.st_mode)) {
        r = copy_file_at(sdir, name, ddir, name, st.st_mode & 0111 ? 0755 : 0644);
        if (r < 0)
            return err_set(err, -r, "'files': cannot copy '%.200s': %s", rel, strerror(-r));
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return err_set(err, EINVAL,
                       "'files': '%.200s' is a %s; only regular files and "
                       "directories are copied",
                       rel, S_ISLNK(st.st_mode) ? "symlink" : "special file");
    if (mkdirat(ddir, name, 0755) < 0 && errno != EEXIST)
        return err_setx(err, errno, "cannot create '%s' in the bundle", rel);
    _cleanup_close_ int sfd = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int dfd = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0 || dfd < 0)
        return err_setx(err, errno, "cannot open '%s'", rel);
    return copy_dir_contents(sfd, dfd, rel, depth, err);
}

int
build_copy_listed(int srcfd, int stagefd, const char *rel, struct err *err)
{
    _cleanup_free_ char *parent = NULL;
    const char *name;
    int r;

    if ((r = build_split_rel(rel, &parent, &name)) < 0)
        return r;
    _cleanup_close_ int sdir = build_open_dir_nofollow(srcfd, parent, false, "'files'", err);
    if (sdir < 0)
        return sdir;
    _cleanup_close_ int ddir = build_open_dir_nofollow(stagefd, parent, true, "'files'", err);
    if (ddir < 0)
        return ddir;
    return copy_entry(sdir, ddir, name, rel, 0, err);
}

/* --- the staged bundle: modes, fsync, contract --- */

/* Makes the tree world-readable (it is mounted read-only into sandboxes that
 * run as other users, and the build ran under the caller's umask) and
 * with sync, fsyncs every file and directory in it. Symlinks the build
 * made stay as they are. */
int
build_seal_tree(int dfd, const char *rel, int depth, bool sync, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    if (depth > BUILD_TREE_DEPTH_MAX)
        return err_set(err, ELOOP, "the bundle is more than %d directories deep",
                       BUILD_TREE_DEPTH_MAX);
    if (fchmod(dfd, 0755) < 0)
        return err_setx(err, errno, "cannot chmod '%s'", rel);
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_setx(err, errno, "dup");
    d = fdopendir(fd);
    if (!d) {
        (void)safe_close(fd);
        return err_setx(err, errno, "cannot read '%s'", rel);
    }
    rewinddir(d);
    while ((errno = 0, de = readdir(d))) {
        char sub[PATH_MAX];
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        (void)snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name);
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return err_setx(err, errno, "cannot stat '%s'", sub);
        if (S_ISLNK(st.st_mode))
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
            return err_set(err, EINVAL, "the bundle has a special file '%.200s'", sub);
        _cleanup_close_ int cfd =
                openat(dfd, de->d_name,
                       O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
        if (cfd < 0)
            return err_setx(err, errno, "cannot open '%s'", sub);
        if (S_ISDIR(st.st_mode)) {
            if ((r = build_seal_tree(cfd, sub, depth + 1, sync, err)) < 0)
                return r;
            continue;
        }
        if (fchmod(cfd, st.st_mode & 0111 ? 0755 : 0644) < 0 || (sync && fsync(cfd) < 0))
            return err_setx(err, errno, "cannot seal '%s'", sub);
    }
    if (errno)
        return err_setx(err, errno, "cannot read '%s'", rel);
    if (sync && fsync(dfd) < 0)
        return err_setx(err, errno, "cannot fsync '%s'", rel);
    return 0;
}

/* Writes a JSON value to dfd/name (0644), pretty and deterministic. */
int
build_write_json_at(int dfd, const char *name, const json_t *v, struct err *err)
{
    _cleanup_free_ char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    _cleanup_buf_ struct buf b;
    int r;

    buf_init(&b, BUF_UNLIMITED);
    if (!s || (r = buf_puts(&b, s)) < 0 || (r = buf_putc(&b, '\n')) < 0)
        return -ENOMEM;
    r = write_file_at(dfd, name, b.data, 0644);
    if (r < 0)
        return err_set(err, -r, "cannot write %s: %s", name, strerror(-r));
    return 0;
}

/* Runs one contract stage: launch [cmd] with the output bounded, requires
 * exit status 0 and one JSON value on stdout. */
static int
contract_stage(char *launch, const char *cmd, size_t max, struct buf *log, json_t **ret,
               struct err *err)
{
    _cleanup_buf_ struct buf out;
    char what[128], how[64];
    char cmdbuf[TOOLS_NAME_MAX + 1] = "";
    char *argv[] = {launch, cmd ? cmdbuf : NULL, NULL};
    struct err jerr = {0};
    int status, r;

    buf_init(&out, max);
    if (cmd)
        (void)strscpy(cmdbuf, cmd, sizeof(cmdbuf));
    (void)snprintf(what, sizeof(what), "'launch%s%s'", cmd ? " " : "", cmd ? cmd : "");
    build_log_printf(log, "$ launch%s%s\n", cmd ? " " : "", cmd ? cmd : "");
    struct build_run_spec s = {
            .what = what,
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS,
            .out = &out,
            .log = log,
    };
    if ((r = build_run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        build_describe_status(status, how, sizeof(how));
        return err_set(err, EINVAL, "%s %s", what, how);
    }
    r = json_parse(out.data, out.len, ret, &jerr);
    if (r < 0)
        return err_set(err, EINVAL, "%s did not print JSON: %s", what,
                       out.len ? jerr.msg : "it printed nothing");
    return 0;
}

/* Stage 1: the command list. Returns the normalized list in ret. */
int
build_contract_commands(char *launch, const struct tools_build_manifest *m, struct buf *log,
                        json_t **ret, struct err *err)
{
    static const char *const keys[] = {"name", "description", NULL};
    _cleanup_(json_decrefp) json_t *list = NULL, *outl = NULL;
    json_t *e;
    size_t i;
    int r;

    if ((r = contract_stage(launch, NULL, TOOLS_JSON_MAX, log, &list, err)) < 0)
        return r;
    if (!json_is_array(list))
        return err_set(err, EINVAL, "'launch' printed JSON that is not an array of commands");
    if (m->kind == TOOLS_BUILD_KIND_CARRIER && json_array_size(list) > 0)
        return err_set(err, EINVAL, "a carrier's 'launch' must list no commands");
    if (m->kind == TOOLS_BUILD_KIND_CLI && json_array_size(list) == 0)
        return err_set(err, EINVAL,
                       "'launch' lists no commands (a package without commands is a carrier)");
    if (json_array_size(list) > TOOLS_MAX_COMMANDS)
        return err_set(err, EINVAL, "'launch' lists more than %d commands", TOOLS_MAX_COMMANDS);
    outl = json_array();
    if (!outl)
        return -ENOMEM;
    json_array_foreach (list, i, e) {
        char where[64];
        const char *name = NULL, *desc = NULL;
        (void)snprintf(where, sizeof(where), "command %zu", i);
        if (!json_is_object(e))
            return err_set(err, EINVAL, "'launch': %s is not an object", where);
        if ((r = build_check_keys(e, where, keys, err)) < 0 ||
            (r = json_get_str(e, "name", true, &name, err)) < 0 ||
            (r = json_get_str(e, "description", true, &desc, err)) < 0)
            return r;
        if (!tools_name_ok(name))
            return err_set(err, EINVAL,
                           "'launch': command name '%.80s' must be 1-64 of a-z, 0-9, '_' and "
                           "'-', starting with a letter or digit",
                           name);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(name, json_string_value(json_object_get(json_array_get(list, k), "name"))))
                return err_set(err, EINVAL, "'launch' lists command '%s' twice", name);
        json_t *o = json_pack("{s:s, s:s}", "name", name, "description", desc);
        if (!o || json_array_append_new(outl, o) < 0)
            return -ENOMEM;
    }
    *ret = TAKE_PTR(outl);
    return 0;
}

/* Stage 2 for every command, and stage 3's "unknown command" rule. */
int
build_contract_schemas(int stagefd, char *launch, json_t *cmds, struct buf *log, struct err *err)
{
    json_t *e;
    size_t i;
    int r;

    if (mkdirat(stagefd, "schemas", 0755) < 0)
        return err_setx(err, errno, "cannot create schemas/");
    _cleanup_close_ int sfd =
            openat(stagefd, "schemas", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return err_setx(err, errno, "cannot open schemas/");
    json_array_foreach (cmds, i, e) {
        _cleanup_(json_decrefp) json_t *schema = NULL;
        const char *name = json_string_value(json_object_get(e, "name"));
        char file[TOOLS_NAME_MAX + 8];
        struct err serr = {0};

        if ((r = contract_stage(launch, name, TOOLS_SCHEMA_MAX, log, &schema, err)) < 0)
            return r;
        if ((r = tool_schema_check(schema, &serr)) < 0)
            return err_set(err, EINVAL, "the schema of '%s' cannot be enforced: %s", name,
                           serr.msg);
        (void)snprintf(file, sizeof(file), "%s.json", name);
        if ((r = build_write_json_at(sfd, file, schema, err)) < 0)
            return r;
    }

    /* Bad command: exit 2 (a bundle that runs something else is caught here,
     * on the host, instead of by the first agent that mistypes). */
    char bad[] = "abx-no-such-command";
    char *argv[] = {launch, bad, NULL};
    char what[] = "'launch abx-no-such-command'";
    int status;
    struct build_run_spec s = {
            .what = what,
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS,
            .log = log,
    };
    build_log_printf(log, "$ launch abx-no-such-command\n");
    if ((r = build_run_command(&s, &status, err)) < 0)
        return r;
    if (status != 2)
        return err_set(err, EINVAL, "%s must exit with status 2, not %d", what, status);
    return 0;
}
