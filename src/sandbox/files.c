/*
 * files.c - confined file operations on a workspace root descriptor.
 */
#include "sandbox/files.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fd.h"
#include "util/parse.h"
#include "util/path.h"
#include "util/rand.h"
#include "util/tree.h"

const char *
files_type_name(enum files_type t)
{
    switch (t) {
    case FILES_FILE:
        return "file";
    case FILES_DIR:
        return "dir";
    case FILES_SYMLINK:
        return "symlink";
    default:
        return "other";
    }
}

static void
show(const char *rel, char *out, size_t n)
{
    (void)snprintf(out, n, "/%s", path_is_root(rel) ? "" : rel);
}

/* Maps the errno of a confined lookup to a message naming the path. */
static int
fail(struct err *err, int r, const char *rel, const char *what)
{
    return path_fail(err, r, PATH_VOICE_WORKSPACE, rel, what);
}

static uint64_t
mix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (i * 8)) & 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

static void
fill_stat(const struct stat *st, struct files_stat *ret)
{
    if (S_ISREG(st->st_mode))
        ret->type = FILES_FILE;
    else if (S_ISDIR(st->st_mode))
        ret->type = FILES_DIR;
    else if (S_ISLNK(st->st_mode))
        ret->type = FILES_SYMLINK;
    else
        ret->type = FILES_OTHER;
    ret->size = S_ISREG(st->st_mode) || S_ISLNK(st->st_mode) ? (uint64_t)st->st_size : 0;
    ret->mode = st->st_mode & 07777;
    ret->mtime_ms = (uint64_t)st->st_mtim.tv_sec * 1000u + (uint64_t)st->st_mtim.tv_nsec / 1000000u;
    uint64_t h = 1469598103934665603ULL;
    h = mix(h, (uint64_t)st->st_ino);
    h = mix(h, (uint64_t)st->st_size);
    h = mix(h, (uint64_t)st->st_mtim.tv_sec);
    h = mix(h, (uint64_t)st->st_mtim.tv_nsec);
    h = mix(h, (uint64_t)st->st_ctim.tv_sec);
    h = mix(h, (uint64_t)st->st_ctim.tv_nsec);
    h = mix(h, (uint64_t)st->st_mode);
    static const char hex[] = "0123456789abcdef";
    for (int i = FILES_VERSION_LEN - 1; i >= 0; i--, h >>= 4)
        ret->version[i] = hex[h & 15];
    ret->version[FILES_VERSION_LEN] = '\0';
}

int
files_stat(int root, const char *rel, struct files_stat *ret, struct err *err)
{
    _cleanup_close_ int fd = path_open(root, rel, O_PATH, 0);
    if (fd < 0)
        return fail(err, fd, rel, "stat");
    struct stat st;
    if (fstat(fd, &st) < 0)
        return fail(err, -errno, rel, "stat");
    fill_stat(&st, ret);
    return 0;
}

/* Names what rel is when it is not a regular file. */
static int
not_regular(struct err *err, const char *rel, mode_t mode)
{
    char p[PATH_MAX_LEN + 2];
    show(rel, p, sizeof(p));
    return err_set(err, EINVAL, "'%.512s' is a %s, not a regular file", p, fd_type_name(mode));
}

int
files_open_read(int root, const char *rel, int *ret_fd, struct files_stat *ret, struct err *err)
{
    char proc[64];
    struct stat st;

    /* O_PATH first: a FIFO, socket or device planted by the sandbox is
     * named and refused without ever being opened (a FIFO would block, a
     * socket fails with ENXIO, a device runs its driver). The reopen goes
     * through the O_PATH descriptor, so it is the inode we checked. */
    _cleanup_close_ int pfd = path_open(root, rel, O_PATH, 0);
    if (pfd < 0)
        return fail(err, pfd, rel, "open");
    if (fstat(pfd, &st) < 0)
        return fail(err, -errno, rel, "stat");
    if (S_ISDIR(st.st_mode))
        return fail(err, -EISDIR, rel, "read");
    if (!S_ISREG(st.st_mode))
        return not_regular(err, rel, st.st_mode);
    (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
    int fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, -errno, rel, "open");
    fill_stat(&st, ret);
    *ret_fd = fd;
    return 0;
}

