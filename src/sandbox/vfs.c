/*
 * vfs.c - envd's file operations on a sandbox's view, confined to its root.
 *
 * Every lookup goes through the resolver (util/path.h) as PATH_VIEW:
 * openat2 with RESOLVE_IN_ROOT, the sandbox's "/" as the root; what
 * follows acts on descriptors or on single names inside a directory
 * descriptor, so a component swapped for a symlink between two calls can
 * redirect us only to somewhere else inside the same root. Symlink targets
 * are computed as strings (eval_symlinks()), never by asking the kernel for
 * the path of a descriptor: d_path() across mount namespaces is not what
 * the sandbox sees.
 */
#include "sandbox/vfs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jail/rootfs.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"
#include "util/rand.h"
#include "util/tree.h"

#define VFS_MAX_SYMLINK     40          /* links followed while computing a target, as the kernel */
#define OVERFLOW_ID         65534       /* nobody/nogroup in the sandbox's /etc */
#define VFS_XATTR_KEEP_MAX  64          /* user.* attributes a replaced file passes on */
#define VFS_XATTR_VALUE_MAX (64 * 1024) /* bytes of one (the kernel's XATTR_SIZE_MAX) */

static int
xopen(int rootfd, const char *path, int flags, mode_t mode)
{
    return path_openat(rootfd, path, flags, mode, PATH_VIEW);
}

/* Names a failure once, with the path as the sandbox sees it. */
static int
fail(struct err *err, int r, const char *path, const char *what)
{
    return path_fail(err, r, PATH_VOICE_VIEW, path, what);
}

static bool
is_root(const char *path)
{
    return path[0] == '/' && path[1] == '\0';
}

/* "/a/b" → parent "/a", name "b"; "/b" → "/", "b". path is normalized and
 * not "/", so it always splits. */
static void
split(const char *path, char *parent, char *name)
{
    int r = path_parent(path, parent, PATH_MAX_LEN + 1, name);
    assert(r == 0);
    (void)r;
}

static int
open_parent(int rootfd, const char *path, char *name)
{
    return path_open_parent(rootfd, path, PATH_VIEW, name);
}

/* mkdir -p like os.MkdirAll, levels 0755 whatever the umask, owned by
 * uid:gid; existing levels may be symlinks to directories inside. */
static int
mkdir_in_root(int rootfd, const char *path, uid_t uid, gid_t gid, bool *ret_created)
{
    const struct path_mkdir m = {
            .mode = 0755, .uid = uid, .gid = gid, .exact = true, .follow = true};
    return path_mkdirat(rootfd, path, PATH_VIEW, &m, ret_created);
}

/* Names what path is when it is not a regular file (never opened: a fifo
 * would block, a socket fails, a device runs its driver). */
static int
not_regular(struct err *err, const char *path, mode_t mode)
{
    return err_set(err, EINVAL, "'%.512s' is a %s, not a regular file", path, fd_type_name(mode));
}

static bool
on_pseudo_fs(int fd)
{
    struct statfs s;
    if (fstatfs(fd, &s) < 0)
        return true; /* cannot tell: assume the worst */
    return s.f_type == PROC_SUPER_MAGIC || s.f_type == SYSFS_MAGIC ||
           s.f_type == CGROUP_SUPER_MAGIC || s.f_type == CGROUP2_SUPER_MAGIC ||
           s.f_type == DEBUGFS_MAGIC || s.f_type == SECURITYFS_MAGIC;
}

/* --- paths --- */

/* Appends the components of s to out[0..*o), resolving "." and ".."; out
 * holds "" for the root or "/a/b". */
static int
push(char *out, size_t outlen, size_t *o, const char *s)
{
    size_t lim = MIN(outlen, (size_t)PATH_MAX_LEN + 1);
    for (const char *p = s; *p;) {
        while (*p == '/')
            p++;
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - c);
        if (n == 0 || (n == 1 && c[0] == '.'))
            continue;
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            while (*o > 0 && out[--*o] != '/')
                ;
            continue;
        }
        if (n > PATH_NAME_MAX)
            return -ENAMETOOLONG;
        if (*o + 1 + n + 1 > lim)
            return -ENAMETOOLONG;
        out[(*o)++] = '/';
        memcpy(out + *o, c, n);
        *o += n;
    }
    return 0;
}

static int
finish(char *out, size_t outlen, size_t o)
{
    if (o == 0) {
        if (outlen < 2)
            return -ENAMETOOLONG;
        out[o++] = '/';
    }
    out[o] = '\0';
    return 0;
}

int
vfs_resolve(const char *path, const char *home, char *out, size_t outlen, struct err *err)
{
    const char *rest = path ? path : "";
    const char *base = home;
    size_t o = 0;
    int r;

    if (!home || home[0] != '/')
        return err_set(err, EINVAL, "home directory '%.256s' is not absolute", home ? home : "");
    if (rest[0] == '~') {
        if (rest[1] != '\0' && rest[1] != '/')
            return err_set(err, EINVAL, "cannot expand user-specific home dir in '%.256s'", rest);
        rest++;
    } else if (rest[0] == '/') {
        base = NULL;
    }
    if ((base && (r = push(out, outlen, &o, base)) < 0) || (r = push(out, outlen, &o, rest)) < 0 ||
        (r = finish(out, outlen, o)) < 0)
        return err_set(err, ENAMETOOLONG, "path '%.256s' is too long", rest);
    return 0;
}

