/*
 * registry.c - discover tool bundles strictly, select and look up commands.
 */
#include "tools/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/schema.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"

struct tools_registry {
    char dir[PATH_MAX];
    struct tools_package *pkgs;
    size_t npkgs;
    const struct tools_package *carrier;
};

bool
tools_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TOOLS_NAME_MAX)
        return false;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Reads a small regular file of a bundle (never through a symlink) as JSON. */
static int
load_json(int dfd, const char *bundle, const char *name, size_t max, json_t **ret, struct err *err)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_setx(err, errno, "tool bundle '%s': cannot open %s", bundle, name);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_setx(err, errno, "tool bundle '%s': cannot stat %s", bundle, name);
    if (!S_ISREG(st.st_mode))
        return err_set(err, EINVAL, "tool bundle '%s': %s is not a regular file", bundle, name);
    if ((uint64_t)st.st_size > max)
        return err_set(err, EFBIG, "tool bundle '%s': %s is larger than %zu bytes", bundle, name,
                       max);
    _cleanup_free_ char *b = malloc((size_t)st.st_size + 1);
    if (!b)
        return -ENOMEM;
    ssize_t n = read_full(fd, b, (size_t)st.st_size);
    if (n < 0)
        return err_setx(err, (int)-n, "tool bundle '%s': cannot read %s", bundle, name);
    json_error_t je;
    json_t *v = json_loadb(b, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return err_set(err, EINVAL, "tool bundle '%s': %s is not valid JSON (line %d: %.80s)",
                       bundle, name, je.line, je.text);
    *ret = v;
    return 0;
}

static char *
dup_string(const json_t *v)
{
    return strdup(json_is_string(v) ? json_string_value(v) : "");
}

static void
package_done(struct tools_package *p)
{
    for (size_t i = 0; i < p->ncmds; i++) {
        free(p->cmds[i].description);
        json_decref(p->cmds[i].schema);
    }
    free(p->cmds);
    free(p->description);
    free(p->built_at);
    memset(p, 0, sizeof(*p));
}

static int
load_commands(int bfd, struct tools_package *p, struct err *err)
{
    _cleanup_(json_decrefp) json_t *list = NULL;
    int r = load_json(bfd, p->name, "commands.json", TOOLS_JSON_MAX, &list, err);
    if (r < 0)
        return r;
    if (!json_is_array(list))
        return err_set(err, EINVAL, "tool bundle '%s': commands.json is not a JSON array", p->name);
    size_t n = json_array_size(list);
    if (n > TOOLS_MAX_COMMANDS)
        return err_set(err, EINVAL, "tool bundle '%s': more than %d commands", p->name,
                       TOOLS_MAX_COMMANDS);
    if (p->carrier && n > 0)
        return err_set(err, EINVAL, "tool bundle '%s': a carrier bundle lists no commands",
                       p->name);
    _cleanup_close_ int sfd =
            openat(bfd, "schemas", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return err_setx(err, errno, "tool bundle '%s': no schemas directory", p->name);
    p->cmds = calloc(n ? n : 1, sizeof(*p->cmds));
    if (!p->cmds)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *desc = json_object_get(e, "description");
        if (!json_is_object(e) || !name || (desc && !json_is_string(desc)))
            return err_set(err, EINVAL,
                           "tool bundle '%s': commands.json entry %zu needs a string 'name' "
                           "and 'description'",
                           p->name, i);
        if (!tools_name_ok(name))
            return err_set(err, EINVAL, "tool bundle '%s': bad command name '%.80s'", p->name,
                           name);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(p->cmds[k].name, name))
                return err_set(err, EINVAL, "tool bundle '%s': command '%s' is listed twice",
                               p->name, name);
        struct tools_command *c = &p->cmds[i];
        (void)strscpy(c->name, name, sizeof(c->name));
        p->ncmds = i + 1;
        c->description = dup_string(desc);
        if (!c->description)
            return -ENOMEM;
        char file[TOOLS_NAME_MAX + 8];
        (void)snprintf(file, sizeof(file), "%s.json", name);
        struct err serr = {0};
        r = load_json(sfd, p->name, file, TOOLS_SCHEMA_MAX, &c->schema, &serr);
        if (r < 0)
            return err_set(err, -r,
                           "tool bundle '%s': command '%s' has no usable schema "
                           "(schemas/%s): %s",
                           p->name, name, file, serr.msg);
        r = tool_schema_check(c->schema, &serr);
        if (r < 0)
            return err_set(err, -r, "tool bundle '%s': schemas/%s: %s", p->name, file, serr.msg);
    }
    return 0;
}

