/*
 * path.c - the resolver: client path text, and opening names inside a
 * hostile tree against a pinned directory descriptor.
 *
 * The kernel does the confinement (openat2 checks every step of a lookup
 * atomically, so a directory swapped for a symlink mid-way cannot take it
 * out); what is left here is choosing the resolve flags, retrying the
 * lookups a concurrent rename makes fail with -EAGAIN, the O_NOFOLLOW walk
 * for kernels without openat2, mkdir -p one level at a time, and the words
 * a client is told. Not here: walking or copying whole trees (tree.h).
 */
#include "util/path.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/err.h"
#include "util/parse.h"

#define RESOLVE_CONFINED (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define PATH_MODES       (PATH_BENEATH | PATH_IN_ROOT)
#define PATH_HOW_ALL     (PATH_MODES | PATH_NO_XDEV | PATH_NO_SYMLINKS | PATH_FALLBACK)

int
path_normalize(const char *in, size_t len, char *out, size_t outsz)
{
    size_t o = 0;

    if (!in || len == 0 || strlen(in) != len)
        return -EINVAL;
    if (len > PATH_MAX_LEN + 1)
        return -ENAMETOOLONG;
    for (size_t i = 0; i < len;) {
        while (i < len && in[i] == '/')
            i++;
        if (i >= len)
            break;
        size_t start = i;
        /* Any other byte is a name's: the kernel allows them all, so a
         * sandbox makes them, and a client must be able to name them. */
        while (i < len && in[i] != '/')
            i++;
        size_t clen = i - start;
        if (clen == 1 && in[start] == '.')
            continue;
        if (clen == 2 && in[start] == '.' && in[start + 1] == '.')
            return -EINVAL;
        if (clen > PATH_NAME_MAX)
            return -ENAMETOOLONG;
        size_t need = o + (o ? 1 : 0) + clen + 1;
        if (need > outsz || need > PATH_MAX_LEN + 1)
            return -ENAMETOOLONG;
        if (o)
            out[o++] = '/';
        memcpy(out + o, in + start, clen);
        o += clen;
    }
    if (o == 0) {
        if (outsz < 2)
            return -ENAMETOOLONG;
        out[o++] = '.';
    }
    out[o] = '\0';
    return 0;
}

bool
path_is_root(const char *rel)
{
    return rel[0] == '.' && rel[1] == '\0';
}

int
path_split(const char *rel, char *parent, char *name, size_t outsz)
{
    if (path_is_root(rel))
        return -EINVAL;
    const char *slash = strrchr(rel, '/');
    size_t n = strlen(rel);
    if (n >= outsz)
        return -ENAMETOOLONG;
    if (!slash) {
        strcpy(parent, ".");
        memcpy(name, rel, n + 1);
        return 0;
    }
    memcpy(parent, rel, (size_t)(slash - rel));
    parent[slash - rel] = '\0';
    strcpy(name, slash + 1);
    return 0;
}

static int have_openat2 = -1;

bool
path_have_openat2(void)
{
    if (have_openat2 < 0) {
        struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_CONFINED};
        long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));
        if (fd >= 0) {
            close((int)fd);
            have_openat2 = 1;
        } else {
            have_openat2 = errno != ENOSYS;
        }
    }
    return have_openat2 > 0;
}

int
path_parent(const char *path, char *parent, size_t size, char name[PATH_NAME_MAX + 1])
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(base);

    if (n == 0 || !strcmp(base, ".") || !strcmp(base, ".."))
        return -EINVAL; /* "", ".", "/", "a/", "a/.." */
    if (n > PATH_NAME_MAX)
        return -ENAMETOOLONG;
    /* "a" -> ".", "/a" -> "/", "a/b" -> "a", "/a/b" -> "/a" */
    size_t pl = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    if (pl + 1 > size)
        return -ENAMETOOLONG;
    if (!slash)
        parent[0] = '.';
    else
        memcpy(parent, path, pl);
    parent[pl] = '\0';
    memcpy(name, base, n + 1);
    return 0;
}

/* Fallback: walk with O_PATH|O_NOFOLLOW; any symlink is refused. */
/* Whether name in dir is a symlink: tells "a symlink was refused" (ELOOP)
 * from "a file sits where a directory should" (ENOTDIR) after a failure. */
static bool
is_symlink_at(int dir, const char *name)
{
    int saved = errno;
    struct stat st;
    bool r = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    errno = saved;
    return r;
}

