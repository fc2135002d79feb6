/*
 * path.c - confined path resolution against a pinned root descriptor.
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

int
path_open(int rootfd, const char *rel, int flags, mode_t mode)
{
    if (path_have_openat2()) {
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0,
                .resolve = RESOLVE_CONFINED,
        };
        long fd;
        do
            fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
        while (fd < 0 && errno == EAGAIN);
        return fd < 0 ? -errno : (int)fd;
    }
    return open_walk(rootfd, rel, flags, mode);
}

int
path_mkdir_p(int rootfd, const char *rel, mode_t mode, uid_t uid, gid_t gid)
{
    char comp[PATH_NAME_MAX + 1];

    int fd = path_open(rootfd, rel, O_PATH | O_DIRECTORY, 0);
    if (fd >= 0 || fd != -ENOENT)
        return fd;

    _cleanup_close_ int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return -errno;
    if (path_is_root(rel))
        return TAKE_FD(cur);
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        memcpy(comp, p, n);
        comp[n] = '\0';
        bool created = false;
        if (mkdirat(cur, comp, mode) == 0)
            created = true;
        else if (errno != EEXIST)
            return -errno;
        if (created && uid != (uid_t)-1 && fchownat(cur, comp, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        /* Resolve relative to the component's parent but confined to it: an
         * existing symlink here must still not lead out, and one that points
         * elsewhere inside is refused rather than chased. */
        int nfd;
        if (path_have_openat2()) {
            struct open_how how = {
                    .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                    .resolve = RESOLVE_CONFINED | RESOLVE_NO_SYMLINKS,
            };
            nfd = (int)syscall(SYS_openat2, cur, comp, &how, sizeof(how));
        } else {
            nfd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0)
            return errno == ENOTDIR ? -ENOTDIR : -errno;
        safe_close(cur);
        cur = nfd;
        if (!slash)
            return TAKE_FD(cur);
        p = slash + 1;
    }
}

/* --- moved from sandbox/vfs.c and sandbox/files.c --- */

int
path_openat_how(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
    struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = resolve,
    };
    for (int i = 0; i < PATH_RETRIES; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN)
            return -errno;
    }
    return -EAGAIN;
}

/* "/a/b" → parent "/a", name "b"; "/b" → "/", "b". path is not "/". */
void
path_split_abs(const char *path, char *parent, char *name)
{
    const char *slash = strrchr(path, '/');
    size_t n = (size_t)(slash - path);
    memcpy(parent, path, n ? n : 1);
    parent[n ? n : 1] = '\0';
    (void)strscpy(name, slash + 1, PATH_NAME_MAX + 1);
}

/* Gives a directory we just made in dir to uid:gid with mode 0755 (not
 * umask's). If the sandbox swapped the name meanwhile, it is not ours to
 * touch any more. */
static int
own_dir(int dir, const char *name, uid_t uid, gid_t gid)
{
    _cleanup_close_ int d = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
    if (fchown(d, uid, gid) < 0 || fchmod(d, 0755) < 0)
        return -errno;
    return 0;
}

#define VIEW_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)

/* Opens the directory path (O_PATH), creating missing levels like
 * os.MkdirAll: existing levels may be symlinks to directories, followed
 * inside the root. ret_created: whether the last level was made here. */
int
path_mkdir_in_root(int rootfd, const char *path, uid_t uid, gid_t gid, bool *ret_created)
{
    char prefix[PATH_MAX_LEN + 1];
    bool created = false;
    size_t i = 0, n = strlen(path);

    _cleanup_close_ int cur = path_openat_how(rootfd, "/", O_PATH | O_DIRECTORY, 0, VIEW_RESOLVE);
    if (cur < 0)
        return cur;
    while (i < n) {
        while (path[i] == '/')
            i++;
        size_t s = i;
        while (i < n && path[i] != '/')
            i++;
        if (i == s)
            break;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        int fd = -ENOENT;
        bool exists = false;
        created = false;
        for (int tries = 0; tries < PATH_RETRIES && fd == -ENOENT; tries++) {
            fd = path_openat_how(rootfd, prefix, O_PATH | O_DIRECTORY, 0, VIEW_RESOLVE);
            if (fd != -ENOENT)
                break;
            if (mkdirat(cur, prefix + s, 0755) == 0) {
                int r = own_dir(cur, prefix + s, uid, gid);
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
path_fail_workspace(struct err *err, int r, const char *rel, const char *what)
{
    char p[PATH_MAX_LEN + 2];
    (void)snprintf(p, sizeof(p), "/%s", path_is_root(rel) ? "" : rel);
    switch (-r) {
    case EXDEV:
        return err_set(err, EXDEV, "path '%.512s' leads outside the workspace", p);
    case ELOOP:
        return err_set(err, ELOOP, "path '%.512s' goes through a symlink we do not follow", p);
    case ENOENT:
        return err_set(err, ENOENT, "no such file or directory: '%.512s'", p);
    case ENOTDIR:
        return err_set(err, ENOTDIR, "a component of '%.512s' is not a directory", p);
    case EISDIR:
        return err_set(err, EISDIR, "'%.512s' is a directory", p);
    case EEXIST:
        return err_set(err, EEXIST, "'%.512s' already exists", p);
    case ENOSPC:
        return err_set(err, ENOSPC, "no space left for '%.512s'", p);
    case EDQUOT:
        return err_set(err, EDQUOT,
                       "'%.512s' does not fit: the sandbox's disk bound (disk_mb) is reached", p);
    default:
        return err_setx(err, -r, "cannot %s '%.512s'", what, p);
    }
}

int
path_fail_view(struct err *err, int r, const char *path, const char *what)
{
    switch (-r) {
    case ENOSYS:
        return err_set(err, ENOSYS, "this kernel lacks openat2(), needed to reach '%.512s'", path);
    case ENOENT:
        return err_set(err, ENOENT, "path '%.512s' does not exist", path);
    case ENOTDIR:
        return err_set(err, ENOTDIR, "'%.512s' or a directory above it is not a directory", path);
    case EISDIR:
        return err_set(err, EISDIR, "'%.512s' is a directory", path);
    case ENOSPC:
        return err_set(err, ENOSPC, "no space left for '%.512s'", path);
    case EDQUOT:
        return err_set(err, EDQUOT,
                       "'%.512s' does not fit: the sandbox's disk bound (disk_mb) is reached",
                       path);
    default:
        return err_setx(err, -r, "cannot %s '%.512s'", what, path);
    }
}