static int
load_bundle(int dfd, const char *name, struct tools_package *p, struct err *err)
{
    if (!tools_name_ok(name))
        return err_set(err, EINVAL, "'%.80s' in the tools directory is not a bundle name", name);
    (void)strscpy(p->name, name, sizeof(p->name));
    _cleanup_close_ int bfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (bfd < 0)
        return err_setx(err, errno, "tool bundle '%s' is not a directory", name);

    struct stat st;
    if (fstat(bfd, &st) < 0 || (st.st_mode & 0005) != 0005)
        return err_set(err, EACCES,
                       "tool bundle '%s' must be readable and searchable by every user (chmod "
                       "755)",
                       name);
    if (fstatat(bfd, "launch", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return err_setx(err, errno, "tool bundle '%s' has no launch", name);
    if (!S_ISREG(st.st_mode) || (st.st_mode & 0005) != 0005)
        return err_set(err, EINVAL,
                       "tool bundle '%s': launch must be a regular file every user can read and "
                       "run",
                       name);

    _cleanup_(json_decrefp) json_t *stamp = NULL;
    int r = load_json(bfd, name, "build-stamp.json", TOOLS_JSON_MAX, &stamp, err);
    if (r < 0)
        return r;
    const char *kind = json_string_value(json_object_get(stamp, "kind"));
    const char *sname = json_string_value(json_object_get(stamp, "name"));
    if (!kind || (strcmp(kind, "cli") && strcmp(kind, "carrier")))
        return err_set(err, EINVAL, "tool bundle '%s': build-stamp.json has no kind cli|carrier",
                       name);
    if (sname && strcmp(sname, name))
        return err_set(err, EINVAL, "tool bundle '%s' was built as '%.64s'", name, sname);
    p->carrier = !strcmp(kind, "carrier");
    p->description = dup_string(json_object_get(stamp, "description"));
    p->built_at = dup_string(json_object_get(stamp, "built_at"));
    if (!p->description || !p->built_at)
        return -ENOMEM;
    return load_commands(bfd, p, err);
}

static int
cmp_pkg(const void *a, const void *b)
{
    return strcmp(((const struct tools_package *)a)->name, ((const struct tools_package *)b)->name);
}

int
tools_registry_load(const char *dir, struct tools_registry **ret, struct err *err)
{
    _cleanup_(tools_registry_freep) struct tools_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    if (strscpy(r->dir, dir, sizeof(r->dir)) < 0 || dir[0] != '/')
        return err_set(err, EINVAL, "the tools directory must be an absolute path, not '%.200s'",
                       dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return err_setx(err, errno, "tools directory '%s'", dir);
    /* Sandboxes run as other users: a directory they cannot enter would
     * make every call fail with 126; refuse it here, naming it. */
    struct stat st;
    if (fstat(dfd, &st) < 0 || (st.st_mode & 0005) != 0005) {
        safe_close(dfd);
        return err_set(err, EACCES,
                       "tools directory '%s' must be readable and searchable by every user "
                       "(chmod 755): sandboxes run as other users",
                       dir);
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        safe_close(dfd);
        return -ENOMEM;
    }
    r->pkgs = calloc(TOOLS_MAX_PACKAGES, sizeof(*r->pkgs));
    int rc = r->pkgs ? 0 : -ENOMEM;
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and the builder's staging directories */
        if (r->npkgs == TOOLS_MAX_PACKAGES) {
            rc = err_set(err, E2BIG, "more than %d tool bundles in '%s'", TOOLS_MAX_PACKAGES, dir);
            break;
        }
        struct tools_package *p = &r->pkgs[r->npkgs++];
        rc = load_bundle(dirfd(d), de->d_name, p, err);
    }
    if (rc == 0 && errno)
        rc = err_setx(err, errno, "cannot list '%s'", dir);
    closedir(d);
    if (rc < 0)
        return rc;
    qsort(r->pkgs, r->npkgs, sizeof(*r->pkgs), cmp_pkg);
    for (size_t i = 0; i < r->npkgs; i++) {
        if (!r->pkgs[i].carrier)
            continue;
        if (r->carrier)
            return err_set(err, EINVAL,
                           "two carrier bundles, '%s' and '%s': sandboxes can have one python",
                           r->carrier->name, r->pkgs[i].name);
        r->carrier = &r->pkgs[i];
    }
    *ret = TAKE_PTR(r);
    return 0;
}

struct tools_registry *
tools_registry_free(struct tools_registry *r)
{
    if (!r)
        return NULL;
    for (size_t i = 0; r->pkgs && i < r->npkgs; i++)
        package_done(&r->pkgs[i]);
    free(r->pkgs);
    free(r);
    return NULL;
}

const char *
tools_registry_dir(const struct tools_registry *r)
{
    return r->dir;
}

size_t
tools_registry_count(const struct tools_registry *r)
{
    return r ? r->npkgs : 0;
}

const struct tools_package *
tools_registry_at(const struct tools_registry *r, size_t i)
{
    return r && i < r->npkgs ? &r->pkgs[i] : NULL;
}

const struct tools_package *
tools_registry_carrier(const struct tools_registry *r)
{
    return r ? r->carrier : NULL;
}

size_t
tools_registry_commands(const struct tools_registry *r)
{
    size_t n = 0;
    for (size_t i = 0; r && i < r->npkgs; i++)
        n += r->pkgs[i].ncmds;
    return n;
}

static const struct tools_package *
find_pkg(const struct tools_registry *r, const char *name, size_t len)
{
    for (size_t i = 0; r && i < r->npkgs; i++)
        if (strlen(r->pkgs[i].name) == len && !memcmp(r->pkgs[i].name, name, len))
            return &r->pkgs[i];
    return NULL;
}

static const struct tools_command *
find_cmd(const struct tools_package *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->ncmds; i++)
        if (strlen(p->cmds[i].name) == len && !memcmp(p->cmds[i].name, name, len))
            return &p->cmds[i];
    return NULL;
}

/* Marks the commands one selection item names; unknown names do nothing. */
static void
mark_item(const struct tools_registry *r, const char *s, size_t len, bool *picked)
{
    const char *colon = memchr(s, ':', len);
    size_t plen = colon ? (size_t)(colon - s) : len;
    const struct tools_package *p = find_pkg(r, s, plen);
    if (!p)
        return;
    size_t base = 0;
    for (const struct tools_package *q = r->pkgs; q < p; q++)
        base += q->ncmds;
    if (!colon) {
        for (size_t i = 0; i < p->ncmds; i++)
            picked[base + i] = true;
        return;
    }
    const struct tools_command *c = find_cmd(p, colon + 1, len - plen - 1);
    if (c)
        picked[base + (size_t)(c - p->cmds)] = true;
}

int
tools_select(const struct tools_registry *r, const char *allowed, struct tools_pick **ret,
             size_t *ret_n, struct err *err)
{
    size_t total = tools_registry_commands(r);
    *ret = NULL;
    *ret_n = 0;
    if (total == 0)
        return 0;
    _cleanup_free_ bool *picked = calloc(total, sizeof(bool));
    if (!picked)
        return -ENOMEM;
    if (!allowed) {
        for (size_t i = 0; i < total; i++)
            picked[i] = true;
    } else {
        const char *s = allowed;
        while (*s) {
            const char *end = strchr(s, ',');
            size_t len = end ? (size_t)(end - s) : strlen(s);
            const char *a = s;
            size_t n = len;
            while (n && (*a == ' ' || *a == '\t'))
                a++, n--;
            while (n && (a[n - 1] == ' ' || a[n - 1] == '\t'))
                n--;
            if (n)
                mark_item(r, a, n, picked);
            s += len + (end ? 1 : 0);
        }
    }
    _cleanup_free_ struct tools_pick *out = calloc(total, sizeof(*out));
    if (!out)
        return -ENOMEM;
    size_t n = 0, k = 0;
    for (size_t i = 0; i < r->npkgs; i++) {
        const struct tools_package *p = &r->pkgs[i];
        for (size_t j = 0; j < p->ncmds; j++, k++) {
            if (!picked[k])
                continue;
            for (size_t m = 0; m < n; m++)
                if (!strcmp(out[m].cmd->name, p->cmds[j].name))
                    return err_set(err, EEXIST,
                                   "tool '%s' is exported by both '%s' and '%s'; select one "
                                   "as 'pkg:cmd'",
                                   p->cmds[j].name, out[m].pkg->name, p->name);
            out[n++] = (struct tools_pick){.pkg = p, .cmd = &p->cmds[j]};
        }
    }
    if (n)
        *ret = TAKE_PTR(out);
    *ret_n = n;
    return 0;
}

int
tools_lookup(const struct tools_registry *r, const char *name, struct tools_pick *ret,
             struct err *err)
{
    const char *colon = strchr(name, ':');
    if (colon) {
        const struct tools_package *p = find_pkg(r, name, (size_t)(colon - name));
        const struct tools_command *c = p ? find_cmd(p, colon + 1, strlen(colon + 1)) : NULL;
        if (!c)
            return err_set(err, ENOENT, "no tool '%.140s'", name);
        *ret = (struct tools_pick){.pkg = p, .cmd = c};
        return 0;
    }
    struct tools_pick found = {0};
    for (size_t i = 0; r && i < r->npkgs; i++) {
        const struct tools_command *c = find_cmd(&r->pkgs[i], name, strlen(name));
        if (!c)
            continue;
        if (found.cmd)
            return err_set(err, EEXIST,
                           "tool '%.64s' is exported by both '%s' and '%s'; call it as "
                           "'pkg:cmd'",
                           name, found.pkg->name, r->pkgs[i].name);
        found = (struct tools_pick){.pkg = &r->pkgs[i], .cmd = c};
    }
    if (!found.cmd)
        return err_set(err, ENOENT, "no tool '%.140s'", name);
    *ret = found;
    return 0;
}

/* 1 when dir (in pfd) is ours, 0755, and holds exactly the n symlinks
 * names -> target: what a rewrite would make, so it is kept as it is. */
static int
shims_current(int pfd, const char *base, char (*names)[80], size_t n, const char *target)
{
    struct stat st;
    _cleanup_close_ int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &st) < 0 || (st.st_mode & 07777) != 0755 || st.st_uid != geteuid())
        return 0;
    char **have = NULL;
    size_t nhave = 0;
    if (fd_dir_names(dfd, n + 1, &have, &nhave) < 0)
        return 0;
    bool same = nhave == n;
    for (size_t i = 0; same && i < n; i++) {
        char link[PATH_MAX];
        ssize_t k = readlinkat(dfd, names[i], link, sizeof(link) - 1);
        same = k >= 0 && (size_t)k == strlen(target) && !memcmp(link, target, (size_t)k);
    }
    fd_names_free(have, nhave);
    return same;
}

