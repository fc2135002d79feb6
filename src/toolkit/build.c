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
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tools/registry.h"
#include "tools/schema.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/timeutil.h"

extern char **environ;

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

#define TREE_DEPTH_MAX 64 /* directory levels walked in a package or bundle */

/* --- launcher templates ---
 *
 * POSIX sh (dash), no bashisms. The same file runs where it was built (the
 * contract check on the host) and at /.tools/<name>/launch in a sandbox, so
 * it finds its own directory from $0 and makes it absolute only when it is
 * relative (no fork on the sandbox path). They are part of the builder
 * fingerprint: editing one rebuilds every bundle on the next run. */

#define LAUNCH_HEAD                                                                  \
    "#!/bin/sh\n"                                                                    \
    "# Launcher of the tool bundle '@NAME@', written by `abx tools build`: do not\n" \
    "# edit; a changed template rebuilds it. Contract: no arguments lists the\n"     \
    "# commands as JSON, <cmd> prints its schema, <cmd> <args_json> runs it.\n"      \
    "case $0 in\n"                                                                   \
    "*/*) d=${0%/*} ;;\n"                                                            \
    "*) d=. ;;\n"                                                                    \
    "esac\n"                                                                         \
    "case $d in\n"                                                                   \
    "/*) ;;\n"                                                                       \
    "*) d=$(cd -P -- \"${d:-/}\" && pwd) || exit 127 ;;\n"                           \
    "esac\n"

/* seed #393: a shared fallback (HOME=/tmp) made one sandbox's pip --user
 * installs importable by every other sandbox on the host. */
#define LAUNCH_HOME                                                                \
    "# HOME holds caches and pip's --user installs. abxd gives each sandbox its\n" \
    "# own; without a usable one take a private directory (mktemp -d: 0700),\n"    \
    "# never a shared path such as /tmp, where one sandbox's installs would be\n"  \
    "# imported by the next.\n"                                                    \
    "if [ -z \"${HOME:-}\" ] || [ ! -d \"$HOME\" ] || [ ! -w \"$HOME\" ]; then\n"  \
    "    HOME=$(mktemp -d \"${TMPDIR:-/tmp}/abx-home.XXXXXX\") || exit 127\n"      \
    "    export HOME\n"                                                            \
    "fi\n"

static const char tpl_exec[] = LAUNCH_HEAD LAUNCH_HOME "exec \"$d/@RUN@\" \"$@\"\n";

static const char tpl_python[] = LAUNCH_HEAD LAUNCH_HOME
        "PYTHONPATH=\"$d/lib${PYTHONPATH:+:$PYTHONPATH}\"\n"
        "PYTHONDONTWRITEBYTECODE=1\n"
        "export PYTHONPATH PYTHONDONTWRITEBYTECODE\n"
        "# -s: what a user pip-installs into $HOME/.local never shadows the tool's own\n"
        "# modules.\n"
        "exec /usr/bin/python3 -s \"$d/@RUN@\" \"$@\"\n";

/* The carrier is the sandbox's one python: python, python3, python3.N, pip,
 * pip3 and pip3.N are symlinks to this launcher, which dispatches on the
 * name it was called by, so `pip install X` installs for exactly the
 * interpreter `python` runs. Debian's python3 carries PEP 668's
 * EXTERNALLY-MANAGED marker, and pip refuses to install without
 * --break-system-packages. The marker protects /usr from pip; in a sandbox
 * /usr is read-only, so pip falls back to a --user install into
 * $HOME/.local, which is the sandbox's own home (abxd's HOME, or the private
 * fallback above) and nothing the system package manager owns. Setting
 * PIP_BREAK_SYSTEM_PACKAGES=1 here means plain `pip install X` works without
 * teaching anyone a flag, and python (run without -s) sees the result. */