/* The fully resolved form of path (no symlinks left), as filepath.EvalSymlinks
 * would compute it inside the sandbox. -ENOENT and friends when a component
 * is missing, -ELOOP past VFS_MAX_SYMLINK links. */
static int
eval_symlinks(int rootfd, const char *path, char *out, size_t outlen)
{
    char todo[2 * PATH_MAX_LEN + 2], cand[PATH_MAX_LEN + 1], link[PATH_MAX_LEN + 1];
    size_t o = 0, c;
    int links = 0, r;

    if (strscpy(todo, path, sizeof(todo)) < 0)
        return -ENAMETOOLONG;
    for (char *p = todo; *p;) {
        while (*p == '/')
            p++;
        char *s = p;
        while (*p && *p != '/')
            p++;
        char saved = *p;
        *p = '\0';
        c = o;
        memcpy(cand, out, o);
        r = push(cand, sizeof(cand), &c, s);
        *p = saved;
        if (r < 0)
            return r;
        if (c <= o) { /* "", "." or "..": nothing to look up */
            o = c;
            memcpy(out, cand, o);
            continue;
        }
        cand[c] = '\0';
        _cleanup_close_ int fd = xopen(rootfd, cand, O_PATH | O_NOFOLLOW, 0);
        struct stat st;
        if (fd < 0)
            return fd;
        if (fstat(fd, &st) < 0)
            return -errno;
        if (!S_ISLNK(st.st_mode)) {
            if (c + 1 > outlen)
                return -ENAMETOOLONG;
            memcpy(out, cand, c);
            o = c;
            continue;
        }
        /* Magic links of procfs name things outside the sandbox's view. */
        if (++links > VFS_MAX_SYMLINK || on_pseudo_fs(fd))
            return -ELOOP;
        ssize_t k = readlinkat(fd, "", link, sizeof(link) - 1);
        if (k <= 0)
            return k < 0 ? -errno : -ENOENT;
        link[k] = '\0';
        /* New todo: the link's text, then what was left after it. */
        size_t left = strlen(p);
        if ((size_t)k + 1 + left + 1 > sizeof(todo))
            return -ENAMETOOLONG;
        memmove(todo + k + 1, p, left + 1);
        memcpy(todo, link, (size_t)k);
        todo[k] = '/';
        p = todo;
        if (link[0] == '/')
            o = 0;
    }
    return finish(out, outlen, o);
}

/* --- entries --- */

void
vfs_go_perms(mode_t m, char out[VFS_PERMS_LEN])
{
    /* Go's letters in its order "dalTLDpSugct?"; a, l, T and ? never come
     * from a stat mode. */
    const bool set[] = {S_ISDIR(m),  S_ISLNK(m),  S_ISBLK(m) || S_ISCHR(m),
                        S_ISFIFO(m), S_ISSOCK(m), m & S_ISUID,
                        m & S_ISGID, S_ISCHR(m),  m & S_ISVTX};
    size_t w = 0;

    for (size_t i = 0; i < ELEMENTSOF(set); i++)
        if (set[i])
            out[w++] = "dLDpSugct"[i];
    if (w == 0)
        out[w++] = '-';
    for (int i = 0; i < 9; i++)
        out[w++] = (m & (1u << (8 - i))) ? "rwxrwxrwx"[i] : '-';
    out[w] = '\0';
}

/* The name the sandbox's /etc (rootfs.c) gives host id h. */
static void
id_name(const struct vfs_ids *ids, uint32_t h, bool group, char out[32])
{
    static const struct {
        uint32_t id;
        const char *user, *group;
    } known[] = {
            {0, "root", "root"},
            {ROOTFS_TTY_GID, NULL, "tty"},
            {100, NULL, "users"},
            {ROOTFS_USER_UID, "user", "user"},
            {OVERFLOW_ID, "nobody", "nogroup"},
    };
    uint32_t v = OVERFLOW_ID; /* what the sandbox sees for unmapped ids */

    if (h == (group ? ids->root_gid : ids->root_uid))
        v = 0;
    else if (h == (group ? ids->user_gid : ids->user_uid))
        v = ROOTFS_USER_UID;
    else if (h >= ids->range_first && h - ids->range_first < ids->range_len)
        v = h - ids->range_first;
    for (size_t i = 0; i < ELEMENTSOF(known); i++)
        if (known[i].id == v && (group ? known[i].group : known[i].user)) {
            (void)strscpy(out, group ? known[i].group : known[i].user, 32);
            return;
        }
    (void)snprintf(out, 32, "%u", v);
}

