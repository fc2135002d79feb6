/*
 * build-manifest.c - what a package says it is: the launcher templates,
 * name and path rules, and abx-tool.json parsed into a checked manifest.
 *
 * Pure: no file system, no processes. The templates are data the builder
 * fills in (stage) and the fingerprint covers (hash).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "toolkit/build-internal.h"
#include "toolkit/build.h"
#include "tools/registry.h"
#include "util/json.h"

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
int
build_check_keys(json_t *obj, const char *where, const char *const *allowed, struct err *err)
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
    if ((r = build_check_keys(root, "the manifest", top_keys, err)) < 0)
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
            if ((r = build_check_keys(python, "'python'", python_keys, err)) < 0 ||
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
    if ((r = build_check_keys(run, "'run'", run_keys, err)) < 0)
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