static const char tpl_carrier[] =
        "#!/bin/sh\n"
        "# Launcher of the carrier bundle '@NAME@', written by `abx tools build`: do\n"
        "# not edit. It has no commands; called as python, python3, python3.N, pip,\n"
        "# pip3 or pip3.N (symlinks in a sandbox) it runs /usr/bin/python3 or its pip.\n"
        "case ${0##*/} in\n"
        "python | python3 | python3.[0-9] | python3.[0-9][0-9])\n"
        "    set -- /usr/bin/python3 \"$@\" ;;\n"
        "pip | pip3 | pip3.[0-9] | pip3.[0-9][0-9])\n"
        "    set -- /usr/bin/python3 -m pip \"$@\" ;;\n"
        "*)\n"
        "    if [ $# -eq 0 ]; then\n"
        "        echo '[]'\n"
        "        exit 0\n"
        "    fi\n"
        "    printf '%s: a carrier bundle has no commands (asked for '\\''%s'\\''); run it as "
        "python3 or pip\\n' '@NAME@' \"$1\" >&2\n"
        "    exit 2\n"
        "    ;;\n"
        "esac\n" LAUNCH_HOME
        "# Debian's python3 is marked EXTERNALLY-MANAGED (PEP 668). In a sandbox /usr\n"
        "# is read-only, so pip installs with --user into $HOME/.local: the sandbox's\n"
        "# own home, not the system's packages. Allow that without a flag.\n"
        "PIP_BREAK_SYSTEM_PACKAGES=1\n"
        "PIP_DISABLE_PIP_VERSION_CHECK=1\n"
        "PIP_NO_INPUT=1\n"
        "export PIP_BREAK_SYSTEM_PACKAGES PIP_DISABLE_PIP_VERSION_CHECK PIP_NO_INPUT\n"
        "exec \"$@\"\n";

const struct tools_build_templates tools_build_templates_default = {
        .exec = tpl_exec,
        .python = tpl_python,
        .carrier = tpl_carrier,
};

/* --- names and paths --- */

/* A path inside a package or bundle: relative, components neither empty,
 * ".", ".." nor hidden (hidden entries are not part of a package). With
 * strict (the run path, substituted into the launcher) only
 * [A-Za-z0-9._+-/] so nothing needs shell quoting. */