int
vfs_meta_add(struct vfs_meta *m, const char *key, const char *value)
{
    size_t kn = strlen(key), vn = strlen(value), bytes = kn + vn;

    for (uint32_t i = 0; i < m->n; i++)
        bytes += strlen(vfs_meta_key(m, i)) + strlen(vfs_meta_value(m, i));
    if (kn == 0 || kn > VFS_META_KEY_MAX || m->n >= VFS_META_MAX || bytes > VFS_META_BYTES)
        return -EINVAL;
    m->at[m->n].key = m->used;
    memcpy(m->data + m->used, key, kn + 1);
    m->used = (uint16_t)(m->used + kn + 1);
    m->at[m->n].value = m->used;
    memcpy(m->data + m->used, value, vn + 1);
    m->used = (uint16_t)(m->used + vn + 1);
    m->n++;
    return 0;
}

/* Reads the user.e2b.* xattrs of fd (O_PATH is fine: through the magic
 * link /proc/self/fd/N, which names exactly that inode). What does not fit
 * or is not text is left out. */
static void
read_meta(int fd, struct vfs_meta *m)
{
    char p[64], val[VFS_META_BYTES + 1];

    (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    ssize_t n = listxattr(p, NULL, 0);
    if (n <= 0)
        return;
    _cleanup_free_ char *names = malloc((size_t)n);
    if (!names || (n = listxattr(p, names, (size_t)n)) <= 0)
        return;
    for (char *s = names; s < names + n; s += strlen(s) + 1) {
        const char *key;
        if (!startswith(s, VFS_META_PREFIX, &key))
            continue;
        ssize_t k = getxattr(p, s, val, sizeof(val) - 1);
        if (k < 0 || memchr(val, '\0', (size_t)k))
            continue;
        val[k] = '\0';
        (void)vfs_meta_add(m, key, val);
    }
}

/* Fills e from fd (O_PATH|O_NOFOLLOW of the entry itself, or any fd of a
 * file), known as path; rootfd resolves a symlink's target. */
static int
fill(int rootfd, const struct vfs_ids *ids, int fd, const char *name, const char *path,
     struct vfs_entry *e)
{
    struct stat st, tst;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (strscpy(e->name, name, sizeof(e->name)) < 0 || strscpy(e->path, path, sizeof(e->path)) < 0)
        return -ENAMETOOLONG;
    e->size = (uint64_t)st.st_size;
    e->mode = st.st_mode & 0777;
    vfs_go_perms(st.st_mode, e->perms);
    id_name(ids, st.st_uid, false, e->owner);
    id_name(ids, st.st_gid, true, e->group);
    e->mtime_sec = st.st_mtim.tv_sec;
    e->mtime_nsec = (uint32_t)st.st_mtim.tv_nsec;
    e->meta.n = e->meta.used = 0;
    e->has_target = S_ISLNK(st.st_mode);
    e->target[0] = '\0';
    if (S_ISLNK(st.st_mode)) {
        _cleanup_close_ int t = xopen(rootfd, path, O_PATH, 0);
        if (t >= 0 && fstat(t, &tst) == 0) {
            st.st_mode = tst.st_mode;
            e->mode = tst.st_mode & 0777;
        }
        if (eval_symlinks(rootfd, path, e->target, sizeof(e->target)) < 0)
            (void)strscpy(e->target, path, sizeof(e->target));
    } else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        read_meta(fd, &e->meta);
    }
    e->type = S_ISREG(st.st_mode)   ? VFS_FILE
              : S_ISDIR(st.st_mode) ? VFS_DIR
                                    : VFS_UNSPECIFIED; /* still a link: broken */
    return 0;
}

int
vfs_stat(int rootfd, const struct vfs_ids *ids, const char *path, struct vfs_entry *ret,
         struct err *err)
{
    char name[PATH_NAME_MAX + 1];
    int r;

    if (is_root(path)) {
        _cleanup_close_ int fd = xopen(rootfd, "/", O_PATH | O_DIRECTORY, 0);
        r = fd < 0 ? fd : fill(rootfd, ids, fd, "/", "/", ret);
        return r < 0 ? fail(err, r, path, "stat") : 0;
    }
    _cleanup_close_ int dir = open_parent(rootfd, path, name);
    if (dir < 0)
        return fail(err, dir, path, "stat");
    _cleanup_close_ int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return fail(err, -errno, path, "stat");
    r = fill(rootfd, ids, fd, name, path, ret);
    return r < 0 ? fail(err, r, path, "stat") : 0;
}

int
vfs_stat_fd(int fd, const struct vfs_ids *ids, const char *path, struct vfs_entry *ret,
            struct err *err)
{
    const char *slash = strrchr(path, '/');
    int r = fill(-EBADF, ids, fd, is_root(path) || !slash ? path : slash + 1, path, ret);
    return r < 0 ? fail(err, r, path, "stat") : 0;
}

/* --- listing --- */

