/*
 * build.c - build tool bundles from package sources, incrementally and
 * atomically.
 *
 * One package at a time: manifest, content hash, stamp check, then a staging
 * directory ".<name>.tmp-XXXXXX" beside the bundle that receives the build
 * output, the listed files, the SDK's Python module and the launcher; the
 * contract runs against it on the host, its answers become commands.json and
 * schemas/, and a stamp seals it. Only a complete staging directory is
 * swapped in (renameat2 RENAME_EXCHANGE), so a reader of the output
 * directory sees the old bundle or the new one, never half of either. The
 * output directory is flock()ed while a builder holds it, which is what makes
 * removing a crashed build's staging directories at start safe.
 */
#include "toolkit/build.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "toolkit/build-internal.h"
#include "tools/registry.h"
#include "util/fd.h"
#include "util/parse.h"
#include "util/timeutil.h"

/* --- the builder --- */

struct tools_builder {
    int outfd; /* locked */
    char out[PATH_MAX];
    struct tools_build_sdk sdk;
    const struct tools_build_templates *tpl;
    bool force;
    char fingerprint[TOOLS_BUILD_HASH_HEX];
    char **names; /* packages seen by this builder */
    size_t n_names;
};

struct tools_builder *
tools_builder_free(struct tools_builder *b)
{
    if (!b)
        return NULL;
    (void)safe_close(b->outfd); /* releases the lock */
    for (size_t i = 0; i < b->n_names; i++)
        free(b->names[i]);
    free(b->names);
    free(b);
    return NULL;
}

const char *
tools_builder_fingerprint(const struct tools_builder *b)
{
    return b->fingerprint;
}

static bool
is_staging_name(const char *name)
{
    return name[0] == '.' && strstr(name, ".tmp-");
}