static int
check_rel_path(const char *field, const char *p, bool strict, struct err *err)
{
    size_t n = strlen(p);

    if (n == 0)
        return err_set(err, EINVAL, "'%s' has an empty path", field);
    if (n > PATH_MAX - 1)
        return err_set(err, EINVAL, "'%s': path too long", field);
    if (p[n - 1] == '/')
        return err_set(err, EINVAL, "'%s': '%.200s' ends with '/'", field, p);
    if (p[0] == '/')
        return err_set(err, EINVAL,
                       "'%s': '%.200s' is absolute; paths are relative to the "
                       "package",
                       field, p);
    for (const char *c = p; *c;) {
        const char *e = strchrnul(c, '/');
        size_t len = (size_t)(e - c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return err_set(err, EINVAL, "'%s': '%.200s' has an empty, '.' or '..' component", field,
                           p);
        if (c[0] == '.')
            return err_set(err, EINVAL,
                           "'%s': '%.200s' names a hidden entry, which is not part of a package",
                           field, p);
        if (len > NAME_MAX)
            return err_set(err, EINVAL, "'%s': a component of '%.200s' is too long", field, p);
        c = *e ? e + 1 : e;
    }
    for (const char *c = p; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u < 0x20 || u == 0x7f)
            return err_set(err, EINVAL, "'%s': path has a control character", field);
        if (strict && !((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
                        (u >= '0' && u <= '9') || strchr("._+-/", u)))
            return err_set(err, EINVAL, "'%s': '%.200s' may use only letters, digits and . _ + - /",
                           field, p);
    }
    return 0;
}

/* True for a dotted Python module name. */
static bool
module_name_valid(const char *s)
{
    bool start = true;

    if (!*s || strlen(s) > 200)
        return false;
    for (; *s; s++) {
        char c = *s;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (c == '.' && !start) {
            start = true;
            continue;
        }
        if (!(alpha || (!start && c >= '0' && c <= '9')))
            return false;
        start = false;
    }
    return !start;
}

/* --- the manifest --- */

struct tools_build_manifest *
tools_build_manifest_free(struct tools_build_manifest *m)
{
    if (!m)
        return NULL;
    free(m->name);
    free(m->description);
    free(m->build);
    for (size_t i = 0; i < m->n_files; i++)
        free(m->files[i]);
    free(m->files);
    free(m->run_path);
    for (size_t i = 0; i < m->n_modules; i++)
        free(m->modules[i]);
    free(m->modules);
    free(m);
    return NULL;
}

/* Names every key of obj that is not in allowed, in one message. */
static int
check_keys(json_t *obj, const char *where, const char *const *allowed, struct err *err)
{
    char unknown[200] = "";
    size_t n = 0, used = 0;
    const char *k;
    json_t *v;

    json_object_foreach (obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok = ok || !strcmp(*a, k);
        if (ok)
            continue;
        int w = snprintf(unknown + used, sizeof(unknown) - used, "%s'%.40s'", n ? ", " : "", k);
        if (w > 0 && (size_t)w < sizeof(unknown) - used)
            used += (size_t)w;
        n++;
    }
    if (n == 0)
        return 0;
    return err_set(err, EINVAL, "%s: unknown key%s %s (allowed: see docs/tools.md)", where,
                   n > 1 ? "s" : "", unknown);
}

/* A list of strings at obj[key] (absent: 0 entries), each checked by path
 * rules (is_path) or as a module name. */
static int
get_list(json_t *obj, const char *key, bool is_path, char ***ret, size_t *ret_n, struct err *err)
{
    json_t *a = json_object_get(obj, key), *e;
    size_t i;
    int r;

    if (!a)
        return 0;
    if (!json_is_array(a))
        return err_set(err, EINVAL, "'%s' must be an array of strings", key);
    if (json_array_size(a) > TOOLS_BUILD_LIST_MAX)
        return err_set(err, EINVAL, "'%s' has more than %d entries", key, TOOLS_BUILD_LIST_MAX);
    char **l = calloc(json_array_size(a) + 1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    *ret = l;
    json_array_foreach (a, i, e) {
        const char *s = json_string_value(e);
        if (!s)
            return err_set(err, EINVAL, "'%s' must be an array of strings", key);
        if (is_path && (r = check_rel_path(key, s, false, err)) < 0)
            return r;
        if (!is_path && !module_name_valid(s))
            return err_set(err, EINVAL, "'%s': '%.80s' is not a Python module name", key, s);
        l[i] = strdup(s);
        if (!l[i])
            return -ENOMEM;
        *ret_n = i + 1;
    }
    return 0;
}

static int
dup_str(const char *s, char **ret)
{
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

int
tools_build_manifest_parse(const char *data, size_t len, struct tools_build_manifest **ret,
                           struct err *err)
{
    static const char *const top_keys[] = {"name",  "kind", "description", "build",
                                           "files", "run",  "python",      NULL};
    static const char *const run_keys[] = {"exec", "python", NULL};
    static const char *const python_keys[] = {"modules", NULL};
    _cleanup_(tools_build_manifest_freep) struct tools_build_manifest *m = NULL;
    _cleanup_(json_decrefp) json_t *root = NULL;
    const char *name = NULL, *kind = NULL, *desc = NULL, *build = NULL;
    int r;

    if (len == 0)
        return err_set(err, EINVAL, "the manifest is empty");
    if (len > TOOLS_BUILD_MANIFEST_MAX)
        return err_set(err, EFBIG, "the manifest is larger than %d bytes",
                       TOOLS_BUILD_MANIFEST_MAX);
    r = json_parse(data, len, &root, err);
    if (r < 0)
        return r;
    if (!json_is_object(root))
        return err_set(err, EINVAL, "the manifest must be a JSON object");
    if ((r = check_keys(root, "the manifest", top_keys, err)) < 0)
        return r;

    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if ((r = json_get_str(root, "name", true, &name, err)) < 0 ||
        (r = json_get_str(root, "kind", true, &kind, err)) < 0 ||
        (r = json_get_str(root, "description", true, &desc, err)) < 0 ||
        (r = json_get_str(root, "build", false, &build, err)) < 0)
        return r;
    if (!tools_name_ok(name))
        return err_set(err, EINVAL,
                       "'name': '%.80s' must be 1-64 of a-z, 0-9, '_' and '-', starting with a "
                       "letter or digit",
                       name);
    if (!strcmp(kind, "cli"))
        m->kind = TOOLS_BUILD_KIND_CLI;
    else if (!strcmp(kind, "carrier"))
        m->kind = TOOLS_BUILD_KIND_CARRIER;
    else
        return err_set(err, EINVAL, "'kind': '%.40s' is neither 'cli' nor 'carrier'", kind);
    if ((r = dup_str(name, &m->name)) < 0 || (r = dup_str(desc, &m->description)) < 0)
        return r;
    if (build) {
        if (!*build)
            return err_set(err, EINVAL, "'build' is empty; leave it out instead");
        if ((r = dup_str(build, &m->build)) < 0)
            return r;
    }
    if ((r = get_list(root, "files", true, &m->files, &m->n_files, err)) < 0)
        return r;

    json_t *run = json_object_get(root, "run");
    json_t *python = json_object_get(root, "python");
    if (m->kind == TOOLS_BUILD_KIND_CARRIER) {
        if (run)
            return err_set(err, EINVAL, "a carrier has no 'run' (it runs python and pip)");
        if (python) {
            if (!json_is_object(python))
                return err_set(err, EINVAL, "'python' must be an object");
            if ((r = check_keys(python, "'python'", python_keys, err)) < 0 ||
                (r = get_list(python, "modules", false, &m->modules, &m->n_modules, err)) < 0)
                return r;
        }
        m->run = TOOLS_BUILD_RUN_NONE;
        *ret = TAKE_PTR(m);
        return 0;
    }

    if (python)
        return err_set(err, EINVAL, "'python' is for carriers; a cli package has 'run'");
    if (!run)
        return err_set(err, EINVAL,
                       "a cli package needs 'run': {\"exec\": PATH} or {\"python\": SCRIPT}");
    if (!json_is_object(run))
        return err_set(err, EINVAL, "'run' must be an object");
    if ((r = check_keys(run, "'run'", run_keys, err)) < 0)
        return r;
    if (json_object_size(run) != 1)
        return err_set(err, EINVAL, "'run' needs exactly one of 'exec' and 'python'");
    const char *path = json_string_value(json_object_get(run, "exec"));
    m->run = TOOLS_BUILD_RUN_EXEC;
    if (!json_object_get(run, "exec")) {
        path = json_string_value(json_object_get(run, "python"));
        m->run = TOOLS_BUILD_RUN_PYTHON;
    }
    if (!path)
        return err_set(err, EINVAL, "'run': the path must be a string");
    if ((r = check_rel_path("run", path, true, err)) < 0 || (r = dup_str(path, &m->run_path)) < 0)
        return r;
    *ret = TAKE_PTR(m);
    return 0;
}

/* --- hashing --- */

static void
hex_encode(const unsigned char *d, size_t n, char *out)
{
    static const char x[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[2 * n] = '\0';
}

static int
md_put(EVP_MD_CTX *md, const void *p, size_t n)
{
    return EVP_DigestUpdate(md, p, n) == 1 ? 0 : -EIO;
}

/* A length-prefixed field, so that no two sequences of fields hash alike. */
static int
md_field(EVP_MD_CTX *md, const void *p, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    int r = md_put(md, len, sizeof(len));
    return r < 0 ? r : md_put(md, p, n);
}

static int
md_new(EVP_MD_CTX **ret)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md)
        return -ENOMEM;
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return -EIO;
    }
    *ret = md;
    return 0;
}

static int
md_final(EVP_MD_CTX *md, char ret_hex[TOOLS_BUILD_HASH_HEX])
{
    unsigned char dg[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if (EVP_DigestFinal_ex(md, dg, &dl) != 1 || dl != 32)
        return -EIO;
    hex_encode(dg, dl, ret_hex);
    return 0;
}

/* Hashes the length and content of the open regular file fd. */
static int
md_file(EVP_MD_CTX *md, int fd, const char *what, struct err *err)
{
    struct stat st;
    char b[65536];
    uint64_t left;
    unsigned char len[8];
    int r;

    if (fstat(fd, &st) < 0)
        return err_setx(err, errno, "cannot stat '%s'", what);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "'%s' is not a regular file", what);
    left = (uint64_t)st.st_size;
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(left >> (8 * i));
    if ((r = md_put(md, len, sizeof(len))) < 0)
        return r;
    while (left > 0) {
        ssize_t k = read(fd, b, left < sizeof(b) ? left : sizeof(b));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return err_setx(err, errno, "cannot read '%s'", what);
        if (k == 0)
            return err_set(err, EAGAIN, "'%s' changed while it was hashed", what);
        if ((r = md_put(md, b, (size_t)k)) < 0)
            return r;
        left -= (uint64_t)k;
    }
    return 0;
}

struct src_entry {
    char *path;
    bool exec;
};

struct src_list {
    struct src_entry *v;
    size_t n, cap;
};

static void
src_list_done(struct src_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
}

static bool
skipped_name(const char *name)
{
    return name[0] == '.' || !strcmp(name, "__pycache__");
}

/* Collects the regular files below dfd (at prefix) into l. */
static int
walk_source(int dfd, const char *prefix, int depth, struct src_list *l, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    if (depth > TREE_DEPTH_MAX)
        return err_set(err, ELOOP, "'%s' is more than %d directories deep", prefix, TREE_DEPTH_MAX);
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return err_setx(err, errno, "cannot read the package");
    d = fdopendir(fd);
    if (!d) {
        (void)safe_close(fd);
        return err_setx(err, errno, "cannot read the package");
    }
    rewinddir(d);
    while ((errno = 0, de = readdir(d))) {
        char rel[PATH_MAX];
        struct stat st;

        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || skipped_name(de->d_name))
            continue;
        if (snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name) >=
            (int)sizeof(rel))
            return err_set(err, ENAMETOOLONG, "a path in the package is too long");
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return err_setx(err, errno, "cannot stat '%s'", rel);
        if (S_ISLNK(st.st_mode))
            return err_set(err, ELOOP,
                           "'%.200s' is a symlink; a package holds regular files and "
                           "directories only",
                           rel);
        if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub =
                    openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                return err_setx(err, errno, "cannot open '%s'", rel);
            if ((r = walk_source(sub, rel, depth + 1, l, err)) < 0)
                return r;
            continue;
        }
        if (!S_ISREG(st.st_mode))
            return err_set(err, EINVAL, "'%.200s' is not a regular file or directory", rel);
        if (l->n >= TOOLS_BUILD_FILES_MAX)
            return err_set(err, EFBIG, "the package has more than %d files", TOOLS_BUILD_FILES_MAX);
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 64;
            struct src_entry *v = realloc(l->v, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            l->v = v;
            l->cap = cap;
        }
        l->v[l->n].path = strdup(rel);
        if (!l->v[l->n].path)
            return -ENOMEM;
        l->v[l->n].exec = (st.st_mode & 0111) != 0;
        l->n++;
    }
    if (errno)
        return err_setx(err, errno, "cannot read the package");
    return 0;
}

