/*
 * tree.c - walking and copying a tree from pinned directory descriptors.
 *
 * The walk is a loop over an explicit stack of levels, one per directory
 * on the way down: its descriptor, the callback's aux descriptor for it,
 * and its names, read whole with getdents64() into one buffer and sorted.
 * Nothing is ever looked up by a path of more than one name, and no
 * directory is reached but from the descriptor of the one above it, so a
 * rename or symlink swap can only make the walk skip something or see it
 * moved - inside the tree it started in. The copier is a callback of the
 * walk; per entry it reads the source first (opened O_NOFOLLOW, checked to
 * be what was looked at), then makes the destination name in the pinned
 * destination directory.
 */
#include "util/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fd.h"

#define TREE_PATH_MAX   4095         /* path_max's default (PATH_MAX_LEN of util/path.h) */
#define TREE_DENTS      32768        /* bytes of one getdents64() */
#define TREE_COPY_CHUNK (128 * 1024) /* bytes of the copier's data buffer */

/* One directory on the way down. */
struct level {
    int fd;                 /* O_RDONLY|O_DIRECTORY (or the caller's, for tree_walk_at()) */
    int aux;                /* the callback's descriptor for it, -EBADF */
    bool own_fd, own_aux;   /* closed when the level is done */
    char *arena;            /* the names, NUL-terminated, one after another */
    char **v;               /* sorted, pointing into arena */
    size_t n, i;            /* names, and the next one to visit */
    size_t path_len;        /* of the directory's own path */
    struct tree_entry self; /* the entry that was entered (TREE_LEAVE) */
};

struct walk {
    tree_fn fn;
    void *ud;
    unsigned max_depth;
    uint64_t max_names, names;
    unsigned base; /* depth of the first level's names: 1, or 0 for tree_walk_at() */
    bool relative; /* no prefix: paths are the names alone */
    char *path;    /* path_max + 1 bytes */
    size_t path_len, path_max;
    struct level *lv; /* max_depth + 2 of them */
    size_t n;
};