static int
remove_stale(struct tools_builder *b, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    int fd = fcntl(b->outfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_setx(err, errno, "dup");
    d = fdopendir(fd);
    if (!d) {
        (void)safe_close(fd);
        return err_setx(err, errno, "cannot read '%s'", b->out);
    }
    rewinddir(d);
    while ((errno = 0, de = readdir(d))) {
        if (!is_staging_name(de->d_name))
            continue;
        if ((r = rm_rf_at(b->outfd, de->d_name)) < 0)
            return err_set(err, -r, "cannot remove the stale staging directory '%s/%s': %s", b->out,
                           de->d_name, strerror(-r));
    }
    if (errno)
        return err_setx(err, errno, "cannot read '%s'", b->out);
    return 0;
}

int
tools_builder_new(const struct tools_build_opts *opts, struct tools_builder **ret, struct err *err)
{
    _cleanup_(tools_builder_freep) struct tools_builder *b = NULL;
    int r;

    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->outfd = -EBADF;
    b->sdk = opts->sdk;
    b->tpl = opts->tpl ? opts->tpl : &tools_build_templates_default;
    b->force = opts->force;

    r = tools_build_fingerprint(b->tpl, &b->sdk, b->fingerprint, err);
    if (r < 0)
        return r;
    r = mkdir_p(opts->out_dir, 0755);
    if (r < 0)
        return err_set(err, -r, "cannot create the output directory '%s': %s", opts->out_dir,
                       strerror(-r));
    if (!realpath(opts->out_dir, b->out))
        return err_setx(err, errno, "cannot resolve the output directory '%s'", opts->out_dir);
    b->outfd = open(b->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (b->outfd < 0)
        return err_setx(err, errno, "cannot open the output directory '%s'", b->out);
    if (flock(b->outfd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return err_set(err, EBUSY, "another 'abx tools build' is writing to '%s'", b->out);
        return err_setx(err, errno, "cannot lock '%s'", b->out);
    }
    if ((r = remove_stale(b, err)) < 0)
        return r;
    *ret = TAKE_PTR(b);
    return 0;
}

bool
tools_build_is_package(const char *dir)
{
    char p[PATH_MAX];
    struct stat st;

    if (snprintf(p, sizeof(p), "%s/%s", dir, TOOLS_BUILD_MANIFEST) >= (int)sizeof(p))
        return false;
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *
kind_name(enum tools_build_kind k)
{
    return k == TOOLS_BUILD_KIND_CARRIER ? "carrier" : "cli";
}

/* Whether <out>/<name> is a complete bundle whose stamp matches. */
static bool
up_to_date(struct tools_builder *b, const struct tools_build_manifest *m, const char *src_hash)
{
    _cleanup_(json_decrefp) json_t *stamp = NULL, *cmds = NULL;
    _cleanup_buf_ struct buf data;
    struct stat st;
    json_t *e;
    size_t i;

    buf_init(&data, TOOLS_JSON_MAX);
    _cleanup_close_ int bfd =
            openat(b->outfd, m->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0 || read_file_at(bfd, "build-stamp.json", TOOLS_JSON_MAX, &data) < 0)
        return false;
    stamp = json_loadb(data.data, data.len, JSON_REJECT_DUPLICATES, NULL);
    json_t *fmt = json_object_get(stamp, "format");
    const char *name = json_string_value(json_object_get(stamp, "name"));
    const char *kind = json_string_value(json_object_get(stamp, "kind"));
    const char *sh = json_string_value(json_object_get(stamp, "source_hash"));
    const char *fp = json_string_value(json_object_get(stamp, "builder_fingerprint"));
    if (!json_is_integer(fmt) || json_integer_value(fmt) != TOOLS_BUILD_FORMAT || !name ||
        strcmp(name, m->name) || !kind || strcmp(kind, kind_name(m->kind)) || !sh ||
        strcmp(sh, src_hash) || !fp || strcmp(fp, b->fingerprint))
        return false;
    if (fstatat(bfd, "launch", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        (st.st_mode & 0555) != 0555)
        return false;
    if (read_file_at(bfd, "commands.json", TOOLS_JSON_MAX, &data) < 0)
        return false;
    cmds = json_loadb(data.data, data.len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_array(cmds))
        return false;
    json_array_foreach (cmds, i, e) {
        char file[TOOLS_NAME_MAX + 16];
        const char *c = json_string_value(json_object_get(e, "name"));
        if (!c || !tools_name_ok(c))
            return false;
        (void)snprintf(file, sizeof(file), "schemas/%s.json", c);
        if (fstatat(bfd, file, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            return false;
    }
    return true;
}

static int
read_manifest(int srcfd, struct tools_build_manifest **ret, struct err *err)
{
    _cleanup_buf_ struct buf data;
    struct err perr = {0};
    int r;

    buf_init(&data, TOOLS_BUILD_MANIFEST_MAX + 1);
    r = read_file_at(srcfd, TOOLS_BUILD_MANIFEST, TOOLS_BUILD_MANIFEST_MAX + 1, &data);
    if (r < 0)
        return err_set(err, -r, "cannot read %s: %s", TOOLS_BUILD_MANIFEST, strerror(-r));
    r = tools_build_manifest_parse(data.data, data.len, ret, &perr);
    if (r < 0)
        return err_set(err, -r, "%s: %s", TOOLS_BUILD_MANIFEST, perr.msg);
    return 0;
}

/* envp for the build: ours with the ABX_TOOL_* variables and CC set. */
static char **
build_env(char *const *add, size_t n_add)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + n_add + 1, sizeof(*env));
    if (!env)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_add; j++) {
            size_t klen = strchr(add[j], '=') - add[j] + 1;
            replaced = replaced || !strncmp(environ[i], add[j], klen);
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < n_add; j++)
        env[k++] = add[j];
    return env;
}

static int
run_build(struct tools_builder *b, const struct tools_build_manifest *m, const char *src_abs,
          const char *stage_abs, struct buf *log, struct err *err)
{
    _cleanup_free_ char *e_src = NULL, *e_out = NULL, *e_cflags = NULL, *e_libs = NULL,
                        *e_py = NULL, *e_cc = NULL;
    _cleanup_free_ char **env = NULL;
    const char *cc = build_env_or("CC", "cc");
    char how[64];
    int status, r;

    if (asprintf(&e_src, "ABX_TOOL_SRC=%s", src_abs) < 0 ||
        asprintf(&e_out, "ABX_TOOL_OUT=%s", stage_abs) < 0 ||
        asprintf(&e_cflags, "ABX_TOOL_CFLAGS=-I%s", b->sdk.include_dir) < 0 ||
        asprintf(&e_libs, "ABX_TOOL_LIBS=%s -ljansson", b->sdk.lib) < 0 ||
        asprintf(&e_py, "ABX_TOOL_PYTHON_SDK=%s", b->sdk.python_dir) < 0 ||
        asprintf(&e_cc, "CC=%s", cc) < 0)
        return -ENOMEM;
    char *add[] = {e_src, e_out, e_cflags, e_libs, e_py, e_cc};
    env = build_env(add, ELEMENTSOF(add));
    if (!env)
        return -ENOMEM;
    char *argv[] = {"/bin/sh", "-c", m->build, NULL};
    struct build_run_spec s = {
            .what = "the build",
            .argv = argv,
            .envp = env,
            .cwd = src_abs,
            .timeout_ms = TOOLS_BUILD_COMMAND_TIMEOUT_MS,
            .log = log,
    };
    build_log_printf(log, "$ %s\n", m->build);
    if ((r = build_run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        build_describe_status(status, how, sizeof(how));
        return err_set(err, EINVAL, "the build %s", how);
    }
    return 0;
}

/* A carrier's modules must import with the python sandboxes get: -I, so
 * neither PYTHONPATH nor the builder's own ~/.local counts. */
static int
check_modules(const struct tools_build_manifest *m, struct buf *log, struct err *err)
{
    static char prog[] = "import importlib, sys\n"
                         "for m in sys.argv[1:]:\n"
                         "    try:\n"
                         "        importlib.import_module(m)\n"
                         "    except Exception as e:\n"
                         "        print(m)\n"
                         "        print(m, e, file=sys.stderr)\n";
    _cleanup_free_ char **argv = NULL;
    _cleanup_buf_ struct buf out;
    char how[64];
    int status, r;

    if (m->n_modules == 0)
        return 0;
    argv = calloc(m->n_modules + 5, sizeof(*argv));
    if (!argv)
        return -ENOMEM;
    static char python[] = "/usr/bin/python3", isolated[] = "-I", dash_c[] = "-c";
    argv[0] = python;
    argv[1] = isolated;
    argv[2] = dash_c;
    argv[3] = prog;
    for (size_t i = 0; i < m->n_modules; i++)
        argv[4 + i] = m->modules[i];
    buf_init(&out, 64 * 1024);
    struct build_run_spec s = {
            .what = "/usr/bin/python3",
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS * 4,
            .out = &out,
            .log = log,
    };
    build_log_printf(log, "$ /usr/bin/python3 -I: import the carrier's modules\n");
    if ((r = build_run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        build_describe_status(status, how, sizeof(how));
        return err_set(err, EINVAL, "/usr/bin/python3 %s while importing modules", how);
    }
    if (out.len > 0) {
        char *nl = strchr(out.data, '\n');
        if (nl)
            *nl = '\0';
        /* Debian names a module's package python3-<module>, '_' as '-'. */
        char pkg[256];
        (void)snprintf(pkg, sizeof(pkg), "python3-%s", out.data);
        for (char *c = pkg; *c; c++) {
            if (*c == '_')
                *c = '-';
            else if (*c == '.') {
                *c = '\0';
                break;
            } else if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        }
        return err_set(err, ENOENT,
                       "Python module '%.80s' does not import with /usr/bin/python3 (install "
                       "the Debian package %s)",
                       out.data, pkg);
    }
    return 0;
}

static int
write_launch(int stagefd, const struct tools_builder *b, const struct tools_build_manifest *m,
             struct err *err)
{
    const char *t = m->run == TOOLS_BUILD_RUN_EXEC     ? b->tpl->exec
                    : m->run == TOOLS_BUILD_RUN_PYTHON ? b->tpl->python
                                                       : b->tpl->carrier;
    _cleanup_buf_ struct buf s;
    int r = 0;

    buf_init(&s, 1024 * 1024);
    while (*t && r >= 0) {
        if (startswith(t, "@RUN@", NULL)) {
            r = buf_puts(&s, m->run_path ? m->run_path : "");
            t += 5;
        } else if (startswith(t, "@NAME@", NULL)) {
            r = buf_puts(&s, m->name);
            t += 6;
        } else {
            r = buf_putc(&s, *t++);
        }
    }
    if (r < 0)
        return r;
    r = write_file_at(stagefd, "launch", s.data, 0755);
    if (r < 0)
        return err_set(err, -r, "cannot write launch: %s", strerror(-r));
    return 0;
}

/* Fills the staging directory; the caller removes it on failure. */
static int
stage(struct tools_builder *b, const struct tools_build_manifest *m, int srcfd, const char *src_abs,
      const char *stage_name, const char *src_hash, struct tools_build_report *rep, struct err *err)
{
    static const char *const reserved[] = {"launch", "commands.json", "schemas", "build-stamp.json",
                                           NULL};
    _cleanup_(json_decrefp) json_t *cmds = NULL, *stamp = NULL;
    char stage_abs[PATH_MAX], launch[PATH_MAX], when[32];
    struct stat st;
    int r;

    if (snprintf(stage_abs, sizeof(stage_abs), "%s/%s", b->out, stage_name) >=
                (int)sizeof(stage_abs) ||
        snprintf(launch, sizeof(launch), "%s/launch", stage_abs) >= (int)sizeof(launch))
        return err_set(err, ENAMETOOLONG, "the output path is too long");
    _cleanup_close_ int stagefd =
            openat(b->outfd, stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (stagefd < 0)
        return err_setx(err, errno, "cannot open the staging directory");

    if (m->kind == TOOLS_BUILD_KIND_CARRIER && (r = check_modules(m, &rep->log, err)) < 0)
        return r;
    if (m->build) {
        char after[TOOLS_BUILD_HASH_HEX];
        if ((r = run_build(b, m, src_abs, stage_abs, &rep->log, err)) < 0)
            return r;
        rep->source_changed =
                tools_build_source_hash(srcfd, after, NULL) < 0 || strcmp(after, src_hash) != 0;
    }
    for (size_t i = 0; i < m->n_files; i++)
        if ((r = build_copy_listed(srcfd, stagefd, m->files[i], err)) < 0)
            return r;
    for (const char *const *n = reserved; *n; n++)
        if (fstatat(stagefd, *n, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return err_set(err, EEXIST, "the build or 'files' made '%s', which the builder writes",
                           *n);
    if (m->run == TOOLS_BUILD_RUN_PYTHON) {
        char py[PATH_MAX];
        if (mkdirat(stagefd, "lib", 0755) < 0 && errno != EEXIST)
            return err_setx(err, errno, "cannot create lib/");
        _cleanup_close_ int libfd =
                openat(stagefd, "lib", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (libfd < 0)
            return err_setx(err, errno, "lib/ is a symlink or not a directory");
        if (fstatat(libfd, "abx_tool.py", &st, AT_SYMLINK_NOFOLLOW) == 0)
            return err_set(err, EEXIST,
                           "lib/abx_tool.py is the SDK's; the package must not "
                           "ship its own");
        (void)snprintf(py, sizeof(py), "%s/abx_tool.py", b->sdk.python_dir);
        if ((r = copy_file_at(AT_FDCWD, py, libfd, "abx_tool.py", 0644)) < 0)
            return err_set(err, -r, "cannot copy '%s': %s", py, strerror(-r));
    }
    if (m->run_path) {
        _cleanup_free_ char *parent = NULL;
        const char *base;
        if ((r = build_split_rel(m->run_path, &parent, &base)) < 0)
            return r;
        _cleanup_close_ int pfd = build_open_dir_nofollow(stagefd, parent, false, "'run'", err);
        if (pfd < 0)
            return err_set(err, ENOENT,
                           "'run': '%s' is not in the bundle (build it into "
                           "$ABX_TOOL_OUT or list it in 'files')",
                           m->run_path);
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            return err_set(err, ENOENT,
                           "'run': '%s' is not a regular file in the bundle (build it into "
                           "$ABX_TOOL_OUT or list it in 'files')",
                           m->run_path);
        if (m->run == TOOLS_BUILD_RUN_EXEC && !(st.st_mode & 0111))
            return err_set(err, EACCES, "'run': '%s' is not executable", m->run_path);
    }
    if ((r = write_launch(stagefd, b, m, err)) < 0)
        return r;
    /* The contract runs against the sealed modes, as a sandbox will see them. */
    if ((r = build_seal_tree(stagefd, ".", 0, false, err)) < 0)
        return r;
    if ((r = build_contract_commands(launch, m, &rep->log, &cmds, err)) < 0)
        return r;
    rep->n_commands = json_array_size(cmds);
    if ((r = build_contract_schemas(stagefd, launch, cmds, &rep->log, err)) < 0)
        return r;
    if ((r = build_write_json_at(stagefd, "commands.json", cmds, err)) < 0)
        return r;
    format_rfc3339(wall_msec(), when, sizeof(when));
    stamp = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s}", "format", TOOLS_BUILD_FORMAT, "name",
                      m->name, "kind", kind_name(m->kind), "description", m->description,
                      "source_hash", src_hash, "builder_fingerprint", b->fingerprint, "built_at",
                      when);
    if (!stamp)
        return -ENOMEM;
    if ((r = build_write_json_at(stagefd, "build-stamp.json", stamp, err)) < 0)
        return r;
    return build_seal_tree(stagefd, ".", 0, true, err);
}

/* Swaps the staging directory in; the old bundle, if any, is removed. */
static int
install(struct tools_builder *b, const char *stage_name, const char *name, struct err *err)
{
    if (renameat2(b->outfd, stage_name, b->outfd, name, RENAME_NOREPLACE) == 0)
        goto done;
    if (errno == EEXIST || errno == ENOTEMPTY) {
        if (renameat2(b->outfd, stage_name, b->outfd, name, RENAME_EXCHANGE) < 0)
            return err_setx(err, errno, "cannot swap in the new bundle");
        /* stage_name now holds the old bundle. */
        (void)rm_rf_at(b->outfd, stage_name);
        goto done;
    }
    if (errno != EINVAL && errno != ENOSYS)
        return err_setx(err, errno, "cannot install the new bundle");
    /* No renameat2 flags on this file system: rename() replaces an empty
     * directory only, so move the old one aside first. A crash in between
     * leaves no bundle and a staging name the next run removes. */
    {
        char old[NAME_MAX + 1];
        (void)snprintf(old, sizeof(old), ".%s.tmp-old", name);
        (void)rm_rf_at(b->outfd, old);
        if (renameat(b->outfd, name, b->outfd, old) < 0 && errno != ENOENT)
            return err_setx(err, errno, "cannot move the old bundle aside");
        if (renameat(b->outfd, stage_name, b->outfd, name) < 0) {
            int k = errno;
            (void)renameat(b->outfd, old, b->outfd, name);
            return err_setx(err, k, "cannot install the new bundle");
        }
        (void)rm_rf_at(b->outfd, old);
    }
done:
    if (fsync(b->outfd) < 0)
        return err_setx(err, errno, "cannot fsync '%s'", b->out);
    return 0;
}

static int
remember_name(struct tools_builder *b, const char *name, const char *src, struct err *err)
{
    for (size_t i = 0; i < b->n_names; i++)
        if (!strcmp(b->names[i], name))
            return err_set(err, EEXIST, "another package in this run is also named '%s' (%s)", name,
                           src);
    char **v = realloc(b->names, (b->n_names + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    b->names = v;
    v[b->n_names] = strdup(name);
    if (!v[b->n_names])
        return -ENOMEM;
    b->n_names++;
    return 0;
}

int
tools_builder_build(struct tools_builder *b, const char *src_dir, struct tools_build_report *rep,
                    struct err *err)
{
    _cleanup_(tools_build_manifest_freep) struct tools_build_manifest *m = NULL;
    char src_abs[PATH_MAX], hash[TOOLS_BUILD_HASH_HEX], stage_path[PATH_MAX];
    uint64_t t0 = now_msec();
    int r;

    _cleanup_close_ int srcfd = open(src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (srcfd < 0)
        return err_setx(err, errno, "cannot open the package directory '%s'", src_dir);
    if (!realpath(src_dir, src_abs))
        return err_setx(err, errno, "cannot resolve '%s'", src_dir);
    if ((r = read_manifest(srcfd, &m, err)) < 0)
        return r;
    (void)strscpy(rep->name, m->name, sizeof(rep->name));
    if ((r = remember_name(b, m->name, src_dir, err)) < 0)
        return r;
    if ((r = tools_build_source_hash(srcfd, hash, err)) < 0)
        return r;
    if (!b->force && up_to_date(b, m, hash)) {
        rep->outcome = TOOLS_BUILD_UP_TO_DATE;
        rep->duration_ms = now_msec() - t0;
        return 0;
    }

    if (snprintf(stage_path, sizeof(stage_path), "%s/.%s.tmp-XXXXXX", b->out, m->name) >=
        (int)sizeof(stage_path))
        return err_set(err, ENAMETOOLONG, "the output path is too long");
    if (!mkdtemp(stage_path))
        return err_setx(err, errno, "cannot create a staging directory in '%s'", b->out);
    const char *stage_name = stage_path + strlen(b->out) + 1;
    r = stage(b, m, srcfd, src_abs, stage_name, hash, rep, err);
    if (r >= 0)
        r = install(b, stage_name, m->name, err);
    if (r < 0) {
        (void)rm_rf_at(b->outfd, stage_name);
        return r;
    }
    rep->outcome = TOOLS_BUILD_BUILT;
    rep->duration_ms = now_msec() - t0;
    return 0;
}