static int
cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct src_entry *)a)->path, ((const struct src_entry *)b)->path);
}

int
tools_build_source_hash(int dirfd, char ret_hex[TOOLS_BUILD_HASH_HEX], struct err *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = NULL;
    struct src_list l = {0};
    int r;

    r = walk_source(dirfd, "", 0, &l, err);
    if (r < 0)
        goto out;
    qsort(l.v, l.n, sizeof(*l.v), cmp_entry);
    if ((r = md_new(&md)) < 0)
        goto out;
    r = md_field(md, "abx-tool-source-1", 17);
    for (size_t i = 0; r >= 0 && i < l.n; i++) {
        _cleanup_close_ int fd = openat(dirfd, l.v[i].path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            r = err_setx(err, errno, "cannot open '%s'", l.v[i].path);
            break;
        }
        if ((r = md_field(md, l.v[i].path, strlen(l.v[i].path))) < 0 ||
            (r = md_field(md, l.v[i].exec ? "x" : "-", 1)) < 0)
            break;
        r = md_file(md, fd, l.v[i].path, err);
    }
    if (r >= 0)
        r = md_final(md, ret_hex);
out:
    src_list_done(&l);
    return r;
}

/* --- the SDK and the fingerprint --- */

#ifndef ABX_TOOLS_SDK_INCLUDE
#define ABX_TOOLS_SDK_INCLUDE "include"
#endif
#ifndef ABX_TOOLS_SDK_LIB
#define ABX_TOOLS_SDK_LIB "build/src/tools/libabxtool.a"
#endif
#ifndef ABX_TOOLS_SDK_PYTHON
#define ABX_TOOLS_SDK_PYTHON "sdk/python"
#endif