static int
open_walk(int rootfd, const char *rel, int flags, mode_t mode)
{
    char comp[PATH_NAME_MAX + 1];
    _cleanup_close_ int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    if (path_is_root(rel)) {
        int fd = openat(rootfd, ".", flags | O_CLOEXEC, mode);
        return fd < 0 ? -errno : fd;
    }
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n > PATH_NAME_MAX)
            return -ENAMETOOLONG;
        memcpy(comp, p, n);
        comp[n] = '\0';
        if (n == 0 || !strcmp(comp, ".."))
            return -EXDEV;
        if (!slash) {
            int fd = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            if (fd < 0)
                return (errno == ENOTDIR || errno == ELOOP) && is_symlink_at(cur, comp) ? -ELOOP
                                                                                        : -errno;
            return fd;
        }
        int nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0)
            return errno == ENOTDIR && is_symlink_at(cur, comp) ? -ELOOP : -errno;
        safe_close(cur);
        cur = nfd;
        p = slash + 1;
    }
}

static uint64_t
resolve_flags(unsigned how)
{
    uint64_t r = RESOLVE_NO_MAGICLINKS;
    r |= (how & PATH_IN_ROOT) ? RESOLVE_IN_ROOT : RESOLVE_BENEATH;
    if (how & PATH_NO_XDEV)
        r |= RESOLVE_NO_XDEV;
    if (how & PATH_NO_SYMLINKS)
        r |= RESOLVE_NO_SYMLINKS;
    return r;
}

static bool
how_valid(unsigned how)
{
    unsigned mode = how & PATH_MODES;
    return (how & ~PATH_HOW_ALL) == 0 && (mode == PATH_BENEATH || mode == PATH_IN_ROOT);
}

/* openat2 with the flags of how, -EAGAIN retried; -ENOSYS without it. */
static int
openat2_how(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
    struct open_how oh = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0,
            .resolve = resolve,
    };
    /* -EAGAIN: a rename anywhere on the file system raced a ".." in the
     * lookup; the kernel asks us to try again rather than risk a wrong
     * answer. Bounded, so a sandbox renaming in a loop cannot hold us. */
    for (int i = 0; i < PATH_RETRIES; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &oh, sizeof(oh));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN)
            return -errno;
    }
    return -EAGAIN;
}

int
path_openat(int dirfd, const char *path, int flags, mode_t mode, unsigned how)
{
    if (!how_valid(how))
        return -EINVAL;
    int fd = -ENOSYS;
    if (path_have_openat2())
        fd = openat2_how(dirfd, path, flags, mode, resolve_flags(how));
    /* Also when openat2 went away after the probe (a seccomp filter
     * installed since answers ENOSYS). */
    if (fd == -ENOSYS && (how & PATH_FALLBACK) && (how & PATH_BENEATH))
        return open_walk(dirfd, path, flags, mode);
    return fd;
}

int
path_open(int rootfd, const char *rel, int flags, mode_t mode)
{
    return path_openat(rootfd, rel, flags, mode, PATH_WORKSPACE);
}

int
path_open_parent(int dirfd, const char *path, unsigned how, char name[PATH_NAME_MAX + 1])
{
    char parent[PATH_MAX_LEN + 1];
    int r = path_parent(path, parent, sizeof(parent), name);
    if (r < 0)
        return r;
    return path_openat(dirfd, parent, O_PATH | O_DIRECTORY, 0, how);
}

/* --- mkdir -p --- */

/* Opens the single name comp in cur as the next level of a mkdir -p that
 * does not follow: no symlink, no "..", whatever how allows otherwise. */
static int
open_level(int cur, const char *comp, unsigned how)
{
    unsigned strict = PATH_BENEATH | PATH_NO_SYMLINKS | (how & (PATH_NO_XDEV | PATH_FALLBACK));
    if (!strcmp(comp, ".."))
        return -EXDEV;
    return path_openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, strict);
}

/* Gives a directory we just made in dir its owner and exact mode, through
 * a descriptor opened without following: if the sandbox swapped the name
 * meanwhile, what is there now is not ours to touch. */
static int
own_level(int dir, const char *name, const struct path_mkdir *m)
{
    if (m->uid == (uid_t)-1 && !m->exact)
        return 0;
    _cleanup_close_ int d = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
    if (m->uid != (uid_t)-1 && fchown(d, m->uid, m->gid) < 0)
        return -errno;
    if (m->exact && fchmod(d, m->mode) < 0)
        return -errno;
    return 0;
}