/* Opens the parent directory of rel (creating it) and splits off the name. */
static int
open_parent(int root, const char *rel, bool create, uid_t uid, gid_t gid, char *name,
            struct err *err)
{
    char parent[PATH_MAX_LEN + 2];
    int r = path_split(rel, parent, name, sizeof(parent));
    if (r < 0)
        return err_set(err, EINVAL, "the workspace root itself cannot be used here");
    int fd = create ? path_mkdir_p(root, parent, 0755, uid, gid)
                    : path_open(root, parent, O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fail(err, fd, parent, create ? "create directory" : "open directory");
    return fd;
}

struct files_upload {
    int dirfd;
    int fd;
    bool tmpfile; /* O_TMPFILE: unnamed until linked */
    char tmpname[64];
    char name[PATH_NAME_MAX + 1];
    char rel[PATH_MAX_LEN + 1];
    uint64_t written, max;
};

int
files_upload_begin(int root, const char *rel, uid_t uid, gid_t gid, uint64_t max_bytes,
                   struct files_upload **ret, struct err *err)
{
    struct files_upload *up = calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up->fd = -EBADF;
    up->max = max_bytes;
    (void)strscpy(up->rel, rel, sizeof(up->rel));
    int r = open_parent(root, rel, true, uid, gid, up->name, err);
    if (r < 0) {
        free(up);
        return r;
    }
    up->dirfd = r;
    up->fd = openat(up->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (up->fd >= 0) {
        up->tmpfile = true;
    } else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
        char rnd[17];
        (void)rand_hex(rnd, 8);
        (void)snprintf(up->tmpname, sizeof(up->tmpname), ".abx-upload-%s", rnd);
        up->fd = openat(up->dirfd, up->tmpname,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (up->fd < 0) {
        r = fail(err, -errno, rel, "create");
        files_upload_abort(up);
        return r;
    }
    if (fchown(up->fd, uid, gid) < 0 && uid != (uid_t)-1) {
        r = fail(err, -errno, rel, "chown");
        files_upload_abort(up);
        return r;
    }
    *ret = up;
    return 0;
}

int
files_upload_write(struct files_upload *up, const void *data, size_t n, struct err *err)
{
    if (n > up->max - up->written) {
        char p[PATH_MAX_LEN + 2];
        show(up->rel, p, sizeof(p));
        return err_set(err, EFBIG, "'%.512s' would be larger than %llu bytes", p,
                       (unsigned long long)up->max);
    }
    int r = write_full(up->fd, data, n);
    if (r < 0)
        return fail(err, r, up->rel, "write");
    up->written += n;
    return 0;
}

int
files_upload_fd(const struct files_upload *up)
{
    return up->fd;
}

void
files_upload_abort(struct files_upload *up)
{
    if (!up)
        return;
    safe_close(up->fd);
    if (!up->tmpfile && up->tmpname[0])
        (void)unlinkat(up->dirfd, up->tmpname, 0);
    safe_close(up->dirfd);
    free(up);
}

int
files_upload_commit(struct files_upload *up, struct files_stat *ret, bool *ret_created,
                    struct err *err)
{
    struct stat st;
    int r;
    char rnd[17];

    if (fstatat(up->dirfd, up->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(st.st_mode)) {
            r = fail(err, -EISDIR, up->rel, "replace");
            goto out;
        }
        *ret_created = false;
    } else {
        *ret_created = true;
    }
    if (up->tmpfile) {
        char proc[64];
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", up->fd);
        if (linkat(AT_FDCWD, proc, up->dirfd, up->name, AT_SYMLINK_FOLLOW) == 0)
            goto linked;
        if (errno != EEXIST) {
            r = fail(err, -errno, up->rel, "create");
            goto out;
        }
        (void)rand_hex(rnd, 8);
        (void)snprintf(up->tmpname, sizeof(up->tmpname), ".abx-upload-%s", rnd);
        if (linkat(AT_FDCWD, proc, up->dirfd, up->tmpname, AT_SYMLINK_FOLLOW) < 0) {
            r = fail(err, -errno, up->rel, "create");
            up->tmpname[0] = '\0';
            goto out;
        }
        up->tmpfile = false; /* now it has a name to clean up on failure */
    }
    if (renameat(up->dirfd, up->tmpname, up->dirfd, up->name) < 0) {
        r = fail(err, -errno, up->rel, "replace");
        goto out;
    }
    up->tmpname[0] = '\0';
linked:
    if (fstat(up->fd, &st) < 0) {
        r = fail(err, -errno, up->rel, "stat");
        goto out;
    }
    fill_stat(&st, ret);
    r = 0;
out:
    files_upload_abort(up);
    return r;
}

int
files_delete(int root, const char *rel, struct err *err)
{
    char name[PATH_NAME_MAX + 1];
    struct stat st;

    int dfd = open_parent(root, rel, false, (uid_t)-1, (gid_t)-1, name, err);
    if (dfd < 0)
        return dfd;
    _cleanup_close_ int d = dfd;
    if (fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(err, -errno, rel, "delete");
    if (S_ISDIR(st.st_mode))
        return err_set(err, EISDIR, "'/%.512s' is a directory: use rmdir", rel);
    if (unlinkat(d, name, 0) < 0)
        return fail(err, -errno, rel, "delete");
    return 0;
}

int
files_mkdir(int root, const char *rel, uid_t uid, gid_t gid, bool *ret_created, struct err *err)
{
    _cleanup_close_ int existing = path_open(root, rel, O_PATH, 0);
    if (existing >= 0) {
        struct stat st;
        if (fstat(existing, &st) < 0)
            return fail(err, -errno, rel, "stat");
        if (!S_ISDIR(st.st_mode))
            return fail(err, -EEXIST, rel, "create directory");
        *ret_created = false;
        return 0;
    }
    if (existing != -ENOENT)
        return fail(err, existing, rel, "create directory");
    int fd = path_mkdir_p(root, rel, 0755, uid, gid);
    if (fd < 0)
        return fail(err, fd, rel, "create directory");
    safe_close(fd);
    *ret_created = true;
    return 0;
}

int
files_rmdir(int root, const char *rel, struct err *err)
{
    char name[PATH_NAME_MAX + 1], p[PATH_MAX_LEN + 2];
    struct rm_tree t = {.max = FILES_REMOVE_MAX};
    struct stat st;

    if (path_is_root(rel))
        return err_set(err, EINVAL, "the workspace root cannot be removed");
    int dfd = open_parent(root, rel, false, (uid_t)-1, (gid_t)-1, name, err);
    if (dfd < 0)
        return dfd;
    _cleanup_close_ int parent = dfd;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(err, -errno, rel, "remove");
    if (!S_ISDIR(st.st_mode))
        return err_set(err, ENOTDIR, "'/%.512s' is a %s, not a directory: use delete", rel,
                       fd_type_name(st.st_mode));
    /* Iterative, with a bounded number of descriptors: any depth the
     * kernel lets the sandbox make can be removed. */
    int r = rm_tree_at(parent, name, &t);
    if (r == 0)
        return 0;
    show(rel, p, sizeof(p));
    if (r == -E2BIG)
        return err_set(err, E2BIG, "more than %d entries below '%.512s'", FILES_REMOVE_MAX, p);
    if (r == -ESTALE)
        return err_set(err, EBUSY, "'%.512s' kept changing while it was being removed", p);
    if (!t.failed[0])
        return fail(err, r, rel, "remove");
    return err_setx(err, -r, "cannot remove '%.128s' (%u levels below '%.512s')", t.failed, t.depth,
                    p);
}

int
files_rename(int root, const char *from, const char *to, bool overwrite, uid_t uid, gid_t gid,
             struct err *err)
{
    char fname[PATH_NAME_MAX + 1], tname[PATH_NAME_MAX + 1];

    if (path_is_root(from) || path_is_root(to))
        return err_set(err, EINVAL, "the workspace root cannot be renamed");
    int a = open_parent(root, from, false, (uid_t)-1, (gid_t)-1, fname, err);
    if (a < 0)
        return a;
    _cleanup_close_ int fdir = a;
    struct stat st;
    if (fstatat(fdir, fname, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail(err, -errno, from, "rename");
    int b = open_parent(root, to, true, uid, gid, tname, err);
    if (b < 0)
        return b;
    _cleanup_close_ int tdir = b;
    if (renameat2(fdir, fname, tdir, tname, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
        if (errno == EINVAL)
            return err_set(err, EINVAL, "cannot move '/%.256s' into itself", from);
        return fail(err, -errno,
                    errno == EEXIST || errno == ENOTEMPTY || errno == EISDIR ? to : from, "rename");
    }
    return 0;
}

/* --- walk --- */

bool
files_prune_match(const struct files_prune *p, const char *name, const struct files_stat *st)
{
    bool dir = st->type == FILES_DIR;
    if (!p)
        return false;
    if (st->type == FILES_FILE && p->max_file_bytes && st->size > p->max_file_bytes)
        return true;
    if (!dir && st->type != FILES_FILE)
        return false;
    for (size_t i = 0; i < p->n && i < FILES_PRUNE_MAX; i++) {
        if (p->dir_only[i] && !dir)
            continue;
        if (p->glob[i] ? fnmatch(p->patterns[i], name, FNM_PERIOD) == 0
                       : strcmp(p->patterns[i], name) == 0)
            return true;
    }
    return false;
}

struct walk_state {
    struct files_tree *t;
    const struct files_walk_opts *o;
    size_t max;
    bool full; /* t->n reached max */
};

static int
cmp_entries(const void *a, const void *b)
{
    return strcmp(((const struct files_entry *)a)->path, ((const struct files_entry *)b)->path);
}

/* One entry of the walk (util/tree.h): kept unless pruned, entered when a
 * directory (within the limits). */
static int
walk_entry(struct walk_state *ws, const struct tree_entry *te)
{
    struct files_tree *t = ws->t;
    struct files_stat fs;

    fill_stat(&te->st, &fs);
    if (ws->o && ws->o->prune && files_prune_match(ws->o->prune, te->name, &fs)) {
        t->skipped++;
        return 0;
    }
    if (t->n >= ws->max) {
        ws->full = true;
        return -E2BIG;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct files_entry *v = realloc(t->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    struct files_entry *e = &t->v[t->n];
    e->st = fs;
    e->target = NULL;
    e->path = strdup(te->path);
    if (!e->path)
        return -ENOMEM;
    if (S_ISLNK(te->st.st_mode)) {
        char target[PATH_MAX];
        ssize_t k = readlinkat(te->dirfd, te->name, target, sizeof(target) - 1);
        if (k >= 0) {
            target[k] = '\0';
            e->target = strdup(target);
        }
    }
    t->n++;
    e->unread = false;
    e->beyond = 0;
    if (ws->o && ws->o->limits_as_entries) {
        if (te->path_len - 1 > PATH_MAX_LEN)
            e->beyond = ENAMETOOLONG;
        else if (S_ISDIR(te->st.st_mode) && te->depth > FILES_MAX_DEPTH)
            e->beyond = ELOOP;
        if (e->beyond)
            return 0; /* listed, not entered */
    }
    return S_ISDIR(te->st.st_mode) ? TREE_ENTER : 0;
}

static int
walk_fn(void *ud, enum tree_event ev, struct tree_entry *te)
{
    struct walk_state *ws = ud;
    switch (ev) {
    case TREE_ENTRY:
        return walk_entry(ws, te);
    case TREE_ERROR:
        if (te->step == TREE_STEP_OPEN && (te->error == EACCES || te->error == EPERM)) {
            /* not ours to read: listed, not entered (the entry is the
             * last one kept: a directory is entered right after it) */
            ws->t->v[ws->t->n - 1].unread = true;
            return 0;
        }
        return -te->error;
    default:
        return 0;
    }
}

void
files_tree_free(struct files_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        free(t->v[i].target);
    }
    free(t->v);
    *t = (struct files_tree){0};
}

int
files_tree_list(int root, const char *rel, const struct files_walk_opts *opts,
                struct files_tree *ret, struct err *err)
{
    char prefix[PATH_MAX_LEN + 2];
    struct files_tree t = {0};
    struct walk_state ws = {&t, opts, opts && opts->max ? opts->max : FILES_WALK_MAX, false};
    /* Entries of a directory FILES_MAX_DEPTH levels down are listed, its
     * subdirectories not entered; paths up to twice PATH_MAX_LEN are
     * listed (limits_as_entries marks those past it). */
    const struct tree_opts to = {
            .max_depth = FILES_MAX_DEPTH,
            .max_names = FILES_WALK_NAMES_MAX,
            .prefix = prefix,
            .path_max = PATH_MAX_LEN * 2,
    };
    int r;

    _cleanup_close_ int d = path_open(root, rel, O_RDONLY | O_DIRECTORY, 0);
    if (d < 0)
        return fail(err, d, rel, "list");
    (void)snprintf(prefix, sizeof(prefix), "%s%s", path_is_root(rel) ? "" : "/",
                   path_is_root(rel) ? "" : rel);
    r = tree_walk(d, -EBADF, &to, walk_fn, &ws);
    if (r == -E2BIG && ws.full)
        r = err_set(err, E2BIG, "more than %zu entries below '/%s'", ws.max,
                    path_is_root(rel) ? "" : rel);
    else if (r == -E2BIG)
        r = err_set(err, E2BIG, "more than %d names (kept or left out) below '/%s'",
                    FILES_WALK_NAMES_MAX, path_is_root(rel) ? "" : rel);
    else if (r == -ELOOP)
        r = err_set(err, ELOOP, "directories nested deeper than %d levels", FILES_MAX_DEPTH);
    else if (r == -ENAMETOOLONG)
        r = fail(err, -EFBIG, rel, "list"); /* what a path past the buffer always said */
    else if (r < 0)
        r = fail(err, r, rel, "list");
    if (r < 0) {
        files_tree_free(&t);
        return r;
    }
    if (t.n)
        qsort(t.v, t.n, sizeof(*t.v), cmp_entries);
    *ret = t;
    return 0;
}

int
files_walk(int root, const char *rel, files_walk_fn fn, void *ud, struct err *err)
{
    struct files_tree t = {0};
    int r = files_tree_list(root, rel, NULL, &t, err);
    for (size_t i = 0; r == 0 && i < t.n; i++)
        r = fn(&t.v[i], ud);
    files_tree_free(&t);
    return r;
}