static const char *
env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

void
tools_build_sdk_default(struct tools_build_sdk *ret)
{
    ret->include_dir = env_or("ABX_TOOLS_SDK_INCLUDE", ABX_TOOLS_SDK_INCLUDE);
    ret->lib = env_or("ABX_TOOLS_SDK_LIB", ABX_TOOLS_SDK_LIB);
    ret->python_dir = env_or("ABX_TOOLS_SDK_PYTHON", ABX_TOOLS_SDK_PYTHON);
}

static int
md_sdk_file(EVP_MD_CTX *md, const char *label, const char *dir, const char *file, struct err *err)
{
    char path[PATH_MAX];
    int r;

    if (snprintf(path, sizeof(path), "%s%s%s", dir, file ? "/" : "", file ? file : "") >=
        (int)sizeof(path))
        return err_set(err, ENAMETOOLONG, "SDK path too long");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_setx(err, errno,
                        "cannot open the tool SDK's %s at '%s' (build abx first, or set "
                        "ABX_TOOLS_SDK_*)",
                        label, path);
    if ((r = md_field(md, label, strlen(label))) < 0)
        return r;
    return md_file(md, fd, path, err);
}

int
tools_build_fingerprint(const struct tools_build_templates *t, const struct tools_build_sdk *sdk,
                        char ret_hex[TOOLS_BUILD_HASH_HEX], struct err *err)
{
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = NULL;
    char fmt[32];
    int r;

    (void)snprintf(fmt, sizeof(fmt), "format=%d", TOOLS_BUILD_FORMAT);
    if ((r = md_new(&md)) < 0)
        return r;
    if ((r = md_field(md, "abx-tool-builder", 16)) < 0 ||
        (r = md_field(md, fmt, strlen(fmt))) < 0 ||
        (r = md_field(md, t->exec, strlen(t->exec))) < 0 ||
        (r = md_field(md, t->python, strlen(t->python))) < 0 ||
        (r = md_field(md, t->carrier, strlen(t->carrier))) < 0)
        return r;
    if ((r = md_sdk_file(md, "abx/tool.h", sdk->include_dir, "abx/tool.h", err)) < 0 ||
        (r = md_sdk_file(md, "libabxtool.a", sdk->lib, NULL, err)) < 0 ||
        (r = md_sdk_file(md, "abx_tool.py", sdk->python_dir, "abx_tool.py", err)) < 0)
        return r;
    return md_final(md, ret_hex);
}