#define SHIMS_OLD_MAX 4096 /* entries an old shims' directory may hold */

int
tools_write_shims(const struct tools_registry *r, const char *dir, const char *mount,
                  struct err *err)
{
    char parent[PATH_MAX];
    if (strscpy(parent, dir, sizeof(parent)) < 0 || dir[0] != '/')
        return err_set(err, EINVAL, "bad shim directory '%.200s'", dir);
    char *slash = strrchr(parent, '/');
    const char *base = slash + 1;
    *slash = '\0';
    _cleanup_close_ int pfd = open(parent[0] ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return err_setx(err, errno, "cannot open '%s'", parent);
    const struct tools_package *c = tools_registry_carrier(r);

    char target[PATH_MAX] = "";
    char names[6][80];
    size_t k = 0;
    if (c) {
        if ((size_t)snprintf(target, sizeof(target), "%s/%s/launch", mount, c->name) >=
            sizeof(target))
            return err_set(err, ENAMETOOLONG, "shim target too long");
        /* python3.N as the host's python3 names itself (python3 -> python3.11). */
        char ver[64] = "";
        char link[PATH_MAX];
        ssize_t n = readlink("/usr/bin/python3", link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            const char *b = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
            if (!strncmp(b, "python3.", 8) && strlen(b) < sizeof(ver) - 8)
                (void)snprintf(ver, sizeof(ver), "%s", b + 6);
        }
        (void)snprintf(names[k++], sizeof(names[0]), "python");
        (void)snprintf(names[k++], sizeof(names[0]), "python3");
        (void)snprintf(names[k++], sizeof(names[0]), "pip");
        (void)snprintf(names[k++], sizeof(names[0]), "pip3");
        if (ver[0]) {
            (void)snprintf(names[k++], sizeof(names[0]), "python%s", ver);
            (void)snprintf(names[k++], sizeof(names[0]), "pip%s", ver);
        }
    }
    /* A start writes nothing it need not (a full disk must not stop it). */
    if (shims_current(pfd, base, names, k, target))
        return c ? 1 : 0;

    /* Emptied in place when it is a directory of ours: the directory
     * itself may be where abxd's privileged parent binds it from, in a
     * parent directory we may not write (abxd/split.c). */
    _cleanup_close_ int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd >= 0 && (fstat(dfd, &st) < 0 || st.st_uid != geteuid()))
        dfd = safe_close(dfd);
    if (dfd >= 0) {
        char **have = NULL;
        size_t nhave = 0;
        int rc = fd_dir_names(dfd, SHIMS_OLD_MAX, &have, &nhave);
        for (size_t i = 0; rc == 0 && i < nhave; i++)
            rc = rm_rf_at(dfd, have[i]);
        fd_names_free(have, nhave);
        if (rc < 0)
            return err_setx(err, -rc, "cannot empty the old '%s'", dir);
    } else {
        int rc = rm_rf_at(pfd, base);
        if (rc < 0)
            return err_setx(err, -rc, "cannot remove the old '%s'", dir);
        if (mkdirat(pfd, base, 0755) < 0)
            return err_setx(err, errno, "cannot create '%s'", dir);
        dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
            return err_setx(err, errno, "cannot open '%s'", dir);
    }
    (void)fchmod(dfd, 0755);
    if (!c)
        return 0;
    for (size_t i = 0; i < k; i++)
        if (symlinkat(target, dfd, names[i]) < 0)
            return err_setx(err, errno, "cannot create shim '%s/%s'", dir, names[i]);
    return 1;
}