static void
level_done(struct level *l)
{
    if (l->own_fd)
        safe_close(l->fd);
    if (l->own_aux)
        safe_close(l->aux);
    free(l->arena);
    free(l->v);
    *l = (struct level){.fd = -EBADF, .aux = -EBADF};
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the names of the directory fd (its offset moves) into l, sorted. */
static int
read_names(struct walk *w, int fd, struct level *l)
{
    _cleanup_free_ char *dents = malloc(TREE_DENTS);
    _cleanup_free_ size_t *offs = NULL;
    size_t used = 0, cap = 0, n = 0, ocap = 0;
    char *arena = NULL;
    int r = 0;

    if (!dents)
        return -ENOMEM;
    for (;;) {
        ssize_t k = getdents64(fd, dents, TREE_DENTS);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r = -errno;
            break;
        }
        if (k == 0)
            break;
        for (ssize_t off = 0; off < k && r == 0;) {
            const struct dirent64 *de = (const struct dirent64 *)(dents + off);
            off += de->d_reclen;
            const char *s = de->d_name;
            if (s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0')))
                continue;
            if (++w->names > w->max_names) {
                r = -E2BIG;
                break;
            }
            size_t len = strlen(s) + 1;
            if (used + len > cap) {
                size_t ncap = MAX(cap * 2, (size_t)4096);
                while (ncap < used + len)
                    ncap *= 2;
                char *na = realloc(arena, ncap);
                if (!na) {
                    r = -ENOMEM;
                    break;
                }
                arena = na;
                cap = ncap;
            }
            if (n == ocap) {
                size_t nocap = ocap ? ocap * 2 : 64;
                size_t *no = realloc(offs, nocap * sizeof(*no));
                if (!no) {
                    r = -ENOMEM;
                    break;
                }
                offs = no;
                ocap = nocap;
            }
            memcpy(arena + used, s, len);
            offs[n++] = used;
            used += len;
        }
        if (r < 0)
            break;
    }
    char **v = NULL;
    if (r == 0 && n > 0 && !(v = malloc(n * sizeof(*v))))
        r = -ENOMEM;
    if (r < 0) {
        free(arena);
        return r;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = arena + offs[i];
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_names);
    l->arena = arena;
    l->v = v;
    l->n = n;
    l->i = 0;
    return 0;
}

/* Appends name to the path: the entry's path. */
static int
path_push(struct walk *w, size_t base, const char *name, size_t *ret_len)
{
    size_t n = strlen(name);
    bool sep = w->relative ? base > 0 : base == 0 || w->path[base - 1] != '/';
    size_t len = base + (sep ? 1 : 0) + n;
    if (len > w->path_max)
        return -ENAMETOOLONG;
    if (sep)
        w->path[base] = '/';
    memcpy(w->path + base + (sep ? 1 : 0), name, n + 1);
    w->path_len = len;
    *ret_len = len;
    return 0;
}

/* Goes into the directory e (looked at, and asked for): opens it in its
 * parent without following, checks it is the one looked at, lets fn set it
 * up, reads its names and makes it the deepest level. 0 when skipped. */
static int
enter(struct walk *w, struct tree_entry *e)
{
    struct stat st;
    int r;

    if (e->depth > w->max_depth)
        return -ELOOP;
    int fd = openat(e->dirfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
            return 0; /* gone, or swapped for a file or a link, since we looked */
        e->step = TREE_STEP_OPEN;
        e->error = errno;
        return w->fn(w->ud, TREE_ERROR, e);
    }
    if (fstat(fd, &st) < 0) {
        e->step = TREE_STEP_OPEN;
        e->error = errno;
        safe_close(fd);
        return w->fn(w->ud, TREE_ERROR, e);
    }
    if (st.st_dev != e->st.st_dev || st.st_ino != e->st.st_ino) {
        safe_close(fd);
        return 0; /* another directory moved in meanwhile: not the one we looked at */
    }
    e->fd = fd;
    e->own_aux = -EBADF;
    r = w->fn(w->ud, TREE_DIR, e);
    struct level *l = &w->lv[w->n];
    *l = (struct level){
            .fd = fd,
            .aux = e->own_aux,
            .own_fd = true,
            .own_aux = true,
            .path_len = e->path_len,
            .self = *e,
    };
    if (r != 0) {
        level_done(l);
        return r < 0 ? r : 0; /* TREE_SKIP */
    }
    r = read_names(w, fd, l);
    if (r == -E2BIG || r == -ENOMEM) {
        level_done(l);
        return r;
    }
    if (r < 0) {
        e->step = TREE_STEP_READ;
        e->error = -r;
        r = w->fn(w->ud, TREE_ERROR, e);
        if (r < 0) {
            level_done(l);
            return r;
        }
        /* fn goes on: an empty directory, still left as one */
    }
    w->n++;
    return 0;
}

/* The deepest level is done: TREE_LEAVE (unless it is the first), pop. */
static int
leave(struct walk *w)
{
    struct level *l = &w->lv[w->n - 1];
    int r = 0;

    if (w->n > 1) {
        struct level *up = &w->lv[w->n - 2];
        struct tree_entry e = l->self;
        w->path[l->path_len] = '\0';
        w->path_len = l->path_len;
        e.path = w->path;
        e.path_len = l->path_len;
        e.dirfd = up->fd;
        e.aux = up->aux;
        e.fd = l->fd;
        e.own_aux = l->aux;
        r = w->fn(w->ud, TREE_LEAVE, &e);
    }
    level_done(l);
    w->n--;
    return r;
}

static int
run(struct walk *w)
{
    int r = 0;

    while (w->n > 0) {
        struct level *l = &w->lv[w->n - 1];
        if (l->i == l->n) {
            if ((r = leave(w)) < 0)
                break;
            continue;
        }
        struct tree_entry e = {
                .dirfd = l->fd,
                .aux = l->aux,
                .name = l->v[l->i++],
                .depth = (unsigned)(w->n - 1) + w->base,
                .fd = -EBADF,
                .own_aux = -EBADF,
        };
        if ((r = path_push(w, l->path_len, e.name, &e.path_len)) < 0)
            break;
        e.path = w->path;
        if (fstatat(l->fd, e.name, &e.st, AT_SYMLINK_NOFOLLOW) < 0) {
            /* Vanished since the directory was read: not there. But the
             * entry tree_walk_at() was asked for must be. */
            if (errno == ENOENT && e.depth > 0)
                continue;
            e.step = TREE_STEP_STAT;
            e.error = errno;
            if ((r = w->fn(w->ud, TREE_ERROR, &e)) < 0)
                break;
            continue;
        }
        r = w->fn(w->ud, TREE_ENTRY, &e);
        if (r < 0)
            break;
        if (r == TREE_ENTER && S_ISDIR(e.st.st_mode) && (r = enter(w, &e)) < 0)
            break;
        r = 0;
    }
    while (w->n > 0)
        level_done(&w->lv[--w->n]);
    return r;
}

static int
walk_init(struct walk *w, const struct tree_opts *o, tree_fn fn, void *ud)
{
    *w = (struct walk){.fn = fn, .ud = ud};
    w->max_depth =
            o && o->max_depth && o->max_depth <= TREE_DEPTH_MAX ? o->max_depth : TREE_DEPTH_MAX;
    w->max_names = o && o->max_names ? o->max_names : TREE_NAMES_MAX;
    w->path_max = o && o->path_max ? o->path_max : TREE_PATH_MAX;
    w->relative = !o || !o->prefix;
    const char *prefix = w->relative ? "" : o->prefix;
    size_t pl = strlen(prefix);
    if (pl > w->path_max)
        return -ENAMETOOLONG;
    w->path = malloc(w->path_max + 1);
    w->lv = calloc(w->max_depth + 2, sizeof(*w->lv));
    if (!w->path || !w->lv)
        return -ENOMEM;
    memcpy(w->path, prefix, pl + 1);
    w->path_len = pl;
    for (size_t i = 0; i < w->max_depth + 2; i++)
        w->lv[i] = (struct level){.fd = -EBADF, .aux = -EBADF};
    return 0;
}

static void
walk_done(struct walk *w)
{
    free(w->path);
    free(w->lv);
}

int
tree_walk(int dirfd, int aux, const struct tree_opts *o, tree_fn fn, void *ud)
{
    struct walk w;
    int r = walk_init(&w, o, fn, ud);
    if (r < 0) {
        walk_done(&w);
        return r;
    }
    w.base = 1;
    /* A descriptor of our own to read with: dirfd's offset stays where it
     * is, and an O_PATH dirfd works too. */
    struct level *l = &w.lv[0];
    *l = (struct level){.fd = -EBADF, .aux = aux, .own_fd = true, .path_len = w.path_len};
    l->fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->fd < 0)
        r = -errno;
    else
        r = read_names(&w, l->fd, l);
    if (r < 0) {
        level_done(l);
        walk_done(&w);
        return r;
    }
    w.n = 1;
    r = run(&w);
    walk_done(&w);
    return r;
}