int
path_mkdirat(int dirfd, const char *path, unsigned how, const struct path_mkdir *m,
             bool *ret_created)
{
    char prefix[PATH_MAX_LEN + 1], comp[PATH_NAME_MAX + 1];
    bool created = false;
    size_t i = 0, n = strlen(path);

    if (!how_valid(how))
        return -EINVAL;
    /* Usually everything exists: one lookup, with the rules of how (which
     * may follow symlinks inside even when making levels would not). */
    int fd = path_openat(dirfd, path, O_PATH | O_DIRECTORY, 0, how);
    if (fd != -ENOENT) {
        if (fd >= 0 && ret_created)
            *ret_created = false;
        return fd;
    }
    if (n > PATH_MAX_LEN)
        return -ENAMETOOLONG;
    _cleanup_close_ int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    while (i < n) {
        while (path[i] == '/')
            i++;
        size_t s = i;
        while (i < n && path[i] != '/')
            i++;
        if (i == s)
            break;
        if (i - s > PATH_NAME_MAX)
            return -ENAMETOOLONG;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        memcpy(comp, path + s, i - s);
        comp[i - s] = '\0';
        if (!strcmp(comp, "."))
            continue;
        bool exists = false;
        fd = -ENOENT;
        created = false;
        for (int tries = 0; tries < PATH_RETRIES && fd == -ENOENT; tries++) {
            /* Following: the level is what the whole prefix resolves to
             * from the top, as the kernel sees it now (a symlink there is
             * followed within the rules of how). Not following: the one
             * name in the level above, and it must be a directory. */
            fd = m->follow ? path_openat(dirfd, prefix, O_PATH | O_DIRECTORY, 0, how)
                           : open_level(cur, comp, how);
            if (fd != -ENOENT)
                break;
            if (mkdirat(cur, comp, m->mode) == 0) {
                int r = own_level(cur, comp, m);
                if (r < 0)
                    return r;
                created = true;
            } else if (errno == EEXIST && !exists) {
                exists = true; /* a dangling symlink, or a race: look again */
            } else if (errno == EEXIST) {
                break;
            } else {
                return -errno;
            }
        }
        if (fd < 0)
            return fd == -ENOENT && exists ? -ENOTDIR : fd;
        safe_close(cur);
        cur = fd;
    }
    if (ret_created)
        *ret_created = created;
    return TAKE_FD(cur);
}

int
path_mkdir_p(int rootfd, const char *rel, mode_t mode, uid_t uid, gid_t gid)
{
    const struct path_mkdir m = {.mode = mode, .uid = uid, .gid = gid};
    return path_mkdirat(rootfd, rel, PATH_WORKSPACE, &m, NULL);
}

/* --- what a client is told --- */

/* One line per errno with words of its own: the text around the quoted
 * path, as each voice says it (NULL: the generic "cannot <what>"). Split
 * around the path rather than kept as formats, so the compiler checks the
 * one format that uses them. */
struct path_words {
    const char *pre, *post;
};

static const struct {
    int errnum;
    struct path_words voice[2]; /* PATH_VOICE_WORKSPACE, PATH_VOICE_VIEW */
} path_messages[] = {
        {EXDEV, {{"path ", " leads outside the workspace"}, {NULL, NULL}}},
        {ELOOP, {{"path ", " goes through a symlink we do not follow"}, {NULL, NULL}}},
        {ENOENT, {{"no such file or directory: ", ""}, {"path ", " does not exist"}}},
        {ENOTDIR,
         {{"a component of ", " is not a directory"},
          {"", " or a directory above it is not a directory"}}},
        {EISDIR, {{"", " is a directory"}, {"", " is a directory"}}},
        {EEXIST, {{"", " already exists"}, {NULL, NULL}}},
        {ENOSPC, {{"no space left for ", ""}, {"no space left for ", ""}}},
        {EDQUOT,
         {{"", " does not fit: the sandbox's disk bound (disk_mb) is reached"},
          {"", " does not fit: the sandbox's disk bound (disk_mb) is reached"}}},
        {ENOSYS, {{NULL, NULL}, {"this kernel lacks openat2(), needed to reach ", ""}}},
};

int
path_fail(struct err *err, int r, enum path_voice voice, const char *path, const char *what)
{
    char shown[PATH_MAX_LEN + 2];
    const char *p = path;

    if (voice == PATH_VOICE_WORKSPACE) {
        (void)snprintf(shown, sizeof(shown), "/%s", path_is_root(path) ? "" : path);
        p = shown;
    }
    for (size_t i = 0; i < ELEMENTSOF(path_messages); i++) {
        const struct path_words *w = &path_messages[i].voice[voice == PATH_VOICE_VIEW];
        if (path_messages[i].errnum == -r && w->pre)
            return err_set(err, -r, "%s'%.512s'%s", w->pre, p, w->post);
    }
    return err_setx(err, -r, "cannot %s '%.512s'", what, p);
}