/* --- running commands --- */

void
tools_build_report_init(struct tools_build_report *rep)
{
    *rep = (struct tools_build_report){0};
    buf_init(&rep->log, BUF_UNLIMITED);
}

void
tools_build_report_done(struct tools_build_report *rep)
{
    buf_done(&rep->log);
}

/* Appends to the log, keeping only its last TOOLS_BUILD_LOG_TAIL_MAX bytes. */
static void
log_tail(struct buf *log, const char *p, size_t n)
{
    if (n >= TOOLS_BUILD_LOG_TAIL_MAX) {
        p += n - TOOLS_BUILD_LOG_TAIL_MAX;
        n = TOOLS_BUILD_LOG_TAIL_MAX;
        buf_reset(log);
    } else if (log->len + n > TOOLS_BUILD_LOG_TAIL_MAX) {
        buf_consume(log, log->len + n - TOOLS_BUILD_LOG_TAIL_MAX);
    }
    (void)buf_put(log, p, n); /* the tail is for people; losing it on OOM is fine */
}

static void log_printf(struct buf *log, const char *fmt, ...) _printf_(2, 3);
static void
log_printf(struct buf *log, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        log_tail(log, line, MIN((size_t)n, sizeof(line) - 1));
}

struct run_spec {
    const char *what;  /* "the build", "launch" ... for messages */
    char *const *argv; /* argv[0] is an absolute path */
    char *const *envp; /* NULL = ours */
    const char *cwd;   /* NULL = ours */
    uint64_t timeout_ms;
    struct buf *out; /* stdout, bounded by its max; NULL = into log */
    struct buf *log; /* stderr (and stdout when out is NULL), tail kept */
};

/* Runs a command in its own process group with stdin from /dev/null. When
 * it exits, whatever it left running in its group is killed, so a stray
 * background process cannot hold the pipes open. Returns 0 and the exit
 * status (128 + N for signal N) or -errno: -ETIMEDOUT, -EFBIG for output
 * past out's max. */