int
tree_walk_at(int dirfd, const char *name, int aux, const struct tree_opts *o, tree_fn fn, void *ud)
{
    struct walk w;
    int r = walk_init(&w, o, fn, ud);
    if (r < 0) {
        walk_done(&w);
        return r;
    }
    w.base = 0;
    /* The first level is a directory of one name, the caller's own. */
    struct level *l = &w.lv[0];
    *l = (struct level){.fd = dirfd, .aux = aux, .n = 1, .path_len = w.path_len};
    l->arena = strdup(name);
    l->v = malloc(sizeof(*l->v));
    if (!l->arena || !l->v) {
        level_done(l);
        walk_done(&w);
        return -ENOMEM;
    }
    l->v[0] = l->arena;
    w.n = 1;
    r = run(&w);
    walk_done(&w);
    return r;
}

/* --- copying --- */

struct copy_level {
    struct tree_make mk; /* what decide said for the directory */
    bool made;           /* made by us (else merged into) */
};

struct copy {
    const struct tree_copy_opts *o;
    const char *top_dname; /* tree_copy_at(): the first entry's name at the destination */
    dev_t dst_dev;         /* TREE_COPY_SYNC: the destination top's device */
    char *buf;             /* TREE_COPY_CHUNK bytes */
    uint64_t bytes;
    struct copy_level lv[TREE_DEPTH_MAX + 2]; /* by depth */
};