struct walk {
    int rootfd;
    const struct vfs_ids *ids;
    unsigned depth;
    vfs_list_fn fn;
    void *ud;
    struct vfs_entry e;
};

/* One entry of the walk (util/tree.h): reported, and entered when it is a
 * real directory above the depth asked for. */
static int
list_fn(void *ud, enum tree_event ev, struct tree_entry *te)
{
    struct walk *w = ud;
    int r;

    if (ev == TREE_ERROR)
        return -te->error;
    if (ev != TREE_ENTRY)
        return 0;
    _cleanup_close_ int fd = openat(te->dirfd, te->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* vanished */
    if ((r = fill(w->rootfd, w->ids, fd, te->name, te->path, &w->e)) < 0)
        return r;
    if ((r = w->fn(w->ud, &w->e)) < 0)
        return r;
    return te->depth < w->depth && !w->e.has_target && w->e.type == VFS_DIR ? TREE_ENTER : 0;
}

int
vfs_list(int rootfd, const struct vfs_ids *ids, const char *path, unsigned depth, vfs_list_fn fn,
         void *ud, struct err *err)
{
    _cleanup_free_ struct walk *w = calloc(1, sizeof(*w));
    /* The listed directory's entries are level 1; a directory is entered
     * when the level below it is within VFS_MAX_DEPTH. Names read count
     * against VFS_LIST_MAX, so the walk never holds more. */
    const struct tree_opts to = {
            .max_depth = VFS_MAX_DEPTH - 1,
            .max_names = VFS_LIST_MAX,
            .prefix = path,
            .path_max = PATH_MAX_LEN,
    };
    int r;

    if (!w)
        return -ENOMEM;
    _cleanup_close_ int d = xopen(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
    if (d < 0)
        return fail(err, d, path, "list");
    *w = (struct walk){
            .rootfd = rootfd, .ids = ids, .depth = depth ? depth : 1, .fn = fn, .ud = ud};
    r = tree_walk(d, -EBADF, &to, list_fn, w);
    if (r == -E2BIG)
        return err_set(err, E2BIG, "more than %d entries below '%.512s'", VFS_LIST_MAX, path);
    if (r == -ELOOP)
        return err_set(err, ELOOP, "directories nested deeper than %d levels below '%.512s'",
                       VFS_MAX_DEPTH, path);
    return r < 0 ? fail(err, r, path, "list") : 0;
}

int
vfs_open_dir(int rootfd, const char *path, int *ret_fd, struct err *err)
{
    int fd = xopen(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return fail(err, fd, path, "open");
    *ret_fd = fd;
    return 0;
}

int
vfs_open_below(int dirfd, const char *rel, int *ret_fd, struct err *err)
{
    /* No symlink at all, not even one that would stay below dirfd: the
     * caller names a directory it saw as one, and a link swapped in since
     * is somebody else's tree. */
    int fd = path_openat(dirfd, rel, O_RDONLY | O_DIRECTORY, 0, PATH_BENEATH | PATH_NO_SYMLINKS);
    if (fd < 0)
        return fail(err, fd, rel, "open");
    *ret_fd = fd;
    return 0;
}

/* --- creating --- */

static void
acting(const struct vfs_ids *ids, bool as_root, uid_t *uid, gid_t *gid)
{
    *uid = as_root ? ids->root_uid : ids->user_uid;
    *gid = as_root ? ids->root_gid : ids->user_gid;
}

int
vfs_mkdir(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root, bool *ret_created,
          struct err *err)
{
    uid_t uid;
    gid_t gid;
    bool created;

    acting(ids, as_root, &uid, &gid);
    int fd = mkdir_in_root(rootfd, path, uid, gid, &created);
    if (fd < 0)
        return fail(err, fd, path, "create directory");
    safe_close(fd);
    *ret_created = created;
    return 0;
}

int
vfs_rename(int rootfd, const struct vfs_ids *ids, const char *src, const char *dst, bool as_root,
           struct err *err)
{
    char sname[PATH_NAME_MAX + 1], dname[PATH_NAME_MAX + 1], dparent[PATH_MAX_LEN + 1];
    struct stat sst, dst_st;
    uid_t uid;
    gid_t gid;

    if (is_root(src) || is_root(dst))
        return err_set(err, EBUSY, "the root directory cannot be moved");
    acting(ids, as_root, &uid, &gid);
    _cleanup_close_ int sdir = open_parent(rootfd, src, sname);
    if (sdir < 0)
        return fail(err, sdir, src, "move");
    if (fstatat(sdir, sname, &sst, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(err, -errno, src, "move");
    split(dst, dparent, dname);
    _cleanup_close_ int ddir = mkdir_in_root(rootfd, dparent, uid, gid, NULL);
    if (ddir < 0)
        return fail(err, ddir, dparent, "create directory");
    /* Go's os.Rename refuses to replace a directory (unless it is src). */
    if (fstatat(ddir, dname, &dst_st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(dst_st.st_mode) &&
        (dst_st.st_dev != sst.st_dev || dst_st.st_ino != sst.st_ino))
        return err_set(err, EEXIST, "'%.512s' is an existing directory", dst);
    if (renameat(sdir, sname, ddir, dname) < 0)
        return fail(err, -errno, errno == ENOENT ? src : dst, "move to");
    return 0;
}

/* --- removing --- */

int
vfs_remove(int rootfd, const char *path, struct err *err)
{
    char name[PATH_NAME_MAX + 1];
    struct rm_tree t = {.max = VFS_REMOVE_MAX};

    if (is_root(path))
        return err_set(err, EBUSY, "the root directory cannot be removed");
    _cleanup_close_ int dir = open_parent(rootfd, path, name);
    if (dir == -ENOENT)
        return 0;
    if (dir < 0)
        return fail(err, dir, path, "remove");
    /* Iterative with a bounded number of descriptors (any depth goes),
     * never following a symlink, never climbing out of what it entered. */
    int r = rm_tree_at(dir, name, &t);
    if (r == 0)
        return 0;
    if (r == -E2BIG)
        return err_set(err, E2BIG, "more than %d entries below '%.512s'", VFS_REMOVE_MAX, path);
    if (r == -ESTALE)
        return err_set(err, EBUSY, "'%.512s' kept changing while it was being removed", path);
    if (!t.failed[0])
        return fail(err, r, path, "remove");
    return err_setx(err, -r, "cannot remove '%.128s' (%u levels below '%.512s')", t.failed, t.depth,
                    path);
}

/* --- reading and writing --- */

/* Reopens the O_PATH fd with flags. On a pseudo file system this happens
 * under uid:gid without capabilities: procfs checks who opens a file (and
 * remembers it in f_cred), and host root would see what sandbox processes
 * must not (kernel log, kernel addresses). The switch uses raw syscalls so
 * that only this thread changes credentials (glibc's wrappers change every
 * thread), and is undone before returning. */
static int
reopen(int pfd, int flags, uid_t uid, gid_t gid)
{
    char p[64];
    gid_t groups[64];
    uid_t ouid = geteuid();
    gid_t ogid = getegid();
    int fd, ng;

    (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
    if (!on_pseudo_fs(pfd) || ouid != 0) {
        fd = open(p, flags | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
    }
    if ((ng = getgroups((int)ELEMENTSOF(groups), groups)) < 0)
        return -errno;
    if (syscall(SYS_setgroups, 0, NULL) < 0)
        return -errno;
    if (syscall(SYS_setresgid, -1, gid, -1) < 0 || syscall(SYS_setresuid, -1, uid, -1) < 0)
        fd = -errno;
    else if ((fd = open(p, flags | O_CLOEXEC | O_NOCTTY)) < 0)
        fd = -errno;
    /* Going back cannot fail for a thread whose real and saved uid are 0;
     * if it did, this thread would go on with the wrong identity. */
    if (syscall(SYS_setresuid, -1, ouid, -1) < 0 || syscall(SYS_setresgid, -1, ogid, -1) < 0 ||
        syscall(SYS_setgroups, ng, groups) < 0)
        abort();
    return fd;
}

int
vfs_open_read(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root, int *ret_fd,
              uint64_t *ret_size, struct err *err)
{
    struct stat st;
    uid_t uid;
    gid_t gid;

    acting(ids, as_root, &uid, &gid);
    _cleanup_close_ int pfd = xopen(rootfd, path, O_PATH, 0);
    if (pfd < 0)
        return fail(err, pfd, path, "open");
    if (fstat(pfd, &st) < 0)
        return fail(err, -errno, path, "stat");
    if (S_ISDIR(st.st_mode))
        return fail(err, -EISDIR, path, "read");
    if (!S_ISREG(st.st_mode))
        return not_regular(err, path, st.st_mode);
    int fd = reopen(pfd, O_RDONLY, uid, gid);
    if (fd < 0)
        return fail(err, fd, path, "open");
    *ret_fd = fd;
    *ret_size = (uint64_t)st.st_size;
    return 0;
}

/* Where the dangling symlink path points, as an absolute normalized path. */
static int
link_target(int rootfd, const char *path, char *out)
{
    char name[PATH_NAME_MAX + 1], parent[PATH_MAX_LEN + 1], link[PATH_MAX_LEN + 1];
    size_t o = 0;
    int r;

    _cleanup_close_ int dir = open_parent(rootfd, path, name);
    if (dir < 0)
        return dir;
    ssize_t k = readlinkat(dir, name, link, sizeof(link) - 1);
    if (k <= 0)
        return k < 0 ? -errno : -ENOENT;
    link[k] = '\0';
    split(path, parent, name);
    if ((link[0] != '/' && (r = push(out, PATH_MAX_LEN + 1, &o, parent)) < 0) ||
        (r = push(out, PATH_MAX_LEN + 1, &o, link)) < 0)
        return r;
    return finish(out, PATH_MAX_LEN + 1, o);
}

struct vfs_upload {
    int dirfd;    /* O_PATH: the directory the target is linked into */
    int fd;       /* the staged file, O_WRONLY */
    bool tmpfile; /* O_TMPFILE: unnamed until linked */
    char tmpname[32];
    char name[PATH_NAME_MAX + 1]; /* the target's name in dirfd */
    char path[PATH_MAX_LEN + 1];  /* the target, for messages */
    uint64_t written, max;
};

/* Passes the user.* attributes of old (an O_PATH fd of the file being
 * replaced) other than user.e2b.* on to dst, as a write in place would
 * keep them; user.e2b.* is the upload's to set. Other namespaces are not
 * ours to copy (security.capability must not survive new content). Best
 * effort: what cannot be read or set is left out. */
static void
keep_xattrs(int old, int dst)
{
    char p[64];
    unsigned copied = 0;

    (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", old);
    ssize_t n = listxattr(p, NULL, 0);
    if (n <= 0)
        return;
    _cleanup_free_ char *names = malloc((size_t)n);
    _cleanup_free_ char *val = malloc(VFS_XATTR_VALUE_MAX);
    if (!names || !val || (n = listxattr(p, names, (size_t)n)) <= 0)
        return;
    for (char *s = names; s < names + n && copied < VFS_XATTR_KEEP_MAX; s += strlen(s) + 1) {
        if (!startswith(s, "user.", NULL) || startswith(s, VFS_META_PREFIX, NULL))
            continue;
        ssize_t k = getxattr(p, s, val, VFS_XATTR_VALUE_MAX);
        if (k >= 0 && fsetxattr(dst, s, val, (size_t)k, 0) == 0)
            copied++;
    }
}

/* Finds where a write to path lands, as os.OpenFile(O_CREATE) would: a
 * final symlink is followed (by hand, inside the root, also when it
 * dangles), missing parents of path itself are made. ret_dir (O_PATH) and
 * ret_name say where; ret_st is the existing file, st_mode 0 when none. */
static int
upload_target(int rootfd, const char *path, uid_t uid, gid_t gid, int *ret_dir, char *ret_name,
              struct stat *ret_st, struct err *err)
{
    char cur[PATH_MAX_LEN + 1], parent[PATH_MAX_LEN + 1], next[PATH_MAX_LEN + 1];
    struct stat st;
    int r;

    (void)strscpy(cur, path, sizeof(cur));
    for (int hops = 0;; hops++) {
        if (hops >= VFS_MAX_SYMLINK)
            return fail(err, -ELOOP, path, "open");
        if (is_root(cur))
            return fail(err, -EISDIR, path, "write");
        split(cur, parent, ret_name);
        /* Parents are made for the path asked for, not for where a link
         * points (os.OpenFile does not make them either). */
        _cleanup_close_ int dir = hops == 0 ? mkdir_in_root(rootfd, parent, uid, gid, NULL)
                                            : xopen(rootfd, parent, O_PATH | O_DIRECTORY, 0);
        if (dir < 0)
            return hops == 0 ? fail(err, dir, parent, "create directory")
                             : fail(err, dir, path, "open");
        if (fstatat(dir, ret_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return fail(err, -errno, path, "stat");
            st.st_mode = 0;
        } else if (S_ISLNK(st.st_mode)) {
            r = link_target(rootfd, cur, next);
            if (r == -EINVAL || r == -ENOENT)
                continue; /* not a link any more, or gone: look again */
            if (r < 0)
                return fail(err, r, path, "open");
            memcpy(cur, next, sizeof(cur));
            continue;
        } else if (S_ISDIR(st.st_mode)) {
            return fail(err, -EISDIR, path, "write");
        } else if (!S_ISREG(st.st_mode)) {
            return not_regular(err, path, st.st_mode);
        }
        if (on_pseudo_fs(dir))
            return err_set(err, EACCES, "'%.512s' is on a pseudo file system", path);
        *ret_st = st;
        *ret_dir = TAKE_FD(dir);
        return 0;
    }
}

int
vfs_upload_begin(int rootfd, const struct vfs_ids *ids, const char *path, bool as_root,
                 uint64_t max_bytes, struct vfs_upload **ret, struct err *err)
{
    _cleanup_free_ struct vfs_upload *up = calloc(1, sizeof(*up));
    struct stat st;
    uid_t uid;
    gid_t gid;
    int r;

    if (!up)
        return -ENOMEM;
    up->dirfd = up->fd = -EBADF;
    up->max = max_bytes;
    (void)strscpy(up->path, path, sizeof(up->path));
    acting(ids, as_root, &uid, &gid);
    r = upload_target(rootfd, path, uid, gid, &up->dirfd, up->name, &st, err);
    if (r < 0)
        return r;
    /* Unnamed until commit: nothing of a failed or aborted upload is ever
     * seen, and the old content stays whole until it is replaced at once.
     * O_PATH dirfd is fine as the base of an openat(). */
    up->fd = openat(up->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (up->fd >= 0) {
        up->tmpfile = true;
    } else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
        char rnd[17];
        (void)rand_hex(rnd, 8);
        (void)snprintf(up->tmpname, sizeof(up->tmpname), ".abx-upload-%s", rnd);
        up->fd = openat(up->dirfd, up->tmpname,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    }
    if (up->fd < 0) {
        r = fail(err, -errno, path, "create");
        vfs_upload_abort(TAKE_PTR(up));
        return r;
    }
    /* Owned by the acting user; a replaced file keeps its permission bits
     * (as O_TRUNC would), a new one gets 0644 whatever the umask. chown
     * first: it clears set-id bits, which are never carried over. */
    if (fchown(up->fd, uid, gid) < 0 || fchmod(up->fd, st.st_mode ? st.st_mode & 0777 : 0644) < 0) {
        r = fail(err, -errno, path, "chown");
        vfs_upload_abort(TAKE_PTR(up));
        return r;
    }
    if (st.st_mode) {
        struct stat now;
        _cleanup_close_ int old = openat(up->dirfd, up->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (old >= 0 && fstat(old, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
            keep_xattrs(old, up->fd);
    }
    *ret = TAKE_PTR(up);
    return 0;
}

int
vfs_upload_fd(const struct vfs_upload *up)
{
    return up->fd;
}

int
vfs_upload_write(struct vfs_upload *up, const void *data, size_t n, struct err *err)
{
    if (n > up->max - up->written)
        return err_set(err, EFBIG, "'%.512s' would be larger than %llu bytes", up->path,
                       (unsigned long long)up->max);
    int r = write_full(up->fd, data, n);
    if (r < 0)
        return fail(err, r, up->path, "write");
    up->written += n;
    return 0;
}

uint64_t
vfs_upload_size(const struct vfs_upload *up)
{
    return up->written;
}

void
vfs_upload_abort(struct vfs_upload *up)
{
    if (!up)
        return;
    safe_close(up->fd);
    if (up->tmpname[0])
        (void)unlinkat(up->dirfd, up->tmpname, 0);
    safe_close(up->dirfd);
    free(up);
}

int
vfs_upload_commit(struct vfs_upload *up, bool *ret_created, struct err *err)
{
    struct stat st;
    bool created;
    int r = 0;

    if (fstatat(up->dirfd, up->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            r = fail(err, -EISDIR, up->path, "replace");
            goto out;
        }
        created = false;
    } else {
        created = true;
    }
    if (up->tmpfile) {
        char proc[64], rnd[17];
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", up->fd);
        if (linkat(AT_FDCWD, proc, up->dirfd, up->name, AT_SYMLINK_FOLLOW) == 0)
            goto done;
        if (errno != EEXIST) {
            r = fail(err, -errno, up->path, "create");
            goto out;
        }
        /* Replacing: link under a hidden name, then rename over the old
         * one, which readers see switch from whole old to whole new. */
        (void)rand_hex(rnd, 8);
        (void)snprintf(up->tmpname, sizeof(up->tmpname), ".abx-upload-%s", rnd);
        if (linkat(AT_FDCWD, proc, up->dirfd, up->tmpname, AT_SYMLINK_FOLLOW) < 0) {
            up->tmpname[0] = '\0';
            r = fail(err, -errno, up->path, "create");
            goto out;
        }
    }
    if (renameat(up->dirfd, up->tmpname, up->dirfd, up->name) < 0) {
        r = fail(err, -errno, up->path, "replace");
        goto out;
    }
done:
    up->tmpname[0] = '\0';
    if (ret_created)
        *ret_created = created;
out:
    vfs_upload_abort(up);
    return r;
}

int
vfs_set_meta(int fd, const struct vfs_meta *m, struct err *err)
{
    char name[sizeof(VFS_META_PREFIX) + VFS_META_KEY_MAX];
    size_t bytes = 0, kn = 1;

    for (uint32_t i = 0; m && m->n <= VFS_META_MAX && i < m->n && kn; i++) {
        kn = strlen(vfs_meta_key(m, i));
        bytes += kn + strlen(vfs_meta_value(m, i));
        kn = kn <= VFS_META_KEY_MAX ? kn : 0;
    }
    if (m && (m->n > VFS_META_MAX || kn == 0 || bytes > VFS_META_BYTES))
        return err_set(err, EINVAL, "metadata over the limits (%d pairs, key %d, total %d bytes)",
                       VFS_META_MAX, VFS_META_KEY_MAX, VFS_META_BYTES);
    ssize_t n = flistxattr(fd, NULL, 0);
    if (n < 0 && errno != ENOTSUP)
        return err_setx(err, errno, "cannot list extended attributes");
    if (n > 0) {
        _cleanup_free_ char *names = malloc((size_t)n);
        if (!names)
            return -ENOMEM;
        if ((n = flistxattr(fd, names, (size_t)n)) < 0)
            return err_setx(err, errno, "cannot list extended attributes");
        for (char *s = names; s < names + n; s += strlen(s) + 1)
            if (startswith(s, VFS_META_PREFIX, NULL) && fremovexattr(fd, s) < 0 && errno != ENODATA)
                return err_setx(err, errno, "cannot remove extended attribute '%.64s'", s);
    }
    for (uint32_t i = 0; m && i < m->n; i++) {
        const char *v = vfs_meta_value(m, i);
        (void)snprintf(name, sizeof(name), VFS_META_PREFIX "%s", vfs_meta_key(m, i));
        if (fsetxattr(fd, name, v, strlen(v), 0) < 0)
            return err_setx(err, errno == ENOTSUP ? EOPNOTSUPP : errno,
                            "cannot set extended attribute '%.64s'", name);
    }
    return 0;
}

/* --- copying in --- */

struct copy {
    uid_t uid;
    gid_t gid;
    size_t left; /* entries the copy may still make */
};

/* What a source entry becomes (util/tree.h): a regular file 0755 if its
 * owner may run it, else 0644; a directory 0755; a link as it is; all the
 * acting user's. Devices, fifos and sockets are not copied. */
static int
copy_decide(void *ud, const struct tree_entry *e, struct tree_make *mk)
{
    struct copy *c = ud;
    if (e->depth > VFS_COPY_MAX_DEPTH)
        return -ELOOP;
    if (c->left-- == 0)
        return -E2BIG;
    mk->uid = c->uid;
    mk->gid = c->gid;
    if (S_ISREG(e->st.st_mode))
        mk->mode = (e->st.st_mode & 0100) ? 0755 : 0644;
    else if (S_ISDIR(e->st.st_mode))
        mk->mode = 0755;
    else if (!S_ISLNK(e->st.st_mode))
        return -EPERM;
    return 0;
}

/* Every failure stops the copy; two say what is in the way. */
static int
copy_failed(void *ud, const struct tree_entry *e, enum tree_step step, int error)
{
    (void)ud;
    (void)e;
    if (step == TREE_STEP_REPLACE && error == EISDIR)
        return -EEXIST; /* a directory where a file or link goes */
    if (step == TREE_STEP_OPEN_DST && error == ELOOP)
        return -ENOTDIR; /* a link where a directory goes */
    return -error;
}

static const struct tree_copy_ops copy_ops = {.decide = copy_decide, .failed = copy_failed};

int
vfs_copy_in(int rootfd, const struct vfs_ids *ids, int srcdir, const char *src, const char *dst,
            bool as_root, struct err *err)
{
    char sparent[PATH_MAX_LEN + 1], sname[PATH_NAME_MAX + 1], dname[PATH_NAME_MAX + 1];
    char dparent[PATH_MAX_LEN + 1];
    struct copy c = {.left = VFS_COPY_MAX_ENTRIES};
    /* Files and links replace what is at their names, directories are
     * merged into; no link is followed on either side (util/tree.h). */
    const struct tree_copy_opts o = {
            .walk = {.max_depth = VFS_COPY_MAX_DEPTH, .max_names = VFS_COPY_MAX_ENTRIES},
            .mode = TREE_COPY_REPLACE,
            .ops = &copy_ops,
            .ud = &c,
    };
    int r;

    acting(ids, as_root, &c.uid, &c.gid);
    if (is_root(dst))
        return err_set(err, EINVAL, "cannot copy over '/'");
    /* the source: a relative path in srcdir's tree, no link on the way */
    const char *slash = strrchr(src, '/');
    if (slash) {
        size_t pl = (size_t)(slash - src);
        if (pl >= sizeof(sparent) || strscpy(sname, slash + 1, sizeof(sname)) < 0)
            return fail(err, -ENAMETOOLONG, src, "copy");
        memcpy(sparent, src, pl);
        sparent[pl] = '\0';
    } else if (strscpy(sname, src, sizeof(sname)) < 0) {
        return fail(err, -ENAMETOOLONG, src, "copy");
    }
    _cleanup_close_ int sd = -EBADF;
    if (slash) {
        sd = path_openat(srcdir, sparent, O_PATH | O_DIRECTORY, 0, PATH_BENEATH | PATH_NO_SYMLINKS);
        if (sd < 0)
            return fail(err, sd, src, "copy");
    }
    split(dst, dparent, dname);
    _cleanup_close_ int dd = mkdir_in_root(rootfd, dparent, c.uid, c.gid, NULL);
    if (dd < 0)
        return fail(err, dd, dparent, "create directory");
    r = tree_copy_at(slash ? sd : srcdir, sname, dd, dname, &o, NULL);
    if (r == -E2BIG)
        return err_set(err, E2BIG, "more than %d entries to copy to '%.512s'", VFS_COPY_MAX_ENTRIES,
                       dst);
    if (r == -ELOOP)
        return err_set(err, ELOOP, "directories nested deeper than %d levels in '%.512s'",
                       VFS_COPY_MAX_DEPTH, src);
    if (r == -EPERM)
        return err_set(err, EPERM, "'%.512s' holds something that is no file, link or directory",
                       src);
    return r < 0 ? fail(err, r, dst, "copy to") : 0;
}