static int
run_command(const struct run_spec *s, int *ret_status, struct err *err)
{
    int outp[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    pid_t pid;
    int r;

    if (pipe2(errp, O_CLOEXEC) < 0 || (s->out && pipe2(outp, O_CLOEXEC) < 0)) {
        r = err_setx(err, errno, "cannot make a pipe");
        (void)safe_close(errp[0]);
        (void)safe_close(errp[1]);
        return r;
    }
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, s->out ? outp[1] : errp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    if (s->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    r = posix_spawn(&pid, s->argv[0], &fa, &at, s->argv, s->envp ? s->envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    outp[1] = safe_close(outp[1]);
    errp[1] = safe_close(errp[1]);
    if (r != 0) {
        (void)safe_close(outp[0]);
        (void)safe_close(errp[0]);
        return err_set(err, r, "cannot run %s (%s): %s", s->what, s->argv[0], strerror(r));
    }

    _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    _cleanup_close_ int ofd = outp[0];
    _cleanup_close_ int efd = errp[0];
    uint64_t deadline = now_msec() + s->timeout_ms;
    bool exited = false;
    char b[65536];
    r = 0;
    while (ofd >= 0 || efd >= 0 || !exited) {
        struct pollfd p[3] = {{ofd, POLLIN, 0}, {efd, POLLIN, 0}, {exited ? -1 : pidfd, POLLIN, 0}};
        uint64_t now = now_msec();
        if (now >= deadline) {
            r = err_set(err, ETIMEDOUT, "%s did not finish within %llu s", s->what,
                        (unsigned long long)(s->timeout_ms / 1000));
            break;
        }
        /* Without a pidfd (old kernel), look at the process every 50 ms. */
        int wait_ms = (int)MIN(deadline - now, pidfd >= 0 ? 60000 : 50);
        if (poll(p, 3, wait_ms) < 0 && errno != EINTR) {
            r = err_setx(err, errno, "poll");
            break;
        }
        for (int i = 0; i < 2; i++) {
            int *fd = i == 0 ? &ofd : &efd;
            if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(*fd, b, sizeof(b));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                *fd = safe_close(*fd);
                continue;
            }
            if (i == 1 || !s->out) {
                log_tail(s->log, b, (size_t)k);
            } else if (buf_put(s->out, b, (size_t)k) < 0) {
                r = err_set(err, EFBIG, "%s printed more than %zu bytes", s->what, s->out->max);
                break;
            }
        }
        if (r < 0)
            break;
        if (!exited) {
            siginfo_t si = {0};
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
                /* A zombie still owns its pid, so the group id is safe to kill. */
                exited = true;
                (void)kill(-pid, SIGKILL);
            }
        }
    }
    if (r < 0)
        (void)kill(-pid, SIGKILL);
    siginfo_t si = {0};
    while (waitid(P_PID, (id_t)pid, &si, WEXITED) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    *ret_status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
    return 0;
}

static void
describe_status(int status, char *out, size_t n)
{
    if (status > 128)
        (void)snprintf(out, n, "was killed by signal %d (%s)", status - 128,
                       strsignal(status - 128));
    else
        (void)snprintf(out, n, "exited with status %d", status);
}

/* --- copying files into the staging directory --- */

/* Opens the directory rel below root without following any symlink,
 * creating missing components (mode 0755) when create. */
static int
open_dir_nofollow(int root, const char *rel, bool create, const char *what, struct err *err)
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
static int
split_rel(const char *rel, char **ret_parent, const char **ret_name)
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
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || skipped_name(de->d_name))
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

    if (depth > TREE_DEPTH_MAX)
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

static int
copy_listed(int srcfd, int stagefd, const char *rel, struct err *err)
{
    _cleanup_free_ char *parent = NULL;
    const char *name;
    int r;

    if ((r = split_rel(rel, &parent, &name)) < 0)
        return r;
    _cleanup_close_ int sdir = open_dir_nofollow(srcfd, parent, false, "'files'", err);
    if (sdir < 0)
        return sdir;
    _cleanup_close_ int ddir = open_dir_nofollow(stagefd, parent, true, "'files'", err);
    if (ddir < 0)
        return ddir;
    return copy_entry(sdir, ddir, name, rel, 0, err);
}

/* --- the staged bundle: modes, fsync, contract --- */

/* Makes the tree world-readable (it is mounted read-only into sandboxes that
 * run as other users, and the build ran under the caller's umask) and
 * with sync, fsyncs every file and directory in it. Symlinks the build
 * made stay as they are. */
static int
seal_tree(int dfd, const char *rel, int depth, bool sync, struct err *err)
{
    _cleanup_(closedirp) DIR *d = NULL;
    struct dirent *de;
    int r;

    if (depth > TREE_DEPTH_MAX)
        return err_set(err, ELOOP, "the bundle is more than %d directories deep", TREE_DEPTH_MAX);
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
            if ((r = seal_tree(cfd, sub, depth + 1, sync, err)) < 0)
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
static int
write_json_at(int dfd, const char *name, const json_t *v, struct err *err)
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
    log_printf(log, "$ launch%s%s\n", cmd ? " " : "", cmd ? cmd : "");
    struct run_spec s = {
            .what = what,
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS,
            .out = &out,
            .log = log,
    };
    if ((r = run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        describe_status(status, how, sizeof(how));
        return err_set(err, EINVAL, "%s %s", what, how);
    }
    r = json_parse(out.data, out.len, ret, &jerr);
    if (r < 0)
        return err_set(err, EINVAL, "%s did not print JSON: %s", what,
                       out.len ? jerr.msg : "it printed nothing");
    return 0;
}

/* Stage 1: the command list. Returns the normalized list in ret. */
static int
contract_commands(char *launch, const struct tools_build_manifest *m, struct buf *log, json_t **ret,
                  struct err *err)
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
        if ((r = check_keys(e, where, keys, err)) < 0 ||
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
static int
contract_schemas(int stagefd, char *launch, json_t *cmds, struct buf *log, struct err *err)
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
        if ((r = write_json_at(sfd, file, schema, err)) < 0)
            return r;
    }

    /* Bad command: exit 2 (a bundle that runs something else is caught here,
     * on the host, instead of by the first agent that mistypes). */
    char bad[] = "abx-no-such-command";
    char *argv[] = {launch, bad, NULL};
    char what[] = "'launch abx-no-such-command'";
    int status;
    struct run_spec s = {
            .what = what,
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS,
            .log = log,
    };
    log_printf(log, "$ launch abx-no-such-command\n");
    if ((r = run_command(&s, &status, err)) < 0)
        return r;
    if (status != 2)
        return err_set(err, EINVAL, "%s must exit with status 2, not %d", what, status);
    return 0;
}

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
    const char *cc = env_or("CC", "cc");
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
    struct run_spec s = {
            .what = "the build",
            .argv = argv,
            .envp = env,
            .cwd = src_abs,
            .timeout_ms = TOOLS_BUILD_COMMAND_TIMEOUT_MS,
            .log = log,
    };
    log_printf(log, "$ %s\n", m->build);
    if ((r = run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        describe_status(status, how, sizeof(how));
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
    struct run_spec s = {
            .what = "/usr/bin/python3",
            .argv = argv,
            .cwd = "/",
            .timeout_ms = TOOLS_BUILD_CONTRACT_TIMEOUT_MS * 4,
            .out = &out,
            .log = log,
    };
    log_printf(log, "$ /usr/bin/python3 -I: import the carrier's modules\n");
    if ((r = run_command(&s, &status, err)) < 0)
        return r;
    if (status != 0) {
        describe_status(status, how, sizeof(how));
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
        if ((r = copy_listed(srcfd, stagefd, m->files[i], err)) < 0)
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
        if ((r = split_rel(m->run_path, &parent, &base)) < 0)
            return r;
        _cleanup_close_ int pfd = open_dir_nofollow(stagefd, parent, false, "'run'", err);
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
    if ((r = seal_tree(stagefd, ".", 0, false, err)) < 0)
        return r;
    if ((r = contract_commands(launch, m, &rep->log, &cmds, err)) < 0)
        return r;
    rep->n_commands = json_array_size(cmds);
    if ((r = contract_schemas(stagefd, launch, cmds, &rep->log, err)) < 0)
        return r;
    if ((r = write_json_at(stagefd, "commands.json", cmds, err)) < 0)
        return r;
    format_rfc3339(wall_msec(), when, sizeof(when));
    stamp = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s}", "format", TOOLS_BUILD_FORMAT, "name",
                      m->name, "kind", kind_name(m->kind), "description", m->description,
                      "source_hash", src_hash, "builder_fingerprint", b->fingerprint, "built_at",
                      when);
    if (!stamp)
        return -ENOMEM;
    if ((r = write_json_at(stagefd, "build-stamp.json", stamp, err)) < 0)
        return r;
    return seal_tree(stagefd, ".", 0, true, err);
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