static const char *
dst_name(const struct copy *c, const struct tree_entry *e)
{
    return e->depth == 0 && c->top_dname ? c->top_dname : e->name;
}

static int
failed(struct copy *c, const struct tree_entry *e, enum tree_step step, int error)
{
    if (c->o->ops->failed)
        return c->o->ops->failed(c->o->ud, e, step, error);
    return -error;
}

/* failed(), for a step after which the entry cannot go on: TREE_SKIP when
 * the caller lets it go. */
static int
failed_skip(struct copy *c, const struct tree_entry *e, enum tree_step step, int error)
{
    int r = failed(c, e, step, error);
    return r < 0 ? r : TREE_SKIP;
}

static int
made(struct copy *c, const struct tree_entry *e, const struct tree_make *mk, const char *target)
{
    return c->o->ops->made ? c->o->ops->made(c->o->ud, e, mk, target) : 0;
}

/* Owner, then mode (chown clears set-id bits), then times of fd. */
static int
set_attrs(int fd, const struct tree_entry *e, const struct tree_make *mk)
{
    if (mk->uid != (uid_t)-1 && fchown(fd, mk->uid, mk->gid) < 0)
        return -errno;
    if (fchmod(fd, mk->mode & 07777) < 0)
        return -errno;
    if (mk->times) {
        const struct timespec ts[2] = {e->st.st_atim, e->st.st_mtim};
        if (futimens(fd, ts) < 0)
            return -errno;
    }
    return 0;
}

/* Readies the destination name for e: 0 to make it, TREE_SKIP to leave e
 * out, < 0 to stop. */
static int
prepare_dst(struct copy *c, const struct tree_entry *e, int ddir, const char *dname, bool dir)
{
    struct stat cur;

    if (c->o->mode == TREE_COPY_REPLACE) {
        if (dir || unlinkat(ddir, dname, 0) == 0 || errno == ENOENT)
            return 0; /* a directory is merged into (or its open fails) */
        return failed_skip(c, e, TREE_STEP_REPLACE, errno);
    }
    if (c->o->mode != TREE_COPY_SYNC || fstatat(ddir, dname, &cur, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(cur.st_mode) && cur.st_dev != c->dst_dev)
        return TREE_SKIP; /* a mount point at the destination: not ours */
    if (dir && S_ISDIR(cur.st_mode))
        return 0;
    int r = rm_rf_at(ddir, dname);
    return r < 0 ? failed_skip(c, e, TREE_STEP_REPLACE, -r) : 0;
}

/* TREE_COPY_SYNC: removes what the destination directory dd has and the
 * source directory src lacks, but for mount points. */
static int
sync_extras(struct copy *c, const struct tree_entry *dir, int src, int dd)
{
    char **names = NULL;
    size_t n = 0;
    struct tree_entry x = dir ? *dir : (struct tree_entry){.fd = -EBADF, .own_aux = -EBADF};
    int r = fd_dir_names(dd, TREE_NAMES_MAX, &names, &n);
    if (r < 0)
        return failed(c, &x, TREE_STEP_READ_DST, -r);
    for (size_t i = 0; i < n && r >= 0; i++) {
        struct stat st;
        if (fstatat(src, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        if (fstatat(dd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            st.st_dev != c->dst_dev)
            continue; /* a mount point */
        if ((r = rm_rf_at(dd, names[i])) < 0) {
            x = (struct tree_entry){
                    .dirfd = dd,
                    .aux = -EBADF,
                    .name = names[i],
                    .path = names[i],
                    .path_len = strlen(names[i]),
                    .depth = dir ? dir->depth + 1 : 1,
                    .st = st,
                    .fd = -EBADF,
                    .own_aux = -EBADF,
            };
            r = failed(c, &x, TREE_STEP_REMOVE, -r);
        }
    }
    fd_names_free(names, n);
    return r < 0 ? r : 0;
}

static int
copy_file(struct copy *c, const struct tree_entry *e, const struct tree_make *mk)
{
    struct stat st;
    uint64_t n = 0;
    int r;

    /* O_NONBLOCK: a fifo swapped in for the file must not hang us. */
    _cleanup_close_ int in =
            openat(e->dirfd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (in < 0)
        return failed(c, e, TREE_STEP_OPEN_FILE, errno);
    if (fstat(in, &st) < 0)
        return failed(c, e, TREE_STEP_OPEN_FILE, errno);
    if (!S_ISREG(st.st_mode) || st.st_dev != e->st.st_dev || st.st_ino != e->st.st_ino)
        return 0; /* swapped since we looked: not the file we decided on */
    if (c->o->mode == TREE_COPY_DRY)
        return made(c, e, mk, NULL);
    const char *dname = dst_name(c, e);
    if ((r = prepare_dst(c, e, e->aux, dname, false)) != 0)
        return r < 0 ? r : 0;
    _cleanup_close_ int out =
            openat(e->aux, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return failed(c, e, TREE_STEP_CREATE, errno);
    r = fd_copy_sparse(in, out, (uint64_t)e->st.st_size, c->buf, TREE_COPY_CHUNK, c->o->data_budget,
                       &n);
    if (r < 0)
        return failed(c, e, TREE_STEP_DATA, -r);
    c->bytes += n;
    if ((r = set_attrs(out, e, mk)) < 0)
        return failed(c, e, TREE_STEP_ATTRS, -r);
    return made(c, e, mk, NULL);
}

static int
copy_link(struct copy *c, const struct tree_entry *e, const struct tree_make *mk)
{
    char target[PATH_MAX];
    int r;

    ssize_t k = readlinkat(e->dirfd, e->name, target, sizeof(target) - 1);
    if (k < 0)
        return failed(c, e, TREE_STEP_READLINK, errno);
    target[k] = '\0';
    if (c->o->mode == TREE_COPY_DRY)
        return made(c, e, mk, target);
    const char *dname = dst_name(c, e);
    if ((r = prepare_dst(c, e, e->aux, dname, false)) != 0)
        return r < 0 ? r : 0;
    const struct timespec ts[2] = {e->st.st_atim, e->st.st_mtim};
    if (symlinkat(target, e->aux, dname) < 0 ||
        (mk->uid != (uid_t)-1 &&
         fchownat(e->aux, dname, mk->uid, mk->gid, AT_SYMLINK_NOFOLLOW) < 0) ||
        (mk->times && utimensat(e->aux, dname, ts, AT_SYMLINK_NOFOLLOW) < 0))
        return failed(c, e, TREE_STEP_LINK, errno);
    return made(c, e, mk, target);
}

static int
copy_fifo(struct copy *c, const struct tree_entry *e, const struct tree_make *mk)
{
    struct stat st;
    int r;

    if (c->o->mode == TREE_COPY_DRY)
        return made(c, e, mk, NULL);
    const char *dname = dst_name(c, e);
    if ((r = prepare_dst(c, e, e->aux, dname, false)) != 0)
        return r < 0 ? r : 0;
    if (mkfifoat(e->aux, dname, 0600) < 0)
        return failed(c, e, TREE_STEP_FIFO, errno);
    /* Its attributes through a descriptor, never by name: fchmodat() would
     * follow a symlink swapped in meanwhile. Opening a fifo for reading
     * without blocking needs no writer. */
    _cleanup_close_ int f =
            openat(e->aux, dname, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return failed(c, e, TREE_STEP_FIFO, errno);
    if (fstat(f, &st) < 0)
        return failed(c, e, TREE_STEP_FIFO, errno);
    if (!S_ISFIFO(st.st_mode))
        return failed(c, e, TREE_STEP_FIFO, EEXIST); /* swapped: not the one we made */
    if ((r = set_attrs(f, e, mk)) < 0)
        return failed(c, e, TREE_STEP_FIFO, -r);
    return made(c, e, mk, NULL);
}

/* TREE_ENTRY for a directory: decided on, to be entered. */
static int
enter_dir(struct copy *c, const struct tree_entry *e, const struct tree_make *mk)
{
    if (c->o->mode != TREE_COPY_DRY) {
        int r = prepare_dst(c, e, e->aux, dst_name(c, e), true);
        if (r != 0)
            return r < 0 ? r : 0;
    }
    c->lv[e->depth].mk = *mk;
    c->lv[e->depth].made = false;
    return TREE_ENTER;
}

/* TREE_DIR: makes (or merges into) the destination directory. */
static int
make_dir(struct copy *c, struct tree_entry *e)
{
    struct copy_level *l = &c->lv[e->depth];
    const char *dname = dst_name(c, e);
    int r;

    if (c->o->mode == TREE_COPY_DRY)
        return made(c, e, &l->mk, NULL);
    /* 0700 until what is in it is made: the directory's own mode may not
     * let us write into it. TREE_LEAVE gives it its attributes. */
    if (mkdirat(e->aux, dname, 0700) == 0)
        l->made = true;
    else if (errno != EEXIST || c->o->mode == TREE_COPY_NEW)
        return failed_skip(c, e, TREE_STEP_MKDIR, errno);
    int dd = openat(e->aux, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dd < 0)
        return failed_skip(c, e, TREE_STEP_OPEN_DST, errno);
    e->own_aux = dd; /* the walk closes it */
    if (c->o->mode == TREE_COPY_SYNC && (r = sync_extras(c, e, e->fd, dd)) < 0)
        return r;
    return made(c, e, &l->mk, NULL);
}

static int
copy_fn(void *ud, enum tree_event ev, struct tree_entry *e)
{
    struct copy *c = ud;
    int r;

    switch (ev) {
    case TREE_ERROR:
        return failed(c, e, e->step, e->error);
    case TREE_DIR:
        return make_dir(c, e);
    case TREE_LEAVE: {
        const struct copy_level *l = &c->lv[e->depth];
        if (c->o->mode == TREE_COPY_DRY || !(l->made || c->o->mode == TREE_COPY_SYNC))
            return 0;
        r = set_attrs(e->own_aux, e, &l->mk);
        return r < 0 ? failed(c, e, TREE_STEP_ATTRS, -r) : 0;
    }
    case TREE_ENTRY:
        break;
    }
    struct tree_make mk = {.uid = (uid_t)-1, .gid = (gid_t)-1, .mode = e->st.st_mode & 07777};
    r = c->o->ops->decide(c->o->ud, e, &mk);
    if (r != 0)
        return r < 0 ? r : 0;
    switch (e->st.st_mode & S_IFMT) {
    case S_IFREG:
        return copy_file(c, e, &mk);
    case S_IFLNK:
        return copy_link(c, e, &mk);
    case S_IFIFO:
        return copy_fifo(c, e, &mk);
    case S_IFDIR:
        return enter_dir(c, e, &mk);
    default:
        return -EOPNOTSUPP; /* sockets, devices: decide should have left them out */
    }
}

static int
copy_run(struct copy *c, int src, const char *sname, int dst, const char *dname, uint64_t *ret)
{
    int r;

    if (c->o->mode != TREE_COPY_DRY && !(c->buf = malloc(TREE_COPY_CHUNK)))
        return -ENOMEM;
    if (c->o->mode == TREE_COPY_SYNC) {
        struct stat st;
        if (fstat(dst, &st) < 0) {
            r = -errno;
            goto out;
        }
        c->dst_dev = st.st_dev;
    }
    if (sname) {
        c->top_dname = dname;
        r = tree_walk_at(src, sname, dst, &c->o->walk, copy_fn, c);
    } else {
        r = c->o->mode == TREE_COPY_SYNC ? sync_extras(c, NULL, src, dst) : 0;
        if (r == 0)
            r = tree_walk(src, dst, &c->o->walk, copy_fn, c);
    }
    if (r == 0 && ret)
        *ret = c->bytes;
out:
    free(c->buf);
    return r;
}

int
tree_copy(int src, int dst, const struct tree_copy_opts *o, uint64_t *ret_bytes)
{
    _cleanup_free_ struct copy *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->o = o;
    return copy_run(c, src, NULL, dst, NULL, ret_bytes);
}

int
tree_copy_at(int sdir, const char *sname, int ddir, const char *dname,
             const struct tree_copy_opts *o, uint64_t *ret_bytes)
{
    _cleanup_free_ struct copy *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->o = o;
    return copy_run(c, sdir, sname, ddir, dname, ret_bytes);
}
